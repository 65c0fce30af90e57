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
            roots: roots.to_vec(),
        };
        protected.extend(roots.iter().map(|root| root.join(PROJECT_DIR)));
        protected.extend(user_data.map(Path::to_path_buf));
        protected
    }

    /// Adds directories (each also as it resolves, when it exists).
    pub fn extend(&mut self, dirs: impl IntoIterator<Item = PathBuf>) {
        for dir in dirs {
            if dir.as_os_str().is_empty() {
                continue;
            }
            let real = super::paths::resolve(&dir).ok();
            for candidate in real.into_iter().chain([dir]) {
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

    /// Refuses a write to a canonical path at or below a protected directory.
    pub fn check_write(&self, canonical: &Path) -> Result<(), Refusal> {
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
