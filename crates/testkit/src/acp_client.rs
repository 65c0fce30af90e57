//! An ACP test client: plays the editor against an agent, over in-memory pipes or a spawned
//! binary's stdio.
//!
//! - [`TestClient`]: connects (built on the SDK's `Client.v1()`), sends requests, records every
//!   message the agent sends in one ordered [`Event`] log, and answers the agent's requests:
//!   permission prompts from a script of [`PermissionReply`]s (by option kind, in order; an empty
//!   script rejects), `fs/*` from an in-memory file map (writes are recorded and applied), and
//!   `terminal/*` by running the command as a real process.
//! - [`ClientOptions`]: the capabilities to advertise, the files to serve, the permission script.
//! - [`pipe`]: an in-memory transport pair (agent end, client end); [`RawClient`] writes raw
//!   lines to an agent (for malformed-input tests).
//!
//! It depends on the protocol crate only, never on Keel's engine.

mod handlers;
mod terminals;

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AuthCapabilities, BooleanConfigOptionCapabilities, CancelNotification, ClientCapabilities,
    ClientSessionCapabilities, CompactionCapabilities, ContentBlock, CreateElicitationResponse,
    ElicitationCapabilities, ElicitationFormCapabilities, ElicitationUrlCapabilities,
    FileSystemCapabilities, InitializeRequest, InitializeResponse, NewSessionRequest,
    NewSessionResponse, NoticeCapabilities, PermissionOptionKind, PromptRequest, PromptResponse,
    RequestPermissionRequest, RequestPermissionResponse, SessionConfigOptionsCapabilities,
    SessionId, SessionNotification, SessionUpdate, TextContent,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{
    Agent, ByteStreams, Client, ConnectTo, Error, JsonRpcNotification, JsonRpcRequest,
};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;
use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};

use self::handlers::{choose, outcome};
pub use terminals::TerminalRecord;

#[expect(
    clippy::disallowed_methods,
    reason = "the test client plays the editor, which starts the agent"
)]
fn spawn_agent(
    program: &Path,
    args: &[&str],
    cwd: &Path,
    env: &[(impl AsRef<std::ffi::OsStr>, impl AsRef<std::ffi::OsStr>)],
) -> std::io::Result<tokio::process::Child> {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    for (name, value) in env {
        command.env(name, value);
    }
    command.spawn()
}

/// How long [`TestClient::wait_for`] waits before it gives up (a hang guard, not a timing
/// assertion).
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// How the client answers one permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionReply {
    /// Select the first option of this kind; when none is offered, reject (once, else always,
    /// else answer `cancelled`).
    Choose(PermissionOptionKind),
    /// Select this option id, offered or not.
    Select(String),
    /// Answer `cancelled`.
    Cancel,
    /// Answer with a JSON-RPC error.
    Fail,
    /// Do not answer until the test cancels the session (then answer `cancelled`, as the
    /// protocol requires of a client).
    Hold,
}

/// What the client advertises and serves.
#[derive(Debug, Clone, Default)]
pub struct ClientOptions {
    pub read_files: bool,
    pub write_files: bool,
    pub terminals: bool,
    /// The editor's buffers, by absolute path.
    pub files: BTreeMap<PathBuf, String>,
    /// Answers to permission requests, in order.
    pub permissions: Vec<PermissionReply>,
    /// Whether the client advertises elicitation forms.
    pub elicitation: bool,
    /// Answers to `elicitation/create`, in order, as the response's JSON
    /// (`{"action": "accept", "content": {...}}`); `null` holds the request unanswered. Past
    /// the script the client answers `cancel`.
    pub elicitations: Vec<serde_json::Value>,
    /// Advertise what Zed advertises beyond fs and terminals (see [`ClientOptions::zed`]).
    pub zed: bool,
    /// Advertise `session.compaction` and `session.notices` (Zed's ACP beta flag).
    pub beta: bool,
    /// Refuse every `terminal/create` with this JSON-RPC error message (an editor whose user
    /// said no, or whose sandbox refused).
    pub refuse_terminals: Option<String>,
    /// Serve a read of a file it holds no buffer of from the disk, following symlinks, as an
    /// editor does for a file it has not opened.
    pub disk_reads: bool,
    /// A process racing the editor: before serving the first disk read, replace the file
    /// asked for with a symlink to this path (then read through it).
    pub swap_on_read: Option<PathBuf>,
}

impl ClientOptions {
    /// A client that serves files and terminals.
    pub fn editor() -> Self {
        Self {
            read_files: true,
            write_files: true,
            terminals: true,
            ..Self::default()
        }
    }

    /// The client capabilities Zed sends (`client_capabilities_for_agent`, November 2026): fs
    /// read and write, `terminal`, `auth.terminal`, `session.configOptions.boolean`, elicitation
    /// `form` and `url`, and `_meta` `terminal_output` and `terminal-auth`. Elicitations are
    /// answered `cancel` unless scripted.
    pub fn zed() -> Self {
        Self {
            elicitation: true,
            zed: true,
            ..Self::editor()
        }
    }

    /// [`ClientOptions::zed`] with Zed's ACP beta flag on: `session.compaction` and
    /// `session.notices` too.
    pub fn zed_beta() -> Self {
        Self {
            beta: true,
            ..Self::zed()
        }
    }

    /// Refuses every `terminal/create` with `message`.
    pub fn refuse_terminals(mut self, message: impl Into<String>) -> Self {
        self.refuse_terminals = Some(message.into());
        self
    }

    pub fn permissions(mut self, replies: impl IntoIterator<Item = PermissionReply>) -> Self {
        self.permissions = replies.into_iter().collect();
        self
    }

    /// A client that renders elicitation forms and answers them with `answers` in order.
    pub fn elicitations(mut self, answers: impl IntoIterator<Item = serde_json::Value>) -> Self {
        self.elicitation = true;
        self.elicitations = answers.into_iter().collect();
        self
    }

    pub fn file(mut self, path: impl Into<PathBuf>, text: impl Into<String>) -> Self {
        self.files.insert(path.into(), text.into());
        self
    }
}

/// One message from the agent (or the client's reaction to it), in arrival order.
#[derive(Debug, Clone)]
pub enum Event {
    Update(SessionNotification),
    /// A permission request and the option id answered (`None`: answered `cancelled`).
    Permission {
        request: RequestPermissionRequest,
        answer: Option<String>,
        /// How many earlier requests were still held unanswered when this one arrived.
        held: usize,
    },
    /// An `elicitation/create` request (as JSON) and the scripted answer (`null`: held).
    Elicitation {
        request: serde_json::Value,
        answer: serde_json::Value,
    },
    ReadFile {
        path: PathBuf,
    },
    WriteFile {
        path: PathBuf,
        content: String,
    },
    Terminal(TerminalRecord),
}

impl Event {
    /// The event as JSON, for snapshots: `{"update": ...}`, `{"permission": {...}}`,
    /// `{"read": path}`, `{"write": {...}}`, `{"terminal": {...}}`.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        match self {
            Event::Update(notification) => json!({ "update": notification.update }),
            Event::Permission {
                request, answer, ..
            } => json!({
                "permission": {
                    "toolCall": request.tool_call,
                    "options": request.options,
                    "answer": answer,
                }
            }),
            Event::Elicitation { request, answer } => {
                json!({ "elicitation": { "request": request, "answer": answer } })
            }
            Event::ReadFile { path } => json!({ "read": path }),
            Event::WriteFile { path, content } => {
                json!({ "write": { "path": path, "content": content } })
            }
            Event::Terminal(record) => json!({ "terminal": record }),
        }
    }
}

#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<Event>>,
    /// When each event arrived, in the same order (benchmarks time updates by them).
    arrived: Mutex<Vec<Instant>>,
    changed: Notify,
}

impl Recorder {
    fn push(&self, event: Event) {
        let mut events = lock(&self.events);
        lock(&self.arrived).push(Instant::now());
        events.push(event);
        drop(events);
        self.changed.notify_waiters();
    }
}

struct Shared {
    recorder: Recorder,
    files: Mutex<BTreeMap<PathBuf, String>>,
    script: Mutex<VecDeque<PermissionReply>>,
    held: Mutex<
        Vec<(
            RequestPermissionRequest,
            Responder<RequestPermissionResponse>,
        )>,
    >,
    terminals: terminals::Terminals,
    elicitations: Mutex<VecDeque<serde_json::Value>>,
    refuse_terminals: Option<String>,
    disk_reads: bool,
    swap_on_read: Mutex<Option<PathBuf>>,
    held_elicitations: Mutex<Vec<Responder<CreateElicitationResponse>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An in-memory transport pair: `(agent end, client end)`.
pub fn pipe() -> (
    impl ConnectTo<Agent> + 'static,
    impl ConnectTo<Client> + 'static,
) {
    let (agent, client) = tokio::io::duplex(1 << 20);
    let (agent_read, agent_write) = tokio::io::split(agent);
    let (client_read, client_write) = tokio::io::split(client);
    (
        ByteStreams::new(agent_write.compat_write(), agent_read.compat()),
        ByteStreams::new(client_write.compat_write(), client_read.compat()),
    )
}

/// A client that writes raw lines to an agent and reads raw JSON back.
pub struct RawClient {
    writer: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    reader: tokio::io::Lines<tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
}

impl RawClient {
    /// A raw client and the agent end to serve.
    pub fn pipe() -> (impl ConnectTo<Agent> + 'static, RawClient) {
        let (agent, client) = tokio::io::duplex(1 << 20);
        let (agent_read, agent_write) = tokio::io::split(agent);
        let (client_read, client_write) = tokio::io::split(client);
        (
            ByteStreams::new(agent_write.compat_write(), agent_read.compat()),
            RawClient {
                writer: client_write,
                reader: tokio::io::BufReader::new(client_read).lines(),
            },
        )
    }

    /// Writes one line (a newline is appended).
    pub async fn send_line(&mut self, line: &str) -> anyhow::Result<()> {
        self.writer.write_all(line.as_bytes()).await?;
        self.writer.write_all(b"\n").await?;
        self.writer.flush().await?;
        Ok(())
    }

    /// The next message the agent writes.
    pub async fn next(&mut self) -> anyhow::Result<serde_json::Value> {
        let line = tokio::time::timeout(HANG_GUARD, self.reader.next_line())
            .await
            .map_err(|_| anyhow::anyhow!("the agent wrote nothing"))??
            .ok_or_else(|| anyhow::anyhow!("the agent closed its output"))?;
        Ok(serde_json::from_str(&line)?)
    }

    /// Closes the agent's input.
    pub async fn close(mut self) -> anyhow::Result<()> {
        self.writer.shutdown().await?;
        Ok(())
    }
}

/// The test client. Dropping it closes the connection.
pub struct TestClient {
    connection: ConnectionTo<Agent>,
    shared: Arc<Shared>,
    capabilities: ClientCapabilities,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), Error>>>,
    child: Option<tokio::process::Child>,
}

impl std::fmt::Debug for TestClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestClient").finish_non_exhaustive()
    }
}

impl TestClient {
    /// Connects over `transport` (see [`pipe`]).
    pub async fn connect(
        options: ClientOptions,
        transport: impl ConnectTo<Client> + 'static,
    ) -> anyhow::Result<Self> {
        let capabilities = ClientCapabilities::new()
            .fs(FileSystemCapabilities::new()
                .read_text_file(options.read_files)
                .write_text_file(options.write_files))
            .terminal(options.terminals);
        let capabilities = match (options.elicitation, options.zed) {
            (true, true) => capabilities.elicitation(
                ElicitationCapabilities::new()
                    .form(ElicitationFormCapabilities::new())
                    .url(ElicitationUrlCapabilities::new()),
            ),
            (true, false) => capabilities.elicitation(
                ElicitationCapabilities::new().form(ElicitationFormCapabilities::new()),
            ),
            (false, _) => capabilities,
        };
        let capabilities = if options.zed {
            let mut session = ClientSessionCapabilities::new().config_options(
                SessionConfigOptionsCapabilities::new()
                    .boolean(BooleanConfigOptionCapabilities::new()),
            );
            if options.beta {
                session = session
                    .compaction(CompactionCapabilities::new())
                    .notices(NoticeCapabilities::new());
            }
            let mut meta = serde_json::Map::new();
            meta.insert("terminal_output".into(), serde_json::Value::Bool(true));
            meta.insert("terminal-auth".into(), serde_json::Value::Bool(true));
            capabilities
                .auth(AuthCapabilities::new().terminal(true))
                .session(session)
                .meta(meta)
        } else {
            capabilities
        };
        let shared = Arc::new(Shared {
            elicitations: Mutex::new(options.elicitations.into()),
            held_elicitations: Mutex::new(Vec::new()),
            recorder: Recorder::default(),
            files: Mutex::new(options.files),
            script: Mutex::new(options.permissions.into()),
            held: Mutex::new(Vec::new()),
            terminals: terminals::Terminals::default(),
            refuse_terminals: options.refuse_terminals,
            disk_reads: options.disk_reads,
            swap_on_read: Mutex::new(options.swap_on_read),
        });
        let (connected, connection) = oneshot::channel();
        let (shutdown, closed) = oneshot::channel::<()>();
        let task = tokio::spawn(handlers::run(shared.clone(), transport, connected, closed));
        let connection = connection
            .await
            .map_err(|_| anyhow::anyhow!("the client connection ended before it started"))?;
        Ok(Self {
            connection,
            shared,
            capabilities,
            shutdown: Some(shutdown),
            task: Some(task),
            child: None,
        })
    }

    /// Spawns `program` (in `cwd`, with `env` added to the inherited environment) and connects
    /// to its stdin/stdout; its stderr is inherited. The process is killed when the client is
    /// dropped; [`TestClient::close`] closes its stdin and waits for it to exit.
    pub async fn spawn(
        options: ClientOptions,
        program: &Path,
        args: &[&str],
        cwd: &Path,
        env: &[(impl AsRef<std::ffi::OsStr>, impl AsRef<std::ffi::OsStr>)],
    ) -> anyhow::Result<Self> {
        let mut child = spawn_agent(program, args, cwd, env)?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| anyhow::anyhow!("the agent's stdin is not piped"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("the agent's stdout is not piped"))?;
        let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
        let mut client = Self::connect(options, transport).await?;
        client.child = Some(child);
        Ok(client)
    }

    /// The spawned agent's process id ([`TestClient::spawn`] only).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(tokio::process::Child::id)
    }

    /// Sends a request and waits for its answer.
    pub async fn request<R: JsonRpcRequest>(&self, request: R) -> Result<R::Response, Error> {
        self.connection.send_request(request).block_task().await
    }

    pub fn notify<N: JsonRpcNotification>(&self, notification: N) -> Result<(), Error> {
        self.connection.send_notification(notification)
    }

    /// `initialize` at protocol version 1 with the options' capabilities.
    pub async fn initialize(&self) -> Result<InitializeResponse, Error> {
        self.request(
            InitializeRequest::new(ProtocolVersion::V1)
                .client_capabilities(self.capabilities.clone()),
        )
        .await
    }

    /// `session/new` in `cwd` with extra roots.
    pub async fn new_session(
        &self,
        cwd: &Path,
        additional: &[PathBuf],
    ) -> Result<NewSessionResponse, Error> {
        self.request(NewSessionRequest::new(cwd).additional_directories(additional.to_vec()))
            .await
    }

    /// `session/prompt` with one text block, waiting for the answer.
    pub async fn prompt(&self, session: &SessionId, text: &str) -> Result<PromptResponse, Error> {
        self.request(PromptRequest::new(
            session.clone(),
            vec![ContentBlock::Text(TextContent::new(text))],
        ))
        .await
    }

    /// Starts a prompt without waiting (to cancel it while it runs).
    pub fn start_prompt(
        &self,
        session: &SessionId,
        text: &str,
    ) -> JoinHandle<Result<PromptResponse, Error>> {
        let sent = self
            .connection
            .send_request(PromptRequest::new(
                session.clone(),
                vec![ContentBlock::Text(TextContent::new(text))],
            ))
            .block_task();
        tokio::spawn(sent)
    }

    /// `session/cancel`, then answers the session's held permission requests with `cancelled`.
    pub fn cancel(&self, session: &SessionId) -> Result<(), Error> {
        self.notify(CancelNotification::new(session.clone()))?;
        for (_, responder) in self.take_held(session) {
            responder.respond(outcome(None))?;
        }
        Ok(())
    }

    fn take_held(
        &self,
        session: &SessionId,
    ) -> Vec<(
        RequestPermissionRequest,
        Responder<RequestPermissionResponse>,
    )> {
        let mut held = lock(&self.shared.held);
        let (mine, others) = held
            .drain(..)
            .partition(|(request, _)| &request.session_id == session);
        *held = others;
        mine
    }

    /// Answers the session's held permission requests with the first option of `kind`.
    pub fn answer_held(
        &self,
        session: &SessionId,
        kind: PermissionOptionKind,
    ) -> Result<usize, Error> {
        let held = self.take_held(session);
        let count = held.len();
        for (request, responder) in held {
            let answer = choose(&request, PermissionReply::Choose(kind));
            responder.respond(outcome(answer.as_ref()))?;
        }
        Ok(count)
    }

    /// Adds answers to the permission script.
    pub fn push_permissions(&self, replies: impl IntoIterator<Item = PermissionReply>) {
        lock(&self.shared.script).extend(replies);
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<Event> {
        lock(&self.shared.recorder.events).clone()
    }

    /// Every event so far, with the instant it reached the client.
    pub fn timed_events(&self) -> Vec<(Instant, Event)> {
        let events = lock(&self.shared.recorder.events);
        let arrived = lock(&self.shared.recorder.arrived);
        arrived
            .iter()
            .copied()
            .zip(events.iter().cloned())
            .collect()
    }

    /// The session updates so far, for one session.
    pub fn updates(&self, session: &SessionId) -> Vec<SessionUpdate> {
        self.events()
            .into_iter()
            .filter_map(|event| match event {
                Event::Update(notification) if &notification.session_id == session => {
                    Some(notification.update)
                }
                _ => None,
            })
            .collect()
    }

    /// The permission requests so far.
    pub fn permission_requests(&self) -> Vec<RequestPermissionRequest> {
        self.events()
            .into_iter()
            .filter_map(|event| match event {
                Event::Permission { request, .. } => Some(request),
                _ => None,
            })
            .collect()
    }

    /// The editor's text of a file now.
    pub fn file(&self, path: &Path) -> Option<String> {
        lock(&self.shared.files).get(path).cloned()
    }

    /// The agent's `terminal/*` calls so far.
    pub fn terminal_records(&self) -> Vec<TerminalRecord> {
        self.events()
            .into_iter()
            .filter_map(|event| match event {
                Event::Terminal(record) => Some(record),
                _ => None,
            })
            .collect()
    }

    /// Waits until `ready` holds for the event log. Panics after [`HANG_GUARD`].
    pub async fn wait_for(&self, what: &str, ready: impl Fn(&[Event]) -> bool) {
        let waited = tokio::time::timeout(HANG_GUARD, async {
            loop {
                let changed = self.shared.recorder.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                if ready(&lock(&self.shared.recorder.events)) {
                    return;
                }
                changed.await;
            }
        })
        .await;
        if waited.is_err() {
            panic!("waited too long for {what}; events: {:#?}", self.events());
        }
    }

    /// Closes the connection and waits for the client task to end.
    pub async fn close(mut self) -> anyhow::Result<()> {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(task) = self.task.take() {
            task.await?
                .map_err(|error| anyhow::anyhow!("client connection failed: {error}"))?;
        }
        if let Some(mut child) = self.child.take() {
            let status = tokio::time::timeout(HANG_GUARD, child.wait())
                .await
                .map_err(|_| anyhow::anyhow!("the agent did not exit after its stdin closed"))??;
            if !status.success() {
                anyhow::bail!("the agent exited with {status}");
            }
        }
        Ok(())
    }
}

impl Drop for TestClient {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// The environment of a `keel acp` that keeps to `home` (`HOME`, and the XDG configuration,
/// state and data directories below it) and talks to the model at `base_url` (a mock model's
/// Anthropic endpoint) with a test key; then `extra` (`KEEL_MODEL`, say).
pub fn isolated_env(home: &Path, base_url: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let at = |dir: &str| home.join(dir).display().to_string();
    [
        ("HOME", home.display().to_string()),
        ("XDG_CONFIG_HOME", at("config")),
        ("XDG_STATE_HOME", at("state")),
        ("XDG_DATA_HOME", at("data")),
        ("ANTHROPIC_API_KEY", "test-key".to_owned()),
        ("ANTHROPIC_BASE_URL", base_url.to_owned()),
    ]
    .into_iter()
    .chain(extra.iter().map(|(key, value)| (*key, (*value).to_owned())))
    .map(|(key, value)| (key.to_owned(), value))
    .collect()
}
