//! The turn loop over real HTTP against the mock model server.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use keel_core::agent::{
    AgentError, AgentEvent, Answer, ApprovalAnswer, ApprovalRequest, Engine, EngineConfig,
    QuestionItem, SessionOptions, TurnHost, TurnStop, UserContent,
};
use keel_core::policy::Mode;
use keel_core::provider::{Part, ProviderConfig, ProviderError, ProviderKind, Role};
use keel_core::tool::{Tool, ToolContext, ToolError, ToolKind, ToolOutput, ToolSpec, Typed};
use keel_testkit::mock_model::{Api, MockModel, Reply, Turn};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Counts calls in flight; each call waits until `expected` calls are in flight (or a short
/// while), so parallel calls overlap and serialized ones cannot.
#[derive(Default)]
pub(super) struct Probe {
    pub(super) in_flight: AtomicUsize,
    pub(super) max_in_flight: AtomicUsize,
    pub(super) order: Mutex<Vec<String>>,
    pub(super) arrived: Notify,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ProbeParams {
    name: String,
}

struct ProbeTool {
    id: &'static str,
    mutating: bool,
    probe: Arc<Probe>,
    expected: usize,
}

impl Tool for ProbeTool {
    type Params = ProbeParams;

    fn spec(&self) -> ToolSpec {
        let spec = ToolSpec::new::<ProbeParams>(self.id, "test probe").kind(ToolKind::Other);
        if self.mutating {
            spec
        } else {
            spec.read_only()
        }
    }

    async fn run(&self, params: ProbeParams, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let now = self.probe.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.probe.max_in_flight.fetch_max(now, Ordering::SeqCst);
        self.probe.order.lock().unwrap().push(params.name.clone());
        self.probe.arrived.notify_waiters();
        // Wait (bounded) for the others to arrive, so overlapping calls are seen overlapping.
        let deadline = tokio::time::Instant::now() + Duration::from_millis(300);
        while self.probe.in_flight.load(Ordering::SeqCst) < self.expected
            && tokio::time::Instant::now() < deadline
        {
            let _ = tokio::time::timeout_at(deadline, self.probe.arrived.notified()).await;
        }
        self.probe.in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(ToolOutput::text(format!("probed {}", params.name)))
    }
}

/// Runs until cancelled, then reports it saw the cancellation.
struct HangTool {
    saw_cancel: Arc<AtomicUsize>,
    started: Arc<Notify>,
}

impl Tool for HangTool {
    type Params = ProbeParams;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<ProbeParams>("hang", "waits forever").read_only()
    }

    async fn run(&self, _params: ProbeParams, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.started.notify_one();
        ctx.cancel.cancelled().await;
        self.saw_cancel.fetch_add(1, Ordering::SeqCst);
        Err(ToolError::Cancelled)
    }
}

/// A host that records events and answers approvals from a script.
#[derive(Default)]
pub(super) struct Host {
    pub(super) events: Mutex<Vec<AgentEvent>>,
    pub(super) answers: Mutex<Vec<ApprovalAnswer>>,
    pub(super) approvals: Mutex<Vec<ApprovalRequest>>,
    /// When set, approvals never answer (until the turn is cancelled).
    pub(super) hold_approvals: bool,
    pub(super) asked: Notify,
    pub(super) first_text: Notify,
}

impl TurnHost for Host {
    fn event(&self, event: AgentEvent) {
        if matches!(event, AgentEvent::Text { .. }) {
            self.first_text.notify_one();
        }
        self.events.lock().unwrap().push(event);
    }

    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'_, ApprovalAnswer> {
        self.approvals.lock().unwrap().push(request);
        self.asked.notify_one();
        Box::pin(async move {
            if self.hold_approvals {
                std::future::pending::<()>().await;
            }
            let mut answers = self.answers.lock().unwrap();
            if answers.is_empty() {
                ApprovalAnswer::Answered(Answer::AllowOnce)
            } else {
                answers.remove(0)
            }
        })
    }

    fn ask(
        &self,
        _questions: Vec<QuestionItem>,
    ) -> BoxFuture<'_, Result<Vec<Vec<String>>, String>> {
        Box::pin(async { Err("no questions in this test".to_owned()) })
    }
}

pub(super) struct Fixture {
    pub(super) mock: MockModel,
    pub(super) engine: Engine,
    pub(super) _workspace: tempfile::TempDir,
    pub(super) workspace: std::path::PathBuf,
    pub(super) _scratch: tempfile::TempDir,
    pub(super) probe: Arc<Probe>,
    pub(super) saw_cancel: Arc<AtomicUsize>,
    pub(super) hang_started: Arc<Notify>,
}

pub(super) async fn fixture(api: Api, expected_parallel: usize) -> Fixture {
    let mock = MockModel::start().await;
    let workspace_dir = tempfile::tempdir().unwrap();
    let workspace = std::fs::canonicalize(workspace_dir.path()).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut config = EngineConfig::new(Arc::new(|_: &str| None), scratch.path().to_path_buf());
    let (name, kind, base) = match api {
        Api::Anthropic => ("anthropic", ProviderKind::Anthropic, mock.base_url()),
        Api::OpenAi => ("openai", ProviderKind::OpenAi, mock.openai_base_url()),
    };
    let mut provider = ProviderConfig::new(name, kind);
    provider.base_url = Some(base);
    provider.api_key = Some("test-key".into());
    provider.http.retry.base_delay = Duration::from_millis(5);
    config.providers = vec![provider];
    config.model = Some(format!("{name}/test-model"));
    config.mode = Mode::Allowlist;
    let probe = Arc::new(Probe::default());
    let saw_cancel = Arc::new(AtomicUsize::new(0));
    let hang_started = Arc::new(Notify::new());
    config.extra_tools = vec![
        Typed::wrap(ProbeTool {
            id: "look",
            mutating: false,
            probe: probe.clone(),
            expected: expected_parallel,
        })
        .unwrap(),
        Typed::wrap(ProbeTool {
            id: "change",
            mutating: true,
            probe: probe.clone(),
            expected: expected_parallel,
        })
        .unwrap(),
        Typed::wrap(HangTool {
            saw_cancel: saw_cancel.clone(),
            started: hang_started.clone(),
        })
        .unwrap(),
    ];
    Fixture {
        mock,
        engine: Engine::new(config),
        _workspace: workspace_dir,
        workspace,
        _scratch: scratch,
        probe,
        saw_cancel,
        hang_started,
    }
}

pub(super) fn reply(api: Api, turn: &Turn) -> Reply {
    match api {
        Api::Anthropic => Reply::anthropic(turn),
        Api::OpenAi => Reply::openai(turn),
    }
}

/// Awaits a test milestone, failing (instead of hanging) if it never comes.
pub(super) async fn within<F: std::future::Future>(milestone: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), milestone)
        .await
        .expect("milestone not reached within 10 s")
}

pub(super) fn prompt(text: &str) -> Vec<UserContent> {
    vec![UserContent::Text { text: text.into() }]
}

pub(super) fn options(f: &Fixture, interactive: bool) -> SessionOptions {
    SessionOptions {
        roots: vec![f.workspace.clone()],
        interactive,
        ..SessionOptions::default()
    }
}

/// The tool results the agent sent back in the recorded request body, by API.
pub(super) fn tool_results(api: Api, body: &Value) -> Vec<(String, String)> {
    let messages = body["messages"].as_array().unwrap();
    match api {
        Api::Anthropic => messages
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|b| b["type"] == "tool_result")
            .map(|b| {
                let content = match &b["content"] {
                    Value::String(s) => s.clone(),
                    Value::Array(items) => {
                        items.iter().filter_map(|i| i["text"].as_str()).collect()
                    }
                    other => other.to_string(),
                };
                (b["tool_use_id"].as_str().unwrap().to_owned(), content)
            })
            .collect(),
        Api::OpenAi => messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                (
                    m["tool_call_id"].as_str().unwrap().to_owned(),
                    m["content"].as_str().unwrap().to_owned(),
                )
            })
            .collect(),
    }
}

async fn multi_tool_turn(api: Api) {
    let f = fixture(api, 2).await;
    f.mock.push(
        api,
        reply(
            api,
            &Turn::new()
                .text("Looking twice.")
                .tool_call("call_a", "look", json!({"name": "a"}))
                .tool_call("call_b", "look", json!({"name": "b"}))
                .tool_call("call_c", "nope", json!({}))
                .usage(100, 20),
        ),
    );
    f.mock.push(
        api,
        reply(api, &Turn::text_only("Both looked.").usage(150, 5)),
    );
    let session = f.engine.open_session(options(&f, true)).unwrap();
    let host = Arc::new(Host::default());
    let outcome = session
        .run_turn(prompt("look"), host.clone(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.stop, TurnStop::EndTurn);
    assert_eq!(outcome.final_text, "Both looked.");
    let requests = f.mock.requests();
    assert_eq!(requests.len(), 2);
    let results = tool_results(api, &requests[1].body);
    assert_eq!(results[0], ("call_a".to_owned(), "probed a".to_owned()));
    assert_eq!(results[1], ("call_b".to_owned(), "probed b".to_owned()));
    assert_eq!(results[2].0, "call_c");
    assert!(
        results[2]
            .1
            .contains("unknown tool `nope`; the available tools are: read, write, edit")
            && results[2].1.ends_with("look, change, hang"),
        "{}",
        results[2].1
    );
    // Read-only calls of one response overlap.
    assert_eq!(f.probe.max_in_flight.load(Ordering::SeqCst), 2);
    // The usage event reports the latest request's context, not a running total.
    let usages: Vec<u64> = host
        .events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Usage { used, .. } => Some(*used),
            _ => None,
        })
        .collect();
    assert_eq!(usages.len(), 2);
    assert!(usages[1] >= 155, "{usages:?}");
    // History is consistent: every tool use is answered.
    let history = session.history().await;
    let uses = history
        .iter()
        .flat_map(|m| &m.content)
        .filter(|p| matches!(p, Part::ToolUse { .. }))
        .count();
    let answers = history
        .iter()
        .flat_map(|m| &m.content)
        .filter(|p| matches!(p, Part::ToolResult { .. }))
        .count();
    assert_eq!((uses, answers), (3, 3));
}

#[tokio::test]
async fn multi_tool_turn_anthropic() {
    multi_tool_turn(Api::Anthropic).await;
}

#[tokio::test]
async fn multi_tool_turn_openai() {
    multi_tool_turn(Api::OpenAi).await;
}

#[tokio::test]
async fn mutating_calls_run_one_at_a_time_in_order() {
    let f = fixture(Api::Anthropic, 2).await;
    f.mock.push_anthropic(
        Turn::new()
            .tool_call("c1", "change", json!({"name": "first"}))
            .tool_call("c2", "change", json!({"name": "second"}))
            .tool_call("c3", "look", json!({"name": "third"})),
    );
    f.mock.push_anthropic(Turn::text_only("done"));
    let mut opts = options(&f, true);
    opts.mode = Some(Mode::Yolo);
    let session = f.engine.open_session(opts).unwrap();
    let outcome = session
        .run_turn(
            prompt("go"),
            Arc::new(Host::default()),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.stop, TurnStop::EndTurn);
    assert_eq!(f.probe.max_in_flight.load(Ordering::SeqCst), 1);
    assert_eq!(
        *f.probe.order.lock().unwrap(),
        vec!["first", "second", "third"]
    );
}

#[tokio::test]
async fn retries_a_rate_limit_then_succeeds() {
    let f = fixture(Api::Anthropic, 1).await;
    f.mock
        .push(Api::Anthropic, Reply::rate_limited(Api::Anthropic, "0"));
    f.mock.push_anthropic(Turn::text_only("after the wait"));
    let session = f.engine.open_session(options(&f, true)).unwrap();
    let outcome = session
        .run_turn(
            prompt("hi"),
            Arc::new(Host::default()),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.final_text, "after the wait");
    assert_eq!(f.mock.requests().len(), 2);
}

#[tokio::test]
async fn a_cut_stream_is_an_error_not_a_silent_truncation() {
    let f = fixture(Api::OpenAi, 1).await;
    f.mock.push(
        Api::OpenAi,
        reply(
            Api::OpenAi,
            &Turn::text_only("this answer is cut short").chunk_chars(4),
        )
        .cut_after(3),
    );
    let session = f.engine.open_session(options(&f, true)).unwrap();
    let error = session
        .run_turn(
            prompt("hi"),
            Arc::new(Host::default()),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error, AgentError::Provider(ProviderError::StreamCut { .. })),
        "{error:?}"
    );
    // The failed turn leaves a usable session: the next prompt goes through.
    f.mock.push_anthropic(Turn::text_only("unused"));
    f.mock.push(
        Api::OpenAi,
        reply(Api::OpenAi, &Turn::text_only("recovered")),
    );
    let outcome = session
        .run_turn(
            prompt("again"),
            Arc::new(Host::default()),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.final_text, "recovered");
    let last = f.mock.requests().last().unwrap().body.clone();
    let roles: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles.iter().filter(|r| **r == "user").count(),
        1,
        "user turns merged: {roles:?}"
    );
}

#[tokio::test]
async fn cancel_while_streaming() {
    let f = fixture(Api::Anthropic, 1).await;
    f.mock.push(
        Api::Anthropic,
        Reply::anthropic(
            &Turn::text_only("a long and slow answer that never ends in time").chunk_chars(2),
        )
        .chunk_delay(Duration::from_millis(200)),
    );
    let session = Arc::new(f.engine.open_session(options(&f, true)).unwrap());
    let host = Arc::new(Host::default());
    let cancel = CancellationToken::new();
    let turn = tokio::spawn({
        let (session, host, cancel) = (session.clone(), host.clone(), cancel.clone());
        async move { session.run_turn(prompt("talk"), host, cancel).await }
    });
    within(host.first_text.notified()).await;
    cancel.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(5), turn)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(outcome.stop, TurnStop::Cancelled);
    assert!(
        f.mock.wait_for_disconnect(Duration::from_secs(5)).await,
        "the HTTP stream was not dropped"
    );
    let history = session.history().await;
    assert_eq!(
        history.last().unwrap().role,
        Role::Assistant,
        "partial answer kept"
    );
}

#[tokio::test]
async fn cancel_while_awaiting_approval() {
    let f = fixture(Api::Anthropic, 1).await;
    f.mock
        .push_anthropic(Turn::new().tool_call("c1", "change", json!({"name": "x"})));
    let session = Arc::new(f.engine.open_session(options(&f, true)).unwrap());
    let host = Arc::new(Host {
        hold_approvals: true,
        ..Host::default()
    });
    let cancel = CancellationToken::new();
    let turn = tokio::spawn({
        let (session, host, cancel) = (session.clone(), host.clone(), cancel.clone());
        async move { session.run_turn(prompt("change it"), host, cancel).await }
    });
    within(host.asked.notified()).await;
    cancel.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(5), turn)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(outcome.stop, TurnStop::Cancelled);
    assert!(
        f.probe.order.lock().unwrap().is_empty(),
        "the tool must not run"
    );
    let history = session.history().await;
    assert!(matches!(
        history.last().unwrap().content[0],
        Part::ToolResult { is_error: true, .. }
    ));
}

#[tokio::test]
async fn cancel_while_a_tool_runs() {
    let f = fixture(Api::Anthropic, 1).await;
    f.mock
        .push_anthropic(Turn::new().tool_call("c1", "hang", json!({"name": "x"})));
    let session = Arc::new(f.engine.open_session(options(&f, true)).unwrap());
    let host = Arc::new(Host::default());
    let cancel = CancellationToken::new();
    let turn = tokio::spawn({
        let (session, host, cancel) = (session.clone(), host.clone(), cancel.clone());
        async move { session.run_turn(prompt("wait"), host, cancel).await }
    });
    within(f.hang_started.notified()).await;
    cancel.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(5), turn)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(outcome.stop, TurnStop::Cancelled);
    assert_eq!(f.saw_cancel.load(Ordering::SeqCst), 1);
    let events = host.events.lock().unwrap();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::ToolResult { call_id, .. } if call_id == "c1"))
    );
}

#[tokio::test]
async fn a_prompt_without_credentials_names_what_to_set() {
    let scratch = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let engine = Engine::new(EngineConfig::new(
        Arc::new(|_: &str| None),
        scratch.path().to_path_buf(),
    ));
    let session = engine
        .open_session(SessionOptions {
            roots: vec![workspace.path().to_path_buf()],
            ..SessionOptions::default()
        })
        .unwrap();
    let error = session
        .run_turn(
            prompt("hi"),
            Arc::new(Host::default()),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("ANTHROPIC_API_KEY") && message.contains("OPENAI_API_KEY"),
        "{message}"
    );
}

#[tokio::test]
async fn the_turn_stops_at_the_request_limit() {
    let f = fixture(Api::Anthropic, 1).await;
    for i in 0..3 {
        f.mock
            .push_anthropic(Turn::new().tool_call(format!("c{i}"), "look", json!({"name": "x"})));
    }
    let mut config = f.engine.config().clone();
    config.max_requests_per_turn = 3;
    let engine = Engine::new(config);
    let session = engine.open_session(options(&f, true)).unwrap();
    let outcome = session
        .run_turn(
            prompt("loop"),
            Arc::new(Host::default()),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.stop, TurnStop::MaxRequests);
    assert_eq!(f.mock.requests().len(), 3);
}
