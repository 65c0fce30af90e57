//! Keel as Zed sees it, whole turns: the demo on every branch, a read/edit/bash turn as Zed
//! receives it (snapshot), and the title the model writes after the first turn.

use std::path::PathBuf;

use agent_client_protocol::v1::schema::{
    ContentBlock, PermissionOptionKind, SessionUpdate, StopReason,
};
use keel_testkit::acp_client::{ClientOptions, Event, PermissionReply};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::Value;

use super::support::{EngineHarness, KeelHome, TEST_MODEL, redact};
use super::turns::{LIB, allow, read_edit_bash};
use super::zed::updates;

/// The sample project and the demo script: `keel acp` on the scripted demo model, as `keel
/// demo` starts it.
async fn demo(replies: Vec<PermissionReply>) -> (String, Vec<Value>) {
    let home = KeelHome::new();
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    for file in ["README.md", "greet.py", "test.sh"] {
        std::fs::copy(
            fixtures.join("sample-project").join(file),
            home.root.join(file),
        )
        .unwrap();
    }
    let script = fixtures.join("scripted/demo.json").display().to_string();
    let mock = MockModel::start().await;
    // Zed's capabilities, but files on the disk: the test client keeps the editor's buffers in
    // memory, and the tests the demo runs read the disk.
    let options = ClientOptions {
        read_files: false,
        write_files: false,
        ..ClientOptions::zed()
    };
    let client = home
        .client(
            &mock,
            options.permissions(replies),
            &[
                ("KEEL_MODEL", "scripted/demo"),
                ("KEEL_SCRIPT", &script),
                ("KEEL_MODE", "allowlist"),
            ],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    let answer = client
        .prompt(
            &session,
            "The greeting in greet.py is misspelt. Fix it, then run the tests.",
        )
        .await
        .unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    let said: String = client
        .updates(&session)
        .into_iter()
        .filter_map(|update| match update {
            SessionUpdate::AgentMessageChunk(chunk) => match chunk.content {
                ContentBlock::Text(text) => Some(text.text),
                _ => None,
            },
            _ => None,
        })
        .collect();
    (said, updates(&client, &session))
}

#[tokio::test]
async fn zed_the_demo_says_what_happened_on_every_branch() {
    let allow = PermissionReply::Choose(PermissionOptionKind::AllowOnce);
    let reject = PermissionReply::Choose(PermissionOptionKind::RejectOnce);
    let (said, updates) = demo(vec![allow.clone(), allow.clone()]).await;
    assert!(said.contains("`sh test.sh` passes"), "{said}\n{updates:#?}");

    // The edit rejected: the file is unchanged, and the demo says the tests still fail.
    let (said, updates) = demo(vec![reject.clone(), allow.clone()]).await;
    assert!(
        !said.contains("Fixed") && !said.contains("passes"),
        "{said}"
    );
    assert!(said.contains("You rejected the edit"), "{said}");
    assert!(said.contains("still fails"), "{said}");
    let plan = updates
        .iter()
        .rev()
        .find(|update| update["sessionUpdate"] == "plan")
        .unwrap();
    assert_eq!(plan["entries"][0]["status"], "pending");

    // The command rejected: the fix is made, but nothing claims the tests pass.
    let (said, _) = demo(vec![allow.clone(), reject.clone()]).await;
    assert!(!said.contains("passes"), "{said}");
    assert!(said.contains("the tests did not run"), "{said}");

    // Both rejected.
    let (said, _) = demo(vec![reject.clone(), reject]).await;
    assert!(said.contains("Nothing changed"), "{said}");
    assert!(
        !said.contains("passes") && !said.contains("Fixed"),
        "{said}"
    );
}

#[tokio::test]
async fn zed_receives_a_read_edit_bash_turn() {
    let harness = EngineHarness::start(
        ClientOptions::zed().permissions(allow(2)),
        &[("src/lib.rs", LIB)],
        read_edit_bash(),
    )
    .await;
    harness.prompt("fix the typo").await;
    // What Zed receives: the updates and the permission requests (terminal calls are the
    // editor's own doing and carry the sandbox's temporary paths).
    let events: Vec<Value> = harness
        .events_json()
        .into_iter()
        .filter(|event| event.get("update").is_some() || event.get("permission").is_some())
        .collect();
    // The sandbox's mechanism depends on the machine.
    let events = redact(
        Value::Array(events),
        &[
            (&harness.root.display().to_string(), "[root]"),
            ("namespaces", "[mechanism]"),
            ("landlock", "[mechanism]"),
        ],
    );
    insta::assert_json_snapshot!("zed_read_edit_bash_turn", events);
}

#[tokio::test]
async fn zed_gets_a_short_title_the_model_wrote_after_the_first_turn() {
    assert!(keel_core::agent::TITLE_SYSTEM.starts_with(keel_testkit::mock_model::TITLE_MARKER));
    let home = KeelHome::new();
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::text_only("I fixed the greeting in lib.rs."));
    mock.push_title("\"Fix the greeting typo.\"");
    let client = home
        .client(&mock, ClientOptions::zed(), &[TEST_MODEL])
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    let prompt =
        "the greeting in lib.rs says helo instead of hello, could you please fix it for me";
    client.prompt(&session, prompt).await.unwrap();
    client
        .wait_for("the model's title", |events| {
            events.iter().any(|event| {
                matches!(event, Event::Update(n) if matches!(&n.update,
                    SessionUpdate::SessionInfoUpdate(info)
                        if info.title.value().is_some_and(|t| t == "Fix the greeting typo")))
            })
        })
        .await;
    // One small request, apart from the conversation's, to the session's model, about the
    // first prompt and its answer.
    let titles = mock.title_requests();
    assert_eq!(titles.len(), 1);
    assert_eq!(titles[0].body["model"], "test-model");
    assert!(
        titles[0]
            .body
            .get("tools")
            .is_none_or(|tools| tools.as_array().is_none_or(Vec::is_empty))
    );
    assert!(titles[0].raw_body.contains("please fix it for me"));
    assert_eq!(mock.requests().len(), 1);
    // The listing shows it.
    let listed = client
        .request(agent_client_protocol::v1::schema::ListSessionsRequest::new())
        .await
        .unwrap();
    assert_eq!(
        listed.sessions[0].title.as_deref(),
        Some("Fix the greeting typo")
    );
}
