//! The providers' own model lists: fetched from the models endpoint over real HTTP, cached per
//! provider for a day in the cache directory, and the unknown-model error that lists them.

use keel_core::provider::{
    MODELS_MAX_AGE, ProviderConfig, ProviderKind, cache_file, discover_models,
};
use keel_testkit::mock_model::MockModel;

fn anthropic_at(mock: &MockModel) -> ProviderConfig {
    let mut provider = ProviderConfig::new("anthropic", ProviderKind::Anthropic);
    provider.base_url = Some(mock.base_url());
    provider.api_key = Some("k".into());
    provider
}

fn openai_at(mock: &MockModel, name: &str) -> ProviderConfig {
    let mut provider = ProviderConfig::new(name, ProviderKind::OpenAi);
    provider.base_url = Some(mock.openai_base_url());
    provider.api_key_required = false;
    provider
}

#[tokio::test]
async fn model_lists_are_fetched_once_then_served_from_the_cache_for_a_day() {
    let mock = MockModel::start().await;
    mock.set_models(&["alpha", "beta"]);
    let cache = tempfile::tempdir().unwrap();
    let providers = vec![anthropic_at(&mock), openai_at(&mock, "box")];
    let models = discover_models(providers.clone(), Some(cache.path().to_path_buf())).await;
    assert_eq!(
        models,
        ["anthropic/alpha", "anthropic/beta", "box/alpha", "box/beta"]
    );
    assert_eq!(mock.models_requests(), 2);
    assert!(cache_file(cache.path(), &providers[0]).is_file());

    // From the cache: no request.
    mock.set_models(&["gamma"]);
    let again = discover_models(providers.clone(), Some(cache.path().to_path_buf())).await;
    assert_eq!(again, models);
    assert_eq!(mock.models_requests(), 2);

    // A list older than a day is asked for again.
    let path = cache_file(cache.path(), &providers[0]);
    let mut cached: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let old = cached["fetched_at"].as_u64().unwrap() - MODELS_MAX_AGE.as_secs() - 1;
    cached["fetched_at"] = old.into();
    std::fs::write(&path, cached.to_string()).unwrap();
    let refreshed = discover_models(providers, Some(cache.path().to_path_buf())).await;
    assert_eq!(refreshed, ["anthropic/gamma", "box/alpha", "box/beta"]);
    assert_eq!(mock.models_requests(), 3);
}

#[tokio::test]
async fn an_unreachable_provider_lists_nothing_and_the_others_still_do() {
    let mock = MockModel::start().await;
    mock.set_models(&["alpha"]);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut gone = ProviderConfig::new("gone", ProviderKind::OpenAi);
    gone.base_url = Some(format!("http://{}/v1", listener.local_addr().unwrap()));
    gone.api_key_required = false;
    drop(listener);
    let models = discover_models(vec![gone, openai_at(&mock, "box")], None).await;
    assert_eq!(models, ["box/alpha"]);
}

#[tokio::test]
async fn an_openai_style_model_not_found_lists_the_servers_models() {
    use keel_core::provider::{Message, ModelRequest, ProviderError};
    use keel_testkit::mock_model::{Api, Reply};
    let mock = MockModel::start().await;
    mock.set_models(&["qwen3", "llama3"]);
    mock.push(
        Api::OpenAi,
        Reply::json(
            404,
            serde_json::json!({"error": {"message": "model \"qwen9\" not found, try pulling it first", "type": "api_error", "code": "model_not_found"}}),
        ),
    );
    let provider = openai_at(&mock, "ollama").build().unwrap();
    let request = ModelRequest {
        model: "qwen9".into(),
        system: String::new(),
        messages: vec![Message::user_text("hi")].into(),
        tools: Vec::new(),
        max_tokens: 100,
        thinking_budget: None,
    };
    let Err(error) = provider.stream(request).await else {
        panic!("the request succeeded");
    };
    assert!(
        matches!(&error, ProviderError::UnknownModel { model, available: Ok(list), .. }
            if model == "qwen9" && list == &["qwen3", "llama3"]),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "ollama: the model `qwen9` is not available (HTTP 404: model \"qwen9\" not found, try \
         pulling it first); the models ollama offers are: qwen3, llama3; choose one with \
         `model = \"ollama/NAME\"`"
    );
}
