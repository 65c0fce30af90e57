//! Turn-loop overhead per tool round trip, against the mock model server over real HTTP.
//!
//! A turn of `ROUND_TRIPS` tool calls (each a `todo` call: no I/O beyond the loop itself) plus a
//! final answer is timed end to end. The model's share is measured separately by streaming the
//! very same replies straight through the provider, and subtracted:
//! overhead per round trip = (turn time − model time) / `ROUND_TRIPS`.
#![expect(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "a benchmark reports on stdout and sets up its own fixtures"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use futures::future::BoxFuture;
use keel_core::agent::{
    AgentEvent, Answer, ApprovalAnswer, ApprovalRequest, Engine, EngineConfig, QuestionItem,
    SessionOptions, TurnHost, UserContent,
};
use keel_core::provider::{ModelRequest, ProviderConfig, ProviderKind};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const ROUND_TRIPS: usize = 20;
const RUNS: usize = 30;

struct QuietHost;

impl TurnHost for QuietHost {
    fn event(&self, _event: AgentEvent) {}
    fn approve(&self, _request: ApprovalRequest) -> BoxFuture<'_, ApprovalAnswer> {
        Box::pin(async { ApprovalAnswer::Answered(Answer::AllowOnce) })
    }
    fn ask(&self, _q: Vec<QuestionItem>) -> BoxFuture<'_, Result<Vec<Vec<String>>, String>> {
        Box::pin(async { Err("no questions".into()) })
    }
}

fn script(mock: &MockModel) {
    for i in 0..ROUND_TRIPS {
        mock.push_anthropic(Turn::new().text("step").usage(1000, 10).tool_call(
            format!("c{i}"),
            "todo",
            json!({"todos": [{"content": format!("step {i}"), "status": "in_progress"}]}),
        ));
    }
    mock.push_anthropic(Turn::text_only("done").usage(1000, 10));
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn p95(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[(samples.len() * 95 / 100).min(samples.len() - 1)]
}

#[tokio::main]
async fn main() {
    let mock = MockModel::start().await;
    let workspace = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut provider = ProviderConfig::new("anthropic", ProviderKind::Anthropic);
    provider.base_url = Some(mock.base_url());
    provider.api_key = Some("bench".into());
    let mut config = EngineConfig::new(Arc::new(|_: &str| None), scratch.path().to_path_buf());
    config.providers = vec![provider.clone()];
    config.model = Some("anthropic/bench-model".into());
    let engine = Engine::new(config);
    let raw_provider = provider.build().unwrap();

    let mut turn_times = Vec::new();
    let mut model_times = Vec::new();
    for run in 0..RUNS + 3 {
        // The model's share: the same replies streamed straight through the provider.
        script(&mock);
        let started = Instant::now();
        for _ in 0..=ROUND_TRIPS {
            let request = ModelRequest {
                model: "bench-model".into(),
                system: String::new(),
                messages: vec![keel_core::provider::Message::user_text("go")].into(),
                tools: Vec::new(),
                max_tokens: 1000,
                thinking_budget: None,
            };
            let mut stream = raw_provider.stream(request).await.unwrap();
            while let Some(event) = stream.next().await {
                event.unwrap();
            }
        }
        let model_time = started.elapsed();

        // The whole turn through the loop.
        script(&mock);
        let session = engine
            .open_session(SessionOptions {
                roots: vec![workspace.path().to_path_buf()],
                interactive: true,
                ..SessionOptions::default()
            })
            .unwrap();
        let started = Instant::now();
        let outcome = session
            .run_turn(
                vec![UserContent::Text { text: "go".into() }],
                Arc::new(QuietHost),
                CancellationToken::new(),
            )
            .await
            .unwrap();
        let turn_time = started.elapsed();
        assert_eq!(outcome.final_text, "done");
        session.close();
        if run >= 3 {
            turn_times.push(turn_time);
            model_times.push(model_time);
        }
    }
    let per_trip: Vec<Duration> = turn_times
        .iter()
        .zip(&model_times)
        .map(|(turn, model)| turn.saturating_sub(*model) / ROUND_TRIPS as u32)
        .collect();
    println!(
        "turn loop, {ROUND_TRIPS} tool round trips per turn, {RUNS} runs (mock model over HTTP on 127.0.0.1)"
    );
    println!(
        "  whole turn        median {:>9.3?}  p95 {:>9.3?}",
        median(turn_times.clone()),
        p95(turn_times)
    );
    println!(
        "  model share       median {:>9.3?}  p95 {:>9.3?}",
        median(model_times.clone()),
        p95(model_times)
    );
    println!(
        "  loop overhead / round trip  median {:>9.3?}  p95 {:>9.3?}",
        median(per_trip.clone()),
        p95(per_trip)
    );
}
