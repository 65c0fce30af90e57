//! The real `keel acp` binary over its stdio, as an editor starts it.

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason};
use keel_testkit::acp_client::{ClientOptions, PermissionReply, TestClient};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::json;

const LIB: &str = "pub fn greet() -> &'static str {\n    \"helo\"\n}\n";

#[tokio::test]
async fn keel_acp_serves_a_turn_over_stdio() {
    let mock = MockModel::start().await;
    // The read-before-write guard wants the file read first; reads need no approval.
    mock.push_anthropic(Turn::new().tool_call("t0", "read", json!({"file_path": "src/lib.rs"})));
    mock.push_anthropic(Turn::new().tool_call(
        "t1",
        "edit",
        json!({"file_path": "src/lib.rs", "old_string": "\"helo\"", "new_string": "\"hello\""}),
    ));
    mock.push_anthropic(Turn::text_only("Fixed."));
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(workspace.path()).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), LIB).unwrap();
    let home_dir = home.path().display().to_string();
    let config = home.path().join("config").display().to_string();
    let state = home.path().join("state").display().to_string();
    let data = home.path().join("data").display().to_string();
    let base_url = mock.base_url();
    let client = TestClient::spawn(
        ClientOptions::default()
            .permissions([PermissionReply::Choose(PermissionOptionKind::AllowOnce)]),
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
    let initialized = client.initialize().await.unwrap();
    assert_eq!(
        initialized.agent_info.map(|info| info.name).as_deref(),
        Some("keel")
    );
    let session = client.new_session(&root, &[]).await.unwrap().session_id;
    let answer = client.prompt(&session, "fix the typo").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    assert_eq!(client.permission_requests().len(), 1);
    assert_eq!(
        std::fs::read_to_string(root.join("src/lib.rs")).unwrap(),
        LIB.replace("helo", "hello")
    );
    // Closing stdin ends the process cleanly.
    client.close().await.unwrap();
}
