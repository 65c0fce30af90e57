//! The runtime's own writes (whole or not at all) and how an OS error reads for the model.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::{AccessError, Runtime, fsat};

/// Removes a session's scratch directory (sidecars) when the session closes.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn remove_scratch(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Writes a scratch file whole or not at all, without flushing it to the disk: a sidecar is
/// read back by this process (or the user) while the session lives, and the scratch directory
/// does not outlive a crash, so the `fsync` of [`atomic_write`] would only cost time (a grep
/// of the toolchain tree spills 14,000 lines). The bytes go to a fresh name beside `path`,
/// renamed over it once whole.
#[expect(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "the runtime is where ambient authority lives"
)]
pub(super) fn write_whole_unsynced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut temp = path.as_os_str().to_owned();
    temp.push(format!(".{}.tmp", std::process::id()));
    let temp = PathBuf::from(temp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .and_then(|mut file| file.write_all(bytes))
        .and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub(super) fn atomic_write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = atomic_write_file::AtomicWriteFile::options().open(path)?;
    file.write_all(bytes)?;
    file.commit()
}

pub(super) fn io_error(runtime: &Runtime, path: &Path, e: std::io::Error) -> AccessError {
    let message = io_message(runtime, path, &e);
    if fsat::is_swap(&e) {
        return AccessError::Stale(message);
    }
    match e.kind() {
        std::io::ErrorKind::NotFound => AccessError::NotFound(message),
        std::io::ErrorKind::IsADirectory => AccessError::BadArgument(message),
        _ => AccessError::io(message, e),
    }
}

pub(super) fn io_message(runtime: &Runtime, path: &Path, e: &std::io::Error) -> String {
    let shown = runtime.display_path(path);
    if fsat::is_swap(e) {
        return format!(
            "{shown} changed while it was being opened (a symlink appeared on its path); refused"
        );
    }
    match e.kind() {
        std::io::ErrorKind::NotFound => format!("{shown}: no such file or directory"),
        std::io::ErrorKind::PermissionDenied => format!("{shown}: permission denied"),
        std::io::ErrorKind::IsADirectory => format!("{shown} is a directory"),
        _ => format!("{shown}: {e}"),
    }
}

pub(super) fn write_error(runtime: &Runtime, path: &Path, e: std::io::Error) -> AccessError {
    if fsat::is_swap(&e) {
        return AccessError::Stale(format!(
            "{} changed while writing (a symlink appeared on its path); not written",
            runtime.display_path(path)
        ));
    }
    io_error(runtime, path, e)
}
