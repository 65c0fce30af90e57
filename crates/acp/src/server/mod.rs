//! The ACP server: Keel as an Agent Client Protocol agent (`keel acp`).
//!
//! Principal types:
//! - [`SessionFactory`] / [`AgentSession`]: the seam to the engine (the server builds nothing
//!   itself; tests plug in scripted sessions); [`EngineSessions`] puts keel-core's engine
//!   behind it.
//! - [`serve_stdio`] / [`serve`]: run the server over stdin/stdout, or over any transport
//!   (in-memory pipes in tests).
//! - Inside: `connection` (per-connection state), `session` (one session's turns, modes and
//!   commands), `host` (the [`TurnHost`](keel_core::agent::TurnHost) that maps events to
//!   `session/update`), `kinds` (tool → ACP kind, titles, locations), `permission` (the option
//!   table), `fs` and `terminal` (the editor's files and terminal pane as runtime backends),
//!   `modes`, `commands`, `question`, and `errors` (the one mapping to JSON-RPC errors).
//!
//! Every handler answers quickly: anything that waits (a turn, building a session) is spawned
//! so the connection's dispatch loop keeps reading (a `session/cancel` must get through while a
//! turn runs).

mod auth;
mod commands;
mod connection;
mod engine_sessions;
mod errors;
mod fs;
mod handlers;
mod host;
mod kinds;
mod modes;
mod permission;
mod question;
mod replay;
mod session;
mod session_traits;
mod terminal;
mod transport;

use std::sync::Arc;

use agent_client_protocol::v1::Responder;
use agent_client_protocol::v1::schema::{
    AuthenticateRequest, CancelNotification, CloseSessionRequest, CloseSessionResponse,
    DeleteSessionRequest, DeleteSessionResponse, InitializeRequest, ListSessionsRequest,
};
use agent_client_protocol::{Agent, ConnectTo, JsonRpcResponse};
use keel_core::agent::Engine;

pub use connection::agent_capabilities;
pub use engine_sessions::EngineSessions;
pub use errors::ServerError;
pub use kinds::{Roots, ToolRef, acp_kind, diff_content};
pub use modes::mode_name;
pub use session_traits::{
    AgentSession, EngineError, EngineSource, SessionFactory, SessionOrigin, SessionSpec,
    StoredSessionInfo, ToolInfo,
};

use connection::ConnectionState;

/// Serves ACP over stdin/stdout with sessions of `engine`, until the client closes stdin.
pub async fn serve_stdio(engine: Engine) -> anyhow::Result<()> {
    let (outgoing, incoming) = transport::stdio();
    serve_io(Arc::new(EngineSessions::new(engine)), outgoing, incoming).await
}

/// Serves ACP on stdin/stdout for a configuration that did not load: `initialize` answers,
/// `session/new` fails with `message` (the configuration error) and `data` (its key, file, line
/// and column).
pub async fn serve_stdio_broken(
    message: String,
    data: Option<serde_json::Value>,
) -> anyhow::Result<()> {
    let (outgoing, incoming) = transport::stdio();
    serve_io(
        Arc::new(engine_sessions::BrokenConfig::new(message, data)),
        outgoing,
        incoming,
    )
    .await
}

/// Serves ACP over a byte stream exactly as `keel acp` serves stdin/stdout: newline-delimited
/// JSON-RPC, requests pipelined behind `initialize` held until it is answered, and turns held
/// while the client is not reading (see `transport::Backlog`).
pub async fn serve_io(
    factory: Arc<dyn SessionFactory>,
    outgoing: impl tokio::io::AsyncWrite + Send + Unpin + 'static,
    incoming: impl tokio::io::AsyncRead + Send + Unpin + 'static,
) -> anyhow::Result<()> {
    let backlog = Arc::new(transport::Backlog::counted());
    let transport = transport::pipelined(outgoing, incoming, backlog.clone());
    serve_counted(factory, transport, backlog).await
}

/// Serves ACP over `transport` until it closes. Running turns are cancelled at the end.
pub async fn serve(
    factory: Arc<dyn SessionFactory>,
    transport: impl ConnectTo<Agent> + 'static,
) -> anyhow::Result<()> {
    // Nothing counts what this transport writes: turns never wait on it.
    serve_counted(
        factory,
        transport,
        Arc::new(transport::Backlog::uncounted()),
    )
    .await
}

async fn serve_counted(
    factory: Arc<dyn SessionFactory>,
    transport: impl ConnectTo<Agent> + 'static,
    backlog: Arc<transport::Backlog>,
) -> anyhow::Result<()> {
    let state = Arc::new(ConnectionState::new(factory, backlog));
    let served = connect(state.clone(), transport).await;
    state.cancel_all();
    served.map_err(|error| anyhow::anyhow!("ACP connection failed: {error}"))
}

fn ignore_closed(
    result: Result<(), agent_client_protocol::Error>,
) -> Result<(), agent_client_protocol::Error> {
    if let Err(error) = result {
        tracing::debug!(error = %error.message, "response not sent (connection closed)");
    }
    Ok(())
}

/// The agent's handlers, one per method (in [`handlers`]), connected to `transport`.
async fn connect(
    state: Arc<ConnectionState>,
    transport: impl ConnectTo<Agent> + 'static,
) -> Result<(), agent_client_protocol::Error> {
    let [initialize, authenticate, new, prompt, cancel, mode, option] =
        [(); 7].map(|()| state.clone());
    let [load, resume, fork, list, delete, close] = [(); 6].map(|()| state.clone());
    Agent
        .v1()
        .name("keel")
        .on_receive_request(
            async move |request: InitializeRequest, responder, _cx| {
                responder.respond(initialize.initialize(request))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: AuthenticateRequest, responder, _cx| {
                answer(responder, authenticate.authenticate(&request))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request, responder, cx| {
                handlers::new_session(&new, request, responder, &cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request, responder, cx| handlers::prompt(&prompt, request, responder, &cx),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx| {
                handlers::cancel(&cancel, &notification);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request, responder, _cx| handlers::set_mode(&mode, &request, responder),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request, responder, _cx| {
                handlers::set_config_option(&option, &request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request, responder, cx| {
                handlers::load_session(&load, request, responder, &cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request, responder, cx| {
                handlers::resume_session(&resume, request, responder, &cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request, responder, cx| {
                handlers::fork_session(&fork, request, responder, &cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ListSessionsRequest, responder, _cx| {
                answer(responder, list.list(request.cwd, request.cursor))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: DeleteSessionRequest, responder, _cx| {
                answer(
                    responder,
                    delete
                        .delete(&request.session_id)
                        .map(|()| DeleteSessionResponse::new()),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: CloseSessionRequest, responder, _cx| {
                close.close(&request.session_id);
                responder.respond(CloseSessionResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_to(transport)
        .await
}

/// Answers with `result`: the response, or the error mapped to JSON-RPC.
fn answer<T: JsonRpcResponse>(
    responder: Responder<T>,
    result: Result<T, ServerError>,
) -> Result<(), agent_client_protocol::Error> {
    match result {
        Ok(response) => responder.respond(response),
        Err(error) => responder.respond_with_error(error.to_rpc()),
    }
}
