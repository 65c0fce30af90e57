//! Test support: a scripted engine (each turn runs a test-supplied async closure against the
//! real host) with its [`Harness`]; the real engine against the mock model with its
//! [`EngineHarness`]; both served to the test client over in-memory pipes; redaction.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use std::time::Duration;

use agent_client_protocol::v1::schema::{ContentBlock, PromptResponse, SessionId, SessionUpdate};
use futures::future::BoxFuture;
use keel_acp::server::{
    AgentSession, EngineError, EngineSessions, SessionFactory, SessionSpec, ToolInfo,
};
use keel_core::agent::{
    AgentEvent, Engine, EngineConfig, TurnHost, TurnOutcome, TurnStop, UserContent,
};
use keel_core::capability::ShellRunRequirement;
use keel_core::policy::Mode;
use keel_core::provider::{ProviderConfig, ProviderKind};
use keel_core::runtime::sandbox::{SandboxSettings, SandboxSpec};
use keel_core::runtime::{TerminalOutcome, TerminalRequest};
use keel_core::tool::{ProgressSink, ToolError};
use keel_testkit::acp_client::{ClientOptions, Event, TestClient, pipe};
pub use keel_testkit::measure::running_with;
use keel_testkit::mock_model::{MockModel, Turn as MockTurn};
use serde_json::Value;
use tempfile::TempDir;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What a scripted turn gets.
pub struct Turn {
    pub prompt: Vec<UserContent>,
    pub host: Arc<dyn TurnHost>,
    pub cancel: CancellationToken,
    pub spec: SessionSpec,
}

pub type Script =
    Arc<dyn Fn(Turn) -> BoxFuture<'static, Result<TurnOutcome, EngineError>> + Send + Sync>;

/// Wraps an async closure as a turn script.
pub fn script<F, Fut>(f: F) -> Script
where
    F: Fn(Turn) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<TurnOutcome, EngineError>> + Send + 'static,
{
    Arc::new(move |turn| Box::pin(f(turn)))
}

pub fn outcome(stop: TurnStop) -> TurnOutcome {
    TurnOutcome {
        stop,
        final_text: String::new(),
        denied_calls: 0,
        failed_calls: 0,
    }
}

/// Sessions whose turns run a script.
pub struct ScriptedFactory {
    pub script: Script,
    pub models: Vec<String>,
    pub specs: Mutex<Vec<SessionSpec>>,
    pub turns: Arc<AtomicUsize>,
}

impl ScriptedFactory {
    pub fn new(script: Script) -> Self {
        Self {
            script,
            models: vec!["smart".into(), "fast".into()],
            specs: Mutex::new(Vec::new()),
            turns: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub fn turns(&self) -> usize {
        self.turns.load(Ordering::SeqCst)
    }

    pub fn last_spec(&self) -> SessionSpec {
        self.specs
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("a session was created")
    }
}

struct ScriptedSession {
    spec: SessionSpec,
    script: Script,
    mode: Mutex<Mode>,
    model: Mutex<Option<String>>,
    turns: Arc<AtomicUsize>,
}

/// The factory as the server holds it (the test keeps another handle to inspect it).
struct Served(Arc<ScriptedFactory>);

impl SessionFactory for Served {
    fn models(&self) -> Vec<String> {
        self.0.models.clone()
    }

    fn create(
        &self,
        spec: SessionSpec,
    ) -> BoxFuture<'_, Result<Arc<dyn AgentSession>, EngineError>> {
        self.0.specs.lock().unwrap().push(spec.clone());
        let session = ScriptedSession {
            spec,
            script: self.0.script.clone(),
            mode: Mutex::new(Mode::Ask),
            model: Mutex::new(self.0.models.first().cloned()),
            turns: self.0.turns.clone(),
        };
        Box::pin(async move { Ok(Arc::new(session) as Arc<dyn AgentSession>) })
    }
}

impl AgentSession for ScriptedSession {
    fn run_turn(
        &self,
        prompt: Vec<UserContent>,
        host: Arc<dyn TurnHost>,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<TurnOutcome, EngineError>> {
        self.turns.fetch_add(1, Ordering::SeqCst);
        (self.script)(Turn {
            prompt,
            host,
            cancel,
            spec: self.spec.clone(),
        })
    }

    fn mode(&self) -> Mode {
        *self.mode.lock().unwrap()
    }

    fn set_mode(&self, mode: Mode) -> Result<(), EngineError> {
        *self.mode.lock().unwrap() = mode;
        Ok(())
    }

    fn model(&self) -> Option<String> {
        self.model.lock().unwrap().clone()
    }

    fn set_model(&self, model: &str) -> Result<(), EngineError> {
        *self.model.lock().unwrap() = Some(model.to_owned());
        Ok(())
    }

    fn tools(&self) -> Vec<ToolInfo> {
        vec![
            ToolInfo {
                id: "read".into(),
                origin: "bundled".into(),
                summary: "Read a file".into(),
            },
            ToolInfo {
                id: "deploy".into(),
                origin: "project".into(),
                summary: "Deploy the site".into(),
            },
        ]
    }

    fn permissions(&self) -> String {
        "manifest: allow read **\nsession: allow bash `cargo test`".into()
    }
}

/// A served scripted engine and a connected, initialized test client.
pub struct Harness {
    pub client: TestClient,
    pub factory: Arc<ScriptedFactory>,
    pub workspace: TempDir,
    _server: JoinHandle<anyhow::Result<()>>,
}

impl Harness {
    pub async fn start(options: ClientOptions, script: Script) -> Harness {
        Self::with_factory(options, Arc::new(ScriptedFactory::new(script))).await
    }

    pub async fn with_factory(options: ClientOptions, factory: Arc<ScriptedFactory>) -> Harness {
        let (agent_end, client_end) = pipe();
        let served: Arc<dyn SessionFactory> = Arc::new(Served(factory.clone()));
        let server = tokio::spawn(keel_acp::server::serve(served, agent_end));
        let client = TestClient::connect(options, client_end).await.unwrap();
        client.initialize().await.unwrap();
        Harness {
            client,
            factory,
            workspace: tempfile::tempdir().unwrap(),
            _server: server,
        }
    }

    pub fn root(&self) -> PathBuf {
        self.workspace.path().to_path_buf()
    }

    pub async fn session(&self) -> SessionId {
        self.client
            .new_session(self.workspace.path(), &[])
            .await
            .unwrap()
            .session_id
    }

    /// The event log as JSON with the session id and workspace path replaced.
    pub fn events_json(&self, session: &SessionId) -> Vec<Value> {
        let events: Vec<Value> = self.client.events().iter().map(Event::to_json).collect();
        redact(
            Value::Array(events),
            &[
                (&session.to_string(), "[session]"),
                (&self.root().display().to_string(), "[root]"),
            ],
        )
        .as_array()
        .cloned()
        .unwrap()
    }

    /// The updates of a session minus the `available_commands_update` every session opens with.
    pub fn turn_updates(&self, session: &SessionId) -> Vec<SessionUpdate> {
        self.client
            .updates(session)
            .into_iter()
            .filter(|update| !matches!(update, SessionUpdate::AvailableCommandsUpdate(_)))
            .collect()
    }
}

/// Replaces every occurrence of each `from` in every string of `value`.
pub fn redact(value: Value, replacements: &[(&str, &str)]) -> Value {
    match value {
        Value::String(mut text) => {
            for (from, to) in replacements {
                text = text.replace(from, to);
            }
            Value::String(text)
        }
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|item| redact(item, replacements))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, item)| (key, redact(item, replacements)))
                .collect(),
        ),
        other => other,
    }
}

/// Runs a terminal through the session's terminal backend, forwarding its progress to the host
/// as the loop would.
pub async fn run_in_terminal(
    turn: &Turn,
    call_id: &str,
    command: &str,
    cwd: &Path,
    timeout: std::time::Duration,
) -> Result<TerminalOutcome, ToolError> {
    let terminals = turn
        .spec
        .terminals
        .clone()
        .expect("the client serves terminals");
    let (sender, mut progress) = tokio::sync::mpsc::unbounded_channel();
    let request = TerminalRequest {
        command: command.into(),
        program: "bash".into(),
        args: vec!["-c".into(), command.into()],
        env: vec![("KEEL_TEST_MARK".into(), "terminal-env".into())],
        cwd: cwd.to_path_buf(),
        timeout,
        output_limit: 1024,
    };
    let run = terminals.run(request, ProgressSink::new(sender), turn.cancel.clone());
    tokio::pin!(run);
    loop {
        tokio::select! {
            Some(update) = progress.recv() => turn.host.event(AgentEvent::ToolProgress {
                call_id: call_id.into(),
                progress: update,
            }),
            result = &mut run => {
                while let Ok(update) = progress.try_recv() {
                    turn.host.event(AgentEvent::ToolProgress { call_id: call_id.into(), progress: update });
                }
                return result;
            }
        }
    }
}

/// The real engine against the mock model, served to a connected, initialized test client,
/// with a session open in a temporary workspace.
pub struct EngineHarness {
    pub client: TestClient,
    pub mock: MockModel,
    pub session: SessionId,
    /// The workspace, canonical.
    pub root: PathBuf,
    pub scratch: PathBuf,
    _workspace: TempDir,
    _scratch: TempDir,
    _server: JoinHandle<anyhow::Result<()>>,
}

/// An engine whose only provider is `mock` (no global rules, no user data: hermetic).
pub fn engine_config(mock: Option<&MockModel>, scratch: &Path) -> EngineConfig {
    let mut config = EngineConfig::new(Arc::new(|_: &str| None), scratch.to_path_buf());
    // Every shell command runs confined, through the real `keel` binary as the helper.
    config.sandbox = SandboxSpec::keel(
        SandboxSettings::default(),
        Some(PathBuf::from(env!("CARGO_BIN_EXE_keel"))),
        None,
    );
    // As `keel`'s configuration does: any program may run; the rules and the watchdog decide.
    config.manifest = config
        .manifest
        .with_shell(ShellRunRequirement::any_args("*"));
    if let Some(mock) = mock {
        let mut provider = ProviderConfig::new("anthropic", ProviderKind::Anthropic);
        provider.base_url = Some(mock.base_url());
        provider.api_key = Some("test-key".into());
        provider.http.retry.base_delay = Duration::from_millis(5);
        config.providers = vec![provider];
        config.model = Some("anthropic/test-model".into());
    }
    config
}

impl EngineHarness {
    /// Files (relative path, text) are written to the workspace; `turns` are queued.
    pub async fn start(
        options: ClientOptions,
        files: &[(&str, &str)],
        turns: Vec<MockTurn>,
    ) -> EngineHarness {
        let mock = MockModel::start().await;
        for turn in turns {
            mock.push_anthropic(turn);
        }
        let config = engine_config(Some(&mock), Path::new("/nonexistent"));
        Self::with_config(options, files, mock, config).await
    }

    pub async fn with_config(
        options: ClientOptions,
        files: &[(&str, &str)],
        mock: MockModel,
        mut config: EngineConfig,
    ) -> EngineHarness {
        let workspace = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(workspace.path()).unwrap();
        for (path, text) in files {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let scratch_dir = tempfile::tempdir().unwrap();
        let scratch = std::fs::canonicalize(scratch_dir.path()).unwrap();
        config.scratch_root = scratch.clone();
        let factory: Arc<dyn SessionFactory> = Arc::new(EngineSessions::new(Engine::new(config)));
        let (agent_end, client_end) = pipe();
        let server = tokio::spawn(keel_acp::server::serve(factory, agent_end));
        // Editor buffers are given relative to the workspace; the client serves absolute paths.
        let mut options = options;
        options.files = options
            .files
            .into_iter()
            .map(|(path, text)| (root.join(path), text))
            .collect();
        let client = TestClient::connect(options, client_end).await.unwrap();
        client.initialize().await.unwrap();
        let session = client.new_session(&root, &[]).await.unwrap().session_id;
        EngineHarness {
            client,
            mock,
            session,
            root,
            scratch,
            _workspace: workspace,
            _scratch: scratch_dir,
            _server: server,
        }
    }

    pub async fn prompt(&self, text: &str) -> PromptResponse {
        self.client.prompt(&self.session, text).await.unwrap()
    }

    /// The event log, normalized for snapshots: the session id, the workspace and scratch paths,
    /// message ids (numbered in order of appearance) and durations replaced.
    pub fn events_json(&self) -> Vec<Value> {
        let events: Vec<Value> = self.client.events().iter().map(Event::to_json).collect();
        let redacted = redact(
            Value::Array(events),
            &[
                (&self.session.to_string(), "[session]"),
                (&self.root.display().to_string(), "[root]"),
                (&self.scratch.display().to_string(), "[scratch]"),
            ],
        );
        let mut ids = Vec::new();
        let normalized = normalize(redacted, &mut ids);
        normalized.as_array().cloned().unwrap()
    }

    /// All agent message text of the session so far.
    pub fn said(&self) -> String {
        self.client
            .updates(&self.session)
            .iter()
            .filter_map(|update| match update {
                SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                    ContentBlock::Text(text) => Some(text.text.clone()),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }
}

fn normalize(value: Value, ids: &mut Vec<String>) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, item)| match (key.as_str(), item) {
                    ("messageId", Value::String(id)) => {
                        let index = match ids.iter().position(|known| *known == id) {
                            Some(index) => index,
                            None => {
                                ids.push(id);
                                ids.len() - 1
                            }
                        };
                        (key, Value::String(format!("[message {}]", index + 1)))
                    }
                    ("duration_ms", _) => (key, Value::from(0)),
                    (_, item) => (key, normalize(item, ids)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(|i| normalize(i, ids)).collect()),
        other => other,
    }
}

/// Waits (up to ten seconds: the kernel reaps a killed namespace asynchronously) until no
/// process has `arg` among its arguments; returns whether none has.
pub async fn gone_with(arg: &str) -> bool {
    for _ in 0..200 {
        if !running_with(arg) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Waits (up to ten seconds) until process `pid` is gone: a cancelled terminal command is killed
/// after the cancel is answered, not before.
pub async fn pid_gone(pid: u32) -> bool {
    for _ in 0..200 {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// The title and locations the engine gives a call of a bundled tool (its own `describe`),
/// for scripted turns that announce calls themselves.
pub fn view(tool_id: &str, args: &Value, root: &str) -> keel_core::tool::CallView {
    let registry = keel_core::tools::bundled(&|_| None).unwrap();
    let tool = registry.get(tool_id).unwrap();
    let roots = [PathBuf::from(root)];
    match tool.parse(args, keel_core::tool::Describe { roots: &roots }) {
        Ok(parsed) => parsed.view,
        Err(_) => keel_core::tool::CallView {
            title: tool.spec().title.clone(),
            locations: Vec::new(),
        },
    }
}

/// The model the binary tests name (`KEEL_MODEL`): the mock model's Anthropic endpoint. A test
/// leaves it out of [`KeelHome::client`]'s `extra` when the configuration must pick the model.
pub const TEST_MODEL: (&str, &str) = ("KEEL_MODEL", "anthropic/test-model");

/// A home (its `config`, `state` and `data` directories) and a workspace for real `keel acp`
/// processes, and the environment that points them at the mock model.
pub struct KeelHome {
    /// `HOME` (canonical); the XDG directories are below it.
    pub home: PathBuf,
    /// The workspace (canonical).
    pub root: PathBuf,
    _dirs: (TempDir, TempDir),
}

impl KeelHome {
    pub fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        Self {
            home: std::fs::canonicalize(home.path()).unwrap(),
            root: std::fs::canonicalize(workspace.path()).unwrap(),
            _dirs: (home, workspace),
        }
    }

    /// Writes the user's configuration file (`config/keel/config.toml`).
    pub fn user_config(&self, text: &str) {
        let dir = self.home.join("config/keel");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), text).unwrap();
    }

    /// The environment of a `keel acp` run: `HOME` and the XDG directories here, the mock model
    /// as the Anthropic endpoint with a test key, then `extra`.
    pub fn env(&self, mock: &MockModel, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        keel_testkit::acp_client::isolated_env(&self.home, &mock.base_url(), extra)
    }

    /// `keel acp` started in the workspace with [`KeelHome::env`], not yet initialized.
    pub async fn spawn(
        &self,
        mock: &MockModel,
        options: ClientOptions,
        extra: &[(&str, &str)],
    ) -> TestClient {
        let env = self.env(mock, extra);
        TestClient::spawn(
            options,
            Path::new(env!("CARGO_BIN_EXE_keel")),
            &["acp"],
            &self.root,
            &env,
        )
        .await
        .unwrap()
    }

    /// [`KeelHome::spawn`], initialized.
    pub async fn client(
        &self,
        mock: &MockModel,
        options: ClientOptions,
        extra: &[(&str, &str)],
    ) -> TestClient {
        let client = self.spawn(mock, options, extra).await;
        client.initialize().await.unwrap();
        client
    }
}

/// The text of the agent message chunks of a session whose message id marks Keel's notices.
pub fn notices(
    client: &TestClient,
    session: &agent_client_protocol::v1::schema::SessionId,
) -> Vec<String> {
    client
        .updates(session)
        .into_iter()
        .filter_map(|update| match update {
            SessionUpdate::AgentMessageChunk(chunk)
                if chunk
                    .message_id
                    .as_ref()
                    .is_some_and(|id| id.to_string().starts_with("keel-notice-")) =>
            {
                match chunk.content {
                    ContentBlock::Text(text) => Some(text.text),
                    _ => None,
                }
            }
            _ => None,
        })
        .collect()
}
