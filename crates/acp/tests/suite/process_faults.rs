//! Process faults over the real `keel acp` binary: a client that goes away mid-command, a client
//! that stops reading, `kill -9` in the middle of writes.

use std::path::Path;
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::PermissionOptionKind;
use keel_testkit::acp_client::{ClientOptions, PermissionReply};
use keel_testkit::measure::status_kib;
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::json;

use tokio::io::AsyncWriteExt;

use super::support::{KeelHome, TEST_MODEL, gone_with, running_with};

#[tokio::test]
async fn a_client_that_goes_away_mid_command_ends_keel_and_everything_it_started() {
    // Under namespaces the PID namespace dies with the helper; under the Landlock fallback the
    // helper, a child subreaper, kills the tree itself.
    for (mechanism, marker) in [("namespaces", "600.5151"), ("landlock", "600.5161")] {
        let took = goes_away_mid_command(mechanism, marker).await;
        eprintln!("{mechanism}: keel and its commands gone {took:?} after stdin closed");
    }
}

/// How long after the client went away keel and the command's processes were all gone.
async fn goes_away_mid_command(mechanism: &str, marker: &str) -> Duration {
    let daemon = format!("{marker}1");
    let foreground = format!("{marker}2");
    let mock = MockModel::start().await;
    // A daemon that leaves the command's process group and session, and a foreground command.
    mock.push_anthropic(Turn::new().tool_call(
        "b1",
        "bash",
        json!({"command": format!("setsid sleep {daemon} & sleep {foreground}")}),
    ));
    let home = KeelHome::new();
    let client = home
        .client(
            &mock,
            ClientOptions::default()
                .permissions([PermissionReply::Choose(PermissionOptionKind::AllowOnce)]),
            &[TEST_MODEL, ("KEEL_SANDBOX_MECHANISM", mechanism)],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    let keel = client.pid().unwrap();
    let _prompt = client.start_prompt(&session, "start them");
    for _ in 0..600 {
        if running_with(&daemon) && running_with(&foreground) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        running_with(&daemon) && running_with(&foreground),
        "{mechanism}: the command did not start"
    );
    // The editor goes away: stdin closes, nobody reads stdout any more.
    let closed = Instant::now();
    client.close().await.unwrap();
    assert!(!Path::new(&format!("/proc/{keel}")).exists());
    assert!(
        gone_with(&daemon).await,
        "{mechanism}: the daemon outlived keel"
    );
    assert!(
        gone_with(&foreground).await,
        "{mechanism}: the command outlived keel"
    );
    closed.elapsed()
}
#[tokio::test]
async fn a_client_that_stops_reading_does_not_grow_keels_memory() {
    let mock = MockModel::start().await;
    // 48 MiB of answer, streamed as fast as Keel takes it, in 12 KiB deltas.
    let answer = "all work and no play makes keel a dull agent. ".repeat(48 * 1024 * 1024 / 47);
    mock.push_anthropic(Turn::text_only(answer).chunk_chars(12 * 1024));
    let home = KeelHome::new();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_keel"));
    command
        .arg("acp")
        .current_dir(&home.root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in home.env(&mock, &[TEST_MODEL]) {
        command.env(name, value);
    }
    let mut child = command.spawn().unwrap();
    let pid = child.id().unwrap();
    // The client writes, and never reads a byte of what Keel answers.
    let _unread = child.stdout.take().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let root = home.root.display().to_string();
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": root, "mcpServers": []}}),
    ];
    for line in lines {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    stdin.flush().await.unwrap();
    // The session id is in the unread answer; the prompt names the newest session instead
    // through a session Keel must find: wait for it in the store.
    let sessions = home.home.join("data/keel/sessions");
    let session = loop {
        if let Some(entry) = std::fs::read_dir(&sessions)
            .ok()
            .and_then(|mut dir| dir.next())
        {
            break entry.unwrap().file_name().into_string().unwrap();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let baseline = status_kib(pid, "RssAnon").unwrap();
    let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": session, "prompt": [{"type": "text", "text": "talk"}]}});
    stdin
        .write_all(format!("{prompt}\n").as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    // Watch Keel while the model streams into a client that does not read.
    let mut peak = baseline;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        peak = peak.max(status_kib(pid, "RssAnon").unwrap_or(0));
    }
    eprintln!("RssAnon: {baseline} KiB at rest, {peak} KiB at most while unread");
    assert!(
        peak < baseline + 16 * 1024,
        "keel buffered what the client does not read: {baseline} KiB -> {peak} KiB"
    );
    drop(stdin);
    child.kill().await.unwrap();
}

#[tokio::test]
async fn sigkill_in_the_middle_of_writes_leaves_the_old_file_or_the_new_one() {
    const OLD: &str = "the old contents\n";
    // 2 MiB of new contents: long enough to write that a kill can land inside the write.
    let new = "the new contents, line after line\n".repeat(2 * 1024 * 1024 / 34);
    let mock = MockModel::start().await;
    // Every round reads the file (the read-before-write guard), overwrites it, answers: the
    // reply is chosen from the conversation, so a killed round leaves nothing queued.
    let content = new.clone();
    mock.respond_with(std::sync::Arc::new(move |_, request| {
        let last = request.body["messages"].as_array()?.last()?.clone();
        let answered = |tool: &str| {
            last.to_string()
                .contains(&format!("\"tool_use_id\":\"{tool}"))
        };
        let turn = if answered("read") {
            Turn::new().tool_call(
                "write-1",
                "write",
                json!({"file_path": "data.txt", "content": content}),
            )
        } else if answered("write") {
            Turn::text_only("written")
        } else {
            Turn::new().tool_call("read-1", "read", json!({"file_path": "data.txt"}))
        };
        Some(keel_testkit::mock_model::Reply::anthropic(&turn))
    }));
    let home = KeelHome::new();
    let target = home.root.join("data.txt");
    // The 2 MiB call stays in the conversation: a window that holds it.
    home.user_config("[providers.anthropic]\ncontext_window = 100000000\n");
    // First how long a whole turn takes, then kills spread across that time.
    let mut took = Duration::ZERO;
    let mut outcomes = (0, 0);
    for round in 0..12_u32 {
        std::fs::write(&target, OLD).unwrap();
        let client = home
            .client(
                &mock,
                ClientOptions::default()
                    .permissions([PermissionReply::Choose(PermissionOptionKind::AllowOnce)]),
                &[TEST_MODEL],
            )
            .await;
        let session = client
            .new_session(&home.root, &[])
            .await
            .unwrap()
            .session_id;
        let keel = client.pid().unwrap();
        let started = Instant::now();
        let prompt = client.start_prompt(&session, "write it");
        if round == 0 {
            prompt.await.unwrap().unwrap();
            took = started.elapsed();
            client.close().await.unwrap();
            assert!(
                std::fs::read_to_string(&target).unwrap() == new,
                "the write did not happen"
            );
            continue;
        }
        tokio::time::sleep(took * round / 12).await;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(keel).unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        drop(client);
        let contents = std::fs::read_to_string(&target).unwrap();
        if contents == OLD {
            outcomes.0 += 1;
        } else {
            assert!(
                contents == new,
                "round {round}: a torn file of {} bytes",
                contents.len()
            );
            outcomes.1 += 1;
        }
    }
    // Both outcomes happened: the kills did land before and after the write.
    assert!(outcomes.0 > 0 && outcomes.1 > 0, "{outcomes:?}");
    // The file is written nameless and named once whole: no temporary file is left either.
    let left: Vec<_> = std::fs::read_dir(&home.root)
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name())
        .collect();
    assert_eq!(left, ["data.txt"], "left in the workspace");
    eprintln!(
        "kill -9 during a 2 MiB write, 11 rounds: {} times the old file, {} times the new one, never torn (a whole turn: {took:?})",
        outcomes.0, outcomes.1
    );
}
