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
#[derive(Debug, Clone)]
pub struct SessionSpec {
    /// The session id the server picked (also the name of the session's scratch directory).
    pub id: String,
    /// Workspace roots: the client's `cwd` first, then its `additionalDirectories`.
    pub roots: Vec<PathBuf>,
    /// The editor's buffers, when the client serves `fs/*` (otherwise the disk).
    pub files: Option<Arc<dyn FileBackend>>,
    /// The editor's terminal pane, when the client serves `terminal/*` (otherwise local runs).
    pub terminals: Option<Arc<dyn TerminalBackend>>,
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

/// Why the engine could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// No credentials for the selected provider; the message names what to set.
    #[error("{0}")]
    NoCredentials(String),
    /// The request itself is unusable (unknown model, unreadable root, ...).
    #[error("{0}")]
    InvalidInput(String),
    /// The engine failed.
    #[error("{0}")]
    Failed(String),
}

/// Builds sessions. One per server; shared by every connection's handlers.
pub trait SessionFactory: Send + Sync + 'static {
    /// The configured model ids, in display order (empty: the model option is not offered).
    fn models(&self) -> Vec<String>;

    /// Builds a session. Must not fail for missing credentials: those fail the first prompt.
    fn create(
        &self,
        spec: SessionSpec,
    ) -> BoxFuture<'_, Result<Arc<dyn AgentSession>, EngineError>>;
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

    /// The effective permission rules by scope, as text for `/permissions`.
    fn permissions(&self) -> String;

    /// Resolves once the session can run turns and answer [`AgentSession::tools`] and
    /// [`AgentSession::permissions`] (a session may finish opening after `session/new` was
    /// answered); fails with what kept it from opening.
    fn ready(&self) -> BoxFuture<'_, Result<(), EngineError>> {
        Box::pin(async { Ok(()) })
    }

    /// The session ends (closed by the client, or the connection went away).
    fn close(&self) {}
}
