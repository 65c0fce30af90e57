//! Where a command's status file and done FIFO live: a directory in memory.

use std::path::Path;

/// Where a session's commands leave their status files (created, written twice, read back and
/// removed per command): a directory of the session's own on a memory file system, so none of
/// that waits on a disk other programs write to (decision 0037: on ext4, during builds, the
/// create alone took 0.64 ms on average, up to 15 ms). The scratch directory itself when it is already in memory;
/// else a fresh `0700` directory in `/dev/shm`, made at the first command and removed with the
/// session (a Keel killed by SIGKILL leaves it, empty but for a running command's file, as it
/// leaves its scratch directory); else (no `/dev/shm`) the scratch directory as it is.
#[derive(Debug, Default)]
pub(crate) struct StatusDir(std::sync::OnceLock<Option<tempfile::TempDir>>);

impl StatusDir {
    /// The directory, unless `scratch` (the session's sandbox directory) is the one to use.
    pub(super) fn get(&self, scratch: &Path) -> Option<&Path> {
        self.0
            .get_or_init(|| memory_dir(scratch))
            .as_ref()
            .map(tempfile::TempDir::path)
    }
}

/// Makes the FIFO `path` (mode `0600`, in the private status directory); `false` when it cannot.
pub(super) fn make_fifo(path: &Path) -> bool {
    match nix::unistd::mkfifo(
        path,
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    ) {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e, "no done FIFO; waiting for the helper's exit");
            false
        }
    }
}

/// A fresh private directory in `/dev/shm`, when `scratch` is not in memory already.
#[expect(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
fn memory_dir(scratch: &Path) -> Option<tempfile::TempDir> {
    use nix::sys::statfs::{TMPFS_MAGIC, statfs};
    use std::os::unix::fs::PermissionsExt as _;
    let in_memory = |path: &Path| statfs(path).is_ok_and(|fs| fs.filesystem_type() == TMPFS_MAGIC);
    if in_memory(scratch) || !in_memory(Path::new(SHARED_MEMORY)) {
        return None;
    }
    match tempfile::Builder::new()
        .prefix("keel-status-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(SHARED_MEMORY)
    {
        Ok(dir) => Some(dir),
        Err(e) => {
            tracing::debug!(error = %e, "no status directory in {SHARED_MEMORY}; using the scratch directory");
            None
        }
    }
}

/// The memory file system every Linux system mounts for POSIX shared memory.
const SHARED_MEMORY: &str = "/dev/shm";

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::Path;

    use nix::sys::statfs::{TMPFS_MAGIC, statfs};

    use super::{SHARED_MEMORY, StatusDir};

    fn in_memory(path: &Path) -> bool {
        statfs(path).unwrap().filesystem_type() == TMPFS_MAGIC
    }

    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "the test looks at the directory the runtime made"
    )]
    fn status_files_go_to_a_private_directory_in_memory_unless_the_scratch_is() {
        // A scratch directory already in memory is used as it is.
        assert!(in_memory(Path::new(SHARED_MEMORY)));
        let status = StatusDir::default();
        assert_eq!(status.get(Path::new(SHARED_MEMORY)), None);

        // One on a disk gets a directory of its own in /dev/shm, private, made once and
        // removed with the session.
        let scratch = Path::new(env!("CARGO_MANIFEST_DIR"));
        let status = StatusDir::default();
        let dir = status.get(scratch).map(Path::to_path_buf);
        assert_eq!(dir.is_some(), !in_memory(scratch));
        if let Some(dir) = dir {
            assert!(dir.starts_with(SHARED_MEMORY));
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
            assert_eq!(status.get(scratch), Some(dir.as_path()));
            drop(status);
            assert!(!dir.exists());
        }
    }
}
