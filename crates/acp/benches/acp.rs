//! The ACP front-end's costs, against the real engine and the mock model server over HTTP on
//! 127.0.0.1, driven by the test-kit client.
//!
//! 1. In process (the server over in-memory pipes): `initialize` and `session/new` round trips,
//!    and a read → edit (approved) → bash (approved) → answer turn: 4 model requests, 2
//!    approvals. The model's share is measured in the same run by streaming the same 4 replies
//!    straight through the provider, and subtracted: agent time = turn − model share.
//! 2. The `keel acp` binary over stdio: process spawn → `initialize` response, `session/new`,
//!    the same turn, and the process's peak RSS (`VmHWM`) after it. Skipped when the binary
//!    does not serve ACP (`KEEL_BENCH_ONLY=binary` runs it alone).
//!
//! 3. A long session on one `keel acp` process: 300 text turns of 4 KB prompts, and the
//!    process's CPU time (all its threads, from `/proc/PID/task/*/schedstat`, in ns) per turn
//!    over the first 50 turns and over the last 50: how Keel's own work grows with the
//!    conversation, with the page faults and the user / system split of the two windows
//!    (`KEEL_BENCH_ONLY=long` runs it alone).
//! 4. A command's own cost: ten `true` commands in one turn on `keel acp`, each call's
//!    `in_progress` → `completed` as the client receives them, under namespaces and under the
//!    Landlock fallback (`KEEL_BENCH_ONLY=commands` runs it alone).
//!
//! `session/new` answers before the engine session has opened; a `/help` prompt (answered
//! locally, once the session is open) measures when it is, and keeps the timed turn from
//! paying for the open.
#![expect(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "a benchmark reports on stdout and sets up its own fixtures"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    PermissionOptionKind, SessionId, SessionUpdate, StopReason, ToolCallStatus,
};
use futures::StreamExt as _;
use keel_acp::server::{EngineSessions, SessionFactory};
use keel_core::agent::{Engine, EngineConfig, SessionOptions};
use keel_core::capability::ShellRunRequirement;
use keel_core::provider::{ModelRequest, ProviderConfig, ProviderKind};
use keel_testkit::acp_client::{
    ClientOptions, Event, PermissionReply, TestClient, isolated_env, pipe,
};
use keel_testkit::measure::{load_average, status_kib};
use keel_testkit::mock_model::{MockModel, Reply, Turn};
use serde_json::json;

const WARMUP: usize = 3;
const ROUND_TRIPS: usize = 50;
const TURNS: usize = 30;
const SPAWNS: usize = 20;
/// The model the binary runs name (`KEEL_MODEL`): the mock's Anthropic endpoint.
const BENCH_MODEL: (&str, &str) = ("KEEL_MODEL", "anthropic/bench-model");
const LIB: &str = "pub fn greet() -> &'static str {\n    \"helo\"\n}\n";

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn p95(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[(samples.len() * 95 / 100).min(samples.len() - 1)]
}

fn report(what: &str, samples: Vec<Duration>) {
    println!(
        "  {what:<44} median {:>9.3?}  p95 {:>9.3?}",
        median(samples.clone()),
        p95(samples)
    );
}

/// The 4 replies of the read → edit → bash → answer turn.
fn script(mock: &MockModel) {
    mock.push_anthropic(Turn::new().text("Let me look.").tool_call(
        "t1",
        "read",
        json!({"file_path": "src/lib.rs"}),
    ));
    mock.push_anthropic(Turn::new().tool_call(
        "t2",
        "edit",
        json!({"file_path": "src/lib.rs", "old_string": "\"helo\"", "new_string": "\"hello\""}),
    ));
    mock.push_anthropic(Turn::new().tool_call(
        "t3",
        "bash",
        json!({"command": "mkdir -p build && echo built"}),
    ));
    mock.push_anthropic(Turn::text_only("Fixed the greeting."));
}

fn approvals() -> Vec<PermissionReply> {
    vec![PermissionReply::Choose(PermissionOptionKind::AllowOnce); 2]
}

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), LIB).unwrap();
    (dir, root)
}

fn provider(mock: &MockModel) -> ProviderConfig {
    let mut provider = ProviderConfig::new("anthropic", ProviderKind::Anthropic);
    provider.base_url = Some(mock.base_url());
    provider.api_key = Some("bench".into());
    provider
}

/// The model's share of a turn: the same replies streamed straight through the provider.
async fn model_share(mock: &MockModel, raw: &dyn keel_core::provider::Provider) -> Duration {
    script(mock);
    let started = Instant::now();
    for _ in 0..4 {
        let request = ModelRequest {
            model: "bench-model".into(),
            system: String::new(),
            messages: vec![keel_core::provider::Message::user_text("go")].into(),
            tools: Vec::new(),
            max_tokens: 1000,
            thinking_budget: None,
        };
        let mut stream = raw.stream(request).await.unwrap();
        while let Some(event) = stream.next().await {
            event.unwrap();
        }
    }
    started.elapsed()
}

/// `initialize` round trips, each on a fresh connection to the in-process server.
async fn initialize_round_trips(factory: &Arc<dyn SessionFactory>) -> Vec<Duration> {
    let mut initialize = Vec::new();
    for run in 0..WARMUP + ROUND_TRIPS {
        let (agent_end, client_end) = pipe();
        let server = tokio::spawn(keel_acp::server::serve(factory.clone(), agent_end));
        let client = TestClient::connect(ClientOptions::default(), client_end)
            .await
            .unwrap();
        let started = Instant::now();
        client.initialize().await.unwrap();
        if run >= WARMUP {
            initialize.push(started.elapsed());
        }
        client.close().await.unwrap();
        server.await.unwrap().unwrap();
    }
    initialize
}

/// `session/new` round trips in `root`, and the time until each session is open.
async fn new_session_round_trips(
    client: &TestClient,
    root: &Path,
) -> (Vec<Duration>, Vec<Duration>) {
    let mut new_session = Vec::new();
    let mut session_open = Vec::new();
    for run in 0..WARMUP + ROUND_TRIPS {
        let started = Instant::now();
        let session = client.new_session(root, &[]).await.unwrap().session_id;
        let created = started.elapsed();
        // The engine session opens in the background; a slash command waits for it.
        client.prompt(&session, "/help").await.unwrap();
        if run >= WARMUP {
            new_session.push(created);
            session_open.push(started.elapsed());
        }
    }
    (new_session, session_open)
}

/// The engine's share of session/new: opening a session directly.
fn engine_opens(engine: &Engine, root: &Path) -> Vec<Duration> {
    let mut open_session = Vec::new();
    for run in 0..WARMUP + ROUND_TRIPS {
        let started = Instant::now();
        let session = engine
            .open_session(SessionOptions {
                roots: vec![root.to_path_buf()],
                interactive: true,
                ..SessionOptions::default()
            })
            .unwrap();
        if run >= WARMUP {
            open_session.push(started.elapsed());
        }
        session.close();
    }
    open_session
}

/// The biggest parts of opening a session: the tool registry, the permission rules and
/// resolving the model.
struct OpenParts {
    registry: Vec<Duration>,
    policy: Vec<Duration>,
    model: Vec<Duration>,
}

fn open_parts(engine: &Engine, root: &Path) -> OpenParts {
    let mut parts = OpenParts {
        registry: Vec::new(),
        policy: Vec::new(),
        model: Vec::new(),
    };
    for run in 0..WARMUP + ROUND_TRIPS {
        let started = Instant::now();
        engine.registry().unwrap();
        let built = started.elapsed();
        let started = Instant::now();
        keel_core::policy::Policy::load(
            root,
            None,
            keel_core::policy::Mode::Allowlist,
            false,
            keel_core::policy::Trust::Unknown,
        )
        .unwrap();
        let loaded = started.elapsed();
        let started = Instant::now();
        let slot = engine.resolve_model(None);
        assert!(slot.resolved.is_ok());
        if run >= WARMUP {
            parts.registry.push(built);
            parts.policy.push(loaded);
            parts.model.push(started.elapsed());
        }
    }
    parts
}

/// The read/edit/bash turn in a fresh session and workspace each time, and the model's share of
/// each (the same replies through the provider alone).
async fn timed_turns(
    client: &TestClient,
    mock: &MockModel,
    raw: &dyn keel_core::provider::Provider,
) -> (Vec<Duration>, Vec<Duration>) {
    let mut turns = Vec::new();
    let mut models = Vec::new();
    for run in 0..WARMUP + TURNS {
        let model = model_share(mock, raw).await;
        let (_dir, root) = workspace();
        let session = client.new_session(&root, &[]).await.unwrap().session_id;
        client.prompt(&session, "/help").await.unwrap();
        script(mock);
        client.push_permissions(approvals());
        let started = Instant::now();
        let answer = client.prompt(&session, "fix the typo").await.unwrap();
        let turn = started.elapsed();
        assert_eq!(answer.stop_reason, StopReason::EndTurn);
        assert_eq!(
            std::fs::read_to_string(root.join("src/lib.rs")).unwrap(),
            LIB.replace("helo", "hello")
        );
        if run >= WARMUP {
            turns.push(turn);
            models.push(model);
        }
    }
    (turns, models)
}

async fn in_process(mock: &MockModel, scratch: &Path) {
    let mut config = EngineConfig::new(Arc::new(|_: &str| None), scratch.to_path_buf());
    config.providers = vec![provider(mock)];
    config.model = Some("anthropic/bench-model".into());
    config.manifest = config
        .manifest
        .with_shell(ShellRunRequirement::any_args("*"));
    let bare_engine = Engine::new(config.clone());
    let factory: Arc<dyn SessionFactory> = Arc::new(EngineSessions::new(Engine::new(config)));
    let raw = provider(mock).build().unwrap();

    let initialize = initialize_round_trips(&factory).await;

    let (agent_end, client_end) = pipe();
    let _server = tokio::spawn(keel_acp::server::serve(factory.clone(), agent_end));
    let client = TestClient::connect(ClientOptions::default(), client_end)
        .await
        .unwrap();
    client.initialize().await.unwrap();
    let (_dir, root) = workspace();
    let (new_session, session_open) = new_session_round_trips(&client, &root).await;
    let open_session = engine_opens(&bare_engine, &root);
    let parts = open_parts(&bare_engine, &root);
    let (turns, models) = timed_turns(&client, mock, raw.as_ref()).await;
    let agent: Vec<Duration> = turns
        .iter()
        .zip(&models)
        .map(|(turn, model)| turn.saturating_sub(*model))
        .collect();

    println!("in process (server over in-memory pipes, real engine, mock model over HTTP)");
    report("initialize round trip", initialize);
    report("session/new round trip", new_session);
    report("  until the session is open (/help answered)", session_open);
    report("  engine.open_session alone", open_session);
    report("    of which the tool registry", parts.registry);
    report("    of which the permission rules", parts.policy);
    report("    of which resolving the model", parts.model);
    report("read/edit/bash turn, 4 requests, 2 approvals", turns);
    report("  model share (same replies, provider only)", models);
    report("  agent time (turn - model share)", agent);
}

fn mib_line(what: &str, mut kib: Vec<u64>) {
    kib.sort_unstable();
    if let (Some(median), Some(max)) = (kib.get(kib.len() / 2), kib.last()) {
        println!(
            "  {what:<44} median {:>6.1} MiB  max {:>6.1} MiB",
            *median as f64 / 1024.0,
            *max as f64 / 1024.0
        );
    }
}

async fn binary(mock: &MockModel) {
    let earlier_requests = mock.requests().len();
    let program = PathBuf::from(env!("CARGO_BIN_EXE_keel"));
    let home = tempfile::tempdir().unwrap();
    let env = isolated_env(home.path(), &mock.base_url(), &[BENCH_MODEL]);
    let mut spawn_to_initialize = Vec::new();
    let mut new_session = Vec::new();
    let mut session_open = Vec::new();
    let mut turns = Vec::new();
    let mut peaks = Vec::new();
    let mut anonymous = Vec::new();
    let mut file_backed = Vec::new();
    for run in 0..WARMUP + SPAWNS {
        let (_dir, root) = workspace();
        let started = Instant::now();
        let client = TestClient::spawn(
            ClientOptions::default().permissions(approvals()),
            &program,
            &["acp"],
            &root,
            &env,
        )
        .await
        .unwrap();
        if let Err(error) = client.initialize().await {
            println!("the keel binary: skipped (`keel acp` does not serve ACP yet: {error})");
            return;
        }
        let initialized = started.elapsed();
        let started = Instant::now();
        let session = client.new_session(&root, &[]).await.unwrap().session_id;
        let created = started.elapsed();
        client.prompt(&session, "/help").await.unwrap();
        let open = started.elapsed();
        script(mock);
        let started = Instant::now();
        let answer = client.prompt(&session, "fix the typo").await.unwrap();
        let turn = started.elapsed();
        assert_eq!(answer.stop_reason, StopReason::EndTurn);
        let pid = client.pid().unwrap();
        let peak = status_kib(pid, "VmHWM");
        let anon = status_kib(pid, "RssAnon");
        let file = status_kib(pid, "RssFile");
        client.close().await.unwrap();
        if run >= WARMUP {
            spawn_to_initialize.push(initialized);
            new_session.push(created);
            session_open.push(open);
            turns.push(turn);
            peaks.extend(peak);
            anonymous.extend(anon);
            file_backed.extend(file);
        }
    }
    println!("the keel binary over stdio (`keel acp`, {SPAWNS} processes)");
    report("process spawn -> initialize response", spawn_to_initialize);
    report("session/new round trip", new_session);
    report("  until the session is open (/help answered)", session_open);
    report("read/edit/bash turn, 4 requests, 2 approvals", turns);
    mib_line("peak RSS (VmHWM) after the turn", peaks);
    mib_line("  resident now: anonymous (RssAnon)", anonymous);
    mib_line("  resident now: the binary's pages (RssFile)", file_backed);
    // The first model request of a session: system prompt, tool schemas and the prompt.
    if let Some(first) = mock.requests().get(earlier_requests) {
        let bytes = serde_json::to_string(&first.body).map_or(0, |body| body.len());
        println!(
            "  first model request body: {bytes} bytes ({:.1} KiB)",
            bytes as f64 / 1024.0
        );
    }
}

/// Commands per turn in [`commands`], and sessions per mechanism (the first is a warm-up).
const COMMANDS: usize = 10;
const COMMAND_SESSIONS: usize = 4;

/// A command's own cost as the editor sees it: `keel acp` (stdio, the mock model over HTTP)
/// runs ten `true` commands in one turn, one per model reply; each call's time from its
/// `in_progress` update to its `completed` update, as the client receives them. `true` is
/// read-only, so each runs in the contained profile without a prompt. Once under namespaces and
/// once under the Landlock fallback (`[sandbox] mechanism`, `mode = "required"`, so a host
/// without the mechanism fails the run instead of measuring an unconfined command).
async fn commands() {
    let program = PathBuf::from(env!("CARGO_BIN_EXE_keel"));
    println!(
        "a command's own cost: {COMMANDS} `true` commands in one turn, in_progress -> completed"
    );
    for mechanism in ["namespaces", "landlock"] {
        let mock = MockModel::start().await;
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join("config/keel")).unwrap();
        std::fs::write(
            home.path().join("config/keel/config.toml"),
            format!("[sandbox]\nmode = \"required\"\nmechanism = \"{mechanism}\"\n"),
        )
        .unwrap();
        let env = isolated_env(home.path(), &mock.base_url(), &[BENCH_MODEL]);
        let mut samples = Vec::new();
        for run in 0..COMMAND_SESSIONS {
            let (_dir, root) = workspace();
            let client =
                TestClient::spawn(ClientOptions::default(), &program, &["acp"], &root, &env)
                    .await
                    .unwrap();
            client.initialize().await.unwrap();
            let session = client.new_session(&root, &[]).await.unwrap().session_id;
            client.prompt(&session, "/help").await.unwrap();
            for call in 0..COMMANDS {
                mock.push_anthropic(Turn::new().tool_call(
                    format!("c{call}"),
                    "bash",
                    json!({"command": "true"}),
                ));
            }
            mock.push_anthropic(Turn::text_only("Ran them."));
            let answer = client.prompt(&session, "run true ten times").await.unwrap();
            assert_eq!(answer.stop_reason, StopReason::EndTurn);
            let mut started = std::collections::HashMap::new();
            let mut costs = Vec::new();
            for (at, event) in client.timed_events() {
                let Event::Update(notification) = event else {
                    continue;
                };
                let (id, status) = match notification.update {
                    SessionUpdate::ToolCall(call) => (call.tool_call_id, Some(call.status)),
                    SessionUpdate::ToolCallUpdate(update) => {
                        (update.tool_call_id, update.fields.status)
                    }
                    _ => continue,
                };
                match status {
                    Some(ToolCallStatus::InProgress) => {
                        started.entry(id).or_insert(at);
                    }
                    Some(ToolCallStatus::Completed) => {
                        if let Some(start) = started.get(&id) {
                            costs.push(at.duration_since(*start));
                        }
                    }
                    Some(ToolCallStatus::Failed) => {
                        panic!("a `true` command failed under {mechanism}")
                    }
                    _ => {}
                }
            }
            assert_eq!(
                costs.len(),
                COMMANDS,
                "every call completed under {mechanism}"
            );
            client.close().await.unwrap();
            if run > 0 {
                samples.extend(costs);
            }
        }
        report(
            &format!("  {mechanism} ({} commands)", samples.len()),
            samples,
        );
    }
}

/// `session/new` on one `keel acp` process, with no MCP server and with five stdio servers
/// (`keel-mcp-test-server`): they start in the background, so the answer does not wait.
async fn mcp_servers(mock: &MockModel) {
    use agent_client_protocol::v1::schema::{
        CloseSessionRequest, McpServer, McpServerStdio, NewSessionRequest,
    };
    let program = PathBuf::from(env!("CARGO_BIN_EXE_keel"));
    let server = PathBuf::from(env!("CARGO_BIN_EXE_keel-mcp-test-server"));
    let home = tempfile::tempdir().unwrap();
    let env = isolated_env(home.path(), &mock.base_url(), &[BENCH_MODEL]);
    let (_dir, root) = workspace();
    let client = TestClient::spawn(ClientOptions::default(), &program, &["acp"], &root, &env)
        .await
        .unwrap();
    client.initialize().await.unwrap();
    let servers: Vec<McpServer> = (0..5)
        .map(|n| McpServer::Stdio(McpServerStdio::new(format!("s{n}"), &server)))
        .collect();
    let mut bare = Vec::new();
    let mut five = Vec::new();
    for run in 0..WARMUP + SPAWNS {
        for (with, times) in [(false, &mut bare), (true, &mut five)] {
            let request = NewSessionRequest::new(&root).mcp_servers(if with {
                servers.clone()
            } else {
                Vec::new()
            });
            let started = Instant::now();
            let session = client.request(request).await.unwrap().session_id;
            let elapsed = started.elapsed();
            client.prompt(&session, "/mcp").await.unwrap();
            client
                .request(CloseSessionRequest::new(session))
                .await
                .unwrap();
            if run >= WARMUP {
                times.push(elapsed);
            }
        }
    }
    client.close().await.unwrap();
    println!("session/new on one `keel acp` process ({SPAWNS} sessions each)");
    report("no MCP server", bare);
    report("five stdio MCP servers (started in the background)", five);
}

#[path = "support/long_session.rs"]
mod long_session;
use long_session::long_session;

#[tokio::main]
async fn main() {
    println!("load average before: {}", load_average());
    match std::env::var("KEEL_BENCH_ONLY").as_deref() {
        Ok("mcp") => {
            mcp_servers(&MockModel::start().await).await;
            return;
        }
        Ok("long") => {
            long_session().await;
            return;
        }
        Ok("binary") => {
            binary(&MockModel::start().await).await;
            return;
        }
        Ok("commands") => {
            commands().await;
            return;
        }
        _ => {}
    }
    let mock = MockModel::start().await;
    let scratch = tempfile::tempdir().unwrap();
    in_process(&mock, scratch.path()).await;
    binary(&mock).await;
    mcp_servers(&mock).await;
    commands().await;
    long_session().await;
    println!("load average after: {}", load_average());
}
