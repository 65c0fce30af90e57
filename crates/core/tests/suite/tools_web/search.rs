//! `web_search`: SearXNG and Brave against local fakes, the per-session quota.

use std::sync::Arc;

use keel_core::runtime::NetPolicy;
use keel_core::tool::{DynTool, Limits, ToolError, Typed};
use keel_core::tools::web_search::{
    Brave, ENV_BRAVE_API_KEY, ENV_SEARXNG_URL, SearchLimits, Searxng, WebSearchTool,
};
use serde_json::{Value, json};

use super::server::{Reply, Seen, Server, reply};
use super::{Session, error_text};

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
    Typed::wrap(WebSearchTool::new(
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
    let tool = Typed::wrap(WebSearchTool::from_vars(|_| None, SearchLimits::default())).unwrap();
    assert!(tool.spec().requires.net.hosts.is_empty());
    let session = Session::local();
    let error = error_text(session.call(&tool, json!({"query": "anything"})).await);
    assert!(
        error.contains(ENV_SEARXNG_URL) && error.contains(ENV_BRAVE_API_KEY),
        "{error}"
    );

    let broken = Typed::wrap(WebSearchTool::from_vars(
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
    let tool = Typed::wrap(WebSearchTool::new(
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
    let tool = Typed::wrap(WebSearchTool::from_vars(|_| None, SearchLimits::default())).unwrap();
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

#[tokio::test]
async fn a_search_that_outlasts_its_timeout_fails_and_counts() {
    let server = Server::start(|_seen: &Seen| Reply::Stall).await;
    let provider = Searxng::new(&server.url("/")).unwrap();
    assert_eq!(
        SearchLimits::default().timeout,
        std::time::Duration::from_secs(15)
    );
    assert_eq!(SearchLimits::default().max_calls_per_session, 25);
    let limits = SearchLimits {
        timeout: std::time::Duration::from_millis(200),
        max_calls_per_session: 2,
    };
    let tool = Typed::wrap(WebSearchTool::new(vec![Arc::new(provider)], limits)).unwrap();
    let session = Session::local();
    let error = error_text(session.call(&tool, json!({"query": "slow"})).await);
    assert!(
        error.to_lowercase().contains("timed out") || error.contains("timeout"),
        "{error}"
    );
    // A timed-out call still uses one of the session's searches.
    let _ = session.call(&tool, json!({"query": "slow again"})).await;
    let error = error_text(session.call(&tool, json!({"query": "third"})).await);
    assert!(error.contains("limit reached"), "{error}");
}
