//! Benchmarks of the session store. Run with `cargo bench -p keel-core --bench sessions`; each
//! section prints median and p95 wall times against its budget (docs/benchmarks.md).
//!
//! - open and read a 1,000-event session (what `session/load` does before it replays; budget
//!   50 ms);
//! - list 1,000 stored sessions (`session/list`; budget 50 ms);
//! - append one event (the write path of a turn; budget 1 ms per event).

#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::error::Error;
use std::time::{Duration, Instant};

use keel_core::agent::{CallStatus, UserContent};
use keel_core::provider::{Message, Part, Role};
use keel_core::store::{SessionMeta, SessionStore, StoredEvent, model_history};
use keel_core::tool::{Artifact, Envelope, ToolKind, ToolOutput};
use serde_json::json;

type BenchResult = Result<(), Box<dyn Error>>;

const RUNS: usize = 50;

#[expect(
    clippy::disallowed_methods,
    reason = "the benchmark's store lives in a temp dir"
)]
fn main() -> BenchResult {
    let dir = tempfile::tempdir()?;
    let store = SessionStore::new(dir.path().join("sessions"));
    println!("## session store ({RUNS} runs each)");
    println!("| case | median | p95 | budget |");
    println!("|---|---|---|---|");
    bench_load(&store)?;
    bench_list(&store)?;
    bench_append(&store)?;
    Ok(())
}

/// A turn's worth of typical events: a prompt, streamed text, a read and an edit with their
/// results (a 2 KB file, its diff), and the model's view of each step.
fn turn_events(n: usize) -> Vec<StoredEvent> {
    let file = "fn main() {\n    println!(\"hello\");\n}\n".repeat(50);
    let edited = file.replacen("hello", "hi", 1);
    let read = Envelope::from_result(Ok(ToolOutput::text(file.clone())), Duration::ZERO);
    let mut edit = Envelope::from_result(Ok(ToolOutput::text("edited")), Duration::ZERO);
    edit.artifacts.push(Artifact::Diff(keel_diff::AcpDiff {
        path: "/w/src/main.rs".into(),
        old_text: Some(file.clone()),
        new_text: edited,
        bounded: false,
    }));
    let mut events = vec![
        StoredEvent::User {
            content: vec![UserContent::Text {
                text: format!("prompt {n}: fix the greeting"),
            }],
        },
        StoredEvent::Message {
            message: Message::user_text(format!("prompt {n}: fix the greeting")),
        },
    ];
    for chunk in 0..4 {
        events.push(StoredEvent::Text {
            message_id: format!("m{n}"),
            text: format!("Looking at the file, step {chunk}. "),
        });
    }
    for (id, tool, envelope) in [("r", "read", read), ("e", "edit", edit)] {
        let call_id = format!("{id}{n}");
        events.push(StoredEvent::ToolCall {
            call_id: call_id.clone(),
            tool_id: tool.into(),
            kind: ToolKind::Read,
            args: json!({"file_path": "src/main.rs"}),
            title: Some(format!("{tool} src/main.rs")),
            locations: vec![("/w/src/main.rs".into(), None)],
        });
        events.push(StoredEvent::tool_result(
            &call_id,
            CallStatus::Completed,
            &envelope,
        ));
        events.push(StoredEvent::Message {
            message: Message {
                role: Role::Assistant,
                content: vec![Part::ToolUse {
                    id: call_id.clone(),
                    name: tool.into(),
                    input: json!({"file_path": "src/main.rs"}),
                }],
            },
        });
        events.push(StoredEvent::Message {
            message: Message {
                role: Role::User,
                content: vec![Part::ToolResult {
                    tool_use_id: call_id,
                    content: envelope.for_model(),
                    is_error: false,
                }],
            },
        });
    }
    events
}

fn stats(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let median = samples[samples.len() / 2];
    let p95 = samples[(samples.len() * 95 / 100).min(samples.len() - 1)];
    (median, p95)
}

fn ms(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1e3)
}

fn report(case: &str, samples: Vec<Duration>, budget: Duration) {
    let (median, p95) = stats(samples);
    let verdict = if median < budget { "within" } else { "OVER" };
    println!(
        "| {case} | {} | {} | {} ({verdict}) |",
        ms(median),
        ms(p95),
        ms(budget)
    );
}

fn bench_load(store: &SessionStore) -> BenchResult {
    let log = store.create(SessionMeta::new("load", "/w".into(), Vec::new()))?;
    let mut count = 0;
    let mut n = 0;
    while count < 1_000 {
        for event in turn_events(n) {
            if count == 1_000 {
                break;
            }
            log.append(&event)?;
            count += 1;
        }
        n += 1;
    }
    log.close();
    let mut samples = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        let (log, events) = store.open("load")?;
        let history = model_history(&events);
        samples.push(started.elapsed());
        assert_eq!(events.len(), 1_000);
        assert!(!history.is_empty());
        log.close();
    }
    report(
        "open and read a 1,000-event session",
        samples,
        Duration::from_millis(50),
    );
    Ok(())
}

fn bench_list(store: &SessionStore) -> BenchResult {
    for n in 0..1_000 {
        let mut meta = SessionMeta::new(format!("list-{n:04}"), "/w".into(), Vec::new());
        meta.title = Some(format!("task {n}"));
        let log = store.create(meta)?;
        log.append(&turn_events(n)[0])?;
        log.close();
    }
    let mut samples = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        let sessions = store.list(Some(std::path::Path::new("/w")))?;
        samples.push(started.elapsed());
        assert!(sessions.len() >= 1_000);
    }
    report("list 1,000 sessions", samples, Duration::from_millis(50));
    Ok(())
}

fn bench_append(store: &SessionStore) -> BenchResult {
    let log = store.create(SessionMeta::new("append", "/w".into(), Vec::new()))?;
    let events = turn_events(0);
    let per_turn = events.len();
    let mut samples = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        for event in &events {
            log.append(event)?;
        }
        samples.push(started.elapsed() / u32::try_from(per_turn)?);
    }
    report(
        &format!("append one event (mean over a {per_turn}-event turn)"),
        samples,
        Duration::from_millis(1),
    );
    Ok(())
}
