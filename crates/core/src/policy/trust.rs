//! Project trust: project allow rules apply only once the user trusts the workspace.
//!
//! - [`Trust`]: the input the engine takes (trusted, untrusted, not decided yet).
//! - [`TrustStore`]: a small TOML file of trusted canonical workspace paths under the user-data
//!   directory (`trusted = ["/home/me/src/app"]`), with [`TrustStore::is_trusted`] and
//!   [`TrustStore::trust`].

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::rule::PolicyError;
use crate::runtime::config_files;

/// Whether the user trusts the project's own rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Trust {
    Trusted,
    Untrusted,
    /// The user has not been asked yet; treated as untrusted.
    #[default]
    Unknown,
}

impl Trust {
    pub fn is_trusted(self) -> bool {
        self == Trust::Trusted
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Trust::Trusted => "trusted",
            Trust::Untrusted => "untrusted",
            Trust::Unknown => "not trusted yet",
        }
    }
}

impl fmt::Display for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    #[serde(default)]
    trusted: Vec<PathBuf>,
}

/// The file of trusted workspaces (for instance `~/.local/share/keel/trusted.toml`).
#[derive(Debug, Clone)]
pub struct TrustStore {
    path: PathBuf,
}

const HEADER: &str = "# Workspaces whose project permission rules Keel applies.\n\
                      # Written by Keel when you trust a project; remove a line to revoke.\n";

impl TrustStore {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the workspace (canonicalised) is in the store. A missing store trusts nothing.
    pub fn is_trusted(&self, workspace: &Path) -> Result<bool, PolicyError> {
        let workspace = canonical(workspace)?;
        Ok(self.read()?.trusted.contains(&workspace))
    }

    /// [`Trust::Trusted`] when the store lists the workspace, else [`Trust::Unknown`].
    pub fn trust_of(&self, workspace: &Path) -> Result<Trust, PolicyError> {
        Ok(if self.is_trusted(workspace)? {
            Trust::Trusted
        } else {
            Trust::Unknown
        })
    }

    /// Adds the workspace (canonicalised) to the store; a no-op when already there.
    pub fn trust(&self, workspace: &Path) -> Result<(), PolicyError> {
        let workspace = canonical(workspace)?;
        let mut file = self.read()?;
        if file.trusted.contains(&workspace) {
            return Ok(());
        }
        file.trusted.push(workspace);
        self.write(&file)
    }

    /// Removes the workspace from the store.
    pub fn revoke(&self, workspace: &Path) -> Result<(), PolicyError> {
        let workspace = canonical(workspace)?;
        let mut file = self.read()?;
        let before = file.trusted.len();
        file.trusted.retain(|p| *p != workspace);
        if file.trusted.len() == before {
            return Ok(());
        }
        self.write(&file)
    }

    fn read(&self) -> Result<TrustFile, PolicyError> {
        let text =
            config_files::read_if_exists(&self.path).map_err(|source| PolicyError::Read {
                path: self.path.clone(),
                source,
            })?;
        match text {
            None => Ok(TrustFile::default()),
            Some(text) => toml::from_str(&text).map_err(|e| PolicyError::Syntax {
                origin: self.path.display().to_string(),
                message: format!(
                    "{}; the trust store holds one key, trusted = [\"/path\", ...]",
                    e.to_string().trim_end()
                ),
            }),
        }
    }

    fn write(&self, file: &TrustFile) -> Result<(), PolicyError> {
        let body = toml::to_string(file).map_err(|e| PolicyError::Syntax {
            origin: self.path.display().to_string(),
            message: e.to_string(),
        })?;
        config_files::write_atomically(&self.path, &format!("{HEADER}{body}")).map_err(|source| {
            PolicyError::Write {
                path: self.path.clone(),
                source,
            }
        })
    }
}

fn canonical(workspace: &Path) -> Result<PathBuf, PolicyError> {
    std::fs::canonicalize(workspace).map_err(|source| PolicyError::Read {
        path: workspace.to_path_buf(),
        source,
    })
}
