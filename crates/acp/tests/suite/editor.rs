//! The editor's files and terminals: delegated when the client advertises them, the disk and
//! local runs otherwise.

use std::path::PathBuf;
use std::time::Duration;

use agent_client_protocol::v1::schema::StopReason;
use keel_core::agent::{AgentEvent, CallStatus, TurnStop};
use keel_core::tool::{Artifact, Envelope, ToolKind, ToolOutput};
use keel_testkit::acp_client::{ClientOptions, Event, TerminalRecord};
use serde_json::json;

use super::support::{Harness, outcome, run_in_terminal, script};

fn said(harness: &Harness, session: &agent_client_protocol::v1::schema::SessionId) -> String {
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
async fn files_go_through_the_editor_when_it_serves_them() {
    let workspace = tempfile::tempdir().unwrap();
    let buffer = workspace.path().join("src/lib.rs");
    let options = ClientOptions::editor().file(&buffer, "unsaved buffer\n");
    let harness = Harness::start(
        options,
        script(|turn| async move {
            let files = turn.spec.files.clone().expect("the editor serves files");
            let root = &turn.spec.roots[0];
            let read = files.read_text(&root.join("src/lib.rs")).await;
            let missing = files.read_text(&root.join("nope.rs")).await;
            let wrote = files
                .write_text(&root.join("src/new.rs"), "fn new() {}\n")
                .await;
            turn.host.event(AgentEvent::Text {
                message_id: "m".into(),
                text: format!("{read:?}|{}|{wrote:?}", matches!(missing, Some(Err(_)))),
            });
            Ok(outcome(TurnStop::EndTurn))
        }),
    )
    .await;
    let session = harness
        .client
        .new_session(workspace.path(), &[])
        .await
        .unwrap()
        .session_id;
    harness.client.prompt(&session, "files").await.unwrap();
    let text: String = harness
        .client
        .updates(&session)
        .iter()
        .filter_map(|update| serde_json::to_value(update).ok())
        .filter_map(|update| update["content"]["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(text, r#"Some(Ok("unsaved buffer\n"))|true|Some(Ok(()))"#);
    let new_file = workspace.path().join("src/new.rs");
    assert_eq!(
        harness.client.file(&new_file).as_deref(),
        Some("fn new() {}\n")
    );
    assert!(!new_file.exists(), "the disk was not touched");
    let reads: Vec<PathBuf> = harness
        .client
        .events()
        .into_iter()
        .filter_map(|event| match event {
            Event::ReadFile { path } => Some(path),
            _ => None,
        })
        .collect();
    assert_eq!(reads, [buffer, workspace.path().join("nope.rs")]);
}

#[tokio::test]
async fn only_the_advertised_direction_is_delegated() {
    let options = ClientOptions {
        read_files: true,
        ..ClientOptions::default()
    };
    let harness = Harness::start(
        options,
        script(|turn| async move {
            let files = turn.spec.files.clone().expect("reads are served");
            let wrote = files
                .write_text(&turn.spec.roots[0].join("a.txt"), "x")
                .await;
            turn.host.event(AgentEvent::Text {
                message_id: "m".into(),
                text: format!("{}", wrote.is_none()),
            });
            Ok(outcome(TurnStop::EndTurn))
        }),
    )
    .await;
    let session = harness.session().await;
    harness.client.prompt(&session, "write").await.unwrap();
    assert_eq!(said(&harness, &session), "true");
    assert!(harness.factory.last_spec().terminals.is_none());
}

#[tokio::test]
async fn without_editor_capabilities_the_disk_and_local_runs_are_used() {
    let harness = Harness::start(
        ClientOptions::default(),
        script(|_turn| async { Ok(outcome(TurnStop::EndTurn)) }),
    )
    .await;
    harness.session().await;
    let spec = harness.factory.last_spec();
    assert!(spec.files.is_none());
    assert!(spec.terminals.is_none());
}

#[tokio::test]
async fn a_command_runs_in_the_terminal_pane() {
    let harness = Harness::start(
        ClientOptions::editor(),
        script(|turn| async move {
            let cwd = turn.spec.roots[0].clone();
            // One stream (stderr joined to stdout in the shell), so the order is fixed.
            let command = "exec 2>&1; echo out; echo err >&2; echo \"pager=$PAGER key=${ANTHROPIC_API_KEY-unset} mark=$KEEL_TEST_MARK\"; exit 3";
            turn.host.event(AgentEvent::ToolCall {
                call_id: "c1".into(),
                tool_id: "bash".into(),
                kind: ToolKind::Execute,
                args: json!({"command": command}),
                view: super::support::view(
                    "bash",
                    &json!({"command": command}),
                    &cwd.display().to_string(),
                ),
            });
            let ran = run_in_terminal(&turn, "c1", command, &cwd, Duration::from_secs(600))
                .await
                .expect("the terminal ran");
            let output = ToolOutput::text(ran.output.clone())
                .with("exit_code", ran.exit_code.unwrap_or(-1))
                .artifact(Artifact::Terminal {
                    terminal_id: ran.terminal_id.clone(),
                });
            let envelope = Envelope::from_result(Ok(output), Duration::ZERO);
            turn.host.event(AgentEvent::ToolResult {
                call_id: "c1".into(),
                status: CallStatus::Completed,
                envelope: envelope.clone(),
            });
            turn.host.call_finished("c1", &envelope.artifacts);
            turn.host.event(AgentEvent::Text {
                message_id: "m".into(),
                text: format!(
                    "{:?}|{:?}|{}|{}",
                    ran.output, ran.exit_code, ran.truncated, ran.timed_out
                ),
            });
            Ok(outcome(TurnStop::EndTurn))
        }),
    )
    .await;
    let session = harness.session().await;
    let answer = harness.client.prompt(&session, "run").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    let events = harness.events_json(&session);
    let said = events.last().unwrap()["update"]["content"]["text"].clone();
    // The request's own variables reach the command too (how the sandbox helper will find its
    // profile once it travels out of band).
    assert_eq!(
        said,
        r#""out\nerr\npager=cat key= mark=terminal-env\n"|Some(3)|false|false"#
    );

    let records = harness.client.terminal_records();
    let TerminalRecord::Create {
        terminal_id,
        command,
        args,
        cwd,
        env,
        output_byte_limit,
        ..
    } = &records[0]
    else {
        panic!("{records:?}");
    };
    assert_eq!(command, "bash");
    assert_eq!(args[0], "-c");
    assert!(env.contains(&("GIT_PAGER".into(), "cat".into())), "{env:?}");
    assert!(
        env.contains(&("ANTHROPIC_API_KEY".into(), String::new())),
        "{env:?}"
    );
    assert_eq!(cwd.as_deref(), Some(harness.root().as_path()));
    assert_eq!(*output_byte_limit, Some(1024));
    // Released once, and only after the call's final update embedding the terminal.
    let releases: Vec<usize> = harness
        .client
        .events()
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, Event::Terminal(TerminalRecord::Release { .. })))
        .map(|(index, _)| index)
        .collect();
    assert_eq!(releases.len(), 1);
    let final_update = events
        .iter()
        .position(|e| e["update"]["status"] == "completed")
        .unwrap();
    assert!(final_update < releases[0]);
    assert_eq!(
        events[final_update]["update"]["content"][0],
        json!({"type": "terminal", "terminalId": terminal_id})
    );
    // The terminal was embedded as soon as it existed.
    let embedded = events
        .iter()
        .position(|e| e["update"]["content"][0]["type"] == "terminal")
        .unwrap();
    assert!(embedded < final_update);
}

#[tokio::test]
async fn a_terminal_that_outlives_its_timeout_is_killed() {
    let harness = Harness::start(
        ClientOptions::editor(),
        script(|turn| async move {
            let cwd = turn.spec.roots[0].clone();
            let ran = run_in_terminal(
                &turn,
                "c1",
                "echo started; exec sleep 600",
                &cwd,
                Duration::from_millis(300),
            )
            .await
            .expect("the terminal ran");
            turn.host.event(AgentEvent::Text {
                message_id: "m".into(),
                text: format!("{:?}|{}|{:?}", ran.output, ran.timed_out, ran.exit_code),
            });
            Ok(outcome(TurnStop::EndTurn))
        }),
    )
    .await;
    let session = harness.session().await;
    harness.client.prompt(&session, "run").await.unwrap();
    assert_eq!(said(&harness, &session), r#""started\n"|true|None"#);
    let records = harness.client.terminal_records();
    assert!(
        records
            .iter()
            .any(|r| matches!(r, TerminalRecord::Kill { .. })),
        "{records:?}"
    );
    // Never announced as a call's terminal: released when the turn ended.
    assert!(
        matches!(records.last(), Some(TerminalRecord::Release { .. })),
        "{records:?}"
    );
}

/// A hard-linked file is never written through `fs/write_text_file` (the editor would write
/// through the link, into every other name of the file): the runtime replaces it on the disk.
/// An ordinary file still goes to the editor.
#[tokio::test]
async fn hard_linked_files_are_not_written_through_the_editor() {
    let base = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(base.path()).unwrap();
    let workspace = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "outside\n").unwrap();
    std::fs::hard_link(outside.join("secret.txt"), workspace.join("linked.txt")).unwrap();
    let scratch = base.join("scratch");
    let harness = Harness::start(
        ClientOptions::editor(),
        script(move |turn| {
            let scratch = scratch.clone();
            async move {
                let runtime = keel_core::runtime::Runtime::new(keel_core::runtime::RuntimeConfig {
                    roots: turn.spec.roots.clone(),
                    requirements: keel_core::capability::RequirementSet::fs_read_write(
                        &["{workspace}/**"],
                        &["{workspace}/**"],
                    ),
                    scratch_dir: scratch,
                    ..Default::default()
                })
                .unwrap()
                .with_backends(turn.spec.files.clone(), None);
                let root = &turn.spec.roots[0];
                let linked = runtime.write(&root.join("linked.txt"), b"replaced\n").await;
                let plain = runtime.write(&root.join("plain.txt"), b"plain\n").await;
                turn.host.event(AgentEvent::Text {
                    message_id: "m".into(),
                    text: format!("{}|{}", linked.is_ok(), plain.is_ok()),
                });
                Ok(outcome(TurnStop::EndTurn))
            }
        }),
    )
    .await;
    let session = harness
        .client
        .new_session(&workspace, &[])
        .await
        .unwrap()
        .session_id;
    harness.client.prompt(&session, "write").await.unwrap();
    assert_eq!(said(&harness, &session), "true|true");
    let writes: Vec<PathBuf> = harness
        .client
        .events()
        .into_iter()
        .filter_map(|event| match event {
            Event::WriteFile { path, .. } => Some(path),
            _ => None,
        })
        .collect();
    assert_eq!(writes, [workspace.join("plain.txt")]);
    assert_eq!(
        std::fs::read_to_string(workspace.join("linked.txt")).unwrap(),
        "replaced\n"
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "outside\n"
    );
}
