//! The filtering proxy: how a confined command reaches exactly the hosts the session's rules
//! allow (docs/sandbox.md, "The filtering proxy").
//!
//! One proxy per session, started with the session's first confined command that may use it
//! (the network is off and the rules allow at least one host without asking). It listens on a
//! Unix socket in the session's scratch directory (which the namespace helper bind-mounts into
//! the command's root, where a forwarder in the command's own network namespace makes it
//! `127.0.0.1:PORT`), and on a port of the host's loopback (which the Landlock fallback lets the
//! command connect to, and nothing else).
//!
//! It speaks the two forms every HTTP client uses through a proxy: `CONNECT host:port` (TLS and
//! anything else passes through untouched) and plain HTTP requests in absolute form
//! (`GET http://host/path`, sent on in origin form). For each it:
//!
//! 1. checks the host against the capability scope and the session's rules
//!    ([`HostGate`]: the `shell.net` rules, a permission of their own, without asking: a command cannot
//!    wait on a prompt);
//! 2. resolves the name itself, once, and refuses the whole answer when any address is
//!    loopback, private, link-local, CGNAT or multicast ([`super::super::net::forbidden_kind`],
//!    the check `web_fetch` applies), so no name can lead to the host's loopback;
//! 3. connects to a checked address, never to the name again.
//!
//! A refusal is a `403` whose status line and body name the host and the reason, so the model
//! can tell the user which host to allow.

#![expect(
    clippy::disallowed_methods,
    reason = "the sandbox's proxy is part of the runtime, where ambient authority lives"
)]

use std::fmt::Debug;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use crate::capability::Scope;

/// The proxy's file name in the session's `sandbox` directory.
pub const SOCKET_NAME: &str = "proxy.sock";

pub use keel_sandbox::{ProxyEndpoint, SOCKET_IN_ROOT};

/// The request head (request line and headers) is refused past this size.
const MAX_HEAD: usize = 16 * 1024;

/// Limit on connecting to the upstream (all its checked addresses).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Limit on a client sending its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// Decides which hosts confined commands may reach through the proxy. The engine installs one
/// backed by the session's permission rules.
pub trait HostGate: Send + Sync + Debug {
    /// Whether the rules allow any host at all without asking (the proxy is offered only then).
    fn any_allowed(&self) -> bool;
    /// `Ok` when the rules allow commands to reach `host` (lower-case, no port) without
    /// asking; otherwise why not. The reason is a message, not an error to handle: the proxy
    /// puts it as it is in the `403` the command gets, for the model and the user to read.
    // String error: the reason the proxy puts as it is in its `403`.
    fn check(&self, host: &str) -> Result<(), String>;
}

/// Why the proxy cannot run (a command then has no network).
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("no host gate")]
    NoGate,
    #[error("the proxy needs a tokio runtime")]
    NoRuntime(#[source] tokio::runtime::TryCurrentError),
    #[error("binding {}: {source}", path.display())]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("listening on the loopback: {0}")]
    Loopback(#[source] std::io::Error),
}

/// The proxy of one session: started once, on first use; stopped when the last runtime
/// sharing it is dropped.
#[derive(Debug, Default)]
pub(crate) struct ProxyState {
    pub(crate) gate: Option<Arc<dyn HostGate>>,
    /// The first start's outcome, shared by every later command (an error too: it is not
    /// retried).
    started: Mutex<Option<Result<ProxyEndpoint, Arc<ProxyError>>>>,
    cancel: CancellationToken,
}

impl Drop for ProxyState {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl ProxyState {
    pub(crate) fn new(gate: Option<Arc<dyn HostGate>>) -> Self {
        Self {
            gate,
            started: Mutex::new(None),
            cancel: CancellationToken::new(),
        }
    }

    /// The running proxy's endpoint, starting it the first time. `Err` when it cannot run
    /// (no tokio runtime, a socket that cannot be bound); the command then has no network.
    pub(crate) fn endpoint(
        &self,
        dir: &Path,
        scope: &Scope,
        upstream_for_tests: Option<u16>,
    ) -> Result<ProxyEndpoint, Arc<ProxyError>> {
        let Some(gate) = &self.gate else {
            return Err(Arc::new(ProxyError::NoGate));
        };
        let mut started = self
            .started
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(result) = started.as_ref() {
            return result.clone();
        }
        let result = start(
            &dir.join(SOCKET_NAME),
            Filter {
                scope: Some(scope.clone()),
                gate: gate.clone(),
                upstream_for_tests,
            },
            self.cancel.clone(),
        )
        .map_err(Arc::new);
        if let Err(error) = &result {
            tracing::warn!(%error, "the sandbox's proxy cannot start; commands have no network");
        }
        *started = Some(result.clone());
        result
    }
}

/// What the proxy checks a request against.
#[derive(Debug, Clone)]
pub struct Filter {
    /// The capability scope (`net.fetch` hosts); `None`: the gate alone decides.
    pub scope: Option<Scope>,
    /// The session's rules.
    pub gate: Arc<dyn HostGate>,
    /// Test hook: `127.0.0.1` at this one port passes the address check. Only tests and
    /// `keel sandbox check`'s self-test set it (through [`super::SandboxSpec`], which no
    /// configuration key or environment variable reaches); every other loopback address and
    /// port stays refused.
    pub upstream_for_tests: Option<u16>,
}

/// Binds the proxy's Unix socket at `socket` and a port on the host's loopback, and serves
/// both until `cancel` fires. Must be called inside a tokio runtime.
pub fn start(
    socket: &Path,
    filter: Filter,
    cancel: CancellationToken,
) -> Result<ProxyEndpoint, ProxyError> {
    let handle = tokio::runtime::Handle::try_current().map_err(ProxyError::NoRuntime)?;
    let _ = std::fs::remove_file(socket);
    let bind = |source| ProxyError::Bind {
        path: socket.to_path_buf(),
        source,
    };
    let unix = std::os::unix::net::UnixListener::bind(socket).map_err(bind)?;
    unix.set_nonblocking(true).map_err(bind)?;
    let tcp =
        std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(ProxyError::Loopback)?;
    tcp.set_nonblocking(true).map_err(ProxyError::Loopback)?;
    let port = tcp.local_addr().map_err(ProxyError::Loopback)?.port();
    let _guard = handle.enter();
    let unix = tokio::net::UnixListener::from_std(unix).map_err(bind)?;
    let tcp = tokio::net::TcpListener::from_std(tcp).map_err(ProxyError::Loopback)?;
    let filter = Arc::new(filter);
    {
        let (filter, cancel) = (filter.clone(), cancel.clone());
        handle.spawn(async move {
            loop {
                tokio::select! {
                    () = cancel.cancelled() => break,
                    accepted = unix.accept() => match accepted {
                        Ok((stream, _)) => {
                            tokio::spawn(serve(stream, filter.clone(), cancel.clone()));
                        }
                        Err(error) => tracing::debug!(%error, "proxy accept"),
                    },
                }
            }
        });
    }
    handle.spawn(async move {
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                accepted = tcp.accept() => match accepted {
                    Ok((stream, _)) => {
                        tokio::spawn(serve(stream, filter.clone(), cancel.clone()));
                    }
                    Err(error) => tracing::debug!(%error, "proxy accept"),
                },
            }
        }
    });
    Ok(ProxyEndpoint {
        socket: socket.to_path_buf(),
        port,
    })
}

/// Why a request is not relayed: the status and the text the client gets.
struct Refused {
    status: u16,
    host: Option<String>,
    reason: String,
}

impl Refused {
    fn bad(reason: impl Into<String>) -> Self {
        Refused {
            status: 400,
            host: None,
            reason: reason.into(),
        }
    }

    fn response(&self) -> Vec<u8> {
        let phrase = match self.status {
            403 => "Forbidden",
            502 => "Bad Gateway",
            _ => "Bad Request",
        };
        let body = match &self.host {
            Some(host) => format!(
                "keel sandbox: the network proxy refused {host}: {}. Shell commands reach only \
                 the hosts the user's shell.net rules allow (a web_fetch answer does not open \
                 them); ask the user to add a shell.net rule for {host} (or use web_fetch, \
                 which asks).\n",
                self.reason
            ),
            None => format!(
                "keel sandbox: the network proxy refused the request: {}\n",
                self.reason
            ),
        };
        let headline = match &self.host {
            Some(host) => format!("{phrase} (keel sandbox: {host} refused)"),
            None => phrase.to_owned(),
        };
        format!(
            "HTTP/1.1 {} {headline}\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.status,
            body.len()
        )
        .into_bytes()
    }
}

async fn serve<S>(mut client: S, filter: Arc<Filter>, cancel: CancellationToken)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let relay = async {
        match open(&mut client, &filter).await {
            Ok(Some(mut upstream)) => {
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
            Ok(None) => {}
            Err(refused) => {
                if let Some(host) = &refused.host {
                    tracing::info!(host, reason = refused.reason, "sandbox proxy refused");
                }
                let _ = client.write_all(&refused.response()).await;
                let _ = client.shutdown().await;
            }
        }
    };
    tokio::select! {
        () = cancel.cancelled() => {}
        () = relay => {}
    }
}

/// Reads the request head, checks it, connects upstream and sends what must go first (the
/// `200` of a `CONNECT`, or the request itself). `Ok(None)`: the client left.
async fn open<S>(client: &mut S, filter: &Filter) -> Result<Option<TcpStream>, Refused>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut buffer = Vec::with_capacity(1024);
    let head_end = match tokio::time::timeout(HEAD_TIMEOUT, read_head(client, &mut buffer)).await {
        Ok(Ok(Some(end))) => end,
        Ok(Ok(None)) | Ok(Err(_)) => return Ok(None),
        Err(_) => return Err(Refused::bad("no request head in time")),
    };
    // Without the blank line that ends it.
    let head = std::str::from_utf8(&buffer[..head_end - 4])
        .map_err(|_| Refused::bad("the request head is not UTF-8"))?;
    let (line, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refused::bad(format!("malformed request line `{line}`")));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(Refused::bad(format!("unsupported version `{version}`")));
    }
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_authority(target)
            .ok_or_else(|| Refused::bad(format!("`CONNECT {target}` needs host:port")))?;
        let mut upstream = connect(filter, &host, port).await?;
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await
            .map_err(|_| Refused::bad("the client left"))?;
        // Bytes the client sent after the head (a TLS ClientHello sent eagerly).
        let rest = &buffer[head_end..];
        if !rest.is_empty() {
            upstream
                .write_all(rest)
                .await
                .map_err(|_| Refused::bad("the upstream left"))?;
        }
        return Ok(Some(upstream));
    }
    // A plain HTTP request in absolute form.
    let url = url::Url::parse(target).map_err(|_| {
        Refused::bad(format!(
            "`{method} {target}`: a proxy request needs an absolute http:// URL (or CONNECT)"
        ))
    })?;
    if url.scheme() != "http" {
        return Err(Refused::bad(format!(
            "`{target}`: only http:// URLs are forwarded as requests; https goes through CONNECT"
        )));
    }
    let host = match url.host() {
        Some(url::Host::Domain(name)) => name.to_owned(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => return Err(Refused::bad(format!("`{target}` has no host"))),
    };
    let port = url.port_or_known_default().unwrap_or(80);
    let mut upstream = connect(filter, &host, port).await?;
    let forwarded = forwarded_head(method, &url, version, headers, &buffer[head_end..]);
    upstream
        .write_all(&forwarded)
        .await
        .map_err(|_| Refused::bad("the upstream left"))?;
    Ok(Some(upstream))
}

/// The request as sent upstream: the request line in origin form, the client's headers without
/// the proxy's own (`Proxy-Connection`, `Proxy-Authorization`), and `Host` taken from the URL that
/// was checked, whatever the client's `Host` said (RFC 9112, 3.2.2: a proxy replaces it), so a
/// request for an allowed host cannot name another virtual host on the same server.
fn forwarded_head(
    method: &str,
    url: &url::Url,
    version: &str,
    headers: &str,
    body_start: &[u8],
) -> Vec<u8> {
    let path = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    };
    let host = url.host_str().unwrap_or_default();
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    let mut forwarded = format!("{method} {path} {version}\r\nHost: {authority}\r\n").into_bytes();
    for header in headers.split("\r\n").filter(|h| !h.is_empty()) {
        let name = header.split(':').next().unwrap_or("").trim();
        if name.eq_ignore_ascii_case("host")
            || name.eq_ignore_ascii_case("proxy-connection")
            || name.eq_ignore_ascii_case("proxy-authorization")
        {
            continue;
        }
        forwarded.extend_from_slice(header.as_bytes());
        forwarded.extend_from_slice(b"\r\n");
    }
    forwarded.extend_from_slice(b"\r\n");
    forwarded.extend_from_slice(body_start);
    forwarded
}

/// Reads until the end of the request head; returns the index after its blank line
/// (`None`: the client closed first).
async fn read_head<S>(client: &mut S, buffer: &mut Vec<u8>) -> std::io::Result<Option<usize>>
where
    S: AsyncRead + Unpin,
{
    let mut chunk = [0u8; 2048];
    loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(Some(at + 4));
        }
        if buffer.len() > MAX_HEAD {
            return Err(std::io::Error::other("request head too large"));
        }
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
}

/// `host:port`, `[v6]:port`; the host lower-cased, without a trailing dot.
fn split_authority(authority: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        (host, after.strip_prefix(':')?)
    } else {
        authority.rsplit_once(':')?
    };
    let port: u16 = port.parse().ok()?;
    if host.is_empty() || port == 0 {
        return None;
    }
    Some((host.trim_end_matches('.').to_ascii_lowercase(), port))
}

/// The checks, then a connection to a checked address.
async fn connect(filter: &Filter, host: &str, port: u16) -> Result<TcpStream, Refused> {
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let refuse = |reason: String| Refused {
        status: 403,
        host: Some(host.clone()),
        reason,
    };
    if let Some(scope) = &filter.scope {
        scope.check_host(&host).map_err(|r| refuse(r.reason))?;
    }
    filter.gate.check(&host).map_err(refuse)?;
    let addresses: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| Refused {
                status: 502,
                host: Some(host.clone()),
                reason: format!("cannot resolve it: {e}"),
            })?
            .collect(),
    };
    for address in &addresses {
        let test_upstream = filter.upstream_for_tests == Some(port)
            && address.ip() == IpAddr::V4(Ipv4Addr::LOCALHOST);
        if let Some(kind) = super::super::net::forbidden_kind(address.ip())
            && !test_upstream
        {
            let target = if host == address.ip().to_string() {
                format!("it is {kind}")
            } else {
                format!("it resolves to {}, {kind}", address.ip())
            };
            return Err(refuse(format!(
                "{target}; loopback and private network addresses are never reachable from the \
                 sandbox"
            )));
        }
    }
    let attempt = async {
        let mut last = None;
        for address in &addresses {
            match TcpStream::connect(address).await {
                Ok(stream) => return Ok(stream),
                Err(e) => last = Some(e),
            }
        }
        Err(last.map_or_else(|| "no address".to_owned(), |e| e.to_string()))
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => Err(Refused {
            status: 502,
            host: Some(host.clone()),
            reason: format!("cannot connect to it: {e}"),
        }),
        Err(_) => Err(Refused {
            status: 502,
            host: Some(host.clone()),
            reason: "connecting to it timed out".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::{forwarded_head, split_authority};

    #[test]
    fn a_forwarded_request_names_the_checked_host_only() {
        let url = url::Url::parse("http://allowed.example:8080/a?b=1").unwrap();
        let head = forwarded_head(
            "GET",
            &url,
            "HTTP/1.1",
            "Host: other.example\r\nHOST: third.example\r\nProxy-Authorization: x\r\nAccept: */*",
            b"body",
        );
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /a?b=1 HTTP/1.1\r\nHost: allowed.example:8080\r\nAccept: */*\r\n\r\nbody"
        );
    }

    #[test]
    fn authorities_parse() {
        assert_eq!(
            split_authority("Example.COM.:443"),
            Some(("example.com".into(), 443))
        );
        assert_eq!(split_authority("[::1]:80"), Some(("::1".into(), 80)));
        assert_eq!(split_authority("example.com"), None);
        assert_eq!(split_authority(":80"), None);
        assert_eq!(split_authority("a:0"), None);
    }
}
