//! The seam between the ACP server and the engine that runs turns.
//!
//! - [`SessionFactory`]: builds a session for `session/new` from a [`SessionSpec`] and lists the
//!   configured models.
//! - [`AgentSession`]: one conversation: runs a turn against a [`TurnHost`], reports and changes
//!   its security mode and model, lists its tools and renders its permission rules.
//!
//! - `EngineSessions` (in `engine_sessions.rs`): the two traits over keel-core's engine.
//!
//! The server knows nothing else of how sessions are built, so tests can drive it with scripted
//! sessions over temporary workspaces, and the real engine plugs in through the same two traits.

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use keel_core::agent::{TurnHost, TurnOutcome, UserContent};
use keel_core::policy::Mode;
use keel_core::runtime::{FileBackend, TerminalBackend};
use tokio_util::sync::CancellationToken;

/// What `session/new` asks the engine for.
#[derive(Clone)]
pub struct SessionSpec {
    /// The session id the server picked (also the name of the session's scratch directory).
    pub id: String,
    /// Workspace roots: the client's `cwd` first, then its `additionalDirectories`.
    pub roots: Vec<PathBuf>,
    /// The editor's buffers, when the client serves `fs/*` (otherwise the disk).
    pub files: Option<Arc<dyn FileBackend>>,
    /// The editor's terminal pane, when the client serves `terminal/*` (otherwise local runs).
    pub terminals: Option<Arc<dyn TerminalBackend>>,
    /// A new session, or one from the store.
    pub origin: SessionOrigin,
    /// The editor's MCP servers (`mcpServers` of `session/new`).
    pub mcp_servers: Vec<keel_core::mcp::McpServerConfig>,
    /// Tells the user something outside a turn (an MCP server failed).
    pub notify: Option<keel_core::mcp::Notify>,
    /// Re-advertises the slash commands when the MCP servers' prompts change.
    pub prompts_changed: Option<keel_core::mcp::PromptsChanged>,
}

impl std::fmt::Debug for SessionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionSpec")
            .field("id", &self.id)
            .field("roots", &self.roots)
            .field("origin", &self.origin)
            .field("mcp_servers", &self.mcp_servers)
            .finish_non_exhaustive()
    }
}

/// Where a session comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SessionOrigin {
    /// `session/new`.
    #[default]
    New,
    /// `session/load` or `session/resume` (or a prompt naming a stored session): the stored
    /// session `SessionSpec::id` reopens and its conversation continues.
    Stored,
    /// `session/fork`: a new session starting as a copy of the stored session `from`.
    Fork { from: String },
}

/// A stored session, as `session/list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSessionInfo {
    pub id: String,
    pub cwd: PathBuf,
    pub additional_directories: Vec<PathBuf>,
    pub title: Option<String>,
    /// RFC 3339.
    pub updated_at: String,
}

/// A loaded tool, as `/tools` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolInfo {
    pub id: String,
    /// Where the tool comes from: `bundled`, `global`, `project` or `mcp:<server>`.
    pub origin: String,
    /// The first line of the tool's description.
    pub summary: String,
}

/// What an [`EngineError`] keeps of its cause: the engine's own error, its source chain intact.
pub type EngineSource = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Why the engine could not do what was asked. The failures keep the engine's error (and its
/// sources) until the server turns them into a JSON-RPC error or a message for the user.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineError {
    /// No credentials for the selected provider; the message names what to set.
    #[error("{message}")]
    NoCredentials {
        message: String,
        #[source]
        source: Option<EngineSource>,
    },
    /// The request itself is unusable (unknown model, unreadable root, locked session, ...).
    #[error(transparent)]
    InvalidInput(EngineSource),
    /// The engine failed.
    #[error(transparent)]
    Failed(EngineSource),
    /// Keel's configuration does not load; `data` says where (`details`, `key`, `file`,
    /// `line`, `column`).
    #[error("{message}")]
    Config {
        message: String,
        data: serde_json::Value,
    },
    /// No such stored session (its id).
    #[error("no session `{0}` in the session store")]
    NotFound(String),
}

/// A message that is its own cause (a request Keel refuses by its own rules).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Said(String);

impl EngineError {
    /// The request is unusable, for the reason `message` gives.
    pub fn invalid(message: impl Into<String>) -> Self {
        EngineError::InvalidInput(Arc::new(Said(message.into())))
    }

    /// The engine failed, as `message` says (no error of its own to keep).
    pub fn failed(message: impl Into<String>) -> Self {
        EngineError::Failed(Arc::new(Said(message.into())))
    }

    /// No credentials, as `message` says.
    pub fn no_credentials(message: impl Into<String>) -> Self {
        EngineError::NoCredentials {
            message: message.into(),
            source: None,
        }
    }
}

/// Builds sessions. One per server; shared by every connection's handlers.
pub trait SessionFactory: Send + Sync + 'static {
    /// The configured model ids, in display order (empty: the model option is not offered).
    fn models(&self) -> Vec<String>;

    /// The model a session answers with when none was chosen (marked as the default in the
    /// model option); `None` when the factory cannot say.
    fn default_model(&self) -> Option<String> {
        self.models().into_iter().next()
    }

    /// The providers' models known without asking them (kept from an earlier answer): offered
    /// in the `session/new`, `load` and `resume` responses, where an editor applies its
    /// default settings.
    fn known_models(&self) -> Vec<String> {
        Vec::new()
    }

    /// The models the providers list themselves (their models endpoints), asked for in the
    /// background after `session/new` was answered; added to the model option when they arrive.
    fn discover_models(&self) -> BoxFuture<'_, Vec<String>> {
        Box::pin(async { Vec::new() })
    }

    /// Builds a session. Must not fail for missing credentials: those fail the first prompt.
    /// A session from the store ([`SessionOrigin::Stored`], [`SessionOrigin::Fork`]) is open
    /// when this resolves, its history ready in [`AgentSession::take_history`].
    fn create(
        &self,
        spec: SessionSpec,
    ) -> BoxFuture<'_, Result<Arc<dyn AgentSession>, EngineError>>;

    /// The stored sessions, most recently updated first; those of `cwd` only when given.
    fn list(&self, _cwd: Option<&std::path::Path>) -> Result<Vec<StoredSessionInfo>, EngineError> {
        Ok(Vec::new())
    }

    /// A stored session's information, if it is stored.
    fn stored(&self, id: &str) -> Option<StoredSessionInfo> {
        self.list(None)
            .ok()?
            .into_iter()
            .find(|session| session.id == id)
    }

    /// Deletes a stored session.
    fn delete(&self, id: &str) -> Result<(), EngineError> {
        Err(EngineError::NotFound(id.to_owned()))
    }

    /// What to set when the model that would answer a new session has no credential (`None`:
    /// it has one, or needs none). `authenticate` answers with it.
    fn missing_credentials(&self) -> Option<String> {
        None
    }
}

/// One conversation.
pub trait AgentSession: Send + Sync + 'static {
    /// Runs one prompt turn. Every event goes to `host`; `cancel` fires on `session/cancel`.
    fn run_turn(
        &self,
        prompt: Vec<UserContent>,
        host: Arc<dyn TurnHost>,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<TurnOutcome, EngineError>>;

    /// The security mode.
    fn mode(&self) -> Mode;

    /// Switches the security mode; takes effect for the next gated call.
    fn set_mode(&self, mode: Mode) -> Result<(), EngineError>;

    /// The selected model id, if any.
    fn model(&self) -> Option<String>;

    /// Switches the model for the next request.
    fn set_model(&self, model: &str) -> Result<(), EngineError>;

    /// The loaded tools, in registry order.
    fn tools(&self) -> Vec<ToolInfo>;

    /// The thinking budget of the next requests (`Some(None)`: off); `None` when the session
    /// has no such setting (the `thinking` option is then not offered).
    fn thinking_budget(&self) -> Option<Option<u32>> {
        None
    }

    /// Sets the thinking budget of the next requests (`None`: off).
    fn set_thinking_budget(&self, _budget: Option<u32>) -> Result<(), EngineError> {
        Err(EngineError::invalid("this session has no thinking setting"))
    }

    /// The effective permission rules by scope, as text for `/permissions`.
    fn permissions(&self) -> String;

    /// The skills offered as slash commands (name, description); a project's once trusted.
    fn skills(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Each MCP server's state, as text for `/mcp`.
    fn mcp_status(&self) -> String {
        "No MCP servers are configured for this session.".into()
    }

    /// The session's background commands (`/jobs`), oldest first.
    fn jobs(&self) -> Vec<keel_core::runtime::jobs::JobInfo> {
        Vec::new()
    }

    /// The text of the MCP prompt `/server:prompt` with the user's arguments.
    fn mcp_prompt(
        &self,
        command: String,
        _arguments: String,
    ) -> BoxFuture<'_, Result<String, EngineError>> {
        Box::pin(async move {
            Err(EngineError::invalid(format!(
                "no MCP server offers the prompt `/{command}`"
            )))
        })
    }

    /// Called once `session/new` has been answered: a session that opens in the background
    /// starts now, so the work does not compete with the response.
    fn start(&self) {}

    /// Resolves once the session can run turns and answer [`AgentSession::tools`] and
    /// [`AgentSession::permissions`] (a session may finish opening after `session/new` was
    /// answered); fails with what kept it from opening.
    fn ready(&self) -> BoxFuture<'_, Result<(), EngineError>> {
        Box::pin(async { Ok(()) })
    }

    /// The session ends (closed by the client, or the connection went away).
    fn close(&self) {}

    /// What a session reopened from the store had recorded, for `session/load` to replay
    /// (empty after the first call, and for a new session).
    fn take_history(&self) -> Vec<keel_core::store::StoredEvent> {
        Vec::new()
    }

    /// The session's title, once it has one.
    fn title(&self) -> Option<String> {
        None
    }

    /// `/clear`: the conversation starts afresh in the same session (the model no longer sees
    /// what was said); the number of messages dropped.
    fn clear(&self) -> BoxFuture<'_, Result<usize, EngineError>> {
        Box::pin(async {
            Err(EngineError::failed(
                "this session cannot clear its conversation",
            ))
        })
    }

    /// `/compact [focus]`: summarizes the conversation so far; the estimated input tokens
    /// before and after, or `None` when there was nothing to compact.
    fn compact(
        &self,
        _focus: Option<String>,
        _host: Arc<dyn TurnHost>,
        _cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<Option<(u64, u64)>, EngineError>> {
        Box::pin(async {
            Err(EngineError::failed(
                "this session cannot compact its conversation",
            ))
        })
    }
}
