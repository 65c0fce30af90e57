//! Where rules come from: the three layers and the files behind them.
//!
//! - [`Layer`]: manifest (the bundled defaults and the user's global file), project
//!   (`<workspace>/.keel/permissions.toml`), session (answers given while the session runs).
//! - [`RuleSource`]: the precise origin of a rule, shown in every explanation.
//! - [`PolicyLayers`]: everything [`Policy::new`](super::Policy::new) is built from: the manifest
//!   rule sets, the project rule set, the project's [`Trust`], and the paths the watchdog
//!   protects.

use std::fmt;
use std::path::{Path, PathBuf};

use super::rule::{PolicyError, RuleSet};
use super::trust::Trust;
use crate::runtime::config_files;

/// The bundled default policy (manifest scope).
pub const BUNDLED_POLICY: &str = include_str!("default.toml");

/// The rule file's name, in the global config directory and in `<workspace>/.keel/`.
pub const RULE_FILE: &str = "permissions.toml";

/// The project's configuration directory, relative to the workspace root.
pub const PROJECT_DIR: &str = ".keel";

/// The three layers rules come in (the capability scope is [`crate::capability::Scope`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    Manifest,
    Project,
    Session,
}

impl Layer {
    /// Ties between equally specific rules go to session > project > manifest.
    pub fn rank(self) -> u8 {
        match self {
            Layer::Manifest => 0,
            Layer::Project => 1,
            Layer::Session => 2,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Manifest => "manifest",
            Layer::Project => "project",
            Layer::Session => "session",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where one rule was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleSource {
    /// `default.toml`, compiled into Keel.
    Bundled,
    /// The user's global rule file.
    Global(PathBuf),
    /// The project's rule file.
    Project(PathBuf),
    /// An "always" answer given during this session.
    Session,
}

impl RuleSource {
    pub fn layer(&self) -> Layer {
        match self {
            RuleSource::Bundled | RuleSource::Global(_) => Layer::Manifest,
            RuleSource::Project(_) => Layer::Project,
            RuleSource::Session => Layer::Session,
        }
    }
}

impl fmt::Display for RuleSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleSource::Bundled => f.write_str("the bundled defaults"),
            RuleSource::Global(path) => write!(f, "{}", path.display()),
            RuleSource::Project(path) => write!(f, "{}", path.display()),
            RuleSource::Session => f.write_str("an answer given in this session"),
        }
    }
}

/// What a [`Policy`](super::Policy) is built from.
#[derive(Debug, Clone)]
pub struct PolicyLayers {
    /// Manifest layer: the bundled defaults first, then the user's global file.
    pub manifest: Vec<RuleSet>,
    /// Project scope (`<workspace>/.keel/permissions.toml`), when the file exists.
    pub project: Option<RuleSet>,
    /// Whether the user trusts the project (project allow rules apply only when trusted).
    pub trust: Trust,
    /// The user's home directory (`~` in patterns; start-up files the watchdog protects).
    pub home: Option<PathBuf>,
    /// More paths no tool may change (the global config directory, the trust store).
    pub protected: Vec<PathBuf>,
}

impl PolicyLayers {
    /// The bundled defaults alone, with `$HOME` as the home directory.
    pub fn bundled() -> Result<Self, PolicyError> {
        Ok(Self {
            manifest: vec![bundled_rules()?],
            project: None,
            trust: Trust::Unknown,
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
            protected: Vec::new(),
        })
    }

    /// The bundled defaults, `<global_config_dir>/permissions.toml` and
    /// `<workspace>/.keel/permissions.toml`, each when present. A file that exists but is
    /// invalid is an error naming the file.
    pub fn load(
        workspace: &Path,
        global_config_dir: Option<&Path>,
        trust: Trust,
    ) -> Result<Self, PolicyError> {
        let mut layers = Self::bundled()?;
        layers.trust = trust;
        if let Some(dir) = global_config_dir {
            let path = dir.join(RULE_FILE);
            if let Some(set) = load_file(&path, RuleSource::Global(path.clone()))? {
                layers.manifest.push(set);
            }
            layers.protected.push(dir.to_path_buf());
            // Its files by what they are: a symlinked `config.toml` is protected where it lies.
            if !workspace.starts_with(dir) {
                let (targets, _) = crate::runtime::protected::what_it_holds(dir);
                layers.protected.extend(targets);
            }
        }
        let path = workspace.join(PROJECT_DIR).join(RULE_FILE);
        layers.project = load_file(&path, RuleSource::Project(path.clone()))?;
        Ok(layers)
    }

    /// Sets the home directory (tests point it at a temporary one).
    pub fn with_home(mut self, home: Option<PathBuf>) -> Self {
        self.home = home;
        self
    }

    /// Adds a path the watchdog refuses to let any tool change.
    pub fn protect(mut self, path: PathBuf) -> Self {
        self.protected.push(path);
        self
    }
}

/// The bundled default rules.
pub fn bundled_rules() -> Result<RuleSet, PolicyError> {
    RuleSet::parse(BUNDLED_POLICY, RuleSource::Bundled)
}

/// Reads and validates a rule file; `None` when it does not exist. A project's file is read
/// only inside its project (`config_files::read_project_file`).
pub fn load_file(path: &Path, source: RuleSource) -> Result<Option<RuleSet>, PolicyError> {
    let read = match &source {
        RuleSource::Project(_) => match path.parent().and_then(Path::parent) {
            Some(workspace) => config_files::read_project_file(workspace, path),
            None => config_files::read_if_exists(path),
        },
        _ => config_files::read_if_exists(path),
    };
    let text = read.map_err(|source| PolicyError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    text.map(|text| RuleSet::parse(&text, source)).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_policy_loads() {
        let set = bundled_rules().unwrap();
        assert!(set.rules.len() >= 15, "{}", set.rules.len());
        assert!(set.rules.iter().all(|r| r.source == RuleSource::Bundled));
    }
}
