//! Hostile command lines against the real `keel acp` binary: the policy answers them (ask)
//! without crashing the server, however deep or long they are.

use std::time::Instant;

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason};
use keel_testkit::acp_client::{ClientOptions, PermissionReply, TestClient};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::json;

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
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(workspace.path()).unwrap();
    let home_dir = home.path().display().to_string();
    let config = home.path().join("config").display().to_string();
    let state = home.path().join("state").display().to_string();
    let data = home.path().join("data").display().to_string();
    // The 10 MB call stays in the conversation; a window that holds it keeps this test about the
    // policy's bounds rather than about compaction.
    std::fs::create_dir_all(home.path().join("config/keel")).unwrap();
    std::fs::write(
        home.path().join("config/keel/config.toml"),
        "[providers.anthropic]\ncontext_window = 100000000\n",
    )
    .unwrap();
    let base_url = mock.base_url();
    let client = TestClient::spawn(
        ClientOptions::default().permissions(
            commands
                .iter()
                .map(|_| PermissionReply::Choose(PermissionOptionKind::RejectOnce)),
        ),
        std::path::Path::new(env!("CARGO_BIN_EXE_keel")),
        &["acp"],
        &root,
        &[
            ("HOME", home_dir.as_str()),
            ("XDG_CONFIG_HOME", config.as_str()),
            ("XDG_STATE_HOME", state.as_str()),
            ("XDG_DATA_HOME", data.as_str()),
            ("ANTHROPIC_API_KEY", "test-key"),
            ("ANTHROPIC_BASE_URL", base_url.as_str()),
            ("KEEL_MODEL", "anthropic/test-model"),
        ],
    )
    .await
    .unwrap();
    client.initialize().await.unwrap();
    let session = client.new_session(&root, &[]).await.unwrap().session_id;
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
