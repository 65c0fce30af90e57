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

const SERVER: &str = env!("CARGO_BIN_EXE_keel-mcp-test-server");

/// A [`KeelHome`] whose clients run on the test model and open sessions with MCP servers.
struct World(KeelHome);

impl Deref for World {
    type Target = KeelHome;

    fn deref(&self) -> &KeelHome {
        &self.0
    }
}

impl World {
    fn new() -> Self {
        Self(KeelHome::new())
    }

    fn file(&self, name: &str) -> PathBuf {
        self.home.join(name)
    }

    /// `name` in a directory of logs the servers write: MCP servers run in the sandbox, where
    /// the home directory is hidden, so the test lets them write this one directory.
    fn log(&self, name: &str) -> PathBuf {
        let dir = self.home.join("logs");
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    /// The configuration's table that lets the editor's server `server` write the logs
    /// directory ([`World::log`]).
    fn logs_writable(&self, server: &str) -> String {
        let dir = self.home.join("logs");
        std::fs::create_dir_all(&dir).unwrap();
        format!(
            "[mcp_servers.{server}]\nwritable = [{:?}]\n",
            dir.display().to_string()
        )
    }

    async fn client(&self, mock: &MockModel, replies: Vec<PermissionReply>) -> TestClient {
        self.0
            .client(
                mock,
                ClientOptions::default().permissions(replies),
                &[TEST_MODEL],
            )
            .await
    }

    async fn session(&self, client: &TestClient, servers: Vec<McpServer>) -> SessionId {
        client
            .request(NewSessionRequest::new(&self.root).mcp_servers(servers))
            .await
            .unwrap()
            .session_id
    }
}

fn stdio(name: &str, args: &[String]) -> McpServer {
    McpServer::Stdio(McpServerStdio::new(name, SERVER).args(args.to_vec()))
}

fn args(pairs: &[(&str, &Path)]) -> Vec<String> {
    pairs
        .iter()
        .flat_map(|(flag, path)| [(*flag).to_owned(), path.display().to_string()])
        .collect()
}

/// Every agent message text of the session so far.
fn said(client: &TestClient, session: &SessionId) -> String {
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
async fn wait_mcp(client: &TestClient, session: &SessionId, what: &str) -> String {
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
async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..600 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never: {what}");
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

/// The tool results the model was sent in its last request.
fn last_tool_results(mock: &MockModel) -> Vec<Value> {
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
fn server_pid(marker: &Path) -> i32 {
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

fn tool_names(body: &Value) -> Vec<String> {
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
fn keel(world: &World, args: &[&str]) -> String {
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

/// A server the user configured runs what the user configured, whatever the repository holds:
/// a Python package named like the server's module, npx's `node_modules` copy of a server and
/// an `.npmrc` choosing its registry. (Servers started in the workspace ran the repository's
/// module: `python3 -m` puts the working directory first on `sys.path`.) And the server, which
/// runs in the sandbox, cannot rewrite those look-alikes for the next session either.
#[tokio::test]
async fn a_repository_cannot_choose_what_a_configured_server_runs() {
    let world = World::new();
    let marker = world.log("the-repository-ran");
    // The real server, as the user installed it: a module that starts the test server.
    let lib = world.file("pylib/keelprobe");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(
        lib.join("__main__.py"),
        format!("import os\nos.execv({SERVER:?}, [{SERVER:?}, '--probe'])\n"),
    )
    .unwrap();
    // The repository's look-alikes (the module would leave a mark and serve nothing).
    let planted = world.root.join("keelprobe/__main__.py");
    std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
    let planted_text = format!(
        "open({:?}, 'w').write('ran')\n",
        marker.display().to_string()
    );
    std::fs::write(&planted, &planted_text).unwrap();
    let npm = world
        .root
        .join("node_modules/@modelcontextprotocol/server-github");
    std::fs::create_dir_all(&npm).unwrap();
    std::fs::write(
        npm.join("package.json"),
        r#"{"name":"@modelcontextprotocol/server-github","bin":{"mcp-server-github":"x.js"}}"#,
    )
    .unwrap();
    std::fs::write(world.root.join(".npmrc"), "registry=http://127.0.0.1:9/\n").unwrap();
    let quoted = |path: &Path| format!("{:?}", path.display().to_string());
    world.user_config(&format!(
        "[mcp_servers.probe]\ncommand = \"python3\"\nargs = [\"-m\", \"keelprobe\"]\n\
         env = {{ PYTHONPATH = {pylib} }}\nread = [{pylib}, {server:?}]\nwritable = [{logs}]\n\n\
         [[permission]]\npermission = \"mcp.call\"\nprefix = \"probe\"\naction = \"allow\"\n",
        pylib = quoted(&world.file("pylib")),
        server = SERVER,
        logs = quoted(marker.parent().unwrap()),
    ));
    let mock = MockModel::start().await;
    let client = world.client(&mock, Vec::new()).await;
    let session = world.session(&client, Vec::new()).await;
    let status = wait_mcp(&client, &session, "ready").await;
    assert!(
        status.contains("`probe` (user config): ready, 9 tools"),
        "{status}"
    );
    assert!(
        !marker.exists(),
        "the repository's module ran in place of the configured server"
    );
    mock.push_anthropic(Turn::new().tool_call(
        "w1",
        "mcp__probe__try_write",
        json!({"path": planted.display().to_string()}),
    ));
    mock.push_anthropic(Turn::text_only("Done."));
    client.prompt(&session, "plant it").await.unwrap();
    let results = last_tool_results(&mock);
    assert!(
        results[0]["content"].to_string().contains("cannot write"),
        "{results:?}"
    );
    assert_eq!(std::fs::read_to_string(&planted).unwrap(), planted_text);
    client.close().await.unwrap();
}

/// `keel-mcp-test-server --probe` tool calls, one response, and what each answered (in order).
async fn probe_calls(
    mock: &MockModel,
    client: &TestClient,
    session: &SessionId,
    calls: &[(&str, &str, Value)],
) -> Vec<String> {
    let mut turn = Turn::new();
    for (n, (server, tool, input)) in calls.iter().enumerate() {
        turn = turn.tool_call(
            format!("p{n}"),
            format!("mcp__{server}__{tool}"),
            input.clone(),
        );
    }
    mock.push_anthropic(turn);
    mock.push_anthropic(Turn::text_only("Probed."));
    let answer = client.prompt(session, "probe").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    tool_result_texts(mock)
}

/// The tool results of the model's last request, as text.
fn tool_result_texts(mock: &MockModel) -> Vec<String> {
    last_tool_results(mock)
        .iter()
        .map(|result| match &result["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .collect()
}

/// A home with a cloud credential and a workspace with a directory the server may write.
fn credentials_and_workspace(world: &World) -> PathBuf {
    let aws = world.file(".aws/credentials");
    std::fs::create_dir_all(aws.parent().unwrap()).unwrap();
    std::fs::write(
        &aws,
        "[default]\naws_secret_access_key = CANARY-AWS-SECRET\n",
    )
    .unwrap();
    std::fs::write(world.root.join("README.md"), "hello from the workspace\n").unwrap();
    std::fs::create_dir_all(world.root.join("out")).unwrap();
    aws
}

/// A stdio server runs like a command: in the sandbox (`/mcp` says which mechanism), from a
/// directory that is not the workspace, with the workspace readable but not writable (but for
/// the paths its table lists), the home's credentials hidden, and its configured environment.
/// A credential its own table names reaches it. (Servers ran unconfined: they wrote the
/// workspace and read `~/.aws/credentials`.)
async fn a_server_is_confined(sandbox: &str) {
    let world = World::new();
    let aws = credentials_and_workspace(&world);
    let npx = world.file(".npm/_npx");
    std::fs::create_dir_all(&npx).unwrap();
    world.user_config(&format!(
        "{sandbox}\
         [mcp_servers.probe]\ncommand = {SERVER:?}\nargs = [\"--probe\"]\n\
         env = {{ PROBE_TOKEN = \"given-by-the-config\" }}\nwritable = [\"out\"]\n\n\
         [mcp_servers.aws]\ncommand = {SERVER:?}\nargs = [\"--probe\"]\nread = [\"~/.aws\"]\n\n\
         [[permission]]\npermission = \"mcp.call\"\nprefix = \"probe\"\naction = \"allow\"\n\n\
         [[permission]]\npermission = \"mcp.call\"\nprefix = \"aws\"\naction = \"allow\"\n"
    ));
    let mock = MockModel::start().await;
    let client = world.client(&mock, Vec::new()).await;
    let session = world.session(&client, Vec::new()).await;
    wait_mcp(&client, &session, "`aws` (user config): ready").await;
    let status = wait_mcp(&client, &session, "`probe` (user config): ready").await;
    assert!(
        status.contains("(sandbox: namespaces)") || status.contains("(sandbox: landlock)"),
        "{status}"
    );
    if sandbox.contains("landlock") {
        assert!(status.contains("(sandbox: landlock)"), "{status}");
    }
    let at = |path: &Path| json!({"path": path.display().to_string()});
    let answers = probe_calls(
        &mock,
        &client,
        &session,
        &[
            ("probe", "whereami", json!({})),
            ("probe", "try_write", at(&world.root.join("pwned"))),
            ("probe", "try_write", at(&world.root.join("out/ok"))),
            ("probe", "try_read", at(&aws)),
            ("probe", "getenv", json!({"name": "PROBE_TOKEN"})),
            ("probe", "try_read", at(&world.root.join("README.md"))),
            ("aws", "try_read", at(&aws)),
            ("aws", "whereami", json!({})),
            ("probe", "getenv", json!({"name": "npm_config_cache"})),
            ("probe", "try_write", at(&npx.join("planted"))),
        ],
    )
    .await;
    assert!(
        !Path::new(&answers[0]).starts_with(&world.root),
        "the server started in the workspace: {answers:?}"
    );
    // Each server has a directory of its own: one cannot plant files for another's launcher.
    assert!(answers[0].ends_with("/mcp/probe"), "{answers:?}");
    assert!(answers[7].ends_with("/mcp/aws"), "{answers:?}");
    // Its packages go to a cache of its own, never into one the user's npx runs from.
    assert!(answers[8].ends_with("/mcp/probe/npm"), "{answers:?}");
    assert!(answers[9].starts_with("cannot write"), "{answers:?}");
    assert!(!npx.join("planted").exists());
    assert!(answers[1].starts_with("cannot write"), "{answers:?}");
    assert!(!world.root.join("pwned").exists());
    assert_eq!(answers[2], "wrote", "{answers:?}");
    assert!(world.root.join("out/ok").exists());
    assert!(!answers[3].contains("CANARY"), "{answers:?}");
    assert_eq!(answers[4], "given-by-the-config", "{answers:?}");
    assert!(
        answers[5].contains("hello from the workspace"),
        "{answers:?}"
    );
    assert!(answers[6].contains("CANARY-AWS-SECRET"), "{answers:?}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_server_runs_in_the_sandbox_and_sees_only_what_its_table_names() {
    a_server_is_confined("").await;
}

#[tokio::test]
async fn a_server_is_confined_under_the_landlock_fallback_too() {
    a_server_is_confined("[sandbox]\nmechanism = \"landlock\"\n\n").await;
}

/// `keel exec` starts its servers through the same sandbox (and waits for them before the
/// model's first request, which offers their tools).
#[tokio::test]
async fn a_server_under_keel_exec_is_confined_the_same_way() {
    let world = World::new();
    let aws = credentials_and_workspace(&world);
    world.user_config(&format!(
        "[mcp_servers.probe]\ncommand = {SERVER:?}\nargs = [\"--probe\"]\n\n\
         [[permission]]\npermission = \"mcp.call\"\nprefix = \"probe\"\naction = \"allow\"\n"
    ));
    let mock = MockModel::start().await;
    let at = |path: &Path| json!({"path": path.display().to_string()});
    mock.push_anthropic(
        Turn::new()
            .tool_call("e1", "mcp__probe__whereami", json!({}))
            .tool_call("e2", "mcp__probe__try_write", at(&world.root.join("pwned")))
            .tool_call("e3", "mcp__probe__try_read", at(&aws)),
    );
    mock.push_anthropic(Turn::text_only("Probed."));
    let env = world.env(&mock, &[TEST_MODEL]);
    let root = world.root.clone();
    let output = tokio::task::spawn_blocking(move || {
        #[expect(clippy::disallowed_methods, reason = "the test runs keel exec")]
        std::process::Command::new(env!("CARGO_BIN_EXE_keel"))
            .args(["exec", "probe the server"])
            .current_dir(&root)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // The first request offered the server's tools.
    let offered = tool_names(&mock.requests()[0].body);
    assert!(
        offered.contains(&"mcp__probe__try_write".to_owned()),
        "{offered:?}"
    );
    let answers = tool_result_texts(&mock);
    assert!(
        !Path::new(&answers[0]).starts_with(&world.root),
        "{answers:?}"
    );
    assert!(answers[1].starts_with("cannot write"), "{answers:?}");
    assert!(!world.root.join("pwned").exists());
    assert!(!answers[2].contains("CANARY"), "{answers:?}");
}

/// A trusted project's own server starts in the workspace (its arguments name the project's
/// files) but inside the same layers: it cannot write the workspace or read the home's
/// credentials. (It ran unconfined, with the user's rights.)
#[tokio::test]
async fn a_project_server_is_inside_the_same_layers() {
    let world = World::new();
    let aws = credentials_and_workspace(&world);
    std::fs::create_dir_all(world.root.join(".keel")).unwrap();
    std::fs::write(
        world.root.join(".keel/config.toml"),
        format!("[mcp_servers.proj]\ncommand = {SERVER:?}\nargs = [\"--probe\"]\n"),
    )
    .unwrap();
    world.user_config(
        "[[permission]]\npermission = \"mcp.call\"\nprefix = \"proj\"\naction = \"allow\"\n",
    );
    keel(&world, &["trust", "grant"]);
    let mock = MockModel::start().await;
    let client = world.client(&mock, Vec::new()).await;
    let session = world.session(&client, Vec::new()).await;
    let status = wait_mcp(&client, &session, "`proj` (project config): ready").await;
    assert!(!status.contains("unconfined"), "{status}");
    let at = |path: &Path| json!({"path": path.display().to_string()});
    let answers = probe_calls(
        &mock,
        &client,
        &session,
        &[
            ("proj", "whereami", json!({})),
            ("proj", "try_write", at(&world.root.join("pwned"))),
            ("proj", "try_read", at(&aws)),
            ("proj", "try_read", at(&world.root.join("README.md"))),
        ],
    )
    .await;
    assert_eq!(Path::new(&answers[0]), world.root, "{answers:?}");
    assert!(answers[1].starts_with("cannot write"), "{answers:?}");
    assert!(!world.root.join("pwned").exists());
    assert!(!answers[2].contains("CANARY"), "{answers:?}");
    assert!(
        answers[3].contains("hello from the workspace"),
        "{answers:?}"
    );
    client.close().await.unwrap();
}

/// A server that fails to start is reported with the last lines of its own stderr, and, when it
/// ran in the sandbox, with what the sandbox withheld and how its table widens it. (The server
/// wrote the workspace and started.)
#[tokio::test]
async fn a_server_that_fails_to_start_in_the_sandbox_shows_its_stderr() {
    let world = World::new();
    let target = world.root.join("started");
    world.user_config(&format!(
        "[mcp_servers.boot]\ncommand = {SERVER:?}\nargs = [\"--write-at-start\", {:?}]\n",
        target.display().to_string()
    ));
    let mock = MockModel::start().await;
    let client = world.client(&mock, Vec::new()).await;
    let session = world.session(&client, Vec::new()).await;
    let status = wait_mcp(&client, &session, "`boot` (user config): failed").await;
    assert!(!target.exists());
    let told = said(&client, &session);
    for text in [&status, &told] {
        assert!(text.contains("Its last lines on stderr:"), "{text}");
        assert!(text.contains("keel-mcp-test-server: starting up"), "{text}");
        assert!(
            text.contains(&format!("cannot write {}", target.display())),
            "{text}"
        );
        assert!(text.contains("It ran in the sandbox ("), "{text}");
        assert!(text.contains("`[mcp_servers.boot]`"), "{text}");
    }
    client.close().await.unwrap();
}

/// `[sandbox] mode = "off"` is the user's way out: servers run as before, unconfined, and `/mcp`
/// says so.
#[tokio::test]
async fn with_the_sandbox_off_a_server_runs_unconfined_and_says_so() {
    let world = World::new();
    world.user_config(&format!(
        "[sandbox]\nmode = \"off\"\n\n\
         [mcp_servers.probe]\ncommand = {SERVER:?}\nargs = [\"--probe\"]\n\n\
         [[permission]]\npermission = \"mcp.call\"\nprefix = \"probe\"\naction = \"allow\"\n"
    ));
    let mock = MockModel::start().await;
    let client = world.client(&mock, Vec::new()).await;
    let session = world.session(&client, Vec::new()).await;
    let status = wait_mcp(&client, &session, "`probe` (user config): ready").await;
    assert!(
        status.contains("(sandbox: unconfined, the sandbox is off ([sandbox] mode = \"off\"))"),
        "{status}"
    );
    let target = world.root.join("written");
    let answers = probe_calls(
        &mock,
        &client,
        &session,
        &[(
            "probe",
            "try_write",
            json!({"path": target.display().to_string()}),
        )],
    )
    .await;
    assert_eq!(answers[0], "wrote", "{answers:?}");
    client.close().await.unwrap();
}

/// `[sandbox] mode = "required"` with no helper: the server is not started, and the failure
/// says why.
#[tokio::test]
async fn a_required_sandbox_without_a_helper_does_not_start_a_server() {
    use keel_core::mcp::{McpServerConfig, McpSource, McpTransport};
    use keel_core::runtime::sandbox::{SandboxMode, SandboxSpec};
    let mock = MockModel::start().await;
    let scratch = tempfile::tempdir().unwrap();
    let mut config = super::support::engine_config(Some(&mock), scratch.path());
    config.sandbox = SandboxSpec::default();
    config.sandbox.settings.mode = SandboxMode::Required;
    config.config_rules = Some(std::sync::Arc::new(|_: &Path, _: bool| {
        Ok(keel_core::agent::WorkspaceConfig {
            mcp_servers: vec![McpServerConfig {
                name: "probe".into(),
                transport: McpTransport::Stdio {
                    command: SERVER.into(),
                    args: vec!["--probe".into()],
                    env: Vec::new(),
                },
                source: McpSource::User,
                timeout: keel_core::mcp::CALL_TIMEOUT,
                access: Default::default(),
            }],
            ..Default::default()
        })
    }));
    let harness =
        super::support::EngineHarness::with_config(ClientOptions::default(), &[], mock, config)
            .await;
    let status = wait_mcp(&harness.client, &harness.session, "`probe`").await;
    let status = if status.contains("starting") {
        wait_mcp(
            &harness.client,
            &harness.session,
            "`probe` (user config): failed",
        )
        .await
    } else {
        status
    };
    assert!(
        status.contains(
            "failed: [sandbox] mode = \"required\", but no sandbox helper is configured; the \
             server was not started"
        ),
        "{status}"
    );
}
