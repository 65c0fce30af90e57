//! Approvals: `TurnHost::approve` becomes `session/request_permission` with the full preview;
//! answers map back through one table; requests are serialized and fail closed.

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason};
use keel_core::agent::{
    AgentEvent, ApprovalRequest, QuestionItem, QuestionOption, TurnHost, TurnStop,
};
use keel_core::tool::{Preview, ToolKind};
use keel_testkit::acp_client::{ClientOptions, Event, PermissionReply};
use serde_json::json;

use super::support::{Harness, Script, outcome, script, view};

fn edit_request(call_id: &str, root: &str, always: Option<&str>) -> ApprovalRequest {
    ApprovalRequest {
        call_id: call_id.into(),
        tool_id: "edit".into(),
        kind: ToolKind::Edit,
        args: json!({"file_path": "src/lib.rs", "old_string": "a", "new_string": "b"}),
        view: view(
            "edit",
            &json!({"file_path": "src/lib.rs", "old_string": "a", "new_string": "b"}),
            root,
        ),
        preview: Some(Preview::Diff(keel_diff::AcpDiff {
            path: format!("{root}/src/lib.rs"),
            old_text: Some("let a = 1;\n".into()),
            new_text: "let b = 1;\n".into(),
            bounded: false,
        })),
        reason: String::new(),
        why: String::new(),
        always_scope: always.map(str::to_owned),
        unconfined: false,
    }
}

fn bash_request(call_id: &str, root: &str) -> ApprovalRequest {
    ApprovalRequest {
        call_id: call_id.into(),
        tool_id: "bash".into(),
        kind: ToolKind::Execute,
        args: json!({"command": "cargo test --workspace"}),
        view: view("bash", &json!({"command": "cargo test --workspace"}), root),
        preview: Some(Preview::Command {
            command: "cargo test --workspace".into(),
            cwd: root.into(),
        }),
        reason: "`bash` asks by default".into(),
        why: String::new(),
        always_scope: Some("commands starting with `cargo test`".into()),
        unconfined: false,
    }
}

fn say(host: &dyn TurnHost, text: String) {
    host.event(AgentEvent::Text {
        message_id: "m".into(),
        text,
    });
}

/// A turn that asks about `count` bash calls in a row and says each answer.
fn ask_bash(count: usize) -> Script {
    script(move |turn| async move {
        let root = turn.spec.roots[0].display().to_string();
        for index in 0..count {
            let answer = turn
                .host
                .approve(bash_request(&format!("c{index}"), &root))
                .await;
            say(&*turn.host, format!("{answer:?};"));
        }
        Ok(outcome(TurnStop::EndTurn))
    })
}

fn answers(harness: &Harness, session: &agent_client_protocol::v1::schema::SessionId) -> String {
    harness
        .events_json(session)
        .iter()
        .filter_map(|event| {
            event["update"]["content"]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

#[tokio::test]
async fn an_edit_approval_carries_the_diff_and_scoped_options() {
    let harness = Harness::start(
        ClientOptions::default()
            .permissions([PermissionReply::Choose(PermissionOptionKind::AllowOnce)]),
        script(|turn| async move {
            let root = turn.spec.roots[0].display().to_string();
            let request = edit_request("c1", &root, Some("edits to `src/lib.rs`"));
            turn.host.event(AgentEvent::ToolCall {
                call_id: "c1".into(),
                tool_id: "edit".into(),
                kind: ToolKind::Edit,
                args: request.args.clone(),
                view: request.view.clone(),
            });
            let answer = turn.host.approve(request).await;
            say(&*turn.host, format!("{answer:?}"));
            Ok(outcome(TurnStop::EndTurn))
        }),
    )
    .await;
    let session = harness.session().await;
    harness.client.prompt(&session, "edit").await.unwrap();
    let events = harness.events_json(&session);
    // The tool call is announced before the permission request.
    assert_eq!(events[1]["update"]["sessionUpdate"], "tool_call");
    insta::assert_json_snapshot!(events[2], @r#"
    {
      "permission": {
        "toolCall": {
          "toolCallId": "c1",
          "kind": "edit",
          "status": "pending",
          "title": "Edit src/lib.rs",
          "name": "edit",
          "content": [
            {
              "type": "diff",
              "path": "[root]/src/lib.rs",
              "oldText": "let a = 1;\n",
              "newText": "let b = 1;\n"
            },
            {
              "type": "content",
              "content": {
                "type": "text",
                "text": "Keel will apply this change to `src/lib.rs`."
              }
            }
          ],
          "locations": [
            {
              "path": "[root]/src/lib.rs"
            }
          ],
          "rawInput": {
            "file_path": "src/lib.rs",
            "old_string": "a",
            "new_string": "b"
          }
        },
        "options": [
          {
            "optionId": "allow-once",
            "name": "Allow once",
            "kind": "allow_once"
          },
          {
            "optionId": "allow-always",
            "name": "Always allow edits to `src/lib.rs` in this session",
            "kind": "allow_always"
          },
          {
            "optionId": "reject-once",
            "name": "Reject",
            "kind": "reject_once"
          },
          {
            "optionId": "reject-always",
            "name": "Always reject edits to `src/lib.rs` in this session",
            "kind": "reject_always"
          }
        ],
        "answer": "allow-once"
      }
    }
    "#);
    assert_eq!(answers(&harness, &session), "AllowOnce");
}

#[tokio::test]
async fn a_command_approval_shows_the_command_and_where_it_runs() {
    let harness = Harness::start(ClientOptions::default(), ask_bash(1)).await;
    let session = harness.session().await;
    harness.client.prompt(&session, "test").await.unwrap();
    let requests = harness.client.permission_requests();
    let content = serde_json::to_value(&requests[0].tool_call.fields.content).unwrap();
    let root = harness.root().display().to_string();
    assert_eq!(
        content[0]["content"]["text"],
        "```sh\ncargo test --workspace\n```"
    );
    assert_eq!(
        content[1]["content"]["text"],
        format!("Keel will run this command in `{root}`.\n\n`bash` asks by default")
    );
    assert_eq!(
        requests[0].tool_call.fields.title.as_deref(),
        Some("cargo test --workspace")
    );
    // The script was empty: the client rejected.
    assert_eq!(answers(&harness, &session), "RejectOnce;");
}

#[tokio::test]
async fn every_answer_maps_back() {
    let harness = Harness::start(
        ClientOptions::default().permissions([
            PermissionReply::Choose(PermissionOptionKind::AllowAlways),
            PermissionReply::Choose(PermissionOptionKind::RejectOnce),
            PermissionReply::Choose(PermissionOptionKind::RejectAlways),
            PermissionReply::Choose(PermissionOptionKind::AllowOnce),
            PermissionReply::Select("nonsense".into()),
            PermissionReply::Fail,
        ]),
        ask_bash(6),
    )
    .await;
    let session = harness.session().await;
    let answer = harness.client.prompt(&session, "go").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    assert_eq!(
        answers(&harness, &session),
        "AllowAlways;RejectOnce;RejectAlways;AllowOnce;RejectOnce;RejectOnce;"
    );
}

#[tokio::test]
async fn without_an_always_scope_only_once_options_are_offered() {
    let harness = Harness::start(
        ClientOptions::default()
            .permissions([PermissionReply::Choose(PermissionOptionKind::AllowAlways)]),
        script(|turn| async move {
            let root = turn.spec.roots[0].display().to_string();
            let answer = turn.host.approve(edit_request("c1", &root, None)).await;
            say(&*turn.host, format!("{answer:?}"));
            Ok(outcome(TurnStop::EndTurn))
        }),
    )
    .await;
    let session = harness.session().await;
    harness.client.prompt(&session, "edit").await.unwrap();
    let requests = harness.client.permission_requests();
    let kinds: Vec<PermissionOptionKind> = requests[0].options.iter().map(|o| o.kind).collect();
    assert_eq!(
        kinds,
        [
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::RejectOnce
        ]
    );
    // The client wanted "always" and, not offered it, rejected.
    assert_eq!(answers(&harness, &session), "RejectOnce");
}

#[tokio::test]
async fn requests_of_a_session_are_serialized() {
    let harness = Harness::start(
        ClientOptions::default().permissions([
            PermissionReply::Hold,
            PermissionReply::Choose(PermissionOptionKind::AllowOnce),
        ]),
        script(|turn| async move {
            let root = turn.spec.roots[0].display().to_string();
            let (first, second) = tokio::join!(
                turn.host.approve(bash_request("c1", &root)),
                turn.host.approve(edit_request("c2", &root, None)),
            );
            say(&*turn.host, format!("{first:?};{second:?}"));
            Ok(outcome(TurnStop::EndTurn))
        }),
    )
    .await;
    let session = harness.session().await;
    let prompt = harness.client.start_prompt(&session, "both");
    harness
        .client
        .wait_for("the first permission request", |events| {
            events.iter().any(|e| matches!(e, Event::Permission { .. }))
        })
        .await;
    assert_eq!(
        harness
            .client
            .answer_held(&session, PermissionOptionKind::AllowOnce)
            .unwrap(),
        1
    );
    prompt.await.unwrap().unwrap();
    let held: Vec<usize> = harness
        .client
        .events()
        .iter()
        .filter_map(|event| match event {
            Event::Permission { held, .. } => Some(*held),
            _ => None,
        })
        .collect();
    // The second request came only once the first was answered.
    assert_eq!(held, [0, 0]);
    assert_eq!(answers(&harness, &session), "AllowOnce;AllowOnce");
}

#[tokio::test]
async fn a_cancelled_outcome_is_cancelled() {
    let harness = Harness::start(
        ClientOptions::default().permissions([PermissionReply::Cancel]),
        ask_bash(1),
    )
    .await;
    let session = harness.session().await;
    harness.client.prompt(&session, "go").await.unwrap();
    assert_eq!(answers(&harness, &session), "Cancelled;");
}

#[tokio::test]
async fn questions_become_choices() {
    let harness = Harness::start(
        ClientOptions::default().permissions([
            PermissionReply::Select("answer-0".into()),
            PermissionReply::Select("skip".into()),
        ]),
        script(|turn| async move {
            let question = QuestionItem {
                question: "Which database?".into(),
                header: Some("Storage".into()),
                options: vec![
                    QuestionOption {
                        label: "SQLite".into(),
                        description: Some("one file".into()),
                    },
                    QuestionOption {
                        label: "Postgres".into(),
                        description: None,
                    },
                ],
                multi_select: false,
            };
            let first = turn.host.ask(vec![question.clone()]).await;
            let skipped = turn.host.ask(vec![question]).await;
            let free = turn
                .host
                .ask(vec![QuestionItem {
                    question: "Name?".into(),
                    header: None,
                    options: Vec::new(),
                    multi_select: false,
                }])
                .await;
            say(
                &*turn.host,
                format!("{first:?}|{}|{}", skipped.is_err(), free.is_err()),
            );
            Ok(outcome(TurnStop::EndTurn))
        }),
    )
    .await;
    let session = harness.session().await;
    harness.client.prompt(&session, "ask").await.unwrap();
    assert_eq!(answers(&harness, &session), r#"Ok([["SQLite"]])|true|true"#);
    let requests = harness.client.permission_requests();
    assert_eq!(requests.len(), 2, "the free-text question is not asked");
    let names: Vec<&str> = requests[0]
        .options
        .iter()
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(names, ["\"SQLite\"", "\"Postgres\"", "Skip"]);
    // A question allows nothing: no option of an allow kind.
    assert!(
        requests[0]
            .options
            .iter()
            .all(|o| o.kind == PermissionOptionKind::RejectOnce),
        "{requests:#?}"
    );
}
