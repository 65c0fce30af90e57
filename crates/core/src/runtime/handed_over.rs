//! What Keel checked of a path it hands to the editor, to verify around the editor's read or
//! write that the path still names what was checked.

use std::path::{Path, PathBuf};

use super::{AccessError, Runtime, fsat};

/// What Keel checked of a path it hands to the editor (`fs/read_text_file`,
/// `fs/write_text_file`): the file's `(device, inode)` when it exists, and each directory's from
/// the workspace root down to its parent (with their modification and change times for a
/// read: a symlink swapped in and back again moves them), all reached without following a
/// symlink.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct HandedOver {
    file: Option<(u64, u64)>,
    /// `None`: the directory does not exist (yet: a write creates it).
    dirs: Vec<Option<DirStamp>>,
}

/// A directory's device, inode, modification and change times (seconds, nanoseconds).
type DirStamp = (u64, u64, i64, i64, i64, i64);

impl HandedOver {
    /// `canonical` now; an error when a symlink stands on its path, or it is not a regular file.
    pub(super) fn of(
        canonical: &Path,
        roots: &[PathBuf],
        times: bool,
    ) -> std::io::Result<HandedOver> {
        use std::os::unix::fs::MetadataExt as _;
        let file = match fsat::metadata(canonical) {
            Ok(meta) if meta.is_file() => Some((meta.dev(), meta.ino())),
            Ok(_) => return Err(nix::errno::Errno::ELOOP.into()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let mut dirs = Vec::new();
        if let Some(root) = roots.iter().find(|root| canonical.starts_with(root)) {
            let mut dir = canonical.parent();
            while let Some(path) = dir.filter(|path| path.starts_with(root)) {
                let meta = match fsat::metadata(path) {
                    Ok(meta) => meta,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        dirs.push(None);
                        dir = path.parent();
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let (mtime, mtime_ns, ctime, ctime_ns) = if times {
                    (
                        meta.mtime(),
                        meta.mtime_nsec(),
                        meta.ctime(),
                        meta.ctime_nsec(),
                    )
                } else {
                    (0, 0, 0, 0)
                };
                dirs.push(Some((
                    meta.dev(),
                    meta.ino(),
                    mtime,
                    mtime_ns,
                    ctime,
                    ctime_ns,
                )));
                dir = path.parent();
            }
        }
        Ok(HandedOver { file, dirs })
    }
}

/// A failed editor call when the path the editor was handed changed around its `read` or
/// write (`wrote`): what it returned is not used.
pub(super) fn same_handed_over(
    runtime: &Runtime,
    canonical: &Path,
    before: std::io::Result<HandedOver>,
    after: std::io::Result<HandedOver>,
    verb: &str,
) -> Result<(), AccessError> {
    let unchanged = match (&before, &after) {
        (Ok(before), Ok(after)) if verb == "read" => before == after,
        // A write may create the file and its directories: those that existed must not change.
        (Ok(before), Ok(after)) => {
            before.dirs.len() == after.dirs.len()
                && before
                    .dirs
                    .iter()
                    .zip(&after.dirs)
                    .all(|(before, after)| before.is_none() || before == after)
        }
        _ => false,
    };
    if unchanged {
        return Ok(());
    }
    tracing::warn!(path = %canonical.display(), ?before, ?after, "a path changed around an editor's {verb}");
    Err(AccessError::Stale(format!(
        "{} changed on the disk while the editor {verb} it (another file or a symlink put in          its place, or a directory on its path changed), so Keel cannot prove the editor {verb}          the file it checked; {}",
        runtime.display_path(canonical),
        if verb == "read" {
            "what the editor returned was not used. Read it again"
        } else {
            "check that nothing outside the workspace changed before writing again"
        }
    )))
}
