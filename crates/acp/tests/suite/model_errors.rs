//! The errors an editor user reads when the model service is misconfigured or busy: the real
//! engine against the mock model (or a closed port) over real HTTP, through the ACP client.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::{ContentBlock, SessionUpdate, StopReason};
use keel_core::agent::EngineConfig;
use keel_core::provider::{ProviderConfig, ProviderKind};
use keel_testkit::acp_client::ClientOptions;
use keel_testkit::mock_model::{Api, MockModel, Reply, Turn};

use super::support::{EngineHarness, engine_config};

/// The engine's Anthropic provider as `ANTHROPIC_BASE_URL=base_url` describes it.
fn config_at(base_url: &str, model: &str) -> EngineConfig {
    let mut config = engine_config(None, Path::new("/nonexistent"));
    let vars = [
        ("ANTHROPIC_BASE_URL", base_url.to_owned()),
        ("ANTHROPIC_API_KEY", "test-key".to_owned()),
    ];
    let env = move |name: &str| {
        vars.iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.clone())
    };
    let mut provider = ProviderConfig::from_env(ProviderKind::Anthropic, &env);
    provider.http.retry.base_delay = Duration::from_millis(5);
    config.env = Arc::new(env);
    config.providers = vec![provider];
    config.model = Some(model.to_owned());
    config
}

/// The prompt's JSON-RPC error message.
async fn failed_prompt(harness: &EngineHarness) -> String {
    match harness.client.prompt(&harness.session, "say hi").await {
        Ok(response) => panic!("the prompt succeeded: {response:?}"),
        Err(error) => error.message,
    }
}

#[tokio::test]
async fn acp_refused_connection_names_the_base_url_and_its_variable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let mock = MockModel::start().await;
    let harness = EngineHarness::with_config(
        ClientOptions::default(),
        &[],
        mock,
        config_at(&url, "anthropic/m"),
    )
    .await;
    let message = failed_prompt(&harness).await;
    assert!(
        message.contains(&format!(
            "cannot connect to {url} (the base URL set by ANTHROPIC_BASE_URL)"
        )),
        "{message}"
    );
    assert!(
        harness.said().contains("cannot be reached at"),
        "{}",
        harness.said()
    );
}

#[tokio::test]
async fn acp_html_answer_says_the_base_url_is_not_the_api() {
    let mock = MockModel::start().await;
    mock.push(
        Api::Anthropic,
        Reply::html(404, "<html><body><h1>Not Found</h1></body></html>"),
    );
    let base = mock.base_url();
    let harness = EngineHarness::with_config(
        ClientOptions::default(),
        &[],
        mock,
        config_at(&base, "anthropic/m"),
    )
    .await;
    let message = failed_prompt(&harness).await;
    assert!(
        message.contains(&format!(
            "the base URL {base} does not look like the Anthropic Messages API"
        )) && message.contains("answered HTTP 404 with an HTML page"),
        "{message}"
    );
}

#[tokio::test]
async fn acp_unknown_model_lists_the_providers_models() {
    let mock = MockModel::start().await;
    mock.set_models(&["claude-alpha", "claude-beta"]);
    mock.push(
        Api::Anthropic,
        Reply::error(Api::Anthropic, 404, "model: claude-nope"),
    );
    let base = mock.base_url();
    let harness = EngineHarness::with_config(
        ClientOptions::default(),
        &[],
        mock,
        config_at(&base, "anthropic/claude-nope"),
    )
    .await;
    let message = failed_prompt(&harness).await;
    assert!(
        message.contains("the model `claude-nope` is not available")
            && message.contains("the models anthropic offers are: claude-alpha, claude-beta"),
        "{message}"
    );
}

#[tokio::test]
async fn acp_rate_limit_shows_a_status_update_then_answers() {
    let mock = MockModel::start().await;
    mock.push(Api::Anthropic, Reply::rate_limited(Api::Anthropic, "1"));
    mock.push_anthropic(Turn::text_only("hello after the wait"));
    let base = mock.base_url();
    let harness = EngineHarness::with_config(
        ClientOptions::default(),
        &[],
        mock,
        config_at(&base, "anthropic/m"),
    )
    .await;
    let response = harness.prompt("say hi").await;
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    let chunks: Vec<String> = harness
        .client
        .updates(&harness.session)
        .into_iter()
        .filter_map(|update| match update {
            SessionUpdate::AgentMessageChunk(chunk) => match chunk.content {
                ContentBlock::Text(text) => Some(text.text),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let status = chunks
        .iter()
        .position(|chunk| {
            chunk.contains(
                "anthropic is rate limiting requests (HTTP 429); waiting 1 s before trying again \
                 (attempt 2 of 4).",
            )
        })
        .unwrap_or_else(|| panic!("no status update: {chunks:?}"));
    let answer = chunks
        .iter()
        .position(|chunk| chunk.contains("hello"))
        .unwrap_or_else(|| panic!("no answer: {chunks:?}"));
    assert!(status < answer, "{chunks:?}");
    assert_eq!(harness.mock.requests().len(), 2);
}

#[tokio::test]
async fn acp_a_refused_key_is_auth_required_with_the_variable_to_set() {
    let mock = MockModel::start().await;
    mock.push(
        Api::Anthropic,
        Reply::error(Api::Anthropic, 401, "invalid x-api-key"),
    );
    let base = mock.base_url();
    let harness = EngineHarness::with_config(
        ClientOptions::default(),
        &[],
        mock,
        config_at(&base, "anthropic/m"),
    )
    .await;
    let error = harness
        .client
        .prompt(&harness.session, "say hi")
        .await
        .unwrap_err();
    assert_eq!(i32::from(error.code), -32000, "{error:?}");
    assert!(error.message.contains("ANTHROPIC_API_KEY"), "{error:?}");
}
