//! Login as the editor shows it: the auth method `initialize` advertises, and `authenticate`.
//!
//! Keel's login is `keel login` (an API key stored where Keel reads credentials). A client that
//! runs terminal methods (`clientCapabilities.auth.terminal`, Zed) gets a `terminal` method
//! with the argument `login`: the editor runs the agent's own command with it in a terminal
//! (`keel login`, or `keel acp login` when it appends the argument, which routes to the same
//! command). A client that only sends the older `_meta["terminal-auth"]` flag gets an `agent`
//! method whose `_meta["terminal-auth"]` names the command line. Any other client gets the
//! `agent` method alone: `authenticate` then checks that the model has a credential now (set
//! since, or stored by `keel login` run by hand), and otherwise fails with `-32000` and what to
//! set. The model's missing credential fails a prompt with `-32000` ([`super::errors`]), which
//! is what switches Zed to its login screen.

use std::collections::HashMap;

use agent_client_protocol::v1::schema::{
    AuthMethod, AuthMethodAgent, AuthMethodTerminal, AuthenticateRequest, AuthenticateResponse,
    ClientCapabilities,
};

use super::errors::ServerError;
use super::session_traits::SessionFactory;

/// The id of Keel's one auth method.
pub const LOGIN_METHOD: &str = "keel-login";
const NAME: &str = "Log in with an API key";
const DESCRIPTION: &str = "Runs `keel login`: choose a model provider (Anthropic, OpenAI, \
     OpenRouter, DeepSeek) and paste its API key; Keel keeps it for every session.";

/// The auth methods for a client with `capabilities`.
pub fn methods(capabilities: &ClientCapabilities) -> Vec<AuthMethod> {
    if capabilities.auth.terminal {
        return vec![AuthMethod::Terminal(
            AuthMethodTerminal::new(LOGIN_METHOD, NAME)
                .description(DESCRIPTION)
                .args(vec!["login".to_owned()]),
        )];
    }
    let legacy_terminal = capabilities
        .meta
        .as_ref()
        .and_then(|meta| meta.get("terminal-auth"))
        .and_then(serde_json::Value::as_bool)
        == Some(true);
    let method = AuthMethodAgent::new(LOGIN_METHOD, NAME).description(DESCRIPTION);
    let method = match std::env::current_exe() {
        Ok(keel) if legacy_terminal => {
            let mut meta = serde_json::Map::new();
            meta.insert(
                "terminal-auth".to_owned(),
                serde_json::json!({
                    "command": keel,
                    "args": ["login"],
                    "label": "keel login",
                    "env": HashMap::<String, String>::new(),
                }),
            );
            method.meta(meta)
        }
        _ => method,
    };
    vec![AuthMethod::Agent(method)]
}

/// `authenticate`: succeeds when the model that would answer has a credential.
pub fn authenticate(
    factory: &dyn SessionFactory,
    request: &AuthenticateRequest,
) -> Result<AuthenticateResponse, ServerError> {
    if request.method_id.0.as_ref() != LOGIN_METHOD {
        return Err(ServerError::InvalidParams(format!(
            "unknown auth method `{}`: Keel offers `{LOGIN_METHOD}`",
            request.method_id.0
        )));
    }
    match factory.missing_credentials() {
        None => Ok(AuthenticateResponse::new()),
        Some(message) => Err(ServerError::NoCredentials(message)),
    }
}
