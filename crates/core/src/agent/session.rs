//! One conversation: its runtime, tools, policy, model and history.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::RwLock;

use crate::policy::{Policy, TrustStore};
use crate::provider::{Message, Provider};
use crate::runtime::Runtime;
use crate::tool::{Registry, SessionState};

use super::engine::EngineConfig;

/// The model a session talks to: its display name and the resolved provider, or why it could
/// not be resolved (a message naming what to set).
#[derive(Debug, Clone)]
pub struct ModelSlot {
    pub name: String,
    pub resolved: Result<(Arc<dyn Provider>, String), String>,
}

/// A conversation. Turns are serialized (the history lock is held for a whole turn).
pub struct Session {
    pub(super) id: String,
    pub(super) runtime: Runtime,
    pub(super) state: Arc<SessionState>,
    pub(super) registry: Arc<Registry>,
    pub(super) policy: Arc<Policy>,
    pub(super) model: Mutex<ModelSlot>,
    pub(super) config: EngineConfig,
    pub(super) history: tokio::sync::Mutex<Vec<Message>>,
    /// Read-only calls share it; mutating calls take it alone, in the order the model asked.
    pub(super) tool_lock: RwLock<()>,
    /// Where a "trust always" answer is recorded.
    pub(super) trust_store: Option<TrustStore>,
    /// Whether the project-trust question was settled in this session.
    pub(super) trust_settled: std::sync::atomic::AtomicBool,
    /// What the project's files ask for that waits for trust.
    pub(super) project: ProjectState,
    /// Whether the front-end chose the model ([`Session::set_model`]); trusting the project
    /// then leaves it alone.
    pub(super) model_chosen: std::sync::atomic::AtomicBool,
}

/// The project's configuration as the session opened it.
#[derive(Debug, Clone, Default)]
pub(super) struct ProjectState {
    /// `project_fingerprint` of the workspace when the session opened: what a "trust always"
    /// answer records.
    pub fingerprint: Option<String>,
    /// Settings not applied because the project is not trusted.
    pub ignored: Vec<super::engine::IgnoredLine>,
    /// Whether the front-end chose the mode (then trusting the project does not change it).
    pub mode_overridden: bool,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Session {
    #[allow(
        clippy::too_many_arguments,
        reason = "one private constructor, called once"
    )]
    pub(super) fn new(
        id: String,
        trust_store: Option<TrustStore>,
        runtime: Runtime,
        state: Arc<SessionState>,
        registry: Arc<Registry>,
        policy: Arc<Policy>,
        model: Mutex<ModelSlot>,
        config: EngineConfig,
    ) -> Self {
        Self {
            id,
            runtime,
            state,
            registry,
            policy,
            model,
            config,
            history: tokio::sync::Mutex::new(Vec::new()),
            tool_lock: RwLock::new(()),
            trust_store,
            trust_settled: std::sync::atomic::AtomicBool::new(false),
            project: ProjectState::default(),
            model_chosen: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    pub fn state(&self) -> &Arc<SessionState> {
        &self.state
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The current model's display name (`provider/model`).
    pub fn model_name(&self) -> String {
        lock(&self.model).name.clone()
    }

    /// Switches the model for the next turn (resolve it with [`super::Engine::resolve_model`]).
    pub fn set_model(&self, slot: ModelSlot) {
        self.model_chosen
            .store(true, std::sync::atomic::Ordering::SeqCst);
        *lock(&self.model) = slot;
    }

    /// Switches the model on Keel's own account (the trusted project's model).
    pub(super) fn replace_model(&self, slot: ModelSlot) {
        *lock(&self.model) = slot;
    }

    pub(super) fn model_slot(&self) -> ModelSlot {
        lock(&self.model).clone()
    }

    /// A copy of the conversation so far (waits for a running turn to finish).
    pub async fn history(&self) -> Vec<Message> {
        self.history.lock().await.clone()
    }

    /// Ends the session: removes its scratch directory (sidecar files).
    pub fn close(&self) {
        if let Err(e) = crate::runtime::remove_scratch(self.runtime.scratch_dir()) {
            tracing::warn!(session = %self.id, error = %e, "could not remove the session's scratch directory");
        }
    }
}
