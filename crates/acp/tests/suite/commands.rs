//! Slash commands: advertised after session/new, answered locally without the model.

use agent_client_protocol::v1::schema::{ContentBlock, SessionUpdate, StopReason};
use keel_core::agent::TurnStop;
use keel_testkit::acp_client::ClientOptions;

use super::support::{Harness, outcome, script};

async fn harness() -> Harness {
    Harness::start(
        ClientOptions::default(),
        script(|_turn| async { Ok(outcome(TurnStop::EndTurn)) }),
    )
    .await
}

fn said(updates: &[SessionUpdate]) -> String {
    updates
        .iter()
        .filter_map(|update| match update {
            SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                ContentBlock::Text(text) => Some(text.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn commands_are_advertised_after_session_new() {
    let harness = harness().await;
    let session = harness.session().await;
    harness
        .client
        .wait_for("the command list", |events| !events.is_empty())
        .await;
    let updates = harness.client.updates(&session);
    let SessionUpdate::AvailableCommandsUpdate(commands) = &updates[0] else {
        panic!("{updates:?}");
    };
    let names: Vec<&str> = commands
        .available_commands
        .iter()
        .map(|command| command.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "tools",
            "permissions",
            "mode",
            "model",
            "compact",
            "mcp",
            "jobs",
            "help",
            "clear",
            "init"
        ]
    );
}

#[tokio::test]
async fn tools_and_permissions_are_answered_locally() {
    let harness = harness().await;
    let session = harness.session().await;
    let answer = harness.client.prompt(&session, "/tools").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    insta::assert_snapshot!(said(&harness.turn_updates(&session)), @r"
    2 tools loaded:

    - `read` (bundled): Read a file
    - `deploy` (project): Deploy the site
    ");
    let before = harness.turn_updates(&session).len();
    harness
        .client
        .prompt(&session, "/permissions")
        .await
        .unwrap();
    let after = harness.turn_updates(&session);
    assert_eq!(
        said(&after[before..]),
        "manifest: allow read **\nsession: allow bash `cargo test`"
    );
    assert_eq!(harness.factory.turns(), 0, "the model was never asked");
}

#[tokio::test]
async fn mode_command_switches_and_announces() {
    let harness = harness().await;
    let session = harness.session().await;
    harness
        .client
        .prompt(&session, "/mode allowlist")
        .await
        .unwrap();
    let updates = harness.turn_updates(&session);
    assert!(
        matches!(&updates[0], SessionUpdate::CurrentModeUpdate(mode) if mode.current_mode_id.to_string() == "allowlist")
    );
    assert!(matches!(&updates[1], SessionUpdate::ConfigOptionUpdate(_)));
    assert_eq!(said(&updates), "Mode switched to `allowlist`.");
    harness.client.prompt(&session, "/mode nope").await.unwrap();
    assert!(said(&harness.turn_updates(&session)).contains("unknown mode `nope`"));
    // Not a command of ours: it goes to the model.
    harness
        .client
        .prompt(&session, "/review the diff")
        .await
        .unwrap();
    assert_eq!(harness.factory.turns(), 1);
}
