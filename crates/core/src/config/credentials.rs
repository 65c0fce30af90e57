//! Keel's credentials file: API keys stored by `keel login`, read wherever Keel reads a key
//! variable, after the process environment.
//!
//! The file is `credentials.toml` beside the user configuration (`~/.config/keel/`), mode 600,
//! replaced atomically. It maps variable names to keys, the names the configuration and the
//! built-in providers already use:
//!
//! ```toml
//! # Written by `keel login`; keys for the variables Keel reads. The environment wins.
//! ANTHROPIC_API_KEY = "sk-ant-..."
//! ```
//!
//! [`lookup`] is the environment lookup every front-end hands the engine: the variable from the
//! process environment, else from this file, read again at each lookup so that a key stored
//! while `keel acp` runs (the editor's login terminal) serves the next prompt.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::EnvLookup;
use crate::runtime::config_files;

/// The file name, in the user configuration directory.
pub const CREDENTIALS_FILE: &str = "credentials.toml";

/// The providers `keel login` offers: the name, the variable it stores, what the key looks like.
pub const LOGIN_PROVIDERS: &[(&str, &str, &str)] = &[
    ("anthropic", "ANTHROPIC_API_KEY", "sk-ant-..."),
    ("openai", "OPENAI_API_KEY", "sk-..."),
    ("openrouter", "OPENROUTER_API_KEY", "sk-or-..."),
    ("deepseek", "DEEPSEEK_API_KEY", "sk-..."),
];

/// Where the credentials file is: beside the user configuration file (`KEEL_CONFIG`'s
/// directory when that is set), `None` without a home directory.
pub fn path() -> Option<PathBuf> {
    let config = match std::env::var_os(super::load::ENV_CONFIG).filter(|v| !v.is_empty()) {
        Some(file) => PathBuf::from(file),
        None => super::user_config_path()?,
    };
    Some(config.parent()?.join(CREDENTIALS_FILE))
}

/// Why the credentials file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a TOML table of strings.
    #[error("{path}: {message} (expected lines like `ANTHROPIC_API_KEY = \"sk-ant-...\"`)")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// The key is empty or spans lines.
    #[error("the key is empty or has more than one line")]
    BadKey,
}

/// The keys stored in `path` (none when it does not exist).
pub fn read(path: &Path) -> Result<BTreeMap<String, String>, CredentialsError> {
    let text = config_files::read_if_exists(path).map_err(|source| CredentialsError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let Some(text) = text else {
        return Ok(BTreeMap::new());
    };
    toml::from_str(&text).map_err(|error| CredentialsError::Invalid {
        path: path.to_path_buf(),
        message: error.message().to_owned(),
    })
}

/// Stores `key` as `variable` in `path`, keeping the other keys: mode 600, atomically.
pub fn store(path: &Path, variable: &str, key: &str) -> Result<(), CredentialsError> {
    let key = key.trim();
    if key.is_empty() || key.contains(['\n', '\r']) {
        return Err(CredentialsError::BadKey);
    }
    let mut keys = read(path)?;
    keys.insert(variable.to_owned(), key.to_owned());
    let body = toml::to_string(&keys).map_err(|error| CredentialsError::Invalid {
        path: path.to_path_buf(),
        message: error.to_string(),
    })?;
    let text = format!(
        "# Written by `keel login`; keys for the variables Keel reads. The environment wins.\n{body}"
    );
    config_files::write_private(path, &text).map_err(|source| CredentialsError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The environment lookup of a front-end: `env(name)` when set and not empty, else the key
/// stored in the credentials file at `file` (read at each lookup; an unreadable file is logged
/// and counts as empty).
pub fn lookup_with(
    env: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    file: Option<PathBuf>,
) -> EnvLookup {
    std::sync::Arc::new(move |name: &str| {
        if let Some(value) = env(name).filter(|value| !value.is_empty()) {
            return Some(value);
        }
        let file = file.as_deref()?;
        match read(file) {
            Ok(mut keys) => keys.remove(name).filter(|value| !value.is_empty()),
            Err(error) => {
                tracing::warn!(%error, "the credentials file is ignored");
                None
            }
        }
    })
}

/// [`lookup_with`] over the process environment and [`path`].
pub fn lookup() -> EnvLookup {
    lookup_with(|name| std::env::var(name).ok(), path())
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "the test makes a scratch directory and checks the file's mode"
)]
mod tests {
    use super::*;

    #[test]
    fn stored_keys_are_private_kept_and_read_after_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("keel").join(CREDENTIALS_FILE);
        store(&file, "OPENAI_API_KEY", "sk-one\n").unwrap();
        store(&file, "ANTHROPIC_API_KEY", "sk-ant-two").unwrap();
        let keys = read(&file).unwrap();
        assert_eq!(keys["OPENAI_API_KEY"], "sk-one");
        assert_eq!(keys["ANTHROPIC_API_KEY"], "sk-ant-two");
        let mode = {
            use std::os::unix::fs::PermissionsExt as _;
            let meta = std::fs::metadata(&file).unwrap();
            meta.permissions().mode() & 0o777
        };
        assert_eq!(mode, 0o600);
        let lookup = lookup_with(
            |name| (name == "OPENAI_API_KEY").then(|| "from-env".to_owned()),
            Some(file.clone()),
        );
        assert_eq!(lookup("OPENAI_API_KEY").as_deref(), Some("from-env"));
        assert_eq!(lookup("ANTHROPIC_API_KEY").as_deref(), Some("sk-ant-two"));
        assert_eq!(lookup("DEEPSEEK_API_KEY"), None);
        assert!(matches!(
            store(&file, "X", "a\nb"),
            Err(CredentialsError::BadKey)
        ));
    }
}
