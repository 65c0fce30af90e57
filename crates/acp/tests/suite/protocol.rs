//! Protocol basics: version negotiation, capabilities, session setup, error mapping, malformed
//! input, closing.

use std::sync::Arc;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CloseSessionRequest, InitializeRequest, NewSessionRequest, PromptRequest, SessionId,
    SetSessionModeRequest,
};
use keel_acp::server::{EngineError, SessionFactory};
use keel_core::agent::TurnStop;
use keel_testkit::acp_client::{ClientOptions, RawClient};
use serde_json::json;

use super::support::{Harness, ScriptedFactory, outcome, script};

fn idle() -> super::support::Script {
    script(|_turn| async { Ok(outcome(TurnStop::EndTurn)) })
}

#[tokio::test]
async fn initialize_answers_min_of_requested_and_v1_and_advertises_what_is_implemented() {
    let harness = Harness::start(ClientOptions::default(), idle()).await;
    let answer = harness
        .client
        .request(InitializeRequest::new(ProtocolVersion::from(7)))
        .await
        .unwrap();
    assert_eq!(answer.protocol_version, ProtocolVersion::V1);
    // Version 0 (pre-release) is not spoken: the answer is still 1, and the client decides.
    let answer = harness
        .client
        .request(InitializeRequest::new(ProtocolVersion::V0))
        .await
        .unwrap();
    assert_eq!(answer.protocol_version, ProtocolVersion::V1);
    let wire = serde_json::to_value(&answer).unwrap();
    insta::assert_json_snapshot!(wire, {".agentInfo.version" => "[version]"}, @r#"
    {
      "protocolVersion": 1,
      "agentCapabilities": {
        "loadSession": true,
        "promptCapabilities": {
          "image": true,
          "audio": false,
          "embeddedContext": true
        },
        "mcpCapabilities": {
          "http": true,
          "sse": false
        },
        "sessionCapabilities": {
          "list": {},
          "delete": {},
          "additionalDirectories": {},
          "fork": {},
          "resume": {},
          "close": {}
        },
        "auth": {}
      },
      "authMethods": [
        {
          "id": "keel-login",
          "name": "Log in with an API key",
          "description": "Runs `keel login`: choose a model provider (Anthropic, OpenAI, OpenRouter, DeepSeek) and paste its API key; Keel keeps it for every session."
        }
      ],
      "agentInfo": {
        "name": "keel",
        "title": "Keel",
        "version": "[version]"
      }
    }
    "#);
}

#[tokio::test]
async fn session_new_takes_cwd_and_additional_directories_as_roots() {
    let harness = Harness::start(ClientOptions::default(), idle()).await;
    let extra = tempfile::tempdir().unwrap();
    let created = harness
        .client
        .new_session(&harness.root(), &[extra.path().to_path_buf()])
        .await
        .unwrap();
    assert!(created.session_id.to_string().starts_with("keel-"));
    let spec = harness.factory.last_spec();
    assert_eq!(spec.roots, vec![harness.root(), extra.path().to_path_buf()]);
    // The client served neither files nor terminals: the runtime keeps the disk and local runs.
    assert!(spec.files.is_none());
    assert!(spec.terminals.is_none());
    let modes = created.modes.expect("modes are offered");
    assert_eq!(modes.current_mode_id.to_string(), "ask");
    let ids: Vec<String> = modes
        .available_modes
        .iter()
        .map(|mode| mode.id.to_string())
        .collect();
    assert_eq!(ids, ["ask", "allowlist", "yolo", "read-only"]);
    let options = serde_json::to_value(created.config_options.unwrap()).unwrap();
    assert_eq!(options[0]["id"], "mode");
    assert_eq!(options[1]["id"], "model");
    assert_eq!(options[1]["currentValue"], "smart");
}

#[tokio::test]
async fn relative_directories_are_invalid_params() {
    let harness = Harness::start(ClientOptions::default(), idle()).await;
    let error = harness
        .client
        .request(NewSessionRequest::new("relative/dir"))
        .await
        .unwrap_err();
    assert_eq!(i32::from(error.code), -32602);
    assert!(
        error.message.contains("cwd must be an absolute path"),
        "{error:?}"
    );
    let error = harness
        .client
        .new_session(&harness.root(), &["x".into()])
        .await
        .unwrap_err();
    assert_eq!(i32::from(error.code), -32602);
}

#[tokio::test]
async fn unknown_sessions_are_resource_not_found() {
    let harness = Harness::start(ClientOptions::default(), idle()).await;
    let missing = SessionId::new("keel-missing");
    let error = harness
        .client
        .request(PromptRequest::new(missing.clone(), vec!["hi".into()]))
        .await
        .unwrap_err();
    assert_eq!(i32::from(error.code), -32002);
    assert_eq!(error.data, Some(json!({"sessionId": "keel-missing"})));
    let error = harness
        .client
        .request(SetSessionModeRequest::new(missing, "yolo"))
        .await
        .unwrap_err();
    assert_eq!(i32::from(error.code), -32002);
    assert_eq!(harness.factory.turns(), 0);
}

#[tokio::test]
async fn closed_sessions_are_gone() {
    let harness = Harness::start(ClientOptions::default(), idle()).await;
    let session = harness.session().await;
    harness
        .client
        .request(CloseSessionRequest::new(session.clone()))
        .await
        .unwrap();
    let error = harness.client.prompt(&session, "hello").await.unwrap_err();
    assert_eq!(i32::from(error.code), -32002);
}

#[tokio::test]
async fn malformed_json_gets_a_parse_error_and_the_connection_survives() {
    let factory: Arc<dyn SessionFactory> = Arc::new(NoSessions);
    let (agent_end, mut raw) = RawClient::pipe();
    let server = tokio::spawn(keel_acp::server::serve(factory, agent_end));
    raw.send_line(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1"#)
        .await
        .unwrap();
    let error = raw.next().await.unwrap();
    assert_eq!(error["error"]["code"], -32700, "{error}");
    assert_eq!(error["id"], serde_json::Value::Null);
    raw.send_line(
        r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":2}}"#,
    )
    .await
    .unwrap();
    let answer = raw.next().await.unwrap();
    assert_eq!(answer["id"], 2);
    assert_eq!(answer["result"]["protocolVersion"], 1);
    raw.send_line(r#"{"jsonrpc":"2.0","id":3,"method":"session/nonsense","params":{}}"#)
        .await
        .unwrap();
    let answer = raw.next().await.unwrap();
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    raw.close().await.unwrap();
    server.await.unwrap().unwrap();
}

/// A factory that never builds anything (for tests that need no session).
struct NoSessions;

impl SessionFactory for NoSessions {
    fn models(&self) -> Vec<String> {
        Vec::new()
    }

    fn create(
        &self,
        _spec: keel_acp::server::SessionSpec,
    ) -> futures::future::BoxFuture<'_, Result<Arc<dyn keel_acp::server::AgentSession>, EngineError>>
    {
        Box::pin(async { Err(EngineError::failed("no sessions here")) })
    }
}

#[tokio::test]
async fn missing_credentials_are_auth_required_with_what_to_set() {
    let harness = Harness::with_factory(
        ClientOptions::default(),
        Arc::new(ScriptedFactory::new(script(|_turn| async {
            Err(EngineError::no_credentials(
                "no credentials for provider `anthropic`: set ANTHROPIC_API_KEY",
            ))
        }))),
    )
    .await;
    // initialize (in the harness) and session/new work without credentials.
    let session = harness.session().await;
    let error = harness.client.prompt(&session, "hello").await.unwrap_err();
    assert_eq!(i32::from(error.code), -32000);
    assert_eq!(
        error.message,
        "no credentials for provider `anthropic`: set ANTHROPIC_API_KEY"
    );
}
