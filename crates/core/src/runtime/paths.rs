//! Path resolution: where a path finally points.

use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

const MAX_SYMLINKS: usize = 40;

/// Resolves `path` (absolute) to the canonical location it finally points to: every symlink on
/// the way is followed and `..` is applied to the resolved parent (POSIX semantics). Unlike
/// [`std::fs::canonicalize`], the path need not exist: the part past the deepest existing
/// ancestor is appended lexically (it contains no symlinks, since it does not exist).
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn resolve(path: &Path) -> io::Result<PathBuf> {
    if !path.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "path must be absolute",
        ));
    }
    let mut pending: Vec<OsString> = Vec::new();
    push_components(path, &mut pending);
    pending.reverse();
    let mut resolved = PathBuf::from("/");
    let mut exists = true;
    let mut followed = 0usize;
    while let Some(part) = pending.pop() {
        if part == ".." {
            resolved.pop();
            continue;
        }
        if part == "." || part.is_empty() {
            continue;
        }
        let candidate = resolved.join(&part);
        if !exists {
            resolved = candidate;
            continue;
        }
        super::tally::count(super::tally::Event::Stat);
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                followed += 1;
                if followed > MAX_SYMLINKS {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "too many levels of symbolic links at {}",
                            candidate.display()
                        ),
                    ));
                }
                let target = std::fs::read_link(&candidate)?;
                let mut parts = Vec::new();
                push_components(&target, &mut parts);
                if target.is_absolute() {
                    resolved = PathBuf::from("/");
                }
                for p in parts.into_iter().rev() {
                    pending.push(p);
                }
            }
            Ok(_) => resolved = candidate,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                exists = false;
                resolved = candidate;
            }
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
                return Err(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    format!("{} is not a directory", resolved.display()),
                ));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(resolved)
}

fn push_components(path: &Path, out: &mut Vec<OsString>) {
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => {}
            Component::CurDir => {}
            Component::ParentDir => out.push(OsString::from("..")),
            Component::Normal(name) => out.push(name.to_os_string()),
        }
    }
}

/// Joins a user-supplied path onto `base` unless it is absolute.
pub fn absolutize(base: &Path, user_path: &str) -> PathBuf {
    let p = Path::new(user_path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "the tests build symlinked fixtures on disk"
)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn resolves_symlinks_dotdot_and_missing_tails() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("ws/src")).unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        symlink(root.join("outside"), root.join("ws/link")).unwrap();
        symlink("../outside", root.join("ws/rel")).unwrap();

        assert_eq!(
            resolve(&root.join("ws/src/../src/a.rs")).unwrap(),
            root.join("ws/src/a.rs")
        );
        assert_eq!(
            resolve(&root.join("ws/link/secret")).unwrap(),
            root.join("outside/secret")
        );
        assert_eq!(
            resolve(&root.join("ws/rel/x")).unwrap(),
            root.join("outside/x")
        );
        // `..` after a symlink applies to the link's target, as the kernel does.
        assert_eq!(
            resolve(&root.join("ws/link/../ws/src")).unwrap(),
            root.join("ws/src")
        );
        assert_eq!(
            resolve(&root.join("ws/new/dir/../f")).unwrap(),
            root.join("ws/new/f")
        );
        assert_eq!(
            resolve(&root.join("ws/../../..")).unwrap(),
            PathBuf::from("/")
        );
    }

    #[test]
    fn symlink_loops_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        symlink(root.join("b"), root.join("a")).unwrap();
        symlink(root.join("a"), root.join("b")).unwrap();
        assert!(resolve(&root.join("a/x")).is_err());
    }
}
