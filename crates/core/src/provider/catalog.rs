//! [`discover_models`]: the models each usable provider lists at its models endpoint, for the
//! editor's model picker, cached per provider for a day in the user cache directory.
//!
//! A provider that cannot be reached within [`LIST_TIMEOUT`] lists nothing (logged, never an
//! error): the picker then shows the configured models only. The cache file of a provider is
//! `{cache}/models/{name}-{sha256(base URL)[..8]}.json`, written through the runtime.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::ProviderConfig;

/// How long a provider's list is kept.
pub const MODELS_MAX_AGE: Duration = Duration::from_secs(24 * 60 * 60);
/// How long one provider may take to list its models.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Serialize, Deserialize)]
struct CacheFile {
    /// Seconds since the epoch.
    fetched_at: u64,
    base_url: String,
    models: Vec<String>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The cache file of `provider` under `cache_dir`.
pub fn cache_file(cache_dir: &Path, provider: &ProviderConfig) -> PathBuf {
    let base = provider.base_url.clone().unwrap_or_default();
    let digest = ring::digest::digest(&ring::digest::SHA256, base.as_bytes());
    let hex: String = digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let name: String = provider
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    cache_dir.join("models").join(format!("{name}-{hex}.json"))
}

fn read_cache(path: &Path, base_url: &str) -> Option<Vec<String>> {
    let text = crate::runtime::config_files::read_if_exists(path).ok()??;
    let cached: CacheFile = serde_json::from_str(&text).ok()?;
    let age = now_secs().saturating_sub(cached.fetched_at);
    (cached.base_url == base_url && age < MODELS_MAX_AGE.as_secs()).then_some(cached.models)
}

/// One provider's models, `provider/model`, from the cache or its endpoint.
async fn provider_models(provider: ProviderConfig, cache_dir: Option<PathBuf>) -> Vec<String> {
    let base_url = provider.base_url.clone().unwrap_or_default();
    let path = cache_dir.as_deref().map(|dir| cache_file(dir, &provider));
    let cached = path.as_deref().and_then(|p| read_cache(p, &base_url));
    let models = match cached {
        Some(models) => models,
        None => {
            let listed = match provider.build() {
                Ok(built) => tokio::time::timeout(LIST_TIMEOUT, built.list_models()).await,
                Err(error) => {
                    tracing::debug!(provider = %provider.name, %error, "no models listed");
                    return Vec::new();
                }
            };
            match listed {
                Ok(Ok(models)) => {
                    if let Some(path) = &path {
                        let file = CacheFile {
                            fetched_at: now_secs(),
                            base_url,
                            models: models.clone(),
                        };
                        let written = serde_json::to_string(&file)
                            .map_err(std::io::Error::other)
                            .and_then(|text| {
                                crate::runtime::config_files::write_atomically(path, &text)
                            });
                        if let Err(error) = written {
                            tracing::debug!(path = %path.display(), %error, "models list not cached");
                        }
                    }
                    models
                }
                Ok(Err(error)) => {
                    tracing::info!(provider = %provider.name, %error, "the provider listed no models");
                    Vec::new()
                }
                Err(_) => {
                    tracing::info!(provider = %provider.name, "the models list timed out");
                    Vec::new()
                }
            }
        }
    };
    models
        .into_iter()
        .map(|model| format!("{}/{model}", provider.name))
        .collect()
}

/// The models of the providers in `providers` whose lists are cached and fresh
/// (`provider/model`), without asking any provider: what an editor can be offered at once.
pub fn cached_models(providers: &[ProviderConfig], cache_dir: Option<&Path>) -> Vec<String> {
    let Some(cache_dir) = cache_dir else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for provider in providers {
        let base_url = provider.base_url.clone().unwrap_or_default();
        let Some(models) = read_cache(&cache_file(cache_dir, provider), &base_url) else {
            continue;
        };
        for model in models {
            let model = format!("{}/{model}", provider.name);
            if !out.contains(&model) {
                out.push(model);
            }
        }
    }
    out
}

/// The models of every provider in `providers` (asked in parallel), `provider/model`, in the
/// providers' order.
pub async fn discover_models(
    providers: Vec<ProviderConfig>,
    cache_dir: Option<PathBuf>,
) -> Vec<String> {
    let lists = futures::future::join_all(
        providers
            .into_iter()
            .map(|provider| provider_models(provider, cache_dir.clone())),
    )
    .await;
    let mut out: Vec<String> = Vec::new();
    for model in lists.into_iter().flatten() {
        if !out.contains(&model) {
            out.push(model);
        }
    }
    out
}
