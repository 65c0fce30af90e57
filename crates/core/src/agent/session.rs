//! One conversation: its runtime, tools, policy, model and history.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::RwLock;

use crate::policy::{Mode, Policy, TrustStore};
use crate::provider::{Message, Provider};
use crate::runtime::Runtime;
use crate::store::{SessionLog, StoredEvent};
use crate::tool::{Registry, SessionState};

use crate::config::EngineConfig;

/// The model a session talks to: its display name and the resolved provider, or why it could
/// not be resolved (a message naming what to set).
#[derive(Debug, Clone)]
pub struct ModelSlot {
    pub name: String,
    // String error: the message names what to set, shown to the user as is.
    pub resolved: Result<(Arc<dyn Provider>, String), String>,
    /// The model could not be resolved for want of a credential
    /// ([`crate::provider::ProviderError::is_missing_credentials`]): the turn tries again (a
    /// `keel login` may have stored one since) and otherwise fails with
    /// [`super::AgentError::NoCredentials`].
    pub missing_credentials: bool,
}

impl ModelSlot {
    /// A resolved model.
    pub fn ready(name: String, provider: Arc<dyn Provider>, model: String) -> Self {
        Self {
            name,
            resolved: Ok((provider, model)),
            missing_credentials: false,
        }
    }

    /// The provider and model, or why the turn cannot run.
    pub(super) fn provider(self) -> Result<(Arc<dyn Provider>, String), super::AgentError> {
        match self.resolved {
            Ok(resolved) => Ok(resolved),
            Err(message) if self.missing_credentials => {
                Err(super::AgentError::NoCredentials(message))
            }
            Err(message) => Err(super::AgentError::NoModel(message)),
        }
    }
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
    pub(super) history: tokio::sync::Mutex<crate::provider::History>,
    /// Read-only calls share it; mutating calls take it alone, in the order the model asked.
    pub(super) tool_lock: RwLock<()>,
    /// Where a "trust always" answer is recorded.
    pub(super) trust_store: Option<TrustStore>,
    /// Whether the project-trust question was settled in this session.
    pub(super) trust_settled: std::sync::atomic::AtomicBool,
    /// The session's event log in the store, when it is kept.
    pub(super) log: Option<Arc<SessionLog>>,
    /// Why the session is not kept although it was meant to be (the store could not be
    /// written), until the first turn tells the user.
    pub(super) unkept: Mutex<Option<crate::store::StoreError>>,
    /// The stored events a reopened session started from, until the front-end takes them.
    pub(super) loaded: Mutex<Vec<StoredEvent>>,
    /// Tokens the provider reported per token estimated, for the last request (at least 1):
    /// text the 4-bytes rule underestimates (CJK, say) makes compaction start earlier.
    pub(super) token_ratio: Mutex<f64>,
    /// What the project's files ask for that waits for trust.
    pub(super) project: ProjectState,
    /// Whether the front-end chose the model ([`Session::set_model`]); trusting the project
    /// then leaves it alone.
    pub(super) model_chosen: std::sync::atomic::AtomicBool,
    /// How deep this session is in a chain of subagents (0: the user's session).
    pub(super) depth: u32,
    /// Subagents started with `background: true`.
    pub(super) background: Arc<super::subagent::Background>,
    /// Subagents started so far (numbers their ids and scratch directories).
    pub(super) children: Arc<std::sync::atomic::AtomicU64>,
    /// The thinking budget of the next requests (the engine's until the front-end sets it).
    pub(super) thinking_budget: Mutex<Option<u32>>,
    /// The session's MCP servers and their tools.
    pub(super) mcp: crate::mcp::McpHub,
    /// The registry's tools as the model is offered them, built at the first request (the
    /// registry does not change during a session; the schemas are shared by every request).
    pub(super) bundled_definitions: std::sync::OnceLock<Vec<crate::provider::ToolDefinition>>,
    /// The agent definitions `task` may name, read once per session (again only when the
    /// project's trust changes, which decides whether the project's own count), with the
    /// trust they were read under.
    pub(super) agents: Mutex<Option<(bool, Arc<Vec<super::AgentDef>>)>>,
    /// What the session's model responses cost so far.
    pub(super) spent: Mutex<crate::provider::pricing::RunningCost>,
    /// Every tool-call id this session has given out (`Session::keel_call_id`).
    pub(super) call_ids: Mutex<std::collections::HashSet<String>>,
}

/// The project's configuration as the session opened it.
#[derive(Debug, Clone, Default)]
pub(super) struct ProjectState {
    /// `project_fingerprint` of the workspace when the session opened: what a "trust always"
    /// answer records.
    pub fingerprint: Option<String>,
    /// Settings not applied because the project is not trusted.
    pub ignored: Vec<crate::config::IgnoredLine>,
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
    #[expect(
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
        let thinking_budget = config.thinking_budget;
        Self {
            id,
            runtime,
            state,
            registry,
            policy,
            model,
            config,
            history: tokio::sync::Mutex::new(crate::provider::History::default()),
            tool_lock: RwLock::new(()),
            trust_store,
            trust_settled: std::sync::atomic::AtomicBool::new(false),
            log: None,
            unkept: Mutex::new(None),
            loaded: Mutex::new(Vec::new()),
            token_ratio: Mutex::new(1.0),
            project: ProjectState::default(),
            model_chosen: std::sync::atomic::AtomicBool::new(false),
            depth: 0,
            background: Arc::default(),
            children: Arc::default(),
            thinking_budget: Mutex::new(thinking_budget),
            mcp: crate::mcp::McpHub::default(),
            bundled_definitions: std::sync::OnceLock::new(),
            agents: Mutex::new(None),
            spent: Mutex::default(),
            call_ids: Mutex::default(),
        }
    }

    /// `/clear`: the model's view of the conversation starts afresh (waiting for a running
    /// turn first). The store keeps what was said, with a [`StoredEvent::Compaction`] to nothing,
    /// so a reopened session continues from the cleared state. Returns the messages dropped.
    pub async fn clear(&self) -> usize {
        let mut history = self.history.lock().await;
        let dropped = history.len();
        history.clear();
        self.state.forget_conversation();
        self.record(&StoredEvent::Compaction {
            messages: Vec::new(),
            before: 0,
            after: 0,
        });
        dropped
    }

    /// The thinking budget of the next requests (`None`: off).
    pub fn thinking_budget(&self) -> Option<u32> {
        *self
            .thinking_budget
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets the thinking budget of the next requests (`None`: off), kept with the session (a
    /// reopened session restores it).
    pub fn set_thinking_budget(&self, budget: Option<u32>) {
        let changed = {
            let mut current = self
                .thinking_budget
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            std::mem::replace(&mut *current, budget) != budget
        };
        if changed {
            self.record(&StoredEvent::ThinkingBudget { budget });
        }
    }

    /// Keeps the session in the store: every event goes to `log`. `events` are what a reopened
    /// session had recorded: the model's view of the conversation continues from them.
    pub(super) fn with_log(mut self, log: SessionLog, events: Vec<StoredEvent>) -> Self {
        self.history = tokio::sync::Mutex::new(crate::store::model_history(&events).into());
        // The calls the stored session already showed keep their ids: a new call never takes
        // one of them (a reopened session's editor still has those calls).
        self.call_ids = Mutex::new(
            events
                .iter()
                .filter_map(|event| match event {
                    StoredEvent::ToolCall { call_id, .. } => Some(call_id.clone()),
                    _ => None,
                })
                .collect(),
        );
        self.log = Some(Arc::new(log));
        self.loaded = Mutex::new(events);
        self
    }

    /// A session meant to be kept whose store could not be written: its first turn says so.
    pub(super) fn unkept(self, error: crate::store::StoreError) -> Self {
        *lock(&self.unkept) = Some(error);
        self
    }

    /// The session's log in the store, if it is kept.
    pub fn log(&self) -> Option<&Arc<SessionLog>> {
        self.log.as_ref()
    }

    /// The stored events this session was reopened from (empty after the first call, and for a
    /// new session), for a front-end to replay.
    pub fn take_loaded(&self) -> Vec<StoredEvent> {
        std::mem::take(&mut *lock(&self.loaded))
    }

    pub(super) fn record(&self, event: &StoredEvent) {
        if let Some(log) = &self.log {
            log.record(event);
        }
    }

    /// Switches the security mode (recorded in the store).
    pub fn set_mode(&self, mode: Mode) {
        self.policy.set_mode(mode);
        self.record(&StoredEvent::Mode {
            mode: mode.as_str().to_owned(),
        });
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

    /// The session's MCP servers (their state for `/mcp`, their tools).
    pub fn mcp(&self) -> &crate::mcp::McpHub {
        &self.mcp
    }

    /// The tools the model may call now: the registry's, then the ready MCP servers'.
    pub fn tools(&self) -> Vec<Arc<dyn crate::tool::DynTool>> {
        let mut tools: Vec<_> = self.registry.iter().cloned().collect();
        tools.extend(self.mcp.tools());
        tools
    }

    /// A tool by id: the registry's first (a locked id is never an MCP tool's).
    pub(super) fn tool(&self, id: &str) -> Option<Arc<dyn crate::tool::DynTool>> {
        self.registry.get(id).cloned().or_else(|| self.mcp.get(id))
    }

    /// The current model's display name (`provider/model`).
    pub fn model_name(&self) -> String {
        lock(&self.model).name.clone()
    }

    /// Switches the model for the next turn (resolve it with [`super::Engine::resolve_model`]).
    pub fn set_model(&self, slot: ModelSlot) {
        self.record(&StoredEvent::Model {
            model: slot.name.clone(),
        });
        self.model_chosen
            .store(true, std::sync::atomic::Ordering::SeqCst);
        *lock(&self.model) = slot;
    }

    /// Switches the model on Keel's own account (the trusted project's model).
    pub(super) fn replace_model(&self, slot: ModelSlot) {
        *lock(&self.model) = slot;
    }

    /// The session's model. One that lacked a credential is resolved again first: the user
    /// may have run `keel login` (or set the variable in Keel's credentials file) since.
    pub(super) fn model_slot(&self) -> ModelSlot {
        let slot = lock(&self.model).clone();
        if !slot.missing_credentials {
            return slot;
        }
        let env = self.config.env.clone();
        let lookup = move |key: &str| env(key);
        let name = (slot.name != super::engine::NO_MODEL_NAME).then_some(slot.name.as_str());
        match crate::provider::resolve_model(name, &lookup, &self.config.providers) {
            Ok((provider, model)) => {
                let display =
                    name.map_or_else(|| format!("{}/{model}", provider.label()), str::to_owned);
                let ready = ModelSlot::ready(display, provider, model);
                *lock(&self.model) = ready.clone();
                ready
            }
            Err(_) => slot,
        }
    }

    /// A copy of the conversation so far (waits for a running turn to finish).
    pub async fn history(&self) -> Vec<Message> {
        self.history.lock().await.to_vec()
    }

    /// Ends the session: releases its log in the store and removes its scratch directory
    /// (sidecar files).
    pub fn close(&self) {
        self.background.cancel_all();
        // Each job's driver kills its process group (or its pane terminal) and checks it gone.
        self.state.jobs().stop_all_now();
        self.mcp.shutdown();
        if let Some(log) = &self.log {
            log.close();
        }
        if let Err(e) = crate::runtime::remove_scratch(self.runtime.scratch_dir()) {
            tracing::warn!(session = %self.id, error = %e, "could not remove the session's scratch directory");
        }
    }
}
