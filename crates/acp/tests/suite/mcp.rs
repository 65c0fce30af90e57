//! MCP servers end to end: the real `keel acp` binary, the mock model over HTTP, and
//! `keel-mcp-test-server` (a real MCP server written for these tests) over stdio and over
//! streamable HTTP on loopback.

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    CloseSessionRequest, ContentBlock, McpServer, McpServerStdio, NewSessionRequest,
    PermissionOptionKind, SessionId, SessionUpdate, StopReason, ToolCallStatus,
};
use keel_testkit::acp_client::{ClientOptions, PermissionReply, TestClient};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::{Value, json};

use super::support::{KeelHome, TEST_MODEL};

pub(super) const SERVER: &str = env!("CARGO_BIN_EXE_keel-mcp-test-server");

/// A [`KeelHome`] whose clients run on the test model and open sessions with MCP servers.
pub(super) struct World(KeelHome);

impl Deref for World {
    type Target = KeelHome;

    fn deref(&self) -> &KeelHome {
        &self.0
    }
}

impl World {
    pub(super) fn new() -> Self {
        Self(KeelHome::new())
    }

    pub(super) fn file(&self, name: &str) -> PathBuf {
        self.home.join(name)
    }

    /// `name` in a directory of logs the servers write: MCP servers run in the sandbox, where
    /// the home directory is hidden, so the test lets them write this one directory.
    pub(super) fn log(&self, name: &str) -> PathBuf {
        let dir = self.home.join("logs");
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    /// The configuration's table that lets the editor's server `server` write the logs
    /// directory ([`World::log`]).
    pub(super) fn logs_writable(&self, server: &str) -> String {
        let dir = self.home.join("logs");
        std::fs::create_dir_all(&dir).unwrap();
        format!(
            "[mcp_servers.{server}]\nwritable = [{:?}]\n",
            dir.display().to_string()
        )
    }

    pub(super) async fn client(
        &self,
        mock: &MockModel,
        replies: Vec<PermissionReply>,
    ) -> TestClient {
        self.0
            .client(
                mock,
                ClientOptions::default().permissions(replies),
                &[TEST_MODEL],
            )
            .await
    }

    pub(super) async fn session(&self, client: &TestClient, servers: Vec<McpServer>) -> SessionId {
        client
            .request(NewSessionRequest::new(&self.root).mcp_servers(servers))
            .await
            .unwrap()
            .session_id
    }
}

pub(super) fn stdio(name: &str, args: &[String]) -> McpServer {
    McpServer::Stdio(McpServerStdio::new(name, SERVER).args(args.to_vec()))
}

pub(super) fn args(pairs: &[(&str, &Path)]) -> Vec<String> {
    pairs
        .iter()
        .flat_map(|(flag, path)| [(*flag).to_owned(), path.display().to_string()])
        .collect()
}

/// Every agent message text of the session so far.
pub(super) fn said(client: &TestClient, session: &SessionId) -> String {
    client
        .updates(session)
        .into_iter()
        .filter_map(|update| match update {
            SessionUpdate::AgentMessageChunk(chunk) => match chunk.content {
                ContentBlock::Text(text) => Some(text.text),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Asks `/mcp` until its answer contains `what` (a hang guard bounds the wait).
pub(super) async fn wait_mcp(client: &TestClient, session: &SessionId, what: &str) -> String {
    for _ in 0..600 {
        let before = said(client, session).len();
        client.prompt(session, "/mcp").await.unwrap();
        let answer = said(client, session)[before..].to_owned();
        if answer.contains(what) {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("`/mcp` never said {what:?}: {}", said(client, session));
}

/// Waits until `check` holds (a hang guard, not a timing assertion).
pub(super) async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..600 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never: {what}");
}

pub(super) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

pub(super) fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

/// The tool results the model was sent in its last request.
pub(super) fn last_tool_results(mock: &MockModel) -> Vec<Value> {
    let requests = mock.requests();
    let last = requests.last().unwrap();
    last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|block| block["type"] == "tool_result")
        .collect()
}

#[tokio::test]
async fn an_mcp_tool_over_stdio_asks_and_runs_once_approved() {
    let world = World::new();
    let mock = MockModel::start().await;
    let client = world
        .client(
            &mock,
            vec![PermissionReply::Choose(PermissionOptionKind::AllowOnce)],
        )
        .await;
    let log = world.log("notes.log");
    world.user_config(&world.logs_writable("notes"));
    let session = world
        .session(&client, vec![stdio("notes", &args(&[("--log", &log)]))])
        .await;
    let status = wait_mcp(&client, &session, "ready").await;
    assert!(
        status.contains("`notes` (editor): ready, 5 tools"),
        "{status}"
    );
    assert!(status.contains("`mcp__notes__echo`"), "{status}");

    mock.push_anthropic(Turn::new().tool_call("c1", "mcp__notes__echo", json!({"text": "hi"})));
    mock.push_anthropic(Turn::text_only("Done."));
    let answer = client.prompt(&session, "echo hi").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    // The model was offered the server's tools with their schemas.
    let first = &mock.requests()[0].body;
    let echo = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__notes__echo")
        .unwrap();
    assert_eq!(echo["input_schema"]["required"], json!(["text"]));
    // Five tools fit the budget: all are sent, and `tool_search` is not offered.
    assert!(!tool_names(first).contains(&"tool_search".to_owned()));
    // It asked (default ask for MCP tools), with the tool's id and kind.
    let asked = client.permission_requests();
    assert_eq!(asked.len(), 1);
    let call = serde_json::to_value(&asked[0].tool_call).unwrap();
    assert_eq!(call["kind"], "other", "{call}");
    let results = last_tool_results(&mock);
    assert_eq!(results[0]["content"], "echo: hi", "{results:?}");
    assert!(read(&log).contains("tools/call"));

    // Arguments that do not match the server's schema never reach it.
    mock.push_anthropic(Turn::new().tool_call("c2", "mcp__notes__echo", json!({"txt": 1})));
    mock.push_anthropic(Turn::text_only("Oops."));
    client.prompt(&session, "again").await.unwrap();
    let results = last_tool_results(&mock);
    let text = results.last().unwrap()["content"].to_string();
    assert!(text.contains("invalid arguments"), "{text}");
    assert_eq!(read(&log).matches("tools/call").count(), 1);
    assert_eq!(client.permission_requests().len(), 1);
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_configured_server_over_http_is_denied_by_a_rule_and_read_only_tools_do_not_ask() {
    let world = World::new();
    let port_file = world.file("port");
    let log = world.file("http.log");
    #[expect(clippy::disallowed_methods, reason = "the test starts its MCP server")]
    let _server = tokio::process::Command::new(SERVER)
        .args(args(&[("--http", &port_file), ("--log", &log)]))
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    eventually("the HTTP server is listening", || port_file.exists()).await;
    let port = read(&port_file);
    world.user_config(&format!(
        "[mcp_servers.notes]\nurl = \"http://127.0.0.1:{port}/mcp\"\n\n\
         [[permission]]\npermission = \"mcp.call\"\npattern = \"notes/wipe\"\naction = \"deny\"\n\n\
         [[permission]]\npermission = \"mcp__notes__read_note\"\naction = \"allow\"\n"
    ));
    let mock = MockModel::start().await;
    let client = world.client(&mock, Vec::new()).await;
    let session = world.session(&client, Vec::new()).await;
    let status = wait_mcp(&client, &session, "ready").await;
    assert!(
        status.contains("`notes` (user config): ready, 5 tools"),
        "{status}"
    );

    mock.push_anthropic(Turn::new().tool_call("c1", "mcp__notes__wipe", json!({})));
    mock.push_anthropic(Turn::new().tool_call(
        "c2",
        "mcp__notes__read_note",
        json!({"name": "todo"}),
    ));
    mock.push_anthropic(Turn::text_only("Done."));
    client.prompt(&session, "wipe, then read").await.unwrap();
    assert!(client.permission_requests().is_empty());
    let results = last_tool_results(&mock);
    assert_eq!(results[0]["is_error"], true, "{results:?}");
    assert!(
        results[0]["content"].to_string().contains("deny"),
        "{results:?}"
    );
    assert_eq!(results[1]["content"], "note todo", "{results:?}");
    // The denied call never reached the server.
    assert_eq!(
        read(&log).matches("tools/call").count(),
        1,
        "{}",
        read(&log)
    );
    // Kinds follow the annotations: destructive → edit (delete when the name says so),
    // read-only → read.
    let kinds: Vec<Value> = client
        .updates(&session)
        .into_iter()
        .filter_map(|update| match update {
            SessionUpdate::ToolCall(call) => {
                Some(serde_json::to_value(&call).unwrap()["kind"].clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(kinds, [json!("edit"), json!("read")]);
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_server_that_crashes_mid_session_is_reported_restarted_and_the_session_goes_on() {
    let world = World::new();
    let mock = MockModel::start().await;
    let client = world
        .client(
            &mock,
            vec![PermissionReply::Choose(PermissionOptionKind::AllowOnce); 2],
        )
        .await;
    let log = world.log("crash.log");
    world.user_config(&world.logs_writable("notes"));
    let session = world
        .session(&client, vec![stdio("notes", &args(&[("--log", &log)]))])
        .await;
    wait_mcp(&client, &session, "ready").await;
    mock.push_anthropic(Turn::new().tool_call("c1", "mcp__notes__crash", json!({})));
    mock.push_anthropic(Turn::text_only("It crashed."));
    let answer = client.prompt(&session, "crash it").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    let results = last_tool_results(&mock);
    assert_eq!(results[0]["is_error"], true, "{results:?}");
    eventually("the crash is reported", || {
        said(&client, &session)
            .contains("The MCP server `notes` stopped (it closed the connection); restarting it")
    })
    .await;
    // Restarted: a new process answered `initialize`, and its tools work again.
    let status = wait_mcp(&client, &session, "ready").await;
    assert!(status.contains("ready, 5 tools"), "{status}");
    assert!(
        read(&log).matches("initialize").count() >= 2,
        "{}",
        read(&log)
    );
    mock.push_anthropic(Turn::new().tool_call("c2", "mcp__notes__echo", json!({"text": "back"})));
    mock.push_anthropic(Turn::text_only("Back."));
    client.prompt(&session, "echo").await.unwrap();
    assert_eq!(last_tool_results(&mock)[1]["content"], "echo: back");
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_server_that_never_starts_does_not_hold_up_the_session() {
    let world = World::new();
    let mock = MockModel::start().await;
    let client = world.client(&mock, Vec::new()).await;
    let session = world
        .session(
            &client,
            vec![
                stdio("stuck", &["--hang".to_owned()]),
                McpServer::Stdio(McpServerStdio::new("absent", "/nonexistent/mcp-server")),
            ],
        )
        .await;
    // The session works while `stuck` is still starting.
    mock.push_anthropic(Turn::text_only("Hello."));
    let answer = client.prompt(&session, "hi").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    let status = wait_mcp(&client, &session, "`absent` (editor): failed").await;
    assert!(status.contains("`stuck` (editor): starting"), "{status}");
    assert!(
        status.contains("cannot start `/nonexistent/mcp-server`"),
        "{status}"
    );
    assert!(
        said(&client, &session).contains("The MCP server `absent` failed to start"),
        "{}",
        said(&client, &session)
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn cancelling_a_slow_mcp_call_cancels_it_at_the_server() {
    let world = World::new();
    let mock = MockModel::start().await;
    let client = world
        .client(
            &mock,
            vec![PermissionReply::Choose(PermissionOptionKind::AllowOnce)],
        )
        .await;
    let log = world.log("slow.log");
    world.user_config(&world.logs_writable("notes"));
    let session = world
        .session(&client, vec![stdio("notes", &args(&[("--log", &log)]))])
        .await;
    wait_mcp(&client, &session, "ready").await;
    mock.push_anthropic(Turn::new().tool_call("c1", "mcp__notes__slow", json!({})));
    let prompt = client.start_prompt(&session, "be slow");
    eventually("the slow call runs", || {
        client.updates(&session).iter().any(|update| {
            matches!(update, SessionUpdate::ToolCallUpdate(u)
                if u.fields.status == Some(ToolCallStatus::InProgress))
        })
    })
    .await;
    eventually("the server got the call", || {
        read(&log).contains("tools/call")
    })
    .await;
    client.cancel(&session).unwrap();
    let answer = prompt.await.unwrap().unwrap();
    assert_eq!(answer.stop_reason, StopReason::Cancelled);
    eventually("the server is told", || read(&log).contains("cancelled")).await;
    client.close().await.unwrap();
}

#[tokio::test]
async fn no_server_process_outlives_its_session_or_keel() {
    let world = World::new();
    let mock = MockModel::start().await;
    let client = world.client(&mock, Vec::new()).await;
    let (first, second) = (world.file("first.pid"), world.file("second.pid"));
    let one = world
        .session(
            &client,
            vec![stdio("one", &args(&[("--pid-file", &first)]))],
        )
        .await;
    let two = world
        .session(
            &client,
            vec![stdio("two", &args(&[("--pid-file", &second)]))],
        )
        .await;
    wait_mcp(&client, &one, "ready").await;
    wait_mcp(&client, &two, "ready").await;
    // The pid a server writes is its pid in the sandbox's PID namespace: find the process by
    // its arguments instead.
    let (pid_one, pid_two) = (server_pid(&first), server_pid(&second));
    assert!(alive(pid_one) && alive(pid_two));
    client.request(CloseSessionRequest::new(one)).await.unwrap();
    eventually("the closed session's server is gone", || !alive(pid_one)).await;
    assert!(alive(pid_two));
    client.close().await.unwrap();
    eventually("Keel's exit ends the other one", || !alive(pid_two)).await;
}

/// The host pid of the test server started with `marker` among its arguments (not the sandbox
/// helper wrapping it, whose arguments hold the same words).
pub(super) fn server_pid(marker: &Path) -> i32 {
    let marker = marker.display().to_string();
    let found: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let words: Vec<String> = cmdline
                .split(|b| *b == 0)
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect();
            words.first().is_some_and(|first| first == SERVER) && words.contains(&marker)
        })
        .collect();
    assert_eq!(found.len(), 1, "test servers with {marker}: {found:?}");
    found[0]
}

pub(super) fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn five_hundred_tools_are_left_out_and_found_through_tool_search() {
    let world = World::new();
    let mock = MockModel::start().await;
    let client = world
        .client(
            &mock,
            vec![PermissionReply::Choose(PermissionOptionKind::AllowOnce)],
        )
        .await;
    let session = world
        .session(
            &client,
            vec![
                stdio("notes", &["--tools".to_owned(), "250".to_owned()]),
                stdio("more", &["--tools".to_owned(), "245".to_owned()]),
            ],
        )
        .await;
    wait_mcp(&client, &session, "`more` (editor): ready, 250 tools").await;
    wait_mcp(&client, &session, "`notes` (editor): ready, 255 tools").await;

    mock.push_anthropic(Turn::new().tool_call(
        "s1",
        "tool_search",
        json!({"query": "weather of city 123"}),
    ));
    mock.push_anthropic(Turn::new().tool_call(
        "c1",
        "mcp__notes__tool_0123",
        json!({"city": "Oslo"}),
    ));
    mock.push_anthropic(Turn::text_only("Sunny."));
    let answer = client
        .prompt(&session, "weather in city 123?")
        .await
        .unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    // The first request carries the bundled tools and `tool_search` only, and stays small.
    let first = tool_names(&requests[0].body);
    assert!(first.contains(&"tool_search".to_owned()), "{first:?}");
    assert!(
        !first.iter().any(|name| name.starts_with("mcp__")),
        "{first:?}"
    );
    let size = requests[0].raw_body.len();
    // What the 500 tools cost the first request: `tool_search`'s definition, under 1 KB. The
    // rest is the system prompt and the bundled tools (docs/benchmarks.md).
    let search = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "tool_search")
        .unwrap()
        .to_string()
        .len();
    assert!(search < 1024, "tool_search's definition is {search} bytes");
    // 17,000: the bundled tools grew by `apply_patch` (431 bytes) and the four background
    // tools (about 1.4 KB; docs/benchmarks.md).
    assert!(size < 17_000, "the first request is {size} bytes");
    eprintln!("first request with 500 MCP tools behind tool_search: {size} bytes");
    // The search finds the right tool first.
    let results = last_tool_results(&mock);
    let found = results[0]["content"].as_str().unwrap();
    let first_found = found.lines().nth(1).unwrap_or_default();
    assert!(
        first_found.starts_with("- mcp__notes__tool_0123:"),
        "{found}"
    );
    // The next request carries it, and the call works.
    let second = tool_names(&requests[1].body);
    assert!(
        second.contains(&"mcp__notes__tool_0123".to_owned()),
        "{second:?}"
    );
    assert!(second.len() < first.len() + 6, "{second:?}");
    assert_eq!(results[1]["content"], "tool_0123: sunny in Oslo");
    client.close().await.unwrap();
}

/// Runs `keel ARGS` in the workspace with the world's directories; its stdout.
pub(super) fn keel(world: &World, args: &[&str]) -> String {
    let dir = |name: &str| world.home.join(name).display().to_string();
    let output = assert_cmd::Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .current_dir(&world.root)
        .env("HOME", dir(""))
        .env("XDG_CONFIG_HOME", dir("config"))
        .env("XDG_STATE_HOME", dir("state"))
        .env("XDG_DATA_HOME", dir("data"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn a_project_tool_file_waits_for_trust_then_runs_with_its_origin_shown() {
    let world = World::new();
    std::fs::create_dir_all(world.root.join(".keel/tools")).unwrap();
    std::fs::write(
        world.root.join(".keel/tools/greet.toml"),
        "id = \"greet\"\ndescription = \"Greet someone.\"\nargv = [\"echo\", \"hello {name}\"]\n\
         timeoutMs = 20000\n\n[parameters]\ntype = \"object\"\nrequired = [\"name\"]\n\
         [parameters.properties.name]\ntype = \"string\"\n",
    )
    .unwrap();
    let mock = MockModel::start().await;

    // Untrusted: not listed, not offered, not callable.
    let listed = keel(&world, &["tools"]);
    assert!(!listed.lines().any(|l| l.starts_with("greet")), "{listed}");
    assert!(listed.contains("wait for project trust"), "{listed}");
    let client = world.client(&mock, Vec::new()).await;
    let session = world.session(&client, Vec::new()).await;
    mock.push_anthropic(Turn::new().tool_call("g1", "greet", json!({"name": "Ada"})));
    mock.push_anthropic(Turn::text_only("No such tool."));
    client.prompt(&session, "greet Ada").await.unwrap();
    assert!(!tool_names(&mock.requests()[0].body).contains(&"greet".to_owned()));
    let results = last_tool_results(&mock);
    assert!(
        results[0]["content"]
            .to_string()
            .contains("unknown tool `greet`"),
        "{results:?}"
    );
    client.close().await.unwrap();

    // Trusted: listed with its origin, offered, and it runs (after the user allows it).
    keel(&world, &["trust", "grant"]);
    let listed = keel(&world, &["tools"]);
    let row = listed
        .lines()
        .find(|l| l.starts_with("greet"))
        .unwrap_or_default();
    assert!(row.contains("project"), "{listed}");
    let client = world
        .client(
            &mock,
            vec![PermissionReply::Choose(PermissionOptionKind::AllowOnce)],
        )
        .await;
    let session = world.session(&client, Vec::new()).await;
    mock.push_anthropic(Turn::new().tool_call("g2", "greet", json!({"name": "Ada; rm -rf ~"})));
    mock.push_anthropic(Turn::text_only("Greeted."));
    client.prompt(&session, "greet Ada").await.unwrap();
    let results = last_tool_results(&mock);
    assert_eq!(
        results[0]["content"], "hello Ada; rm -rf ~\n",
        "{results:?}"
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn mcp_prompts_become_slash_commands() {
    let world = World::new();
    let mock = MockModel::start().await;
    let client = world.client(&mock, Vec::new()).await;
    let session = world.session(&client, vec![stdio("notes", &[])]).await;
    wait_mcp(&client, &session, "ready").await;
    // Once the server is ready, the command list is sent again with its prompt.
    eventually("the prompt is advertised", || {
        client.updates(&session).iter().any(|update| match update {
            SessionUpdate::AvailableCommandsUpdate(update) => update
                .available_commands
                .iter()
                .any(|c| c.name == "notes:review" && c.description == "Review a file."),
            _ => false,
        })
    })
    .await;
    mock.push_anthropic(Turn::text_only("Looks fine."));
    let answer = client
        .prompt(&session, "/notes:review file=src/lib.rs focus=errors")
        .await
        .unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    let sent = mock.requests()[0].body["messages"].to_string();
    assert!(
        sent.contains("Please review src/lib.rs. Focus on errors."),
        "{sent}"
    );
    // The whole text fills the first argument; a missing required one is said, not sent.
    mock.push_anthropic(Turn::text_only("Ok."));
    client
        .prompt(&session, "/notes:review main.rs")
        .await
        .unwrap();
    assert!(
        mock.requests()[1].body["messages"]
            .to_string()
            .contains("Please review main.rs.")
    );
    client
        .prompt(&session, "/notes:review focus=x")
        .await
        .unwrap();
    assert!(said(&client, &session).contains("`/notes:review` needs `file=...`"));
    assert_eq!(mock.requests().len(), 2);
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_loaded_session_connects_the_servers_of_its_load_request() {
    use agent_client_protocol::v1::schema::LoadSessionRequest;
    let world = World::new();
    let mock = MockModel::start().await;
    let client = world.client(&mock, Vec::new()).await;
    let session = world.session(&client, Vec::new()).await;
    mock.push_anthropic(Turn::text_only("Hello."));
    client.prompt(&session, "hi").await.unwrap();
    client
        .request(CloseSessionRequest::new(session.clone()))
        .await
        .unwrap();
    client
        .request(
            LoadSessionRequest::new(session.clone(), &world.root)
                .mcp_servers(vec![stdio("notes", &[])]),
        )
        .await
        .unwrap();
    let status = wait_mcp(&client, &session, "ready").await;
    assert!(
        status.contains("`notes` (editor): ready, 5 tools"),
        "{status}"
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn the_tool_search_threshold_is_configurable() {
    let world = World::new();
    world.user_config("[tool_search]\nmax_tools = 4\n");
    let mock = MockModel::start().await;
    let client = world.client(&mock, Vec::new()).await;
    let session = world.session(&client, vec![stdio("notes", &[])]).await;
    wait_mcp(&client, &session, "ready, 5 tools").await;
    mock.push_anthropic(Turn::text_only("Hi."));
    client.prompt(&session, "hi").await.unwrap();
    let names = tool_names(&mock.requests()[0].body);
    assert!(names.contains(&"tool_search".to_owned()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("mcp__")), "{names:?}");
    client.close().await.unwrap();
}

/// `[tools.ID] enabled = false` holds for MCP tools too: the disabled tool is never offered,
/// a call by name finds no such tool and never reaches the server, and `/mcp` says it was left
/// out. A disabled id that matches nothing (a typo, a server that is not configured) is
/// reported by `keel tools` and `keel doctor`.
#[tokio::test]
async fn a_disabled_mcp_tool_is_never_offered_nor_run_and_a_stray_id_is_reported() {
    let world = World::new();
    let log = world.log("notes.log");
    world.user_config(&format!(
        "[mcp_servers.notes]\ncommand = {:?}\nargs = [\"--log\", {:?}]\nwritable = [{:?}]\n\n\
         [tools.mcp__notes__echo]\nenabled = false\n\n\
         [tools.mcp__nosuch__echo]\nenabled = false\n\n\
         [tools.raed]\nenabled = false\n",
        SERVER,
        log.display().to_string(),
        log.parent().unwrap().display().to_string()
    ));
    let mock = MockModel::start().await;
    let client = world.client(&mock, Vec::new()).await;
    let session = world.session(&client, Vec::new()).await;
    let status = wait_mcp(&client, &session, "ready").await;
    assert!(read(&log).contains("tools/list"), "{}", read(&log));
    assert!(
        status.contains("`echo` (disabled: `[tools.mcp__notes__echo] enabled = false`)"),
        "{status}"
    );
    assert!(!status.contains("`mcp__notes__echo`"), "{status}");

    mock.push_anthropic(Turn::new().tool_call("c1", "mcp__notes__echo", json!({"text": "hi"})));
    mock.push_anthropic(Turn::text_only("Done."));
    let answer = client.prompt(&session, "echo hi").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    let offered = tool_names(&mock.requests()[0].body);
    assert!(
        !offered.contains(&"mcp__notes__echo".to_owned()),
        "{offered:?}"
    );
    assert!(
        offered.contains(&"mcp__notes__read_note".to_owned()),
        "{offered:?}"
    );
    let results = last_tool_results(&mock);
    assert!(
        results[0]["content"].to_string().contains("unknown tool"),
        "{results:?}"
    );
    assert!(!read(&log).contains("tools/call"), "{}", read(&log));
    client.close().await.unwrap();

    // The stray ids are reported; the one that names a configured server's tool is not.
    let tools = keel(&world, &["tools"]);
    for stray in ["mcp__nosuch__echo", "raed"] {
        assert!(
            tools.contains(&format!(
                "`[tools.{stray}] enabled = false` matches no tool"
            )),
            "{tools}"
        );
    }
    assert!(
        !tools.contains("[tools.mcp__notes__echo] enabled = false` matches"),
        "{tools}"
    );
    let dir = |name: &str| world.home.join(name).display().to_string();
    let doctor = assert_cmd::Command::new(env!("CARGO_BIN_EXE_keel"))
        .arg("doctor")
        .current_dir(&world.root)
        .env("HOME", dir(""))
        .env("XDG_CONFIG_HOME", dir("config"))
        .env("XDG_STATE_HOME", dir("state"))
        .env("XDG_DATA_HOME", dir("data"))
        .output()
        .unwrap();
    let doctor = String::from_utf8(doctor.stdout).unwrap();
    assert!(
        doctor.contains("`[tools.raed] enabled = false` matches no tool")
            && doctor.contains("`[tools.mcp__nosuch__echo] enabled = false` matches no tool"),
        "{doctor}"
    );
}
