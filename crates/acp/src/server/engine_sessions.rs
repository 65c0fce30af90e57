//! [`EngineSessions`]: the engine seam over keel-core's [`Engine`].
//!
//! `session/new` answers as soon as the roots are known to be directories: the engine session
//! (registry, permission rules, scratch directory, model provider: a few milliseconds, more in a
//! fresh process) then opens on a blocking thread, started once the answer is out
//! ([`AgentSession::start`]), and the first prompt waits for it. Until
//! it is open, the mode and the model the client sees are the engine's defaults, and changes to
//! them are kept and applied the moment it opens; a failure to open is the first prompt's error.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use futures::future::BoxFuture;
use keel_core::agent::{
    AgentError, Engine, ModelSlot, Persistence, Session, SessionOptions, TurnHost, TurnOutcome,
    UserContent,
};
use keel_core::policy::{Mode, render_rules};
use keel_core::store::{StoreError, StoredEvent};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::session_traits::{
    AgentSession, EngineError, SessionFactory, SessionOrigin, SessionSpec, StoredSessionInfo,
    ToolInfo,
};

/// Sessions of a [`keel_core::agent::Engine`].
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

/// What the seam itself fails on, before the engine is reached.
#[derive(Debug, thiserror::Error)]
enum SeamError {
    #[error("workspace root {}: {source}", root.display())]
    Root {
        root: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("opening the session failed: {0}")]
    Join(#[source] tokio::task::JoinError),
}

fn turn_error(error: AgentError) -> EngineError {
    match error {
        AgentError::NoCredentials(message) => EngineError::no_credentials(message),
        // The provider refused the key (401/403): the same login fixes it.
        AgentError::Provider(error) if error.is_missing_credentials() => {
            EngineError::NoCredentials {
                message: error.to_string(),
                source: Some(Arc::new(error)),
            }
        }
        AgentError::Store(error) => store_error(error),
        other => EngineError::Failed(Arc::new(other)),
    }
}

fn store_error(error: StoreError) -> EngineError {
    match error {
        StoreError::NotFound(id) => EngineError::NotFound(id),
        error @ (StoreError::Locked(_) | StoreError::InvalidId(_) | StoreError::Exists(_)) => {
            EngineError::InvalidInput(Arc::new(error))
        }
        error => EngineError::Failed(Arc::new(error)),
    }
}

/// How the engine keeps a session of `origin`.
fn persistence(engine: &Engine, origin: &SessionOrigin) -> Persistence {
    match origin {
        SessionOrigin::New if engine.store().is_some() => Persistence::Create,
        SessionOrigin::New => Persistence::Off,
        SessionOrigin::Stored => Persistence::Reopen,
        SessionOrigin::Fork { from } => Persistence::Fork { from: from.clone() },
    }
}

fn open_options(engine: &Engine, spec: SessionSpec) -> SessionOptions {
    SessionOptions {
        persistence: persistence(engine, &spec.origin),
        id: Some(spec.id),
        roots: spec.roots,
        interactive: true,
        files: spec.files,
        terminals: spec.terminals,
        mcp_servers: spec.mcp_servers,
        notify: spec.notify,
        prompts_changed: spec.prompts_changed,
        ..SessionOptions::default()
    }
}

fn open_error(error: AgentError) -> EngineError {
    match error {
        error @ AgentError::Setup(_) => EngineError::InvalidInput(Arc::new(error)),
        AgentError::Config(fault) => EngineError::Config {
            data: fault
                .data
                .unwrap_or_else(|| serde_json::json!({ "details": fault.message })),
            message: fault.message,
        },
        other => turn_error(other),
    }
}

/// Every root must be an existing directory (checked before `session/new` is answered).
fn check_roots(roots: &[PathBuf]) -> Result<(), EngineError> {
    for root in roots {
        match keel_core::runtime::probe::metadata(root) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(EngineError::invalid(format!(
                    "{} is not a directory",
                    root.display()
                )));
            }
            Err(source) => {
                return Err(EngineError::InvalidInput(Arc::new(SeamError::Root {
                    root: root.clone(),
                    source,
                })));
            }
        }
    }
    Ok(())
}

impl SessionFactory for EngineSessions {
    fn models(&self) -> Vec<String> {
        self.engine.models()
    }

    fn default_model(&self) -> Option<String> {
        self.engine.default_model()
    }

    fn known_models(&self) -> Vec<String> {
        self.engine.known_models()
    }

    fn discover_models(&self) -> BoxFuture<'_, Vec<String>> {
        Box::pin(self.engine.discover_models())
    }

    fn create(
        &self,
        spec: SessionSpec,
    ) -> BoxFuture<'_, Result<Arc<dyn AgentSession>, EngineError>> {
        Box::pin(async move {
            check_roots(&spec.roots)?;
            if spec.origin != SessionOrigin::New {
                return self.open_now(spec).await;
            }
            let (opened, ready) = watch::channel(None);
            let session = Arc::new_cyclic(|this| EngineSession {
                engine: self.engine.clone(),
                this: this.clone(),
                state: Mutex::new(State::Opening {
                    mode: None,
                    model: None,
                    thinking: None,
                    closed: false,
                }),
                spec: Mutex::new(Some((spec, opened))),
                ready,
            });
            Ok(session as Arc<dyn AgentSession>)
        })
    }

    fn list(&self, cwd: Option<&std::path::Path>) -> Result<Vec<StoredSessionInfo>, EngineError> {
        let Some(store) = self.engine.store() else {
            return Ok(Vec::new());
        };
        let sessions = store.list(cwd).map_err(store_error)?;
        Ok(sessions
            .into_iter()
            .map(|session| StoredSessionInfo {
                id: session.meta.id,
                cwd: session.meta.cwd,
                additional_directories: session.meta.additional_directories,
                title: session.meta.title,
                updated_at: session.updated_at,
            })
            .collect())
    }

    fn stored(&self, id: &str) -> Option<StoredSessionInfo> {
        let store = self.engine.store()?;
        let (meta, _) = store.read(id).ok()?;
        Some(StoredSessionInfo {
            id: meta.id,
            cwd: meta.cwd,
            additional_directories: meta.additional_directories,
            title: meta.title,
            updated_at: String::new(),
        })
    }

    fn delete(&self, id: &str) -> Result<(), EngineError> {
        let Some(store) = self.engine.store() else {
            return Err(EngineError::NotFound(id.to_owned()));
        };
        store.delete(id).map_err(store_error)
    }

    fn missing_credentials(&self) -> Option<String> {
        let slot = self.engine.resolve_model(None);
        match slot.resolved {
            Err(message) if slot.missing_credentials => Some(message),
            _ => None,
        }
    }
}

impl EngineSessions {
    /// Opens a session from the store before answering (its history is needed at once, and an
    /// unknown or locked session is the request's error).
    async fn open_now(&self, spec: SessionSpec) -> Result<Arc<dyn AgentSession>, EngineError> {
        let engine = self.engine.clone();
        let options = open_options(&engine, spec);
        let session = tokio::task::spawn_blocking(move || engine.open_session(options))
            .await
            .map_err(|error| EngineError::Failed(Arc::new(SeamError::Join(error))))?
            .map_err(open_error)?;
        let (opened, ready) = watch::channel(Some(Ok(())));
        drop(opened);
        let session = Arc::new_cyclic(|this| EngineSession {
            engine: self.engine.clone(),
            this: this.clone(),
            state: Mutex::new(State::Open(Arc::new(session))),
            spec: Mutex::new(None),
            ready,
        });
        Ok(session as Arc<dyn AgentSession>)
    }
}

/// The factory of a server whose configuration did not load: `initialize` still succeeds (the
/// editor can show what is wrong), and every `session/new` fails with the configuration error
/// (file, line, fix).
#[derive(Debug)]
pub struct BrokenConfig {
    message: String,
    data: Option<serde_json::Value>,
}

impl BrokenConfig {
    pub fn new(message: impl Into<String>, data: Option<serde_json::Value>) -> Self {
        Self {
            message: message.into(),
            data,
        }
    }
}

impl SessionFactory for BrokenConfig {
    fn models(&self) -> Vec<String> {
        Vec::new()
    }

    fn create(
        &self,
        _spec: SessionSpec,
    ) -> BoxFuture<'_, Result<Arc<dyn AgentSession>, EngineError>> {
        let message = format!("Keel's configuration is broken: {}", self.message);
        tracing::error!("session/new refused: {message}");
        let data = self
            .data
            .clone()
            .unwrap_or_else(|| serde_json::json!({ "details": self.message }));
        Box::pin(async move { Err(EngineError::Config { message, data }) })
    }
}

/// How the open ended, once it has.
type Opened = Option<Result<(), EngineError>>;

/// Where an engine session stands.
enum State {
    /// Opening on a blocking thread; what the client changed meanwhile.
    Opening {
        mode: Option<Mode>,
        model: Option<ModelSlot>,
        /// The thinking budget chosen (`Some(None)`: off).
        thinking: Option<Option<u32>>,
        closed: bool,
    },
    Open(Arc<Session>),
    Failed(EngineError),
}

/// One engine session, possibly still opening.
struct EngineSession {
    engine: Arc<Engine>,
    this: Weak<EngineSession>,
    state: Mutex<State>,
    /// What to open, until [`AgentSession::start`] takes it.
    spec: Mutex<Option<(SessionSpec, watch::Sender<Opened>)>>,
    /// `Some` once the open finished (the error when it failed).
    ready: watch::Receiver<Opened>,
}

impl EngineSession {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the end of the open, applying what the client changed meanwhile.
    fn opened(&self, result: Result<Session, EngineError>) -> Result<(), EngineError> {
        let mut state = self.state();
        let State::Opening {
            mode,
            model,
            thinking,
            closed,
        } = &mut *state
        else {
            return Ok(());
        };
        match result {
            Ok(session) => {
                if let Some(mode) = mode.take() {
                    session.set_mode(mode);
                }
                if let Some(model) = model.take() {
                    session.set_model(model);
                }
                if let Some(budget) = thinking.take() {
                    session.set_thinking_budget(budget);
                }
                if *closed {
                    session.close();
                }
                *state = State::Open(Arc::new(session));
                Ok(())
            }
            Err(error) => {
                *state = State::Failed(error.clone());
                Err(error)
            }
        }
    }

    fn session(&self) -> Result<Arc<Session>, EngineError> {
        match &*self.state() {
            State::Open(session) => Ok(session.clone()),
            State::Failed(error) => Err(error.clone()),
            State::Opening { .. } => Err(EngineError::failed("the session is still opening")),
        }
    }

    /// Starts opening on a blocking thread (once; later calls do nothing).
    fn start_opening(&self) {
        let taken = self
            .spec
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let (Some((spec, opened)), Some(this)) = (taken, self.this.upgrade()) else {
            return;
        };
        let engine = self.engine.clone();
        tokio::task::spawn_blocking(move || {
            let options = open_options(&engine, spec);
            let result = engine.open_session(options).map_err(open_error);
            let outcome = this.opened(result);
            let _ = opened.send(Some(outcome));
        });
    }

    async fn wait_ready(&self) -> Result<(), EngineError> {
        self.start_opening();
        let mut ready = self.ready.clone();
        let outcome = ready
            .wait_for(Option::is_some)
            .await
            .map_err(|_| EngineError::failed("the session never finished opening"))?
            .clone();
        outcome.unwrap_or(Ok(()))
    }
}

impl AgentSession for EngineSession {
    fn run_turn(
        &self,
        prompt: Vec<UserContent>,
        host: Arc<dyn TurnHost>,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<TurnOutcome, EngineError>> {
        Box::pin(async move {
            self.wait_ready().await?;
            self.session()?
                .run_turn(prompt, host, cancel)
                .await
                .map_err(turn_error)
        })
    }

    fn start(&self) {
        self.start_opening();
    }

    fn ready(&self) -> BoxFuture<'_, Result<(), EngineError>> {
        Box::pin(self.wait_ready())
    }

    fn mode(&self) -> Mode {
        match &*self.state() {
            State::Open(session) => session.policy().mode(),
            State::Opening {
                mode: Some(mode), ..
            } => *mode,
            _ => self.engine.config().mode,
        }
    }

    fn set_mode(&self, mode: Mode) -> Result<(), EngineError> {
        match &mut *self.state() {
            State::Open(session) => session.set_mode(mode),
            State::Opening { mode: pending, .. } => *pending = Some(mode),
            State::Failed(error) => return Err(error.clone()),
        }
        Ok(())
    }

    fn model(&self) -> Option<String> {
        match &*self.state() {
            State::Open(session) => Some(session.model_name()),
            State::Opening {
                model: Some(slot), ..
            } => Some(slot.name.clone()),
            _ => self.engine.default_model(),
        }
    }

    fn set_model(&self, model: &str) -> Result<(), EngineError> {
        let slot = self.engine.resolve_model(Some(model));
        if let Err(message) = &slot.resolved {
            return Err(EngineError::invalid(message.clone()));
        }
        match &mut *self.state() {
            State::Open(session) => session.set_model(slot),
            State::Opening { model: pending, .. } => *pending = Some(slot),
            State::Failed(error) => return Err(error.clone()),
        }
        Ok(())
    }

    fn thinking_budget(&self) -> Option<Option<u32>> {
        Some(match &*self.state() {
            State::Open(session) => session.thinking_budget(),
            State::Opening {
                thinking: Some(budget),
                ..
            } => *budget,
            _ => self.engine.config().thinking_budget,
        })
    }

    fn set_thinking_budget(&self, budget: Option<u32>) -> Result<(), EngineError> {
        match &mut *self.state() {
            State::Open(session) => session.set_thinking_budget(budget),
            State::Opening {
                thinking: pending, ..
            } => *pending = Some(budget),
            State::Failed(error) => return Err(error.clone()),
        }
        Ok(())
    }

    fn tools(&self) -> Vec<ToolInfo> {
        let Ok(session) = self.session() else {
            return Vec::new();
        };
        session
            .tools()
            .iter()
            .map(|tool| tool.spec())
            .map(|spec| ToolInfo {
                id: spec.id.clone(),
                origin: spec.origin.to_string(),
                summary: spec.description.lines().next().unwrap_or("").to_owned(),
            })
            .collect()
    }

    fn skills(&self) -> Vec<(String, String)> {
        let Ok(session) = self.session() else {
            return Vec::new();
        };
        session
            .discover_skills()
            .into_iter()
            .map(|skill| (skill.name, skill.description))
            .collect()
    }

    fn mcp_prompt(
        &self,
        command: String,
        arguments: String,
    ) -> BoxFuture<'_, Result<String, EngineError>> {
        Box::pin(async move {
            self.wait_ready().await?;
            self.session()?
                .mcp()
                .get_prompt(&command, &arguments)
                .await
                .map_err(|error| EngineError::InvalidInput(Arc::new(error)))
        })
    }

    fn mcp_status(&self) -> String {
        match self.session() {
            Ok(session) => session.mcp().render_status(),
            Err(error) => error.to_string(),
        }
    }

    fn jobs(&self) -> Vec<keel_core::runtime::jobs::JobInfo> {
        self.session()
            .map(|session| session.state().jobs().list())
            .unwrap_or_default()
    }

    fn permissions(&self) -> String {
        match self.session() {
            Ok(session) => render_rules(session.policy()),
            Err(error) => error.to_string(),
        }
    }

    fn take_history(&self) -> Vec<StoredEvent> {
        self.session()
            .map(|session| session.take_loaded())
            .unwrap_or_default()
    }

    fn title(&self) -> Option<String> {
        self.session().ok()?.log()?.meta().title
    }

    fn clear(&self) -> BoxFuture<'_, Result<usize, EngineError>> {
        Box::pin(async move {
            self.wait_ready().await?;
            Ok(self.session()?.clear().await)
        })
    }

    fn compact(
        &self,
        focus: Option<String>,
        host: Arc<dyn TurnHost>,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<Option<(u64, u64)>, EngineError>> {
        Box::pin(async move {
            self.wait_ready().await?;
            let compaction = self
                .session()?
                .compact(focus.as_deref(), host, cancel)
                .await
                .map_err(turn_error)?;
            Ok(compaction.map(|c| (c.before, c.after)))
        })
    }

    fn close(&self) {
        match &mut *self.state() {
            State::Open(session) => session.close(),
            State::Opening { closed, .. } => *closed = true,
            State::Failed(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use keel_core::agent::SetupError;

    use super::*;
    use crate::server::ServerError;

    #[test]
    fn engine_errors_keep_the_engines_error_and_its_text() {
        let failed = turn_error(AgentError::Store(StoreError::Io {
            path: PathBuf::from("/data/sessions/s1/events.jsonl"),
            source: std::io::Error::other("disk full"),
        }));
        assert!(matches!(failed, EngineError::Failed(_)), "{failed:?}");
        assert_eq!(
            failed.to_string(),
            "/data/sessions/s1/events.jsonl: disk full"
        );
        // The OS error is still there behind the message.
        let source = std::error::Error::source(&failed).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("disk full"));
        let wire = ServerError::from(failed).to_rpc();
        assert_eq!(wire.message, "/data/sessions/s1/events.jsonl: disk full");

        let refused = open_error(AgentError::Setup(SetupError::Refused(
            "session `s1` belongs to another workspace".into(),
        )));
        assert!(
            matches!(refused, EngineError::InvalidInput(_)),
            "{refused:?}"
        );
        assert_eq!(
            refused.to_string(),
            "session `s1` belongs to another workspace"
        );
        let locked = store_error(StoreError::Locked("s1".into()));
        assert!(matches!(locked, EngineError::InvalidInput(_)), "{locked:?}");
        assert!(locked.to_string().contains("open in another Keel process"));
    }
}
