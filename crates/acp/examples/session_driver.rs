//! Drives one `keel acp` through ACP sessions of read → edit → bash turns against the mock
//! model, for looking at the process from outside: under `strace`, `perf`, `valgrind`
//! (`scripts/link-order.sh` records with it which functions a session runs).
//!
//! ```sh
//! cargo build --profile bench -p keel-acp --bin keel --bin keel-sandbox --example session_driver
//! KEEL_BIN=$PWD/target/release/keel WRAP="strace -f -o /tmp/trace" \
//!     target/release/examples/session_driver
//! ```
//!
//! Settings, from the environment:
//! - `KEEL_BIN`: the `keel` binary (required);
//! - `WRAP`: a command line to run `keel acp` under (default: none);
//! - `SESSIONS` (default 1) sessions one after the other, `TURNS` (default 10) turns each, with
//!   `PAUSE` milliseconds (default 100) between turns.
//!
//! It prints each turn's time, then the median, `keel acp`'s CPU time (when it is not wrapped:
//! a wrapper's own figures are its to report) and its memory.
#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "a developer's tool: reports on stdout, sets up its own fixtures, stops on any failure"
)]

use std::path::Path;
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason};
use keel_testkit::acp_client::{ClientOptions, PermissionReply, TestClient, isolated_env};
use keel_testkit::measure::{cpu_time, status_kib};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::json;

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let Some(keel) = std::env::var_os("KEEL_BIN") else {
        eprintln!("session_driver: set KEEL_BIN to the keel binary");
        std::process::exit(2);
    };
    let sessions = setting("SESSIONS", 1);
    let turns = setting("TURNS", 10);
    let pause = Duration::from_millis(setting("PAUSE", 100));
    let wrap = std::env::var("WRAP").unwrap_or_default();
    let mut words: Vec<String> = wrap.split_whitespace().map(String::from).collect();
    words.push(keel.to_string_lossy().into_owned());
    let program = words.remove(0);
    words.push("acp".into());
    let args: Vec<&str> = words.iter().map(String::as_str).collect();

    let mock = MockModel::start().await;
    mock.lean();
    let workspace = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(workspace.path()).unwrap();
    let home = tempfile::tempdir().unwrap();
    let env = isolated_env(
        home.path(),
        &mock.base_url(),
        &[("KEEL_MODEL", "anthropic/driver-model")],
    );
    let approvals = usize::try_from(sessions * turns * 2).unwrap();
    let client = TestClient::spawn(
        ClientOptions::default().permissions(vec![
            PermissionReply::Choose(
                PermissionOptionKind::AllowOnce
            );
            approvals
        ]),
        Path::new(&program),
        &args,
        &root,
        &env,
    )
    .await
    .unwrap();
    client.initialize().await.unwrap();
    let pid = client.pid().unwrap();
    let mut times = Vec::new();
    for _ in 0..sessions {
        std::fs::write(root.join("counter.txt"), "count = 0\n").unwrap();
        let session = client.new_session(&root, &[]).await.unwrap().session_id;
        client.prompt(&session, "/help").await.unwrap();
        for turn in 0..turns {
            mock.push_anthropic(Turn::new().tool_call(
                format!("r{turn}"),
                "read",
                json!({"file_path": "counter.txt"}),
            ));
            mock.push_anthropic(Turn::new().tool_call(
                format!("e{turn}"),
                "edit",
                json!({"file_path": "counter.txt", "old_string": format!("count = {turn}"), "new_string": format!("count = {}", turn + 1)}),
            ));
            mock.push_anthropic(Turn::new().tool_call(
                format!("b{turn}"),
                "bash",
                json!({"command": "cat counter.txt"}),
            ));
            mock.push_anthropic(Turn::text_only("done"));
            let started = Instant::now();
            let answer = client.prompt(&session, "go").await.unwrap();
            assert_eq!(answer.stop_reason, StopReason::EndTurn);
            times.push(started.elapsed());
            println!("turn {turn}: {:.2?}", started.elapsed());
            tokio::time::sleep(pause).await;
        }
    }
    if wrap.is_empty() {
        println!(
            "keel acp: {:.2?} of CPU over {} turns",
            cpu_time(pid),
            times.len()
        );
    }
    for field in ["VmHWM", "RssAnon", "RssFile"] {
        if let Some(kib) = status_kib(pid, field) {
            println!("{field}: {:.1} MiB", kib as f64 / 1024.0);
        }
    }
    times.sort();
    if let Some(median) = times.get(times.len() / 2) {
        println!("median turn: {median:.2?}");
    }
    client.close().await.unwrap();
}
