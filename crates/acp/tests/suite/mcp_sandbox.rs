//! MCP servers inside the sandbox, end to end: what a stdio server sees (its table's paths,
//! the workspace read-only, the home's credentials hidden) under namespaces, the Landlock
//! fallback and `keel exec`; project servers; a repository that cannot choose what a configured
//! server runs; the sandbox off or required without a helper.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{SessionId, StopReason};
use keel_testkit::acp_client::{ClientOptions, TestClient};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::{Value, json};

use super::mcp::{SERVER, World, keel, last_tool_results, said, tool_names, wait_mcp};
use super::support::TEST_MODEL;

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
