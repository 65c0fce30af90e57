//! One server's life: connecting (a stdio server through the sandbox helper, or HTTP),
//! listing its tools, keeping its stderr's last lines for a failure's message, and restarting
//! it with backoff when it exits.

use std::path::Path;
use std::sync::{Arc, Mutex};

use rmcp::ServiceExt as _;

use super::{
    BACKOFF, Inner, McpServerConfig, McpSource, McpTool, McpTransport, RESTARTS, START_TIMEOUT,
    ServerState, list_prompts, lock, notify, prompts_changed, set_state,
};
use crate::tool::DynTool;

/// What a failed handshake means, in words (rmcp's "connection closed: initialize response"
/// is the server exiting before it answered).
fn handshake_error(error: &rmcp::service::ClientInitializeError) -> String {
    let text = error.to_string();
    if text.contains("connection closed") {
        "the server exited (or closed its output) before it answered the MCP handshake".to_owned()
    } else {
        text
    }
}

/// A connected server: the client service and, for stdio, its process group.
struct Connection {
    service: rmcp::service::RunningService<rmcp::RoleClient, ()>,
    _group: Option<crate::runtime::mcp::GroupGuard>,
    /// The last lines of a stdio server's stderr (empty for HTTP).
    stderr: StderrTail,
    /// How a stdio server is confined (`/mcp` shows it).
    sandbox: Option<String>,
}

/// The last lines a server wrote to stderr, kept for a failure's message.
#[derive(Debug, Default, Clone)]
struct StderrTail {
    lines: Arc<Mutex<std::collections::VecDeque<String>>>,
}

/// Lines of a server's stderr kept.
const STDERR_LINES: usize = 12;
/// Characters kept of one stderr line.
const STDERR_LINE_CHARS: usize = 300;
/// How long the sandbox helper may take to say how it confined a server that has answered.
const STATUS_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl StderrTail {
    /// Reads `stderr` to its end on a task of its own, keeping the last [`STDERR_LINES`]
    /// lines (each cut to [`STDERR_LINE_CHARS`]): a bounded ring, whatever the server writes.
    fn follow(&self, stderr: tokio::process::ChildStderr) {
        use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _};
        let lines = self.lines.clone();
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stderr);
            let mut line = Vec::new();
            loop {
                line.clear();
                // At most a few kilobytes a line are held while reading it.
                match (&mut reader)
                    .take(64 * 1024)
                    .read_until(b'\n', &mut line)
                    .await
                {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end();
                if text.is_empty() {
                    continue;
                }
                let mut kept: String = text.chars().take(STDERR_LINE_CHARS).collect();
                if text.chars().count() > STDERR_LINE_CHARS {
                    kept.push('…');
                }
                let mut lines = lock(&lines);
                if lines.len() == STDERR_LINES {
                    lines.pop_front();
                }
                lines.push_back(kept);
            }
        });
    }

    /// `reason`, followed by the server's last stderr lines when it wrote any. Waits a moment
    /// for lines still in the pipe (a server that just died has usually written them).
    async fn explain(&self, reason: String) -> String {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let lines = lock(&self.lines);
        if lines.is_empty() {
            return reason;
        }
        let shown: Vec<&str> = lines.iter().map(String::as_str).collect();
        format!(
            "{reason}\nIts last lines on stderr:\n{}",
            shown
                .iter()
                .map(|line| format!("    {line}"))
                .collect::<Vec<_>>()
                .join("\n")
        )
    }
}

/// `tail` receives a stdio server's stderr as soon as it runs (so a start that times out can
/// still show it).
// String error: the reason shown in the server's state, with its stderr.
async fn connect(
    config: &McpServerConfig,
    tail: &StderrTail,
    neutral: &std::path::Path,
    caches: Option<&std::path::Path>,
    runtime: Option<&crate::runtime::Runtime>,
) -> Result<Connection, String> {
    match &config.transport {
        McpTransport::Stdio { command, args, env } => {
            use crate::runtime::sandbox::server::{ServerLaunch, ServerLaunchError};
            let Some(runtime) = runtime else {
                return Err("the session has no runtime to start it in".to_owned());
            };
            // Like a command: through the sandbox helper, from an empty directory of the
            // session's unless a trusted project configured it (`runtime::sandbox::server`).
            let launch = ServerLaunch {
                name: &config.name,
                command,
                args,
                env,
                project: config.source == McpSource::Project,
                access: &config.access,
                neutral,
                caches,
            };
            let invocation = runtime
                .server_invocation(&launch)
                .map_err(|error| match error {
                    ServerLaunchError::NotFound(text) => text,
                    other => other.to_string(),
                })?;
            let (transport, group, stderr) = crate::runtime::mcp::spawn_mcp_stdio(&invocation)
                .map_err(|e| format!("cannot start `{command}`: {e}"))?;
            if let Some(stderr) = stderr {
                tail.follow(stderr);
            }
            let served = ().serve(transport).await;
            // The helper says how it confined the server once the server has started (the
            // fallback's reaper, right after its spawn: maybe after the handshake).
            if let (Ok(_), Some(check)) = (&served, &invocation.check) {
                check.status_written(STATUS_WAIT, || false).await;
            }
            let confinement = invocation.check.as_ref().map_or_else(
                || crate::runtime::sandbox::Confinement::Unconfined {
                    reason: invocation.unconfined.clone().unwrap_or_default(),
                },
                crate::runtime::sandbox::ConfinementCheck::finish,
            );
            let service = match served {
                Ok(service) => service,
                Err(error) => {
                    let mut reason = format!("the handshake failed: {}", handshake_error(&error));
                    if let crate::runtime::sandbox::Confinement::Confined { mechanism, .. } =
                        &confinement
                    {
                        reason.push_str(&format!(
                            ". It ran in the sandbox ({mechanism}), which shows a server the \
                             workspace read-only and hides the home directory but for a few \
                             caches; `read` and `writable` in its `[mcp_servers.{}]` table \
                             widen that (docs/sandbox.md, \"MCP servers\")",
                            config.name
                        ));
                    }
                    return Err(tail.explain(reason).await);
                }
            };
            let sandbox = match confinement {
                crate::runtime::sandbox::Confinement::Confined { mechanism, .. } => mechanism,
                crate::runtime::sandbox::Confinement::Unconfined { reason } => {
                    tracing::warn!(server = %config.name, %reason, "MCP server runs unconfined");
                    format!("unconfined, {reason}")
                }
            };
            Ok(Connection {
                service,
                _group: Some(group),
                stderr: tail.clone(),
                sandbox: Some(sandbox),
            })
        }
        McpTransport::Http { url, headers } => {
            let transport = crate::runtime::mcp::connect_mcp_http(url, headers)
                .map_err(|error| error.to_string())?;
            let service = ()
                .serve(transport)
                .await
                .map_err(|e| format!("the handshake with {url} failed: {e}"))?;
            Ok(Connection {
                service,
                _group: None,
                stderr: StderrTail::default(),
                sandbox: None,
            })
        }
    }
}

/// Connects, lists the tools, waits for the server to go away, restarts with backoff.
pub(super) async fn run_server(hub: std::sync::Weak<Inner>, name: String) {
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
        let neutral = inner.neutral.clone();
        let runtime = lock(&inner.runtime).clone();
        let caches = lock(&inner.caches).clone();
        set_state(&inner, &name, ServerState::Starting);
        drop(inner);
        let started = start(&config, &neutral, caches.as_deref(), runtime.as_ref()).await;
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
        let prompts = list_prompts(&name, &connection.service).await;
        let Some(inner) = hub.upgrade() else { return };
        let (tools, skipped) = wrap_tools(&inner, &config, &listed, &peer);
        if let Some(slot) = lock(&inner.slots)
            .iter_mut()
            .find(|slot| slot.config.name == name)
        {
            slot.state = ServerState::Ready { tools: tools.len() };
            slot.tools = tools;
            slot.skipped = skipped;
            slot.prompts = prompts;
            slot.peer = Some(peer.clone());
            slot.sandbox = connection.sandbox.clone();
        }
        inner.changed.notify_waiters();
        prompts_changed(&inner);
        tracing::info!(server = %name, tools = listed.len(), "MCP server ready");
        drop(inner);
        let stderr = connection.stderr.clone();
        let quit = connection.service.waiting().await;
        // `_group` went with `connection`: the server's whole process group is gone.
        let Some(inner) = hub.upgrade() else { return };
        if inner.shutdown.is_cancelled() {
            return;
        }
        let why = why_it_quit(quit);
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
        let said = stderr
            .explain(format!(
                "The MCP server `{name}` stopped ({why}); restarting it in {} ms (attempt {attempt} of {RESTARTS}).",
                delay.as_millis()
            ))
            .await;
        notify(&inner, said);
        drop(inner);
        tokio::time::sleep(delay).await;
    }
}

/// Connects and lists the server's tools, within [`START_TIMEOUT`]; a server still busy
/// (downloading, waiting on something) when the time is up may have said why on stderr.
// String error: the reason shown in the server's state, with its stderr.
async fn start(
    config: &McpServerConfig,
    neutral: &Path,
    caches: Option<&Path>,
    runtime: Option<&crate::runtime::Runtime>,
) -> Result<(Connection, Vec<rmcp::model::Tool>), String> {
    let tail = StderrTail::default();
    let started = tokio::time::timeout(START_TIMEOUT, async {
        let connection = connect(config, &tail, neutral, caches, runtime).await?;
        match connection.service.peer().list_all_tools().await {
            Ok(tools) => Ok((connection, tools)),
            Err(error) => Err(connection
                .stderr
                .explain(format!("listing its tools failed: {error}"))
                .await),
        }
    })
    .await;
    match started {
        Ok(started) => started,
        Err(_) => Err(tail
            .explain(format!(
                "it did not start within {}s",
                START_TIMEOUT.as_secs()
            ))
            .await),
    }
}

/// The server's tools as Keel's tools: those disabled by the configuration or whose id is
/// taken are skipped, each with the reason (`/mcp` lists them).
fn wrap_tools(
    inner: &Inner,
    config: &McpServerConfig,
    listed: &[rmcp::model::Tool],
    peer: &rmcp::Peer<rmcp::RoleClient>,
) -> (Vec<Arc<dyn DynTool>>, Vec<String>) {
    let mut tools: Vec<Arc<dyn DynTool>> = Vec::new();
    let mut skipped = Vec::new();
    for listed in listed {
        match McpTool::wrap(&config.name, listed, peer.clone(), config.timeout) {
            Ok(tool) => {
                let id = tool.spec().id.clone();
                if lock(&inner.disabled).contains(&id) {
                    skipped.push(format!(
                        "`{}` (disabled: `[tools.{id}] enabled = false`)",
                        listed.name
                    ));
                } else if inner.locked.contains(&id) || tools.iter().any(|t| t.spec().id == id) {
                    skipped.push(format!("`{}` (the id `{id}` is taken)", listed.name));
                } else {
                    tools.push(tool);
                }
            }
            Err(error) => skipped.push(error.to_string()),
        }
    }
    (tools, skipped)
}

/// Why a server's connection ended, in words.
fn why_it_quit(quit: Result<rmcp::service::QuitReason, tokio::task::JoinError>) -> String {
    match quit {
        Ok(rmcp::service::QuitReason::Closed) => "it closed the connection".to_owned(),
        Ok(rmcp::service::QuitReason::Cancelled) => "the connection was cancelled".to_owned(),
        Ok(rmcp::service::QuitReason::JoinError(error)) | Err(error) => {
            format!("its connection failed: {error}")
        }
        Ok(_) => "it stopped".to_owned(),
    }
}
