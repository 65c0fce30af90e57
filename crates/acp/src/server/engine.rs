//! The seam between the ACP server and the engine that runs turns.
//!
//! - [`SessionFactory`]: builds a session for `session/new` from a [`SessionSpec`] and lists the
//!   configured models.
//! - [`AgentSession`]: one conversation: runs a turn against a [`TurnHost`], reports and changes
//!   its security mode and model, lists its tools and renders its permission rules.
//!
//! - [`EngineSessions`]: the two traits over keel-core's [`Engine`] and its sessions.
//!
//! The server knows nothing else of how sessions are built, so tests can drive it with scripted
//! sessions over temporary workspaces, and the real engine plugs in through the same two traits.

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use keel_core::agent::{
    AgentError, Engine, Session, SessionOptions, TurnHost, TurnOutcome, UserContent,
};
use keel_core::policy::{Mode, render_rules};
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

    /// The session ends (closed by the client, or the connection went away).
    fn close(&self) {}
}

/// The engine behind the seam: sessions of a [`keel_core::agent::Engine`].
pub struct EngineSessions {
    engine: Arc<Engine>,
}

impl std::fmt::Debug for EngineSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineSessions").finish_non_exhaustive()
    }
}

impl EngineSessions {
    pub fn new(engine: Engine) -> Self {
        Self {
            engine: Arc::new(engine),
        }
    }
}

fn turn_error(error: AgentError) -> EngineError {
    match error {
        AgentError::NoModel(message) => EngineError::NoCredentials(message),
        other => EngineError::Failed(other.to_string()),
    }
}

impl SessionFactory for EngineSessions {
    fn models(&self) -> Vec<String> {
        self.engine.models()
    }

    fn create(
        &self,
        spec: SessionSpec,
    ) -> BoxFuture<'_, Result<Arc<dyn AgentSession>, EngineError>> {
        let engine = self.engine.clone();
        Box::pin(async move {
            // Opening reads rule files and resolves the roots: keep that off the async threads.
            let opened = tokio::task::spawn_blocking({
                let engine = engine.clone();
                move || {
                    engine.open_session(SessionOptions {
                        id: Some(spec.id),
                        roots: spec.roots,
                        interactive: true,
                        files: spec.files,
                        terminals: spec.terminals,
                        ..SessionOptions::default()
                    })
                }
            })
            .await
            .map_err(|error| EngineError::Failed(format!("opening the session failed: {error}")))?;
            let session = opened.map_err(|error| match error {
                AgentError::Setup(message) => EngineError::InvalidInput(message),
                other => turn_error(other),
            })?;
            Ok(Arc::new(EngineSession {
                engine,
                session: Arc::new(session),
            }) as Arc<dyn AgentSession>)
        })
    }
}

/// One engine session.
struct EngineSession {
    engine: Arc<Engine>,
    session: Arc<Session>,
}

impl AgentSession for EngineSession {
    fn run_turn(
        &self,
        prompt: Vec<UserContent>,
        host: Arc<dyn TurnHost>,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<TurnOutcome, EngineError>> {
        Box::pin(async move {
            self.session
                .run_turn(prompt, host, cancel)
                .await
                .map_err(turn_error)
        })
    }

    fn mode(&self) -> Mode {
        self.session.policy().mode()
    }

    fn set_mode(&self, mode: Mode) -> Result<(), EngineError> {
        self.session.policy().set_mode(mode);
        Ok(())
    }

    fn model(&self) -> Option<String> {
        Some(self.session.model_name())
    }

    fn set_model(&self, model: &str) -> Result<(), EngineError> {
        let slot = self.engine.resolve_model(Some(model));
        if let Err(message) = &slot.resolved {
            return Err(EngineError::InvalidInput(message.clone()));
        }
        self.session.set_model(slot);
        Ok(())
    }

    fn tools(&self) -> Vec<ToolInfo> {
        self.session
            .registry()
            .specs()
            .map(|spec| ToolInfo {
                id: spec.id.clone(),
                origin: spec.origin.to_string(),
                summary: spec.description.lines().next().unwrap_or("").to_owned(),
            })
            .collect()
    }

    fn permissions(&self) -> String {
        render_rules(self.session.policy())
    }

    fn close(&self) {
        self.session.close();
    }
}
