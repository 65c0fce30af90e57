//! The agent turn loop and the front-end-neutral events it emits.
//!
//! A front-end (the ACP server, `keel exec`, `keel demo`) builds one [`Engine`] per process and
//! opens a [`Session`] per conversation ([`Engine::open_session`]), then calls
//! [`Session::run_turn`] with the user's prompt, a [`TurnHost`] and a cancellation token. The
//! loop streams the model's answer, dispatches tool calls through schema check, capability
//! check, permission engine (rules, mode, watchdog) and, when the policy says ask,
//! [`TurnHost::approve`]; it runs read-only calls of one model response in parallel and mutating
//! ones one at a time in order, and reports everything as [`AgentEvent`]s. It never sees ACP
//! types.

mod call;
mod compact;
mod engine;
mod events;
mod prompt;
mod record;
mod session;
mod subagent;
mod title;
mod trust;
mod turn;

/// Defined with the configuration that builds them ([`crate::config`]).
pub use crate::config::{
    ConfigFault, ConfigRules, EngineConfig, EnvLookup, IgnoredLine, WorkspaceConfig,
};
/// Re-exported from [`crate::front_matter`], where skills read it too.
pub use crate::front_matter::front_matter;
pub use compact::Compaction;
pub use engine::{Engine, Persistence, SESSIONS_DIR, SessionOptions, TRUST_FILE};
pub use events::{
    AgentEvent, Answer, ApprovalAnswer, ApprovalRequest, CallStatus, QuestionItem, QuestionOption,
    TurnHost, TurnOutcome, TurnStop, UserContent,
};
pub use session::{ModelSlot, Session};
pub use subagent::{AgentDef, GENERAL_AGENT, MAX_DEPTH, agents_listing, load_agents, parse_agent};
pub use title::{TITLE_SYSTEM, clean_title};
pub use trust::{TRUST_QUESTION_ID, files_waiting_for_trust, notice as trust_notice};

use crate::provider::ProviderError;

/// Why a turn (or a session) could not run. Tool failures are never here: they go back to the
/// model.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// No model could be resolved; the message names exactly what to set. Not retried.
    #[error("{0}")]
    NoModel(String),
    /// The model that would answer has no credential (none found, or refused); the message
    /// names the variable to set (or `keel login`). Not retried.
    #[error("{0}")]
    NoCredentials(String),
    /// The model's service failed after the provider's own retries. The front-end reports it.
    #[error("model error: {0}")]
    Provider(#[from] ProviderError),
    /// The session could not be set up (bad workspace root, bad rule file, ...).
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The workspace's configuration files do not load (a project file's typo).
    #[error("{0}")]
    Config(ConfigFault),
    /// The session store refused (unknown or locked session, unreadable store).
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The next request does not fit the model's window, even after compaction. Not retried.
    #[error(
        "the conversation no longer fits the model's context window (about {needed} tokens \
         for a window of {window}); start a new session, or `/compact` with a focus"
    )]
    ContextOverflow { needed: u64, window: u64 },
    /// Compaction failed (the summary request failed or came back empty).
    #[error("compaction failed: {0}")]
    Compaction(String),
}

/// Why a session could not be set up; each failure keeps its cause.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// Keel refuses the request by its own rules (no place to keep sessions, a session opened
    /// from another workspace); the message says what to do.
    #[error("{0}")]
    Refused(String),
    /// The bundled tools could not be registered.
    #[error(transparent)]
    Tools(#[from] crate::tools::BundledError),
    /// The runtime could not be built over the roots (a root that does not resolve, ...).
    #[error(transparent)]
    Runtime(#[from] crate::runtime::RuntimeError),
    /// The permission rules or the trust store do not load.
    #[error(transparent)]
    Policy(#[from] crate::policy::PolicyError),
}
