//! Model resolution from names, configuration and an injected environment.

use keel_core::provider::{
    DEFAULT_ANTHROPIC_MODEL, DEFAULT_OPENAI_MODEL, ProviderConfig, ProviderError, ProviderKind,
    resolve_model,
};
use keel_testkit::{MockModel, Turn};

use super::provider_support::{collect, fast_settings, simple_request};

fn env_with(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        vars.iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| (*value).to_owned())
    }
}

fn resolve(
    name: Option<&str>,
    vars: &'static [(&'static str, &'static str)],
) -> Result<(String, String), ProviderError> {
    let env = env_with(vars);
    resolve_model(name, &env, &[]).map(|(provider, model)| (provider.id().to_owned(), model))
}

#[test]
fn without_credentials_the_error_names_what_to_set() {
    let error = resolve(None, &[]).unwrap_err();
    let message = error.to_string();
    for needle in ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "model = "] {
        assert!(message.contains(needle), "{message}");
    }
    // Empty values count as unset.
    assert!(resolve(None, &[("ANTHROPIC_API_KEY", "")]).is_err());
}

#[test]
fn the_first_provider_with_credentials_gives_the_default_model() {
    let anthropic = ("anthropic".to_owned(), DEFAULT_ANTHROPIC_MODEL.to_owned());
    let openai = ("openai".to_owned(), DEFAULT_OPENAI_MODEL.to_owned());
    assert_eq!(
        resolve(None, &[("ANTHROPIC_API_KEY", "a")]).unwrap(),
        anthropic
    );
    assert_eq!(resolve(None, &[("OPENAI_API_KEY", "o")]).unwrap(), openai);
    assert_eq!(
        resolve(None, &[("OPENAI_API_KEY", "o"), ("ANTHROPIC_API_KEY", "a")]).unwrap(),
        anthropic
    );
}

#[test]
fn named_models_route_by_prefix() {
    const KEYS: &[(&str, &str)] = &[
        ("ANTHROPIC_API_KEY", "a"),
        ("OPENAI_API_KEY", "o"),
        ("OPENROUTER_API_KEY", "r"),
    ];
    let keys = KEYS;
    let ok = |provider: &str, model: &str| (provider.to_owned(), model.to_owned());
    assert_eq!(
        resolve(Some("anthropic/claude-opus-4-1"), keys).unwrap(),
        ok("anthropic", "claude-opus-4-1")
    );
    assert_eq!(
        resolve(Some("openai/gpt-4.1"), keys).unwrap(),
        ok("openai", "gpt-4.1")
    );
    assert_eq!(
        resolve(Some("claude-haiku-4-5"), keys).unwrap(),
        ok("anthropic", "claude-haiku-4-5")
    );
    assert_eq!(resolve(Some("o3"), keys).unwrap(), ok("openai", "o3"));
    assert_eq!(
        resolve(Some("openrouter/anthropic/claude-sonnet-4.5"), keys).unwrap(),
        ok("openai", "anthropic/claude-sonnet-4.5")
    );
    // Local servers need no key.
    assert_eq!(
        resolve(Some("ollama/qwen3:8b"), &[]).unwrap(),
        ok("openai", "qwen3:8b")
    );

    let error = resolve(Some("openai/gpt-5"), &[]).unwrap_err();
    assert!(
        matches!(&error, ProviderError::Auth { env_var, .. } if env_var == "OPENAI_API_KEY"),
        "{error:?}"
    );
    assert!(error.to_string().contains("set OPENAI_API_KEY"));
    let error = resolve(Some("deepseek/deepseek-chat"), &[]).unwrap_err();
    assert!(error.to_string().contains("DEEPSEEK_API_KEY"), "{error}");
    assert!(
        resolve(Some("nosuch/model"), keys)
            .unwrap_err()
            .to_string()
            .contains("unknown provider `nosuch`")
    );
    assert!(
        resolve(Some("mystery-model"), keys)
            .unwrap_err()
            .to_string()
            .contains("provider/model")
    );
    assert!(resolve(Some("anthropic/"), keys).is_err());
    // A non-official OPENAI_BASE_URL makes the key optional.
    assert!(
        resolve(
            Some("openai/llama"),
            &[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")]
        )
        .is_ok()
    );
}

#[test]
fn config_debug_redacts_the_key() {
    let env = env_with(&[("ANTHROPIC_API_KEY", "sk-ant-secret")]);
    let config = ProviderConfig::from_env(ProviderKind::Anthropic, &env);
    assert_eq!(config.api_key.as_deref(), Some("sk-ant-secret"));
    assert!(!format!("{config:?}").contains("sk-ant-secret"));
    let provider = config.build().unwrap();
    assert!(
        !format!("{provider:?}").contains("sk-ant-secret"),
        "{provider:?}"
    );
}

#[tokio::test]
async fn configured_providers_win_and_take_their_key_from_the_env() {
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::text_only("via config"));
    mock.push_openai(Turn::text_only("local default"));
    let anthropic = ProviderConfig {
        base_url: Some(mock.base_url()),
        http: fast_settings(),
        ..ProviderConfig::new("anthropic", ProviderKind::Anthropic)
    };
    let local = ProviderConfig {
        base_url: Some(mock.openai_base_url()),
        api_key_required: false,
        default_model: Some("qwen3".into()),
        http: fast_settings(),
        ..ProviderConfig::new("box", ProviderKind::OpenAi)
    };
    let configured = [anthropic, local];
    let env = env_with(&[("ANTHROPIC_API_KEY", "from-env")]);

    let (provider, model) = resolve_model(Some("anthropic/claude-x"), &env, &configured).unwrap();
    let mut request = simple_request("hi");
    request.model = model;
    let (events, error) = collect(provider.stream(request).await.unwrap()).await;
    assert!(error.is_none() && !events.is_empty());
    let sent = &mock.requests()[0];
    assert_eq!(sent.header("x-api-key"), Some("from-env"));
    assert_eq!(sent.body["model"], "claude-x");

    // No model named: the configured local provider with a default model comes first.
    let (provider, model) = resolve_model(None, &env, &configured).unwrap();
    assert_eq!((provider.id(), model.as_str()), ("openai", "qwen3"));
    let mut request = simple_request("hi");
    request.model = model;
    let (_, error) = collect(provider.stream(request).await.unwrap()).await;
    assert!(error.is_none());
    assert_eq!(mock.requests()[1].path, "/v1/chat/completions");
}

#[tokio::test]
async fn errors_name_the_configured_provider() {
    let mock = MockModel::start().await;
    let mut http = fast_settings();
    http.retry = keel_core::provider::RetryPolicy::none();
    let ollama = ProviderConfig {
        base_url: Some(mock.openai_base_url()),
        api_key_required: false,
        http,
        ..ProviderConfig::new("ollama", ProviderKind::OpenAi)
    };
    let env = env_with(&[]);
    let (provider, model) = resolve_model(Some("ollama/qwen3"), &env, &[ollama]).unwrap();
    assert_eq!((provider.id(), model.as_str()), ("openai", "qwen3"));
    let error = provider.stream(simple_request("hi")).await.err().unwrap();
    assert!(error.to_string().starts_with("ollama: HTTP 500"), "{error}");
}
