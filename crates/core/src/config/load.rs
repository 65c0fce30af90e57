//! Reading the layers, checking each one, merging them, and recording where each value came from.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use toml::de::{DeTable, DeValue};

use super::error::FileText;
use super::{Config, ConfigError, Provenance, Source};

/// Names another user configuration file (replaces `$XDG_CONFIG_HOME/keel/config.toml`).
pub const ENV_CONFIG: &str = "KEEL_CONFIG";
/// Overrides `model`.
pub const ENV_MODEL: &str = "KEEL_MODEL";
/// Overrides `mode`.
pub const ENV_MODE: &str = "KEEL_MODE";
/// Environment variable: `[sandbox] mode` (`required`, `auto`, `off`).
pub const ENV_SANDBOX: &str = "KEEL_SANDBOX";
/// Environment variable: `[sandbox] mechanism` (`auto`, `namespaces`, `landlock`).
pub const ENV_SANDBOX_MECHANISM: &str = "KEEL_SANDBOX_MECHANISM";
/// The project file, relative to the workspace root.
pub const PROJECT_FILE: &str = ".keel/config.toml";

/// One value set from outside the files: an environment variable or a command-line flag.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    /// The dotted key (`mode`, `model`).
    pub key: String,
    pub value: toml::Value,
    pub source: Source,
}

impl Override {
    pub fn flag(key: &str, value: impl Into<toml::Value>, flag: &str) -> Self {
        Self {
            key: key.to_owned(),
            value: value.into(),
            source: Source::Flag(flag.to_owned()),
        }
    }

    pub fn env(key: &str, value: impl Into<toml::Value>, var: &str) -> Self {
        Self {
            key: key.to_owned(),
            value: value.into(),
            source: Source::Env(var.to_owned()),
        }
    }
}

/// Where the layers come from. Tests fill it with temporary paths; the binary uses
/// [`LoadOptions::from_env`].
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// The user file; `None` means no user layer.
    pub user_file: Option<PathBuf>,
    /// A missing user file is an error (it was named explicitly, by `KEEL_CONFIG`).
    pub user_file_required: bool,
    /// The workspace whose `.keel/config.toml` is the project layer.
    pub workspace: Option<PathBuf>,
    /// Environment overrides then flag overrides, lowest precedence first.
    pub overrides: Vec<Override>,
    /// Shown as `~` in messages.
    pub home: Option<PathBuf>,
    /// Paths under it are shown relative to it in messages.
    pub cwd: Option<PathBuf>,
    /// Whether the user trusts the workspace's project file as it is now. Untrusted (the
    /// default), the project layer may only make Keel stricter: everything else is left out
    /// and listed in [`Effective::ignored`].
    pub project_trusted: bool,
    /// The environment provider endpoints are resolved with (`ANTHROPIC_BASE_URL`,
    /// `OPENAI_BASE_URL`): where the user's credentials are bound.
    pub provider_env: BTreeMap<String, String>,
}

impl LoadOptions {
    /// The process's view: the user file from `KEEL_CONFIG` or the XDG config directory, the
    /// `KEEL_MODEL`/`KEEL_MODE` overrides, the home and current directories.
    pub fn from_env(workspace: Option<PathBuf>) -> Self {
        let get = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let (user_file, user_file_required) = match get(ENV_CONFIG) {
            Some(path) => (Some(PathBuf::from(path)), true),
            None => (user_config_path(), false),
        };
        let project_trusted = workspace.as_deref().is_some_and(trusted_in_default_store);
        Self {
            user_file,
            user_file_required,
            workspace,
            overrides: env_overrides(get),
            home: etcetera::home_dir().ok(),
            cwd: std::env::current_dir().ok(),
            project_trusted,
            provider_env: PROVIDER_ENV
                .iter()
                .filter_map(|name| Some(((*name).to_owned(), get(name)?)))
                .collect(),
        }
    }

    /// The environment lookup of [`LoadOptions::provider_env`].
    pub fn provider_lookup(&self) -> impl Fn(&str) -> Option<String> + '_ {
        |name: &str| self.provider_env.get(name).cloned()
    }

    /// Adds a command-line override (takes precedence over everything before it).
    pub fn flag(mut self, key: &str, value: impl Into<toml::Value>, flag: &str) -> Self {
        self.overrides.push(Override::flag(key, value, flag));
        self
    }

    /// The project file of [`LoadOptions::workspace`].
    pub fn project_file(&self) -> Option<PathBuf> {
        self.workspace.as_ref().map(|w| w.join(PROJECT_FILE))
    }

    /// A path as messages show it: relative to the current directory when inside it (and the
    /// current directory is not the home directory), `~/…` when inside home, else as is.
    pub fn show_path(&self, path: &Path) -> String {
        if let Some(cwd) = &self.cwd
            && Some(cwd) != self.home.as_ref()
            && let Ok(rel) = path.strip_prefix(cwd)
            && !rel.as_os_str().is_empty()
        {
            return rel.display().to_string();
        }
        if let Some(home) = &self.home
            && let Ok(rel) = path.strip_prefix(home)
        {
            return format!("~/{}", rel.display());
        }
        path.display().to_string()
    }
}

/// Environment variables that move a built-in provider's endpoint.
const PROVIDER_ENV: &[&str] = &["ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"];

/// Whether the default trust store trusts `workspace` with its current configuration files.
/// An unreadable store trusts nothing (and says so in the log).
pub fn trusted_in_default_store(workspace: &Path) -> bool {
    let Some(store) = super::default_trust_store() else {
        return false;
    };
    store.is_trusted(workspace).unwrap_or_else(|error| {
        tracing::warn!(%error, "cannot read the trust store; the project is untrusted");
        false
    })
}

/// The default user file: `$XDG_CONFIG_HOME/keel/config.toml` (`~/.config/keel/config.toml`).
/// `None` when no home directory is known.
pub fn user_config_path() -> Option<PathBuf> {
    use etcetera::AppStrategy as _;
    Some(app_strategy()?.config_dir().join("config.toml"))
}

/// Where `keel acp` logs by default: `$XDG_STATE_HOME/keel/keel.log`
/// (`~/.local/state/keel/keel.log`). `None` when no home directory is known.
pub fn default_log_file() -> Option<PathBuf> {
    use etcetera::AppStrategy as _;
    let strategy = app_strategy()?;
    let dir = strategy.state_dir().unwrap_or_else(|| strategy.data_dir());
    Some(dir.join("keel.log"))
}

pub(super) fn app_strategy() -> Option<impl etcetera::AppStrategy> {
    etcetera::choose_app_strategy(etcetera::AppStrategyArgs {
        top_level_domain: "dev".into(),
        author: "keel".into(),
        app_name: "keel".into(),
    })
    .ok()
}

/// The environment overrides, read through `get` (empty values count as unset).
pub fn env_overrides(get: impl Fn(&str) -> Option<String>) -> Vec<Override> {
    let mut out = Vec::new();
    for (var, key) in [
        (ENV_MODEL, "model"),
        (ENV_MODE, "mode"),
        (ENV_SANDBOX, "sandbox.mode"),
        (ENV_SANDBOX_MECHANISM, "sandbox.mechanism"),
    ] {
        if let Some(value) = get(var).filter(|v| !v.is_empty()) {
            out.push(Override::env(key, value, var));
        }
    }
    out
}

/// A configuration layer file and whether it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerFile {
    /// `user` or `project`.
    pub layer: &'static str,
    pub path: PathBuf,
    pub shown: String,
    pub found: bool,
}

/// The merged configuration and where each value came from.
#[derive(Debug, Clone)]
pub struct Effective {
    pub config: Config,
    pub sources: Provenance,
    /// The layer files looked at, lowest precedence first.
    pub files: Vec<LayerFile>,
    /// Project settings left out because the project is not trusted, in file order.
    pub ignored: Vec<super::IgnoredSetting>,
    /// Whether the project layer applied in full (the project is trusted).
    pub project_trusted: bool,
    /// The environment and flag overrides that were applied (sessions re-load with them).
    pub overrides: Vec<Override>,
}

/// Reads, checks and merges every layer.
pub fn load(options: &LoadOptions) -> Result<Effective, ConfigError> {
    let mut merged = toml::Table::new();
    let mut sources = Provenance::default();
    let mut files = Vec::new();
    let mut ignored = Vec::new();
    let layers = [
        (
            "user",
            options.user_file.clone(),
            options.user_file_required,
        ),
        ("project", options.project_file(), false),
    ];
    for (layer, path, required) in layers {
        let Some(path) = path else { continue };
        let shown = options.show_path(&path);
        // The project's file is read only inside the project (a symlink out of it is refused).
        let read = match (layer, &options.workspace) {
            ("project", Some(workspace)) => {
                crate::runtime::config_files::read_project_file(workspace, &path)
            }
            _ => crate::runtime::config_files::read_if_exists(&path),
        }
        .and_then(|text| text.ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound)));
        let text = match read {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
                files.push(LayerFile {
                    layer,
                    path,
                    shown,
                    found: false,
                });
                continue;
            }
            Err(source) => {
                return Err(ConfigError::Read {
                    path,
                    shown,
                    source,
                });
            }
        };
        let file = FileText {
            path: path.clone(),
            shown: shown.clone(),
            text: &text,
        };
        let mut file_sources = Provenance::default();
        let mut table = check_file(&file, &mut file_sources, permission_count(&merged))?;
        if layer == "project" {
            let mut base = super::project_trust::defaults_table();
            merge(&mut base, merged.clone(), true);
            let env = options.provider_lookup();
            if options.project_trusted {
                super::project_trust::check_credentials(&base, &table, &file_sources, &env)?;
            }
            let split = super::project_trust::split(
                &base,
                table,
                &file_sources,
                options.project_trusted,
                &env,
            );
            ignored.extend(split.ignored);
            table = split.applied;
            file_sources.retain(|path| {
                path.starts_with("permission[") || lookup_dotted(&table, path).is_some()
            });
        }
        sources.extend(file_sources);
        merge(&mut merged, table, true);
        files.push(LayerFile {
            layer,
            path,
            shown,
            found: true,
        });
    }
    for o in &options.overrides {
        check_override(o)?;
        set_dotted(&mut merged, &o.key, o.value.clone());
        sources.set(o.key.clone(), o.source.clone());
    }
    let mut config: Config = merged.try_into().map_err(|e: toml::de::Error| {
        // Each layer passed on its own; a failure here is a merge of two valid layers.
        ConfigError::Syntax {
            location: Source::Default,
            message: format!("the merged configuration is invalid: {}", e.message()),
        }
    })?;
    for (i, rule) in config.permissions.iter_mut().enumerate() {
        rule.source = Some(sources.get(&format!("permission[{i}]")).clone());
    }
    check_merged(&config, &sources)?;
    Ok(Effective {
        config,
        sources,
        files,
        ignored,
        project_trusted: options.project_trusted,
        overrides: options.overrides.clone(),
    })
}

/// The value at a dotted path of a table.
fn lookup_dotted<'a>(table: &'a toml::Table, path: &str) -> Option<&'a toml::Value> {
    let mut parts = path.split('.');
    let mut value = table.get(parts.next()?)?;
    for part in parts {
        value = value.as_table()?.get(part)?;
    }
    Some(value)
}

fn permission_count(table: &toml::Table) -> usize {
    table
        .get("permission")
        .and_then(toml::Value::as_array)
        .map_or(0, Vec::len)
}

/// Checks one file (TOML syntax, keys, value types, path variables), records the sources of its
/// values and returns its table.
fn check_file(
    file: &FileText<'_>,
    sources: &mut Provenance,
    permission_offset: usize,
) -> Result<toml::Table, ConfigError> {
    let tree = DeTable::parse(file.text).map_err(|e| file.explain(&e, None))?;
    let typed: Config =
        toml::from_str(file.text).map_err(|e| file.explain(&e, Some(tree.get_ref())))?;
    super::rules::check_variables(&typed, tree.get_ref(), file)?;
    record(tree.get_ref(), "", file, sources, permission_offset);
    toml::from_str(file.text).map_err(|e| file.explain(&e, None))
}

/// Records the source of every value the file sets: leaves by dotted path, rules by index.
fn record(
    table: &DeTable<'_>,
    prefix: &str,
    file: &FileText<'_>,
    sources: &mut Provenance,
    permission_offset: usize,
) {
    for (key, value) in table {
        let path = if prefix.is_empty() {
            key.get_ref().to_string()
        } else {
            format!("{prefix}.{}", key.get_ref())
        };
        match value.get_ref() {
            DeValue::Table(inner) => record(inner, &path, file, sources, permission_offset),
            DeValue::Array(rules) if prefix.is_empty() && path == "permission" => {
                for (i, rule) in rules.iter().enumerate() {
                    sources.set(
                        format!("permission[{}]", i + permission_offset),
                        file.source_at(rule.span().start),
                    );
                }
            }
            _ => sources.set(path, file.source_at(key.span().start)),
        }
    }
}

/// Merges `overlay` into `base`: tables key by key; the root `permission` array is appended to;
/// anything else is replaced.
fn merge(base: &mut toml::Table, overlay: toml::Table, root: bool) {
    for (key, value) in overlay {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o, false),
            (Some(toml::Value::Array(b)), toml::Value::Array(o)) if root && key == "permission" => {
                b.extend(o);
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

fn set_dotted(table: &mut toml::Table, key: &str, value: toml::Value) {
    let mut parts: Vec<&str> = key.split('.').collect();
    let Some(last) = parts.pop() else { return };
    let mut current = table;
    for part in parts {
        let entry = current
            .entry(part.to_owned())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = toml::Value::Table(toml::Table::new());
        }
        let toml::Value::Table(next) = entry else {
            return;
        };
        current = next;
    }
    current.insert(last.to_owned(), value);
}

/// An override must be valid on its own (so the error names the variable or flag).
fn check_override(o: &Override) -> Result<(), ConfigError> {
    let mut table = toml::Table::new();
    set_dotted(&mut table, &o.key, o.value.clone());
    let result: Result<Config, toml::de::Error> = table.try_into();
    result.map(|_| ()).map_err(|e| {
        let message = e.message().trim();
        let expected = match message.strip_prefix("unknown variant ") {
            Some(_) if o.key == "mode" => format!(
                "expected one of {} (found `{}`)",
                super::Mode::NAMES.join(", "),
                o.value.as_str().unwrap_or_default()
            ),
            _ => message.to_owned(),
        };
        ConfigError::BadValue {
            key: o.key.clone(),
            location: o.source.clone(),
            expected,
        }
    })
}

/// Checks that need the merged result: providers have a kind, counts are positive.
fn check_merged(config: &Config, sources: &Provenance) -> Result<(), ConfigError> {
    for (name, provider) in &config.providers {
        if provider.kind.is_none() && !super::is_built_in_provider(name) {
            return Err(ConfigError::MissingKey {
                key: "kind".into(),
                table: format!("providers.{name}"),
                location: first_under(sources, &format!("providers.{name}")),
            });
        }
    }
    let mut positive: Vec<(String, u64)> = vec![
        (
            "max_requests_per_turn".into(),
            u64::from(config.max_requests_per_turn),
        ),
        ("max_tokens".into(), u64::from(config.max_tokens)),
    ];
    for (id, tool) in &config.tools {
        if let Some(ms) = tool.timeout_ms {
            positive.push((format!("tools.{id}.timeoutMs"), ms));
        }
    }
    if !(1..=100).contains(&config.compact_at_percent) {
        let key = "compact_at_percent".to_owned();
        return Err(ConfigError::BadValue {
            location: sources.get(&key).clone(),
            key,
            expected: format!(
                "expected a percentage from 1 to 100, found {}",
                config.compact_at_percent
            ),
        });
    }
    for (key, value) in positive {
        if value == 0 {
            return Err(ConfigError::BadValue {
                location: sources.get(&key).clone(),
                key,
                expected: "expected a number of at least 1, found 0".into(),
            });
        }
    }
    Ok(())
}

/// The source of the first value recorded under `prefix`.
fn first_under(sources: &Provenance, prefix: &str) -> Source {
    let dotted = format!("{prefix}.");
    sources
        .iter()
        .find(|(path, _)| path.starts_with(&dotted))
        .map_or(Source::Default, |(_, s)| s.clone())
}
