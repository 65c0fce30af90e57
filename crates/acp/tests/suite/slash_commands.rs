//! Every advertised slash command on the real engine against the mock model: each does its job,
//! and none reaches the model by accident (the mock records every request).

use agent_client_protocol::v1::schema::{PermissionOptionKind, SessionUpdate, StopReason};
use keel_testkit::acp_client::{ClientOptions, PermissionReply};
use keel_testkit::mock_model::Turn;
use serde_json::json;

use super::support::EngineHarness;

/// The text said since `from` (a length of [`EngineHarness::said`]).
fn said_since(harness: &EngineHarness, from: usize) -> String {
    harness.said()[from..].to_owned()
}

/// The texts of the user messages of a recorded Anthropic request.
fn user_texts(body: &serde_json::Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|part| part["text"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn every_advertised_command_answers_without_the_model() {
    let harness = EngineHarness::start(ClientOptions::default(), &[], Vec::new()).await;
    harness
        .client
        .wait_for("the command list", |events| !events.is_empty())
        .await;
    let advertised: Vec<String> = harness
        .client
        .updates(&harness.session)
        .into_iter()
        .find_map(|update| match update {
            SessionUpdate::AvailableCommandsUpdate(update) => Some(
                update
                    .available_commands
                    .into_iter()
                    .map(|c| c.name)
                    .collect(),
            ),
            _ => None,
        })
        .unwrap();
    let cases: [(&str, &str); 12] = [
        ("/tools", "tools loaded:"),
        ("/permissions", "manifest"),
        ("/mode", "The mode is `allowlist`."),
        ("/mode ask", "Mode switched to `ask`."),
        ("/model", "The model is `anthropic/test-model`."),
        (
            "/model anthropic/test-model",
            "Model switched to `anthropic/test-model`.",
        ),
        ("/compact", "There is nothing to compact yet."),
        ("/mcp", "No MCP servers"),
        ("/jobs", "No background commands."),
        ("/help", "- `/clear`: Start a new conversation"),
        ("/clear", "Started a new conversation"),
        // `/init` is tested below: it is a model turn by design.
        ("/help", "- `/init <what to focus on>`"),
    ];
    for name in &advertised {
        assert!(
            name == "init"
                || cases
                    .iter()
                    .any(|(prompt, _)| prompt[1..].starts_with(name.as_str())),
            "advertised command /{name} is not tested"
        );
    }
    for (prompt, expected) in cases {
        let before = harness.said().len();
        let answer = harness.prompt(prompt).await;
        assert_eq!(answer.stop_reason, StopReason::EndTurn, "{prompt}");
        let said = said_since(&harness, before);
        assert!(said.contains(expected), "{prompt}: {said}");
    }
    assert!(
        harness.mock.requests().is_empty(),
        "a command reached the model: {:?}",
        harness.mock.requests()
    );
}

#[tokio::test]
async fn clear_starts_a_new_conversation_in_the_same_session() {
    let harness = EngineHarness::start(
        ClientOptions::default(),
        &[],
        vec![
            Turn::text_only("Noted: kiwi."),
            Turn::text_only("I do not know any word."),
        ],
    )
    .await;
    harness.prompt("remember the word kiwi").await;
    harness.prompt("/clear").await;
    harness.prompt("which word did I give you?").await;
    let requests = harness.mock.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        user_texts(&requests[0].body)
            .iter()
            .any(|t| t.contains("kiwi"))
    );
    let second = &requests[1].body["messages"];
    assert_eq!(second.as_array().unwrap().len(), 1, "{second}");
    assert!(!second.to_string().contains("kiwi"), "{second}");
    assert!(!second.to_string().contains("/clear"), "{second}");
}

#[tokio::test]
async fn init_asks_the_model_to_write_agents_md_through_the_edit_approval() {
    let harness = EngineHarness::start(
        ClientOptions::default()
            .permissions([PermissionReply::Choose(PermissionOptionKind::AllowOnce)]),
        &[("README.md", "# demo\n\nRun `make test`.\n")],
        vec![
            Turn::new().tool_call(
                "w1",
                "write",
                json!({"file_path": "AGENTS.md", "content": "# Agents\n\nTest with `make test`.\n"}),
            ),
            Turn::text_only("Wrote AGENTS.md."),
        ],
    )
    .await;
    let answer = harness.prompt("/init keep it short").await;
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    let requests = harness.mock.requests();
    let first = user_texts(&requests[0].body).join("\n");
    assert!(
        first.contains("Write an AGENTS.md file at the root of this workspace"),
        "{first}"
    );
    assert!(first.contains("The user adds: keep it short"), "{first}");
    assert!(!first.contains("/init"), "{first}");
    let asked = harness.client.permission_requests();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(
        std::fs::read_to_string(harness.root.join("AGENTS.md")).unwrap(),
        "# Agents\n\nTest with `make test`.\n"
    );
}
