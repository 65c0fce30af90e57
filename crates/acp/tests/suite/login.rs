//! Login as Zed shows it, over the real `keel acp`: the `terminal` auth method `initialize`
//! advertises to a client with Zed's auth capabilities, `-32000` (auth required) with what to
//! set when the model has no credential, `keel acp login` (what Zed runs: the agent's command
//! with the method's arguments) storing the key, and the next prompt answered with it.

use std::path::Path;
use std::process::Stdio;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AuthCapabilities, AuthMethod, AuthenticateRequest, ClientCapabilities, InitializeRequest,
    StopReason,
};
use keel_testkit::acp_client::ClientOptions;
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::json;

use super::support::KeelHome;

/// The environment of a user with no key anywhere (empty values count as unset).
const NO_KEYS: &[(&str, &str)] = &[
    ("ANTHROPIC_API_KEY", ""),
    ("OPENAI_API_KEY", ""),
    ("OPENROUTER_API_KEY", ""),
    ("DEEPSEEK_API_KEY", ""),
    ("KEEL_MODEL", ""),
];

/// What Zed sends: `auth.terminal` and the older `_meta["terminal-auth"]` flag.
fn zed_capabilities() -> ClientCapabilities {
    let mut meta = serde_json::Map::new();
    meta.insert("terminal-auth".into(), json!(true));
    meta.insert("terminal_output".into(), json!(true));
    ClientCapabilities::new()
        .terminal(true)
        .auth(AuthCapabilities::new().terminal(true))
        .meta(meta)
}

/// Runs `keel ARGS` with `env`, the key on stdin; its exit status and stderr.
fn keel_login(home: &KeelHome, mock: &MockModel, args: &[&str], key: &str) -> (bool, String) {
    use std::io::Write as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .current_dir(&home.root)
        .envs(home.env(mock, NO_KEYS))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(key.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_user_without_a_key_is_sent_to_keel_login_and_the_next_prompt_uses_the_stored_key() {
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::text_only("Logged in."));
    let home = KeelHome::new();
    let client = home.spawn(&mock, ClientOptions::editor(), NO_KEYS).await;
    let initialized = client
        .request(
            InitializeRequest::new(ProtocolVersion::V1).client_capabilities(zed_capabilities()),
        )
        .await
        .unwrap();
    // The method Zed shows: a terminal running the agent's command with `login`.
    let [AuthMethod::Terminal(method)] = initialized.auth_methods.as_slice() else {
        panic!("{:?}", initialized.auth_methods);
    };
    assert_eq!(method.id.0.as_ref(), "keel-login");
    assert_eq!(method.args, ["login"]);
    assert!(
        method
            .description
            .as_deref()
            .unwrap_or_default()
            .contains("keel login")
    );

    // No credential: the session opens, the prompt is auth-required with what to set.
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    let error = client.prompt(&session, "hello").await.unwrap_err();
    assert_eq!(i32::from(error.code), -32000, "{error:?}");
    assert!(error.message.contains("keel login"), "{error:?}");
    assert!(error.message.contains("ANTHROPIC_API_KEY"), "{error:?}");
    let error = client
        .request(AuthenticateRequest::new("keel-login"))
        .await
        .unwrap_err();
    assert_eq!(i32::from(error.code), -32000, "{error:?}");
    assert!(mock.requests().is_empty());

    // What Zed runs: `keel acp` plus the method's arguments.
    let (ok, said) = keel_login(
        &home,
        &mock,
        &["acp", "login", "--provider", "anthropic", "--key-stdin"],
        "sk-ant-stored\n",
    );
    assert!(ok, "{said}");
    assert!(said.contains("Stored ANTHROPIC_API_KEY"), "{said}");
    let file = home.home.join("config/keel/credentials.toml");
    let mode = {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777
    };
    assert_eq!(mode, 0o600);
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("ANTHROPIC_API_KEY = \"sk-ant-stored\"")
    );

    // The running server sees it: authenticate succeeds, the same session's prompt is answered
    // with the stored key.
    client
        .request(AuthenticateRequest::new("keel-login"))
        .await
        .unwrap();
    let answer = client.prompt(&session, "hello").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].header("x-api-key"), Some("sk-ant-stored"));
}

#[tokio::test]
async fn clients_without_terminal_auth_get_the_agent_method_and_the_older_meta_form() {
    let mock = MockModel::start().await;
    let home = KeelHome::new();
    // Only the older `_meta["terminal-auth"]` flag: the command line rides in `_meta`.
    let mut meta = serde_json::Map::new();
    meta.insert("terminal-auth".into(), json!(true));
    let client = home.spawn(&mock, ClientOptions::default(), NO_KEYS).await;
    let initialized = client
        .request(
            InitializeRequest::new(ProtocolVersion::V1)
                .client_capabilities(ClientCapabilities::new().meta(meta)),
        )
        .await
        .unwrap();
    let [AuthMethod::Agent(method)] = initialized.auth_methods.as_slice() else {
        panic!("{:?}", initialized.auth_methods);
    };
    let terminal = &method.meta.as_ref().unwrap()["terminal-auth"];
    assert_eq!(terminal["args"], json!(["login"]));
    assert!(
        Path::new(terminal["command"].as_str().unwrap()).ends_with("keel"),
        "{terminal}"
    );
    // A plain client: the agent method, no command line.
    let client = home.spawn(&mock, ClientOptions::default(), NO_KEYS).await;
    let initialized = client.initialize().await.unwrap();
    let [AuthMethod::Agent(method)] = initialized.auth_methods.as_slice() else {
        panic!("{:?}", initialized.auth_methods);
    };
    assert_eq!(method.id.0.as_ref(), "keel-login");
    assert!(method.meta.is_none());
    // A stored key is found by `authenticate` without a restart.
    let (ok, said) = keel_login(&home, &mock, &["login", "--key-stdin"], "sk-ant-k");
    assert!(ok, "{said}");
    client
        .request(AuthenticateRequest::new("keel-login"))
        .await
        .unwrap();
    let error = client
        .request(AuthenticateRequest::new("oauth"))
        .await
        .unwrap_err();
    assert_eq!(i32::from(error.code), -32602);
}
