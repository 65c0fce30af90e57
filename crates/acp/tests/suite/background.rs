//! Background commands (`bg_start`, `bg_read`, `bg_write`, `bg_stop`) over the real `keel acp`
//! binary: started, polled for new output only, written to, stopped and gone from the process
//! table; killed when the session closes and when Keel exits; bounded per session; in the
//! editor's terminal pane when the client offers one.

use std::path::Path;
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    CloseSessionRequest, PermissionOptionKind, SessionUpdate, StopReason,
};
use keel_testkit::acp_client::{ClientOptions, PermissionReply, TerminalRecord, TestClient};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::{Value, json};

use super::support::{KeelHome, TEST_MODEL};

fn allow(times: usize) -> Vec<PermissionReply> {
    vec![PermissionReply::Choose(PermissionOptionKind::AllowOnce); times]
}

/// The text of the tool result for call `id` in a recorded request.
fn tool_result(request: &Value, id: &str) -> String {
    for message in request["messages"].as_array().unwrap() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" && block["tool_use_id"] == id {
                return match &block["content"] {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
            }
        }
    }
    panic!("no tool_result for {id} in {request}")
}

/// The result of call `id`, from the last request that carries it.
fn result_of(mock: &MockModel, id: &str) -> String {
    let requests = mock.requests();
    let request = requests
        .iter()
        .rev()
        .find(|r| {
            r.body
                .to_string()
                .contains(&format!("\"tool_use_id\":\"{id}\""))
        })
        .unwrap_or_else(|| panic!("no request carries the result of {id}"));
    tool_result(&request.body, id)
}

/// The processes whose command line contains `marker`.
fn marked(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = state
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(pid);
        }
    }
    found
}

/// Waits (up to ten seconds) until no process carries `marker`; the processes left otherwise.
async fn marked_gone(marker: &str) -> Vec<u32> {
    for _ in 0..200 {
        if marked(marker).is_empty() {
            return Vec::new();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    marked(marker)
}

/// A unique word to find a test's processes by.
fn marker(name: &str) -> String {
    format!("bgmark{}{name}", std::process::id())
}

/// The text of the session's agent messages so far.
fn said(client: &TestClient, session: &agent_client_protocol::v1::schema::SessionId) -> String {
    client
        .updates(session)
        .iter()
        .filter_map(|update| match update {
            SessionUpdate::AgentMessageChunk(chunk) => {
                Some(serde_json::to_string(&chunk.content).unwrap())
            }
            _ => None,
        })
        .collect()
}

/// An echo server on stdin: started, written to and polled twice (each poll only the new
/// output), listed by `/jobs`, stopped, and gone from the process table.
#[tokio::test]
async fn a_background_server_is_polled_written_to_stopped_and_gone() {
    let mark = marker("echo");
    let command =
        format!("echo ready {mark}; while IFS= read -r line; do echo \"echo: $line\"; done");
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::new().tool_call(
        "s1",
        "bg_start",
        json!({"command": command, "stdin": true}),
    ));
    mock.push_anthropic(Turn::new().tool_call(
        "w1",
        "bg_write",
        json!({"id": "bg-1", "input": "one\n"}),
    ));
    mock.push_anthropic(Turn::new().tool_call(
        "r1",
        "bg_read",
        json!({"id": "bg-1", "wait": 20000}),
    ));
    mock.push_anthropic(Turn::new().tool_call(
        "w2",
        "bg_write",
        json!({"id": "bg-1", "input": "two\n"}),
    ));
    mock.push_anthropic(Turn::new().tool_call(
        "r2",
        "bg_read",
        json!({"id": "bg-1", "wait": 20000}),
    ));
    mock.push_anthropic(Turn::text_only("The server answers."));
    let home = KeelHome::new();
    // Allowed: the start (decided as bash), then each write.
    let client = home
        .client(
            &mock,
            ClientOptions::default().permissions(allow(3)),
            &[TEST_MODEL],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    let answer = client.prompt(&session, "start the server").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);

    // The start was asked as a bash command would be.
    let asked = client.permission_requests();
    assert_eq!(asked.len(), 3, "{asked:?}");
    let start = result_of(&mock, "s1");
    assert!(start.contains("Started bg-1 (pid "), "{start}");
    let pid: u32 = start
        .split("(pid ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {start}"));
    // Each poll returns only what is new: the answer to its own write.
    let (first, second) = (result_of(&mock, "r1"), result_of(&mock, "r2"));
    assert!(first.contains("echo: one"), "{first}");
    assert!(!first.contains("echo: two"), "{first}");
    assert!(second.contains("echo: two"), "{second}");
    assert!(!second.contains("echo: one"), "{second}");
    assert!(!second.contains("ready"), "{second}");
    // `ready` came once: with the start, or in the first poll.
    assert_eq!(
        format!("{start}{first}{second}")
            .matches(&format!("ready {mark}"))
            .count(),
        1
    );
    assert!(first.contains("[bg-1 is running]"), "{first}");

    // Still running between turns, and listed.
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    assert!(!marked(&mark).is_empty());
    let listed = client.prompt(&session, "/jobs").await.unwrap();
    assert_eq!(listed.stop_reason, StopReason::EndTurn);
    let jobs = said(&client, &session);
    assert!(jobs.contains("`bg-1`"), "{jobs}");
    assert!(jobs.contains("running for"), "{jobs}");
    assert!(jobs.contains(&format!("pid {pid}")), "{jobs}");

    mock.push_anthropic(Turn::new().tool_call("x1", "bg_stop", json!({"id": "bg-1"})));
    mock.push_anthropic(Turn::text_only("Stopped."));
    let answer = client.prompt(&session, "stop it").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    let stopped = result_of(&mock, "x1");
    assert!(
        stopped.contains("Stopped bg-1: it and every process it started are gone (checked)"),
        "{stopped}"
    );
    // Gone from the process table: the group's leader and everything under it.
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "{pid} is still there"
    );
    assert_eq!(marked(&mark), Vec::<u32>::new());
    // And from the list.
    mock.push_anthropic(Turn::new().tool_call("r3", "bg_read", json!({"id": "bg-1"})));
    mock.push_anthropic(Turn::text_only("Gone."));
    client.prompt(&session, "read it").await.unwrap();
    let gone = result_of(&mock, "r3");
    assert!(gone.contains("no background command `bg-1`"), "{gone}");
    client.close().await.unwrap();
}

/// A command that ends on its own keeps its exit status and last output until one read.
#[tokio::test]
async fn a_finished_command_keeps_its_status_until_read_once() {
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::new().tool_call(
        "s1",
        "bg_start",
        json!({"command": "read -r line; echo \"last: $line\"; exit 3", "stdin": true}),
    ));
    mock.push_anthropic(Turn::new().tool_call(
        "w1",
        "bg_write",
        json!({"id": "bg-1", "input": "bye\n"}),
    ));
    for id in ["r1", "r2", "r3"] {
        mock.push_anthropic(Turn::new().tool_call(
            id,
            "bg_read",
            json!({"id": "bg-1", "wait": 20000}),
        ));
    }
    mock.push_anthropic(Turn::text_only("Done."));
    let home = KeelHome::new();
    let client = home
        .client(
            &mock,
            ClientOptions::default().permissions(allow(2)),
            &[TEST_MODEL],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    client.prompt(&session, "run it").await.unwrap();
    let reads: Vec<String> = ["r1", "r2", "r3"]
        .iter()
        .map(|id| result_of(&mock, id))
        .collect();
    // The last output comes in the first read; the exit with it or in the next (a read that
    // waits returns at the first news); the read after the one that told the end finds nothing.
    assert!(reads[0].contains("last: bye"), "{reads:#?}");
    let end = "[bg-1 exited with code 3; it is no longer listed]";
    let told = reads
        .iter()
        .position(|read| read.contains(end))
        .unwrap_or_else(|| panic!("{reads:#?}"));
    assert!(told <= 1, "{reads:#?}");
    assert!(
        reads[told + 1].contains("no background command `bg-1`"),
        "{reads:#?}"
    );
    assert_eq!(
        reads
            .iter()
            .filter(|read| read.contains("last: bye"))
            .count(),
        1
    );
    client.close().await.unwrap();
}

/// Closing the session kills a command still running; so does Keel's exit (stdin closed).
#[tokio::test]
async fn background_commands_die_with_their_session_and_with_keel() {
    let (closed, exited) = (marker("close"), marker("exit"));
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::new().tool_call(
        "s1",
        "bg_start",
        json!({"command": format!("echo {closed}; while :; do sleep 1; done")}),
    ));
    mock.push_anthropic(Turn::text_only("Started."));
    let home = KeelHome::new();
    let client = home
        .client(
            &mock,
            ClientOptions::default().permissions(allow(2)),
            &[TEST_MODEL],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    client.prompt(&session, "start").await.unwrap();
    assert!(!marked(&closed).is_empty(), "the command is not running");
    client
        .request(CloseSessionRequest::new(session))
        .await
        .unwrap();
    assert_eq!(marked_gone(&closed).await, Vec::<u32>::new());

    // A second session's command, still running when stdin closes: gone when `keel` has exited.
    mock.push_anthropic(Turn::new().tool_call(
        "s2",
        "bg_start",
        json!({"command": format!("echo {exited}; while :; do sleep 1; done")}),
    ));
    mock.push_anthropic(Turn::text_only("Started."));
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    client.prompt(&session, "start").await.unwrap();
    assert!(!marked(&exited).is_empty(), "the command is not running");
    client.close().await.unwrap();
    assert_eq!(marked(&exited), Vec::<u32>::new());
}

/// The per-session limit (`[limits] backgroundJobs`) refuses one more with a clear error; a
/// stopped one frees its place.
#[tokio::test]
async fn the_per_session_limit_is_enforced_with_a_clear_error() {
    let mark = marker("limit");
    let run = |n: u32| json!({"command": format!("echo {mark} {n}; while :; do sleep 1; done")});
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::new().tool_call("s1", "bg_start", run(1)));
    mock.push_anthropic(Turn::new().tool_call("s2", "bg_start", run(2)));
    mock.push_anthropic(Turn::new().tool_call("s3", "bg_start", run(3)));
    mock.push_anthropic(Turn::new().tool_call("x1", "bg_stop", json!({"id": "bg-1"})));
    mock.push_anthropic(Turn::new().tool_call("s4", "bg_start", run(4)));
    mock.push_anthropic(Turn::text_only("Done."));
    let home = KeelHome::new();
    home.user_config("[limits]\nbackgroundJobs = 2\n");
    let client = home
        .client(
            &mock,
            ClientOptions::default().permissions(allow(4)),
            &[TEST_MODEL],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    client.prompt(&session, "start three").await.unwrap();
    let refused = result_of(&mock, "s3");
    assert!(
        refused.contains(
            "2 background commands are running already (bg-1, bg-2), the most a session may \
             have; stop one with `bg_stop` first"
        ),
        "{refused}"
    );
    // The refused start took no id; the stopped one's place is free again.
    let fourth = result_of(&mock, "s4");
    assert!(fourth.contains("Started bg-3"), "{fourth}");
    client.prompt(&session, "/jobs").await.unwrap();
    let jobs = said(&client, &session);
    assert!(jobs.contains("`bg-2`") && jobs.contains("`bg-3`"), "{jobs}");
    assert!(!jobs.contains("`bg-1`"), "{jobs}");
    client.close().await.unwrap();
    assert_eq!(marked(&mark), Vec::<u32>::new());
}

/// With an editor that offers terminals, the command runs in its pane: polled through
/// `terminal/output` (new output only), stopped through `terminal/kill`, and gone.
#[tokio::test]
async fn in_the_terminal_pane_a_background_command_is_polled_and_killed() {
    let mark = marker("pane");
    let command =
        format!("echo start {mark}; i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.2; done");
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::new().tool_call("s1", "bg_start", json!({"command": command})));
    mock.push_anthropic(Turn::new().tool_call(
        "r1",
        "bg_read",
        json!({"id": "bg-1", "wait": 20000}),
    ));
    mock.push_anthropic(Turn::new().tool_call(
        "r2",
        "bg_read",
        json!({"id": "bg-1", "wait": 20000}),
    ));
    mock.push_anthropic(Turn::new().tool_call(
        "w1",
        "bg_write",
        json!({"id": "bg-1", "input": "x\n"}),
    ));
    mock.push_anthropic(Turn::new().tool_call("x1", "bg_stop", json!({"id": "bg-1"})));
    mock.push_anthropic(Turn::text_only("Done."));
    let home = KeelHome::new();
    let client = home
        .client(
            &mock,
            ClientOptions::editor().permissions(allow(2)),
            &[TEST_MODEL],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    client.prompt(&session, "watch it").await.unwrap();
    let records = client.terminal_records();
    let Some(TerminalRecord::Create { pid: Some(pid), .. }) = records.first() else {
        panic!("{records:?}");
    };
    let start = result_of(&mock, "s1");
    assert!(
        start.contains("Started bg-1 (in the editor's terminal)"),
        "{start}"
    );
    let ticks = |text: &str| -> Vec<u32> {
        text.lines()
            .filter_map(|line| line.strip_prefix("tick "))
            .filter_map(|n| n.trim().parse().ok())
            .collect()
    };
    let (first, second) = (result_of(&mock, "r1"), result_of(&mock, "r2"));
    let (before, one, two) = (ticks(&start), ticks(&first), ticks(&second));
    assert!(!two.is_empty(), "{second}");
    // Each read starts where the one before ended: no tick twice, none skipped.
    let all: Vec<u32> = before.iter().chain(&one).chain(&two).copied().collect();
    assert_eq!(
        all,
        (1..=all.len() as u32).collect::<Vec<u32>>(),
        "{start}\n{first}\n{second}"
    );
    let refused = result_of(&mock, "w1");
    assert!(refused.contains("takes no input from Keel"), "{refused}");
    let stopped = result_of(&mock, "x1");
    assert!(
        stopped.contains("Stopped bg-1: it and every process it started are gone"),
        "{stopped}"
    );
    let records = client.terminal_records();
    assert!(
        records
            .iter()
            .any(|r| matches!(r, TerminalRecord::Kill { .. })),
        "{records:?}"
    );
    assert!(
        records
            .iter()
            .any(|r| matches!(r, TerminalRecord::Release { .. })),
        "{records:?}"
    );
    assert!(super::support::pid_gone(*pid).await, "{pid} still runs");
    assert_eq!(marked_gone(&mark).await, Vec::<u32>::new());
    client.close().await.unwrap();
}

/// `bg_start` is decided as `bash`: "allow always" for a background command is the approval of
/// that bash command (the same key), and the other way round.
#[tokio::test]
async fn a_background_start_shares_bash_approval_keys() {
    let mark = marker("keys");
    // Not read-only (a read-only command is not asked at all).
    let command = format!("touch {mark}");
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::new().tool_call("s1", "bg_start", json!({"command": command})));
    mock.push_anthropic(Turn::new().tool_call("b1", "bash", json!({"command": command})));
    mock.push_anthropic(Turn::text_only("Done."));
    let home = KeelHome::new();
    let client = home
        .client(
            &mock,
            ClientOptions::default()
                .permissions([PermissionReply::Choose(PermissionOptionKind::AllowAlways)]),
            &[TEST_MODEL],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    client.prompt(&session, "echo twice").await.unwrap();
    let asked = client.permission_requests();
    assert_eq!(asked.len(), 1, "{asked:#?}");
    // The prompt offered what bash's prompt offers for the command: "always" for it.
    let offered = serde_json::to_string(&asked[0]).unwrap();
    assert!(offered.contains(&mark), "{offered}");
    let (started, ran) = (result_of(&mock, "s1"), result_of(&mock, "b1"));
    assert!(started.contains("Started bg-1"), "{started}");
    assert!(ran.contains("(no output)"), "{ran}");
    client.close().await.unwrap();
}

/// `session/cancel` ends the turn, not the background commands, and the turn says which keep
/// running.
#[tokio::test]
async fn a_cancel_leaves_background_commands_running_and_says_so() {
    use keel_testkit::mock_model::{Api, Reply};

    let mark = marker("cancel");
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::new().tool_call(
        "s1",
        "bg_start",
        json!({"command": format!("echo {mark}; while :; do sleep 1; done")}),
    ));
    // The model then takes its time: the user cancels meanwhile.
    mock.push(
        Api::Anthropic,
        Reply::anthropic(&Turn::text_only("Too late.")).delay(Duration::from_secs(600)),
    );
    let home = KeelHome::new();
    let client = home
        .client(
            &mock,
            ClientOptions::default().permissions(allow(1)),
            &[TEST_MODEL],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    let prompt = client.start_prompt(&session, "start and wait");
    client
        .wait_for("the start's result", |events| {
            events.iter().any(|event| {
                let text = serde_json::to_string(&event.to_json()).unwrap();
                text.contains("\"status\":\"completed\"")
            })
        })
        .await;
    client.cancel(&session).unwrap();
    let answer = prompt.await.unwrap().unwrap();
    assert_eq!(answer.stop_reason, StopReason::Cancelled);
    let text = said(&client, &session);
    assert!(
        text.contains("The background commands keep running: `bg-1`"),
        "{text}"
    );
    assert!(!marked(&mark).is_empty(), "the cancel stopped the command");
    client.close().await.unwrap();
    assert_eq!(marked(&mark), Vec::<u32>::new());
}

/// What the four tools add to the first model request (docs/benchmarks.md): printed, and the
/// whole request stays under the bound the other first-request tests keep.
#[tokio::test]
async fn the_first_request_offers_the_background_tools_compactly() {
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::text_only("Hi."));
    let home = KeelHome::new();
    let client = home
        .client(&mock, ClientOptions::default(), &[TEST_MODEL])
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    client.prompt(&session, "hello").await.unwrap();
    let first = &mock.requests()[0];
    let tools = first.body["tools"].as_array().unwrap();
    let background: Vec<&Value> = tools
        .iter()
        .filter(|tool| tool["name"].as_str().unwrap().starts_with("bg_"))
        .collect();
    assert_eq!(background.len(), 4, "{tools:?}");
    // Each definition as sent, with the comma that separates it from the next.
    let cost: usize = background
        .iter()
        .map(|tool| tool.to_string().len() + 1)
        .sum();
    for tool in &background {
        let size = tool.to_string().len();
        eprintln!("{}: {size} bytes", tool["name"]);
        assert!(size < 700, "{} is {size} bytes", tool["name"]);
    }
    let size = first.raw_body.len();
    eprintln!(
        "first request: {size} bytes, of which the background tools {cost} (without them {})",
        size - cost
    );
    assert!(cost < 2_000, "the background tools cost {cost} bytes");
    client.close().await.unwrap();
}

/// `SIGTERM` to `keel acp` ends serving like a closed stdin: the background command is killed
/// and checked gone before the process exits.
#[tokio::test]
async fn a_signal_to_keel_kills_its_background_commands() {
    let mark = marker("signal");
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::new().tool_call(
        "s1",
        "bg_start",
        json!({"command": format!("echo {mark}; while :; do sleep 1; done")}),
    ));
    mock.push_anthropic(Turn::text_only("Started."));
    let home = KeelHome::new();
    let client = home
        .client(
            &mock,
            ClientOptions::default().permissions(allow(1)),
            &[TEST_MODEL],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    client.prompt(&session, "start").await.unwrap();
    assert!(!marked(&mark).is_empty(), "the command is not running");
    let pid = client.pid().unwrap();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // `close` waits for the process to exit (and checks it exited cleanly).
    client.close().await.unwrap();
    assert_eq!(marked(&mark), Vec::<u32>::new());
}
