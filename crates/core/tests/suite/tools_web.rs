//! `web_fetch`, `web_search` and `question` through the full tool path, against a tiny HTTP
//! server on 127.0.0.1 (no other network).

use std::sync::Arc;
use std::time::Duration;

use keel_core::capability::RequirementSet;
use keel_core::runtime::{FetchOptions, NetPolicy, Runtime, RuntimeConfig};
use keel_core::tool::{
    DynTool, Envelope, Limits, ProgressSink, SessionState, ToolContext, ToolError, ToolOutput,
    Typed,
};
use keel_core::tools::web_fetch::WebFetchTool;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

mod question;
mod search;
mod server;

use server::{Reply, Server, redirect, reply};

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
    Typed::wrap(WebFetchTool).unwrap()
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
    assert!(
        matches!(result, Err(keel_core::runtime::AccessError::Timeout(_))),
        "{result:?}"
    );
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
