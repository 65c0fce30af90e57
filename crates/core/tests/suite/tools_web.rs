//! `web_fetch`, `web_search` and `question` through the full tool path, against a tiny HTTP
//! server on 127.0.0.1 (no other network).
#![allow(clippy::disallowed_methods, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use keel_core::agent::QuestionItem;
use keel_core::capability::RequirementSet;
use keel_core::runtime::{FetchOptions, NetPolicy, Runtime, RuntimeConfig};
use keel_core::tool::{
    Asker, DynTool, Envelope, Limits, ProgressSink, SessionState, ToolContext, ToolError,
    ToolOutput, Typed,
};
use keel_core::tools::question::{HEADLESS_MESSAGE, Question};
use keel_core::tools::web_fetch::WebFetch;
use keel_core::tools::web_search::{
    Brave, ENV_BRAVE_API_KEY, ENV_SEARXNG_URL, SearchLimits, Searxng, WebSearch,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------------------------------------
// A tiny HTTP/1.1 server: one request per connection, answered by a handler.

/// A request the server received.
#[derive(Debug, Clone)]
struct Seen {
    /// Path and query, as sent (`/search?q=a&format=json`).
    target: String,
    headers: HashMap<String, String>,
}

impl Seen {
    fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    fn query(&self) -> HashMap<String, String> {
        let url = url::Url::parse(&format!("http://x{}", self.target)).unwrap();
        url.query_pairs().into_owned().collect()
    }
}

enum Reply {
    Respond {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// Read the request, then never answer.
    Stall,
}

fn reply(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
    Reply::Respond {
        status,
        headers: vec![("Content-Type".into(), content_type.into())],
        body: body.into(),
    }
}

fn redirect(status: u16, location: &str) -> Reply {
    Reply::Respond {
        status,
        headers: vec![("Location".into(), location.into())],
        body: Vec::new(),
    }
}

struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    async fn start(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler = Arc::new(handler);
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let handler = handler.clone();
                let log = log.clone();
                tokio::spawn(async move {
                    let Some(request) = read_request(&mut socket).await else {
                        return;
                    };
                    log.lock().unwrap().push(request.clone());
                    match handler(&request) {
                        Reply::Stall => {
                            tokio::time::sleep(Duration::from_secs(300)).await;
                        }
                        Reply::Respond {
                            status,
                            headers,
                            body,
                        } => {
                            let mut head = format!(
                                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                                body.len()
                            );
                            for (name, value) in headers {
                                head.push_str(&format!("{name}: {value}\r\n"));
                            }
                            head.push_str("\r\n");
                            let _ = socket.write_all(head.as_bytes()).await;
                            let _ = socket.write_all(&body).await;
                            let _ = socket.shutdown().await;
                        }
                    }
                });
            }
        });
        Self { addr, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<Seen> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&buffer);
    let mut lines = text.split("\r\n");
    let target = lines.next()?.split(' ').nth(1)?.to_owned();
    let headers = lines
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Some(Seen { target, headers })
}

// ---------------------------------------------------------------------------------------------
// Sessions.

struct Session {
    _dir: tempfile::TempDir,
    ctx: ToolContext,
}

impl Session {
    fn new(hosts: &[&str], policy: NetPolicy) -> Self {
        Self::with(hosts, policy, Limits::default(), "s1", false)
    }

    fn with(
        hosts: &[&str],
        policy: NetPolicy,
        limits: Limits,
        id: &str,
        interactive: bool,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("ws");
        std::fs::create_dir_all(&root).unwrap();
        let scratch = base.join("scratch");
        let requirements =
            RequirementSet::fs_read_write(&["{workspace}/**", "{session}/**"], &["{workspace}/**"])
                .union(&RequirementSet::net_hosts(hosts));
        let runtime = Runtime::new(RuntimeConfig {
            roots: vec![root],
            requirements,
            scratch_dir: scratch.clone(),
            ..RuntimeConfig::default()
        })
        .unwrap()
        .with_net_policy(policy);
        let session = Arc::new(SessionState::new(id, scratch, limits, interactive));
        let ctx = ToolContext {
            runtime,
            session,
            call_id: "call-1".into(),
            cancel: CancellationToken::new(),
            progress: ProgressSink::default(),
        };
        Self { _dir: dir, ctx }
    }

    /// A session allowed to reach the local test server.
    fn local() -> Self {
        Self::new(
            &["127.0.0.1"],
            NetPolicy {
                allow_private: true,
            },
        )
    }

    async fn call(&self, tool: &Arc<dyn DynTool>, args: Value) -> Result<ToolOutput, ToolError> {
        tool.execute(args, &self.ctx).await
    }
}

fn fetch_tool() -> Arc<dyn DynTool> {
    Typed::wrap(WebFetch).unwrap()
}

fn error_text(result: Result<ToolOutput, ToolError>) -> String {
    match result {
        Ok(output) => panic!("expected an error, got {:?}", output.text),
        Err(error) => error.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// web_fetch

const PAGE: &str = "<!DOCTYPE html><html><head><title>Doc</title>\
    <style>body { color: red }</style></head><body>\
    <nav><a href=\"/home\">Home menu</a></nav>\
    <h1>Release notes</h1>\
    <script>var secret = 'script-content-marker';</script>\
    <p>Version <b>2.0</b> adds a <a href=\"https://example.org/guide\">guide</a>.</p>\
    <ul><li>faster</li><li>smaller</li></ul>\
    <footer>footer-marker</footer></body></html>";

#[tokio::test]
async fn html_becomes_markdown_without_scripts_or_chrome() {
    let server = Server::start(|_| reply(200, "text/html; charset=utf-8", PAGE)).await;
    let session = Session::local();
    let tool = fetch_tool();
    let output = session
        .call(&tool, json!({"url": server.url("/notes")}))
        .await
        .unwrap();
    assert!(output.text.contains("# Release notes"), "{}", output.text);
    assert!(output.text.contains("[guide](https://example.org/guide)"));
    assert!(output.text.contains("**2.0**"));
    assert!(output.text.contains("faster") && output.text.contains("smaller"));
    for absent in [
        "script-content-marker",
        "color: red",
        "Home menu",
        "footer-marker",
    ] {
        assert!(
            !output.text.contains(absent),
            "{absent} leaked: {}",
            output.text
        );
    }
    assert_eq!(output.data["status"], 200);
    assert_eq!(output.data["url"], server.url("/notes"));
    assert_eq!(output.output_path, None);

    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].headers["user-agent"].starts_with("keel/"));

    let text = session
        .call(
            &tool,
            json!({"url": server.url("/notes"), "format": "text"}),
        )
        .await
        .unwrap();
    assert!(
        text.text
            .contains("Release notes\n\nVersion 2.0 adds a guide."),
        "{}",
        text.text
    );
    assert!(!text.text.contains('#') && !text.text.contains("script-content-marker"));

    let raw = session
        .call(
            &tool,
            json!({"url": server.url("/notes"), "format": "html"}),
        )
        .await
        .unwrap();
    assert_eq!(raw.text, PAGE);
}

#[tokio::test]
async fn json_is_pretty_printed_and_binary_is_refused() {
    let server = Server::start(|seen| match seen.path() {
        "/data" => reply(
            200,
            "application/json",
            r#"{"name":"keel","tags":["a","b"]}"#,
        ),
        _ => reply(200, "image/png", b"\x89PNG\r\n\x1a\n\0\0\0".to_vec()),
    })
    .await;
    let session = Session::local();
    let tool = fetch_tool();
    let output = session
        .call(&tool, json!({"url": server.url("/data")}))
        .await
        .unwrap();
    assert_eq!(
        output.text,
        "{\n  \"name\": \"keel\",\n  \"tags\": [\n    \"a\",\n    \"b\"\n  ]\n}"
    );
    let error = error_text(
        session
            .call(&tool, json!({"url": server.url("/logo.png")}))
            .await,
    );
    assert!(
        error.contains("text only") && error.contains("image/png"),
        "{error}"
    );
}

#[tokio::test]
async fn redirects_are_followed_to_the_final_url() {
    let server = Server::start(|seen| match seen.path() {
        "/a" => redirect(302, "/b"),
        "/b" => redirect(301, "c"),
        "/c" => reply(200, "text/plain", "arrived"),
        _ => reply(404, "text/plain", "no"),
    })
    .await;
    let session = Session::local();
    let output = session
        .call(&fetch_tool(), json!({"url": server.url("/a")}))
        .await
        .unwrap();
    assert_eq!(output.text, "arrived");
    assert_eq!(output.data["url"], server.url("/c"));
    assert_eq!(output.data["redirects"], 2);
    let paths: Vec<String> = server.seen().iter().map(|s| s.path().to_owned()).collect();
    assert_eq!(paths, ["/a", "/b", "/c"]);
}

#[tokio::test]
async fn a_redirect_outside_the_scope_is_refused() {
    let server = Server::start(|_| redirect(302, "http://outside.invalid/secret")).await;
    let session = Session::local();
    let error = error_text(
        session
            .call(&fetch_tool(), json!({"url": server.url("/start")}))
            .await,
    );
    assert!(
        error.contains("outside.invalid") && error.contains("not among the allowed hosts"),
        "{error}"
    );
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn request_headers_do_not_follow_a_redirect_to_another_origin() {
    let target = Server::start(|_| reply(200, "text/plain", "landed")).await;
    let onward = target.url("/landing");
    let first = Server::start(move |_| redirect(307, &onward)).await;
    let session = Session::local();
    let mut headers = http::HeaderMap::new();
    headers.insert("x-api-key", http::HeaderValue::from_static("secret"));
    let options = FetchOptions {
        headers,
        ..FetchOptions::default()
    };
    let response = session
        .ctx
        .runtime
        .fetch(&first.url("/start"), options, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(response.body, b"landed");
    assert_eq!(response.redirects.len(), 1);
    assert_eq!(first.seen()[0].headers["x-api-key"], "secret");
    assert!(!target.seen()[0].headers.contains_key("x-api-key"));
}

#[tokio::test]
async fn redirect_chains_stop_after_five_hops() {
    let server = Server::start(|seen| {
        let n: u32 = seen.path().trim_start_matches("/r").parse().unwrap_or(0);
        redirect(302, &format!("/r{}", n + 1))
    })
    .await;
    let session = Session::local();
    let error = error_text(
        session
            .call(&fetch_tool(), json!({"url": server.url("/r0")}))
            .await,
    );
    assert!(error.contains("too many redirects"), "{error}");
    assert_eq!(server.seen().len(), 6);
}

#[tokio::test]
async fn private_addresses_are_refused_by_default() {
    let server = Server::start(|_| reply(200, "text/plain", "private data")).await;
    // The scope allows every host; the address check still refuses.
    let session = Session::new(&["*"], NetPolicy::default());
    let tool = fetch_tool();

    let error = error_text(session.call(&tool, json!({"url": server.url("/")})).await);
    assert!(
        error.contains("127.0.0.1") && error.contains("loopback"),
        "{error}"
    );

    // A name is checked by what it resolves to.
    let by_name = format!("http://localhost:{}/", server.addr.port());
    let error = error_text(session.call(&tool, json!({"url": by_name})).await);
    assert!(error.contains("localhost resolves to"), "{error}");
    assert!(error.contains("loopback"), "{error}");

    let error = error_text(
        session
            .call(
                &tool,
                json!({"url": "http://169.254.169.254/latest/meta-data/"}),
            )
            .await,
    );
    assert!(
        error.contains("169.254.169.254") && error.contains("link-local"),
        "{error}"
    );
    for url in [
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://10.0.0.1/",
        "http://0.0.0.0/",
    ] {
        let error = error_text(session.call(&tool, json!({"url": url})).await);
        assert!(error.contains("net.fetch refused"), "{url}: {error}");
    }
    assert!(
        server.seen().is_empty(),
        "a refused fetch reached the server"
    );
}

#[tokio::test]
async fn only_http_and_https_are_fetched() {
    let session = Session::new(&["*"], NetPolicy::default());
    let tool = fetch_tool();
    for url in [
        "file:///etc/passwd",
        "ftp://example.org/file",
        "data:text/plain,hello",
        "gopher://example.org/",
    ] {
        let error = error_text(session.call(&tool, json!({"url": url})).await);
        assert!(error.contains("only http and https"), "{url}: {error}");
    }
    let error = error_text(session.call(&tool, json!({"url": "not a url"})).await);
    assert!(error.contains("not a valid URL"), "{error}");
}

#[tokio::test]
async fn large_text_is_capped_with_a_sidecar() {
    let body: String = (0..400)
        .map(|i| format!("line {i:04} of the document\n"))
        .collect();
    let expected = body.clone();
    let server = Server::start(move |_| reply(200, "text/plain", body.clone())).await;
    let limits = Limits {
        web_fetch_bytes: 1000,
        ..Limits::default()
    };
    let session = Session::with(
        &["127.0.0.1"],
        NetPolicy {
            allow_private: true,
        },
        limits,
        "s1",
        false,
    );
    let output = session
        .call(&fetch_tool(), json!({"url": server.url("/big.txt")}))
        .await
        .unwrap();
    assert!(output.text.len() <= 1000 && output.text.len() > 700);
    assert!(expected.starts_with(&output.text));
    let sidecar = output.output_path.clone().expect("a sidecar");
    assert!(sidecar.starts_with(session.ctx.runtime.scratch_dir()));
    assert_eq!(std::fs::read_to_string(&sidecar).unwrap(), expected);
    let envelope = Envelope::from_result(Ok(output), Duration::ZERO);
    assert_eq!(envelope.metadata.truncated, Some(true));
}

#[tokio::test]
async fn the_raw_body_stops_at_the_byte_limit() {
    let server = Server::start(|_| reply(200, "text/plain", vec![b'x'; 10_000])).await;
    let session = Session::local();
    let options = FetchOptions {
        max_bytes: 100,
        ..FetchOptions::default()
    };
    let response = session
        .ctx
        .runtime
        .fetch(&server.url("/"), options, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(response.body.len(), 100);
    assert!(response.truncated);
    assert_eq!(response.status, 200);
}

#[tokio::test]
async fn an_error_status_is_a_tool_error_with_an_excerpt() {
    let server = Server::start(|_| {
        reply(
            404,
            "text/html",
            "<html><body><h1>Not here</h1><p>No such page.</p></body></html>",
        )
    })
    .await;
    let session = Session::local();
    let error = error_text(
        session
            .call(&fetch_tool(), json!({"url": server.url("/missing")}))
            .await,
    );
    assert!(error.contains("HTTP 404 Not Found"), "{error}");
    assert!(
        error.contains("Not here") && error.contains("No such page."),
        "{error}"
    );
    assert!(!error.contains("<h1>"), "{error}");
}

#[tokio::test]
async fn a_stalling_server_times_out() {
    let server = Server::start(|_| Reply::Stall).await;
    let session = Session::local();
    let result = session
        .call(
            &fetch_tool(),
            json!({"url": server.url("/slow"), "timeout_seconds": 1}),
        )
        .await;
    assert_eq!(result, Err(ToolError::Timeout(Duration::from_secs(1))));

    let options = FetchOptions {
        timeout: Duration::from_millis(200),
        ..FetchOptions::default()
    };
    let result = session
        .ctx
        .runtime
        .fetch(&server.url("/slow"), options, &CancellationToken::new())
        .await;
    assert!(matches!(result, Err(ToolError::Timeout(_))), "{result:?}");
}

#[tokio::test]
async fn cancelling_stops_a_fetch() {
    let server = Server::start(|_| Reply::Stall).await;
    let session = Session::local();
    let cancel = session.ctx.cancel.clone();
    let tool = fetch_tool();
    let call = session.call(&tool, json!({"url": server.url("/slow")}));
    let trigger = async {
        while server.seen().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        cancel.cancel();
    };
    let (result, ()) = tokio::join!(call, trigger);
    assert_eq!(result, Err(ToolError::Cancelled));
}

#[tokio::test]
async fn web_fetch_rejects_bad_arguments() {
    let session = Session::local();
    let tool = fetch_tool();
    for args in [
        json!({}),
        json!({"url": ""}),
        json!({"url": 5}),
        json!({"url": "http://127.0.0.1/", "format": "pdf"}),
        json!({"url": "http://127.0.0.1/", "timeout_seconds": 0}),
        json!({"url": "http://127.0.0.1/", "timeout_seconds": 500}),
        json!({"url": "http://127.0.0.1/", "prompt": "summarise"}),
    ] {
        let result = session.call(&tool, args.clone()).await;
        assert!(
            matches!(result, Err(ToolError::InvalidArguments { .. })),
            "{args}: {result:?}"
        );
    }
    let spec = tool.spec();
    assert!(spec.description.contains("untrusted"));
    assert!(!spec.mutating);
    assert_eq!(spec.requires.net.hosts, ["*"]);
}

// ---------------------------------------------------------------------------------------------
// web_search

fn searxng_server_answer(seen: &Seen) -> Reply {
    if seen.path() != "/search" {
        return reply(404, "text/plain", "not found");
    }
    let query = seen.query();
    let q = query.get("q").cloned().unwrap_or_default();
    let results: Vec<Value> = (1..=8)
        .map(|i| {
            json!({
                "title": format!("Result {i} for {q}"),
                "url": format!("https://site{i}.example/page"),
                "content": format!("Snippet\n  number {i}."),
                "engine": "fake"
            })
        })
        .collect();
    reply(
        200,
        "application/json",
        json!({"query": q, "results": results}).to_string(),
    )
}

fn searxng_tool(server: &Server) -> Arc<dyn DynTool> {
    let provider = Searxng::new(&server.url("/")).unwrap();
    Typed::wrap(WebSearch::new(
        vec![Arc::new(provider)],
        SearchLimits::default(),
    ))
    .unwrap()
}

#[tokio::test]
async fn searxng_results_come_back_as_a_numbered_list() {
    let server = Server::start(searxng_server_answer).await;
    let tool = searxng_tool(&server);
    assert_eq!(tool.spec().requires.net.hosts, ["127.0.0.1"]);
    let session = Session::local();
    let output = session
        .call(
            &tool,
            json!({"query": "rust async & tokio", "max_results": 2}),
        )
        .await
        .unwrap();
    assert_eq!(
        output.text,
        "1. Result 1 for rust async & tokio\n   https://site1.example/page\n   Snippet number 1.\n\
         2. Result 2 for rust async & tokio\n   https://site2.example/page\n   Snippet number 2.\n"
    );
    assert_eq!(output.data["provider"], "searxng");
    assert_eq!(output.data["results"], 2);
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    let query = seen[0].query();
    assert_eq!(query["q"], "rust async & tokio");
    assert_eq!(query["format"], "json");

    let default = session.call(&tool, json!({"query": "x"})).await.unwrap();
    assert_eq!(default.data["results"], 5);
}

#[tokio::test]
async fn the_twenty_sixth_search_of_a_session_is_refused() {
    let server = Server::start(searxng_server_answer).await;
    let tool = searxng_tool(&server);
    let session = Session::local();
    for n in 1..=25 {
        let output = session
            .call(&tool, json!({"query": format!("q{n}")}))
            .await
            .unwrap();
        assert_eq!(output.data["searches_left"], 25 - n);
    }
    let error = error_text(session.call(&tool, json!({"query": "one more"})).await);
    assert!(
        error.contains("limit reached") && error.contains("25"),
        "{error}"
    );
    assert_eq!(server.seen().len(), 25);

    // The quota is per session.
    let other = Session::with(
        &["127.0.0.1"],
        NetPolicy {
            allow_private: true,
        },
        Limits::default(),
        "s2",
        false,
    );
    assert!(other.call(&tool, json!({"query": "fresh"})).await.is_ok());
}

#[tokio::test]
async fn search_without_a_provider_names_what_to_set() {
    let tool = Typed::wrap(WebSearch::from_vars(|_| None, SearchLimits::default())).unwrap();
    assert!(tool.spec().requires.net.hosts.is_empty());
    let session = Session::local();
    let error = error_text(session.call(&tool, json!({"query": "anything"})).await);
    assert!(
        error.contains(ENV_SEARXNG_URL) && error.contains(ENV_BRAVE_API_KEY),
        "{error}"
    );

    let broken = Typed::wrap(WebSearch::from_vars(
        |name| (name == ENV_SEARXNG_URL).then(|| "not a url".to_owned()),
        SearchLimits::default(),
    ))
    .unwrap();
    let error = error_text(session.call(&broken, json!({"query": "anything"})).await);
    assert!(error.contains("not a valid SearXNG URL"), "{error}");
}

#[tokio::test]
async fn brave_sends_its_key_and_strips_markup() {
    let server = Server::start(|seen| {
        let count = seen.query().get("count").cloned().unwrap_or_default();
        reply(
            200,
            "application/json",
            json!({"web": {"results": [
                {"title": "The <strong>Rust</strong> Book", "url": "https://doc.rust-lang.org/book/",
                 "description": "Learn <strong>Rust</strong> &amp; more"},
                {"title": "count", "url": "https://example.org/", "description": count}
            ]}})
            .to_string(),
        )
    })
    .await;
    let brave = Brave::with_endpoint("test-key", &server.url("/res/v1/web/search")).unwrap();
    let tool = Typed::wrap(WebSearch::new(
        vec![Arc::new(brave)],
        SearchLimits::default(),
    ))
    .unwrap();
    let session = Session::local();
    let output = session
        .call(&tool, json!({"query": "rust book", "max_results": 3}))
        .await
        .unwrap();
    assert!(
        output.text.starts_with(
            "1. The Rust Book\n   https://doc.rust-lang.org/book/\n   Learn Rust & more\n"
        ),
        "{}",
        output.text
    );
    assert!(
        output
            .text
            .contains("2. count\n   https://example.org/\n   3\n")
    );
    let seen = server.seen();
    assert_eq!(seen[0].headers["x-subscription-token"], "test-key");
    assert_eq!(seen[0].query()["q"], "rust book");
}

#[tokio::test]
async fn a_provider_error_status_is_reported() {
    let server = Server::start(|_| reply(403, "text/plain", "Forbidden: format json")).await;
    let tool = searxng_tool(&server);
    let session = Session::local();
    let error = error_text(session.call(&tool, json!({"query": "q"})).await);
    assert!(
        error.contains("searxng search failed: HTTP 403") && error.contains("json format"),
        "{error}"
    );
}

#[tokio::test]
async fn search_goes_through_the_address_check() {
    let server = Server::start(searxng_server_answer).await;
    let tool = searxng_tool(&server);
    let session = Session::new(&["127.0.0.1"], NetPolicy::default());
    let error = error_text(session.call(&tool, json!({"query": "q"})).await);
    assert!(error.contains("loopback"), "{error}");
    assert!(server.seen().is_empty());
}

#[tokio::test]
async fn web_search_rejects_bad_arguments() {
    let tool = Typed::wrap(WebSearch::from_vars(|_| None, SearchLimits::default())).unwrap();
    let session = Session::local();
    for args in [
        json!({}),
        json!({"query": ""}),
        json!({"query": "q", "max_results": 0}),
        json!({"query": "q", "max_results": 21}),
        json!({"query": "q", "engine": "google"}),
    ] {
        let result = session.call(&tool, args.clone()).await;
        assert!(
            matches!(result, Err(ToolError::InvalidArguments { .. })),
            "{args}: {result:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// question

/// Answers every question with its first option (or "yes"), and records what it was asked.
#[derive(Default)]
struct FakeUser {
    asked: Mutex<Vec<QuestionItem>>,
    refuse: bool,
    short: bool,
}

impl Asker for FakeUser {
    fn ask(&self, questions: Vec<QuestionItem>) -> BoxFuture<'_, Result<Vec<Vec<String>>, String>> {
        Box::pin(async move {
            if self.refuse {
                return Err("the user dismissed the questions".to_owned());
            }
            let mut answers: Vec<Vec<String>> = questions
                .iter()
                .map(|q| match q.options.first() {
                    Some(_) if q.multi_select => {
                        q.options.iter().map(|o| o.label.clone()).collect()
                    }
                    Some(option) => vec![option.label.clone()],
                    None => vec!["yes".to_owned()],
                })
                .collect();
            if self.short {
                answers.pop();
            }
            self.asked.lock().unwrap().extend(questions);
            Ok(answers)
        })
    }
}

fn questions() -> Value {
    json!({"questions": [
        {"question": "Which database should the service use?", "header": "Database",
         "options": [{"label": "Postgres", "description": "the team knows it"}, {"label": "SQLite"}]},
        {"question": "Which targets?", "options": [{"label": "linux"}, {"label": "macos"}],
         "multi_select": true},
        {"question": "Keep the old API?"}
    ]})
}

fn interactive_session() -> Session {
    Session::with(&[], NetPolicy::default(), Limits::default(), "s1", true)
}

#[tokio::test]
async fn question_in_a_headless_session_is_the_fixed_error() {
    let tool = Typed::wrap(Question).unwrap();
    // Not interactive, even with an asker installed.
    let headless = Session::new(&[], NetPolicy::default());
    headless
        .ctx
        .session
        .set_asker(Some(Arc::new(FakeUser::default())));
    let envelope = Envelope::from_result(headless.call(&tool, questions()).await, Duration::ZERO);
    assert_eq!(envelope.error_text.as_deref(), Some(HEADLESS_MESSAGE));

    // Interactive but nobody to ask.
    let nobody = interactive_session();
    let envelope = Envelope::from_result(nobody.call(&tool, questions()).await, Duration::ZERO);
    assert_eq!(envelope.error_text.as_deref(), Some(HEADLESS_MESSAGE));
}

#[tokio::test]
async fn question_returns_the_answers() {
    let tool = Typed::wrap(Question).unwrap();
    let session = interactive_session();
    let user = Arc::new(FakeUser::default());
    session.ctx.session.set_asker(Some(user.clone()));
    let output = session.call(&tool, questions()).await.unwrap();
    assert_eq!(
        output.data["answers"],
        json!([["Postgres"], ["linux", "macos"], ["yes"]])
    );
    assert!(
        output.text.contains("Q: Which targets?\nA: linux; macos\n"),
        "{}",
        output.text
    );

    let asked = user.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 3);
    assert_eq!(asked[0].header.as_deref(), Some("Database"));
    assert_eq!(
        asked[0].options[0].description.as_deref(),
        Some("the team knows it")
    );
    assert!(!asked[0].multi_select && asked[1].multi_select);
    assert!(asked[2].options.is_empty());
}

#[tokio::test]
async fn question_reports_a_refusal_or_a_bad_host_answer() {
    let tool = Typed::wrap(Question).unwrap();
    let session = interactive_session();
    session.ctx.session.set_asker(Some(Arc::new(FakeUser {
        refuse: true,
        ..FakeUser::default()
    })));
    let error = error_text(session.call(&tool, questions()).await);
    assert_eq!(error, "the user dismissed the questions");

    session.ctx.session.set_asker(Some(Arc::new(FakeUser {
        short: true,
        ..FakeUser::default()
    })));
    let error = error_text(session.call(&tool, questions()).await);
    assert!(error.contains("2 answer lists for 3 questions"), "{error}");
}

#[tokio::test]
async fn question_rejects_bad_arguments() {
    let tool = Typed::wrap(Question).unwrap();
    let session = interactive_session();
    session
        .ctx
        .session
        .set_asker(Some(Arc::new(FakeUser::default())));
    for args in [
        json!({}),
        json!({"questions": []}),
        json!({"questions": [{"header": "no question"}]}),
        json!({"questions": [{"question": ""}]}),
        json!({"questions": [{"question": "q", "options": [{"description": "no label"}]}]}),
        json!({"questions": [{"question": "q", "multi_select": "yes"}]}),
        json!({"questions": [{"question": "q", "default": "a"}]}),
        json!({"questions": "what?"}),
    ] {
        let result = session.call(&tool, args.clone()).await;
        assert!(
            matches!(result, Err(ToolError::InvalidArguments { .. })),
            "{args}: {result:?}"
        );
    }
    let spec = tool.spec();
    assert!(!spec.mutating);
    assert!(spec.requires == RequirementSet::default());
}
