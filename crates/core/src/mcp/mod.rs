//! MCP servers of a session: their configuration, their background connections, their tools.
//!
//! - [`McpServerConfig`]: one server (stdio: a program, its arguments and environment;
//!   http: a streamable-HTTP URL and headers), from the editor's `session/new` or the
//!   configuration files (`[mcp_servers.NAME]`).
//! - [`McpHub`]: the session's servers. [`McpHub::start`] connects each one on its own tokio task
//!   and returns at once: a slow, crashed or misconfigured server never delays or fails the
//!   session. Each server's [`ServerState`] (starting, ready with N tools, failed with the
//!   reason) is kept for `/mcp`; a failure is also said once through the hub's [`Notify`]. A
//!   server that exits is restarted with backoff ([`RESTARTS`] times). [`McpHub::shutdown`] (and
//!   dropping the last handle) ends every connection and kills every server's process group.
//! - [`McpTool`]: a server's tool under the bundled tools' contract (flat id
//!   `mcp__SERVER__TOOL`, origin `mcp:SERVER`, schema-validated arguments, per-call timeout
//!   and cancellation, capped output, kind from the annotations).

mod server;
mod tool;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::tool::DynTool;

use server::run_server;
pub use tool::{McpTool, OUTPUT_BYTES, kind_of, render_content, sanitize, tool_id};

/// How long a server gets to start and list its tools.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// A call's time limit unless the server's configuration says otherwise.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// How often a server that exited is started again.
pub const RESTARTS: u32 = 3;
/// The first restart's delay; each next one doubles it.
pub const BACKOFF: Duration = Duration::from_millis(500);

/// How Keel reaches a server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum McpTransport {
    /// A child process speaking MCP on its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
    /// A streamable-HTTP endpoint.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// Where a server was configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpSource {
    /// The editor's `session/new`.
    Client,
    /// The user's configuration file.
    User,
    /// The project's configuration file (only once the project is trusted).
    Project,
}

impl McpSource {
    pub fn as_str(self) -> &'static str {
        match self {
            McpSource::Client => "editor",
            McpSource::User => "user config",
            McpSource::Project => "project config",
        }
    }
}

/// One MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    pub name: String,
    pub transport: McpTransport,
    pub source: McpSource,
    /// A call's time limit.
    pub timeout: Duration,
    /// What a stdio server may reach in the sandbox besides its profile's defaults (its
    /// table's `read`, `writable`, `network`; an editor's server gets the table of its name).
    pub access: crate::runtime::sandbox::server::ServerAccess,
}

/// Where a server stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    Starting,
    Ready { tools: usize },
    Failed { reason: String },
    Stopped,
}

impl std::fmt::Display for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerState::Starting => f.write_str("starting"),
            ServerState::Ready { tools: 1 } => f.write_str("ready, 1 tool"),
            ServerState::Ready { tools } => write!(f, "ready, {tools} tools"),
            ServerState::Failed { reason } => write!(f, "failed: {reason}"),
            ServerState::Stopped => f.write_str("stopped"),
        }
    }
}

/// A server as `/mcp` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    pub name: String,
    pub source: McpSource,
    pub state: ServerState,
    /// The ids of its tools (when ready).
    pub tools: Vec<String>,
    /// Ids of its tools left out because a bundled tool holds them, or that failed to load.
    pub skipped: Vec<String>,
    /// How its process is confined (`namespaces`, `landlock`, `unconfined: why`), once it
    /// started; `None` for an HTTP server or one not started yet.
    pub sandbox: Option<String>,
}

/// Says something to the user outside a turn (a server failed).
pub type Notify = Arc<dyn Fn(String) + Send + Sync>;

/// Called with every ready server's prompts whenever a server becomes ready or goes away (the
/// front-end re-advertises its slash commands).
pub type PromptsChanged = Arc<dyn Fn(Vec<McpPrompt>) + Send + Sync>;

/// How long fetching a prompt may take.
pub const PROMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// An MCP prompt, offered as the slash command `/SERVER:PROMPT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPrompt {
    pub server: String,
    pub name: String,
    pub description: String,
    /// Argument names, and whether each is required.
    pub arguments: Vec<(String, bool)>,
}

impl McpPrompt {
    /// The slash command's name (`server:prompt`).
    pub fn command(&self) -> String {
        format!("{}:{}", self.server, self.name)
    }
}

struct Slot {
    config: McpServerConfig,
    state: ServerState,
    tools: Vec<Arc<dyn DynTool>>,
    skipped: Vec<String>,
    prompts: Vec<McpPrompt>,
    peer: Option<rmcp::service::Peer<rmcp::RoleClient>>,
    sandbox: Option<String>,
}

struct Inner {
    slots: Mutex<Vec<Slot>>,
    /// Ids no server may take (the bundled, locked tools).
    locked: Vec<String>,
    /// Ids the configuration disables (`[tools.ID] enabled = false`): never offered, never run.
    disabled: Mutex<Vec<String>>,
    shutdown: CancellationToken,
    notify: Mutex<Option<Notify>>,
    prompts_changed: Mutex<Option<PromptsChanged>>,
    /// Where the stdio servers a trusted project did not configure start: an empty directory of the session's.
    neutral: PathBuf,
    /// The session's runtime: stdio servers start through its sandbox
    /// ([`crate::runtime::Runtime::server_invocation`]). Without one they are not started.
    runtime: Mutex<Option<crate::runtime::Runtime>>,
    /// Where each stdio server's own package caches are kept across sessions (Keel's cache
    /// directory); `None`: the session's scratch directory.
    caches: Mutex<Option<PathBuf>>,
    /// Woken whenever a server's state changes ([`McpHub::settled`]).
    changed: tokio::sync::Notify,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The MCP servers of one session. Cheap to clone.
#[derive(Clone)]
pub struct McpHub {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub").finish_non_exhaustive()
    }
}

impl Default for McpHub {
    fn default() -> Self {
        Self::new(Vec::new(), Vec::new(), PathBuf::from("/"))
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Why an MCP prompt (`/server:prompt`) gave no text; said to the user as is.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("no ready MCP server offers the prompt `/{0}`")]
    NotOffered(String),
    #[error("arguments: {0}")]
    Arguments(#[from] shell_words::ParseError),
    #[error("`{0}` is not `name=value`")]
    NotNameValue(String),
    #[error("`/{command}` needs {needed}")]
    Missing { command: String, needed: String },
    #[error("the server did not answer within {0}s")]
    Timeout(u64),
    #[error("the server failed: {0}")]
    Server(#[from] rmcp::ServiceError),
    #[error("the server asked for input; Keel does not support that yet")]
    AsksInput,
    #[error("the prompt `/{0}` is empty")]
    Empty(String),
}

impl McpHub {
    /// A hub for `servers` (not started). `locked` are the ids servers may not take; a
    /// trusted project's stdio servers start in the workspace, the others in `neutral` (an
    /// empty directory of the session's, created when needed).
    pub fn new(servers: Vec<McpServerConfig>, locked: Vec<String>, neutral: PathBuf) -> Self {
        let mut slots: Vec<Slot> = Vec::new();
        for config in servers {
            // A later source of the same name replaces an earlier one (editor over config).
            slots.retain(|slot| slot.config.name != config.name);
            slots.push(Slot {
                config,
                state: ServerState::Starting,
                tools: Vec::new(),
                skipped: Vec::new(),
                prompts: Vec::new(),
                peer: None,
                sandbox: None,
            });
        }
        Self {
            inner: Arc::new(Inner {
                slots: Mutex::new(slots),
                locked,
                disabled: Mutex::new(Vec::new()),
                shutdown: CancellationToken::new(),
                notify: Mutex::new(None),
                prompts_changed: Mutex::new(None),
                neutral,
                runtime: Mutex::new(None),
                caches: Mutex::new(None),
                changed: tokio::sync::Notify::new(),
            }),
        }
    }

    /// Whether the session has any server.
    pub fn is_empty(&self) -> bool {
        lock(&self.inner.slots).is_empty()
    }

    /// The tool ids the configuration disables; set before [`McpHub::start`]. A server's tool
    /// with one of them is left out (`/mcp` says so), like a locked id.
    pub fn set_disabled(&self, ids: Vec<String>) {
        *lock(&self.inner.disabled) = ids;
    }

    /// The session's runtime, whose sandbox stdio servers start in; set before
    /// [`McpHub::start`].
    pub fn set_runtime(&self, runtime: crate::runtime::Runtime) {
        *lock(&self.inner.runtime) = Some(runtime);
    }

    /// Where stdio servers keep their own package caches (`npm_config_cache`, `UV_CACHE_DIR`),
    /// across sessions; set before [`McpHub::start`].
    pub fn set_package_caches(&self, dir: Option<PathBuf>) {
        *lock(&self.inner.caches) = dir;
    }

    /// Where failures are said from now on.
    pub fn set_notify(&self, notify: Notify) {
        *lock(&self.inner.notify) = Some(notify);
    }

    /// Where prompt changes are reported from now on.
    pub fn set_prompts_changed(&self, changed: PromptsChanged) {
        *lock(&self.inner.prompts_changed) = Some(changed);
    }

    /// The prompts of the ready servers.
    pub fn prompts(&self) -> Vec<McpPrompt> {
        prompts_of(&self.inner)
    }

    /// The text of the prompt `/server:prompt`, with `arguments` as the user typed them:
    /// `key=value` words, or (for a prompt with arguments and no `=` in the text) the whole text
    /// as its first argument.
    pub async fn get_prompt(&self, command: &str, arguments: &str) -> Result<String, PromptError> {
        let found = lock(&self.inner.slots).iter().find_map(|slot| {
            let prompt = slot.prompts.iter().find(|p| p.command() == command)?;
            Some((prompt.clone(), slot.peer.clone()?))
        });
        let Some((prompt, peer)) = found else {
            return Err(PromptError::NotOffered(command.to_owned()));
        };
        let mut values = serde_json::Map::new();
        let words = shell_words::split(arguments)?;
        if words.iter().any(|w| w.contains('=')) {
            for word in words {
                let Some((key, value)) = word.split_once('=') else {
                    return Err(PromptError::NotNameValue(word));
                };
                values.insert(key.to_owned(), serde_json::Value::String(value.to_owned()));
            }
        } else if let Some((first, _)) = prompt.arguments.first()
            && !arguments.trim().is_empty()
        {
            values.insert(
                first.clone(),
                serde_json::Value::String(arguments.trim().to_owned()),
            );
        }
        let missing: Vec<&str> = prompt
            .arguments
            .iter()
            .filter(|(name, required)| *required && !values.contains_key(name))
            .map(|(name, _)| name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(PromptError::Missing {
                command: command.to_owned(),
                needed: missing
                    .iter()
                    .map(|name| format!("`{name}=...`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let params =
            rmcp::model::GetPromptRequestParams::new(prompt.name.clone()).with_arguments(values);
        let response = tokio::time::timeout(PROMPT_TIMEOUT, peer.get_prompt_once(params))
            .await
            .map_err(|_| PromptError::Timeout(PROMPT_TIMEOUT.as_secs()))??;
        let rmcp::model::GetPromptResponse::Complete(result) = response else {
            return Err(PromptError::AsksInput);
        };
        let value = serde_json::to_value(&result).unwrap_or_default();
        let texts: Vec<String> = value["messages"]
            .as_array()
            .map(|messages| {
                messages
                    .iter()
                    .map(|message| match message["content"]["text"].as_str() {
                        Some(text) => text.to_owned(),
                        None => message["content"].to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        if texts.is_empty() {
            return Err(PromptError::Empty(command.to_owned()));
        }
        Ok(texts.join("\n\n"))
    }

    /// Connects every server in the background (a task each); returns at once. Needs a tokio
    /// runtime; without one the servers are marked failed.
    pub fn start(&self) {
        let names: Vec<String> = lock(&self.inner.slots)
            .iter()
            .map(|slot| slot.config.name.clone())
            .collect();
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            for name in names {
                self.set_state(
                    &name,
                    ServerState::Failed {
                        reason: "no async runtime to run it on".into(),
                    },
                );
            }
            return;
        };
        for name in names {
            let hub = Arc::downgrade(&self.inner);
            let shutdown = self.inner.shutdown.clone();
            handle.spawn(async move {
                tokio::select! {
                    () = shutdown.cancelled() => {}
                    () = run_server(hub, name) => {}
                }
            });
        }
    }

    /// Waits until no server is starting any more (each is ready or failed; a start takes at
    /// most [`START_TIMEOUT`]). A headless run waits for this before its first request, so the
    /// model is offered the servers' tools.
    pub async fn settled(&self) {
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let starting = lock(&self.inner.slots)
                .iter()
                .any(|slot| slot.state == ServerState::Starting);
            if !starting {
                return;
            }
            changed.await;
        }
    }

    /// Ends every connection and kills every server.
    pub fn shutdown(&self) {
        self.inner.shutdown.cancel();
        for slot in lock(&self.inner.slots).iter_mut() {
            slot.tools.clear();
            slot.state = ServerState::Stopped;
        }
    }

    /// The tools of the ready servers, in server order.
    pub fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        lock(&self.inner.slots)
            .iter()
            .flat_map(|slot| slot.tools.iter().cloned())
            .collect()
    }

    /// A ready server's tool by id.
    pub fn get(&self, id: &str) -> Option<Arc<dyn DynTool>> {
        lock(&self.inner.slots)
            .iter()
            .flat_map(|slot| slot.tools.iter())
            .find(|tool| tool.spec().id == id)
            .cloned()
    }

    /// Every server's state.
    pub fn status(&self) -> Vec<ServerStatus> {
        lock(&self.inner.slots)
            .iter()
            .map(|slot| ServerStatus {
                name: slot.config.name.clone(),
                source: slot.config.source,
                state: slot.state.clone(),
                tools: slot.tools.iter().map(|t| t.spec().id.clone()).collect(),
                skipped: slot.skipped.clone(),
                sandbox: slot.sandbox.clone(),
            })
            .collect()
    }

    /// The `/mcp` answer.
    pub fn render_status(&self) -> String {
        let status = self.status();
        if status.is_empty() {
            return "No MCP servers are configured for this session.".into();
        }
        let mut out = String::from("MCP servers:\n\n");
        for server in status {
            let sandbox = match (&server.state, &server.sandbox) {
                (ServerState::Ready { .. }, Some(sandbox)) => format!(" (sandbox: {sandbox})"),
                _ => String::new(),
            };
            out.push_str(&format!(
                "- `{}` ({}): {}{sandbox}\n",
                server.name,
                server.source.as_str(),
                server.state
            ));
            for id in &server.tools {
                out.push_str(&format!("  - `{id}`\n"));
            }
            for skipped in &server.skipped {
                out.push_str(&format!("  - left out: {skipped}\n"));
            }
        }
        out
    }

    fn set_state(&self, name: &str, state: ServerState) {
        set_state(&self.inner, name, state);
    }
}

fn set_state(inner: &Inner, name: &str, state: ServerState) {
    let mut had_prompts = false;
    if let Some(slot) = lock(&inner.slots)
        .iter_mut()
        .find(|slot| slot.config.name == name)
    {
        if !matches!(state, ServerState::Ready { .. }) {
            slot.tools.clear();
            had_prompts = !slot.prompts.is_empty();
            slot.prompts.clear();
            slot.peer = None;
        }
        slot.state = state;
    }
    inner.changed.notify_waiters();
    if had_prompts {
        prompts_changed(inner);
    }
}

fn prompts_of(inner: &Inner) -> Vec<McpPrompt> {
    lock(&inner.slots)
        .iter()
        .flat_map(|slot| slot.prompts.iter().cloned())
        .collect()
}

fn prompts_changed(inner: &Inner) {
    let changed = lock(&inner.prompts_changed).clone();
    if let Some(changed) = changed {
        changed(prompts_of(inner));
    }
}

/// A server's prompts, when it offers any (a failure only costs the prompts).
async fn list_prompts(
    name: &str,
    service: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
) -> Vec<McpPrompt> {
    let offers = service
        .peer()
        .peer_info()
        .is_some_and(|info| info.capabilities.prompts.is_some());
    if !offers {
        return Vec::new();
    }
    match tokio::time::timeout(PROMPT_TIMEOUT, service.peer().list_all_prompts()).await {
        Ok(Ok(prompts)) => prompts
            .into_iter()
            .map(|prompt| McpPrompt {
                server: name.to_owned(),
                name: prompt.name,
                description: prompt.description.unwrap_or_default(),
                arguments: prompt
                    .arguments
                    .unwrap_or_default()
                    .into_iter()
                    .map(|a| (a.name, a.required.unwrap_or(false)))
                    .collect(),
            })
            .collect(),
        Ok(Err(error)) => {
            tracing::warn!(server = name, %error, "listing the MCP server's prompts failed");
            Vec::new()
        }
        Err(_) => {
            tracing::warn!(server = name, "listing the MCP server's prompts timed out");
            Vec::new()
        }
    }
}

fn notify(inner: &Inner, text: String) {
    tracing::warn!("{text}");
    let notify = lock(&inner.notify).clone();
    if let Some(notify) = notify {
        notify(text);
    }
}
