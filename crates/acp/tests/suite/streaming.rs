//! Streaming: the loop's events become `session/update`s, in order, all before the response.

use std::time::Duration;

use agent_client_protocol::v1::schema::StopReason;
use keel_core::agent::{AgentEvent, CallStatus, TurnStop};
use keel_core::tool::{Artifact, Envelope, ToolError, ToolKind, ToolOutput, ToolProgress};
use keel_testkit::acp_client::ClientOptions;
use serde_json::json;

use super::support::{Harness, outcome, script};

fn ok(text: &str, artifacts: Vec<Artifact>) -> Envelope {
    let mut output = ToolOutput::text(text);
    output.artifacts = artifacts;
    let mut envelope = Envelope::from_result(Ok(output), Duration::ZERO);
    envelope.metadata.duration_ms = 0;
    envelope
}

#[tokio::test]
async fn a_turn_streams_text_thoughts_tool_calls_plan_and_usage() {
    let harness = Harness::start(
        ClientOptions::default(),
        script(|turn| async move {
            let root = turn.spec.roots[0].display().to_string();
            let host = turn.host;
            host.event(AgentEvent::Thinking {
                message_id: "m1".into(),
                text: "Let me look.".into(),
            });
            host.event(AgentEvent::Text {
                message_id: "m2".into(),
                text: "Reading ".into(),
            });
            host.event(AgentEvent::Text {
                message_id: "m2".into(),
                text: "the file.".into(),
            });
            host.event(AgentEvent::Usage {
                used: 1200,
                size: 200_000,
                cost: None,
            });
            host.event(AgentEvent::ToolCall {
                call_id: "c1".into(),
                tool_id: "read".into(),
                kind: ToolKind::Read,
                args: json!({"file_path": "src/main.rs", "offset": 1, "limit": 2}),
                view: super::support::view(
                    "read",
                    &json!({"file_path": "src/main.rs", "offset": 1, "limit": 2}),
                    &root,
                ),
            });
            host.event(AgentEvent::ToolStatus {
                call_id: "c1".into(),
                status: CallStatus::InProgress,
            });
            host.event(AgentEvent::ToolResult {
                call_id: "c1".into(),
                status: CallStatus::Completed,
                envelope: ok("1\tfn main() {\n2\t}\n", Vec::new()),
            });
            host.event(AgentEvent::ToolCall {
                call_id: "c2".into(),
                tool_id: "edit".into(),
                kind: ToolKind::Edit,
                args: json!({"file_path": "src/main.rs", "old_string": "{\n}", "new_string": "{ run() }"}),
                view: super::support::view(
                    "edit",
                    &json!({"file_path": "src/main.rs", "old_string": "{\n}", "new_string": "{ run() }"}),
                    &root,
                ),
            });
            host.event(AgentEvent::ToolStatus {
                call_id: "c2".into(),
                status: CallStatus::InProgress,
            });
            host.event(AgentEvent::ToolResult {
                call_id: "c2".into(),
                status: CallStatus::Completed,
                envelope: ok(
                    "edited",
                    vec![Artifact::Diff(keel_diff::AcpDiff {
                        path: format!("{root}/src/main.rs"),
                        old_text: Some("fn main() {\n}\n".into()),
                        new_text: "fn main() { run() }\n".into(),
                        bounded: false,
                    })],
                ),
            });
            host.event(AgentEvent::ToolCall {
                call_id: "c3".into(),
                tool_id: "bash".into(),
                kind: ToolKind::Execute,
                args: json!({"command": "cargo test"}),
                view: super::support::view("bash", &json!({"command": "cargo test"}), &root),
            });
            host.event(AgentEvent::ToolStatus {
                call_id: "c3".into(),
                status: CallStatus::InProgress,
            });
            host.event(AgentEvent::ToolProgress {
                call_id: "c3".into(),
                progress: ToolProgress::Output("running 1 test\n".into()),
            });
            host.event(AgentEvent::ToolResult {
                call_id: "c3".into(),
                status: CallStatus::Failed,
                envelope: Envelope::error(ToolError::external("exit code 101").to_string(), 0),
            });
            host.event(AgentEvent::Plan {
                entries: vec![
                    serde_json::from_value(
                        json!({"content": "Read main", "status": "completed", "priority": "medium"}),
                    )
                    .unwrap(),
                    serde_json::from_value(
                        json!({"content": "Run the tests", "status": "in_progress", "priority": "high"}),
                    )
                    .unwrap(),
                ],
            });
            host.event(AgentEvent::Usage {
                used: 5300,
                size: 200_000,
                cost: None,
            });
            Ok(outcome(TurnStop::EndTurn))
        }),
    )
    .await;
    let session = harness.session().await;
    let answer = harness.client.prompt(&session, "fix main").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    // Every update arrived before the response: nothing to wait for.
    let events = harness.events_json(&session);
    insta::assert_json_snapshot!("streamed_turn_updates", &events[1..]);
}

#[tokio::test]
async fn prompt_content_reaches_the_engine() {
    let harness = Harness::start(
        ClientOptions::default(),
        script(|turn| async move {
            let text = serde_json::to_string(&turn.prompt).unwrap();
            turn.host.event(AgentEvent::Text {
                message_id: "m".into(),
                text,
            });
            Ok(outcome(TurnStop::MaxRequests))
        }),
    )
    .await;
    let session = harness.session().await;
    let answer = harness.client.prompt(&session, "hello").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::MaxTurnRequests);
    let events = harness.events_json(&session);
    assert_eq!(
        events.last().unwrap()["update"]["content"]["text"],
        r#"[{"type":"text","text":"hello"}]"#
    );
}

#[tokio::test]
async fn output_that_arrives_inside_the_throttle_window_is_still_shown() {
    let finish = std::sync::Arc::new(tokio::sync::Notify::new());
    let release = finish.clone();
    let harness = Harness::start(
        ClientOptions::default(),
        script(move |turn| {
            let finish = release.clone();
            async move {
                turn.host.event(AgentEvent::ToolCall {
                    call_id: "c1".into(),
                    tool_id: "bash".into(),
                    kind: ToolKind::Execute,
                    args: json!({"command": "make"}),
                    view: super::support::view("bash", &json!({"command": "make"}), "/"),
                });
                for chunk in ["compiling\n", "linking\n"] {
                    turn.host.event(AgentEvent::ToolProgress {
                        call_id: "c1".into(),
                        progress: ToolProgress::Output(chunk.into()),
                    });
                }
                // The command goes quiet; the second chunk must show without more output.
                finish.notified().await;
                turn.host.event(AgentEvent::ToolResult {
                    call_id: "c1".into(),
                    status: CallStatus::Completed,
                    envelope: ok("compiling\nlinking\n", Vec::new()),
                });
                Ok(outcome(TurnStop::EndTurn))
            }
        }),
    )
    .await;
    let session = harness.session().await;
    let prompt = harness.client.start_prompt(&session, "build");
    let both = "```console\ncompiling\nlinking\n```";
    let escaped = serde_json::to_string(both).unwrap();
    let needle = &escaped[1..escaped.len() - 1];
    harness
        .client
        .wait_for("the delayed output update", |events| {
            events.iter().any(|event| {
                matches!(event, keel_testkit::acp_client::Event::Update(n)
                    if serde_json::to_string(&n.update).unwrap().contains(needle))
            })
        })
        .await;
    finish.notify_one();
    prompt.await.unwrap().unwrap();
    let contents: Vec<String> = harness
        .events_json(&session)
        .iter()
        .filter(|event| event["update"]["toolCallId"] == "c1")
        .filter_map(|event| {
            event["update"]["content"][0]["content"]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(
        contents,
        ["```console\ncompiling\n```", both, both],
        "first chunk at once, the second after the window, then the final update"
    );
}
