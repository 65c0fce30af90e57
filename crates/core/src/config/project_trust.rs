//! The trust boundary of the project layer: until the user trusts a project, its
//! `.keel/config.toml` may only make Keel stricter.
//!
//! The project table is classified key by key ([`split`]). A value that *tightens* applies at
//! once: a stricter `mode` (yolo < allowlist < ask, allowlist < read-only: a partial order,
//! [`Mode::at_least_as_strict_as`]), a stricter `[sandbox] mode`
//! (off < auto < required), a lower request or token cap,
//! a lower output limit, `enabled = false`, a lower (or first) tool timeout, deny and ask rules.
//! Everything else waits for trust: looser values, providers, `base_url`, `api_key_env`,
//! `model`, allow rules, and every key this module does not know (a future key is loosening
//! until someone decides otherwise: fail closed). Each held-back value becomes an
//! [`IgnoredSetting`] with its file, line and a sentence a person reads ("sets mode = yolo",
//! "sends ANTHROPIC_API_KEY to http://127.0.0.1:9/v1").
//!
//! Credentials are pinned even after trust ([`check_credentials`]): a variable the user's own
//! configuration or Keel's built-in providers bind to a base URL is never sent to another one a
//! project chose.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Config, ConfigError, Mode, Provenance, ProviderSettings, Source};
use crate::provider::{self, ANTHROPIC_BASE_URL, OPENAI_BASE_URL};
use crate::tool::view::{escaped, quoted};

/// Keel's built-in provider names (their key variables are bound to their endpoints).
const BUILT_IN_PROVIDERS: &[&str] = &[
    "anthropic",
    "openai",
    "openrouter",
    "deepseek",
    "ollama",
    "lmstudio",
    "vllm",
];

/// Credentials of well-known services other than model providers, and where they belong. A
/// project provider may never name one of them, trusted or not.
const SERVICE_CREDENTIALS: &[(&str, &str)] = &[
    ("GITHUB_TOKEN", "https://api.github.com"),
    ("GH_TOKEN", "https://api.github.com"),
    ("GITLAB_TOKEN", "https://gitlab.com"),
    ("NPM_TOKEN", "https://registry.npmjs.org"),
    ("CARGO_REGISTRY_TOKEN", "https://crates.io"),
    ("HF_TOKEN", "https://huggingface.co"),
    ("BRAVE_API_KEY", "https://api.search.brave.com"),
    ("ANTHROPIC_AUTH_TOKEN", ANTHROPIC_BASE_URL),
];

/// A project setting that does not apply because the project is not trusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IgnoredSetting {
    /// The dotted key (`mode`, `providers.evil`, `permission[2]`).
    pub key: String,
    /// Where it is written.
    pub source: Source,
    /// What it would change, as a sentence fragment ("sets mode = yolo").
    pub change: String,
}

impl std::fmt::Display for IgnoredSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.change, self.source)
    }
}

/// The project table, split into what applies now and what waits for trust.
pub(super) struct Split {
    pub applied: toml::Table,
    pub ignored: Vec<IgnoredSetting>,
}

/// The lower layers' value at a dotted path (defaults and the user file merged).
fn lookup<'a>(base: &'a toml::Table, path: &[&str]) -> Option<&'a toml::Value> {
    let (last, parents) = path.split_last()?;
    let mut table = base;
    for part in parents {
        table = table.get(*part)?.as_table()?;
    }
    table.get(*last)
}

/// Whether a project value at `path` can only make Keel stricter than `base`.
fn tightens(path: &[&str], value: &toml::Value, base: &toml::Table) -> bool {
    let not_above = |value: &toml::Value| match (value.as_integer(), lookup(base, path)) {
        (Some(new), Some(old)) => old.as_integer().is_some_and(|old| new <= old),
        _ => false,
    };
    match path {
        ["mode"] => {
            // Parsed as the loader parses the file (exact names), so a value it rejects
            // never counts as stricter. Strictness is a partial order: `read-only` over
            // `ask` (or `ask` over `read-only`) lets some calls through that the other asks
            // about or refuses, so it waits for trust.
            let parse = |v: &toml::Value| v.clone().try_into::<Mode>().ok();
            let old = lookup(base, path).and_then(parse).unwrap_or_default();
            parse(value).is_some_and(|new| new.at_least_as_strict_as(old))
        }
        ["max_requests_per_turn"] | ["max_tokens"] | ["limits", _] => not_above(value),
        ["sandbox", "mode"] => {
            use crate::runtime::sandbox::SandboxMode;
            let parse = |v: &toml::Value| v.clone().try_into::<SandboxMode>().ok();
            let old = lookup(base, path).and_then(parse).unwrap_or_default();
            parse(value).is_some_and(|new| new.strictness() >= old.strictness())
        }
        ["tools", _, "enabled"] => value.as_bool() == Some(false),
        // Off spares a request to the model.
        ["sessions", "model_titles"] => value.as_bool() == Some(false),
        // No configured timeout means none beyond the tool's own: any value adds a limit.
        ["tools", _, "timeoutMs"] => lookup(base, path).is_none() || not_above(value),
        _ => false,
    }
}

/// Splits the project table. `base` is the defaults merged with the user file; `sources` the
/// project file's provenance (for locations). When `trusted`, everything applies and nothing is
/// listed; the credential pinning of [`check_credentials`] applies either way.
pub(super) fn split(
    base: &toml::Table,
    project: toml::Table,
    sources: &Provenance,
    trusted: bool,
    env: &dyn Fn(&str) -> Option<String>,
) -> Split {
    if trusted {
        return Split {
            applied: project,
            ignored: Vec::new(),
        };
    }
    let mut ignored = Vec::new();
    let mut applied = toml::Table::new();
    for (key, value) in project {
        match (key.as_str(), value) {
            ("permission", toml::Value::Array(rules)) => {
                // The rules stay: the permission engine keeps allow rules of an untrusted
                // project out of its decisions. They are listed so the user sees them.
                for (i, rule) in rules.iter().enumerate() {
                    if rule.get("action").and_then(toml::Value::as_str) == Some("allow") {
                        let key = format!("permission[{i}]");
                        ignored.push(IgnoredSetting {
                            source: sources.get(&key).clone(),
                            change: format!("allows {}", describe_rule(rule)),
                            key,
                        });
                    }
                }
                applied.insert(key, toml::Value::Array(rules));
            }
            ("providers", toml::Value::Table(providers)) => {
                for (name, table) in providers {
                    let key = format!("providers.{name}");
                    ignored.push(IgnoredSetting {
                        source: first_source(sources, &key),
                        change: describe_provider(base, &name, &table, env),
                        key,
                    });
                }
            }
            ("mcp_servers", toml::Value::Table(servers)) => {
                // A server names a program (or a host) to run with the user's rights.
                for (name, table) in servers {
                    let key = format!("mcp_servers.{name}");
                    ignored.push(IgnoredSetting {
                        source: first_source(sources, &key),
                        change: format!(
                            "starts the MCP server {} ({})",
                            quoted(&name),
                            describe_server(&table)
                        ),
                        key,
                    });
                }
            }
            (_, value) => {
                let mut path = vec![key.clone()];
                if let Some(kept) = keep(&mut path, value, base, sources, &mut ignored) {
                    applied.insert(key, kept);
                }
            }
        }
    }
    Split { applied, ignored }
}

/// The part of `value` (at `path`) that tightens; the rest goes to `ignored`.
fn keep(
    path: &mut Vec<String>,
    value: toml::Value,
    base: &toml::Table,
    sources: &Provenance,
    ignored: &mut Vec<IgnoredSetting>,
) -> Option<toml::Value> {
    if let toml::Value::Table(table) = value {
        let mut kept = toml::Table::new();
        for (key, inner) in table {
            path.push(key.clone());
            if let Some(inner) = keep(path, inner, base, sources, ignored) {
                kept.insert(key, inner);
            }
            path.pop();
        }
        return (!kept.is_empty()).then_some(toml::Value::Table(kept));
    }
    let parts: Vec<&str> = path.iter().map(String::as_str).collect();
    if tightens(&parts, &value, base) {
        return Some(value);
    }
    let key = path.join(".");
    // Every part of the key and the value as the file spells them, escaped: a key or a value
    // cannot add a line (or reorder one) in the question that lists it.
    let shown_key = path
        .iter()
        .map(|part| {
            if !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                part.clone()
            } else {
                quoted(part)
            }
        })
        .collect::<Vec<_>>()
        .join(".");
    let is_integer = value.is_integer();
    let new_int = value.as_integer();
    let value = escaped(&value.to_string());
    let change = match (parts.as_slice(), lookup(base, &parts)) {
        (["mode"], Some(old)) => {
            let incomparable = value
                .trim_matches('"')
                .parse::<Mode>()
                .ok()
                .zip(old.clone().try_into::<Mode>().ok())
                .is_some_and(|(new, old)| !old.at_least_as_strict_as(new));
            if !incomparable {
                format!("sets mode = {value} (looser than {old})")
            } else {
                format!(
                    "sets mode = {value} (not stricter than {old}: each lets through calls the other asks about or refuses)"
                )
            }
        }
        // Only a key that caps something is looser when higher; for any other, the value
        // just differs (a lower `tool_search.max_tools` is not "higher").
        (_, Some(old))
            if is_integer && new_int.zip(old.as_integer()).is_some_and(|(n, o)| n > o) =>
        {
            format!("sets {shown_key} = {value} (higher than {old})")
        }
        (_, Some(old)) if is_integer => format!("sets {shown_key} = {value} (instead of {old})"),
        _ => format!("sets {shown_key} = {value}"),
    };
    ignored.push(IgnoredSetting {
        source: sources.get(&key).clone(),
        change,
        key,
    });
    None
}

/// The source of the earliest value recorded under `prefix` (a table's first key in the file).
fn first_source(sources: &Provenance, prefix: &str) -> Source {
    let dotted = format!("{prefix}.");
    sources
        .iter()
        .filter(|(path, _)| path.starts_with(&dotted) || *path == prefix)
        .map(|(_, s)| s.clone())
        .min_by_key(|s| match s {
            Source::File(at) => (at.line, at.column),
            _ => (usize::MAX, usize::MAX),
        })
        .unwrap_or(Source::Default)
}

fn describe_rule(rule: &toml::Value) -> String {
    let field = |name: &str| rule.get(name).and_then(toml::Value::as_str);
    let subject = match (field("pattern"), field("prefix"), field("class")) {
        (Some(p), _, _) => format!(" pattern {}", quoted(p)),
        (_, Some(p), _) => format!(" prefix {}", quoted(p)),
        (_, _, Some(c)) => format!(" class {}", quoted(c)),
        _ => " everything".to_owned(),
    };
    format!("{}{subject}", quoted(field("permission").unwrap_or("?")))
}

/// What an MCP server table runs, in full: the program, every argument and the names of the
/// environment variables it sets (their values may be secrets), or the URL it connects to and
/// the names of the headers it sends; every string quoted and escaped.
fn describe_server(table: &toml::Value) -> String {
    let strings = |key: &str| -> Vec<String> {
        match table.get(key) {
            Some(toml::Value::String(one)) => vec![quoted(one)],
            Some(toml::Value::Array(many)) => many
                .iter()
                .map(|v| v.as_str().map_or_else(|| escaped(&v.to_string()), quoted))
                .collect(),
            _ => Vec::new(),
        }
    };
    let names = |key: &str| -> Vec<String> {
        table
            .get(key)
            .and_then(toml::Value::as_table)
            .map(|t| t.keys().map(|k| quoted(k)).collect())
            .unwrap_or_default()
    };
    let list = |items: Vec<String>| format!("[{}]", items.join(", "));
    // What it may reach in the sandbox beyond a server's defaults.
    let mut access: Vec<String> = Vec::new();
    for (key, what) in [("writable", "may write"), ("read", "may read")] {
        let paths = strings(key);
        if !paths.is_empty() {
            access.push(format!("{what} {}", list(paths)));
        }
    }
    if table.get("network").and_then(toml::Value::as_bool) == Some(false) {
        access.push("has no network".to_owned());
    }
    let more: String = access.iter().map(|a| format!(", {a}")).collect();
    if let Some(command) = strings("command").into_iter().next() {
        format!(
            "runs the program {command} with the arguments {} and the environment variables {}{more}",
            list(strings("args")),
            list(names("env"))
        )
    } else if let Some(url) = strings("url").into_iter().next() {
        format!(
            "connects to {url} with the headers {}",
            list(names("headers"))
        )
    } else if !access.is_empty() {
        format!(
            "widens the sandbox of the editor's server of that name: it {}",
            access.join(", ")
        )
    } else {
        "declares it".to_owned()
    }
}

/// Where a provider sends requests: its base URL, or the official one of its API.
fn endpoint(config: &provider::ProviderConfig) -> String {
    let url = config
        .base_url
        .clone()
        .unwrap_or_else(|| match config.kind {
            provider::ProviderKind::Anthropic => ANTHROPIC_BASE_URL.to_owned(),
            provider::ProviderKind::OpenAi => OPENAI_BASE_URL.to_owned(),
        });
    url.trim_end_matches('/').to_owned()
}

/// The user's provider table `name` with the project's keys laid over it.
fn combined(base: &toml::Table, name: &str, project: &toml::Value) -> Option<ProviderSettings> {
    let mut table = lookup(base, &["providers", name])
        .and_then(toml::Value::as_table)
        .cloned()
        .unwrap_or_default();
    if let toml::Value::Table(overlay) = project {
        for (k, v) in overlay {
            table.insert(k.clone(), v.clone());
        }
    }
    toml::Value::Table(table).try_into().ok()
}

fn describe_provider(
    base: &toml::Table,
    name: &str,
    project: &toml::Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> String {
    let resolved = combined(base, name, project).and_then(|c| c.to_provider_config(name, env));
    let Some(resolved) = resolved else {
        return format!("declares the model provider {}", quoted(name));
    };
    let url = endpoint(&resolved);
    let mut text = match resolved.sent_key_env() {
        Some(var) => format!(
            "sends {} to {} (provider {})",
            quoted(var),
            quoted(&url),
            quoted(name)
        ),
        None => format!(
            "sends the conversation to {} (provider {}, no key)",
            quoted(&url),
            quoted(name)
        ),
    };
    if let Some(var) = resolved.sent_key_env()
        && let Some((user_url, _)) = user_binding(base, var, env)
        && user_url != url
    {
        text.push_str(&format!(
            "; refused even if trusted: {var} belongs to {user_url}"
        ));
    }
    text
}

/// The base URL the user's own configuration (or Keel's built-in providers) binds `var` to, and
/// what binds it. User tables win over built-ins.
fn user_binding(
    base: &toml::Table,
    var: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(String, String)> {
    let user: BTreeMap<String, ProviderSettings> = lookup(base, &["providers"])
        .cloned()
        .and_then(|v| v.try_into().ok())
        .unwrap_or_default();
    for (name, table) in &user {
        if let Some(config) = table.to_provider_config(name, env)
            && config.sent_key_env() == Some(var)
        {
            return Some((
                endpoint(&config),
                format!("your configuration's provider `{name}`"),
            ));
        }
    }
    let upper = var.to_ascii_uppercase();
    if let Some((_, home)) = SERVICE_CREDENTIALS.iter().find(|(name, _)| *name == upper) {
        return Some((
            (*home).to_owned(),
            "a well-known credential of that service".to_owned(),
        ));
    }
    if upper.starts_with("AWS_") {
        return Some((
            "Amazon Web Services".to_owned(),
            "an AWS credential variable".to_owned(),
        ));
    }
    for name in BUILT_IN_PROVIDERS {
        if user.contains_key(*name) {
            continue;
        }
        if let Some(config) = provider::ProviderConfig::builtin(name, env)
            && config.sent_key_env() == Some(var)
        {
            return Some((endpoint(&config), format!("the built-in provider `{name}`")));
        }
    }
    None
}

/// Refuses a project provider that pairs a credential variable the user bound to one endpoint
/// with another endpoint. `base` is the defaults and user file, `project` the project's own
/// `[providers]` table (as it will apply), `sources` its provenance.
pub(super) fn check_credentials(
    base: &toml::Table,
    project: &toml::Table,
    sources: &Provenance,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    let Some(toml::Value::Table(providers)) = project.get("providers") else {
        return Ok(());
    };
    for (name, table) in providers {
        let Some(resolved) =
            combined(base, name, table).and_then(|c| c.to_provider_config(name, env))
        else {
            continue;
        };
        let Some(var) = resolved.sent_key_env() else {
            continue;
        };
        let var = var.to_owned();
        let url = endpoint(&resolved);
        if let Some((user_url, bound_by)) = user_binding(base, &var, env)
            && user_url != url
        {
            return Err(ConfigError::CredentialHost(Box::new(
                super::error::CredentialRefusal {
                    provider: name.clone(),
                    variable: var,
                    project_url: url,
                    user_url,
                    bound_by,
                    location: first_source(sources, &format!("providers.{name}")),
                },
            )));
        }
    }
    Ok(())
}

/// The defaults as a table, under the user layer.
pub(super) fn defaults_table() -> toml::Table {
    toml::Table::try_from(Config::default()).unwrap_or_default()
}
