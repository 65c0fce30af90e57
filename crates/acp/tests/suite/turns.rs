//! Whole turns with the real engine against the mock model: tool kinds and titles, approvals
//! with diffs, remembered answers, the editor's files and terminals, cancellation.

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason};
use keel_testkit::acp_client::{ClientOptions, Event, PermissionReply, TerminalRecord};
use keel_testkit::mock_model::Turn;
use serde_json::json;

use super::support::{EngineHarness, gone_with};

pub(super) const LIB: &str = "pub fn greet() -> &'static str {\n    \"helo\"\n}\n";

pub(super) fn allow(count: usize) -> Vec<PermissionReply> {
    vec![PermissionReply::Choose(PermissionOptionKind::AllowOnce); count]
}

/// read, edit (approved), bash (approved), then an answer: 4 model requests, 2 approvals.
pub(super) fn read_edit_bash() -> Vec<Turn> {
    vec![
        Turn::new().text("Let me look.").tool_call(
            "t1",
            "read",
            json!({"file_path": "src/lib.rs"}),
        ),
        Turn::new().tool_call(
            "t2",
            "edit",
            json!({"file_path": "src/lib.rs", "old_string": "\"helo\"", "new_string": "\"hello\""}),
        ),
        Turn::new().tool_call(
            "t3",
            "bash",
            json!({"command": "mkdir -p build && echo built"}),
        ),
        Turn::text_only("Fixed the greeting."),
    ]
}

fn bash(id: &str, command: &str) -> Turn {
    Turn::new().tool_call(id, "bash", json!({ "command": command }))
}

/// The final update of a call.
fn finished(harness: &EngineHarness, call_id: &str) -> serde_json::Value {
    harness
        .events_json()
        .into_iter()
        .rfind(|event| {
            event["update"]["toolCallId"] == call_id
                && matches!(
                    event["update"]["status"].as_str(),
                    Some("completed" | "failed")
                )
        })
        .unwrap_or_else(|| panic!("no final update for {call_id}"))["update"]
        .clone()
}

#[tokio::test]
async fn reject_once_then_reject_always_then_no_more_prompts() {
    let harness = EngineHarness::start(
        ClientOptions::default().permissions([
            PermissionReply::Choose(PermissionOptionKind::RejectOnce),
            PermissionReply::Choose(PermissionOptionKind::RejectAlways),
        ]),
        &[],
        vec![
            bash("t1", "mkdir made"),
            bash("t2", "mkdir made"),
            bash("t3", "mkdir made"),
            Turn::text_only("I could not create it."),
        ],
    )
    .await;
    assert_eq!(
        harness.prompt("make a dir").await.stop_reason,
        StopReason::EndTurn
    );
    assert_eq!(harness.client.permission_requests().len(), 2);
    for call in ["t1", "t2", "t3"] {
        assert_eq!(finished(&harness, call)["status"], "failed", "{call}");
    }
    let third = finished(&harness, "t3")["content"][0]["content"]["text"].clone();
    assert!(third.as_str().unwrap().contains("Denied"), "{third}");
    assert!(!harness.root.join("made").exists());
    assert_eq!(harness.mock.requests().len(), 4);
}

#[tokio::test]
async fn allow_always_then_a_matching_call_runs_without_a_prompt() {
    let harness = EngineHarness::start(
        ClientOptions::default()
            .permissions([PermissionReply::Choose(PermissionOptionKind::AllowAlways)]),
        &[],
        vec![
            bash("t1", "mkdir -p first"),
            bash("t2", "mkdir -p second"),
            Turn::text_only("Both made."),
        ],
    )
    .await;
    assert_eq!(
        harness.prompt("make dirs").await.stop_reason,
        StopReason::EndTurn
    );
    let requests = harness.client.permission_requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].options[1].name,
        "Always allow commands starting with `mkdir` in this session"
    );
    assert_eq!(finished(&harness, "t2")["status"], "completed");
    assert!(harness.root.join("first").is_dir() && harness.root.join("second").is_dir());
}

#[tokio::test]
async fn the_editor_serves_files_and_runs_commands_in_its_terminal() {
    let buffer = format!("{LIB}// unsaved change\n");
    let harness = EngineHarness::start(
        ClientOptions::editor()
            .file("src/lib.rs", buffer.clone())
            .permissions(allow(2)),
        &[("src/lib.rs", LIB)],
        read_edit_bash(),
    )
    .await;
    assert_eq!(
        harness.prompt("fix it").await.stop_reason,
        StopReason::EndTurn
    );
    let lib = harness.root.join("src/lib.rs");
    // The read saw the unsaved buffer; the edit went to the editor, not the disk.
    let read = finished(&harness, "t1")["rawOutput"]["data"]["output"].clone();
    assert!(read.as_str().unwrap().contains("unsaved change"), "{read}");
    assert_eq!(
        harness.client.file(&lib),
        Some(buffer.replace("helo", "hello"))
    );
    assert_eq!(std::fs::read_to_string(&lib).unwrap(), LIB);
    let writes: Vec<_> = harness
        .client
        .events()
        .into_iter()
        .filter(|event| matches!(event, Event::WriteFile { .. }))
        .collect();
    assert_eq!(writes.len(), 1);
    // The command ran in the editor's terminal, embedded in the call, released after its
    // final update.
    let records = harness.client.terminal_records();
    let Some(TerminalRecord::Create {
        terminal_id,
        command,
        args,
        cwd,
        output_byte_limit,
        ..
    }) = records.first()
    else {
        panic!("{records:?}");
    };
    // Keel's sandbox helper (`keel-sandbox`, beside `keel`) wraps `bash -c COMMAND`.
    assert_eq!(command.as_str(), env!("CARGO_BIN_EXE_keel-sandbox"));
    assert_eq!(args[..1], ["run".to_owned()]);
    assert_eq!(
        args[args.len() - 3..],
        [
            "bash".to_owned(),
            "-c".to_owned(),
            "mkdir -p build && echo built".to_owned()
        ]
    );
    assert_eq!(cwd.as_deref(), Some(harness.root.as_path()));
    assert_eq!(*output_byte_limit, Some(200 * 1024));
    assert!(harness.root.join("build").is_dir());
    let last = finished(&harness, "t3");
    assert_eq!(last["status"], "completed");
    assert_eq!(
        last["content"][0],
        json!({"type": "terminal", "terminalId": terminal_id})
    );
    assert_eq!(last["rawOutput"]["data"]["output"], "built\n");
    let events = harness.client.events();
    let final_at = events
        .iter()
        .rposition(|event| matches!(event, Event::Update(n) if serde_json::to_value(&n.update).unwrap()["status"] == "completed"))
        .unwrap();
    let release_at = events
        .iter()
        .position(|event| matches!(event, Event::Terminal(TerminalRecord::Release { .. })))
        .unwrap();
    assert!(final_at < release_at);
}

#[tokio::test]
async fn without_editor_capabilities_files_and_commands_stay_local() {
    let harness = EngineHarness::start(
        ClientOptions::default().permissions(allow(2)),
        &[("src/lib.rs", LIB)],
        read_edit_bash(),
    )
    .await;
    harness.prompt("fix it").await;
    let events = harness.client.events();
    assert!(
        !events.iter().any(|event| matches!(
            event,
            Event::ReadFile { .. } | Event::WriteFile { .. } | Event::Terminal(_)
        )),
        "{events:?}"
    );
    assert!(harness.root.join("build").is_dir());
}

#[tokio::test]
async fn cancel_while_the_model_streams() {
    use keel_testkit::mock_model::{Api, Reply};
    let harness = EngineHarness::start(ClientOptions::default(), &[], Vec::new()).await;
    let long = Turn::new().text("word ".repeat(400)).chunk_chars(5);
    harness.mock.push(
        Api::Anthropic,
        Reply::anthropic(&long).chunk_delay(std::time::Duration::from_millis(20)),
    );
    let prompt = harness.client.start_prompt(&harness.session, "talk");
    harness
        .client
        .wait_for("the first chunk", |events| {
            events.iter().any(|event| matches!(event, Event::Update(n) if matches!(n.update, agent_client_protocol::v1::schema::SessionUpdate::AgentMessageChunk(_))))
        })
        .await;
    harness.client.cancel(&harness.session).unwrap();
    let answer = prompt.await.unwrap().unwrap();
    assert_eq!(answer.stop_reason, StopReason::Cancelled);
    assert!(
        harness
            .mock
            .wait_for_disconnect(keel_testkit::acp_client::HANG_GUARD)
            .await,
        "the model stream was not dropped"
    );
}

#[tokio::test]
async fn cancel_while_a_permission_request_is_pending() {
    let harness = EngineHarness::start(
        ClientOptions::default().permissions([PermissionReply::Hold]),
        &[],
        vec![bash("t1", "mkdir never")],
    )
    .await;
    let prompt = harness.client.start_prompt(&harness.session, "make it");
    harness
        .client
        .wait_for("the permission request", |events| {
            events
                .iter()
                .any(|event| matches!(event, Event::Permission { .. }))
        })
        .await;
    harness.client.cancel(&harness.session).unwrap();
    assert_eq!(
        prompt.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    assert!(!harness.root.join("never").exists());
    assert_eq!(harness.mock.requests().len(), 1);
}

/// The pid a command printed as `pid N`, from the streamed output or the terminal's record.
fn printed_pid(harness: &EngineHarness) -> Option<u32> {
    let text = serde_json::to_string(&harness.events_json()).unwrap();
    text.match_indices("pid ").find_map(|(at, _)| {
        text[at + 4..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .ok()
    })
}

#[tokio::test]
async fn cancel_while_a_local_command_runs() {
    let harness = EngineHarness::start(
        ClientOptions::default().permissions(allow(1)),
        &[],
        vec![bash("t1", "echo \"pid $$\"; exec sleep 600.0401")],
    )
    .await;
    let prompt = harness.client.start_prompt(&harness.session, "wait");
    harness
        .client
        .wait_for("the command's output", |events| {
            events.iter().any(|event| {
                matches!(event, Event::Update(n) if serde_json::to_string(&n.update).unwrap().contains("```console\\npid "))
            })
        })
        .await;
    assert!(
        printed_pid(&harness).is_some(),
        "the command printed its pid"
    );
    harness.client.cancel(&harness.session).unwrap();
    assert_eq!(
        prompt.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    assert!(gone_with("600.0401").await, "the command still runs");
    assert_eq!(finished(&harness, "t1")["status"], "failed");
}

#[tokio::test]
async fn cancel_while_a_terminal_command_runs() {
    let harness = EngineHarness::start(
        ClientOptions::editor().permissions(allow(1)),
        &[],
        vec![bash("t1", "exec sleep 600.0402")],
    )
    .await;
    let prompt = harness.client.start_prompt(&harness.session, "wait");
    harness
        .client
        .wait_for("the terminal", |events| {
            events
                .iter()
                .any(|event| matches!(event, Event::Terminal(TerminalRecord::Create { .. })))
        })
        .await;
    harness.client.cancel(&harness.session).unwrap();
    assert_eq!(
        prompt.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
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
    assert!(
        matches!(records.last(), Some(TerminalRecord::Release { .. })),
        "{records:?}"
    );
    assert!(
        super::support::pid_gone(*pid).await,
        "process {pid} still runs"
    );
    assert!(gone_with("600.0402").await, "the command still runs");
}

#[tokio::test]
async fn without_credentials_sessions_open_and_prompts_name_what_to_set() {
    let scratch = tempfile::tempdir().unwrap();
    let mock = keel_testkit::mock_model::MockModel::start().await;
    let config = super::support::engine_config(None, scratch.path());
    let harness = EngineHarness::with_config(ClientOptions::default(), &[], mock, config).await;
    let error = harness
        .client
        .prompt(&harness.session, "hello")
        .await
        .unwrap_err();
    // Auth required: Zed shows its login screen, with the `keel login` terminal method.
    assert_eq!(i32::from(error.code), -32000);
    assert!(error.message.contains("ANTHROPIC_API_KEY"), "{error:?}");
    assert!(error.message.contains("keel login"), "{error:?}");
}

#[tokio::test]
async fn slash_commands_see_the_real_tools_and_rules() {
    let harness = EngineHarness::start(ClientOptions::default(), &[], Vec::new()).await;
    harness.prompt("/tools").await;
    let tools = harness.said();
    for line in [
        "- `read` (bundled)",
        "- `edit` (bundled)",
        "- `bash` (bundled)",
    ] {
        assert!(tools.contains(line), "{tools}");
    }
    harness.prompt("/permissions").await;
    assert!(
        harness.said().contains("mode: allowlist"),
        "{}",
        harness.said()
    );
    assert!(harness.mock.requests().is_empty());
}

#[tokio::test]
async fn read_only_mode_refuses_edits_without_asking() {
    let harness = EngineHarness::start(
        ClientOptions::default(),
        &[("src/lib.rs", LIB)],
        vec![
            Turn::new().tool_call(
                "t1",
                "edit",
                json!({"file_path": "src/lib.rs", "old_string": "helo", "new_string": "hello"}),
            ),
            Turn::text_only("Read-only, so I did not edit."),
        ],
    )
    .await;
    harness
        .client
        .request(
            agent_client_protocol::v1::schema::SetSessionConfigOptionRequest::new(
                harness.session.clone(),
                "mode",
                "read-only",
            ),
        )
        .await
        .unwrap();
    harness.prompt("edit it").await;
    assert!(harness.client.permission_requests().is_empty());
    assert_eq!(finished(&harness, "t1")["status"], "failed");
    assert_eq!(
        std::fs::read_to_string(harness.root.join("src/lib.rs")).unwrap(),
        LIB
    );
}

#[tokio::test]
async fn a_missing_workspace_is_invalid_params() {
    let harness = EngineHarness::start(ClientOptions::default(), &[], Vec::new()).await;
    let error = harness
        .client
        .new_session(&harness.root.join("not-there"), &[])
        .await
        .unwrap_err();
    assert_eq!(i32::from(error.code), -32602);
    assert!(error.message.contains("not-there"), "{error:?}");
}

#[tokio::test]
async fn a_session_that_cannot_open_fails_its_first_prompt_with_the_reason() {
    let harness = EngineHarness::start(
        ClientOptions::default(),
        &[(".keel/permissions.toml", "[[permission]\nthis is not toml")],
        Vec::new(),
    )
    .await;
    let error = harness
        .client
        .prompt(&harness.session, "hello")
        .await
        .unwrap_err();
    assert_eq!(i32::from(error.code), -32603);
    assert!(
        error.message.starts_with("the session could not open:")
            && error.message.contains("permissions.toml"),
        "{error:?}"
    );
}

#[tokio::test]
async fn the_project_trust_question_is_a_prompt_of_its_own() {
    let harness = EngineHarness::start(
        ClientOptions::default()
            .permissions([PermissionReply::Choose(PermissionOptionKind::AllowOnce)]),
        &[(
            ".keel/permissions.toml",
            "[[permission]]\npermission = \"bash\"\nprefix = \"mkdir\"\naction = \"allow\"\n",
        )],
        vec![bash("t1", "mkdir made"), Turn::text_only("Made.")],
    )
    .await;
    assert_eq!(
        harness.prompt("make it").await.stop_reason,
        StopReason::EndTurn
    );
    // One prompt: the trust question. Trusted, the project's rule lets the command through.
    let requests = harness.client.permission_requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let names: Vec<&str> = requests[0]
        .options
        .iter()
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "Trust it for this session",
            "Trust this project (remembered across sessions)",
            "Don't trust it (its settings stay ignored)"
        ]
    );
    assert_eq!(
        requests[0].tool_call.fields.title.as_deref(),
        Some("Trust this project's settings?")
    );
    // (As the redacted event log spells it: the id names the session.)
    let question = requests[0]
        .tool_call
        .tool_call_id
        .to_string()
        .replace(&harness.session.to_string(), "[session]");
    // Announced before the prompt and closed after it.
    let events = harness.events_json();
    let announced = events
        .iter()
        .position(|e| {
            e["update"]["sessionUpdate"] == "tool_call"
                && e["update"]["toolCallId"] == question.as_str()
        })
        .expect("the question was announced");
    let asked = events
        .iter()
        .position(|e| e.get("permission").is_some())
        .unwrap();
    assert!(announced < asked);
    assert_eq!(finished(&harness, &question)["status"], "completed");
    assert!(harness.root.join("made").is_dir());
}

/// A 64 MiB edit (the largest `edit` takes) reaches the client as a bounded diff, in the prompt
/// and in the call's final update: only the changed part of the file, said to be cut, never
/// the file's text twice over.
#[tokio::test]
async fn a_64_mib_edit_sends_a_bounded_diff() {
    const LINE: usize = 64;
    const SIZE: usize = 64 * 1024 * 1024;
    let padding = "x".repeat(LINE - 9);
    let mut big = String::with_capacity(SIZE);
    for n in 0..SIZE / LINE {
        big.push_str(&format!("{n:08}{padding}\n"));
    }
    assert_eq!(big.len(), SIZE);
    let target = format!("00500000{padding}\n");
    let harness = EngineHarness::start(
        ClientOptions::default().permissions(allow(1)),
        &[("big.txt", &big)],
        vec![
            Turn::new().tool_call("r1", "read", json!({"file_path": "big.txt", "limit": 5})),
            Turn::new().tool_call(
                "e1",
                "edit",
                json!({"file_path": "big.txt", "old_string": target, "new_string": "the middle\n"}),
            ),
            Turn::text_only("Edited."),
        ],
    )
    .await;
    drop(big);
    let response = harness.prompt("edit the middle").await;
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    let on_disk = std::fs::read_to_string(harness.root.join("big.txt")).unwrap();
    assert_eq!(on_disk.len(), SIZE - target.len() + "the middle\n".len());
    assert!(on_disk.contains(&format!("00499999{padding}\nthe middle\n00500001")));
    drop(on_disk);

    let bound = 4 * 1024 * 1024;
    let events = harness.client.events();
    let prompt = events
        .iter()
        .find_map(|event| match event {
            Event::Permission { request, .. } => Some(serde_json::to_string(request).unwrap()),
            _ => None,
        })
        .expect("the edit asked");
    assert!(
        prompt.len() < bound,
        "session/request_permission is {} bytes",
        prompt.len()
    );
    assert!(
        prompt.contains("the diff shows only the changed parts"),
        "{}",
        &prompt[..2000.min(prompt.len())]
    );
    assert!(prompt.contains("the middle"));
    let updates: Vec<String> = events
        .iter()
        .filter_map(|event| match event {
            Event::Update(notification) => Some(serde_json::to_string(notification).unwrap()),
            _ => None,
        })
        .collect();
    let largest = updates.iter().map(String::len).max().unwrap();
    assert!(largest < bound, "a session/update is {largest} bytes");
    let finished = finished(&harness, "e1");
    assert_eq!(finished["status"], "completed");
    let diff = &finished["content"][0];
    assert_eq!(diff["type"], "diff", "{finished}");
    assert_eq!(diff["_meta"]["keel"]["bounded"], true);
    assert!(diff["newText"].as_str().unwrap().contains("the middle\n"));
    assert!(
        finished["content"][1]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("only the changed parts")
    );
}
