//! The update stream of a whole turn (real engine, mock model), snapshotted with the session id,
//! paths, message ids and durations redacted: read, edit (approved, with its diff), bash
//! (approved, output streamed), answer.

use agent_client_protocol::v1::schema::StopReason;
use keel_testkit::acp_client::ClientOptions;

use super::support::EngineHarness;
use super::turns::{LIB, allow, read_edit_bash};

#[tokio::test]
async fn read_edit_bash_with_two_approvals_on_disk_and_local_shell() {
    let harness = EngineHarness::start(
        ClientOptions::default().permissions(allow(2)),
        &[("src/lib.rs", LIB)],
        read_edit_bash(),
    )
    .await;
    let answer = harness.prompt("fix the typo").await;
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    assert_eq!(
        std::fs::read_to_string(harness.root.join("src/lib.rs")).unwrap(),
        LIB.replace("helo", "hello")
    );
    assert!(harness.root.join("build").is_dir());
    assert_eq!(harness.mock.requests().len(), 4);
    let events = harness.events_json();
    insta::assert_json_snapshot!("read_edit_bash_turn_updates", events);
}
