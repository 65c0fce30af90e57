//! The real `keel acp` binary over its stdio, as an editor starts it.

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason};
use keel_testkit::acp_client::{ClientOptions, PermissionReply};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::json;

use super::support::{KeelHome, TEST_MODEL};

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
    let home = KeelHome::new();
    let root = home.root.clone();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), LIB).unwrap();
    let client = home
        .spawn(
            &mock,
            ClientOptions::default()
                .permissions([PermissionReply::Choose(PermissionOptionKind::AllowOnce)]),
            &[TEST_MODEL],
        )
        .await;
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
    // The model is offered the tools that can work here, in their compact schema: no web
    // search without a search service, no `null` alternatives of optional arguments.
    let first = &mock.requests()[0].body;
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"grep") && names.contains(&"bash"),
        "{names:?}"
    );
    assert!(!names.contains(&"web_search"), "{names:?}");
    assert!(!first["tools"].to_string().contains("\"null\""));
    // Closing stdin ends the process cleanly.
    client.close().await.unwrap();
}

/// An editor may pipeline: `initialize` and `session/new` written back to back, without waiting
/// for the first answer, both get served (the session is created, not refused as "before
/// initialization").
#[tokio::test]
async fn keel_acp_serves_requests_pipelined_behind_initialize() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    let raw = RawKeel::spawn();
    let (root, mut child) = (raw.root.clone(), raw.child);
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    let new_session = json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
        "params": {"cwd": root, "mcpServers": []}});
    let both = format!("{initialize}\n{new_session}\n");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(both.as_bytes()).await.unwrap();
    stdin.flush().await.unwrap();

    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 2 {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("keel acp ended early");
        let message: serde_json::Value = serde_json::from_str(&line).unwrap();
        if let Some(id) = message.get("id").and_then(serde_json::Value::as_i64) {
            answers.insert(id, message);
        }
    }
    assert!(answers[&1].get("result").is_some(), "{:?}", answers[&1]);
    let session = &answers[&2];
    assert!(
        session["result"]["sessionId"].is_string(),
        "session/new was not served: {session}"
    );
    drop(stdin);
    child.wait().await.unwrap();
}

/// An `initialize` line the ACP crate cannot read as a request (its answer carries a `null`
/// id) must not leave the server waiting for an answer that never comes: the next requests are
/// still served, and closing stdin still ends the process.
#[tokio::test]
async fn keel_acp_keeps_serving_after_an_unreadable_initialize() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    for bad in [
        json!({"jsonrpc": "2.0", "id": 1.5, "method": "initialize",
            "params": {"protocolVersion": 1}}),
        json!({"jsonrpc": "2.0", "id": 18_446_744_073_709_551_615_u64, "method": "initialize",
            "params": {"protocolVersion": 1}}),
        json!({"jsonrpc": "2.0", "id": true, "method": "initialize",
            "params": {"protocolVersion": 1}}),
        json!({"id": 1, "method": "initialize", "params": {"protocolVersion": 1}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "result": 1}),
    ] {
        let raw = RawKeel::spawn();
        let mut child = raw.child;
        let good = json!({"jsonrpc": "2.0", "id": 7, "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {}}});
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(format!("{bad}\n{good}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let served = tokio::time::timeout(std::time::Duration::from_secs(20), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                let message: serde_json::Value = serde_json::from_str(&line).unwrap();
                if message.get("id") == Some(&json!(7)) {
                    return Some(message);
                }
            }
            None
        })
        .await
        .unwrap_or_else(|_| panic!("no answer to the initialize after {bad}"));
        let answer = served.unwrap_or_else(|| panic!("keel acp ended early after {bad}"));
        assert!(answer.get("result").is_some(), "{bad}: {answer}");
        drop(stdin);
        let status = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait())
            .await
            .unwrap_or_else(|_| panic!("keel acp did not exit after {bad}"))
            .unwrap();
        assert!(status.success(), "{bad}: {status}");
    }
}

/// `keel acp` spawned bare (no test client) in a fresh workspace and home, for tests that write
/// raw lines on its stdin.
struct RawKeel {
    child: tokio::process::Child,
    root: std::path::PathBuf,
    _home: tempfile::TempDir,
    _workspace: tempfile::TempDir,
}

/// `keel acp` in `root`, with its home, configuration, state and data below `home`, a test key
/// and a test model.
fn keel_acp_command(home: &std::path::Path, root: &std::path::Path) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_keel"));
    command
        .arg("acp")
        .current_dir(root)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("KEEL_MODEL", "anthropic/test-model");
    command
}

impl RawKeel {
    fn spawn() -> Self {
        let home = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(workspace.path()).unwrap();
        let child = tokio::process::Command::from(keel_acp_command(home.path(), &root))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        Self {
            child,
            root,
            _home: home,
            _workspace: workspace,
        }
    }
}

/// stdin and stdout need not be pipes: a file for stdin and stdout shared with stderr (`2>&1`)
/// are read and written the blocking way, and the requests are answered all the same.
#[test]
fn keel_acp_serves_stdio_that_is_not_a_pipe_of_its_own() {
    use std::io::BufRead as _;

    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(workspace.path()).unwrap();
    let requests = home.path().join("requests.jsonl");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    std::fs::write(&requests, format!("{initialize}\n")).unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    let mut child = keel_acp_command(home.path(), &root)
        .stdin(std::fs::File::open(&requests).unwrap())
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .spawn()
        .unwrap();
    // At the end of the file the client is gone: Keel answers, then exits, closing the pipe.
    let reading = std::thread::spawn(move || {
        std::io::BufReader::new(reader)
            .lines()
            .map(Result::unwrap)
            .collect::<Vec<String>>()
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("keel acp did not exit at the end of its stdin");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert!(status.success(), "{status}");
    let lines = reading.join().unwrap();
    let answer = lines
        .iter()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|message| message.get("id") == Some(&json!(1)))
        .unwrap_or_else(|| panic!("no answer to initialize in {lines:?}"));
    assert!(answer["result"]["protocolVersion"].is_number(), "{answer}");
}

/// The most memory one hostile input may cost `keel acp` (its peak resident set, `VmHWM`).
const MEMORY_BOUND_KIB: u64 = 100 * 1024;

/// Reads the next message with an id from `lines`.
async fn answer_with_id(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) -> serde_json::Value {
    loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("keel acp ended early");
        let message: serde_json::Value = serde_json::from_str(&line).unwrap();
        if message.get("id").is_some() && message.get("method").is_none() {
            return message;
        }
    }
}

/// A 48 MB JSON-RPC line is refused as it streams in: never buffered whole, answered with an
/// error under its id (whether the id comes first or last), the connection goes on, and the
/// process's peak memory stays under 100 MB.
#[tokio::test]
async fn a_48_mb_line_is_refused_as_it_streams_and_the_connection_survives() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    let raw = RawKeel::spawn();
    let (root, mut child) = (raw.root.clone(), raw.child);
    let pid = child.id().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    stdin
        .write_all(format!("{initialize}\n").as_bytes())
        .await
        .unwrap();
    assert!(answer_with_id(&mut lines).await.get("result").is_some());

    let chunk = "a".repeat(1024 * 1024);
    for (id, id_first) in [(json!(5), true), (json!("late-id"), false)] {
        let (open, close) = if id_first {
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"session/prompt","params":{{"sessionId":"s","prompt":[{{"type":"text","text":""#
                ),
                r#""}]}}"#.to_owned(),
            )
        } else {
            (
                r#"{"jsonrpc":"2.0","method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":""#.to_owned(),
                format!(r#""}}]}},"id":{id}}}"#),
            )
        };
        stdin.write_all(open.as_bytes()).await.unwrap();
        for _ in 0..48 {
            stdin.write_all(chunk.as_bytes()).await.unwrap();
        }
        stdin.write_all(close.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
        let refused = answer_with_id(&mut lines).await;
        assert_eq!(refused["id"], id, "{refused}");
        assert_eq!(refused["error"]["code"], -32600, "{refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("over Keel's limit of 8388608 bytes"),
            "{message}"
        );
    }

    // The connection goes on: the next request is served.
    let new_session = json!({"jsonrpc": "2.0", "id": 9, "method": "session/new",
        "params": {"cwd": root, "mcpServers": []}});
    stdin
        .write_all(format!("{new_session}\n").as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    let served = answer_with_id(&mut lines).await;
    assert_eq!(served["id"], 9);
    assert!(served["result"]["sessionId"].is_string(), "{served}");
    let peak = keel_testkit::measure::status_kib(pid, "VmHWM").unwrap();
    eprintln!("keel acp peak resident set: {peak} KiB");
    assert!(
        peak < MEMORY_BOUND_KIB,
        "keel acp peaked at {peak} KiB under two 48 MB lines"
    );
    drop(stdin);
    child.wait().await.unwrap();
}

/// A project whose skill, agent definition and tool file are symlinks to `/dev/zero` costs no
/// memory: the files are refused (not regular files inside the project) with a notice the
/// trust question carries, the session works, and the process's peak memory stays under
/// 100 MB. A `.keel/config.toml` that is such a symlink makes `session/new` fail with an error
/// saying so, instead of an endless read.
#[tokio::test]
async fn project_files_that_are_dev_zero_are_refused_with_a_notice_and_cost_no_memory() {
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::text_only("Hello."));
    let home = KeelHome::new();
    for (dir, file) in [
        (".claude/skills/zero", "SKILL.md"),
        (".keel/agents", "zero.md"),
        (".keel/tools", "zero.toml"),
    ] {
        std::fs::create_dir_all(home.root.join(dir)).unwrap();
        std::os::unix::fs::symlink("/dev/zero", home.root.join(dir).join(file)).unwrap();
    }
    let client = home
        .client(
            &mock,
            ClientOptions::default()
                .permissions([PermissionReply::Choose(PermissionOptionKind::RejectOnce)]),
            &[TEST_MODEL],
        )
        .await;
    let pid = client.pid().unwrap();
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    let answer = client.prompt(&session, "hi").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    let requests = client.permission_requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let asked = serde_json::to_string(&requests[0]).unwrap();
    for refused in [
        "refuses the skill file",
        "refuses the agent definition",
        "refuses the tool file",
    ] {
        assert!(
            asked.contains(refused) && asked.contains("leads outside the project (to /dev/zero)"),
            "{refused}: {asked}"
        );
    }
    let peak = keel_testkit::measure::status_kib(pid, "VmHWM").unwrap();
    eprintln!("keel acp peak resident set: {peak} KiB");
    assert!(
        peak < MEMORY_BOUND_KIB,
        "keel acp peaked at {peak} KiB with /dev/zero project files"
    );

    std::fs::create_dir_all(home.root.join(".keel")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", home.root.join(".keel/config.toml")).unwrap();
    // `session/new` answers at once; the session opens behind it, and its first prompt fails
    // with the reason.
    let refused = match client.new_session(&home.root, &[]).await {
        Err(error) => error,
        Ok(opened) => client.prompt(&opened.session_id, "hi").await.unwrap_err(),
    };
    assert!(
        refused.message.contains("config.toml") && refused.message.contains("outside the project"),
        "{refused:?}"
    );
    let peak = keel_testkit::measure::status_kib(pid, "VmHWM").unwrap();
    eprintln!("keel acp peak resident set: {peak} KiB");
    assert!(peak < MEMORY_BOUND_KIB, "{peak} KiB");
    client.close().await.unwrap();
}

/// The largest line Keel reads whole, a prompt of almost 8 MiB, stays under the same bound: it
/// is parsed, kept in the session's log and refused as too large for the model's window, and
/// the process's peak memory stays under 100 MB.
#[tokio::test]
async fn a_prompt_just_under_the_line_limit_stays_under_the_memory_bound() {
    let mock = MockModel::start().await;
    let home = KeelHome::new();
    let client = home
        .client(&mock, ClientOptions::default(), &[TEST_MODEL])
        .await;
    let pid = client.pid().unwrap();
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    let huge = "word ".repeat(1_600_000);
    let refused = client.prompt(&session, &huge).await.unwrap_err();
    assert!(refused.message.contains("no longer fits"), "{refused:?}");
    let peak = keel_testkit::measure::status_kib(pid, "VmHWM").unwrap();
    eprintln!("keel acp peak resident set: {peak} KiB");
    assert!(peak < MEMORY_BOUND_KIB, "{peak} KiB under an 8 MB prompt");
    client.close().await.unwrap();
}

/// A repository's `AGENTS.md` is model input read at every session's start, before anyone is
/// asked anything: only its first 16 KiB is read, never the whole file. A 1 GiB one (sparse
/// here; a repository ships it as a blob of a few megabytes that checks out whole) costs
/// `keel acp` no memory, and the model is told how large it was.
#[tokio::test]
async fn a_one_gib_agents_md_is_read_only_as_far_as_the_prompt_shows_it() {
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::text_only("Hello."));
    let home = KeelHome::new();
    let file = std::fs::File::create(home.root.join("AGENTS.md")).unwrap();
    file.set_len(1 << 30).unwrap();
    drop(file);
    let client = home
        .client(&mock, ClientOptions::default(), &[TEST_MODEL])
        .await;
    let pid = client.pid().unwrap();
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    let answer = client.prompt(&session, "hi").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    let peak = keel_testkit::measure::status_kib(pid, "VmHWM").unwrap();
    eprintln!("keel acp peak resident set: {peak} KiB");
    assert!(
        peak < MEMORY_BOUND_KIB,
        "keel acp peaked at {peak} KiB with a 1 GiB AGENTS.md"
    );
    let system = mock.requests()[0].body["system"].to_string();
    assert!(
        system.contains("[... cut: the file is 1073741824 bytes; only the first 16384 are shown]"),
        "{}",
        &system[..system.len().min(400)]
    );
    client.close().await.unwrap();
}
