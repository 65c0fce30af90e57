//! [`CredentialIndex`]: the credential files of a session's workspace, kept current without a
//! walk per command.
//!
//! A command Keel allows without asking runs with these files masked
//! ([`super::Profile::masked`]). The first command that needs the list walks the workspace once
//! (every directory, ignored ones included: a `.env` is usually git-ignored) and puts an
//! inotify watch on each directory; from then on each request only drains the events queued
//! since the last one (one non-blocking `read`) and looks again at the names they carry. Events
//! are queued by the kernel when a change completes, so a file an earlier command wrote is in
//! the list before the next command starts.
//!
//! What a credential is comes from the policy ([`Classify`]): the same rules the `read` tool
//! asks on (names, directories, a repository configuration that holds a token). The index adds
//! hard-linked files whose other names are not all inside the roots (a link to `~/.ssh/id_rsa`
//! made in the workspace); a build directory's links between its own files stay visible. (A
//! name made outside for a file of the workspace is not seen, and needs not be: the content
//! behind the workspace's name is the workspace's.) When inotify cannot cover the workspace (the watch limit, a queue overflow), the
//! index walks again: slower, never stale.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

use super::guard::{GuardCache, GuardLedger, GuardRules, Guarded};

/// Whether the entry at `path` (not followed: its own metadata) is a credential: masked as a
/// whole when it is a directory.
pub type Classify = Arc<dyn Fn(&Path, &std::fs::Metadata) -> bool + Send + Sync>;

/// The most directories the index watches; a larger workspace is walked per request instead.
const MAX_WATCHED_DIRS: usize = 200_000;

/// The credential files and directories below a set of roots, and the entries the sandbox's
/// guard watches ([`super::guard`]): one walk, one set of inotify watches, for both.
pub struct CredentialIndex {
    roots: Vec<PathBuf>,
    classify: Classify,
    guard: Option<GuardRules>,
    state: Mutex<Option<State>>,
    /// The copies of guarded files the guard keeps for the session.
    pub guard_cache: GuardCache,
}

impl std::fmt::Debug for CredentialIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialIndex")
            .field("roots", &self.roots)
            .finish_non_exhaustive()
    }
}

struct State {
    /// `None`: inotify could not cover the roots; every request walks.
    inotify: Option<Inotify>,
    dirs: HashMap<WatchDescriptor, PathBuf>,
    found: BTreeSet<PathBuf>,
    /// The entries [`GuardRules::classify`] names.
    guarded: BTreeMap<PathBuf, Guarded>,
    /// Regular files with several links, by `(device, inode)`: the link count last seen and
    /// the names found inside the roots.
    linked: HashMap<(u64, u64), (u64, BTreeSet<PathBuf>)>,
}

const WATCHED: AddWatchFlags = AddWatchFlags::IN_CREATE
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_ATTRIB)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_ONLYDIR)
    .union(AddWatchFlags::IN_DONT_FOLLOW);

impl CredentialIndex {
    /// An index of `roots` (canonical); nothing is read before the first [`Self::current`].
    pub fn new(roots: Vec<PathBuf>, classify: Classify) -> Self {
        Self {
            roots,
            classify,
            guard: None,
            state: Mutex::new(None),
            guard_cache: GuardCache::default(),
        }
    }

    /// The same index, also listing the entries `rules` guard.
    pub fn with_guard(mut self, rules: Option<GuardRules>) -> Self {
        self.guard = rules;
        self
    }

    /// Keel itself wrote or removed `path` (a file tool): the guard's process-wide "before"
    /// takes it and every guarded directory above it as they are now
    /// ([`super::guard::GuardLedger::keel_wrote`]).
    pub fn keel_wrote(&self, path: &Path) {
        let Some(root) = self.roots.iter().find(|root| path.starts_with(root)) else {
            return;
        };
        for entry in path
            .ancestors()
            .take_while(|entry| *entry != root.as_path())
        {
            let class = self.guard.as_ref().and_then(|rules| {
                entry
                    .strip_prefix(root)
                    .ok()
                    .and_then(|relative| (rules.classify)(relative))
            });
            GuardLedger::global().keel_wrote(entry, class, &self.guard_cache);
        }
    }

    /// The guard's rules, when the index lists guarded entries.
    pub fn guard_rules(&self) -> Option<&GuardRules> {
        self.guard.as_ref()
    }

    /// The credential files and directories now, sorted.
    pub fn current(&self) -> Vec<PathBuf> {
        self.with_state(|state| {
            let mut found = state.found.clone();
            for (links, names) in state.linked.values() {
                if (names.len() as u64) < *links {
                    found.extend(names.iter().cloned());
                }
            }
            found.into_iter().collect()
        })
    }

    /// The guarded entries now, sorted by path (empty without guard rules).
    pub fn guarded(&self) -> Vec<(PathBuf, Guarded)> {
        if self.guard.is_none() {
            return Vec::new();
        }
        self.with_state(|state| {
            state
                .guarded
                .iter()
                .map(|(path, class)| (path.clone(), *class))
                .collect()
        })
    }

    /// [`Self::guarded`], but `None` instead of a walk when inotify cannot cover the roots (a
    /// walk per command is what the guard must not cost; it then looks at less).
    pub fn guarded_if_watched(&self) -> Option<Vec<(PathBuf, Guarded)>> {
        {
            let lock = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if lock.as_ref().is_some_and(|state| state.inotify.is_none()) {
                return None;
            }
        }
        let listed = self.with_state(|state| state.inotify.is_some());
        listed.then(|| self.guarded())
    }

    /// `read` of the state brought up to date: the queued events applied, or a new walk.
    fn with_state<R>(&self, read: impl FnOnce(&State) -> R) -> R {
        let mut lock = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let rules = Rules {
            roots: &self.roots,
            classify: &*self.classify,
            guard: self.guard.as_ref().map(|rules| &*rules.classify),
        };
        let state = match lock.take() {
            // Watched: only what changed since the last request.
            Some(mut state) if state.inotify.is_some() => {
                if state.drain(&rules) {
                    state
                } else {
                    State::build(&rules)
                }
            }
            _ => State::build(&rules),
        };
        let result = read(&state);
        *lock = Some(state);
        result
    }
}

/// [`GuardRules::classify`] as the walk calls it.
type GuardFn = dyn Fn(&Path) -> Option<Guarded> + Send + Sync;

/// What the walk looks for.
struct Rules<'a> {
    roots: &'a [PathBuf],
    classify: &'a (dyn Fn(&Path, &std::fs::Metadata) -> bool + Send + Sync),
    guard: Option<&'a GuardFn>,
}

impl State {
    fn build(rules: &Rules<'_>) -> Self {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .inspect_err(|error| tracing::warn!(%error, "inotify unavailable; credential files are found by a walk per command"))
            .ok();
        let mut state = State {
            inotify,
            dirs: HashMap::new(),
            found: BTreeSet::new(),
            guarded: BTreeMap::new(),
            linked: HashMap::new(),
        };
        for root in rules.roots {
            state.walk(root, rules);
        }
        state
    }

    /// Finds the credentials at and below `path` and watches its directories.
    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    fn walk(&mut self, path: &Path, rules: &Rules<'_>) {
        let mut todo = vec![path.to_path_buf()];
        while let Some(path) = todo.pop() {
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if let Some(guard) = rules.guard
                && let Some(relative) = rules
                    .roots
                    .iter()
                    .find_map(|root| path.strip_prefix(root).ok())
                && !relative.as_os_str().is_empty()
                && let Some(class) = guard(relative)
            {
                self.guarded.insert(path.clone(), class);
            }
            if (rules.classify)(&path, &meta) {
                self.found.insert(path);
                continue;
            }
            if !meta.is_dir() {
                use std::os::unix::fs::MetadataExt as _;
                if meta.is_file() && meta.nlink() > 1 {
                    let entry = self
                        .linked
                        .entry((meta.dev(), meta.ino()))
                        .or_insert_with(|| (meta.nlink(), BTreeSet::new()));
                    entry.0 = meta.nlink();
                    entry.1.insert(path);
                }
                continue;
            }
            self.watch(&path);
            let Ok(entries) = std::fs::read_dir(&path) else {
                continue;
            };
            for entry in entries.flatten() {
                todo.push(entry.path());
            }
        }
    }

    fn watch(&mut self, dir: &Path) {
        let Some(inotify) = &self.inotify else {
            return;
        };
        if self.dirs.len() >= MAX_WATCHED_DIRS {
            tracing::warn!(
                limit = MAX_WATCHED_DIRS,
                "the workspace has too many directories to watch; credential files are found by a walk per command"
            );
            self.inotify = None;
            return;
        }
        match inotify.add_watch(dir, WATCHED) {
            Ok(wd) => {
                self.dirs.insert(wd, dir.to_path_buf());
            }
            Err(error) => {
                tracing::warn!(%error, dir = %dir.display(), "cannot watch a directory; credential files are found by a walk per command");
                self.inotify = None;
            }
        }
    }

    /// Applies the queued events. `false`: the queue overflowed, so the index must be rebuilt.
    fn drain(&mut self, rules: &Rules<'_>) -> bool {
        loop {
            let Some(inotify) = &self.inotify else {
                return true;
            };
            let events = match inotify.read_events() {
                Ok(events) => events,
                Err(Errno::EAGAIN) => return true,
                Err(error) => {
                    tracing::warn!(%error, "reading inotify events");
                    return false;
                }
            };
            let mut changed: Vec<PathBuf> = Vec::new();
            for event in events {
                if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    return false;
                }
                if event.mask.contains(AddWatchFlags::IN_IGNORED) {
                    self.dirs.remove(&event.wd);
                    continue;
                }
                let (Some(dir), Some(name)) = (self.dirs.get(&event.wd), &event.name) else {
                    continue;
                };
                changed.push(dir.join(name));
            }
            changed.sort();
            changed.dedup();
            for path in changed {
                self.forget(&path);
                self.walk(&path, rules);
            }
        }
    }

    /// Drops what is known at and below `path` (it changed, moved or went away).
    fn forget(&mut self, path: &Path) {
        self.found.retain(|found| !found.starts_with(path));
        self.guarded.retain(|guarded, _| !guarded.starts_with(path));
        self.linked.retain(|_, (_, names)| {
            names.retain(|name| !name.starts_with(path));
            !names.is_empty()
        });
        let gone: Vec<WatchDescriptor> = self
            .dirs
            .iter()
            .filter(|(_, dir)| dir.starts_with(path))
            .map(|(wd, _)| *wd)
            .collect();
        for wd in gone {
            self.dirs.remove(&wd);
            if let Some(inotify) = &self.inotify {
                let _ = inotify.rm_watch(wd);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[expect(clippy::disallowed_methods, reason = "the test seeds files on disk")]
    fn touch(path: &Path) {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap_or_default();
        }
        std::fs::write(path, "x").unwrap_or_default();
    }

    fn env_files() -> Classify {
        Arc::new(|path: &Path, meta: &std::fs::Metadata| {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let _ = meta;
            name == ".env" || name == ".ssh"
        })
    }

    #[test]
    #[expect(clippy::disallowed_methods, reason = "the test changes files on disk")]
    fn follows_changes_without_walking_again() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = std::fs::canonicalize(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        touch(&root.join("a/.env"));
        touch(&root.join("a/b/plain.txt"));
        touch(&outside.path().join("secret"));
        // Two names of one file, both inside: an ordinary build output, not masked.
        std::fs::hard_link(root.join("a/b/plain.txt"), root.join("a/b/copy.txt"))
            .unwrap_or_else(|e| panic!("{e}"));
        let index = CredentialIndex::new(vec![root.clone()], env_files());
        assert_eq!(index.current(), vec![root.join("a/.env")]);

        // Created, in a new directory, after the first walk.
        touch(&root.join("c/d/.env"));
        // A directory that is a credential as a whole.
        std::fs::create_dir_all(root.join("a/.ssh")).unwrap_or_default();
        // A name for a file outside the roots.
        std::fs::hard_link(outside.path().join("secret"), root.join("linked"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            index.current(),
            vec![
                root.join("a/.env"),
                root.join("a/.ssh"),
                root.join("c/d/.env"),
                root.join("linked"),
            ]
        );

        // Renamed away and removed.
        std::fs::rename(root.join("c"), root.join("moved")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::remove_file(root.join("a/.env")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::remove_file(root.join("linked")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            index.current(),
            vec![root.join("a/.ssh"), root.join("moved/d/.env")]
        );
    }
}
