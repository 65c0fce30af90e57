//! `session/load` and `session/list` through the ACP server (in process, over in-memory pipes,
//! the real engine and store): what an editor waits for when it restores a thread or shows its
//! history. Run with `cargo bench -p keel-acp --bench sessions`.
//!
//! - `session/load` of a 1,000-event session: the request until its answer, every replayed
//!   update received before it (budget 50 ms);
//! - `session/list` over 1,000 stored sessions, first page (budget 50 ms).
#![expect(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "a benchmark reports on stdout and sets up its own fixtures"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{ListSessionsRequest, LoadSessionRequest, SessionId};
use keel_acp::server::{EngineSessions, SessionFactory};
use keel_core::agent::{CallStatus, Engine, EngineConfig, SESSIONS_DIR, UserContent};
use keel_core::provider::{Message, Part, Role};
use keel_core::store::{SessionMeta, SessionStore, StoredEvent};
use keel_core::tool::{Artifact, Envelope, ToolKind, ToolOutput};
use keel_testkit::acp_client::{ClientOptions, TestClient, pipe};
use serde_json::json;

const RUNS: usize = 30;

fn turn(n: usize) -> Vec<StoredEvent> {
    let file = "fn main() {\n    println!(\"hello\");\n}\n".repeat(50);
    let read = Envelope::from_result(Ok(ToolOutput::text(file.clone())), Duration::ZERO);
    let mut edit = Envelope::from_result(Ok(ToolOutput::text("edited")), Duration::ZERO);
    edit.artifacts.push(Artifact::Diff(keel_diff::AcpDiff {
        path: "/w/src/main.rs".into(),
        old_text: Some(file.clone()),
        new_text: file.replacen("hello", "hi", 1),
        bounded: false,
    }));
    let mut events = vec![
        StoredEvent::User {
            content: vec![UserContent::Text {
                text: format!("prompt {n}"),
            }],
        },
        StoredEvent::Message {
            message: Message::user_text(format!("prompt {n}")),
        },
    ];
    for chunk in 0..4 {
        events.push(StoredEvent::Text {
            message_id: format!("m{n}"),
            text: format!("step {chunk}. "),
        });
    }
    for (tool, kind, envelope) in [
        ("read", ToolKind::Read, read),
        ("edit", ToolKind::Edit, edit),
    ] {
        let call_id = format!("{tool}{n}");
        events.push(StoredEvent::ToolCall {
            call_id: call_id.clone(),
            tool_id: tool.into(),
            kind,
            args: json!({"file_path": "src/main.rs"}),
            title: Some("Read src/main.rs".into()),
            locations: Vec::new(),
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
    (
        samples[samples.len() / 2],
        samples[(samples.len() * 95 / 100).min(samples.len() - 1)],
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let data = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(workspace.path()).unwrap();
    let store = SessionStore::new(data.path().join(SESSIONS_DIR));
    let log = store
        .create(SessionMeta::new("big", root.clone(), Vec::new()))
        .unwrap();
    let mut count = 0;
    'fill: for n in 0.. {
        for event in turn(n) {
            if count == 1_000 {
                break 'fill;
            }
            log.append(&event).unwrap();
            count += 1;
        }
    }
    log.close();
    for n in 0..1_000 {
        let mut meta = SessionMeta::new(format!("s{n:04}"), root.clone(), Vec::new());
        meta.title = Some(format!("task {n}"));
        let log = store.create(meta).unwrap();
        log.append(&turn(n)[0]).unwrap();
        log.close();
    }
    let scratch = tempfile::tempdir().unwrap();
    let mut config = EngineConfig::new(Arc::new(|_: &str| None), scratch.path().to_path_buf());
    config.user_data_dir = Some(data.path().to_path_buf());
    let factory: Arc<dyn SessionFactory> = Arc::new(EngineSessions::new(Engine::new(config)));
    let (agent_end, client_end) = pipe();
    let _server = tokio::spawn(keel_acp::server::serve(factory, agent_end));
    let client = TestClient::connect(ClientOptions::default(), client_end)
        .await
        .unwrap();
    client.initialize().await.unwrap();
    let big = SessionId::new("big");

    println!("## ACP session methods ({RUNS} runs each, in process)");
    println!("| case | median | p95 | budget |");
    println!("|---|---|---|---|");
    let mut samples = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let before = client.updates(&big).len();
        let started = Instant::now();
        client
            .request(LoadSessionRequest::new(big.clone(), &root))
            .await
            .unwrap();
        samples.push(started.elapsed());
        assert!(client.updates(&big).len() - before > 300);
    }
    let (median, p95) = stats(samples);
    println!("| session/load, 1,000 events | {median:.3?} | {p95:.3?} | 50 ms |");
    let mut samples = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        let page = client
            .request(ListSessionsRequest::new().cwd(root.clone()))
            .await
            .unwrap();
        samples.push(started.elapsed());
        assert_eq!(page.sessions.len(), 50);
    }
    let (median, p95) = stats(samples);
    println!("| session/list, 1,001 sessions, first page | {median:.3?} | {p95:.3?} | 50 ms |");
}
