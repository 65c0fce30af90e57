//! Tool errors by audience, through the turn loop over real HTTP against the mock model: an error
//! the model can act on reaches it whole; a failure of Keel itself reaches the user whole and the
//! model as a neutral message; a write that finished while a cancel arrived is reported as done.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use keel_core::agent::{
    AgentEvent, Answer, ApprovalAnswer, ApprovalRequest, CallStatus, Engine, EngineConfig,
    QuestionItem, SessionOptions, TurnHost, TurnStop, UserContent,
};
use keel_core::provider::{Part, ProviderConfig, ProviderKind};
use keel_core::tool::{
    Artifact, Describe, DynTool, Envelope, InternalError, ParsedCall, ToolContext, ToolError,
    ToolOutput, ToolSpec, Typed,
};
use keel_core::tools::write::WriteTool;
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The real `write` tool under another id, which waits for the turn's cancel before it writes:
/// the write happens inside the cancel grace period.
struct WriteAfterCancel {
    inner: Arc<dyn DynTool>,
    spec: ToolSpec,
    started: Arc<Notify>,
}

impl WriteAfterCancel {
    fn new(started: Arc<Notify>) -> Self {
        let inner = Typed::wrap(WriteTool).unwrap();
        let mut spec = inner.spec().clone();
        spec.id = "slow_write".into();
        Self {
            inner,
            spec,
            started,
        }
    }
}

impl DynTool for WriteAfterCancel {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn parse(&self, args: &Value, how: Describe<'_>) -> Result<ParsedCall, ToolError> {
        self.inner.parse(args, how)
    }

    fn prepare<'a>(
        &'a self,
        call: &'a mut ParsedCall,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        self.inner.prepare(call, ctx)
    }

    fn run<'a>(
        &'a self,
        call: ParsedCall,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            self.started.notify_one();
            ctx.cancel.cancelled().await;
            self.inner.run(call, ctx).await
        })
    }
}

/// Records events; allows every call it is asked about.
#[derive(Default)]
struct Host {
    events: Mutex<Vec<AgentEvent>>,
}

impl Host {
    fn result(&self, id: &str) -> (CallStatus, Envelope) {
        self.events
            .lock()
            .unwrap()
            .iter()
            .find_map(|event| match event {
                AgentEvent::ToolResult {
                    call_id,
                    status,
                    envelope,
                } if call_id == id => Some((*status, envelope.clone())),
                _ => None,
            })
            .expect("the call has a result")
    }
}

impl TurnHost for Host {
    fn event(&self, event: AgentEvent) {
        self.events.lock().unwrap().push(event);
    }

    fn approve(&self, _request: ApprovalRequest) -> BoxFuture<'_, ApprovalAnswer> {
        Box::pin(async { ApprovalAnswer::Answered(Answer::AllowOnce) })
    }

    fn ask(
        &self,
        _questions: Vec<QuestionItem>,
    ) -> BoxFuture<'_, Result<Vec<Vec<String>>, String>> {
        Box::pin(async { Err("no questions in this test".to_owned()) })
    }
}

struct Fixture {
    mock: MockModel,
    engine: Engine,
    workspace: std::path::PathBuf,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    write_started: Arc<Notify>,
}

async fn fixture() -> Fixture {
    let mock = MockModel::start().await;
    let workspace_dir = tempfile::tempdir().unwrap();
    let workspace = std::fs::canonicalize(workspace_dir.path()).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut config = EngineConfig::new(Arc::new(|_: &str| None), scratch.path().to_path_buf());
    let mut provider = ProviderConfig::new("anthropic", ProviderKind::Anthropic);
    provider.base_url = Some(mock.base_url());
    provider.api_key = Some("test-key".into());
    config.providers = vec![provider];
    config.model = Some("anthropic/test-model".into());
    let write_started = Arc::new(Notify::new());
    config.extra_tools = vec![Arc::new(WriteAfterCancel::new(write_started.clone()))];
    Fixture {
        mock,
        engine: Engine::new(config),
        workspace,
        _dirs: (workspace_dir, scratch),
        write_started,
    }
}

fn options(f: &Fixture) -> SessionOptions {
    SessionOptions {
        roots: vec![f.workspace.clone()],
        interactive: true,
        ..SessionOptions::default()
    }
}

fn prompt(text: &str) -> Vec<UserContent> {
    vec![UserContent::Text { text: text.into() }]
}

/// The tool results the model was sent in the last request (Anthropic shape).
fn sent_results(f: &Fixture) -> Vec<(String, String, bool)> {
    let body = f.mock.requests().last().unwrap().body.clone();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let content = match &b["content"] {
                Value::String(s) => s.clone(),
                Value::Array(items) => items.iter().filter_map(|i| i["text"].as_str()).collect(),
                other => other.to_string(),
            };
            (
                b["tool_use_id"].as_str().unwrap().to_owned(),
                content,
                b["is_error"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_write_that_finished_during_the_cancel_grace_is_reported_done() {
    let f = fixture().await;
    f.mock.push_anthropic(Turn::new().tool_call(
        "w1",
        "slow_write",
        json!({"file_path": "out.txt", "content": "written\n"}),
    ));
    let session = Arc::new(f.engine.open_session(options(&f)).unwrap());
    let host = Arc::new(Host::default());
    let cancel = CancellationToken::new();
    let turn = tokio::spawn({
        let (session, host, cancel) = (session.clone(), host.clone(), cancel.clone());
        async move { session.run_turn(prompt("write it"), host, cancel).await }
    });
    tokio::time::timeout(Duration::from_secs(10), f.write_started.notified())
        .await
        .expect("the write started");
    cancel.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(10), turn)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(outcome.stop, TurnStop::Cancelled);
    // The file was written...
    assert_eq!(
        std::fs::read_to_string(f.workspace.join("out.txt")).unwrap(),
        "written\n"
    );
    // ...so the editor is told the call completed, with the write's own result...
    let (status, envelope) = host.result("w1");
    assert_eq!(status, CallStatus::Completed, "{envelope:?}");
    assert!(!envelope.is_error(), "{envelope:?}");
    assert!(
        envelope
            .artifacts
            .iter()
            .any(|a| matches!(a, Artifact::Location { .. })),
        "{envelope:?}"
    );
    // ...and so is the model, in the history the next turn sends.
    let history = session.history().await;
    let recorded = history
        .iter()
        .flat_map(|m| m.content.iter())
        .find_map(|part| match part {
            Part::ToolResult {
                tool_use_id,
                content,
                is_error,
            } if tool_use_id == "w1" => Some((content.clone(), *is_error)),
            _ => None,
        })
        .expect("the call's result is in the history");
    assert!(!recorded.1, "{recorded:?}");
    assert!(!recorded.0.contains("cancelled"), "{recorded:?}");
    assert_eq!(recorded.0, envelope.for_model());
}

#[tokio::test]
async fn an_error_the_model_can_act_on_reaches_it_whole() {
    let f = fixture().await;
    std::fs::write(f.workspace.join("a.txt"), "alpha\n").unwrap();
    f.mock.push_anthropic(
        Turn::new()
            .tool_call("r1", "read", json!({"file_path": "missing.txt"}))
            .tool_call("g1", "grep", json!({"pattern": "fn(("})),
    );
    f.mock.push_anthropic(Turn::new().text("ok"));
    let session = f.engine.open_session(options(&f)).unwrap();
    let host = Arc::new(Host::default());
    let outcome = session
        .run_turn(prompt("look"), host.clone(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.stop, TurnStop::EndTurn);
    let sent = sent_results(&f);
    let (_, missing, is_error) = sent.iter().find(|(id, ..)| id == "r1").unwrap();
    assert!(*is_error);
    assert_eq!(
        missing,
        &format!(
            "missing.txt does not exist (looked for {}). Check the path; relative paths start \
             at the workspace root.",
            f.workspace.join("missing.txt").display()
        )
    );
    let (_, regex, is_error) = sent.iter().find(|(id, ..)| id == "g1").unwrap();
    assert!(*is_error);
    assert!(regex.starts_with("invalid regex `fn((`"), "{regex}");
    // The user sees the same text, and no internal error.
    for id in ["r1", "g1"] {
        let (status, envelope) = host.result(id);
        assert_eq!(status, CallStatus::Failed);
        assert_eq!(envelope.internal_error(), None);
        assert!(envelope.for_model() != InternalError::FOR_MODEL);
    }
}

#[tokio::test]
async fn a_failure_of_keel_reaches_the_user_whole_and_the_model_neutral() {
    let f = fixture().await;
    let lines: String = (0..300).map(|i| format!("needle {i}\n")).collect();
    std::fs::write(f.workspace.join("big.txt"), lines).unwrap();
    f.mock.push_anthropic(Turn::new().tool_call(
        "g1",
        "grep",
        json!({"pattern": "needle", "output_mode": "content"}),
    ));
    f.mock.push_anthropic(Turn::new().text("ok"));
    let session = f.engine.open_session(options(&f)).unwrap();
    // Keel's own state breaks: the session's scratch directory becomes a file, so the sidecar
    // of grep's long output cannot be written.
    let scratch = session.state().scratch_dir.clone();
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::write(&scratch, "not a directory").unwrap();
    let host = Arc::new(Host::default());
    let outcome = session
        .run_turn(prompt("find"), host.clone(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.stop, TurnStop::EndTurn);
    // The model reads only the neutral message: no path of Keel's state, no OS error.
    let sent = sent_results(&f);
    let (_, text, is_error) = sent.iter().find(|(id, ..)| id == "g1").unwrap();
    assert!(*is_error);
    assert_eq!(text, InternalError::FOR_MODEL);
    assert!(!text.contains(&scratch.display().to_string()));
    // The user gets the whole chain.
    let (status, envelope) = host.result("g1");
    assert_eq!(status, CallStatus::Failed);
    let report = envelope
        .internal_error()
        .expect("the user is shown the details");
    assert!(
        report.starts_with("internal error in Keel while writing a sidecar file: "),
        "{report}"
    );
    assert!(report.contains("os error"), "{report}");
}
