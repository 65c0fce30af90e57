//! Keel's own state, which no tool may change in any mode: each workspace's `.keel/`
//! directory (its settings and persisted approvals), the user data directory (the trust
//! store) and the user's configuration directory.
//!
//! [`Protected::check_write`] takes a canonical path (symlinks and `..` already resolved, as for
//! the workspace root check) and refuses it when it is, or is below, a protected directory.
//! Names are compared case-insensitively, so `.KEEL/` on a case-insensitive file system is
//! caught too. Each protected directory is held both as given and as it resolves, so a
//! symlinked `.keel` or data directory is protected where it really is.

use std::path::{Path, PathBuf};

use crate::capability::Refusal;

/// The protected directories of one runtime.
#[derive(Debug, Clone, Default)]
pub struct Protected {
    dirs: Vec<PathBuf>,
    /// The files inside the protected directories by `(device, inode)`: a hard link elsewhere
    /// is the same file.
    files: Vec<(u64, u64)>,
    /// The workspace roots: a directory that contains one is not protected (it would protect
    /// the whole workspace; only tests lay directories out that way).
    roots: Vec<PathBuf>,
}

/// The name of a workspace's Keel directory.
const PROJECT_DIR: &str = ".keel";

fn lowered(path: &Path) -> String {
    path.to_string_lossy().to_lowercase()
}

impl Protected {
    /// `<root>/.keel` of every root, and the user data directory.
    pub fn for_roots(roots: &[PathBuf], user_data: Option<&Path>) -> Self {
        let mut protected = Self {
            dirs: Vec::new(),
            files: Vec::new(),
            roots: roots.to_vec(),
        };
        protected.extend(roots.iter().map(|root| root.join(PROJECT_DIR)));
        protected.extend(user_data.map(Path::to_path_buf));
        protected
    }

    /// Adds directories (each also as it resolves, when it exists), and what they hold by what
    /// it is: the targets of the symlinks inside them (a dotfiles repository's file linked in
    /// as `config.toml` is Keel's configuration where it lies), and their files' inodes.
    pub fn extend(&mut self, dirs: impl IntoIterator<Item = PathBuf>) {
        for dir in dirs {
            if dir.as_os_str().is_empty() {
                continue;
            }
            // A directory holding a workspace is not protected (below), nor is what it holds.
            let (targets, files) = if self.roots.iter().any(|root| root.starts_with(&dir)) {
                (Vec::new(), Vec::new())
            } else {
                what_it_holds(&dir)
            };
            for file in files {
                if !self.files.contains(&file) {
                    self.files.push(file);
                }
            }
            let real = super::paths::resolve(&dir).ok();
            for candidate in real.into_iter().chain([dir]).chain(targets) {
                let holds_a_root = self.roots.iter().any(|root| root.starts_with(&candidate));
                if !holds_a_root && !self.dirs.contains(&candidate) {
                    self.dirs.push(candidate);
                }
            }
        }
    }

    /// The protected directories.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Refuses a write to a canonical path at or below a protected directory, or to another
    /// name of one of their files.
    pub fn check_write(&self, canonical: &Path) -> Result<(), Refusal> {
        use std::os::unix::fs::MetadataExt as _;
        if !self.files.is_empty()
            && let Ok(meta) = super::probe::symlink_metadata(canonical)
            && meta.is_file()
            && self.files.contains(&(meta.dev(), meta.ino()))
        {
            return Err(Refusal {
                capability: "fs.write",
                subject: canonical.display().to_string(),
                reason: format!(
                    "fs.write denied: {} is another name of a file of Keel's own state; only \
                     the user changes it",
                    canonical.display()
                ),
            });
        }
        let target = lowered(canonical);
        for dir in &self.dirs {
            let dir_text = lowered(dir);
            let dir_text = dir_text.trim_end_matches('/');
            let inside = target == dir_text
                || target
                    .strip_prefix(dir_text)
                    .is_some_and(|rest| rest.starts_with('/'));
            if inside {
                return Err(Refusal {
                    capability: "fs.write",
                    subject: canonical.display().to_string(),
                    reason: format!(
                        "fs.write denied: {} is Keel's own state ({}); only the user changes it",
                        canonical.display(),
                        dir.display()
                    ),
                });
            }
        }
        Ok(())
    }
}

/// The most entries of a protected directory looked at (two levels: the configuration
/// directory and its `skills`, `agents`, ... folders).
const MAX_ENTRIES: usize = 512;

/// What the protected directory `dir` holds that is reached by other names: the resolved
/// targets of its symlinks (and of their symlinks one level down), and the `(device, inode)`
/// of its regular files with more than one link. Bounded; a missing directory holds nothing.
pub fn what_it_holds(dir: &Path) -> (Vec<PathBuf>, Vec<(u64, u64)>) {
    use std::os::unix::fs::MetadataExt as _;
    let mut targets = Vec::new();
    let mut files = Vec::new();
    let mut todo = vec![(dir.to_path_buf(), 0)];
    let mut seen = 0;
    while let Some((dir, depth)) = todo.pop() {
        let Ok(Some(entries)) = super::probe::dir_entries(&dir, MAX_ENTRIES) else {
            continue;
        };
        for entry in entries {
            seen += 1;
            if seen > MAX_ENTRIES {
                return (targets, files);
            }
            let Ok(meta) = super::probe::symlink_metadata(&entry) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                if let Ok(real) = super::paths::resolve(&entry) {
                    targets.push(real);
                }
            } else if meta.is_dir() && depth < 1 {
                todo.push((entry, depth + 1));
            } else if meta.is_file() && meta.nlink() > 1 {
                files.push((meta.dev(), meta.ino()));
            }
        }
    }
    (targets, files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keel_directories_are_refused_by_canonical_path_in_any_case() {
        let protected = Protected::for_roots(
            &[PathBuf::from("/w")],
            Some(Path::new("/home/u/.local/share/keel")),
        );
        for path in [
            "/w/.keel",
            "/w/.keel/config.toml",
            "/w/.KEEL/permissions.toml",
            "/home/u/.local/share/keel/trusted.toml",
        ] {
            assert!(protected.check_write(Path::new(path)).is_err(), "{path}");
        }
        for path in [
            "/w/.keeling",
            "/w/src/.keel.rs",
            "/home/u/.local/share/keelx",
        ] {
            assert!(protected.check_write(Path::new(path)).is_ok(), "{path}");
        }
        // A directory holding a workspace is not protected (it would protect the workspace).
        let around = Protected::for_roots(
            &[PathBuf::from("/data/keel/w")],
            Some(Path::new("/data/keel")),
        );
        assert!(
            around
                .check_write(Path::new("/data/keel/w/src/a.rs"))
                .is_ok()
        );
        assert!(
            around
                .check_write(Path::new("/data/keel/w/.keel/x"))
                .is_err()
        );
    }
}
