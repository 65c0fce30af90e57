//! The one mapping from the server's failures to JSON-RPC errors.
//!
//! [`ServerError`] is what every handler returns; [`ServerError::to_rpc`] is the only place that
//! picks a wire code. Engine failures arrive as [`EngineError`](super::EngineError) and convert
//! through `From`.

use agent_client_protocol::Error as RpcError;
use agent_client_protocol::v1::schema;

use super::session_traits::EngineError;

/// A failure a client request ends with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerError {
    /// The request names a session this connection does not have. Wire: `-32002` with
    /// `data.sessionId` (the client may offer to start a new session).
    #[error("session `{0}` not found")]
    SessionNotFound(String),
    /// The request is well-formed JSON-RPC but its parameters are unusable (relative cwd,
    /// unknown mode, unsupported content). Wire: `-32602` with the reason as the message.
    #[error("{0}")]
    InvalidParams(String),
    /// The model that would answer has no credential; the message names exactly what to set.
    /// Wire: `-32000` (auth required) carrying that message and `data.reason =
    /// "no_credentials"`: Zed answers it with its login screen, which offers the `keel login`
    /// terminal method `initialize` advertised.
    #[error("{0}")]
    NoCredentials(String),
    /// Anything else that went wrong inside the agent. Wire: `-32603` with the message, and
    /// the message again as `data.details` (what Zed shows of an internal error).
    #[error("{0}")]
    Internal(String),
    /// Keel's configuration does not load. Wire: `-32602` with the message and `data`
    /// (`details`, and the `key`, `file`, `line` and `column` when known).
    #[error("{message}")]
    Config {
        message: String,
        data: serde_json::Value,
    },
}

impl ServerError {
    /// The JSON-RPC error the client receives.
    pub fn to_rpc(&self) -> RpcError {
        match self {
            ServerError::SessionNotFound(id) => {
                schema::Error::session_not_found(schema::SessionId::new(id.as_str())).into()
            }
            ServerError::InvalidParams(message) => {
                RpcError::new(RpcError::invalid_params().code, message.clone())
            }
            ServerError::NoCredentials(message) => {
                RpcError::new(RpcError::auth_required().code, message.clone())
                    .data(serde_json::json!({ "reason": "no_credentials" }))
            }
            ServerError::Internal(message) => {
                RpcError::new(RpcError::internal_error().code, message.clone())
                    .data(serde_json::json!({ "details": message }))
            }
            ServerError::Config { message, data } => {
                RpcError::new(RpcError::invalid_params().code, message.clone()).data(data.clone())
            }
        }
    }
}

impl From<EngineError> for ServerError {
    fn from(error: EngineError) -> Self {
        match error {
            EngineError::NoCredentials { message, .. } => ServerError::NoCredentials(message),
            EngineError::InvalidInput(error) => ServerError::InvalidParams(error.to_string()),
            EngineError::Failed(error) => ServerError::Internal(error.to_string()),
            EngineError::NotFound(id) => ServerError::SessionNotFound(id),
            EngineError::Config { message, data } => ServerError::Config { message, data },
        }
    }
}

/// What the editor said when it refused a request: its own text, which an editor often puts in
/// `data` (Zed answers "Internal error" with the cause in `data.details`), else the message.
pub fn client_error_text(error: &RpcError) -> String {
    let detail = match &error.data {
        Some(serde_json::Value::String(text)) => Some(text.as_str()),
        Some(serde_json::Value::Object(data)) => ["details", "message", "error"]
            .iter()
            .find_map(|key| data.get(*key).and_then(serde_json::Value::as_str)),
        _ => None,
    };
    match detail.map(str::trim).filter(|detail| !detail.is_empty()) {
        Some(detail) if error.message.is_empty() || error.message == "Internal error" => {
            detail.to_owned()
        }
        Some(detail) if detail != error.message => format!("{}: {detail}", error.message),
        _ => error.message.clone(),
    }
}

impl From<ServerError> for RpcError {
    fn from(error: ServerError) -> Self {
        error.to_rpc()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        let not_found = ServerError::SessionNotFound("s9".into()).to_rpc();
        assert_eq!(i32::from(not_found.code), -32002);
        assert_eq!(not_found.data, Some(serde_json::json!({"sessionId": "s9"})));
        let invalid = ServerError::InvalidParams("cwd must be absolute".into()).to_rpc();
        assert_eq!(i32::from(invalid.code), -32602);
        assert_eq!(invalid.message, "cwd must be absolute");
        let internal = ServerError::Internal("boom".into()).to_rpc();
        assert_eq!(i32::from(internal.code), -32603);
        assert_eq!(internal.message, "boom");
        let credentials: ServerError = EngineError::no_credentials("set ANTHROPIC_API_KEY").into();
        let wire = credentials.to_rpc();
        assert_eq!(i32::from(wire.code), -32000);
        assert_eq!(wire.message, "set ANTHROPIC_API_KEY");
    }
}
