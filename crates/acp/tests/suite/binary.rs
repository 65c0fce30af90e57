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
