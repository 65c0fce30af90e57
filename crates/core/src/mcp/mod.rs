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

mod tool;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rmcp::ServiceExt as _;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::tool::DynTool;

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
}

/// Says something to the user outside a turn (a server failed).
pub type Notify = Arc<dyn Fn(String) + Send + Sync>;

struct Slot {
    config: McpServerConfig,
    state: ServerState,
    tools: Vec<Arc<dyn DynTool>>,
    skipped: Vec<String>,
}

struct Inner {
    slots: Mutex<Vec<Slot>>,
    /// Ids no server may take (the bundled, locked tools).
    locked: Vec<String>,
    shutdown: CancellationToken,
    notify: Mutex<Option<Notify>>,
    cwd: PathBuf,
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

impl McpHub {
    /// A hub for `servers` (not started). `locked` are the ids servers may not take; stdio
    /// servers start in `cwd` (the workspace).
    pub fn new(servers: Vec<McpServerConfig>, locked: Vec<String>, cwd: PathBuf) -> Self {
        let mut slots: Vec<Slot> = Vec::new();
        for config in servers {
            // A later source of the same name replaces an earlier one (editor over config).
            slots.retain(|slot| slot.config.name != config.name);
            slots.push(Slot {
                config,
                state: ServerState::Starting,
                tools: Vec::new(),
                skipped: Vec::new(),
            });
        }
        Self {
            inner: Arc::new(Inner {
                slots: Mutex::new(slots),
                locked,
                shutdown: CancellationToken::new(),
                notify: Mutex::new(None),
                cwd,
            }),
        }
    }

    /// Whether the session has any server.
    pub fn is_empty(&self) -> bool {
        lock(&self.inner.slots).is_empty()
    }

    /// Where failures are said from now on.
    pub fn set_notify(&self, notify: Notify) {
        *lock(&self.inner.notify) = Some(notify);
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
            out.push_str(&format!(
                "- `{}` ({}): {}\n",
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
    if let Some(slot) = lock(&inner.slots)
        .iter_mut()
        .find(|slot| slot.config.name == name)
    {
        if !matches!(state, ServerState::Ready { .. }) {
            slot.tools.clear();
        }
        slot.state = state;
    }
}

fn notify(inner: &Inner, text: String) {
    tracing::warn!("{text}");
    let notify = lock(&inner.notify).clone();
    if let Some(notify) = notify {
        notify(text);
    }
}

/// A connected server: the client service and, for stdio, its process group.
struct Connection {
    service: rmcp::service::RunningService<rmcp::RoleClient, ()>,
    _group: Option<crate::runtime::mcp::GroupGuard>,
}

async fn connect(config: &McpServerConfig, cwd: &std::path::Path) -> Result<Connection, String> {
    match &config.transport {
        McpTransport::Stdio { command, args, env } => {
            let (transport, group) = crate::runtime::mcp::spawn_mcp_stdio(command, args, env, cwd)
                .map_err(|e| format!("cannot start `{command}`: {e}"))?;
            let service =
                ().serve(transport)
                    .await
                    .map_err(|e| format!("the handshake failed: {e}"))?;
            Ok(Connection {
                service,
                _group: Some(group),
            })
        }
        McpTransport::Http { url, headers } => {
            let transport = crate::runtime::mcp::connect_mcp_http(url, headers)?;
            let service = ()
                .serve(transport)
                .await
                .map_err(|e| format!("the handshake with {url} failed: {e}"))?;
            Ok(Connection {
                service,
                _group: None,
            })
        }
    }
}

/// Connects, lists the tools, waits for the server to go away, restarts with backoff.
async fn run_server(hub: std::sync::Weak<Inner>, name: String) {
    let mut attempt = 0u32;
    loop {
        let Some(inner) = hub.upgrade() else { return };
        let Some(config) = lock(&inner.slots)
            .iter()
            .find(|slot| slot.config.name == name)
            .map(|slot| slot.config.clone())
        else {
            return;
        };
        let cwd = inner.cwd.clone();
        set_state(&inner, &name, ServerState::Starting);
        drop(inner);
        let started = tokio::time::timeout(START_TIMEOUT, async {
            let connection = connect(&config, &cwd).await?;
            let tools = connection
                .service
                .peer()
                .list_all_tools()
                .await
                .map_err(|e| format!("listing its tools failed: {e}"))?;
            Ok::<_, String>((connection, tools))
        })
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "it did not start within {}s",
                START_TIMEOUT.as_secs()
            ))
        });
        let Some(inner) = hub.upgrade() else { return };
        let (connection, listed) = match started {
            Ok(started) => started,
            Err(reason) => {
                set_state(
                    &inner,
                    &name,
                    ServerState::Failed {
                        reason: reason.clone(),
                    },
                );
                notify(
                    &inner,
                    format!(
                        "The MCP server `{name}` failed to start: {reason}. Its tools are not available; `/mcp` shows every server's state."
                    ),
                );
                return;
            }
        };
        let peer = connection.service.peer().clone();
        let mut tools: Vec<Arc<dyn DynTool>> = Vec::new();
        let mut skipped = Vec::new();
        for listed in &listed {
            match McpTool::wrap(&name, listed, peer.clone(), config.timeout) {
                Ok(tool) => {
                    let id = tool.spec().id.clone();
                    if inner.locked.contains(&id) || tools.iter().any(|t| t.spec().id == id) {
                        skipped.push(format!("`{}` (the id `{id}` is taken)", listed.name));
                    } else {
                        tools.push(tool);
                    }
                }
                Err(error) => skipped.push(error),
            }
        }
        if let Some(slot) = lock(&inner.slots)
            .iter_mut()
            .find(|slot| slot.config.name == name)
        {
            slot.state = ServerState::Ready { tools: tools.len() };
            slot.tools = tools;
            slot.skipped = skipped;
        }
        tracing::info!(server = %name, tools = listed.len(), "MCP server ready");
        drop(inner);
        let quit = connection.service.waiting().await;
        // `_group` went with `connection`: the server's whole process group is gone.
        let Some(inner) = hub.upgrade() else { return };
        if inner.shutdown.is_cancelled() {
            return;
        }
        let why = match quit {
            Ok(reason) => format!("{reason:?}"),
            Err(error) => error.to_string(),
        };
        if attempt >= RESTARTS {
            let reason = format!("it stopped ({why}) and was restarted {RESTARTS} times");
            set_state(&inner, &name, ServerState::Failed { reason });
            notify(
                &inner,
                format!(
                    "The MCP server `{name}` stopped again and is not restarted any more; its tools are gone for this session."
                ),
            );
            return;
        }
        let delay = BACKOFF * 2u32.pow(attempt);
        attempt += 1;
        set_state(
            &inner,
            &name,
            ServerState::Failed {
                reason: format!("it stopped ({why}); restarting"),
            },
        );
        notify(
            &inner,
            format!(
                "The MCP server `{name}` stopped; restarting it in {} ms (attempt {attempt} of {RESTARTS}).",
                delay.as_millis()
            ),
        );
        drop(inner);
        tokio::time::sleep(delay).await;
    }
}
