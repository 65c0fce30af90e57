//! Which environment variables the commands Keel runs never see.
//!
//! [`scrub_list`] is built, not fixed: Keel's own model credentials ([`SECRET_ENV`]),
//! every variable the resolved providers read their key from ([`register_credential_vars`], called
//! by the engine with each provider's `api_key_env`), and every variable of the process
//! environment whose name looks like a secret ([`looks_secret`]: `*_API_KEY`, `*_TOKEN`,
//! `*_SECRET*`, `*_PASSWORD*`, `AWS_*`, ...).

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

/// Keel's own credentials: the model's keys never reach the commands the model runs (a
/// `printenv` would otherwise hand them to the model, and from there to anywhere).
pub const SECRET_ENV: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
    "BRAVE_API_KEY",
];

/// Credential variables of the resolved providers, for the life of the process.
static PROVIDER_VARS: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Records variables that hold model credentials (each provider's `api_key_env`).
pub fn register_credential_vars<I, S>(names: I)
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let mut vars = PROVIDER_VARS.lock().unwrap_or_else(PoisonError::into_inner);
    vars.extend(names.into_iter().map(Into::into).filter(|n| !n.is_empty()));
}

/// Whether a variable's name says it holds a secret.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    const SUFFIXES: &[&str] = &[
        "_API_KEY",
        "_APIKEY",
        "_TOKEN",
        "_ACCESS_KEY",
        "_ACCESS_KEY_ID",
        "_PRIVATE_KEY",
        "_CREDENTIALS",
        "_AUTH",
    ];
    const CONTAINS: &[&str] = &["SECRET", "PASSWORD", "PASSWD", "_PASS_"];
    const PREFIXES: &[&str] = &["AWS_", "AZURE_CLIENT_", "GOOGLE_APPLICATION_CREDENTIALS"];
    const EXACT: &[&str] = &[
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GITLAB_TOKEN",
        "NPM_TOKEN",
        "HF_TOKEN",
        "API_KEY",
        "TOKEN",
    ];
    EXACT.contains(&upper.as_str())
        || SUFFIXES.iter().any(|s| upper.ends_with(s))
        || CONTAINS.iter().any(|c| upper.contains(c))
        || PREFIXES.iter().any(|p| upper.starts_with(p))
}

/// Every variable to remove from a command's environment: Keel's own credentials, the
/// registered provider variables, and whatever in `environment` looks like a secret.
pub fn scrub_list_from(environment: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut names: BTreeSet<String> = SECRET_ENV.iter().map(|n| (*n).to_owned()).collect();
    names.extend(
        PROVIDER_VARS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned(),
    );
    names.extend(environment.into_iter().filter(|name| looks_secret(name)));
    names.into_iter().collect()
}

/// [`scrub_list_from`] over the process environment.
pub fn scrub_list() -> Vec<String> {
    scrub_list_from(std::env::vars_os().filter_map(|(name, _)| name.into_string().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_recognised_by_shape() {
        for name in [
            "GITHUB_TOKEN",
            "MY_SERVICE_API_KEY",
            "DB_PASSWORD",
            "AWS_SESSION_TOKEN",
            "AWS_REGION",
            "CLIENT_SECRET_FILE",
            "stripe_api_key",
        ] {
            assert!(looks_secret(name), "{name}");
        }
        for name in ["PATH", "HOME", "TERM", "CARGO_HOME", "LANG", "KEYBOARD"] {
            assert!(!looks_secret(name), "{name}");
        }
    }

    #[test]
    fn the_list_joins_fixed_registered_and_environment_names() {
        register_credential_vars(["CANARY_PROVIDER_VAR"]);
        let list = scrub_list_from(["PATH".to_owned(), "X_TOKEN".to_owned()]);
        assert!(list.contains(&"ANTHROPIC_API_KEY".to_owned()));
        assert!(list.contains(&"CANARY_PROVIDER_VAR".to_owned()));
        assert!(list.contains(&"X_TOKEN".to_owned()));
        assert!(!list.contains(&"PATH".to_owned()));
    }
}
