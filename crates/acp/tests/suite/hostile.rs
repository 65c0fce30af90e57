//! Hostile command lines against the real `keel acp` binary: the policy answers them (ask)
//! without crashing the server, however deep or long they are.

use std::time::Instant;

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason};
use keel_testkit::acp_client::{ClientOptions, PermissionReply};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::json;

use super::support::{KeelHome, TEST_MODEL};

/// `(((...(ls)...)))`, `levels` deep.
fn nested(levels: usize) -> String {
    format!("{}ls{}", "(".repeat(levels), ")".repeat(levels))
}

#[tokio::test]
async fn deeply_nested_and_huge_commands_are_asked_without_crashing_keel_acp() {
    let mock = MockModel::start().await;
    let commands = [
        // 100,000 levels of subshells (200 KB).
        nested(100_000),
        // 40,000 levels of command substitution, under the size limit: the depth limit answers.
        format!("echo {}id{}", "$(".repeat(40_000), ")".repeat(40_000)),
        // A 10 MB command.
        format!("echo {}", "a ".repeat(5 * 1024 * 1024)),
        // 100,000 commands chained with `&&` (a left-deep syntax tree).
        vec!["ls"; 100_000].join(" && "),
    ];
    for (i, command) in commands.iter().enumerate() {
        mock.push_anthropic(Turn::new().tool_call(
            format!("t{i}"),
            "bash",
            json!({"command": command}),
        ));
    }
    mock.push_anthropic(Turn::text_only("Done."));
    mock.push_anthropic(Turn::text_only("Still here."));
    let home = KeelHome::new();
    // The 10 MB call stays in the conversation; a window that holds it keeps this test about the
    // policy's bounds rather than about compaction.
    home.user_config("[providers.anthropic]\ncontext_window = 100000000\n");
    let client = home
        .client(
            &mock,
            ClientOptions::default().permissions(
                commands
                    .iter()
                    .map(|_| PermissionReply::Choose(PermissionOptionKind::RejectOnce)),
            ),
            &[TEST_MODEL],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    let started = Instant::now();
    let answer = client.prompt(&session, "run these").await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    // Every one of them was asked (none ran, none crashed the server).
    let asked = client.permission_requests();
    assert_eq!(asked.len(), commands.len(), "{asked:#?}");
    // The server is still alive and serves the next prompt.
    let again = client.prompt(&session, "still there?").await.unwrap();
    assert_eq!(again.stop_reason, StopReason::EndTurn);
    // Speed lives in benchmarks; the figure is printed for the record.
    eprintln!(
        "{} hostile commands (with the model round trips) answered in {elapsed:?}",
        commands.len()
    );
    client.close().await.unwrap();
}
