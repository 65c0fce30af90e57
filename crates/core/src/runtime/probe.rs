//! Read-only probes of the file system for the policy engine and the front-end's checks.
//!
//! Deciding whether a command is safe looks at the disk: where a path resolves, whether a file
//! has several hard links, what a glob word could match, what a repository's `.git` holds. These
//! are not tool accesses (no tool output depends on them, and nothing here writes); they live
//! here because the runtime is the one module allowed ambient file access. Every read is bounded.

use std::io::{self, Read as _};
use std::path::{Path, PathBuf};

/// `path` resolved through symlinks and `..` (`std::fs::canonicalize`).
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn canonicalize(path: &Path) -> io::Result<PathBuf> {
    std::fs::canonicalize(path)
}

/// `path` resolved through symlinks where it exists, else `path` itself.
pub fn canonical_or_same(path: &Path) -> PathBuf {
    canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The metadata of `path`, following symlinks.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn metadata(path: &Path) -> io::Result<std::fs::Metadata> {
    std::fs::metadata(path)
}

/// The metadata of `path` itself (a symlink is not followed).
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn symlink_metadata(path: &Path) -> io::Result<std::fs::Metadata> {
    std::fs::symlink_metadata(path)
}

/// Whether anything (a dangling symlink included) exists at `path`.
pub fn is_present(path: &Path) -> bool {
    symlink_metadata(path).is_ok()
}

/// Whether `path` is a directory (following symlinks).
pub fn is_dir(path: &Path) -> bool {
    metadata(path).is_ok_and(|meta| meta.is_dir())
}

/// Whether `path` is a regular file (following symlinks).
pub fn is_file(path: &Path) -> bool {
    metadata(path).is_ok_and(|meta| meta.is_file())
}

/// Whether `path` is a regular file with an execute bit (following symlinks).
pub fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    metadata(path).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Where bash finds the program `name` (no `/` in it) on Keel's own `PATH`, canonical: the
/// first directory holding an executable file of that name. `None`: not on `PATH`.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable_file(candidate))
        .map(|found| canonical_or_same(&found))
}

/// The entries of directory `dir` (unsorted, entries that cannot be read skipped); `Ok(None)`
/// when it holds more than `limit` entries.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn dir_entries(dir: &Path, limit: usize) -> io::Result<Option<Vec<PathBuf>>> {
    let mut paths = Vec::new();
    for (seen, entry) in std::fs::read_dir(dir)?.enumerate() {
        if seen == limit {
            return Ok(None);
        }
        if let Ok(entry) = entry {
            paths.push(entry.path());
        }
    }
    Ok(Some(paths))
}

/// At most `limit` bytes of the regular file at `path`; `None` when it cannot be read, is
/// larger, or is not a regular file. Opened without waiting (`O_NONBLOCK`): a FIFO by the name
/// looked at (a `.gitconfig` the policy inspects) would otherwise block the open until a writer
/// comes, and the decision with it.
pub fn read_bounded(path: &Path, limit: u64) -> Option<Vec<u8>> {
    use nix::fcntl::OFlag;
    let fd = nix::fcntl::open(
        path,
        OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .ok()?;
    let file = std::fs::File::from(fd);
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > limit {
        return None;
    }
    Some(bytes)
}

/// A directory walker rooted at `start` for the policy's look through a tree (credential files
/// a recursive read would reach); the caller sets its filters. Nothing it yields is opened.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn tree_walker(start: &Path) -> ignore::WalkBuilder {
    ignore::WalkBuilder::new(start)
}
