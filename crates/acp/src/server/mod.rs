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

use agent_client_protocol::v1::schema::{
    AuthenticateRequest, CancelNotification, CloseSessionRequest, CloseSessionResponse,
    DeleteSessionRequest, DeleteSessionResponse, ForkSessionRequest, ForkSessionResponse,
    InitializeRequest, ListSessionsRequest, LoadSessionRequest, LoadSessionResponse,
    NewSessionRequest, PromptRequest, ResumeSessionRequest, ResumeSessionResponse,
    SessionConfigOptionValue, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
    SetSessionModeRequest, SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo, JsonRpcResponse};
use keel_core::agent::Engine;

pub use connection::agent_capabilities;
pub use engine_sessions::EngineSessions;
pub use errors::ServerError;
pub use kinds::{LockedTool, Roots, ToolRef, acp_kind, diff_content};
pub use modes::mode_name;
pub use session_traits::{
    AgentSession, EngineError, EngineSource, SessionFactory, SessionOrigin, SessionSpec,
    StoredSessionInfo, ToolInfo,
};

use connection::{ConnectionState, Reopen};

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

/// Opens a session on a task of its own (opening waits on the store and the engine, and the
/// dispatch loop must keep reading): `open` makes it, `opened` answers the request with it; a
/// failure to open answers with its error. An answer the closed connection cannot take is
/// only logged.
fn spawn_open<S, T, F>(
    state: &Arc<ConnectionState>,
    cx: &ConnectionTo<Client>,
    responder: Responder<T>,
    open: impl FnOnce(Arc<ConnectionState>, ConnectionTo<Client>) -> F,
    opened: impl FnOnce(&ConnectionState, S, Responder<T>) -> Result<(), agent_client_protocol::Error>
    + Send
    + 'static,
) -> Result<(), agent_client_protocol::Error>
where
    T: JsonRpcResponse + Send + 'static,
    F: Future<Output = Result<S, ServerError>> + Send + 'static,
{
    let opening = open(state.clone(), cx.clone());
    let state = state.clone();
    cx.spawn(async move {
        match opening.await {
            Ok(opened_session) => ignore_closed(opened(&state, opened_session, responder)),
            Err(error) => ignore_closed(responder.respond_with_error(error.to_rpc())),
        }
    })
}

/// The agent's handlers, one per method, connected to `transport`.
async fn connect(
    state: Arc<ConnectionState>,
    transport: impl ConnectTo<Agent> + 'static,
) -> Result<(), agent_client_protocol::Error> {
    Agent
        .v1()
        .name("keel")
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: InitializeRequest, responder, _cx| {
                    responder.respond(state.initialize(request))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: AuthenticateRequest, responder, _cx| match state
                    .authenticate(&request)
                {
                    Ok(response) => responder.respond(response),
                    Err(error) => responder.respond_with_error(error.to_rpc()),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: NewSessionRequest, responder, cx| {
                    spawn_open(
                        &state,
                        &cx,
                        responder,
                        |state, connection| async move {
                            state.new_session(request, connection).await
                        },
                        |state, (session, response), responder| {
                            let sent = responder.respond(response);
                            session.announce();
                            session.start();
                            state.discover_models(&session);
                            sent
                        },
                    )
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: PromptRequest, responder, cx| match state
                    .session(&request.session_id)
                {
                    Ok(session) => {
                        // Registered now, so a cancel right behind the prompt finds it.
                        let admitted = session.admit();
                        cx.spawn(admitted.answer(request.prompt, responder))
                    }
                    // A session of the store that this process has not opened reopens
                    // transparently (the editor restarted the agent and kept its thread).
                    Err(_) => {
                        let state = state.clone();
                        let connection = cx.clone();
                        cx.spawn(async move {
                            match state
                                .reopen(Reopen::stored(request.session_id), connection)
                                .await
                            {
                                Ok(session) => {
                                    // The client has the history; nothing to replay.
                                    drop(session.take_history());
                                    session.announce();
                                    session.admit().answer(request.prompt, responder).await
                                }
                                Err(error) => {
                                    ignore_closed(responder.respond_with_error(error.to_rpc()))
                                }
                            }
                        })
                    }
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            {
                let state = state.clone();
                async move |notification: CancelNotification, _cx| {
                    match state.session(&notification.session_id) {
                        Ok(session) => session.cancel(),
                        Err(error) => {
                            tracing::debug!(%error, "session/cancel for an unknown session")
                        }
                    }
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: SetSessionModeRequest, responder, _cx| {
                    let changed = state
                        .session(&request.session_id)
                        .and_then(|session| session.set_mode(&request.mode_id.0).map(|()| session));
                    match changed {
                        Ok(session) => {
                            let sent = responder.respond(SetSessionModeResponse::new());
                            session.config_changed();
                            sent
                        }
                        Err(error) => responder.respond_with_error(error.to_rpc()),
                    }
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: SetSessionConfigOptionRequest, responder, _cx| {
                    match set_config_option(&state, &request) {
                        Ok((session, mode_changed)) => {
                            let sent = responder.respond(SetSessionConfigOptionResponse::new(
                                session.config_options(),
                            ));
                            if mode_changed {
                                session.mode_changed(false);
                            }
                            sent
                        }
                        Err(error) => responder.respond_with_error(error.to_rpc()),
                    }
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: LoadSessionRequest, responder, cx| {
                    spawn_open(
                        &state,
                        &cx,
                        responder,
                        |state, connection| async move {
                            state.reopen(request.into(), connection).await
                        },
                        |state, session, responder| {
                            // Every replayed update is queued before the answer.
                            session.announce();
                            session.replay();
                            state.discover_models(&session);
                            responder.respond(
                                LoadSessionResponse::new()
                                    .modes(modes::mode_state(session.mode()))
                                    .config_options(session.config_options()),
                            )
                        },
                    )
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: ResumeSessionRequest, responder, cx| {
                    spawn_open(
                        &state,
                        &cx,
                        responder,
                        |state, connection| async move {
                            state.reopen(request.into(), connection).await
                        },
                        |state, session, responder| {
                            // No replay: the client kept the history.
                            drop(session.take_history());
                            let sent = responder.respond(
                                ResumeSessionResponse::new()
                                    .modes(modes::mode_state(session.mode()))
                                    .config_options(session.config_options()),
                            );
                            session.announce();
                            state.discover_models(&session);
                            sent
                        },
                    )
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: ForkSessionRequest, responder, cx| {
                    spawn_open(
                        &state,
                        &cx,
                        responder,
                        |state, connection| async move {
                            state
                                .fork(
                                    &request.session_id,
                                    request.cwd,
                                    request.additional_directories,
                                    connection,
                                    request.mcp_servers,
                                )
                                .await
                        },
                        |state, session, responder| {
                            drop(session.take_history());
                            let sent = responder.respond(
                                ForkSessionResponse::new(session.id().clone())
                                    .modes(modes::mode_state(session.mode()))
                                    .config_options(session.config_options()),
                            );
                            session.announce();
                            session.announce_title();
                            state.discover_models(&session);
                            sent
                        },
                    )
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: ListSessionsRequest, responder, _cx| match state
                    .list(request.cwd, request.cursor)
                {
                    Ok(response) => responder.respond(response),
                    Err(error) => responder.respond_with_error(error.to_rpc()),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: DeleteSessionRequest, responder, _cx| match state
                    .delete(&request.session_id)
                {
                    Ok(()) => responder.respond(DeleteSessionResponse::new()),
                    Err(error) => responder.respond_with_error(error.to_rpc()),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: CloseSessionRequest, responder, _cx| {
                    state.close(&request.session_id);
                    responder.respond(CloseSessionResponse::new())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_to(transport)
        .await
}

/// `session/set_config_option`: returns the session and whether the mode changed.
fn set_config_option(
    state: &ConnectionState,
    request: &SetSessionConfigOptionRequest,
) -> Result<(Arc<session::ClientSession>, bool), ServerError> {
    let session = state.session(&request.session_id)?;
    let SessionConfigOptionValue::ValueId { value } = &request.value else {
        return Err(ServerError::InvalidParams(format!(
            "option `{}` takes a value id, not a boolean",
            request.config_id
        )));
    };
    match &*request.config_id.0 {
        modes::MODE_OPTION => {
            session.set_mode(&value.0)?;
            Ok((session, true))
        }
        modes::MODEL_OPTION => {
            session.set_model(&value.0)?;
            Ok((session, false))
        }
        modes::THINKING_OPTION => {
            session.set_thinking(&value.0)?;
            Ok((session, false))
        }
        other => Err(ServerError::InvalidParams(format!(
            "unknown config option `{other}`"
        ))),
    }
}
