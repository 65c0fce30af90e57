//! Outbound HTTP for tools: [`Runtime::fetch`] with [`FetchOptions`], answering a
//! [`FetchResponse`]; the session's [`NetPolicy`].
//!
//! Every request, and every redirect hop, passes three checks:
//! 1. the scheme is `http` or `https`;
//! 2. the host is in the capability scope (`net.fetch`, [`crate::capability::Scope::check_host`]);
//! 3. the addresses the host resolves to are public. A host is what it finally resolves to: a
//!    name that resolves to a loopback, private, link-local (cloud metadata), CGNAT, unique-local
//!    or multicast address is refused unless [`NetPolicy::allow_private`] is set.
//!
//! The address check lives in the HTTP client's DNS resolver (`CheckedResolver`): the
//! resolver looks the name up once (`tokio::net::lookup_host`), refuses the whole answer if any
//! address is forbidden, and hands the client exactly the addresses it checked. The connection
//! goes to a checked address; there is no second lookup a rebinding DNS server could answer
//! differently. IP-literal URLs never reach a resolver, so [`Runtime::fetch`] checks them itself.
//! The client ignores proxy environment variables (a proxy would resolve the name instead of us)
//! and never follows redirects on its own.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt as _;
use http::HeaderMap;
use tokio_util::sync::CancellationToken;
use url::{Host, Url};

use super::AccessError;
use super::Runtime;
use crate::capability::Refusal;

/// The capability name of outbound HTTP.
const CAPABILITY: &str = "net.fetch";

/// Redirect hops followed before a fetch gives up.
pub const MAX_REDIRECTS: usize = 5;

/// Default limit on one whole fetch (all hops and the body).
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(15);

/// Default limit on the raw response body; past it the body is cut and
/// [`FetchResponse::truncated`] is set.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 5 * 1024 * 1024;

/// Limit on establishing one TCP/TLS connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The session's network setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetPolicy {
    /// Allow hosts that resolve to loopback, private, link-local, CGNAT or unique-local
    /// addresses. Off by default: set it only when the user explicitly asks for local hosts
    /// (tests against 127.0.0.1, a SearXNG instance on the LAN).
    pub allow_private: bool,
}

/// How to fetch one URL.
#[derive(Debug, Clone)]
pub struct FetchOptions {
    /// Limit on the whole fetch: every redirect hop and reading the body.
    pub timeout: Duration,
    /// Bytes of the response body kept; reading stops past it.
    pub max_bytes: usize,
    /// Extra request headers (`Accept`, an API key). They go to the first URL's origin only:
    /// a redirect to another scheme, host or port drops them.
    pub headers: HeaderMap,
}

impl Default for FetchOptions {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_FETCH_TIMEOUT,
            max_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            headers: HeaderMap::new(),
        }
    }
}

/// What a fetch got back. Any status is a response; interpreting it is the caller's job.
#[derive(Debug, Clone)]
pub struct FetchResponse {
    /// The URL that answered, after redirects.
    pub url: Url,
    pub status: u16,
    /// The `Content-Type` header, as sent.
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    /// The body was longer than [`FetchOptions::max_bytes`] and was cut there.
    pub truncated: bool,
    /// The URLs redirected from, in order (empty when the first URL answered).
    pub redirects: Vec<Url>,
}

impl FetchResponse {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The reason phrase of the status (`Not Found`), or "" when the code has none.
    pub fn reason(&self) -> &'static str {
        http::StatusCode::from_u16(self.status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("")
    }
}

/// The runtime's network state: its policy and the HTTP client built for it (lazily, once).
#[derive(Debug, Default)]
pub(super) struct NetState {
    policy: NetPolicy,
    client: OnceLock<reqwest::Client>,
}

impl NetState {
    pub(super) fn new(policy: NetPolicy) -> Self {
        Self {
            policy,
            client: OnceLock::new(),
        }
    }
}

impl Runtime {
    /// The same runtime with another network policy (and its own HTTP client).
    pub fn with_net_policy(&self, policy: NetPolicy) -> Self {
        self.derive(|inner| inner.net = Arc::new(NetState::new(policy)))
    }

    pub fn net_policy(&self) -> NetPolicy {
        self.inner.net.policy
    }

    /// GETs `url` after the scheme, scope and address checks, following up to
    /// [`MAX_REDIRECTS`] redirects (each hop checked again). Stops at `options.timeout`
    /// ([`AccessError::Timeout`]) or when `cancel` fires ([`AccessError::Cancelled`]).
    pub async fn fetch(
        &self,
        url: &str,
        options: FetchOptions,
        cancel: &CancellationToken,
    ) -> Result<FetchResponse, AccessError> {
        let start = Url::parse(url.trim())
            .map_err(|e| AccessError::BadArgument(format!("`{url}` is not a valid URL: {e}")))?;
        let timeout = options.timeout;
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(AccessError::Cancelled),
            outcome = tokio::time::timeout(timeout, self.fetch_hops(start, options)) => {
                outcome.unwrap_or(Err(AccessError::Timeout(timeout)))
            }
        }
    }

    async fn fetch_hops(
        &self,
        start: Url,
        options: FetchOptions,
    ) -> Result<FetchResponse, AccessError> {
        let client = self.http_client()?;
        let origin = start.origin();
        let mut url = start;
        let mut redirects = Vec::new();
        loop {
            self.check_url(&url)?;
            let mut request = client.get(url.clone());
            if url.origin() == origin {
                request = request.headers(options.headers.clone());
            }
            let response = request.send().await.map_err(|e| request_error(&url, e))?;
            let status = response.status();
            let location = response
                .headers()
                .get(http::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            if let (true, Some(location)) = (status.is_redirection(), location) {
                if redirects.len() == MAX_REDIRECTS {
                    return Err(AccessError::external(format!(
                        "too many redirects: gave up after {MAX_REDIRECTS} (last at {url})"
                    )));
                }
                let next = url.join(&location).map_err(|e| {
                    AccessError::external_from(
                        format!("{url} redirected to `{location}`, which is not a valid URL: {e}"),
                        e,
                    )
                })?;
                tracing::debug!(from = %url, to = %next, "following redirect");
                redirects.push(std::mem::replace(&mut url, next));
                continue;
            }
            let content_type = response
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let (body, truncated) = read_body(response, options.max_bytes, &url).await?;
            return Ok(FetchResponse {
                url,
                status: status.as_u16(),
                content_type,
                body,
                truncated,
                redirects,
            });
        }
    }

    /// Scheme, scope and (for IP literals) address checks of one hop. Names are checked when
    /// the client resolves them.
    fn check_url(&self, url: &Url) -> Result<(), AccessError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(AccessError::Refused(Refusal {
                capability: CAPABILITY,
                subject: url.to_string(),
                reason: format!(
                    "net.fetch refused {url}: only http and https URLs can be fetched (not `{}:`)",
                    url.scheme()
                ),
            }));
        }
        let (host, literal) = match url.host() {
            Some(Host::Domain(name)) => (name.to_owned(), None),
            Some(Host::Ipv4(ip)) => (ip.to_string(), Some(IpAddr::V4(ip))),
            Some(Host::Ipv6(ip)) => (ip.to_string(), Some(IpAddr::V6(ip))),
            None => {
                return Err(AccessError::BadArgument(format!("{url} has no host")));
            }
        };
        self.scope().check_host(&host)?;
        if let Some(ip) = literal {
            check_address(&host, ip, self.net_policy())?;
        }
        Ok(())
    }

    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    fn http_client(&self) -> Result<reqwest::Client, AccessError> {
        let state = &self.inner.net;
        if let Some(client) = state.client.get() {
            return Ok(client.clone());
        }
        install_crypto_provider();
        let client = reqwest::Client::builder()
            .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(CheckedResolver {
                policy: state.policy,
            })
            .build()
            .map_err(|e| AccessError::internal("building the HTTP client", e))?;
        // A concurrent first call may have won the race; either client is equivalent.
        Ok(state.client.get_or_init(|| client).clone())
    }
}

/// The HTTP client of one model provider: the provider's configured endpoint, not a
/// model-chosen URL, so no capability scope applies; `connect_timeout` limits the TCP/TLS
/// connection. Keel's user agent; reqwest's own redirect and proxy defaults.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
pub fn provider_client(connect_timeout: Duration) -> reqwest::Result<reqwest::Client> {
    install_crypto_provider();
    let builder = reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")));
    match provider_tls() {
        Some(tls) => builder.tls_backend_preconfigured(tls).build(),
        // The shared configuration could not be built: reqwest builds its own (and reports
        // what fails).
        None => builder.build(),
    }
}

/// The TLS configuration of the providers' clients, built once per process: what reqwest
/// builds by default (the platform's verifier over the system's roots, every TLS version the
/// crypto provider offers, HTTP/2 and HTTP/1.1 offered by ALPN), without reading and parsing
/// the system's certificates again for every client (about 140 certificates, a few million
/// instructions and a few hundred KiB of allocations each time; a session builds two clients
/// or more). Decision 0035.
fn provider_tls() -> Option<rustls::ClientConfig> {
    static TLS: OnceLock<Option<rustls::ClientConfig>> = OnceLock::new();
    TLS.get_or_init(|| {
        let provider = rustls::crypto::CryptoProvider::get_default()?.clone();
        let verifier = rustls_platform_verifier::Verifier::new(provider.clone())
            .map_err(|error| tracing::debug!("the shared TLS configuration: {error}"))
            .ok()?;
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(rustls::ALL_VERSIONS)
            .ok()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Some(config)
    })
    .clone()
}

/// Installs ring as rustls' process-wide crypto provider, once (reqwest is built with
/// `rustls-no-provider`). Another component having installed one first is fine.
fn install_crypto_provider() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        // Err means a provider is already installed, which is all we need.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Reads at most `limit` bytes of the body; says whether more was there.
async fn read_body(
    response: reqwest::Response,
    limit: usize,
    url: &Url,
) -> Result<(Vec<u8>, bool), AccessError> {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| request_error(url, e))?;
        let room = limit - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// A failed request as the model reads it: the address refusal when the resolver refused,
/// otherwise the error chain.
fn request_error(url: &Url, error: reqwest::Error) -> AccessError {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        if let Some(blocked) = cause.downcast_ref::<BlockedAddress>() {
            return AccessError::Refused(blocked.refusal());
        }
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    AccessError::external_from(format!("cannot fetch {url}: {text}"), error)
}

/// A host resolved to an address the policy forbids.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{host} resolves to {address}, {kind}")]
struct BlockedAddress {
    host: String,
    address: IpAddr,
    kind: &'static str,
}

impl BlockedAddress {
    fn refusal(&self) -> Refusal {
        let target = if self.host == self.address.to_string() {
            format!("{} is {}", self.address, self.kind)
        } else {
            format!("{} resolves to {}, {}", self.host, self.address, self.kind)
        };
        Refusal {
            capability: CAPABILITY,
            subject: self.host.clone(),
            reason: format!(
                "net.fetch refused: {target}; local and private network addresses are not \
                 fetched (the session does not allow private hosts)"
            ),
        }
    }
}

fn check_address(host: &str, address: IpAddr, policy: NetPolicy) -> Result<(), Refusal> {
    match forbidden_kind(address) {
        Some(kind) if !policy.allow_private => Err(BlockedAddress {
            host: host.to_owned(),
            address,
            kind,
        }
        .refusal()),
        _ => Ok(()),
    }
}

/// The DNS resolver of the fetch client: looks a name up once and refuses the answer when any
/// address is forbidden, so the connection goes only to addresses that passed the check.
#[derive(Debug, Clone, Copy)]
struct CheckedResolver {
    policy: NetPolicy,
}

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addresses: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if !policy.allow_private {
                for address in &addresses {
                    if let Some(kind) = forbidden_kind(address.ip()) {
                        return Err(Box::new(BlockedAddress {
                            host: host.clone(),
                            address: address.ip(),
                            kind,
                        })
                            as Box<dyn std::error::Error + Send + Sync>);
                    }
                }
            }
            Ok(Box::new(addresses.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Why an address is not on the public internet, or `None` when it is.
pub fn forbidden_kind(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    let kind = if ip.is_unspecified() || a == 0 {
        "an unspecified (\"this network\") address"
    } else if ip.is_loopback() {
        "a loopback address"
    } else if ip.is_private() {
        "a private network address"
    } else if ip.is_link_local() {
        "a link-local address (cloud metadata services live there)"
    } else if a == 100 && (64..128).contains(&b) {
        "a carrier-grade NAT (shared) address"
    } else if a == 192 && b == 0 && c == 0 {
        "an IETF protocol assignment address"
    } else if a == 198 && (18..20).contains(&b) {
        "a benchmarking network address"
    } else if ip.is_multicast() {
        "a multicast address"
    } else if ip.is_broadcast() || a >= 240 {
        "a reserved address"
    } else {
        return None;
    };
    Some(kind)
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let segments = ip.segments();
    // Addresses that embed an IPv4 address are judged by it: IPv4-mapped (::ffff:a.b.c.d),
    // IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::a.b.c.d), 6to4 (2002:AABB:CCDD::).
    let embedded = if let Some(v4) = ip.to_ipv4_mapped() {
        Some(v4)
    } else if segments[..6] == [0; 6] && !ip.is_loopback() && !ip.is_unspecified() {
        ip.to_ipv4()
    } else if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        Some(low_v4(segments[6], segments[7]))
    } else if segments[0] == 0x2002 {
        Some(low_v4(segments[1], segments[2]))
    } else {
        None
    };
    if let Some(v4) = embedded {
        return forbidden_v4(v4);
    }
    let kind = if ip.is_unspecified() {
        "an unspecified address"
    } else if ip.is_loopback() {
        "a loopback address"
    } else if segments[0] & 0xfe00 == 0xfc00 {
        "a unique-local (private) address"
    } else if segments[0] & 0xffc0 == 0xfe80 {
        "a link-local address"
    } else if segments[0] & 0xffc0 == 0xfec0 {
        "a site-local (private) address"
    } else if ip.is_multicast() {
        "a multicast address"
    } else {
        return None;
    };
    Some(kind)
}

fn low_v4(high: u16, low: u16) -> Ipv4Addr {
    let [a, b] = high.to_be_bytes();
    let [c, d] = low.to_be_bytes();
    Ipv4Addr::new(a, b, c, d)
}

#[cfg(test)]
mod tests {
    use super::forbidden_kind;

    fn forbidden(address: &str) -> bool {
        forbidden_kind(address.parse().unwrap()).is_some()
    }

    #[test]
    fn local_and_private_addresses_are_forbidden() {
        for address in [
            "127.0.0.1",
            "127.8.9.10",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.254",
            "0.0.0.0",
            "224.0.0.251",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:c0a8:0101::1",
        ] {
            assert!(forbidden(address), "{address} should be forbidden");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for address in [
            "93.184.216.34",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "192.169.0.1",
            "2606:4700::1111",
            "::ffff:93.184.216.34",
            "2002:5db8:d822::1",
        ] {
            assert!(!forbidden(address), "{address} should pass");
        }
    }
}
