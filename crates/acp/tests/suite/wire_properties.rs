//! The wire under hostile input (issue 19's property test): seeded soups of JSON-RPC messages to
//! every ACP method, with wrong types, missing and unknown fields, huge and deeply nested values,
//! duplicate and out-of-order ids, requests before `initialize`, broken JSON and byte noise,
//! pipelined or in lockstep, against the real engine and the mock model, through the same
//! transport as `keel acp`'s stdio. Every well-formed request is answered, the connection stays
//! usable, and the server ends when its input closes. The coverage-guided fuzz target
//! (`crates/acp/fuzz`) holds raw bytes to the same rules.

use std::sync::Arc;
use std::time::Duration;

use keel_acp::server::{EngineSessions, SessionFactory};
use keel_core::agent::Engine;
use keel_testkit::mock_model::{MockModel, Turn};
use keel_testkit::protocol_fuzz::{Rng, exchange_served, soup};
use serde_json::json;

use super::support::engine_config;

/// Soups per run: enough to reach every method and mutation many times, small enough for CI.
const CASES: u64 = 400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_message_soups_are_answered_and_never_wedge_the_server() {
    let mock = MockModel::start().await;
    let workspace = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(workspace.path()).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut config = engine_config(Some(&mock), scratch.path());
    config.scratch_root = std::fs::canonicalize(scratch.path()).unwrap();
    let factory: Arc<dyn SessionFactory> = Arc::new(EngineSessions::new(Engine::new(config)));
    let seed = std::env::var("KEEL_WIRE_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(0x6b65_656c);
    let (mut answers, mut agent_requests, mut sessions) = (0, 0, 0);
    for case in 0..CASES {
        let mut rng = Rng::new(seed ^ case.wrapping_mul(0x9E37_79B9));
        let lines = soup(&mut rng, &cwd.display().to_string());
        // Prompts that get through run a turn: a write that asks the client (which refuses),
        // then an answer.
        harness_turns(&mock);
        let lockstep = rng.chance(50);
        let seen = exchange_served(
            |(to_client, from_client)| {
                keel_acp::server::serve_io(factory.clone(), to_client, from_client)
            },
            &lines,
            lockstep,
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|finding| {
            let shown: Vec<String> = lines
                .iter()
                .map(|line| String::from_utf8_lossy(&line[..line.len().min(300)]).into_owned())
                .collect();
            panic!("seed {seed:#x} case {case} (lockstep {lockstep}): {finding:?}\n{shown:#?}")
        });
        answers += seen.answers;
        agent_requests += seen.agent_requests;
        sessions += seen.sessions;
    }
    // The soups reached past `initialize`: sessions opened and requests answered in numbers.
    assert!(sessions > CASES as usize / 4, "{sessions} sessions");
    assert!(answers > CASES as usize * 3, "{answers} answers");
    assert!(agent_requests > 0, "no prompt reached a permission request");
    eprintln!(
        "{CASES} soups: {answers} answers, {sessions} sessions, {agent_requests} agent requests"
    );
}

fn harness_turns(mock: &MockModel) {
    mock.push_anthropic(Turn::new().tool_call(
        "w",
        "write",
        json!({"file_path": "out.txt", "content": "x"}),
    ));
    mock.push_anthropic(Turn::text_only("done"));
}
