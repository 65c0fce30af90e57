//! MCP stdio servers: the one place a configured MCP server becomes an OS process.
//!
//! [`spawn_mcp_stdio`] starts what [`super::Runtime::server_invocation`] prepared (the sandbox
//! helper wrapping `command args...` with the profile for servers, see
//! [`super::sandbox::server`]) as the leader of a new process group, with exactly the
//! environment it lists, stdin and stdout as the MCP transport and stderr piped back to the
//! caller (never to Keel's stdout, which is the editor's protocol): its last lines say why a
//! server that failed to start failed. The returned [`GroupGuard`] kills the whole group when
//! dropped, so a server and anything it started (`npx` and its `node`) die with the session.

use std::process::Stdio;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use rmcp::transport::TokioChildProcess;

/// Keel's variables a server inherits (when set): what a program needs to be found and to run.
pub const INHERITED_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "SHELL", "TZ",
];

/// Kills a process group when dropped.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: Option<Pid>,
}

impl GroupGuard {
    /// The process group id (the server's pid).
    pub fn pgid(&self) -> Option<i32> {
        self.pgid.map(Pid::as_raw)
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // Gone already is fine: the group ended by itself.
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }
}

/// Starts an MCP server over stdio as `invocation` says (the sandbox helper wrapping it, or
/// the server itself: [`super::Runtime::server_invocation`]), with its stderr (to be read by
/// the caller, or the server may block on a full pipe). Must be called inside a tokio runtime.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn spawn_mcp_stdio(
    invocation: &super::sandbox::server::ServerInvocation,
) -> std::io::Result<(
    TokioChildProcess,
    GroupGuard,
    Option<tokio::process::ChildStderr>,
)> {
    let mut builder = tokio::process::Command::new(&invocation.program);
    builder
        .args(&invocation.args)
        .current_dir(&invocation.cwd)
        .env_clear()
        .envs(invocation.env.iter().map(|(k, v)| (k, v)))
        .process_group(0)
        .kill_on_drop(true);
    let (process, stderr) = TokioChildProcess::builder(builder)
        .stderr(Stdio::piped())
        .spawn()?;
    let pgid = process
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    tracing::debug!(program = %invocation.program.display(), pgid = ?pgid, "spawned MCP server");
    Ok((process, GroupGuard { pgid }, stderr))
}

/// A configured header of an MCP server that is not a valid HTTP header.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    #[error("header `{name}`: {source}")]
    Name {
        name: String,
        #[source]
        source: http::header::InvalidHeaderName,
    },
    #[error("header `{name}`: {source}")]
    Value {
        name: String,
        #[source]
        source: http::header::InvalidHeaderValue,
    },
}

/// The streamable HTTP transport to an MCP server at `url`, with `headers` on every request.
/// A header that is not a valid HTTP header is an error naming it.
pub fn connect_mcp_http(
    url: &str,
    headers: &[(String, String)],
) -> Result<rmcp::transport::StreamableHttpClientTransport<reqwest::Client>, HeaderError> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    // The transport's own client needs a TLS provider (Keel builds rustls without a default).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    for (name, value) in headers {
        let name =
            http::HeaderName::from_bytes(name.as_bytes()).map_err(|source| HeaderError::Name {
                name: name.clone(),
                source,
            })?;
        let value = http::HeaderValue::from_str(value).map_err(|source| HeaderError::Value {
            name: name.to_string(),
            source,
        })?;
        config.custom_headers.insert(name, value);
    }
    Ok(rmcp::transport::StreamableHttpClientTransport::from_config(
        config,
    ))
}
