//! [`Engine`]: what every session of one process shares ([`EngineConfig`]), and how a session
//! is opened.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::policy::{Mode, Policy, PolicyLayers, Trust, TrustStore};
use crate::provider::resolve_model;
use crate::runtime::sandbox::SandboxSpec;
use crate::runtime::{FileBackend, Runtime, RuntimeConfig, TerminalBackend};
use crate::tool::{Registry, SessionState};

use super::session::{ModelSlot, Session};
use super::{AgentError, SetupError};
use crate::config::EngineConfig;
use crate::store::{SessionLog, SessionMeta, SessionStore, StoreError, StoredEvent};

/// The name of the model slot when no model is named and none resolves.
pub(super) const NO_MODEL_NAME: &str = "(none)";

/// The session store's directory under the user data directory.
pub const SESSIONS_DIR: &str = "sessions";

/// The trust store's file name under the user data directory.
pub const TRUST_FILE: &str = "trusted.toml";

/// What a front-end asks for when it opens a session.
#[derive(Default)]
pub struct SessionOptions {
    /// A fixed id (tests); a fresh UUID otherwise.
    pub id: Option<String>,
    /// Workspace roots; the first is the primary one.
    pub roots: Vec<PathBuf>,
    /// Whether a human can answer prompts. Headless sessions turn every ask into a deny.
    pub interactive: bool,
    pub mode: Option<Mode>,
    pub model: Option<String>,
    /// Whether the user trusts the project's own rules (asked by the host on first use).
    pub trust: Option<Trust>,
    pub files: Option<Arc<dyn FileBackend>>,
    pub terminals: Option<Arc<dyn TerminalBackend>>,
    /// Whether and how the session is kept in the session store.
    pub persistence: Persistence,
    /// MCP servers the front-end names (the editor's `session/new`), after the configured ones.
    pub mcp_servers: Vec<crate::mcp::McpServerConfig>,
    /// How a failing MCP server is told to the user outside a turn.
    pub notify: Option<crate::mcp::Notify>,
    /// Called when the MCP servers' prompts change (slash commands to advertise).
    pub prompts_changed: Option<crate::mcp::PromptsChanged>,
}

/// How a session relates to the session store (`{user-data}/sessions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Persistence {
    /// Not kept (tests, one-off runs).
    #[default]
    Off,
    /// A new session, kept from its first event (the id must be new).
    Create,
    /// A stored session with this id, reopened: its conversation continues. Its stored roots
    /// are used when none are given.
    Reopen,
    /// A new session starting as a copy of the stored session `from`.
    Fork { from: String },
}

/// A session's log as [`Engine::open_session`] found it.
enum OpenedLog {
    /// Not kept ([`Persistence::Off`]).
    Off,
    /// Kept: the open log and the events it already held.
    Kept(Box<SessionLog>, Vec<StoredEvent>),
    /// Meant to be kept, but the store could not be written.
    Unkept(StoreError),
}

/// Shared by every session of the process.
#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    /// Resolved models by requested name: a provider (and its HTTP client, TLS roots included)
    /// is built once per engine and shared by the sessions that use it. Failures are not kept.
    resolved: Mutex<HashMap<Option<String>, ModelSlot>>,
    /// The providers' model lists, once asked for.
    discovered: Mutex<Option<Vec<String>>>,
}

impl Engine {
    pub fn new(config: EngineConfig) -> Self {
        // The commands the model runs never see a provider's credential variable.
        crate::runtime::secrets::register_credential_vars(
            config
                .providers
                .iter()
                .filter_map(|p| p.api_key_env.clone()),
        );
        Self {
            config,
            resolved: Mutex::new(HashMap::new()),
            discovered: Mutex::new(None),
        }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The models offered to the user, the default first.
    pub fn models(&self) -> Vec<String> {
        let mut models = Vec::new();
        if let Some((provider, model)) = &self.config.provider_override {
            models.push(format!("{}/{model}", provider.id()));
        }
        if let Some(model) = &self.config.model {
            models.push(model.clone());
        }
        for model in &self.config.models {
            if !models.contains(model) {
                models.push(model.clone());
            }
        }
        models
    }

    /// The models the usable providers list at their models endpoints (`provider/model`),
    /// cached per provider for a day in [`EngineConfig::cache_dir`] and for the life of the
    /// engine in memory. Nothing with a provider override (the scripted model).
    pub async fn discover_models(&self) -> Vec<String> {
        if self.config.provider_override.is_some() {
            return Vec::new();
        }
        if let Some(known) = self.discovered() {
            return known;
        }
        let models = crate::provider::discover_models(
            self.usable_providers(),
            self.config.cache_dir.clone(),
        )
        .await;
        *self
            .discovered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(models.clone());
        models
    }

    /// The providers' models known without asking them: the lists this engine already
    /// discovered, else those cached on disk and still fresh. Nothing with a provider override.
    pub fn known_models(&self) -> Vec<String> {
        if self.config.provider_override.is_some() {
            return Vec::new();
        }
        if let Some(known) = self.discovered() {
            return known;
        }
        crate::provider::cached_models(&self.usable_providers(), self.config.cache_dir.as_deref())
    }

    /// The models this engine already discovered, if it did.
    fn discovered(&self) -> Option<Vec<String>> {
        self.discovered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The configured providers that can answer (credentials present).
    fn usable_providers(&self) -> Vec<crate::provider::ProviderConfig> {
        let env = self.config.env.clone();
        crate::provider::usable_providers(&move |key: &str| env(key), &self.config.providers)
    }

    /// The model a session answers with when none is chosen (`provider/model`), named without
    /// building its provider.
    pub fn default_model(&self) -> Option<String> {
        if let Some(first) = self.models().into_iter().next() {
            return Some(first);
        }
        let env = self.config.env.clone();
        crate::provider::default_model(&move |key: &str| env(key), &self.config.providers)
            .map(|(name, _)| name)
    }

    /// The bundled tools, less the disabled ones.
    pub fn registry(&self) -> Result<Registry, AgentError> {
        let env = self.config.env.clone();
        let mut registry =
            crate::tools::bundled(&move |key: &str| env(key)).map_err(SetupError::from)?;
        for tool in &self.config.extra_tools {
            registry.register_shadowing(tool.clone());
        }
        for id in &self.config.disabled_tools {
            registry.remove(id);
        }
        Ok(registry)
    }

    /// Resolves `name` (or the default) to a provider. Failure is kept in the slot, not raised:
    /// a session without credentials still opens; its first prompt reports what to set.
    pub fn resolve_model(&self, name: Option<&str>) -> ModelSlot {
        if let Some((provider, model)) = &self.config.provider_override {
            let display = format!("{}/{model}", provider.label());
            if name.is_none() || name == Some(display.as_str()) {
                return ModelSlot::ready(display, provider.clone(), model.clone());
            }
        }
        let env = self.config.env.clone();
        let lookup = move |key: &str| env(key);
        let name = name.or(self.config.model.as_deref());
        let key = name.map(str::to_owned);
        let mut resolved = self
            .resolved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(slot) = resolved.get(&key) {
            return slot.clone();
        }
        match resolve_model(name, &lookup, &self.config.providers) {
            Ok((provider, model)) => {
                let display = format!("{}/{model}", provider.label());
                let display = name.map(str::to_owned).unwrap_or(display);
                let slot = ModelSlot::ready(display, provider, model);
                resolved.insert(key, slot.clone());
                slot
            }
            Err(error) => ModelSlot {
                name: name.unwrap_or(NO_MODEL_NAME).to_owned(),
                resolved: Err(error.to_string()),
                missing_credentials: error.is_missing_credentials(),
            },
        }
    }

    /// Where the user's trusted projects are recorded (`{user-data}/trusted.toml`).
    pub fn trust_store(&self) -> Option<TrustStore> {
        let dir = self.config.user_data_dir.as_ref()?;
        Some(TrustStore::new(dir.join(TRUST_FILE)))
    }

    /// The session store (`{user-data}/sessions`), when there is a user data directory.
    pub fn store(&self) -> Option<SessionStore> {
        let dir = self.config.user_data_dir.as_ref()?;
        Some(SessionStore::new(dir.join(SESSIONS_DIR)))
    }

    /// Opens the session's log in the store as `persistence` says (and fills in the roots of a
    /// reopened session when none were given).
    fn open_log(
        &self,
        id: &str,
        persistence: &Persistence,
        roots: &mut Vec<PathBuf>,
    ) -> Result<OpenedLog, AgentError> {
        if *persistence == Persistence::Off {
            return Ok(OpenedLog::Off);
        }
        let store = self.store().ok_or_else(|| {
            AgentError::Setup(SetupError::Refused(
                "there is no user data directory to keep sessions in".into(),
            ))
        })?;
        let meta = |roots: &[PathBuf]| {
            SessionMeta::new(
                id,
                roots.first().cloned().unwrap_or_default(),
                roots.iter().skip(1).cloned().collect(),
            )
        };
        let (log, events) = match persistence {
            Persistence::Off => return Ok(OpenedLog::Off),
            Persistence::Create => match store.create(meta(roots)) {
                Ok(log) => (log, Vec::new()),
                // A store that cannot be written must not keep the user from working; the
                // first turn tells the user.
                Err(error @ StoreError::Io { .. }) => {
                    tracing::warn!(%error, "the session is not kept: the session store failed");
                    return Ok(OpenedLog::Unkept(error));
                }
                Err(error) => return Err(error.into()),
            },
            Persistence::Reopen => {
                let (log, events) = store.open(id)?;
                let stored = log.meta();
                if let Some(cwd) = roots.first() {
                    if let Err(error) = same_workspace(id, &stored.cwd, cwd) {
                        log.close();
                        return Err(error);
                    }
                } else {
                    roots.push(stored.cwd);
                    roots.extend(stored.additional_directories);
                }
                (log, events)
            }
            Persistence::Fork { from } => {
                let source = store.meta(from)?;
                if let Some(cwd) = roots.first() {
                    same_workspace(from, &source.cwd, cwd)?;
                }
                store.fork(from, meta(roots))?
            }
        };
        Ok(OpenedLog::Kept(Box::new(log), events))
    }

    /// Opens a session: compiles the scope over the roots, builds the registry and the policy.
    pub fn open_session(&self, options: SessionOptions) -> Result<Session, AgentError> {
        let mut options = options;
        let id = options
            .id
            .take()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let mut roots = std::mem::take(&mut options.roots);
        let stored = self.open_log(&id, &options.persistence, &mut roots)?;
        options.roots = roots;
        let events = match &stored {
            OpenedLog::Kept(_, events) => Some(events.as_slice()),
            OpenedLog::Off | OpenedLog::Unkept(_) => None,
        };
        let session = self.build_session(id, options, events);
        match (session, stored) {
            (Ok(session), OpenedLog::Kept(log, events)) => Ok(session.with_log(*log, events)),
            (Ok(session), OpenedLog::Unkept(error)) => Ok(session.unkept(error)),
            (Ok(session), OpenedLog::Off) => Ok(session),
            (Err(error), OpenedLog::Kept(log, _)) => {
                log.close();
                Err(error)
            }
            (Err(error), OpenedLog::Off | OpenedLog::Unkept(_)) => Err(error),
        }
    }

    /// The session's runtime: its roots and scratch directory, the capabilities its tools
    /// need, the sandbox as configured (credentials and guards from the watchdog's lists), the
    /// editor's backends, Keel's own configuration protected.
    fn session_runtime(
        &self,
        registry: &Registry,
        scratch_dir: &Path,
        options: &mut SessionOptions,
    ) -> Result<Runtime, AgentError> {
        let requirements = registry
            .specs()
            .fold(self.config.manifest.clone(), |set, spec| {
                set.union(&spec.requires)
            });
        let runtime = Runtime::new(RuntimeConfig {
            roots: options.roots.clone(),
            requirements,
            // The user's skills folder: the `skill` tool (and `read`) may open its files.
            ad_hoc: self
                .config
                .global_config_dir
                .iter()
                .map(|dir| {
                    let skills = crate::skills::user_dir(dir);
                    crate::runtime::paths::resolve(&skills).unwrap_or(skills)
                })
                .collect(),
            user_data: self.config.user_data_dir.clone(),
            scratch_dir: scratch_dir.to_path_buf(),
            sandbox: SandboxSpec {
                read_only: options.mode.unwrap_or(self.config.mode) == Mode::ReadOnly,
                credentials: Some(crate::policy::watchdog::credential_rules(
                    self.config.sandbox.home.clone(),
                )),
                guards: Some(crate::policy::watchdog::guard_rules()),
                home_credentials: self
                    .config
                    .sandbox
                    .home
                    .as_deref()
                    .map(|home| {
                        let home = crate::runtime::paths::resolve(home)
                            .unwrap_or_else(|_| home.to_path_buf());
                        crate::policy::watchdog::home_credentials(&home)
                    })
                    .unwrap_or_default(),
                ..self.config.sandbox.clone()
            },
        })
        .map_err(SetupError::from)?
        .with_backends(options.files.take(), options.terminals.take())
        .with_protected(self.config.global_config_dir.iter().cloned());
        Ok(runtime)
    }

    /// The session's MCP servers, started now, in the background: a slow or broken server never
    /// holds the session up.
    fn start_mcp(
        &self,
        servers: Vec<crate::mcp::McpServerConfig>,
        registry: &Registry,
        scratch_dir: &Path,
        runtime: &Runtime,
        options: &mut SessionOptions,
    ) -> crate::mcp::McpHub {
        let mcp = crate::mcp::McpHub::new(
            servers,
            registry.specs().map(|spec| spec.id.clone()).collect(),
            scratch_dir.join("mcp"),
        );
        mcp.set_runtime(runtime.clone());
        mcp.set_package_caches(self.config.cache_dir.as_ref().map(|dir| dir.join("mcp")));
        mcp.set_disabled(self.config.disabled_tools.clone());
        if let Some(notify) = options.notify.take() {
            mcp.set_notify(notify);
        }
        if let Some(changed) = options.prompts_changed.take() {
            mcp.set_prompts_changed(changed);
        }
        mcp.start();
        mcp
    }

    /// The workspace's trust as the trust store holds it (untrusted when it cannot be read).
    fn stored_trust(&self, workspace: &Path) -> Trust {
        match self.trust_store().map(|store| store.trust_of(workspace)) {
            Some(Ok(trust)) => trust,
            Some(Err(error)) => {
                tracing::warn!(%error, "cannot read the trust store; the project is untrusted");
                Trust::Unknown
            }
            None => Trust::Unknown,
        }
    }

    /// The policy's layers for a workspace (the user's and, once trusted, the project's rule
    /// files); Keel's own state is never a tool's to change, whatever the mode.
    fn policy_layers(
        &self,
        workspace: &Path,
        trust: Trust,
    ) -> Result<PolicyLayers, crate::policy::PolicyError> {
        let mut layers =
            PolicyLayers::load(workspace, self.config.global_config_dir.as_deref(), trust)?;
        if let Some(dir) = &self.config.user_data_dir {
            layers.protected.push(dir.clone());
            // As it resolves too, the way the runtime's own protected set holds it.
            if let Ok(real) = crate::runtime::paths::resolve(dir)
                && real != *dir
            {
                layers.protected.push(real);
            }
        }
        Ok(layers)
    }

    fn build_session(
        &self,
        id: String,
        mut options: SessionOptions,
        stored: Option<&[StoredEvent]>,
    ) -> Result<Session, AgentError> {
        let Kept {
            mode: last_mode,
            model: last_model,
            cost: last_cost,
            thinking: last_thinking,
        } = Kept::of(stored.unwrap_or_default());
        let mut registry = self.registry()?;
        let scratch_dir = self.config.scratch_root.join(format!("session-{id}"));
        let runtime = self.session_runtime(&registry, &scratch_dir, &mut options)?;
        // The workspace's credential files, listed before the first command needs them.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let warm = runtime.clone();
            drop(handle.spawn_blocking(move || warm.warm_credentials()));
        }
        let chosen_mode = options.mode.or(last_mode);
        let mut mode = chosen_mode.unwrap_or(self.config.mode);
        let workspace = runtime.root().to_path_buf();
        let trust = match options.trust {
            Some(trust) => trust,
            None => self.stored_trust(&workspace),
        };
        let setup = |e: crate::policy::PolicyError| AgentError::Setup(e.into());
        let mut layers = self.policy_layers(&workspace, trust).map_err(setup)?;
        let fingerprint = crate::policy::project_fingerprint(&workspace).ok();
        // Tool files: the user's, and the project's once trusted (they name programs to run).
        for note in crate::tools::extension::extend_registry(
            &mut registry,
            self.config.global_config_dir.as_deref(),
            &workspace,
            trust.is_trusted(),
        ) {
            tracing::info!("{note}");
        }
        for id in &self.config.disabled_tools {
            registry.remove(id);
        }
        let mut ignored = Vec::new();
        let mut mcp_servers = Vec::new();
        let mut mcp_access = std::collections::BTreeMap::new();
        if let Some(config_rules) = &self.config.config_rules {
            let loaded =
                config_rules(&workspace, trust.is_trusted()).map_err(AgentError::Config)?;
            layers.manifest.extend(loaded.user_rules);
            if let Some(project) = loaded.project_rules {
                match &mut layers.project {
                    Some(existing) => existing.rules.extend(project.rules),
                    None => layers.project = Some(project),
                }
            }
            if chosen_mode.is_none()
                && let Some(loaded_mode) = loaded.mode
            {
                mode = loaded_mode;
            }
            ignored = loaded.ignored;
            mcp_servers = loaded.mcp_servers;
            mcp_access = loaded.mcp_access;
        }
        // An editor's server gets what the configuration's table of its name lets it reach.
        mcp_servers.extend(std::mem::take(&mut options.mcp_servers).into_iter().map(
            |mut server| {
                if let Some(access) = mcp_access.get(&server.name) {
                    server.access = access.clone();
                }
                server
            },
        ));
        let mcp = self.start_mcp(mcp_servers, &registry, &scratch_dir, &runtime, &mut options);
        let policy = Arc::new(Policy::new(layers, mode, !options.interactive).map_err(setup)?);
        // Confined commands reach the hosts the session's rules allow through the sandbox's
        // filtering proxy (docs/sandbox.md).
        let runtime =
            runtime.with_host_gate(Arc::new(crate::policy::PolicyHostGate(policy.clone())));
        let state = SessionState::new(
            id.clone(),
            runtime.scratch_dir().to_path_buf(),
            self.config.limits.clone(),
            options.interactive,
        );
        let mut model = self.resolve_model(options.model.as_deref().or(last_model.as_deref()));
        if model.resolved.is_err() && options.model.is_none() && last_model.is_some() {
            // The stored model is no longer configured: the default serves.
            model = self.resolve_model(None);
        }
        let mut session = Session::new(
            id,
            self.trust_store(),
            runtime,
            Arc::new(state),
            Arc::new(registry),
            policy,
            Mutex::new(model),
            self.config.clone(),
        );
        session.mcp = mcp;
        session.spent = Mutex::new(crate::provider::pricing::RunningCost::resumed(last_cost));
        if let Some(budget) = last_thinking {
            session.thinking_budget = Mutex::new(budget);
        }
        session.project = super::session::ProjectState {
            fingerprint,
            ignored,
            mode_overridden: chosen_mode.is_some(),
        };
        Ok(session)
    }
}

/// A stored session belongs to the workspace it was made in: reopening or forking it under
/// another `cwd` would hand one project's history (approved secrets included) to another
/// project's model. Paths are compared canonical (a symlinked spelling of the same directory
/// is the same workspace).
fn same_workspace(id: &str, stored: &Path, asked: &Path) -> Result<(), AgentError> {
    let canonical = crate::runtime::probe::canonical_or_same;
    if canonical(stored) == canonical(asked) {
        return Ok(());
    }
    Err(AgentError::Setup(SetupError::Refused(format!(
        "session `{id}` belongs to the workspace {}, not to {}; open it from its own \
         workspace, or start a new session here",
        stored.display(),
        asked.display()
    ))))
}

/// What a reopened session keeps from its log unless the caller names it: its last mode,
/// model, cost and thinking budget.
#[derive(Default)]
struct Kept {
    mode: Option<Mode>,
    model: Option<String>,
    cost: Option<f64>,
    /// The last budget recorded (itself `None` when thinking was turned off).
    thinking: Option<Option<u32>>,
}

impl Kept {
    fn of(stored: &[StoredEvent]) -> Self {
        let mut kept = Kept::default();
        for event in stored {
            match event {
                StoredEvent::Mode { mode } => kept.mode = mode.parse::<Mode>().ok(),
                StoredEvent::Model { model } => kept.model = Some(model.clone()),
                StoredEvent::Usage { cost, .. } => kept.cost = *cost,
                StoredEvent::ThinkingBudget { budget } => kept.thinking = Some(*budget),
                _ => {}
            }
        }
        kept
    }
}
