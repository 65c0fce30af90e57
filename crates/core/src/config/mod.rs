//! Layered TOML configuration.
//!
//! Principal types:
//! - [`Config`]: the effective settings (model, providers, mode, request and token caps,
//!   permission rules, per-tool settings, truncation limits). Every field has a default, so an
//!   empty file is a valid configuration. Unknown keys are errors.
//! - [`LoadOptions`] and [`load`]: where the layers come from. Precedence, lowest first:
//!   defaults < user file (`$XDG_CONFIG_HOME/keel/config.toml`, or `KEEL_CONFIG`) < project file
//!   (`<workspace>/.keel/config.toml`) < environment (`KEEL_MODEL`, `KEEL_MODE`) < command-line
//!   flags. Tables merge key by key; `[[permission]]` rules of all layers are kept, user rules
//!   first.
//! - [`Effective`]: the merged [`Config`] plus its [`Provenance`], which says for every value
//!   where it came from ([`Source`]: default, file:line:column, environment variable, flag).
//! - [`ConfigError`]: a bad layer, naming the file, line and column, with a fix where one is
//!   known ("did you mean `model`?").
//! - [`render_annotated`]: the effective configuration as TOML with a source comment per value
//!   (`keel config show`); [`json_schema`]: the JSON Schema of a config file (`keel config
//!   schema`).

pub mod credentials;
mod engine_config;
mod error;
mod load;
mod project_trust;
mod providers;
mod rules;
mod show;
mod source;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use engine_config::{
    ConfigFault, ConfigRules, EngineConfig, EngineConfigError, EnvLookup, IgnoredLine,
    WorkspaceConfig, answering_model, engine_config, located_providers, user_cache_dir,
    user_data_dir,
};
pub use error::{ConfigError, CredentialRefusal};
pub use load::{
    ENV_CONFIG, ENV_MODE, ENV_MODEL, ENV_SANDBOX, ENV_SANDBOX_MECHANISM, Effective, LayerFile,
    LoadOptions, Override, PROJECT_FILE, default_log_file, env_overrides, load,
    trusted_in_default_store, user_config_path,
};
pub use project_trust::IgnoredSetting;
pub use providers::{ENV_SCRIPT, SCRIPTED_PROVIDER, is_built_in_provider, resolve_provider};
pub use rules::{
    PermissionRule, RULE_VARIABLES, RuleAction, build_policy, check_permission_rules,
    default_trust_store, policy_rule_sets,
};
pub use show::{json_schema, render_annotated};
pub use source::{FileLocation, Provenance, Source};

pub use crate::tool::Limits;

/// Keel's settings. Each field is optional in a file; the defaults apply underneath.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(title = "Keel configuration")]
pub struct Config {
    /// The model to use, as `provider/model` (for example `anthropic/claude-sonnet-4-5`).
    /// When unset, the provider layer picks its default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRef>,
    /// Model providers, by name. `anthropic`, `openai`, `openrouter`, `deepseek`, `ollama`,
    /// `lmstudio` and `vllm` are built in; a table here overrides their settings or declares
    /// another endpoint speaking either API.
    pub providers: BTreeMap<String, ProviderSettings>,
    /// How tool calls are approved: `ask`, `allowlist`, `yolo` or `read-only`.
    pub mode: Mode,
    /// Model requests one turn may make before it stops (`max_requests`).
    #[schemars(range(min = 1))]
    pub max_requests_per_turn: u32,
    /// Output tokens requested per model response.
    #[schemars(range(min = 1))]
    pub max_tokens: u32,
    /// How much the model reasons before it answers: `off`, `low`, `medium` or `high`. Anthropic
    /// gets a `thinking` budget (4096, 16384 or 32000 tokens, kept below `max_tokens`);
    /// OpenAI-compatible servers get `reasoning_effort` (`low`, `medium`, `high`).
    pub thinking: Thinking,
    /// Compact the conversation (summarize older turns) when the next request would use more
    /// than this percentage of the model's context window.
    #[schemars(range(min = 1, max = 100))]
    pub compact_at_percent: u8,
    /// Permission rules (`[[permission]]`, the format of `permissions.toml`): user rules join the
    /// manifest scope, project rules the project scope.
    #[serde(rename = "permission")]
    pub permissions: Vec<PermissionRule>,
    /// Per-tool settings, by tool id (`[tools.bash]`).
    pub tools: BTreeMap<String, ToolSettings>,
    /// How much of a tool's output the model sees; the rest goes to a sidecar file.
    pub limits: Limits,
    /// The kernel sandbox for shell commands (`docs/sandbox.md`). A project file can only make
    /// it stricter (`mode = "required"`); everything else there is ignored.
    pub sandbox: crate::runtime::sandbox::SandboxSettings,
    /// MCP servers started with every session (`[mcp_servers.NAME]`). A project file's servers
    /// wait for project trust.
    pub mcp_servers: BTreeMap<String, McpServerSettings>,
    /// When MCP and extension tools are left out of requests and found through `tool_search`.
    pub tool_search: ToolSearchSettings,
    /// How sessions are kept and shown (`[sessions]`).
    pub sessions: SessionSettings,
}

/// `[sessions]`: how sessions are kept and shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SessionSettings {
    /// After the first turn, the session's model writes a short title for it (one small
    /// request, in the background); off: the title stays the first line of the first prompt.
    pub model_titles: bool,
}

impl Default for SessionSettings {
    fn default() -> Self {
        Self { model_titles: true }
    }
}

/// `[tool_search]`: past either limit, extension tools are left out of requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ToolSearchSettings {
    /// More extension tools than this are left out.
    pub max_tools: usize,
    /// Extension tool definitions taking more than this percentage of the model's context
    /// window are left out.
    #[schemars(range(min = 1, max = 100))]
    pub budget_percent: u8,
}

impl Default for ToolSearchSettings {
    fn default() -> Self {
        Self {
            max_tools: 30,
            budget_percent: 10,
        }
    }
}

/// One MCP server (`[mcp_servers.NAME]`): either `command` (stdio) or `url` (streamable HTTP).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServerSettings {
    /// The program of a stdio server (found on `PATH`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Its environment, on top of `PATH`, `HOME` and a few more of Keel's (never a credential
    /// Keel itself holds).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The endpoint of a streamable-HTTP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP headers sent with every request to `url`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Whether the server is started.
    #[serde(default = "enabled", skip_serializing_if = "is_true")]
    pub enabled: bool,
    /// A call's time limit, in milliseconds (default 120000).
    #[serde(rename = "timeoutMs", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_ms: Option<u64>,
    /// More paths a stdio server may read in the sandbox (absolute, `~/...`, or relative to
    /// the workspace). A home credential is visible to it only when named here (or in
    /// `writable`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// Paths a stdio server may write in the sandbox (the same forms; `"."` is the
    /// workspace, read-only to servers otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
    /// Whether a stdio server has the network in the sandbox (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
}

fn enabled() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

impl McpServerSettings {
    /// What the table lets its server reach in the sandbox.
    pub fn access(&self) -> crate::runtime::sandbox::server::ServerAccess {
        crate::runtime::sandbox::server::ServerAccess {
            read: self.read.clone(),
            writable: self.writable.clone(),
            network: self.network.unwrap_or(true),
        }
    }

    /// A table with neither `command` nor `url` (nor what only they use): it holds only what
    /// the editor's server of its name may reach (`read`, `writable`, `network`).
    pub fn is_access_only(&self) -> bool {
        self.command.is_none()
            && self.url.is_none()
            && self.args.is_empty()
            && self.env.is_empty()
            && self.headers.is_empty()
    }

    /// The engine's view of the server, or why the table is unusable.
    // String error: the message says how to fix the table, shown as is.
    pub fn to_server(
        &self,
        name: &str,
        source: crate::mcp::McpSource,
    ) -> Result<crate::mcp::McpServerConfig, String> {
        use crate::mcp::{CALL_TIMEOUT, McpServerConfig, McpTransport};
        let transport = match (&self.command, &self.url) {
            (Some(command), None) => McpTransport::Stdio {
                command: command.clone(),
                args: self.args.clone(),
                env: self.env.clone().into_iter().collect(),
            },
            (None, Some(url)) => McpTransport::Http {
                url: url.clone(),
                headers: self.headers.clone().into_iter().collect(),
            },
            _ => {
                return Err(format!(
                    "[mcp_servers.{name}] needs exactly one of `command` (a stdio server) and \
                     `url` (an HTTP server)"
                ));
            }
        };
        Ok(McpServerConfig {
            name: name.to_owned(),
            transport,
            source,
            timeout: self
                .timeout_ms
                .map_or(CALL_TIMEOUT, std::time::Duration::from_millis),
            access: self.access(),
        })
    }
}

/// How much the model reasons before it answers (`thinking = "medium"`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Thinking {
    /// No extended thinking (the model's own default).
    #[default]
    Off,
    /// A 4096-token budget / `reasoning_effort = "low"`.
    Low,
    /// A 16384-token budget / `reasoning_effort = "medium"`.
    Medium,
    /// A 32000-token budget / `reasoning_effort = "high"`.
    High,
}

impl Thinking {
    /// Every level, in order.
    pub const ALL: [Thinking; 4] = [Self::Off, Self::Low, Self::Medium, Self::High];

    /// The thinking budget sent to the provider (`None`: off).
    pub fn budget(self) -> Option<u32> {
        match self {
            Self::Off => None,
            Self::Low => Some(4096),
            Self::Medium => Some(16_384),
            Self::High => Some(32_000),
        }
    }

    /// The level of a budget (the provider's mapping: ≤ 4096 low, ≤ 16384 medium).
    pub fn of_budget(budget: Option<u32>) -> Self {
        match budget {
            None | Some(0) => Self::Off,
            Some(b) if b <= 4096 => Self::Low,
            Some(b) if b <= 16_384 => Self::Medium,
            Some(_) => Self::High,
        }
    }

    /// `off`, `low`, `medium`, `high`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }
}

impl std::str::FromStr for Thinking {
    type Err = String;
    // String error: the message lists the accepted values, shown as is.
    fn from_str(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|level| level.as_str() == text)
            .ok_or_else(|| format!("unknown thinking level `{text}`: use off, low, medium or high"))
    }
}

/// Default for [`Config::max_requests_per_turn`].
pub const DEFAULT_MAX_REQUESTS_PER_TURN: u32 = 50;
/// Default for [`Config::max_tokens`].
pub const DEFAULT_MAX_TOKENS: u32 = 8192;
/// Default for [`Config::compact_at_percent`].
pub const DEFAULT_COMPACT_AT_PERCENT: u8 = 80;

impl Default for Config {
    fn default() -> Self {
        Self {
            model: None,
            providers: BTreeMap::new(),
            mode: Mode::Allowlist,
            max_requests_per_turn: DEFAULT_MAX_REQUESTS_PER_TURN,
            max_tokens: DEFAULT_MAX_TOKENS,
            thinking: Thinking::Off,
            compact_at_percent: DEFAULT_COMPACT_AT_PERCENT,
            permissions: Vec::new(),
            tools: BTreeMap::new(),
            limits: Limits::default(),
            sandbox: crate::runtime::sandbox::SandboxSettings::default(),
            mcp_servers: BTreeMap::new(),
            tool_search: ToolSearchSettings::default(),
            sessions: SessionSettings::default(),
        }
    }
}

impl Config {
    /// The settings of a tool (defaults when the tool has no table).
    pub fn tool(&self, id: &str) -> ToolSettings {
        self.tools.get(id).cloned().unwrap_or_default()
    }

    /// The disabled ids (`[tools.ID] enabled = false`) that match no tool: not one `known`
    /// (the bundled tools and the tool files), and not an MCP tool of a configured server
    /// (`mcp__SERVER__TOOL`). Usually a typo, which leaves the tool the user meant enabled.
    pub fn disabled_tools_matching_nothing(&self, known: &dyn Fn(&str) -> bool) -> Vec<String> {
        self.tools
            .iter()
            .filter(|(_, settings)| !settings.enabled)
            .map(|(id, _)| id)
            .filter(|id| !known(id))
            .filter(|id| {
                !self
                    .mcp_servers
                    .keys()
                    .any(|server| id.starts_with(&format!("mcp__{server}__")))
            })
            .cloned()
            .collect()
    }
}

/// What `keel tools` and `keel doctor` say of a disabled id that matches no tool.
pub fn disabled_matching_nothing_note(id: &str) -> String {
    format!(
        "`[tools.{}] enabled = false` matches no tool: no bundled tool or tool file has that id, \
         and it is no `mcp__SERVER__TOOL` of a configured MCP server (an editor's servers are \
         known only in a session); nothing is disabled by it",
        crate::tool::view::escaped(id)
    )
}

/// A model named as `provider/model`. The model part may itself contain `/`
/// (`openai/meta-llama/Llama-3-70b`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ModelRef {
    pub provider: String,
    pub model: String,
}

impl JsonSchema for ModelRef {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ModelRef".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": r"^[^/\s]+/\S+$",
            "description": "`provider/model`, for example `anthropic/claude-sonnet-4-5`.",
        })
    }
}

impl FromStr for ModelRef {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.split_once('/') {
            Some((provider, model))
                if !provider.is_empty()
                    && !model.is_empty()
                    && !text.chars().any(char::is_whitespace) =>
            {
                Ok(Self {
                    provider: provider.to_owned(),
                    model: model.to_owned(),
                })
            }
            _ => Err(format!(
                "expected `provider/model` (for example `anthropic/claude-sonnet-4-5`), found `{text}`"
            )),
        }
    }
}

impl TryFrom<String> for ModelRef {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<ModelRef> for String {
    fn from(model: ModelRef) -> Self {
        model.to_string()
    }
}

impl fmt::Display for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

/// The wire protocol a provider speaks: [`crate::provider::ProviderKind`], the one definition.
pub use crate::provider::ProviderKind;

/// One model provider (`[providers.NAME]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderSettings {
    /// The protocol; required unless the table overrides a built-in provider (`anthropic`,
    /// `openai`, `openrouter`, `deepseek`, `ollama`, `lmstudio`, `vllm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ProviderKind>,
    /// The API endpoint (for example `https://api.anthropic.com`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The environment variable holding the API key (never the key itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Models offered by this provider (shown by the editor's model picker).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// The models' context window in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
}

/// How tool calls are approved: the policy's [`crate::policy::Mode`], the one definition.
pub use crate::policy::Mode;

/// Settings every tool accepts (`[tools.ID]`, seed 001).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ToolSettings {
    /// Whether the tool is offered to the model at all.
    pub enabled: bool,
    /// The default time limit of one call, in milliseconds. A tool may accept a per-call value.
    #[serde(rename = "timeoutMs", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_ms: Option<u64>,
}

impl Default for ToolSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            timeout_ms: None,
        }
    }
}
