//! [`ConnectionState`]: what one client connection knows: the client's capabilities from
//! `initialize`, and its sessions by id. The handlers in `mod.rs` call into it.

use keel_core::mcp::{McpServerConfig, McpSource, McpTransport};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agent_client_protocol::Client;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, ClientCapabilities, Implementation, InitializeRequest, InitializeResponse,
    ListSessionsResponse, McpCapabilities, NewSessionRequest, NewSessionResponse,
    PromptCapabilities, SessionAdditionalDirectoriesCapabilities, SessionCapabilities,
    SessionCloseCapabilities, SessionDeleteCapabilities, SessionForkCapabilities, SessionId,
    SessionInfo, SessionListCapabilities, SessionResumeCapabilities,
};
use keel_core::runtime::{FileBackend, TerminalBackend};

use super::session_traits::{SessionFactory, SessionOrigin, SessionSpec};

/// Sessions per `session/list` page.
pub const LIST_PAGE: usize = 50;
use super::errors::ServerError;
use super::fs::ClientFiles;
use super::host::HostShared;
use super::kinds::Roots;
use super::modes;
use super::session::{ClientSession, CommandBoard};
use super::terminal::{ClientTerminals, TerminalLedger};

/// One client connection's state.
pub struct ConnectionState {
    factory: Arc<dyn SessionFactory>,
    backlog: Arc<super::transport::Backlog>,
    client: Mutex<ClientCapabilities>,
    sessions: Mutex<HashMap<SessionId, Arc<ClientSession>>>,
}

impl std::fmt::Debug for ConnectionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionState").finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the server advertises: only what is implemented.
pub fn agent_capabilities() -> AgentCapabilities {
    AgentCapabilities::new()
        .load_session(true)
        .prompt_capabilities(
            PromptCapabilities::new()
                .image(true)
                .audio(false)
                .embedded_context(true),
        )
        // Stdio needs no flag; streamable HTTP works; the legacy SSE transport does not.
        .mcp_capabilities(McpCapabilities::new().http(true).sse(false))
        .session_capabilities(
            SessionCapabilities::new()
                .additional_directories(SessionAdditionalDirectoriesCapabilities::new())
                .close(SessionCloseCapabilities::new())
                .list(SessionListCapabilities::new())
                .resume(SessionResumeCapabilities::new())
                .delete(SessionDeleteCapabilities::new())
                .fork(SessionForkCapabilities::new()),
        )
}

fn absolute(path: PathBuf, what: &str) -> Result<PathBuf, ServerError> {
    if path.is_absolute() {
        Ok(path)
    } else {
        Err(ServerError::InvalidParams(format!(
            "{what} must be an absolute path, got `{}`",
            path.display()
        )))
    }
}

impl ConnectionState {
    pub fn new(factory: Arc<dyn SessionFactory>, backlog: Arc<super::transport::Backlog>) -> Self {
        Self {
            factory,
            backlog,
            client: Mutex::new(ClientCapabilities::new()),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// `initialize`: remembers the client's capabilities and answers with ours, at protocol
    /// version `min(requested, 1)`.
    pub fn initialize(&self, request: InitializeRequest) -> InitializeResponse {
        let version = std::cmp::min(request.protocol_version, ProtocolVersion::V1);
        if let Some(info) = &request.client_info {
            tracing::info!(client = %info.name, version = %info.version, "client connected");
        }
        let auth_methods = super::auth::methods(&request.client_capabilities);
        *lock(&self.client) = request.client_capabilities;
        InitializeResponse::new(version)
            .agent_capabilities(agent_capabilities())
            .auth_methods(auth_methods)
            .agent_info(Implementation::new("keel", env!("CARGO_PKG_VERSION")).title("Keel"))
    }

    /// `authenticate` (see `server::auth`).
    pub fn authenticate(
        &self,
        request: &agent_client_protocol::v1::schema::AuthenticateRequest,
    ) -> Result<agent_client_protocol::v1::schema::AuthenticateResponse, ServerError> {
        super::auth::authenticate(self.factory.as_ref(), request)
    }

    pub fn session(&self, id: &SessionId) -> Result<Arc<ClientSession>, ServerError> {
        lock(&self.sessions)
            .get(id)
            .cloned()
            .ok_or_else(|| ServerError::SessionNotFound(id.to_string()))
    }

    /// Removes a session, cancelling its turn. Unknown ids are not an error.
    pub fn close(&self, id: &SessionId) {
        let removed = lock(&self.sessions).remove(id);
        if let Some(session) = removed {
            session.close();
        }
    }

    /// Cancels every running turn (the connection is going away).
    pub fn cancel_all(&self) {
        let sessions: Vec<Arc<ClientSession>> =
            lock(&self.sessions).drain().map(|(_, s)| s).collect();
        for session in sessions {
            session.close();
        }
    }

    /// Asks the providers for their models in the background (never delaying the session) and
    /// adds them to the session's model option when they arrive.
    pub fn discover_models(&self, session: &Arc<ClientSession>) {
        let factory = self.factory.clone();
        let session = Arc::downgrade(session);
        tokio::spawn(async move {
            let models = factory.discover_models().await;
            if let Some(session) = session.upgrade() {
                session.add_models(models);
            }
        });
    }

    /// `session/new`: the roots are `cwd` then `additionalDirectories`; the editor's files and
    /// terminals are plugged in when the client serves them.
    pub async fn new_session(
        &self,
        request: NewSessionRequest,
        connection: ConnectionTo<Client>,
    ) -> Result<(Arc<ClientSession>, NewSessionResponse), ServerError> {
        let mcp_servers = mcp_servers(request.mcp_servers);
        let session_id = new_session_id();
        let session = self
            .open(
                session_id.clone(),
                request.cwd,
                request.additional_directories,
                SessionOrigin::New,
                connection,
                mcp_servers,
            )
            .await?;
        let response = NewSessionResponse::new(session_id)
            .modes(modes::mode_state(session.mode()))
            .config_options(session.config_options());
        Ok((session, response))
    }

    /// `session/load` and `session/resume`: reopens a stored session under its own id (a
    /// session of this connection with that id is closed first: its log is released and read
    /// back). `cwd` defaults to the stored one for a prompt that reopens a session by itself.
    pub async fn reopen(
        &self,
        Reopen {
            session_id,
            cwd,
            additional_directories,
            mcp,
        }: Reopen,
        connection: ConnectionTo<Client>,
    ) -> Result<Arc<ClientSession>, ServerError> {
        self.close(&session_id);
        let (cwd, additional_directories) = match cwd {
            Some(cwd) => (cwd, additional_directories),
            None => {
                let stored = self
                    .factory
                    .stored(&session_id.0)
                    .ok_or_else(|| ServerError::SessionNotFound(session_id.to_string()))?;
                (stored.cwd, stored.additional_directories)
            }
        };
        self.open(
            session_id,
            cwd,
            additional_directories,
            SessionOrigin::Stored,
            connection,
            mcp_servers(mcp),
        )
        .await
    }

    /// `session/fork`: a new session starting as a copy of the stored session `from`.
    pub async fn fork(
        &self,
        from: &SessionId,
        cwd: PathBuf,
        additional_directories: Vec<PathBuf>,
        connection: ConnectionTo<Client>,
        mcp: Vec<agent_client_protocol::v1::schema::McpServer>,
    ) -> Result<Arc<ClientSession>, ServerError> {
        self.open(
            new_session_id(),
            cwd,
            additional_directories,
            SessionOrigin::Fork {
                from: from.to_string(),
            },
            connection,
            mcp_servers(mcp),
        )
        .await
    }

    /// `session/list`: one page of the stored sessions, most recently updated first. The
    /// cursor is the offset of the page's first entry.
    pub fn list(
        &self,
        cwd: Option<PathBuf>,
        cursor: Option<String>,
    ) -> Result<ListSessionsResponse, ServerError> {
        let offset = match cursor {
            None => 0,
            Some(cursor) => cursor
                .strip_prefix("offset:")
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| ServerError::InvalidParams(format!("invalid cursor `{cursor}`")))?,
        };
        let sessions = self.factory.list(cwd.as_deref())?;
        let total = sessions.len();
        let page: Vec<SessionInfo> = sessions
            .into_iter()
            .skip(offset)
            .take(LIST_PAGE)
            .map(|session| {
                SessionInfo::new(session.id, session.cwd)
                    .additional_directories(session.additional_directories)
                    .title(session.title)
                    .updated_at(session.updated_at)
            })
            .collect();
        let end = offset.saturating_add(page.len());
        let next = (end < total).then(|| format!("offset:{end}"));
        Ok(ListSessionsResponse::new(page).next_cursor(next))
    }

    /// `session/delete`: closes the session here if it is open, then removes it from the store.
    pub fn delete(&self, id: &SessionId) -> Result<(), ServerError> {
        self.close(id);
        self.factory.delete(&id.0).map_err(ServerError::from)
    }

    /// Builds a session of this connection: the roots are `cwd` then `additional`; the
    /// editor's files and terminals are plugged in when the client serves them; its MCP servers
    /// start with the engine session.
    async fn open(
        &self,
        session_id: SessionId,
        cwd: PathBuf,
        additional: Vec<PathBuf>,
        origin: SessionOrigin,
        connection: ConnectionTo<Client>,
        mcp_servers: Vec<keel_core::mcp::McpServerConfig>,
    ) -> Result<Arc<ClientSession>, ServerError> {
        let mut roots = vec![absolute(cwd, "cwd")?];
        for directory in additional {
            let directory = absolute(directory, "additionalDirectories entry")?;
            if !roots.contains(&directory) {
                roots.push(directory);
            }
        }
        let client = lock(&self.client).clone();
        let notices = client
            .session
            .as_ref()
            .is_some_and(|session| session.notices.is_some());
        let files = ClientFiles::for_client(&client.fs, connection.clone(), session_id.clone())
            .map(|files| Arc::new(files) as Arc<dyn FileBackend>);
        let ledger = TerminalLedger::default();
        let board = Arc::new(CommandBoard::default());
        let terminals = client.terminal.then(|| {
            Arc::new(ClientTerminals::new(
                connection.clone(),
                session_id.clone(),
                ledger.clone(),
            )) as Arc<dyn TerminalBackend>
        });
        let spec = SessionSpec {
            id: session_id.to_string(),
            roots: roots.clone(),
            files,
            terminals,
            origin,
            mcp_servers,
            notify: Some(notifier(connection.clone(), session_id.clone(), notices)),
            prompts_changed: Some({
                let board = board.clone();
                Arc::new(move |prompts| board.set_prompts(prompts))
            }),
        };
        let agent = self.factory.create(spec).await?;
        // Paths the engine reports are canonical; titles strip either spelling of a root.
        let mut shown_roots = roots.clone();
        for root in &roots {
            if let Ok(canonical) = keel_core::runtime::probe::canonicalize(root)
                && !shown_roots.contains(&canonical)
            {
                shown_roots.push(canonical);
            }
        }
        let shared = HostShared {
            connection,
            session_id: session_id.clone(),
            roots: Roots(shown_roots),
            prompts: Arc::new(tokio::sync::Mutex::new(())),
            terminals: ledger,
            backlog: self.backlog.clone(),
            elicitation: client
                .elicitation
                .as_ref()
                .is_some_and(|elicitation| elicitation.form.is_some()),
            notices,
            compaction: client
                .session
                .as_ref()
                .is_some_and(|session| session.compaction.is_some()),
        };
        let mut models = self.factory.models();
        for known in self.factory.known_models() {
            if !models.contains(&known) {
                models.push(known);
            }
        }
        let session =
            ClientSession::new(agent, shared, models, self.factory.default_model(), board);
        let replaced = lock(&self.sessions).insert(session_id, session.clone());
        if let Some(replaced) = replaced {
            replaced.close();
        }
        Ok(session)
    }
}

/// The editor's MCP servers as the engine reads them. A legacy SSE server is left out (Keel
/// advertises `sse: false`), with a log line.
fn mcp_servers(servers: Vec<agent_client_protocol::v1::schema::McpServer>) -> Vec<McpServerConfig> {
    use agent_client_protocol::v1::schema::McpServer;
    let mut out = Vec::new();
    for server in servers {
        let (name, transport) = match server {
            McpServer::Stdio(stdio) => (
                stdio.name,
                McpTransport::Stdio {
                    command: stdio.command.to_string_lossy().into_owned(),
                    args: stdio.args,
                    env: stdio.env.into_iter().map(|v| (v.name, v.value)).collect(),
                },
            ),
            McpServer::Http(http) => (
                http.name,
                McpTransport::Http {
                    url: http.url,
                    headers: http
                        .headers
                        .into_iter()
                        .map(|h| (h.name, h.value))
                        .collect(),
                },
            ),
            other => {
                tracing::warn!(server = ?other, "MCP server transport not supported (only stdio and http); left out");
                continue;
            }
        };
        out.push(McpServerConfig {
            name,
            transport,
            source: McpSource::Client,
            timeout: keel_core::mcp::CALL_TIMEOUT,
            // The configuration's `[mcp_servers.NAME]` of the same name may widen it.
            access: Default::default(),
        });
    }
    out
}

/// Tells the user of a session something outside a turn (an MCP server failed): a `notice`,
/// or a message marked as Keel's (see [`super::host::notice_update`]).
fn notifier(
    connection: ConnectionTo<Client>,
    session_id: SessionId,
    notices: bool,
) -> keel_core::mcp::Notify {
    use agent_client_protocol::v1::schema::SessionNotification;
    Arc::new(move |text: String| {
        let update = super::host::notice_update(notices, super::host::Severity::Warning, &text);
        if let Err(error) =
            connection.send_notification(SessionNotification::new(session_id.clone(), update))
        {
            tracing::debug!(error = %error.message, "notice not sent (connection closed)");
        }
    })
}

/// A fresh session id.
fn new_session_id() -> SessionId {
    SessionId::new(format!("keel-{}", uuid::Uuid::new_v4().simple()))
}

/// What reopening a stored session takes: from `session/load` and `session/resume` alike, or
/// only the id when a prompt reopens a session by itself.
pub struct Reopen {
    pub session_id: SessionId,
    pub cwd: Option<PathBuf>,
    pub additional_directories: Vec<PathBuf>,
    pub mcp: Vec<agent_client_protocol::v1::schema::McpServer>,
}

impl Reopen {
    /// The stored session `session_id` in its stored directories, without MCP servers.
    pub fn stored(session_id: SessionId) -> Self {
        Reopen {
            session_id,
            cwd: None,
            additional_directories: Vec::new(),
            mcp: Vec::new(),
        }
    }
}

impl From<agent_client_protocol::v1::schema::LoadSessionRequest> for Reopen {
    fn from(request: agent_client_protocol::v1::schema::LoadSessionRequest) -> Self {
        Reopen {
            session_id: request.session_id,
            cwd: Some(request.cwd),
            additional_directories: request.additional_directories,
            mcp: request.mcp_servers,
        }
    }
}

impl From<agent_client_protocol::v1::schema::ResumeSessionRequest> for Reopen {
    fn from(request: agent_client_protocol::v1::schema::ResumeSessionRequest) -> Self {
        Reopen {
            session_id: request.session_id,
            cwd: Some(request.cwd),
            additional_directories: request.additional_directories,
            mcp: request.mcp_servers,
        }
    }
}
