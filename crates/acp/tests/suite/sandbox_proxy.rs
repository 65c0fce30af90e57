//! The network of sandboxed commands end to end: the hosts the rules allow through Keel's
//! filtering proxy and nothing else, under namespaces and the Landlock fallback, locally and in
//! the terminal pane; no proxy without an allowed host; a `web_fetch` answer opens no door for
//! shell commands.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason};
use keel_core::runtime::sandbox::Mechanism;
use keel_testkit::acp_client::{ClientOptions, PermissionReply};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::json;

use super::sandbox::{Outside, finished, harness, toolchain_dirs};
use super::support::{EngineHarness, engine_config};
use super::turns::allow;

/// A server on the host's loopback standing in for an allowed host: the proxy's test hook
/// (`loopback_upstream_for_tests`, which no configuration reaches) lets exactly its port
/// through. Counts the requests it answers.
struct Upstream {
    port: u16,
    hits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

const UPSTREAM_BODY: &str = "upstream-says-hello";

impl Upstream {
    async fn start() -> Upstream {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = hits.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut chunk = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&chunk[..n]),
                        }
                    }
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let path = String::from_utf8_lossy(&head)
                        .split(' ')
                        .nth(1)
                        .unwrap_or("")
                        .to_owned();
                    let body = format!("{UPSTREAM_BODY} {path}\n");
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(reply.as_bytes()).await;
                });
            }
        });
        Upstream { port, hits, task }
    }

    fn hits(&self) -> usize {
        self.hits.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The user's rules allow two hosts by name: `127.0.0.1` (the test upstream stands in for an
/// allowed host) and `10.1.2.3` (a private address, which the proxy must refuse anyway).
const PROXY_RULES: &str = r#"
[[permission]]
permission = "shell.net"
pattern = "127.0.0.1"
action = "allow"

[[permission]]
permission = "shell.net"
pattern = "10.1.2.3"
action = "allow"
"#;

/// Commands reach the hosts the rules allow through Keel's proxy, and nothing else.
async fn proxy_probe(options: ClientOptions, mechanism: Mechanism, expected: &str) {
    use keel_core::agent::WorkspaceConfig;
    use keel_core::policy::{RuleSet, RuleSource};
    let outside = Outside::new();
    let upstream = Upstream::start().await;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let other = listener.local_addr().unwrap().port();
    let up = upstream.port;
    let script = [
        "echo \"proxy=[$http_proxy]\"".to_owned(),
        // The allowed host, through the proxy: a plain request, then a CONNECT tunnel (-p).
        format!("NO_PROXY= no_proxy= curl -sS --max-time 10 http://127.0.0.1:{up}/plain; echo plain-exit=$?"),
        format!("NO_PROXY= no_proxy= curl -sS -p -x \"$HTTPS_PROXY\" --max-time 10 http://127.0.0.1:{up}/tunnel; echo tunnel-exit=$?"),
        // Refused: another loopback port (the rule names the host), a private address the rules
        // allow by name, a host no rule allows (plain and tunnelled).
        format!("NO_PROXY= no_proxy= curl -sS -x \"$HTTP_PROXY\" --max-time 10 http://127.0.0.1:{other}/; echo loopback-exit=$?"),
        "curl -sS -x \"$HTTP_PROXY\" --max-time 10 http://10.1.2.3/; echo private-exit=$?".to_owned(),
        "curl -sS -x \"$HTTP_PROXY\" --max-time 10 http://not-allowed.example/; echo host-exit=$?".to_owned(),
        "curl -sS -p -x \"$HTTPS_PROXY\" --max-time 10 https://not-allowed.example/ 2>&1; echo tls-exit=$?".to_owned(),
        // Around the proxy: straight to the upstream.
        format!("curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:{up}/direct 2>&1; echo direct-exit=$?"),
    ]
    .join("\n");
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::new().tool_call("t1", "bash", json!({ "command": script })));
    mock.push_anthropic(Turn::text_only("done"));
    let mut config = engine_config(Some(&mock), Path::new("/nonexistent"));
    config.sandbox.home = Some(outside.home.clone());
    config.sandbox.settings.mechanism = mechanism;
    config.sandbox.settings.readable = toolchain_dirs();
    config.sandbox.loopback_upstream_for_tests = Some(up);
    config.config_rules = Some(std::sync::Arc::new(|_: &Path, _: bool| {
        Ok(WorkspaceConfig {
            user_rules: Some(
                RuleSet::parse(
                    PROXY_RULES,
                    RuleSource::Global(PathBuf::from("/test/permissions.toml")),
                )
                .map_err(|e| e.to_string())?,
            ),
            ..WorkspaceConfig::default()
        })
    }));
    let harness = EngineHarness::with_config(
        options.permissions(allow(8)),
        &[("README.md", "probe\n")],
        mock,
        config,
    )
    .await;
    assert_eq!(
        harness.prompt("probe").await.stop_reason,
        StopReason::EndTurn
    );
    let update = finished(&harness, "t1");
    let data = &update["rawOutput"]["data"];
    let output = data["output"].as_str().unwrap_or_default().to_owned();
    assert_eq!(data["sandbox"], json!(expected), "{update:#}");
    assert!(output.contains("proxy=[http://127.0.0.1:"), "{output}");
    // The allowed host answered, in both forms.
    assert!(
        output.contains(&format!("{UPSTREAM_BODY} /plain")),
        "{output}"
    );
    assert!(output.contains("plain-exit=0"), "{output}");
    assert!(
        output.contains(&format!("{UPSTREAM_BODY} /tunnel")),
        "{output}"
    );
    assert!(output.contains("tunnel-exit=0"), "{output}");
    // Each refusal is a 403 that names the host and why.
    assert!(
        output.contains("refused 127.0.0.1: it is a loopback address"),
        "{output}"
    );
    assert!(
        output.contains("refused 10.1.2.3: it is a private network address"),
        "{output}"
    );
    assert!(
        output.contains(
            "refused not-allowed.example: no shell.net rule lets shell commands reach \
             not-allowed.example"
        ),
        "{output}"
    );
    assert!(
        output.contains("CONNECT tunnel failed, response 403"),
        "{output}"
    );
    assert!(!output.contains("tls-exit=0"), "{output}");
    // Around the proxy nothing is reached: the upstream answered only the two proxied
    // requests, and the other loopback port was never connected to.
    assert!(!output.contains("direct-exit=0"), "{output}");
    assert!(
        !output.contains(&format!("{UPSTREAM_BODY} /direct")),
        "{output}"
    );
    assert_eq!(upstream.hits(), 2, "{output}");
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock),
        "a connection reached the other loopback port"
    );
}

#[tokio::test]
async fn local_commands_reach_allowed_hosts_through_the_proxy_under_namespaces() {
    proxy_probe(ClientOptions::default(), Mechanism::Auto, "namespaces").await;
}

#[tokio::test]
async fn terminal_commands_reach_allowed_hosts_through_the_proxy_under_namespaces() {
    proxy_probe(ClientOptions::editor(), Mechanism::Auto, "namespaces").await;
}

#[tokio::test]
async fn local_commands_reach_allowed_hosts_through_the_proxy_under_the_fallback() {
    proxy_probe(ClientOptions::default(), Mechanism::Landlock, "landlock").await;
}

#[tokio::test]
async fn terminal_commands_reach_allowed_hosts_through_the_proxy_under_the_fallback() {
    proxy_probe(ClientOptions::editor(), Mechanism::Landlock, "landlock").await;
}

/// Without a rule that allows some host, commands get no proxy at all.
#[tokio::test]
async fn without_an_allowed_host_commands_get_no_proxy() {
    let outside = Outside::new();
    let harness = harness(
        ClientOptions::default().permissions(allow(2)),
        Mechanism::Auto,
        &outside,
        vec![
            Turn::new().tool_call(
                "t1",
                "bash",
                json!({ "command": "echo \"proxy=[$http_proxy$HTTPS_PROXY]\"; ls /run" }),
            ),
            Turn::text_only("done"),
        ],
    )
    .await;
    assert_eq!(
        harness.prompt("probe").await.stop_reason,
        StopReason::EndTurn
    );
    let update = finished(&harness, "t1");
    let output = update["rawOutput"]["data"]["output"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(output.contains("proxy=[]"), "{output}");
    assert!(!output.contains("keel-proxy.sock"), "{output}");
}

/// The text of the last tool result the model was sent.
fn last_tool_result(mock: &MockModel) -> String {
    let requests = mock.requests();
    let body = &requests.last().unwrap().body;
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .rfind(|block| block["type"] == "tool_result")
        .map(|block| block["content"].to_string())
        .unwrap_or_default()
}

/// Each answer opens only the door it names: "always allow fetches from X" for `web_fetch`
/// gives shell commands no way to X (they get no proxy at all), while a `shell.net` rule for X
/// does, through the filtering proxy.
#[tokio::test]
async fn a_web_fetch_answer_never_lets_shell_commands_through_the_proxy() {
    let probe = "echo \"proxy=[$http_proxy]\"";
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::new().tool_call(
        "f1",
        "web_fetch",
        json!({"url": "http://fetch.example.invalid/"}),
    ));
    mock.push_anthropic(Turn::new().tool_call("b1", "bash", json!({ "command": probe })));
    mock.push_anthropic(Turn::text_only("done"));
    let home = super::support::KeelHome::new();
    let client = home
        .client(
            &mock,
            ClientOptions::default().permissions([
                PermissionReply::Choose(PermissionOptionKind::AllowAlways),
                PermissionReply::Choose(PermissionOptionKind::AllowOnce),
            ]),
            &[super::support::TEST_MODEL],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    client.prompt(&session, "fetch, then probe").await.unwrap();
    let asked = client.permission_requests();
    assert!(
        asked[0]
            .tool_call
            .fields
            .title
            .as_deref()
            .is_some_and(|t| t.contains("fetch.example.invalid")),
        "{asked:#?}"
    );
    // The "always" answer says which door it opens.
    let always = asked[0]
        .options
        .iter()
        .find(|option| option.kind == PermissionOptionKind::AllowAlways)
        .unwrap();
    assert!(
        always.name.contains("not shell commands' connections"),
        "{}",
        always.name
    );
    let output = last_tool_result(&mock);
    assert!(output.contains("proxy=[]"), "{output}");
    client.close().await.unwrap();

    // A shell.net rule for the host is what opens the proxy.
    home.user_config("");
    std::fs::write(
        home.home.join("config/keel/permissions.toml"),
        "[[permission]]\npermission = \"shell.net\"\npattern = \"fetch.example.invalid\"\naction = \"allow\"\n",
    )
    .unwrap();
    mock.push_anthropic(Turn::new().tool_call("b2", "bash", json!({ "command": probe })));
    mock.push_anthropic(Turn::text_only("done"));
    let client = home
        .client(
            &mock,
            ClientOptions::default()
                .permissions([PermissionReply::Choose(PermissionOptionKind::AllowOnce)]),
            &[super::support::TEST_MODEL],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    client.prompt(&session, "probe").await.unwrap();
    let output = last_tool_result(&mock);
    assert!(output.contains("proxy=[http://127.0.0.1:"), "{output}");
    client.close().await.unwrap();
}
