//! Where a configuration value came from.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Serialize, Serializer};

/// A place in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileLocation {
    pub path: PathBuf,
    /// The path as a person reads it (`~/…`, or relative to the current directory).
    pub shown: String,
    /// Counts from 1.
    pub line: usize,
    /// Counts from 1, in characters.
    pub column: usize,
}

/// The origin of one configuration value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Keel's built-in default.
    Default,
    /// A place in a configuration file.
    File(Box<FileLocation>),
    /// An environment variable.
    Env(String),
    /// A command-line flag (`--mode`).
    Flag(String),
}

impl Source {
    /// The preposition that reads right before the source in a message ("at FILE:3:1",
    /// "in environment variable KEEL_MODE").
    pub(crate) fn preposition(&self) -> &'static str {
        match self {
            Source::File(_) => "at",
            _ => "in",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File(at) => write!(f, "{}:{}:{}", at.shown, at.line, at.column),
            Source::Env(var) => write!(f, "environment variable {var}"),
            Source::Flag(flag) => write!(f, "flag {flag}"),
        }
    }
}

impl Serialize for Source {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// For every value set explicitly, where it was set: keys are dotted paths (`mode`,
/// `providers.openai.base_url`, `tools.bash.timeoutMs`, `permission[0]`). A value not listed
/// holds its default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Provenance(BTreeMap<String, Source>);

impl Provenance {
    /// Where the value at `path` came from ([`Source::Default`] when nothing set it). A path
    /// inside a set value (an array, a rule) reports the value's source.
    pub fn get(&self, path: &str) -> &Source {
        if let Some(source) = self.0.get(path) {
            return source;
        }
        // The longest recorded prefix that ends at a segment boundary.
        let mut best: Option<&Source> = None;
        let mut best_len = 0;
        for (key, source) in &self.0 {
            let boundary = path.len() > key.len()
                && path.starts_with(key.as_str())
                && matches!(path.as_bytes()[key.len()], b'.' | b'[');
            if boundary && key.len() > best_len {
                best = Some(source);
                best_len = key.len();
            }
        }
        best.unwrap_or(&Source::Default)
    }

    pub(crate) fn set(&mut self, path: String, source: Source) {
        self.0.insert(path, source);
    }

    /// Keeps only the paths `keep` accepts.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.0.retain(|path, _| keep(path));
    }

    /// Adds (or replaces) every entry of `other`.
    pub(crate) fn extend(&mut self, other: Provenance) {
        self.0.extend(other.0);
    }

    /// Every explicitly set path and its source, in path order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Source)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_paths_inherit_the_nearest_recorded_source() {
        let mut provenance = Provenance::default();
        provenance.set("permission[1]".into(), Source::Env("X".into()));
        provenance.set("tools.bash.enabled".into(), Source::Flag("--f".into()));
        assert_eq!(
            provenance.get("permission[1].pattern"),
            &Source::Env("X".into())
        );
        assert_eq!(provenance.get("permission[10]"), &Source::Default);
        assert_eq!(provenance.get("tools.bash.enabledx"), &Source::Default);
        assert_eq!(
            provenance.get("tools.bash.enabled"),
            &Source::Flag("--f".into())
        );
    }
}
