//! Project trust: a project's own settings that loosen Keel apply only once the user trusts the
//! workspace, and only as long as those settings stay what the user trusted.
//!
//! - [`Trust`]: the input the engine takes (trusted, untrusted, not decided yet).
//! - [`project_fingerprint`]: the SHA-256 of every project file Keel reads settings from
//!   ([`PROJECT_CONFIG_FILES`]); trust is bound to it.
//! - [`TrustStore`]: a small TOML file of trusted canonical workspace paths and their
//!   fingerprints under the user-data directory, with [`TrustStore::trust_of`],
//!   [`TrustStore::trust`], [`TrustStore::revoke`] and [`TrustStore::list`]. A workspace whose
//!   files changed since it was trusted is not trusted ([`TrustStatus::Changed`]).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::rule::PolicyError;
use crate::runtime::config_files;

/// Every project file Keel reads settings from, relative to the workspace root. Trust covers
/// all of them: a change to any one makes the project untrusted again.
pub const PROJECT_CONFIG_FILES: &[&str] = &[".keel/config.toml", ".keel/permissions.toml"];

/// The project's tool files (`*.toml`, each naming a program), relative to the workspace root;
/// read only once the project is trusted.
pub const PROJECT_TOOLS_DIR: &str = ".keel/tools";

/// The project directories agent definitions (`*.md`) are read from, once trusted.
pub const PROJECT_AGENT_DIRS: &[&str] = &[".keel/agents", ".claude/agents"];

/// The project directories skills (`NAME/SKILL.md`) are read from, once trusted.
pub const PROJECT_SKILL_DIRS: &[&str] = &[".keel/skills", ".claude/skills", ".agents/skills"];

/// Directories of further project files that wait for trust, with the file each entry
/// contributes: tool files, agent definitions and skills. Trust covers them too; they count
/// only when present, so a project without them keeps the fingerprint of its two settings
/// files.
fn project_trust_dirs() -> impl Iterator<Item = (&'static str, TrustEntry)> {
    std::iter::once((PROJECT_TOOLS_DIR, TrustEntry::Extension("toml")))
        .chain(
            PROJECT_AGENT_DIRS
                .iter()
                .map(|dir| (*dir, TrustEntry::Extension("md"))),
        )
        .chain(
            PROJECT_SKILL_DIRS
                .iter()
                .map(|dir| (*dir, TrustEntry::SkillFile)),
        )
}

/// Which entries of a [`project_trust_dirs`] directory count.
#[derive(Debug, Clone, Copy)]
enum TrustEntry {
    /// Files with this extension directly in the directory.
    Extension(&'static str),
    /// `SKILL.md` of each subdirectory.
    SkillFile,
}

/// One project file as trust sees it: its text, or why Keel refuses to read it (outside the
/// project, not a regular file, over 1 MiB: the loaders refuse it too).
// String error: the note that stands for an unreadable file in the trusted fingerprint.
type Seen = Result<String, String>;

/// The files of [`project_trust_dirs`] as they are now, sorted, with their bytes.
fn trusted_dir_files(workspace: &Path) -> Result<Vec<(PathBuf, Seen)>, PolicyError> {
    let read_err = |path: &Path, source| PolicyError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut files = Vec::new();
    for (dir, entry) in project_trust_dirs() {
        let dir = workspace.join(dir);
        let listed = match config_files::list_dir(&dir) {
            Ok(listed) => listed,
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Vec::new(),
            Err(e) => return Err(read_err(&dir, e)),
        };
        for path in listed {
            let file = match entry {
                TrustEntry::Extension(ext) => {
                    if path.extension().and_then(|e| e.to_str()) != Some(ext) {
                        continue;
                    }
                    path
                }
                TrustEntry::SkillFile => path.join("SKILL.md"),
            };
            match config_files::read_project_file(workspace, &file) {
                Ok(Some(text)) => files.push((file, Ok(text))),
                Ok(None) => {}
                // A directory named like a file, or a skill folder that is a plain file.
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::IsADirectory | std::io::ErrorKind::NotADirectory
                    ) => {}
                // Refused (a symlink out of the project, a device, a huge file): what it is
                // counts, its content is never read.
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    files.push((file, Err(e.to_string())));
                }
                Err(e) => return Err(read_err(&file, e)),
            }
        }
    }
    Ok(files)
}

/// The workspace files the project's programs name: every argument (and the command) of its
/// MCP servers (`[mcp_servers.NAME]` in `.keel/config.toml`) and of its tool files' `argv`
/// (`--flag=value` counted by its value) that is a file inside the workspace, relative to it
/// or absolute. Sorted, each once, with its text or why it is refused.
fn named_program_files(workspace: &Path, dir_files: &[(PathBuf, Seen)]) -> Vec<(PathBuf, Seen)> {
    let mut words: Vec<String> = Vec::new();
    let config = workspace.join(PROJECT_CONFIG_FILES[0]);
    if let Ok(Some(text)) = config_files::read_project_file(workspace, &config)
        && let Ok(table) = text.parse::<toml::Table>()
        && let Some(servers) = table.get("mcp_servers").and_then(toml::Value::as_table)
    {
        for server in servers.values() {
            words.extend(program_words(server, &["command", "args"]));
        }
    }
    let tools = workspace.join(PROJECT_TOOLS_DIR);
    for (path, seen) in dir_files {
        if let (true, Ok(text)) = (path.starts_with(&tools), seen)
            && let Ok(table) = text.parse::<toml::Table>()
        {
            words.extend(program_words(&toml::Value::Table(table), &["argv"]));
        }
    }
    let mut found: Vec<(PathBuf, Seen)> = Vec::new();
    for word in words {
        let word = match word.split_once('=') {
            Some((flag, value)) if flag.starts_with('-') => value.to_owned(),
            _ => word,
        };
        if word.is_empty() {
            continue;
        }
        let path = workspace.join(&word);
        if found.iter().any(|(known, _)| *known == path)
            || dir_files.iter().any(|(known, _)| *known == path)
            || !crate::runtime::paths::resolve(&path).is_ok_and(|c| {
                crate::runtime::paths::resolve(workspace).is_ok_and(|root| c.starts_with(root))
            })
        {
            continue;
        }
        match config_files::read_project_file(workspace, &path) {
            Ok(Some(text)) => found.push((path, Ok(text))),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                found.push((path, Err(e.to_string())));
            }
            // Not a file (a word that is no path, a directory): nothing to cover.
            Ok(None) | Err(_) => {}
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// The strings of `table`'s `keys` (a string or an array of strings).
fn program_words(table: &toml::Value, keys: &[&str]) -> Vec<String> {
    keys.iter()
        .filter_map(|key| table.get(key))
        .flat_map(|value| match value {
            toml::Value::String(one) => vec![one.clone()],
            toml::Value::Array(many) => many
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// Whether the user trusts the project's own settings.
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

/// What the store says about one workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustStatus {
    /// Trusted, and its configuration files are what was trusted.
    Trusted,
    /// Trusted once, but its configuration files changed since (the fingerprint differs).
    Changed,
    /// Never trusted (or revoked).
    NotTrusted,
}

/// The SHA-256 (hex) of the project's configuration files ([`PROJECT_CONFIG_FILES`]): each
/// file's name, whether it exists, and its bytes; then, when there are any, the project's tool
/// files, agent definitions and skills (`project_trust_dirs`), each by path and bytes.
pub fn project_fingerprint(workspace: &Path) -> Result<String, PolicyError> {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for name in PROJECT_CONFIG_FILES {
        let path = workspace.join(name);
        let text = config_files::read_project_file(workspace, &path).map_err(|source| {
            PolicyError::Read {
                path: path.clone(),
                source,
            }
        })?;
        context.update(name.as_bytes());
        match text {
            Some(text) => {
                context.update(b"\0present\0");
                context.update(&(text.len() as u64).to_le_bytes());
                context.update(text.as_bytes());
            }
            None => context.update(b"\0absent\0"),
        }
    }
    // Tool files, agents and skills: each one's path and bytes (none: nothing added); then the
    // workspace files their programs and the project's MCP servers name (a script a trusted
    // program runs is trusted with it, so a change to it asks again).
    let mut files = trusted_dir_files(workspace)?;
    files.extend(named_program_files(workspace, &files));
    for (path, seen) in files {
        let relative = path.strip_prefix(workspace).unwrap_or(&path);
        let name = relative.to_string_lossy();
        context.update(b"\0file\0");
        context.update(&(name.len() as u64).to_le_bytes());
        context.update(name.as_bytes());
        let (tag, text): (&[u8], &str) = match &seen {
            Ok(text) => (b"\0text\0", text),
            Err(why) => (b"\0refused\0", why),
        };
        context.update(tag);
        context.update(&(text.len() as u64).to_le_bytes());
        context.update(text.as_bytes());
    }
    Ok(context
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// One trusted workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustedProject {
    /// The canonical workspace path.
    pub path: PathBuf,
    /// [`project_fingerprint`] when it was trusted.
    pub sha256: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    /// The old format (paths without a fingerprint): read, never honoured, dropped on write.
    #[serde(default, skip_serializing)]
    trusted: Vec<PathBuf>,
    #[serde(default)]
    project: Vec<TrustedProject>,
}

/// The file of trusted workspaces (for instance `~/.local/share/keel/trusted.toml`).
#[derive(Debug, Clone)]
pub struct TrustStore {
    path: PathBuf,
}

const HEADER: &str = "# Workspaces whose project settings Keel applies, each bound to the SHA-256 of its\n\
                      # .keel/config.toml and .keel/permissions.toml: when they change, Keel asks again.\n\
                      # Written by Keel (`keel trust grant`); `keel trust revoke` removes an entry.\n";

impl TrustStore {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the workspace (canonicalised) is trusted with its current configuration files.
    /// A missing store trusts nothing.
    pub fn is_trusted(&self, workspace: &Path) -> Result<bool, PolicyError> {
        Ok(self.status(workspace)? == TrustStatus::Trusted)
    }

    /// Where the workspace stands: trusted, trusted before its files changed, or never.
    pub fn status(&self, workspace: &Path) -> Result<TrustStatus, PolicyError> {
        let canonical = canonical(workspace)?;
        let file = self.read()?;
        let Some(entry) = file.project.iter().find(|p| p.path == canonical) else {
            return Ok(if file.trusted.contains(&canonical) {
                TrustStatus::Changed
            } else {
                TrustStatus::NotTrusted
            });
        };
        Ok(if entry.sha256 == project_fingerprint(&canonical)? {
            TrustStatus::Trusted
        } else {
            TrustStatus::Changed
        })
    }

    /// [`Trust::Trusted`] when the store lists the workspace with its current fingerprint,
    /// else [`Trust::Unknown`] (so an interactive session asks).
    pub fn trust_of(&self, workspace: &Path) -> Result<Trust, PolicyError> {
        Ok(if self.is_trusted(workspace)? {
            Trust::Trusted
        } else {
            Trust::Unknown
        })
    }

    /// Trusts the workspace (canonicalised) with its configuration files as they are now.
    pub fn trust(&self, workspace: &Path) -> Result<(), PolicyError> {
        let canonical = canonical(workspace)?;
        let fingerprint = project_fingerprint(&canonical)?;
        self.trust_fingerprint(&canonical, &fingerprint)
    }

    /// Trusts the workspace with the configuration the user was shown (`fingerprint`, from
    /// [`project_fingerprint`] when the question was put), so a change made in between is not
    /// trusted by accident.
    pub fn trust_fingerprint(
        &self,
        workspace: &Path,
        fingerprint: &str,
    ) -> Result<(), PolicyError> {
        let canonical = canonical(workspace)?;
        let mut file = self.read()?;
        file.trusted.retain(|p| *p != canonical);
        file.project.retain(|p| p.path != canonical);
        file.project.push(TrustedProject {
            path: canonical,
            sha256: fingerprint.to_owned(),
        });
        self.write(&file)
    }

    /// Removes the workspace from the store. Returns whether it was there.
    pub fn revoke(&self, workspace: &Path) -> Result<bool, PolicyError> {
        let canonical = canonical(workspace).unwrap_or_else(|_| workspace.to_path_buf());
        let mut file = self.read()?;
        let before = file.project.len() + file.trusted.len();
        file.project.retain(|p| p.path != canonical);
        file.trusted.retain(|p| *p != canonical);
        if file.project.len() + file.trusted.len() == before {
            return Ok(false);
        }
        self.write(&file)?;
        Ok(true)
    }

    /// Every trusted workspace, in the order they were trusted.
    pub fn list(&self) -> Result<Vec<TrustedProject>, PolicyError> {
        Ok(self.read()?.project)
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
                    "{}; the trust store holds [[project]] tables with path and sha256",
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
    crate::runtime::probe::canonicalize(workspace).map_err(|source| PolicyError::Read {
        path: workspace.to_path_buf(),
        source,
    })
}
