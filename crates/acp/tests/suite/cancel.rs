//! Cancellation: during streaming, during a pending permission request and during a running
//! command, the turn answers `cancelled` (whatever the engine returns) and nothing is left
//! running.

use std::time::Duration;

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason};
use keel_acp::server::EngineError;
use keel_core::agent::{AgentEvent, CallStatus, TurnStop};
use keel_core::tool::{Envelope, ToolKind};
use keel_testkit::acp_client::{ClientOptions, Event, PermissionReply, TerminalRecord};
use serde_json::json;

use super::support::{Harness, outcome, run_in_terminal, script};

#[tokio::test]
async fn cancel_during_streaming() {
    let harness = Harness::start(
        ClientOptions::default(),
        script(|turn| async move {
            let mut chunk = 0_u64;
            while !turn.cancel.is_cancelled() {
                chunk += 1;
                turn.host.event(AgentEvent::Text {
                    message_id: "m1".into(),
                    text: format!("{chunk} "),
                });
                tokio::task::yield_now().await;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            // The engine may fail while aborting; the client still hears `cancelled`.
            Err(EngineError::failed("stream aborted"))
        }),
    )
    .await;
    let session = harness.session().await;
    let prompt = harness.client.start_prompt(&session, "count");
    harness
        .client
        .wait_for("streaming to start", |events| events.len() > 3)
        .await;
    harness.client.cancel(&session).unwrap();
    let answer = prompt.await.unwrap().unwrap();
    assert_eq!(answer.stop_reason, StopReason::Cancelled);
}

#[tokio::test]
async fn cancel_during_a_pending_permission_request() {
    let harness = Harness::start(
        ClientOptions::default().permissions([PermissionReply::Hold, PermissionReply::Hold]),
        script(|turn| async move {
            let root = turn.spec.roots[0].display().to_string();
            let request = keel_core::agent::ApprovalRequest {
                call_id: "c1".into(),
                tool_id: "write".into(),
                kind: ToolKind::Edit,
                args: json!({"file_path": "new.txt", "content": "x"}),
                view: super::support::view(
                    "write",
                    &json!({"file_path": "new.txt", "content": "x"}),
                    &root,
                ),
                preview: Some(keel_core::tool::Preview::Diff(keel_diff::AcpDiff {
                    path: format!("{root}/new.txt"),
                    old_text: None,
                    new_text: "x".into(),
                    bounded: false,
                })),
                reason: String::new(),
                why: String::new(),
                always_scope: None,
                unconfined: false,
            };
            let answer = turn.host.approve(request).await;
            turn.host.event(AgentEvent::Text {
                message_id: "m".into(),
                text: format!("{answer:?}"),
            });
            Ok(outcome(TurnStop::Cancelled))
        }),
    )
    .await;
    let session = harness.session().await;
    for answered_by_client in [true, false] {
        let prompt = harness.client.start_prompt(&session, "write");
        let seen = harness.client.permission_requests().len();
        harness
            .client
            .wait_for("the permission request", |events| {
                events
                    .iter()
                    .filter(|e| matches!(e, Event::Permission { .. }))
                    .count()
                    > seen
            })
            .await;
        if answered_by_client {
            // A conforming client answers its pending requests `cancelled`.
            harness.client.cancel(&session).unwrap();
        } else {
            // A client that never answers: the cancel token ends the wait anyway.
            harness
                .client
                .notify(agent_client_protocol::v1::schema::CancelNotification::new(
                    session.clone(),
                ))
                .unwrap();
        }
        let answer = prompt.await.unwrap().unwrap();
        assert_eq!(answer.stop_reason, StopReason::Cancelled);
        let said = harness.events_json(&session);
        assert_eq!(
            said.last().unwrap()["update"]["content"]["text"],
            "Cancelled"
        );
    }
    // Whatever the client still holds is moot now.
    let _ = harness
        .client
        .answer_held(&session, PermissionOptionKind::RejectOnce);
}

#[tokio::test]
async fn cancel_during_a_terminal_run_kills_and_releases() {
    let harness = Harness::start(
        ClientOptions::editor(),
        script(|turn| async move {
            let cwd = turn.spec.roots[0].clone();
            turn.host.event(AgentEvent::ToolCall {
                call_id: "c1".into(),
                tool_id: "bash".into(),
                kind: ToolKind::Execute,
                args: json!({"command": "exec sleep 600"}),
                view: super::support::view(
                    "bash",
                    &json!({"command": "exec sleep 600"}),
                    &cwd.display().to_string(),
                ),
            });
            let ran = run_in_terminal(
                &turn,
                "c1",
                "exec sleep 600",
                &cwd,
                Duration::from_secs(600),
            )
            .await;
            let envelope = match ran {
                Ok(_) => Envelope::error("finished?", 0),
                Err(error) => Envelope::error(error.to_string(), 0),
            };
            turn.host.event(AgentEvent::ToolResult {
                call_id: "c1".into(),
                status: CallStatus::Failed,
                envelope,
            });
            Ok(outcome(TurnStop::Cancelled))
        }),
    )
    .await;
    let session = harness.session().await;
    let prompt = harness.client.start_prompt(&session, "sleep");
    harness
        .client
        .wait_for("the terminal", |events| {
            events
                .iter()
                .any(|e| matches!(e, Event::Update(n) if serde_json::to_string(&n.update).unwrap().contains("\"terminal\"")))
        })
        .await;
    harness.client.cancel(&session).unwrap();
    let answer = prompt.await.unwrap().unwrap();
    assert_eq!(answer.stop_reason, StopReason::Cancelled);
    let records = harness.client.terminal_records();
    let Some(TerminalRecord::Create { pid: Some(pid), .. }) = records.first() else {
        panic!("{records:?}");
    };
    assert!(
        records
            .iter()
            .any(|r| matches!(r, TerminalRecord::Kill { .. })),
        "{records:?}"
    );
    harness
        .client
        .wait_for("the release", |events| {
            events
                .iter()
                .any(|e| matches!(e, Event::Terminal(TerminalRecord::Release { .. })))
        })
        .await;
    assert!(
        super::support::pid_gone(*pid).await,
        "the command still runs"
    );
    let text = serde_json::to_string(&harness.events_json(&session)).unwrap();
    assert!(text.contains("cancelled by the user"), "{text}");
}

#[tokio::test]
async fn a_cancel_right_behind_prompts_cancels_the_running_and_the_queued_ones() {
    let harness = Harness::start(
        ClientOptions::default(),
        script(|turn| async move {
            turn.host.event(AgentEvent::Text {
                message_id: "m".into(),
                text: "started".into(),
            });
            // Only a cancel ends this turn.
            turn.cancel.cancelled().await;
            Ok(outcome(TurnStop::Cancelled))
        }),
    )
    .await;
    let session = harness.session().await;
    let first = harness.client.start_prompt(&session, "one");
    let second = harness.client.start_prompt(&session, "two");
    harness.client.cancel(&session).unwrap();
    for prompt in [first, second] {
        let answer = tokio::time::timeout(keel_testkit::acp_client::HANG_GUARD, prompt)
            .await
            .expect("the cancel reached the prompt")
            .unwrap()
            .unwrap();
        assert_eq!(answer.stop_reason, StopReason::Cancelled);
    }
    assert!(harness.factory.turns() <= 1, "the queued prompt never ran");
    // The session is usable afterwards; its next turn is cancelled on its own.
    let started = |events: &[Event]| {
        events
            .iter()
            .filter(|e| matches!(e, Event::Update(n) if matches!(&n.update, agent_client_protocol::v1::schema::SessionUpdate::AgentMessageChunk(_))))
            .count()
    };
    let before = started(&harness.client.events());
    let third = harness.client.start_prompt(&session, "three");
    harness
        .client
        .wait_for("the third turn", |events| started(events) > before)
        .await;
    harness.client.cancel(&session).unwrap();
    assert_eq!(
        third.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
}
