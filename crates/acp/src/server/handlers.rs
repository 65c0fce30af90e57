//! What the agent does for each ACP method that takes more than one step: opening a session
//! (new, load, resume, fork: on a task of its own, answered when it is open), a prompt (the
//! turn spawned; a stored session reopened first), a cancel, and the mode and config options.
//! Each answers without blocking the connection's dispatch loop.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    CancelNotification, ForkSessionRequest, ForkSessionResponse, LoadSessionRequest,
    LoadSessionResponse, NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse,
    ResumeSessionRequest, ResumeSessionResponse, SessionConfigOptionValue,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Client, Error, JsonRpcResponse};

use super::connection::{ConnectionState, Reopen};
use super::{ServerError, ignore_closed, modes, session};

/// `session/new`: the session is announced and started once the answer is sent.
pub(super) fn new_session(
    state: &Arc<ConnectionState>,
    request: NewSessionRequest,
    responder: Responder<NewSessionResponse>,
    cx: &ConnectionTo<Client>,
) -> Result<(), Error> {
    spawn_open(
        state,
        cx,
        responder,
        |state, connection| async move { state.new_session(request, connection).await },
        |state, (session, response), responder| {
            let sent = responder.respond(response);
            session.announce();
            session.start();
            state.discover_models(&session);
            sent
        },
    )
}

/// `session/prompt`: the turn runs on a task of its own. A session of the store that this
/// process has not opened reopens transparently (the editor restarted the agent and kept its
/// thread).
pub(super) fn prompt(
    state: &Arc<ConnectionState>,
    request: PromptRequest,
    responder: Responder<PromptResponse>,
    cx: &ConnectionTo<Client>,
) -> Result<(), Error> {
    if let Ok(session) = state.session(&request.session_id) {
        // Registered now, so a cancel right behind the prompt finds it.
        let admitted = session.admit();
        return cx.spawn(admitted.answer(request.prompt, responder));
    }
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
            Err(error) => ignore_closed(responder.respond_with_error(error.to_rpc())),
        }
    })
}

/// `session/cancel`: the session's turn, tools and processes stop.
pub(super) fn cancel(state: &ConnectionState, notification: &CancelNotification) {
    match state.session(&notification.session_id) {
        Ok(session) => session.cancel(),
        Err(error) => tracing::debug!(%error, "session/cancel for an unknown session"),
    }
}

/// `session/set_mode`: the config options follow once the answer is sent.
pub(super) fn set_mode(
    state: &ConnectionState,
    request: &SetSessionModeRequest,
    responder: Responder<SetSessionModeResponse>,
) -> Result<(), Error> {
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

/// `session/set_config_option`: answers with every option; a changed mode is announced after.
pub(super) fn set_config_option(
    state: &ConnectionState,
    request: &SetSessionConfigOptionRequest,
    responder: Responder<SetSessionConfigOptionResponse>,
) -> Result<(), Error> {
    match apply_config_option(state, request) {
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

/// `session/load`: every replayed update is queued before the answer.
pub(super) fn load_session(
    state: &Arc<ConnectionState>,
    request: LoadSessionRequest,
    responder: Responder<LoadSessionResponse>,
    cx: &ConnectionTo<Client>,
) -> Result<(), Error> {
    spawn_open(
        state,
        cx,
        responder,
        |state, connection| async move { state.reopen(request.into(), connection).await },
        |state, session, responder| {
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

/// `session/resume`: no replay, the client kept the history.
pub(super) fn resume_session(
    state: &Arc<ConnectionState>,
    request: ResumeSessionRequest,
    responder: Responder<ResumeSessionResponse>,
    cx: &ConnectionTo<Client>,
) -> Result<(), Error> {
    spawn_open(
        state,
        cx,
        responder,
        |state, connection| async move { state.reopen(request.into(), connection).await },
        |state, session, responder| {
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

/// `session/fork`: a new session with the history of another.
pub(super) fn fork_session(
    state: &Arc<ConnectionState>,
    request: ForkSessionRequest,
    responder: Responder<ForkSessionResponse>,
    cx: &ConnectionTo<Client>,
) -> Result<(), Error> {
    spawn_open(
        state,
        cx,
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

/// `session/set_config_option`: returns the session and whether the mode changed.
fn apply_config_option(
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
