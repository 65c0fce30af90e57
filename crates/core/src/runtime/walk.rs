//! The search walk of `grep` and `glob`: directory descriptors all the way down.
//!
//! [`Runtime::walk_files`](super::Runtime::walk_files) opens the search's base once (through
//! [`fsat`]: no symlink on the checked path), then every directory below it with
//! `openat(parent, name, O_DIRECTORY | O_NOFOLLOW)` and every file with `openat(parent, name,
//! O_NOFOLLOW)`: never a path resolved again from the root, so a symlink swapped in anywhere
//! below the base makes that open fail (`ELOOP`/`ENOTDIR`); it is never followed. The type of
//! an entry comes from the directory listing (`d_type`; a `fstatat` only on file systems that
//! leave it unknown), the type and link count of a file from one `fstat` of the descriptor the
//! search reads. Per file that is one open and one stat, as ripgrep makes.
//!
//! What is walked is what [`ignore`]'s walker (ripgrep's) walked with the settings Keel used:
//! `.gitignore`, `.ignore` and `.git/info/exclude` in each directory and in the base's parents,
//! hidden names skipped unless a rule re-includes them, the call's glob overrides and file
//! types first, symlinks never followed nor listed. Inside a git repository, ignore files above
//! the repository's root (and, below the base, a nested repository's parents' `.gitignore`s) do
//! not apply; outside any repository `.gitignore` files apply all the same. The ignore files of
//! a directory are read only when its listing names them.
//!
//! The walk runs on one thread per core (at most 12, as ripgrep), sharing a stack of
//! directories still to read; a directory's descriptor stays open while its subdirectories
//! wait, so at most about one descriptor per level of depth per thread is open.

use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::io::{self, Read as _};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::overrides::Override;
use ignore::types::Types;
use nix::dir::{Dir, Type};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fstatat};

use super::fsat;
use super::tally::{self, Event};

/// The call's own filters: ripgrep's `--glob` overrides and `--type` selection.
#[derive(Debug, Default, Clone)]
pub struct Filters {
    pub overrides: Option<Override>,
    pub types: Option<Types>,
}

/// What the visitor tells the walk after a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// Stop the whole walk (cancelled, or enough collected).
    Quit,
}

/// What a walk could not read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WalkErrors {
    /// Directories that could not be opened or listed (permissions, or one swapped for a
    /// symlink while the walk ran).
    pub unreadable_dirs: usize,
}

/// A regular file the walk found (by its directory listing; [`FoundFile::open`] checks it).
#[derive(Debug)]
pub struct FoundFile<'a> {
    dir: BorrowedFd<'a>,
    name: &'a CStr,
    path: &'a Path,
    /// The base of the walk itself (a call naming one file).
    is_base: bool,
}

/// A file opened by [`FoundFile::open`], with what its one `fstat` said.
#[derive(Debug)]
pub struct OpenedFile {
    pub file: File,
    /// A regular file (not a FIFO, device or directory swapped in after the listing).
    pub regular: bool,
    pub links: u64,
    /// The size the `fstat` saw.
    pub len: u64,
}

impl FoundFile<'_> {
    /// The canonical path of the file: the base's, then the names the walk went through.
    pub fn path(&self) -> &Path {
        self.path
    }

    /// Whether this is the path the call named (a search of one file).
    pub fn is_base(&self) -> bool {
        self.is_base
    }

    /// Opens the file for reading relative to its directory's descriptor, not following a
    /// symlink swapped in for it (`O_NOFOLLOW`), and `fstat`s the descriptor: one open and one
    /// stat. `O_NONBLOCK` keeps a FIFO swapped in from blocking the open (regular files ignore
    /// the flag, so the descriptor reads as usual).
    pub fn open(&self) -> io::Result<OpenedFile> {
        tally::count(Event::Open);
        let fd = openat(
            self.dir,
            self.name,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
            Mode::empty(),
        )?;
        let file = File::from(fd);
        tally::count(Event::Stat);
        let meta = file.metadata()?;
        Ok(OpenedFile {
            regular: meta.is_file(),
            links: std::os::unix::fs::MetadataExt::nlink(&meta),
            len: meta.len(),
            file,
        })
    }
}

/// Walks the canonical directory (or file) `base`, calling a visitor for each regular file the
/// ignore rules and `filters` keep. `visitor` builds one visitor per thread. The base must
/// have passed the scope check; the visitor checks each file it is given.
pub(super) fn walk<F, V>(base: &Path, filters: &Filters, visitor: F) -> io::Result<WalkErrors>
where
    F: Fn() -> V + Sync,
    V: FnMut(&FoundFile<'_>) -> Flow,
{
    let (Some(parent), Some(name)) = (base.parent(), base.file_name()) else {
        // The root directory itself: walked like any other, without parents.
        let fd = fsat::open(base, OFlag::O_RDONLY | OFlag::O_DIRECTORY)?;
        let (rules, track_git) = Rules::parents(base);
        return Ok(run(
            Job::opened(fd, base.to_path_buf(), rules),
            filters,
            track_git,
            &visitor,
        ));
    };
    let parent_fd = fsat::open(parent, OFlag::O_RDONLY | OFlag::O_DIRECTORY)?;
    let name = std::ffi::CString::new(name.as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    tally::count(Event::Open);
    let fd = match openat(
        &parent_fd,
        name.as_c_str(),
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::ENOTDIR) => {
            // One file: searched as the call named it, no filter applied.
            let mut visit = visitor();
            visit(&FoundFile {
                dir: parent_fd.as_fd(),
                name: name.as_c_str(),
                path: base,
                is_base: true,
            });
            return Ok(WalkErrors::default());
        }
        Err(e) => return Err(e.into()),
    };
    let (rules, track_git) = Rules::parents(base);
    Ok(run(
        Job::opened(fd, base.to_path_buf(), rules),
        filters,
        track_git,
        &visitor,
    ))
}

/// The ignore rules of one directory, linked to its parent's.
#[derive(Debug)]
struct Rules {
    /// `.ignore`, `.gitignore`, `.git/info/exclude`: empty when the directory has none.
    ignore: Gitignore,
    git_ignore: Gitignore,
    git_exclude: Gitignore,
    /// The directory holds a repository (`.git`), counted only when the base lies in one.
    has_git: bool,
    parent: Option<Arc<Rules>>,
}

impl Rules {
    fn empty() -> Arc<Self> {
        Arc::new(Self {
            ignore: Gitignore::empty(),
            git_ignore: Gitignore::empty(),
            git_exclude: Gitignore::empty(),
            has_git: false,
            parent: None,
        })
    }

    /// The rules of the parents of a walk's base (`/` down to the base's parent directory:
    /// their ignore files, read by path since they lie outside the walk), and whether the base
    /// lies in a git repository (it or a parent holds `.git`).
    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    fn parents(base: &Path) -> (Arc<Self>, bool) {
        let mut dirs: Vec<(&Path, Option<std::fs::Metadata>)> = base
            .ancestors()
            .map(|dir| {
                tally::count(Event::Stat);
                (dir, std::fs::metadata(dir.join(".git")).ok())
            })
            .collect();
        let track_git = dirs.iter().any(|(_, git)| git.is_some());
        // The base's own rules come from its listing.
        dirs.remove(0);
        dirs.reverse();
        let mut rules = Self::empty();
        for (dir, git) in dirs {
            let read = |name: &str| read_outside(&dir.join(name));
            let exclude = git.as_ref().and_then(|meta| {
                let common = git_common_dir(dir, meta.is_file())?;
                read_outside(&common.join("info/exclude"))
            });
            rules = Self::child_of(
                &rules,
                dir,
                read(".ignore"),
                read(".gitignore"),
                exclude,
                track_git && git.is_some(),
            );
        }
        (rules, track_git)
    }

    /// The rules of `dir` below `parent`: `parent` itself when `dir` adds nothing.
    fn child_of(
        parent: &Arc<Self>,
        dir: &Path,
        ignore: Option<Vec<u8>>,
        git_ignore: Option<Vec<u8>>,
        git_exclude: Option<Vec<u8>>,
        has_git: bool,
    ) -> Arc<Self> {
        if ignore.is_none() && git_ignore.is_none() && git_exclude.is_none() && !has_git {
            return parent.clone();
        }
        Arc::new(Self {
            ignore: compile(dir, ignore, ".ignore"),
            git_ignore: compile(dir, git_ignore, ".gitignore"),
            git_exclude: compile(dir, git_exclude, ".git/info/exclude"),
            has_git,
            parent: Some(parent.clone()),
        })
    }

    /// ripgrep's verdict of the ignore files on `path`: the nearest directory's rule wins,
    /// `.ignore` over `.gitignore` over `.git/info/exclude`; git's files stop applying past
    /// the directory holding the repository.
    fn matched(self: &Arc<Self>, path: &Path, is_dir: bool) -> Match<()> {
        let (mut ignore, mut git_ignore, mut git_exclude) = (Match::None, Match::None, Match::None);
        let mut saw_git = false;
        let mut layer = Some(self);
        while let Some(rules) = layer {
            if ignore.is_none() {
                ignore = rules.ignore.matched(path, is_dir).map(|_| ());
            }
            if !saw_git && git_ignore.is_none() {
                git_ignore = rules.git_ignore.matched(path, is_dir).map(|_| ());
            }
            if !saw_git && git_exclude.is_none() {
                git_exclude = rules.git_exclude.matched(path, is_dir).map(|_| ());
            }
            saw_git = saw_git || rules.has_git;
            layer = rules.parent.as_ref();
        }
        ignore.or(git_ignore).or(git_exclude)
    }
}

/// A gitignore matcher for `dir` from a file's bytes, as ripgrep reads it: line by line up to
/// a line that is not UTF-8, a leading BOM dropped, lines that do not parse skipped.
fn compile(dir: &Path, bytes: Option<Vec<u8>>, name: &str) -> Gitignore {
    let Some(bytes) = bytes else {
        return Gitignore::empty();
    };
    let mut builder = GitignoreBuilder::new(dir);
    let from = dir.join(name);
    for (index, line) in bytes.split(|b| *b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Ok(line) = std::str::from_utf8(line) else {
            break;
        };
        let line = if index == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        let _ = builder.add_line(Some(from.clone()), line);
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

/// The directory holding a repository's `info/exclude`: `dir/.git`, or for a worktree (a
/// `.git` file) the common directory its `gitdir` names.
fn git_common_dir(dir: &Path, dot_git_is_file: bool) -> Option<PathBuf> {
    let dot_git = dir.join(".git");
    if !dot_git_is_file {
        return Some(dot_git);
    }
    let text = String::from_utf8(read_outside(&dot_git)?).ok()?;
    let git_dir = PathBuf::from(text.lines().next()?.strip_prefix("gitdir: ")?);
    let common = String::from_utf8(read_outside(&git_dir.join("commondir"))?).ok()?;
    let common = common.lines().next()?;
    Some(if common.starts_with('.') {
        git_dir.join(common)
    } else {
        PathBuf::from(common)
    })
}

/// The walk's verdict on an entry below the base: ripgrep's order (the call's globs decide
/// first, then the ignore files, then the file type; a hidden name is skipped unless one of
/// them re-included it).
fn skipped(filters: &Filters, rules: &Arc<Rules>, path: &Path, name: &[u8], is_dir: bool) -> bool {
    if let Some(overrides) = &filters.overrides {
        match overrides.matched(path, is_dir) {
            Match::Ignore(_) => return true,
            Match::Whitelist(_) => return false,
            Match::None => {}
        }
    }
    let mut whitelisted = false;
    match rules.matched(path, is_dir) {
        Match::Ignore(()) => return true,
        Match::Whitelist(()) => whitelisted = true,
        Match::None => {}
    }
    if let Some(types) = &filters.types {
        match types.matched(path, is_dir) {
            Match::Ignore(_) => return true,
            Match::Whitelist(_) => whitelisted = true,
            Match::None => {}
        }
    }
    !whitelisted && name.starts_with(b".")
}

/// A directory to read: opened relative to its parent's descriptor when its turn comes.
struct Job {
    /// The parent's open directory, or the directory itself (the base).
    from: Arc<OwnedFd>,
    /// The name in `from`, or `None` when `from` is the directory.
    name: Option<std::ffi::CString>,
    path: PathBuf,
    /// The rules of the parent (the directory's own are added when it is read).
    rules: Arc<Rules>,
}

impl Job {
    fn opened(fd: OwnedFd, path: PathBuf, parents: Arc<Rules>) -> Self {
        Self {
            from: Arc::new(fd),
            name: None,
            path,
            rules: parents,
        }
    }
}

/// The directories still to read, shared by the walk's threads.
struct Queue {
    jobs: Mutex<(Vec<Job>, usize)>,
    ready: Condvar,
    quit: AtomicBool,
    unreadable: AtomicUsize,
}

impl Queue {
    /// The next directory, waiting while other threads may still add some; `None` when the
    /// walk is over.
    fn next(&self) -> Option<Job> {
        let mut state = self
            .jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            if self.quit.load(Ordering::Relaxed) {
                return None;
            }
            if let Some(job) = state.0.pop() {
                state.1 += 1;
                return Some(job);
            }
            if state.1 == 0 {
                return None;
            }
            state = self
                .ready
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    fn push(&self, jobs: Vec<Job>) {
        let mut state = self
            .jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.0.extend(jobs);
        self.ready.notify_all();
    }

    /// A thread finished a directory.
    fn done(&self) {
        let mut state = self
            .jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.1 -= 1;
        if state.1 == 0 && state.0.is_empty() {
            self.ready.notify_all();
        }
    }

    fn stop(&self) {
        self.quit.store(true, Ordering::Relaxed);
        let _guard = self
            .jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.ready.notify_all();
    }
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(12))
}

/// What every thread of one walk shares.
struct Walk<'a> {
    filters: &'a Filters,
    /// Whether the base lies in a git repository (repositories bound git's ignore files).
    track_git: bool,
    queue: Queue,
}

fn run<F, V>(root: Job, filters: &Filters, track_git: bool, visitor: &F) -> WalkErrors
where
    F: Fn() -> V + Sync,
    V: FnMut(&FoundFile<'_>) -> Flow,
{
    let walk = Walk {
        filters,
        track_git,
        queue: Queue {
            jobs: Mutex::new((vec![root], 0)),
            ready: Condvar::new(),
            quit: AtomicBool::new(false),
            unreadable: AtomicUsize::new(0),
        },
    };
    let probe = tally::current();
    std::thread::scope(|scope| {
        for _ in 0..threads() {
            let walk = &walk;
            let probe = probe.clone();
            scope.spawn(move || {
                tally::within(probe, || {
                    let mut visit = visitor();
                    while let Some(job) = walk.queue.next() {
                        let flow = walk.read_dir(job, &mut visit);
                        walk.queue.done();
                        if flow == Flow::Quit {
                            walk.queue.stop();
                        }
                    }
                });
            });
        }
    });
    WalkErrors {
        unreadable_dirs: walk.queue.unreadable.into_inner(),
    }
}

/// One listed entry of a directory.
struct Entry {
    name: std::ffi::CString,
    kind: Option<Type>,
}

impl Walk<'_> {
    /// Reads one directory: its ignore files, its files (visited) and its subdirectories
    /// (queued).
    fn read_dir<V>(&self, job: Job, visit: &mut V) -> Flow
    where
        V: FnMut(&FoundFile<'_>) -> Flow,
    {
        let Some((dir, entries)) = list(&job) else {
            self.queue.unreadable.fetch_add(1, Ordering::Relaxed);
            return Flow::Continue;
        };
        drop(job.from);
        let rules = self.own_rules(&dir, &job.path, &job.rules, &entries);
        let dir = Arc::new(dir);
        // Subdirectories go to the other threads first, then this thread visits the files.
        let mut subdirs = Vec::new();
        let mut files = Vec::new();
        for entry in &entries {
            let bytes = entry.name.to_bytes();
            let path = job.path.join(OsStr::from_bytes(bytes));
            let kind = match entry.kind {
                Some(kind) => kind,
                None => {
                    tally::count(Event::Stat);
                    match fstatat(&*dir, entry.name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                        Ok(stat) => match SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT {
                            SFlag::S_IFDIR => Type::Directory,
                            SFlag::S_IFREG => Type::File,
                            _ => continue,
                        },
                        Err(_) => continue,
                    }
                }
            };
            match kind {
                Type::Directory if !skipped(self.filters, &rules, &path, bytes, true) => {
                    subdirs.push(Job {
                        from: dir.clone(),
                        name: Some(entry.name.clone()),
                        path,
                        rules: rules.clone(),
                    });
                }
                Type::File if !skipped(self.filters, &rules, &path, bytes, false) => {
                    files.push((entry, path));
                }
                // Symlinks are never followed nor listed; FIFOs, sockets and devices never
                // read.
                _ => {}
            }
        }
        if !subdirs.is_empty() {
            // Reversed, so the stack hands them out in listing order.
            subdirs.reverse();
            self.queue.push(subdirs);
        }
        for (entry, path) in files {
            let found = FoundFile {
                dir: dir.as_fd(),
                name: entry.name.as_c_str(),
                path: &path,
                is_base: false,
            };
            if visit(&found) == Flow::Quit {
                return Flow::Quit;
            }
        }
        Flow::Continue
    }

    /// The rules of a directory being read: its parent's, plus its own ignore files when its
    /// listing names them (each read relative to the directory's descriptor, no symlink
    /// followed).
    fn own_rules(
        &self,
        dir: &OwnedFd,
        path: &Path,
        parent: &Arc<Rules>,
        entries: &[Entry],
    ) -> Arc<Rules> {
        let named = |wanted: &[u8]| entries.iter().find(|entry| entry.name.to_bytes() == wanted);
        let ignore = named(b".ignore").and_then(|entry| read_at(dir, &entry.name));
        let git_ignore = named(b".gitignore").and_then(|entry| read_at(dir, &entry.name));
        let dot_git = named(b".git");
        let git_exclude = dot_git.and_then(|entry| match entry.kind {
            Some(Type::Directory) => {
                let git = open_dir_at(dir, c".git")?;
                let info = open_dir_at(&git, c"info")?;
                read_at(&info, c"exclude")
            }
            Some(Type::File) => {
                let common = git_common_dir(path, true)?;
                read_outside(&common.join("info/exclude"))
            }
            _ => None,
        });
        Rules::child_of(
            parent,
            path,
            ignore,
            git_ignore,
            git_exclude,
            self.track_git && dot_git.is_some(),
        )
    }
}

/// Opens a job's directory and lists it.
fn list(job: &Job) -> Option<(OwnedFd, Vec<Entry>)> {
    let fd = match &job.name {
        None => job.from.try_clone().ok()?,
        Some(name) => open_dir_at(&job.from, name)?,
    };
    // The listing reads through a second descriptor of the directory (`Dir` owns and closes
    // it; `fdopendir` checks it with an `fstat`); the first stays for opening entries relative
    // to it.
    tally::count(Event::Stat);
    let mut entries = Vec::new();
    for entry in Dir::from_fd(fd.try_clone().ok()?).ok()? {
        let entry = entry.ok()?;
        let name = entry.file_name();
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        entries.push(Entry {
            name: name.to_owned(),
            kind: entry.file_type(),
        });
    }
    Some((fd, entries))
}

/// Opens the subdirectory `name` of `dir`, refusing a symlink.
fn open_dir_at(dir: &OwnedFd, name: &CStr) -> Option<OwnedFd> {
    tally::count(Event::Open);
    openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok()
}

/// The first MiB of the file `name` in `dir` (an ignore file), not following a symlink; a
/// directory or FIFO by that name reads as nothing.
fn read_at(dir: &OwnedFd, name: &CStr) -> Option<Vec<u8>> {
    tally::count(Event::Open);
    let fd = openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
        Mode::empty(),
    )
    .ok()?;
    let mut bytes = Vec::new();
    File::from(fd).take(1 << 20).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The first MiB of a file outside the walk, read by path (the ignore files of the base's
/// parents, a worktree's `.git` file and its repository's `commondir` and `info/exclude`).
/// Opened without waiting (`O_NONBLOCK`): a FIFO by one of those names reads as empty at once
/// instead of blocking the walk until a writer comes.
fn read_outside(path: &Path) -> Option<Vec<u8>> {
    tally::count(Event::Open);
    let fd = nix::fcntl::open(
        path,
        OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let mut bytes = Vec::new();
    File::from(fd).take(1 << 20).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}
