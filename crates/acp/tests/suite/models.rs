//! The model option: the providers' own model lists (their models endpoints) join it in the
//! background, and choosing one sends the next request to it. The real engine against the mock
//! model over real HTTP.

use std::path::Path;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{SessionUpdate, SetSessionConfigOptionRequest};
use keel_testkit::acp_client::{ClientOptions, Event};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::Value;

use super::support::{EngineHarness, engine_config};

/// The `model` option of a config option list (as JSON).
fn model_option(options: &Value) -> Value {
    options
        .as_array()
        .unwrap()
        .iter()
        .find(|option| option["id"] == "model")
        .cloned()
        .unwrap_or(Value::Null)
}

fn choices(option: &Value) -> Vec<String> {
    option["options"]
        .as_array()
        .map(|choices| {
            choices
                .iter()
                .map(|choice| choice["value"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_model_option_lists_the_providers_models_and_switching_routes_the_next_request() {
    let mock = MockModel::start().await;
    mock.set_models(&["claude-alpha", "claude-beta"]);
    mock.push_anthropic(Turn::text_only("beta here"));
    // Nothing configured: the provider comes from the environment alone.
    let mut config = engine_config(None, Path::new("/nonexistent"));
    let vars = [
        ("ANTHROPIC_BASE_URL", mock.base_url()),
        ("ANTHROPIC_API_KEY", "test-key".to_owned()),
    ];
    config.env = Arc::new(move |name: &str| {
        vars.iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.clone())
    });
    let harness = EngineHarness::with_config(ClientOptions::default(), &[], mock, config).await;

    harness
        .client
        .wait_for("the discovered models", |events| {
            events.iter().any(|event| {
                matches!(event, Event::Update(n) if matches!(&n.update,
                    SessionUpdate::ConfigOptionUpdate(update)
                        if serde_json::to_string(&update.config_options).unwrap().contains("anthropic/claude-beta")))
            })
        })
        .await;
    let update = harness
        .client
        .updates(&harness.session)
        .into_iter()
        .rev()
        .find_map(|update| match update {
            SessionUpdate::ConfigOptionUpdate(update) => Some(update),
            _ => None,
        })
        .unwrap();
    let option = model_option(&serde_json::to_value(&update.config_options).unwrap());
    assert_eq!(
        choices(&option),
        [
            "anthropic/claude-sonnet-4-5",
            "anthropic/claude-alpha",
            "anthropic/claude-beta"
        ]
    );
    assert_eq!(option["currentValue"], "anthropic/claude-sonnet-4-5");
    assert_eq!(option["options"][0]["description"], "The default model");
    assert_eq!(harness.mock.models_requests(), 1);
    // `/model` is advertised now that there are models to choose from (in the list sent once
    // the session is open).
    harness
        .client
        .wait_for("/model among the commands", |events| {
            events.iter().any(|event| {
                matches!(event, Event::Update(n) if matches!(&n.update,
                    SessionUpdate::AvailableCommandsUpdate(commands)
                        if commands.available_commands.iter().any(|c| c.name == "model")))
            })
        })
        .await;

    let answer = harness
        .client
        .request(SetSessionConfigOptionRequest::new(
            harness.session.clone(),
            "model",
            "anthropic/claude-beta",
        ))
        .await
        .unwrap();
    let option = model_option(&serde_json::to_value(&answer.config_options).unwrap());
    assert_eq!(option["currentValue"], "anthropic/claude-beta");
    harness.prompt("hello").await;
    let requests = harness.mock.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["model"], "claude-beta");
    assert!(harness.said().contains("beta here"));
}

#[tokio::test]
async fn the_thinking_option_sets_the_budget_of_the_next_request_and_thoughts_stream() {
    let harness = EngineHarness::start(
        ClientOptions::default(),
        &[],
        vec![
            Turn::text_only("quick"),
            Turn::new()
                .thinking("Let me weigh this.", "sig-1")
                .text("considered"),
        ],
    )
    .await;
    let initial = harness
        .client
        .request(SetSessionConfigOptionRequest::new(
            harness.session.clone(),
            "mode",
            "ask",
        ))
        .await
        .unwrap();
    let options = serde_json::to_value(&initial.config_options).unwrap();
    let thinking = options
        .as_array()
        .unwrap()
        .iter()
        .find(|option| option["id"] == "thinking")
        .cloned()
        .expect("a thinking option");
    assert_eq!(thinking["currentValue"], "off");
    assert_eq!(thinking["category"], "thought_level");

    harness.prompt("first").await;
    harness
        .client
        .request(SetSessionConfigOptionRequest::new(
            harness.session.clone(),
            "thinking",
            "medium",
        ))
        .await
        .unwrap();
    harness.prompt("second").await;
    let requests = harness.mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body.get("thinking"), None);
    // The answer keeps its 16000 tokens and thinking comes on top, within the 32000 Keel
    // assumes for an Anthropic model it does not know: 16384 shrinks to 16000.
    assert_eq!(
        requests[1].body["thinking"],
        serde_json::json!({"type": "enabled", "budget_tokens": 16_000})
    );
    assert_eq!(requests[1].body["max_tokens"], 32_000);
    let thoughts: String = harness
        .client
        .updates(&harness.session)
        .into_iter()
        .filter_map(|update| match update {
            SessionUpdate::AgentThoughtChunk(chunk) => match chunk.content {
                agent_client_protocol::v1::schema::ContentBlock::Text(text) => Some(text.text),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(thoughts, "Let me weigh this.");
    let error = harness
        .client
        .request(SetSessionConfigOptionRequest::new(
            harness.session.clone(),
            "thinking",
            "maximum",
        ))
        .await
        .unwrap_err();
    assert!(
        error.message.contains("use off, low, medium or high"),
        "{error:?}"
    );
}
