//! The editor's side of the connection: how the test client answers each request the agent
//! sends (permission prompts from the script, `fs/*` from the file map or the disk,
//! `terminal/*` by running the command), each recorded in the event log first.

use std::path::Path;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    CreateElicitationRequest, CreateElicitationResponse, CreateTerminalRequest,
    KillTerminalRequest, PermissionOptionKind, ReadTextFileRequest, ReadTextFileResponse,
    ReleaseTerminalRequest, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, SessionNotification,
    TerminalOutputRequest, WaitForTerminalExitRequest, WriteTextFileRequest, WriteTextFileResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo, Error};
use tokio::sync::oneshot;

use super::{Event, PermissionReply, Shared, TerminalRecord, lock};

/// Drives the client connection until `closed` fires.
pub(super) async fn run(
    shared: Arc<Shared>,
    transport: impl ConnectTo<Client> + 'static,
    connected: oneshot::Sender<ConnectionTo<Agent>>,
    closed: oneshot::Receiver<()>,
) -> Result<(), Error> {
    let [on_update, on_permission, on_elicitation, on_read, on_write] =
        [(); 5].map(|()| shared.clone());
    let [on_create, on_output, on_wait, on_kill] = [(); 4].map(|()| shared.clone());
    let on_release = shared;
    let builder = Client
        .v1()
        .name("keel-test-client")
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                on_update.recorder.push(Event::Update(notification));
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request, responder, _cx| permission(&on_permission, request, responder),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request, responder, _cx| elicitation(&on_elicitation, request, responder),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request, responder, _cx| read_file(&on_read, request, responder),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request, responder, _cx| write_file(&on_write, request, responder),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request, responder, _cx| create_terminal(&on_create, request, responder),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: TerminalOutputRequest, responder, _cx| {
                let terminal_id = request.terminal_id.to_string();
                on_output
                    .recorder
                    .push(Event::Terminal(TerminalRecord::Output {
                        terminal_id: terminal_id.clone(),
                    }));
                responder.respond_with_result(on_output.terminals.output(&terminal_id))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: WaitForTerminalExitRequest, responder, cx| {
                let terminal_id = request.terminal_id.to_string();
                on_wait.recorder.push(Event::Terminal(TerminalRecord::Wait {
                    terminal_id: terminal_id.clone(),
                }));
                let shared = on_wait.clone();
                cx.spawn(async move {
                    let waited = shared.terminals.wait(&terminal_id).await;
                    let _ = responder.respond_with_result(waited);
                    Ok(())
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: KillTerminalRequest, responder, _cx| {
                let terminal_id = request.terminal_id.to_string();
                on_kill.recorder.push(Event::Terminal(TerminalRecord::Kill {
                    terminal_id: terminal_id.clone(),
                }));
                responder.respond_with_result(on_kill.terminals.kill(&terminal_id))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReleaseTerminalRequest, responder, _cx| {
                let terminal_id = request.terminal_id.to_string();
                on_release
                    .recorder
                    .push(Event::Terminal(TerminalRecord::Release {
                        terminal_id: terminal_id.clone(),
                    }));
                responder.respond_with_result(on_release.terminals.release(&terminal_id))
            },
            agent_client_protocol::on_receive_request!(),
        );
    builder
        .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
            let _ = connected.send(cx.clone());
            tokio::select! {
                _ = closed => {}
                () = cx.incoming_closed() => {}
            }
            Ok(())
        })
        .await
}

/// `session/request_permission`: the next scripted reply (an empty script rejects).
fn permission(
    shared: &Shared,
    request: RequestPermissionRequest,
    responder: Responder<RequestPermissionResponse>,
) -> Result<(), Error> {
    let reply = lock(&shared.script)
        .pop_front()
        .unwrap_or(PermissionReply::Choose(PermissionOptionKind::RejectOnce));
    let answer = choose(&request, reply.clone());
    let held = lock(&shared.held).len();
    shared.recorder.push(Event::Permission {
        request: request.clone(),
        answer: answer.clone(),
        held,
    });
    match reply {
        PermissionReply::Hold => {
            lock(&shared.held).push((request, responder));
            Ok(())
        }
        PermissionReply::Fail => responder
            .respond_with_error(Error::internal_error().data("the test client failed the request")),
        _ => responder.respond(outcome(answer.as_ref())),
    }
}

/// `elicitation/create`: the next scripted answer (none cancels; `null` holds it).
fn elicitation(
    shared: &Shared,
    request: CreateElicitationRequest,
    responder: Responder<CreateElicitationResponse>,
) -> Result<(), Error> {
    let answer = lock(&shared.elicitations)
        .pop_front()
        .unwrap_or_else(|| serde_json::json!({"action": "cancel"}));
    shared.recorder.push(Event::Elicitation {
        request: serde_json::to_value(&request).unwrap_or_default(),
        answer: answer.clone(),
    });
    if answer.is_null() {
        lock(&shared.held_elicitations).push(responder);
        return Ok(());
    }
    match serde_json::from_value::<CreateElicitationResponse>(answer) {
        Ok(response) => responder.respond(response),
        Err(error) => responder.respond_with_error(
            Error::internal_error().data(format!("bad scripted answer: {error}")),
        ),
    }
}

/// `fs/read_text_file`: the file map first, then the disk when the client reads it.
fn read_file(
    shared: &Shared,
    request: ReadTextFileRequest,
    responder: Responder<ReadTextFileResponse>,
) -> Result<(), Error> {
    shared.recorder.push(Event::ReadFile {
        path: request.path.clone(),
    });
    let mut text = lock(&shared.files).get(&request.path).cloned();
    if text.is_none() && shared.disk_reads {
        let swap = lock(&shared.swap_on_read).take();
        text = disk_read(&request.path, swap.as_deref());
    }
    match text {
        Some(text) => {
            let start = request.line.map_or(0, |line| line.saturating_sub(1)) as usize;
            let lines = text.split_inclusive('\n').skip(start);
            let shown: String = match request.limit {
                Some(limit) => lines.take(limit as usize).collect(),
                None => lines.collect(),
            };
            responder.respond(ReadTextFileResponse::new(shown))
        }
        None => responder.respond_with_error(
            agent_client_protocol::v1::schema::Error::resource_not_found(Some(
                request.path.display().to_string(),
            ))
            .into(),
        ),
    }
}

/// `fs/write_text_file`: recorded and applied to the file map.
fn write_file(
    shared: &Shared,
    request: WriteTextFileRequest,
    responder: Responder<WriteTextFileResponse>,
) -> Result<(), Error> {
    lock(&shared.files).insert(request.path.clone(), request.content.clone());
    shared.recorder.push(Event::WriteFile {
        path: request.path,
        content: request.content,
    });
    responder.respond(WriteTextFileResponse::new())
}

/// `terminal/create`: runs the command, unless the client refuses terminals (answered as Zed
/// answers a refused request: "Internal error", the cause in `data.details`).
fn create_terminal(
    shared: &Shared,
    request: CreateTerminalRequest,
    responder: Responder<agent_client_protocol::v1::schema::CreateTerminalResponse>,
) -> Result<(), Error> {
    let created = match shared.refuse_terminals.clone() {
        None => shared.terminals.create(&request),
        Some(message) => {
            Err(Error::internal_error().data(serde_json::json!({ "details": message })))
        }
    };
    match created {
        Ok((response, record)) => {
            shared.recorder.push(Event::Terminal(record));
            responder.respond(response)
        }
        Err(error) => responder.respond_with_error(error),
    }
}

/// The option a reply selects; `None` means "answer cancelled".
pub(super) fn choose(request: &RequestPermissionRequest, reply: PermissionReply) -> Option<String> {
    let by_kind = |kind: PermissionOptionKind| {
        request
            .options
            .iter()
            .find(|option| option.kind == kind)
            .map(|option| option.option_id.to_string())
    };
    match reply {
        PermissionReply::Cancel | PermissionReply::Hold | PermissionReply::Fail => None,
        PermissionReply::Select(id) => Some(id),
        PermissionReply::Choose(kind) => by_kind(kind)
            .or_else(|| by_kind(PermissionOptionKind::RejectOnce))
            .or_else(|| by_kind(PermissionOptionKind::RejectAlways)),
    }
}

pub(super) fn outcome(answer: Option<&String>) -> RequestPermissionResponse {
    RequestPermissionResponse::new(match answer {
        Some(id) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id.clone())),
        None => RequestPermissionOutcome::Cancelled,
    })
}

/// A file read from the disk as an editor does (following symlinks), after replacing it with a
/// symlink to `swap` (a process racing the editor) when one is given.
#[expect(
    clippy::disallowed_methods,
    reason = "the test client plays the editor, which reads the disk"
)]
fn disk_read(path: &Path, swap: Option<&Path>) -> Option<String> {
    if let Some(target) = swap {
        let _ = std::fs::remove_file(path);
        let _ = std::os::unix::fs::symlink(target, path);
    }
    std::fs::read_to_string(path).ok()
}
