//! Race-free file operations on canonical paths.
//!
//! The runtime checks a *canonical* path (symlinks followed, `..` applied) against the scope,
//! then acts on it. Between the check and the act, something else (a build script, a second
//! process the model started) could swap a directory on that path for a symlink to the outside.
//! Every operation here therefore walks the checked path again, from a descriptor of `/`,
//! refusing any symlink on the way:
//!
//! - with `openat2(2)` and `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`
//!   (Linux 5.6+), in one call;
//! - where `openat2` is missing (an older kernel, or a seccomp filter answering `ENOSYS` or
//!   `EPERM`), component by component with `openat(O_NOFOLLOW)`, each directory verified by
//!   `fstat` before the next step.
//!
//! A canonical path has no symlink and no `..`, so the object reached is exactly the one at the
//! checked path; a symlink swapped in makes the call fail (`ELOOP`), it never redirects it.
//! Writes create a temporary file inside the already-open parent directory (`O_CREAT | O_EXCL
//! | O_NOFOLLOW`), write, keep the old file's mode (and owner, when allowed), fsync, and
//! `renameat` it over the name within that same descriptor. A write therefore replaces a hard
//! link with a new file rather than writing through it.
//!
//! The file is synced before the rename, so after a crash the name holds the old content or
//! the new, never an empty or torn file. The directory is not synced after it: the rename
//! reaches the disk with the file system's next commit (ext4: within 5 s), as an editor's
//! save does, instead of a second disk flush in every edit (2–18 ms each on a busy disk,
//! decision 0020).

use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::io::{self, Write as _};
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat, openat2, renameat};
use nix::sys::stat::{Mode, fchmod, mkdirat};
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchown, unlinkat};

/// Set once `openat2` turned out to be unavailable, so later calls walk at once.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);
/// Makes temporary names unique within the process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Whether `openat2` is in use (false after the first `ENOSYS`/`EPERM`).
pub fn openat2_available() -> bool {
    !NO_OPENAT2.load(Ordering::Relaxed)
}

/// The normal components of a canonical path (absolute, no `..`, no `.`).
fn components(canonical: &Path) -> io::Result<Vec<&OsStr>> {
    if !canonical.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "path must be absolute",
        ));
    }
    let mut out = Vec::new();
    for component in canonical.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(name) => out.push(name),
            Component::CurDir | Component::ParentDir | Component::Prefix(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not canonical", canonical.display()),
                ));
            }
        }
    }
    Ok(out)
}

fn root() -> io::Result<OwnedFd> {
    super::tally::count(super::tally::Event::Open);
    Ok(nix::fcntl::open(
        "/",
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?)
}

/// The `fstat` of a descriptor, as std's metadata.
fn stat(fd: &OwnedFd) -> io::Result<Metadata> {
    super::tally::count(super::tally::Event::Stat);
    let file = File::from(fd.try_clone()?);
    file.metadata()
}

/// Opens `canonical` with `flags` (plus `O_NOFOLLOW | O_CLOEXEC`), refusing any symlink on the
/// whole path. The final object is not `fstat`-checked here; callers check its type.
pub fn open(canonical: &Path, flags: OFlag) -> io::Result<OwnedFd> {
    let parts = components(canonical)?;
    let root = root()?;
    let flags = flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let relative: OsString = if parts.is_empty() {
            OsString::from(".")
        } else {
            let mut joined = OsString::new();
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    joined.push("/");
                }
                joined.push(part);
            }
            joined
        };
        let how = OpenHow::new().flags(flags).resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
        super::tally::count(super::tally::Event::Open);
        match openat2(&root, relative.as_os_str(), how) {
            Ok(fd) => return Ok(fd),
            Err(Errno::ENOSYS | Errno::EPERM) => {
                tracing::debug!("openat2 unavailable; walking paths component by component");
                NO_OPENAT2.store(true, Ordering::Relaxed);
            }
            // EAGAIN: a concurrent rename somewhere on the system; the walk does not need a
            // retry. ENOTDIR: a symlink met with O_DIRECTORY answers ENOTDIR, not ELOOP; the
            // walk tells the two apart.
            Err(Errno::EAGAIN | Errno::ENOTDIR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    walk(root, &parts, flags)
}

/// The per-component walk: every directory opened with `O_PATH | O_DIRECTORY | O_NOFOLLOW` and
/// verified to be a directory, the last component opened with `flags` (which hold
/// `O_NOFOLLOW`).
fn walk(root: OwnedFd, parts: &[&OsStr], flags: OFlag) -> io::Result<OwnedFd> {
    super::tally::count(super::tally::Event::Open);
    let Some((last, dirs)) = parts.split_last() else {
        return Ok(openat(&root, ".", flags, Mode::empty())?);
    };
    let mut dir = root;
    for part in dirs {
        dir = open_subdir(&dir, part)?;
    }
    let fd = match openat(&dir, *last, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ENOTDIR) => return Err(not_a_directory(&dir, last)),
        Err(e) => return Err(e.into()),
    };
    if flags.contains(OFlag::O_PATH) && stat(&fd)?.file_type().is_symlink() {
        // `O_PATH | O_NOFOLLOW` opens a symlink itself instead of failing.
        return Err(Errno::ELOOP.into());
    }
    Ok(fd)
}

fn open_subdir(dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    super::tally::count(super::tally::Event::Open);
    let fd = match openat(
        dir,
        name,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::ENOTDIR) => return Err(not_a_directory(dir, name)),
        Err(e) => return Err(e.into()),
    };
    if !stat(&fd)?.is_dir() {
        return Err(Errno::ELOOP.into());
    }
    Ok(fd)
}

/// The error for `name` in `dir` not being a directory: `ENOTDIR` when it is a file or other
/// non-directory, `ELOOP` when it is a symlink (one swapped in where a directory was checked;
/// `O_DIRECTORY | O_NOFOLLOW` answers `ENOTDIR` for it) or has become a directory again (it
/// changed under the walk).
fn not_a_directory(dir: &OwnedFd, name: &OsStr) -> io::Error {
    super::tally::count(super::tally::Event::Open);
    let changed = openat(
        dir,
        name,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok()
    .and_then(|entry| stat(&entry).ok())
    .is_some_and(|meta| meta.file_type().is_symlink() || meta.is_dir());
    if changed {
        Errno::ELOOP.into()
    } else {
        Errno::ENOTDIR.into()
    }
}

/// Metadata of the object at `canonical` (not following a final symlink: a symlink there is
/// reported as one), reached without following any symlink on the way.
pub fn metadata(canonical: &Path) -> io::Result<Metadata> {
    let fd = open(canonical, OFlag::O_PATH)?;
    stat(&fd)
}

/// Opens a file for reading. `O_NONBLOCK` keeps a FIFO swapped in from blocking the open; the
/// caller checks the type on the returned metadata before reading.
pub fn open_read(canonical: &Path) -> io::Result<(File, Metadata)> {
    let fd = open(canonical, OFlag::O_RDONLY | OFlag::O_NONBLOCK)?;
    let file = File::from(fd);
    super::tally::count(super::tally::Event::Stat);
    let meta = file.metadata()?;
    if meta.is_file() {
        // Regular files ignore O_NONBLOCK, but clear it so the descriptor behaves normally.
        let flags = nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_GETFL)?;
        let flags = OFlag::from_bits_truncate(flags) & !OFlag::O_NONBLOCK;
        nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETFL(flags))?;
    }
    Ok((file, meta))
}

/// Opens the directory `canonical` for writing into it, creating missing directories one at a
/// time (`mkdirat` inside the already-open parent, then opened with `O_NOFOLLOW`). `allow`
/// is asked before each directory is created (the scope check of its canonical path).
pub fn open_dir_creating(
    canonical: &Path,
    allow: &dyn Fn(&Path) -> io::Result<()>,
) -> io::Result<OwnedFd> {
    let dir_flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY;
    match open(canonical, dir_flags) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        other => return other,
    }
    let parts = components(canonical)?;
    let mut dir = root()?;
    let mut walked = std::path::PathBuf::from("/");
    for part in &parts {
        walked.push(part);
        match open_subdir(&dir, part) {
            Ok(next) => dir = next,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                allow(&walked)?;
                match mkdirat(&dir, *part, Mode::from_bits_truncate(0o777)) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                dir = open_subdir(&dir, part)?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(openat(
        &dir,
        ".",
        dir_flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?)
}

/// Removes the file (or symlink) at `canonical`, unlinked inside its parent directory reached
/// without following a symlink; a directory is refused.
pub fn remove_file(canonical: &Path) -> io::Result<()> {
    let (Some(parent), Some(name)) = (canonical.parent(), canonical.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a file path",
        ));
    };
    let dir = open(parent, OFlag::O_RDONLY | OFlag::O_DIRECTORY)?;
    let target = openat(
        &dir,
        name,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    if stat(&target)?.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "is a directory",
        ));
    }
    unlinkat(&dir, name, UnlinkatFlags::NoRemoveDir)?;
    Ok(())
}

/// Replaces the file `name` inside the open directory `dir` with `bytes`, atomically: a
/// temporary file created in `dir`, written, given the old file's mode (and owner when the
/// process may), fsynced and renamed over `name` within `dir` (the rename is durable with the
/// file system's next commit). A new file gets the default mode (0666 less the umask).
pub fn replace_in(dir: &OwnedFd, name: &OsStr, bytes: &[u8]) -> io::Result<()> {
    if name.is_empty() || name.as_bytes().contains(&b'/') || name == "." || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{}` is not a file name", name.to_string_lossy()),
        ));
    }
    let existing = match openat(
        dir,
        name,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => Some(stat(&fd)?),
        Err(Errno::ENOENT) => None,
        Err(e) => return Err(e.into()),
    };
    if existing.as_ref().is_some_and(Metadata::is_dir) {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "is a directory",
        ));
    }
    // A symlink swapped in for the file is replaced like any other entry, never followed.
    let keep = existing.filter(Metadata::is_file);
    let temp_name = written_temp(dir, name, bytes, keep.as_ref())?;
    if let Err(e) = renameat(dir, temp_name.as_os_str(), dir, name) {
        let _ = unlinkat(dir, temp_name.as_os_str(), UnlinkatFlags::NoRemoveDir);
        return Err(e.into());
    }
    Ok(())
}

/// `bytes` in a new file of `dir`, synced, with `keep`'s owner and mode, under a temporary
/// name. The file is written nameless (`O_TMPFILE`) and named only once complete, so a crash
/// mid-write leaves nothing behind; where `O_TMPFILE` or `/proc/self/fd` is missing, it is
/// written under its temporary name.
fn written_temp(
    dir: &OwnedFd,
    name: &OsStr,
    bytes: &[u8],
    keep: Option<&Metadata>,
) -> io::Result<OsString> {
    if let Ok(fd) = openat(
        dir,
        ".",
        OFlag::O_TMPFILE | OFlag::O_WRONLY | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o666),
    ) {
        let mut file = File::from(fd);
        fill(&mut file, bytes, keep)?;
        let proc_path = format!("/proc/self/fd/{}", file.as_raw_fd());
        loop {
            let temp = temp_name(name);
            match nix::unistd::linkat(
                nix::fcntl::AT_FDCWD,
                proc_path.as_str(),
                dir,
                temp.as_os_str(),
                nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
            ) {
                Ok(()) => return Ok(temp),
                Err(Errno::EEXIST) => continue,
                // No `/proc` (or it is not ours): write it again, named.
                Err(_) => break,
            }
        }
    }
    let (temp, fd) = create_temp(dir, name)?;
    let mut file = File::from(fd);
    if let Err(e) = fill(&mut file, bytes, keep) {
        let _ = unlinkat(dir, temp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        return Err(e);
    }
    Ok(temp)
}

/// Writes `bytes`, gives the file `keep`'s owner (when allowed) and mode, and syncs it.
fn fill(file: &mut File, bytes: &[u8], keep: Option<&Metadata>) -> io::Result<()> {
    file.write_all(bytes)?;
    if let Some(old) = keep {
        let _ = fchown(
            &*file,
            Some(Uid::from_raw(old.uid())),
            Some(Gid::from_raw(old.gid())),
        );
        // The permission bits and the sticky bit stay; set-user-id and set-group-id do not,
        // as the kernel clears them when a file is written: new content never runs with the
        // rights of the old program's owner.
        fchmod(
            &*file,
            Mode::from_bits_truncate(old.permissions().mode() & 0o1777),
        )?;
    }
    file.sync_all()
}

/// A fresh temporary name for `name`: `.NAME.keel-PID-N.tmp`.
fn temp_name(name: &OsStr) -> OsString {
    let stem: String = name.to_string_lossy().chars().take(64).collect();
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut temp = OsString::from(".");
    temp.push(&stem);
    temp.push(format!(".keel-{}-{n}.tmp", std::process::id()));
    temp
}

fn create_temp(dir: &OwnedFd, name: &OsStr) -> io::Result<(OsString, OwnedFd)> {
    loop {
        let temp = temp_name(name);
        match openat(
            dir,
            temp.as_os_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o666),
        ) {
            Ok(fd) => return Ok((temp, fd)),
            Err(Errno::EEXIST) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Whether an error means a symlink (or an escape) met on a checked path: the path changed
/// after the check.
pub fn is_swap(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error().map(Errno::from_raw),
        Some(Errno::ELOOP | Errno::EXDEV)
    )
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "the tests build symlinked fixtures on disk"
)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn base() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        (dir, base)
    }

    #[test]
    fn both_walks_refuse_symlinks_anywhere_on_the_path() {
        let (_dir, base) = base();
        std::fs::create_dir_all(base.join("real")).unwrap();
        std::fs::write(base.join("real/f"), "x").unwrap();
        symlink(base.join("real"), base.join("link")).unwrap();
        symlink(base.join("real/f"), base.join("flink")).unwrap();
        fn parts(p: &Path) -> Vec<&OsStr> {
            components(p).unwrap()
        }
        for path in [base.join("link/f"), base.join("flink")] {
            let e = open(&path, OFlag::O_RDONLY).unwrap_err();
            assert!(is_swap(&e), "{path:?}: {e}");
            let e = walk(
                root().unwrap(),
                &parts(&path),
                OFlag::O_RDONLY | OFlag::O_NOFOLLOW,
            )
            .unwrap_err();
            assert!(is_swap(&e), "walk {path:?}: {e}");
            let e = walk(
                root().unwrap(),
                &parts(&path),
                OFlag::O_PATH | OFlag::O_NOFOLLOW,
            )
            .unwrap_err();
            assert!(is_swap(&e), "walk O_PATH {path:?}: {e}");
        }
        let ok = base.join("real/f");
        assert!(open(&ok, OFlag::O_RDONLY).is_ok());
        assert!(
            walk(
                root().unwrap(),
                &parts(&ok),
                OFlag::O_RDONLY | OFlag::O_NOFOLLOW
            )
            .is_ok()
        );
        assert!(components(&base.join("real/../real/f")).is_err());
    }

    #[test]
    fn replace_keeps_mode_and_breaks_hard_links() {
        let (_dir, base) = base();
        let file = base.join("f.sh");
        std::fs::write(&file, "old").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o751)).unwrap();
        std::fs::hard_link(&file, base.join("other")).unwrap();
        let dir = open_dir_creating(&base, &|_| Ok(())).unwrap();
        replace_in(&dir, OsStr::new("f.sh"), b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(base.join("other")).unwrap(), "old");
        let meta = std::fs::metadata(&file).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o751);
        assert_eq!(meta.nlink(), 1);
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(&base).unwrap().count(), 2);
    }

    #[test]
    fn missing_directories_are_created_after_asking() {
        let (_dir, base) = base();
        let asked = std::sync::Mutex::new(Vec::new());
        let dir = open_dir_creating(&base.join("a/b"), &|p| {
            asked.lock().unwrap().push(p.to_path_buf());
            Ok(())
        })
        .unwrap();
        replace_in(&dir, OsStr::new("c"), b"x").unwrap();
        assert_eq!(std::fs::read_to_string(base.join("a/b/c")).unwrap(), "x");
        assert_eq!(
            asked.into_inner().unwrap(),
            vec![base.join("a"), base.join("a/b")]
        );
        let refused = open_dir_creating(&base.join("z/y"), &|_| {
            Err(io::Error::new(io::ErrorKind::PermissionDenied, "no"))
        });
        assert!(refused.is_err());
        assert!(!base.join("z").exists());
    }

    /// The fallback walk under the same race as the openat2 path: a thread exchanging a
    /// directory on the path with a symlink to the outside; nothing outside is ever opened.
    #[test]
    fn the_component_walk_never_opens_through_a_swapped_symlink() {
        let (_dir, base) = base();
        std::fs::create_dir_all(base.join("ws/sub")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        std::fs::write(base.join("ws/sub/f"), "inside").unwrap();
        std::fs::write(base.join("outside/f"), "outside").unwrap();
        symlink(base.join("outside"), base.join("ws/swap")).unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let swapper = {
            let stop = stop.clone();
            let ws = base.join("ws");
            std::thread::spawn(move || {
                let dir = File::open(&ws).unwrap();
                let mut swaps = 0usize;
                while !stop.load(Ordering::Relaxed) || swaps == 0 {
                    nix::fcntl::renameat2(
                        &dir,
                        "sub",
                        &dir,
                        "swap",
                        nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                    )
                    .unwrap();
                    swaps += 1;
                }
                swaps
            })
        };
        let path = base.join("ws/sub/f");
        let parts = components(&path).unwrap();
        let (mut opened, mut refused) = (0, 0);
        for _ in 0..1000 {
            match walk(root().unwrap(), &parts, OFlag::O_RDONLY | OFlag::O_NOFOLLOW) {
                Ok(fd) => {
                    let mut text = String::new();
                    std::io::Read::read_to_string(&mut File::from(fd), &mut text).unwrap();
                    assert_eq!(text, "inside");
                    opened += 1;
                }
                Err(e) => {
                    assert!(is_swap(&e), "{e}");
                    refused += 1;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert!(swapper.join().unwrap() > 0);
        assert_eq!(opened + refused, 1000);
    }
}
