//! Provider faults over ACP, against the mock model over real HTTP: every fault ends the turn
//! with a clear error or a retried success, never a hang past the configured timeouts, and the
//! session serves the next prompt.

use std::time::Duration;

use agent_client_protocol::v1::schema::StopReason;
use keel_testkit::acp_client::ClientOptions;
use keel_testkit::mock_model::{Api, MockModel, Reply, Turn};
use serde_json::json;

use super::support::{EngineHarness, engine_config};

/// The idle timeout of these tests: short, so a stalled server fails fast.
const IDLE: Duration = Duration::from_millis(400);

async fn harness(mock: MockModel) -> EngineHarness {
    let scratch = tempfile::tempdir().unwrap();
    let mut config = engine_config(Some(&mock), scratch.path());
    config.providers[0].http.idle_timeout = IDLE;
    EngineHarness::with_config(ClientOptions::default(), &[], mock, config).await
}

/// After a fault, the same session answers the next prompt.
async fn still_usable(harness: &EngineHarness) {
    harness
        .mock
        .push_anthropic(Turn::text_only("back to normal"));
    let answer = harness.prompt("are you there?").await;
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    assert!(
        harness.said().ends_with("back to normal"),
        "{}",
        harness.said()
    );
}

#[tokio::test]
async fn transient_errors_are_retried_to_a_success() {
    for (name, fault) in [
        (
            "429 with retry-after",
            Reply::rate_limited(Api::Anthropic, "0"),
        ),
        (
            "429 without retry-after",
            Reply::error(Api::Anthropic, 429, "slow down"),
        ),
        ("500", Reply::error(Api::Anthropic, 500, "internal error")),
        (
            "529 overloaded",
            Reply::error(Api::Anthropic, 529, "overloaded"),
        ),
        (
            "a connection cut before the first event",
            Reply::anthropic(&Turn::text_only("lost")).cut_after(0),
        ),
    ] {
        let mock = MockModel::start().await;
        mock.push(Api::Anthropic, fault);
        mock.push_anthropic(Turn::text_only("answered after the retry"));
        let harness = harness(mock).await;
        let answer = harness.prompt("hello").await;
        assert_eq!(answer.stop_reason, StopReason::EndTurn, "{name}");
        // The user saw a status line while Keel waited, then the answer.
        let said = harness.said();
        assert!(said.ends_with("answered after the retry"), "{name}: {said}");
        assert!(said.contains("before trying again"), "{name}: {said}");
        assert_eq!(harness.mock.requests().len(), 2, "{name}: one retry");
        still_usable(&harness).await;
    }
}

#[tokio::test]
async fn unrecoverable_responses_end_the_turn_with_a_clear_error() {
    let write = Turn::new().tool_call(
        "w1",
        "write",
        json!({"file_path": "notes.txt", "content": "written by a tool call cut in half"}),
    );
    assert_eq!(write.argument_chunks, 4);
    let mut malformed = Turn::text_only("fine so far").anthropic_events();
    malformed.truncate(3);
    malformed.push("event: content_block_delta\ndata: {not json\n\n".to_owned());
    let huge = Turn::text_only("x".repeat(20 * 1024 * 1024)).chunk_chars(64 * 1024);
    for (name, fault, expected) in [
        (
            "a stream cut in the middle of a tool call's arguments",
            // message_start, ping, block start, the empty delta, then 2 of 4 argument chunks.
            Reply::anthropic(&write).cut_after(6),
            "stream cut",
        ),
        (
            "malformed server-sent events",
            Reply::sse(malformed),
            "could not decode the response",
        ),
        (
            "a 20 MB response",
            Reply::anthropic(&huge),
            "exceeded 16777216 bytes",
        ),
    ] {
        let mock = MockModel::start().await;
        mock.push(Api::Anthropic, fault);
        let harness = harness(mock).await;
        let error = harness
            .client
            .prompt(&harness.session, "go")
            .await
            .unwrap_err();
        assert!(error.message.contains(expected), "{name}: {error:?}");
        // Nothing was retried into a second copy, and a half-received tool call never ran.
        assert_eq!(harness.mock.requests().len(), 1, "{name}");
        assert!(!harness.root.join("notes.txt").exists(), "{name}");
        still_usable(&harness).await;
    }
}

#[tokio::test]
async fn a_silent_or_trickling_server_times_out_instead_of_hanging() {
    let attempts = keel_core::provider::RetryPolicy::default().max_attempts as usize;
    for (name, fault) in [
        (
            "a server that never answers",
            Reply::anthropic(&Turn::text_only("unsent")).silent(),
        ),
        (
            "a server that sends headers, then nothing",
            Reply::anthropic(&Turn::text_only("unsent")).stall_after(0),
        ),
        (
            // One byte every 50 ms: an event of ~300 bytes would take 15 s, each byte well
            // inside the idle timeout. Only a per-event timeout catches it.
            "a server that trickles a byte at a time",
            Reply::anthropic(&Turn::text_only("slowly")).trickle(Duration::from_millis(50)),
        ),
    ] {
        let mock = MockModel::start().await;
        for _ in 0..attempts {
            mock.push(Api::Anthropic, fault.clone());
        }
        let harness = harness(mock).await;
        let error = harness
            .client
            .prompt(&harness.session, "go")
            .await
            .unwrap_err();
        assert!(
            error.message.contains("stalled stream"),
            "{name}: {error:?}"
        );
        assert_eq!(
            harness.mock.requests().len(),
            attempts,
            "{name}: retried, then given up"
        );
        still_usable(&harness).await;
    }
}
