//! The session store's own files (`{user-data}/sessions/`): append-only event logs under an
//! exclusive `flock`, small metadata files, directory listing and removal.
//!
//! Like [`super::config_files`], these are not tool accesses: only the agent's own bookkeeping
//! reaches them, never a model's tool call. They live here because the runtime is the one module
//! allowed ambient file access. Logs are opened with `O_NOFOLLOW`, so a symlink planted in place
//! of a log is refused rather than written through.

use std::fs::File;
use std::io::{self, Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use nix::fcntl::{Flock, FlockArg};

/// An event log held under an exclusive lock; dropping it releases the lock.
#[derive(Debug)]
pub struct LockedLog {
    file: Flock<File>,
}

/// Why a log could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenLogError {
    /// Another process (or another handle of this one) holds the lock.
    #[error("locked by another process")]
    Locked,
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Opens (creating it when `create`) the log at `path` for reading and appending, and takes an
/// exclusive non-blocking `flock` on it.
#[expect(
    clippy::disallowed_types,
    reason = "the runtime is where ambient authority lives"
)]
pub fn open_locked(path: &Path, create: bool) -> Result<LockedLog, OpenLogError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(create)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(file) => Ok(LockedLog { file }),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(OpenLogError::Locked),
        Err((_, errno)) => Err(OpenLogError::Io(io::Error::from(errno))),
    }
}

impl LockedLog {
    /// The whole log.
    pub fn read_all(&mut self) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.file.seek(SeekFrom::Start(0))?;
        self.file.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// Cuts the log to `len` bytes (drops a torn last line so the next append starts clean).
    pub fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    /// Appends `bytes` with one `write` on an `O_APPEND` descriptor: it reaches the page cache
    /// before this returns, so a killed process loses nothing already appended.
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes)
    }
}

/// Creates `path` and its parents (mode 0700 for the ones created).
#[expect(
    clippy::disallowed_types,
    reason = "the runtime is where ambient authority lives"
)]
pub fn create_private_dir(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

/// Whether `path` exists as a directory (not following a final symlink).
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn is_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir())
}

/// The bytes of a file, or `None` when it does not exist. Refuses to follow a final symlink.
#[expect(
    clippy::disallowed_types,
    reason = "the runtime is where ambient authority lives"
)]
pub fn read_bytes(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path);
    match file {
        Ok(mut file) => {
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            Ok(Some(bytes))
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// The last modification time of a file, if it exists.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::symlink_metadata(path)
        .and_then(|meta| meta.modified())
        .ok()
}

/// The size of a file, if it exists (not following a final symlink).
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn size(path: &Path) -> Option<u64> {
    std::fs::symlink_metadata(path).map(|meta| meta.len()).ok()
}

/// The subdirectories of `path` (empty when it does not exist).
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn subdirectories(path: &Path) -> io::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            dirs.push(entry.path());
        }
    }
    Ok(dirs)
}

/// Removes a directory and everything in it.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn remove_dir(path: &Path) -> io::Result<()> {
    std::fs::remove_dir_all(path)
}
