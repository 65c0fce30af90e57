//! From the configuration to a ready model provider: `[providers.NAME]` tables become
//! [`provider::ProviderConfig`]s, and [`resolve_provider`] picks the session's model.

use std::path::Path;
use std::sync::Arc;

use super::{Config, ProviderSettings};
use crate::provider::{self, Provider, ProviderError, ScriptedProvider};

/// Names the script file of the `scripted` provider (`model = "scripted/NAME"`), used by the
/// offline demo and by tests.
pub const ENV_SCRIPT: &str = "KEEL_SCRIPT";
/// The provider name that replays a script instead of calling a model.
pub const SCRIPTED_PROVIDER: &str = "scripted";

/// Whether `name` is a provider Keel knows without configuration.
pub fn is_built_in_provider(name: &str) -> bool {
    name == SCRIPTED_PROVIDER || provider::ProviderConfig::builtin(name, &|_| None).is_some()
}

impl ProviderSettings {
    /// The provider settings this table describes, on top of the built-in provider of the same
    /// name when there is one. The key is read from the environment at resolution.
    pub fn to_provider_config(
        &self,
        name: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<provider::ProviderConfig> {
        let built_in = provider::ProviderConfig::builtin(name, env);
        let mut out = match (self.kind, built_in) {
            (Some(kind), Some(base)) if kind != base.kind => {
                provider::ProviderConfig::new(name, kind)
            }
            (_, Some(base)) => base,
            (Some(kind), None) => {
                let mut fresh = provider::ProviderConfig::new(name, kind);
                // A custom endpoint without a key variable is a local server.
                fresh.api_key_required = self.api_key_env.is_some();
                fresh
            }
            (None, None) => return None,
        };
        if let Some(url) = &self.base_url {
            out.base_url = Some(url.clone());
            out.base_url_source = Some(format!(
                "set by `providers.{name}.base_url` in the configuration (`keel config show` \
                 names the file)"
            ));
        }
        if let Some(var) = &self.api_key_env {
            out.api_key_env = Some(var.clone());
            out.api_key = None;
        }
        if let Some(model) = self.models.first() {
            out.default_model = Some(model.clone());
        }
        if self.context_window.is_some() {
            out.context_window = self.context_window;
        }
        Some(out)
    }
}

impl Config {
    /// Every configured provider, ready for [`provider::resolve_model`].
    pub fn provider_configs(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Vec<provider::ProviderConfig> {
        self.providers
            .iter()
            .filter_map(|(name, table)| table.to_provider_config(name, env))
            .collect()
    }
}

/// The provider and model name of a session.
///
/// `model = "scripted/NAME"` replays the JSON script named by `KEEL_SCRIPT` (with `{workspace}`
/// replaced by `workspace`); every other model goes through [`provider::resolve_model`] with the
/// configured providers. `env` is the environment lookup (the process environment in the binary).
pub fn resolve_provider(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
    workspace: Option<&Path>,
) -> Result<(Arc<dyn Provider>, String), ProviderError> {
    if let Some(model) = &config.model
        && model.provider == SCRIPTED_PROVIDER
    {
        let path = env(ENV_SCRIPT).filter(|p| !p.is_empty()).ok_or_else(|| {
            ProviderError::Config(format!(
                "model `{model}` replays a script: set {ENV_SCRIPT} to the script's path"
            ))
        })?;
        let mut scripted = ScriptedProvider::from_file(&path)?;
        if let Some(workspace) = workspace {
            scripted = scripted.with_var("workspace", workspace.display().to_string());
        }
        return Ok((Arc::new(scripted), model.model.clone()));
    }
    let name = config.model.as_ref().map(ToString::to_string);
    provider::resolve_model(name.as_deref(), env, &config.provider_configs(env))
}
