//! [`ProviderConfig`] and [`resolve_model`]: from a `provider/model` name, configured providers
//! and environment credentials to a ready [`Provider`].
//!
//! Built-in provider names (usable as model prefixes without configuration):
//!
//! | name         | API       | base URL                          | key variable         |
//! |--------------|-----------|-----------------------------------|----------------------|
//! | `anthropic`  | Anthropic | `$ANTHROPIC_BASE_URL` or official | `ANTHROPIC_API_KEY`  |
//! | `openai`     | OpenAI    | `$OPENAI_BASE_URL` or official    | `OPENAI_API_KEY`     |
//! | `openrouter` | OpenAI    | `https://openrouter.ai/api/v1`    | `OPENROUTER_API_KEY` |
//! | `deepseek`   | OpenAI    | `https://api.deepseek.com`        | `DEEPSEEK_API_KEY`   |
//! | `ollama`     | OpenAI    | `http://localhost:11434/v1`       | none                 |
//! | `lmstudio`   | OpenAI    | `http://localhost:1234/v1`        | none                 |
//! | `vllm`       | OpenAI    | `http://localhost:8000/v1`        | none                 |
//!
//! A configured provider with the same name replaces the built-in one.

use std::fmt;
use std::sync::Arc;

use super::{AnthropicProvider, HttpSettings, OpenAiProvider, Provider, ProviderError};

/// The model used with `ANTHROPIC_API_KEY` when none is named.
pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";
/// The model used with `OPENAI_API_KEY` when none is named.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-5";

/// The wire protocol a provider speaks: the one definition, also the configuration's
/// `[providers.NAME] kind` (`anthropic`, `openai`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// The Anthropic Messages API.
    Anthropic,
    /// The OpenAI Chat Completions API (and compatible servers).
    OpenAi,
}

/// How to reach one provider. `Debug` never shows the key.
#[derive(Clone, PartialEq)]
pub struct ProviderConfig {
    /// The prefix of the model names routed here (`anthropic` in `anthropic/claude-...`).
    pub name: String,
    /// The wire API.
    pub kind: ProviderKind,
    /// Base URL; `None` is the official endpoint of `kind`.
    pub base_url: Option<String>,
    /// Where [`Self::base_url`] came from, as errors say it (`set by ANTHROPIC_BASE_URL`);
    /// `None` when unknown.
    pub base_url_source: Option<String>,
    /// The key; when `None`, read from [`Self::key_env`] at resolution.
    pub api_key: Option<String>,
    /// The variable holding the key (default `ANTHROPIC_API_KEY` / `OPENAI_API_KEY`).
    pub api_key_env: Option<String>,
    /// Whether a missing key is an error before sending anything (false for local servers).
    pub api_key_required: bool,
    /// The model used when none is named.
    pub default_model: Option<String>,
    /// Overrides the provider's context-window table.
    pub context_window: Option<u64>,
    /// Timeouts and retries.
    pub http: HttpSettings,
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("base_url_source", &self.base_url_source)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("api_key_required", &self.api_key_required)
            .field("default_model", &self.default_model)
            .field("context_window", &self.context_window)
            .field("http", &self.http)
            .finish()
    }
}

/// An environment lookup, injectable so tests never touch the process environment.
type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// `env(name)`, with empty values treated as unset.
fn var(env: Env<'_>, name: &str) -> Option<String> {
    env(name)
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

impl ProviderConfig {
    /// A provider named `name` speaking `kind` at its official endpoint, key required.
    pub fn new(name: impl Into<String>, kind: ProviderKind) -> Self {
        Self {
            name: name.into(),
            kind,
            base_url: None,
            base_url_source: None,
            api_key: None,
            api_key_env: None,
            api_key_required: true,
            default_model: None,
            context_window: None,
            http: HttpSettings::default(),
        }
    }

    /// The official provider of `kind` as the environment describes it: `ANTHROPIC_API_KEY` and
    /// `ANTHROPIC_BASE_URL`, or `OPENAI_API_KEY` and `OPENAI_BASE_URL` (a non-official
    /// `OPENAI_BASE_URL` makes the key optional).
    pub fn from_env(kind: ProviderKind, env: &dyn Fn(&str) -> Option<String>) -> Self {
        let (name, prefix, model) = match kind {
            ProviderKind::Anthropic => ("anthropic", "ANTHROPIC", DEFAULT_ANTHROPIC_MODEL),
            ProviderKind::OpenAi => ("openai", "OPENAI", DEFAULT_OPENAI_MODEL),
        };
        let base_url = var(env, &format!("{prefix}_BASE_URL"));
        let api_key_required = match kind {
            ProviderKind::Anthropic => true,
            ProviderKind::OpenAi => base_url
                .as_deref()
                .is_none_or(|url| url.contains("api.openai.com")),
        };
        Self {
            base_url_source: base_url
                .as_ref()
                .map(|_| format!("set by {prefix}_BASE_URL")),
            base_url,
            api_key: var(env, &format!("{prefix}_API_KEY")),
            api_key_env: Some(format!("{prefix}_API_KEY")),
            api_key_required,
            default_model: Some(model.to_owned()),
            ..Self::new(name, kind)
        }
    }

    /// The built-in provider called `name` (see the module docs), if any.
    pub fn builtin(name: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<Self> {
        let remote = |base: &str, key_env: &str| Self {
            base_url: Some(base.to_owned()),
            base_url_source: Some(format!("is Keel's built-in address for `{name}`")),
            api_key: var(env, key_env),
            api_key_env: Some(key_env.to_owned()),
            ..Self::new(name, ProviderKind::OpenAi)
        };
        let local = |base: &str| Self {
            base_url: Some(base.to_owned()),
            base_url_source: Some(format!(
                "is Keel's built-in address for `{name}`; set `providers.{name}.base_url` to change it"
            )),
            api_key_required: false,
            ..Self::new(name, ProviderKind::OpenAi)
        };
        Some(match name {
            "anthropic" => Self::from_env(ProviderKind::Anthropic, env),
            "openai" => Self::from_env(ProviderKind::OpenAi, env),
            "openrouter" => remote("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
            "deepseek" => remote("https://api.deepseek.com", "DEEPSEEK_API_KEY"),
            "ollama" => local("http://localhost:11434/v1"),
            "lmstudio" => local("http://localhost:1234/v1"),
            "vllm" => local("http://localhost:8000/v1"),
            _ => return None,
        })
    }

    /// The variable holding the key.
    pub fn key_env(&self) -> &str {
        match (&self.api_key_env, self.kind) {
            (Some(name), _) => name,
            (None, ProviderKind::Anthropic) => "ANTHROPIC_API_KEY",
            (None, ProviderKind::OpenAi) => "OPENAI_API_KEY",
        }
    }

    /// Whether the provider can be used (it has a key or needs none).
    pub fn has_credentials(&self) -> bool {
        self.api_key.is_some() || !self.api_key_required
    }

    /// The variable whose value is sent as this provider's key: [`Self::key_env`], unless the
    /// provider names none and needs none (a local server gets no one's key).
    pub fn sent_key_env(&self) -> Option<&str> {
        (self.api_key_env.is_some() || self.api_key_required).then(|| self.key_env())
    }

    /// Fills the key from [`Self::sent_key_env`] when not set.
    fn with_env_key(mut self, env: Env<'_>) -> Self {
        if self.api_key.is_none()
            && let Some(name) = self.sent_key_env()
        {
            self.api_key = var(env, name);
        }
        self
    }

    /// The provider. A required key that is missing is an [`ProviderError::Auth`] naming the
    /// variable to set.
    pub fn build(&self) -> Result<Arc<dyn Provider>, ProviderError> {
        let key = self.api_key.as_deref().filter(|key| !key.is_empty());
        if key.is_none() && self.api_key_required {
            return Err(ProviderError::Auth {
                provider: self.name.clone(),
                env_var: self.key_env().to_owned(),
                message: "no API key found (`keel login` stores one)".to_owned(),
            });
        }
        let base = self.base_url.as_deref();
        let source = match (&self.base_url_source, base) {
            (Some(source), _) => source.clone(),
            (None, Some(_)) => format!("set for the provider `{}`", self.name),
            (None, None) => "is the official default".to_owned(),
        };
        Ok(match self.kind {
            ProviderKind::Anthropic => Arc::new(
                AnthropicProvider::new(base, key.unwrap_or(""), self.key_env(), self.http.clone())?
                    .with_label(&self.name)
                    .with_context_window(self.context_window)
                    .with_base_url_source(source),
            ),
            ProviderKind::OpenAi => Arc::new(
                OpenAiProvider::new(base, key, self.key_env(), self.http.clone())?
                    .with_label(&self.name)
                    .with_context_window(self.context_window)
                    .with_base_url_source(source),
            ),
        })
    }
}

/// Resolves a model name to a provider and the model name the provider expects.
///
/// - `Some("provider/model")`: the configured provider called `provider`, else the built-in
///   one; the model is everything after the first `/` (`openrouter/anthropic/claude-sonnet-4.5`
///   works). A bare name is accepted for well-known families (`claude-*` → anthropic, `gpt-*`,
///   `o1`/`o3`/`o4*` → openai).
/// - `None`: the first configured provider with a `default_model` and credentials, then
///   Anthropic with `ANTHROPIC_API_KEY` ([`DEFAULT_ANTHROPIC_MODEL`]), then OpenAI with
///   `OPENAI_API_KEY` ([`DEFAULT_OPENAI_MODEL`]); with none, a [`ProviderError::NoProvider`] naming
///   what to set.
///
/// Keys missing from a configuration are read from `env` (never from the process environment
/// directly).
pub fn resolve_model(
    name: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
    configured: &[ProviderConfig],
) -> Result<(Arc<dyn Provider>, String), ProviderError> {
    let Some(name) = name.map(str::trim).filter(|name| !name.is_empty()) else {
        return resolve_default(env, configured);
    };
    let (prefix, model) = match name.split_once('/') {
        Some((prefix, model)) => (prefix, model),
        None => (infer_provider(name).ok_or_else(|| bad_name(name))?, name),
    };
    if model.is_empty() || prefix.is_empty() {
        return Err(bad_name(name));
    }
    let config = provider_config(prefix, env, configured).ok_or_else(|| {
        ProviderError::Config(format!(
            "unknown provider `{prefix}` in model `{name}`: use anthropic, openai, openrouter, \
             deepseek, ollama, lmstudio or vllm, or configure a provider named `{prefix}`"
        ))
    })?;
    Ok((config.build()?, model.to_owned()))
}

/// The provider called `name`: the configured one, else the built-in one, with its key read
/// from `env`.
pub fn provider_config(
    name: &str,
    env: &dyn Fn(&str) -> Option<String>,
    configured: &[ProviderConfig],
) -> Option<ProviderConfig> {
    Some(
        configured
            .iter()
            .find(|config| config.name == name)
            .cloned()
            .or_else(|| ProviderConfig::builtin(name, env))?
            .with_env_key(env),
    )
}

/// The providers worth asking for their models: every configured one that has what it needs,
/// and Anthropic and OpenAI when their key variables are set; by name, without repeats.
pub fn usable_providers(
    env: &dyn Fn(&str) -> Option<String>,
    configured: &[ProviderConfig],
) -> Vec<ProviderConfig> {
    let mut out: Vec<ProviderConfig> = Vec::new();
    let configured = configured.iter().map(|c| c.clone().with_env_key(env));
    let from_env = [ProviderKind::Anthropic, ProviderKind::OpenAi]
        .into_iter()
        .map(|kind| ProviderConfig::from_env(kind, env))
        .filter(|config| config.api_key.is_some());
    for config in configured.chain(from_env) {
        if config.has_credentials() && !out.iter().any(|known| known.name == config.name) {
            out.push(config);
        }
    }
    out
}

/// The provider that answers when no model is named (see [`resolve_model`]), if any.
fn default_provider(env: Env<'_>, configured: &[ProviderConfig]) -> Option<ProviderConfig> {
    let configured = configured
        .iter()
        .map(|config| config.clone().with_env_key(env))
        .find(|config| config.default_model.is_some() && config.has_credentials());
    // The environment fallbacks need a key, even when a local OPENAI_BASE_URL would not.
    let from_env = || {
        [ProviderKind::Anthropic, ProviderKind::OpenAi]
            .into_iter()
            .map(|kind| ProviderConfig::from_env(kind, env))
            .find(|config| config.api_key.is_some())
    };
    configured.or_else(from_env)
}

/// The model that answers when none is named (`provider/model`) and why it is that one, without
/// building the provider; `None` when nothing is usable.
pub fn default_model(
    env: &dyn Fn(&str) -> Option<String>,
    configured: &[ProviderConfig],
) -> Option<(String, String)> {
    let config = default_provider(env, configured)?;
    let model = config.default_model.clone().unwrap_or_default();
    let why = if configured.iter().any(|c| c.name == config.name) {
        format!(
            "the first configured provider with a key: `{}`, its first model",
            config.name
        )
    } else {
        format!("{} is set, and this is its default model", config.key_env())
    };
    Some((format!("{}/{model}", config.name), why))
}

fn resolve_default(
    env: Env<'_>,
    configured: &[ProviderConfig],
) -> Result<(Arc<dyn Provider>, String), ProviderError> {
    match default_provider(env, configured) {
        Some(config) => {
            let model = config.default_model.clone().unwrap_or_default();
            Ok((config.build()?, model))
        }
        None => Err(ProviderError::NoProvider(
            "no model provider configured: run `keel login`, or set ANTHROPIC_API_KEY or \
             OPENAI_API_KEY, or set `model = \"provider/model\"` in the config (e.g. \
             `model = \"ollama/qwen3\"`)"
                .to_owned(),
        )),
    }
}

/// The provider of a bare model name from a well-known family.
fn infer_provider(model: &str) -> Option<&'static str> {
    if model.starts_with("claude") {
        Some("anthropic")
    } else if model.starts_with("gpt-")
        || model.starts_with("chatgpt")
        || ["o1", "o3", "o4"]
            .iter()
            .any(|family| model.starts_with(family))
    {
        Some("openai")
    } else {
        None
    }
}

fn bad_name(name: &str) -> ProviderError {
    ProviderError::Config(format!(
        "model `{name}`: model names are `provider/model`, e.g. `anthropic/{DEFAULT_ANTHROPIC_MODEL}`, \
         `openai/{DEFAULT_OPENAI_MODEL}` or `ollama/qwen3`"
    ))
}
