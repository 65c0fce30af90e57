//! The turn loop's [`EngineConfig`] (what every session of one process shares) and
//! [`WorkspaceConfig`] (what one workspace's files say, read when a session opens), defined here
//! so the configuration needs nothing of the turn loop ([`crate::agent`] re-exports them); how
//! the effective configuration becomes them (`engine_config`), and the user directories it reads.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::load::app_strategy;
use super::{Effective, SCRIPTED_PROVIDER, resolve_provider};
use std::collections::HashMap;
use std::sync::Arc;

use crate::policy::{Mode, RuleSet};
use crate::provider::{Provider, ProviderConfig};
use crate::runtime::sandbox::SandboxSpec;
use crate::tool::{DynTool, Limits};

use crate::capability::{RequirementSet, ShellRunRequirement};

/// What the configuration files say for one workspace, read when a session opens.
#[derive(Debug, Clone, Default)]
pub struct WorkspaceConfig {
    /// The user file's `[[permission]]` rules (manifest scope).
    pub user_rules: Option<RuleSet>,
    /// The project file's `[[permission]]` rules (project scope).
    pub project_rules: Option<RuleSet>,
    /// The mode the layers give (a project's only when it tightens, unless trusted), with the
    /// environment and flag overrides on top.
    pub mode: Option<Mode>,
    /// The model the layers name (`provider/model`), if any.
    pub model: Option<String>,
    /// The providers the layers configure.
    pub providers: Vec<ProviderConfig>,
    /// Project settings not applied because the project is not trusted
    /// (`IgnoredSetting` lines: "sets mode = yolo (.keel/config.toml:1:1)").
    pub ignored: Vec<IgnoredLine>,
    /// MCP servers of the user file (and of the project file once trusted).
    pub mcp_servers: Vec<crate::mcp::McpServerConfig>,
    /// What each `[mcp_servers.NAME]` table lets its server reach in the sandbox, by name,
    /// tables without `command` or `url` included: an editor's server of that name gets it.
    pub mcp_access:
        std::collections::BTreeMap<String, crate::runtime::sandbox::server::ServerAccess>,
}

/// One project setting that waits for trust, as the user reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredLine {
    /// The dotted key (`mode`, `providers.evil`, `permission[0]`).
    pub key: String,
    /// "sets mode = yolo (.keel/config.toml:1:1)".
    pub text: String,
}

/// Reads the configuration for a workspace; the flag says whether the project is trusted.
pub type ConfigRules =
    Arc<dyn Fn(&std::path::Path, bool) -> Result<WorkspaceConfig, ConfigFault> + Send + Sync>;

/// Why a workspace's configuration did not load: the message, and what a front-end can show
/// of it (`details`, `key`, `file`, `line`, `column`: `ConfigError::data`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ConfigFault {
    pub message: String,
    pub data: Option<serde_json::Value>,
}

impl ConfigFault {
    /// A fault that is only a message.
    pub fn text(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            data: None,
        }
    }
}

impl From<String> for ConfigFault {
    fn from(message: String) -> Self {
        Self::text(message)
    }
}

impl From<&super::ConfigError> for ConfigFault {
    fn from(error: &super::ConfigError) -> Self {
        Self {
            message: error.to_string(),
            data: Some(error.data()),
        }
    }
}

/// How environment variables are looked up (injectable so tests never touch the process env).
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Everything the engine needs, resolved from configuration by the front-end.
#[derive(Clone)]
pub struct EngineConfig {
    /// `provider/model`; `None` picks the first provider with credentials.
    pub model: Option<String>,
    /// Models offered in the editor's model selector (`provider/model`).
    pub models: Vec<String>,
    pub providers: Vec<ProviderConfig>,
    /// A provider to use instead of resolving one (the scripted model, tests).
    pub provider_override: Option<(Arc<dyn Provider>, String)>,
    pub env: EnvLookup,
    pub mode: Mode,
    pub max_requests_per_turn: u32,
    pub max_tokens: u32,
    pub thinking_budget: Option<u32>,
    /// Compact the conversation when the next request's estimated input passes this fraction
    /// of the model's context window (0.0 to 1.0).
    pub compact_at: f64,
    pub limits: Limits,
    /// The agent manifest's own requirements, united with every tool's.
    pub manifest: RequirementSet,
    /// Tools registered after the bundled ones (MCP tools, tests); same id shadows.
    pub extra_tools: Vec<Arc<dyn DynTool>>,
    /// Past this many extension (MCP) tools, they are left out of requests and found through
    /// `tool_search`.
    pub tool_search_max_tools: usize,
    /// Past this fraction of the context window (at 4 bytes a token), the same.
    pub tool_search_budget: f64,
    /// Per-tool settings (seed 001): disabled tools and default timeouts.
    pub disabled_tools: Vec<String>,
    pub tool_timeouts: HashMap<String, Duration>,
    /// `[[permission]]` rules written in the configuration files, joined to the
    /// `permissions.toml` rules of the same scope.
    pub config_rules: Option<ConfigRules>,
    /// Where the user's global rules live (`~/.config/keel`), if anywhere.
    pub global_config_dir: Option<PathBuf>,
    /// `{user-data}` (`~/.local/share/keel`): the trust store lives there.
    pub user_data_dir: Option<PathBuf>,
    /// `~/.cache/keel`: the providers' model lists are kept there for a day.
    pub cache_dir: Option<PathBuf>,
    /// Parent of the sessions' scratch directories.
    pub scratch_root: PathBuf,
    /// How shell commands are confined (the `[sandbox]` table, the helper, the home directory).
    pub sandbox: SandboxSpec,
    /// After the first turn of a kept session, the model writes its title (`[sessions]
    /// model_titles`; on in the configuration, off here unless set).
    pub model_titles: bool,
}

impl std::fmt::Debug for EngineConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineConfig")
            .field("model", &self.model)
            .field("mode", &self.mode)
            .field("max_requests_per_turn", &self.max_requests_per_turn)
            .finish_non_exhaustive()
    }
}

impl EngineConfig {
    /// Defaults for a process whose environment is `env`.
    pub fn new(env: EnvLookup, scratch_root: PathBuf) -> Self {
        Self {
            model: None,
            models: Vec::new(),
            providers: Vec::new(),
            provider_override: None,
            env,
            mode: Mode::Allowlist,
            max_requests_per_turn: 50,
            max_tokens: 16_000,
            thinking_budget: None,
            compact_at: 0.8,
            limits: Limits::default(),
            manifest: RequirementSet::fs_read_write(
                &["{workspace}/**", "{session}/**"],
                &["{workspace}/**"],
            ),
            extra_tools: Vec::new(),
            tool_search_max_tools: 30,
            tool_search_budget: 0.1,
            disabled_tools: Vec::new(),
            tool_timeouts: HashMap::new(),
            config_rules: None,
            global_config_dir: None,
            user_data_dir: None,
            cache_dir: None,
            scratch_root,
            sandbox: SandboxSpec::default(),
            model_titles: false,
        }
    }
}

/// Why the configuration does not make an engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineConfigError {
    /// The scripted model's script does not load.
    #[error(transparent)]
    Provider(#[from] crate::provider::ProviderError),
}

/// The engine settings of a configuration.
///
/// - the model (`scripted/NAME` becomes a provider override replaying `KEEL_SCRIPT`), the
///   configured providers, and the models they list (for the editor's model picker);
/// - the mode, the request and token caps, the truncation limits;
/// - disabled tools and per-tool timeouts (`[tools.ID]`);
/// - the agent manifest: the workspace and the session directory, and any program for the
///   shell (which commands run is the permission rules' and the watchdog's decision);
/// - where the global rules (`permissions.toml` beside the user file) and the user's data
///   (the trust store) live; sessions' scratch directories go under `scratch_root`.
///
/// `[[permission]]` rules in the configuration files reach every session: the user file's join
/// the manifest scope, and the project file of the session's own workspace (read when the
/// session opens) joins the project scope.
pub fn engine_config(
    effective: &Effective,
    env: EnvLookup,
    scratch_root: PathBuf,
    workspace: Option<&Path>,
) -> Result<EngineConfig, EngineConfigError> {
    let config = &effective.config;
    let mut out = EngineConfig::new(env.clone(), scratch_root);
    match &config.model {
        Some(model) if model.provider == SCRIPTED_PROVIDER => {
            let lookup = move |key: &str| env(key);
            let resolved = resolve_provider(config, &lookup, workspace)?;
            out.provider_override = Some(resolved);
        }
        Some(model) => out.model = Some(model.to_string()),
        None => {}
    }
    let lookup = {
        let env = out.env.clone();
        move |key: &str| env(key)
    };
    out.providers = located_providers(effective, &lookup);
    out.models = config
        .providers
        .iter()
        .flat_map(|(name, table)| table.models.iter().map(move |m| format!("{name}/{m}")))
        .collect();
    out.config_rules = Some(session_rules(effective, out.env.clone()));
    out.mode = config.mode;
    out.max_requests_per_turn = config.max_requests_per_turn;
    out.max_tokens = config.max_tokens;
    out.thinking_budget = config.thinking.budget();
    out.compact_at = f64::from(config.compact_at_percent) / 100.0;
    // A scripted model's answers are its script's, in order: a title request would take one.
    out.model_titles = config.sessions.model_titles && out.provider_override.is_none();
    out.limits = config.limits.clone();
    out.manifest =
        RequirementSet::fs_read_write(&["{workspace}/**", "{session}/**"], &["{workspace}/**"])
            .with_shell(ShellRunRequirement::any_args("*"));
    out.tool_search_max_tools = config.tool_search.max_tools;
    out.tool_search_budget = f64::from(config.tool_search.budget_percent) / 100.0;
    out.disabled_tools = config
        .tools
        .iter()
        .filter(|(_, settings)| !settings.enabled)
        .map(|(id, _)| id.clone())
        .collect();
    out.tool_timeouts = config
        .tools
        .iter()
        .filter_map(|(id, settings)| {
            settings
                .timeout_ms
                .map(|ms| (id.clone(), Duration::from_millis(ms)))
        })
        .collect();
    out.sandbox = crate::runtime::sandbox::SandboxSpec::keel(
        sandbox_settings(effective),
        None,
        (out.env)("HOME").map(PathBuf::from),
    );
    out.global_config_dir = effective
        .files
        .iter()
        .find(|f| f.layer == "user")
        .and_then(|f| f.path.parent().map(Path::to_path_buf));
    out.user_data_dir = user_data_dir();
    out.cache_dir = user_cache_dir();
    Ok(out)
}

/// The configured providers, each configured base URL's source naming its file and line (what
/// an unreachable-server error tells the user).
pub fn located_providers(
    effective: &Effective,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<crate::provider::ProviderConfig> {
    let mut providers = effective.config.provider_configs(env);
    for provider in &mut providers {
        let key = format!("providers.{}.base_url", provider.name);
        if let super::Source::File(at) = effective.sources.get(&key) {
            provider.base_url_source = Some(format!(
                "set by `{key}` at {}:{}:{}",
                at.shown, at.line, at.column
            ));
        }
    }
    providers
}

/// The model that will answer a session of this configuration (`provider/model`) and where that
/// choice came from, in words; `Err` says what to set when no model can answer.
// String error: the message names what to set, shown to the user as is.
pub fn answering_model(
    effective: &Effective,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(String, String), String> {
    if let Some(model) = &effective.config.model {
        let source = effective.sources.get("model");
        return Ok((model.to_string(), format!("`model` set by {source}")));
    }
    let providers = effective.config.provider_configs(env);
    crate::provider::default_model(env, &providers).ok_or_else(|| {
        "no model can answer: set ANTHROPIC_API_KEY or OPENAI_API_KEY, or set `model = \
         \"provider/model\"` in the configuration (e.g. `model = \"ollama/qwen3\"`)"
            .to_owned()
    })
}

/// `$XDG_CACHE_HOME/keel` (`~/.cache/keel`): the providers' model lists are kept there.
pub fn user_cache_dir() -> Option<PathBuf> {
    use etcetera::AppStrategy as _;
    Some(app_strategy()?.cache_dir())
}

/// `$XDG_DATA_HOME/keel` (`~/.local/share/keel`): the trust store lives there.
pub fn user_data_dir() -> Option<PathBuf> {
    use etcetera::AppStrategy as _;
    Some(app_strategy()?.data_dir())
}

/// What the configuration says for a session's workspace: the same user file and overrides as
/// this configuration, and the project file of that workspace read afresh (sessions may open in
/// other workspaces than the process's), split by trust like every load.
fn session_rules(effective: &Effective, env: EnvLookup) -> ConfigRules {
    let user_file = effective
        .files
        .iter()
        .find(|f| f.layer == "user")
        .map(|f| f.path.clone());
    let overrides = effective.overrides.clone();
    let provider_env = super::LoadOptions::from_env(None).provider_env;
    std::sync::Arc::new(move |workspace: &Path, trusted: bool| {
        let options = super::LoadOptions {
            user_file: user_file.clone(),
            user_file_required: false,
            workspace: Some(workspace.to_path_buf()),
            overrides: overrides.clone(),
            home: etcetera::home_dir().ok(),
            cwd: std::env::current_dir().ok(),
            project_trusted: trusted,
            provider_env: provider_env.clone(),
        };
        let loaded = super::load(&options).map_err(|e| ConfigFault::from(&e))?;
        let (user_rules, project_rules) =
            super::policy_rule_sets(&loaded, workspace).map_err(|e| e.to_string())?;
        let lookup = |key: &str| env(key);
        let mcp_servers = mcp_servers(&loaded)?;
        let mcp_access = loaded
            .config
            .mcp_servers
            .iter()
            .map(|(name, settings)| (name.clone(), settings.access()))
            .collect();
        Ok(WorkspaceConfig {
            mcp_servers,
            mcp_access,
            user_rules,
            project_rules,
            mode: Some(loaded.config.mode),
            model: loaded
                .config
                .model
                .as_ref()
                .filter(|m| m.provider != SCRIPTED_PROVIDER)
                .map(ToString::to_string),
            providers: located_providers(&loaded, &lookup),
            ignored: loaded
                .ignored
                .iter()
                .map(|setting| IgnoredLine {
                    key: setting.key.clone(),
                    text: setting.to_string(),
                })
                .collect(),
        })
    })
}

/// The enabled `[mcp_servers.NAME]` of a loaded configuration, each marked with the layer that
/// declared it (a project's are there only when the project is trusted).
// String error: the message says how to fix the table, shown as is.
fn mcp_servers(loaded: &Effective) -> Result<Vec<crate::mcp::McpServerConfig>, String> {
    use super::Source;
    use crate::mcp::McpSource;
    let project = loaded
        .files
        .iter()
        .find(|f| f.layer == "project" && f.found)
        .map(|f| f.path.clone());
    let mut out = Vec::new();
    for (name, settings) in &loaded.config.mcp_servers {
        // Disabled, or only what the editor's server of that name may reach.
        if !settings.enabled || settings.is_access_only() {
            continue;
        }
        let prefix = format!("mcp_servers.{name}.");
        let from_project = loaded.sources.iter().any(|(key, source)| {
            key.starts_with(&prefix)
                && matches!(source, Source::File(at) if Some(&at.path) == project.as_ref())
        });
        let source = if from_project {
            McpSource::Project
        } else {
            McpSource::User
        };
        out.push(settings.to_server(name, source)?);
    }
    Ok(out)
}

/// The `[sandbox]` settings: the user file's (and the environment's and flags'), tightened by
/// the project file's but never loosened by it (a project can require the sandbox; it cannot
/// turn it off, add paths or allow the network).
fn sandbox_settings(effective: &Effective) -> crate::runtime::sandbox::SandboxSettings {
    use super::Source;
    use crate::runtime::sandbox::SandboxSettings;
    let merged = effective.config.sandbox.clone();
    let Some(project) = effective
        .files
        .iter()
        .find(|f| f.layer == "project" && f.found)
    else {
        return merged;
    };
    let from_project =
        |source: &Source| matches!(source, Source::File(loc) if loc.path == project.path);
    let touched = effective
        .sources
        .iter()
        .any(|(key, source)| key.starts_with("sandbox") && from_project(source));
    if !touched {
        return merged;
    }
    let table = |path: &Path| -> SandboxSettings {
        crate::runtime::config_files::read_if_exists(path)
            .ok()
            .flatten()
            .and_then(|text| text.parse::<toml::Table>().ok())
            .and_then(|mut table| table.remove("sandbox"))
            .and_then(|value| value.try_into().ok())
            .unwrap_or_default()
    };
    let user = effective
        .files
        .iter()
        .find(|f| f.layer == "user" && f.found)
        .map(|f| table(&f.path))
        .unwrap_or_default();
    let mut out = user.tightened_by(&table(&project.path));
    // The environment and flags are the user's own choice and win.
    for (key, source) in effective.sources.iter() {
        if matches!(source, Source::Env(_) | Source::Flag(_)) {
            match key {
                "sandbox.mode" => out.mode = merged.mode,
                "sandbox.mechanism" => out.mechanism = merged.mechanism,
                _ => {}
            }
        }
    }
    out
}
