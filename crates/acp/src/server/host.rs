//! [`AcpTurnHost`]: the [`TurnHost`] of one prompt turn, turning the loop's [`AgentEvent`]s into
//! `session/update` notifications and its approvals into `session/request_permission`.
//!
//! Sending never blocks the loop: a notification is queued on the connection's outgoing queue
//! (unbounded, in order) and the host returns. Because requests and the prompt's response go
//! through the same queue, a tool call always reaches the client before its permission request,
//! and every update before the turn's response.
//!
//! A tool call goes `tool_call` (pending, with kind, title, name, raw input and locations) →
//! `tool_call_update` in progress (streamed output or an embedded terminal as it comes) →
//! `tool_call_update` completed or failed (the diff of an edit, the output, the raw envelope).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CompactionStatus, CompactionUpdate, ContentBlock, ContentChunk, Cost, MessageId, Notice,
    NoticeSeverity, Plan, SessionId, SessionInfoUpdate, SessionNotification, SessionUpdate,
    Terminal, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind as AcpKind, UsageUpdate,
};
use futures::future::BoxFuture;
use keel_core::agent::{
    AgentEvent, Answer, ApprovalAnswer, ApprovalRequest, CallStatus, QuestionItem,
    TRUST_QUESTION_ID, TurnHost,
};
use keel_core::tool::{Artifact, BundledTool, CallView, Envelope, Preview, ToolKind, ToolProgress};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

mod content;

use super::kinds::{self, Roots, ToolRef};
use super::permission::{self, PermissionView};
use super::terminal::TerminalLedger;
use content::{fenced, head, internal_error_text, plan_entry, tail};

/// The least time between two streamed-output updates of one call.
const OUTPUT_THROTTLE: Duration = Duration::from_millis(100);
/// Streamed output shown live: the last this many bytes.
const LIVE_TAIL: usize = 64 * 1024;
/// Output shown in a finished call: at most this many bytes (the sidecar file has the rest).
const FINAL_OUTPUT: usize = 1024 * 1024;

/// What the host remembers of a call between its events.
#[derive(Debug, Clone)]
struct CallState {
    tool_id: String,
    title: String,
    kind: AcpKind,
    locations: Vec<ToolCallLocation>,
    terminal: Option<String>,
    output: String,
    last_flush: Option<Instant>,
    /// A delayed update of the output is scheduled (output arrived inside the throttle window).
    flush_scheduled: bool,
}

impl CallState {
    fn tool(&self) -> ToolRef<'_> {
        ToolRef::of(&self.tool_id)
    }
}

/// Per-session pieces a turn's host shares with the session.
#[derive(Debug, Clone)]
pub struct HostShared {
    pub connection: ConnectionTo<Client>,
    pub session_id: SessionId,
    pub roots: Roots,
    /// Serializes the session's prompts to the human (permission and question requests).
    pub prompts: Arc<tokio::sync::Mutex<()>>,
    pub terminals: TerminalLedger,
    /// Updates sent and not yet written (turns wait on it when the client stops reading).
    pub backlog: Arc<super::transport::Backlog>,
    /// The client renders elicitation forms (`clientCapabilities.elicitation.form`): the
    /// `question` tool asks through one.
    pub elicitation: bool,
    /// The client shows `notice` updates (`clientCapabilities.session.notices`).
    pub notices: bool,
    /// The client shows `compaction_update`s (`clientCapabilities.session.compaction`).
    pub compaction: bool,
}

/// How serious a notice of Keel's is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Info,
    Warning,
}

/// Something Keel itself tells the user (a retry, settings left out, an MCP server that failed):
/// a `notice` when the client shows them (`title`: the first line; the rest is the
/// description), otherwise an agent message marked as Keel's: a quoted line that starts with
/// "Keel:", a message id of its own (never the model's) and `_meta.keel.notice`. Never recorded,
/// so never replayed.
pub fn notice_update(notices: bool, severity: Severity, text: &str) -> SessionUpdate {
    let text = text.trim();
    let (title, rest) = text.split_once('\n').unwrap_or((text, ""));
    let level = match severity {
        Severity::Info => "info",
        Severity::Warning => "warning",
    };
    if notices {
        let wire = match severity {
            Severity::Info => NoticeSeverity::Info,
            Severity::Warning => NoticeSeverity::Warning,
        };
        let rest = rest.trim();
        return SessionUpdate::Notice(
            Notice::new(wire, title.trim())
                .description((!rest.is_empty()).then(|| rest.to_owned())),
        );
    }
    let quoted: String = text
        .lines()
        .enumerate()
        .map(|(number, line)| {
            if number == 0 {
                format!("> **Keel:** {line}\n")
            } else if line.is_empty() {
                ">\n".to_owned()
            } else {
                format!("> {line}\n")
            }
        })
        .collect();
    let mut keel = serde_json::Map::new();
    keel.insert("notice".into(), Value::from(level));
    let mut meta = serde_json::Map::new();
    meta.insert("keel".into(), Value::Object(keel));
    SessionUpdate::AgentMessageChunk(
        ContentChunk::new(ContentBlock::from(format!("{quoted}\n")))
            .message_id(MessageId::new(format!(
                "keel-notice-{}",
                uuid::Uuid::new_v4()
            )))
            .meta(meta),
    )
}

impl HostShared {
    /// Tells the user something of Keel's own ([`notice_update`]).
    pub fn notice(&self, severity: Severity, text: &str) {
        self.send(notice_update(self.notices, severity, text));
    }

    /// Sends one `session/update` of this session (dropped, with a debug line, once the
    /// connection is closed).
    pub fn send(&self, update: SessionUpdate) {
        let notification = SessionNotification::new(self.session_id.clone(), update);
        match self.connection.send_notification(notification) {
            Ok(()) => self.backlog.queued(),
            Err(error) => {
                tracing::debug!(error = %error.message, "session/update not sent (connection closed)");
            }
        }
    }
}

/// The host of one turn.
pub struct AcpTurnHost {
    shared: HostShared,
    cancel: CancellationToken,
    calls: Arc<Mutex<HashMap<String, CallState>>>,
    /// Call ids in the order the loop announced them (for `ask`, which has no call id).
    order: Mutex<Vec<String>>,
    /// What each running `task` call's subagent said and did, shown in that call.
    transcripts: Mutex<HashMap<String, Transcript>>,
}

/// A subagent's progress as its `task` call shows it.
#[derive(Debug, Default)]
struct Transcript {
    text: String,
    /// Bytes of `text` already sent.
    sent: usize,
}

impl std::fmt::Debug for AcpTurnHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpTurnHost")
            .field("session_id", &self.shared.session_id)
            .finish()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn status(status: CallStatus) -> ToolCallStatus {
    match status {
        CallStatus::Pending => ToolCallStatus::Pending,
        CallStatus::InProgress => ToolCallStatus::InProgress,
        CallStatus::Completed => ToolCallStatus::Completed,
        CallStatus::Failed => ToolCallStatus::Failed,
    }
}

/// Transcript updates of a subagent are sent at least this many bytes apart (or at a line end).
const TRANSCRIPT_STEP: usize = 256;

/// The `_meta` of a subagent's calls and of its `task` call's updates: which call started it.
fn subagent_meta(parent_call_id: &str, agent: &str) -> serde_json::Map<String, Value> {
    let mut keel = serde_json::Map::new();
    keel.insert("parentToolCallId".into(), Value::from(parent_call_id));
    keel.insert("subagent".into(), Value::from(agent));
    let mut meta = serde_json::Map::new();
    meta.insert("keel".into(), Value::Object(keel));
    meta
}

/// Sends a call's live output (its last [`LIVE_TAIL`] bytes). Call with the calls lock held.
fn flush_output(shared: &HostShared, call_id: &str, call: &mut CallState) {
    call.last_flush = Some(Instant::now());
    call.flush_scheduled = false;
    let shown = fenced(tail(&call.output, LIVE_TAIL), "console");
    let update = ToolCallUpdate::new(
        call_id.to_owned(),
        ToolCallUpdateFields::new().content(vec![ToolCallContent::from(shown)]),
    );
    shared.send(SessionUpdate::ToolCallUpdate(update));
}

impl AcpTurnHost {
    pub fn new(shared: HostShared, cancel: CancellationToken) -> Self {
        Self {
            shared,
            cancel,
            calls: Arc::new(Mutex::new(HashMap::new())),
            order: Mutex::new(Vec::new()),
            transcripts: Mutex::new(HashMap::new()),
        }
    }

    fn send(&self, update: SessionUpdate) {
        self.shared.send(update);
    }

    fn update(&self, call_id: &str, fields: ToolCallUpdateFields) {
        self.send(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            call_id.to_owned(),
            fields,
        )));
    }

    fn tool_call(
        &self,
        call_id: String,
        tool_id: String,
        kind: ToolKind,
        args: Value,
        view: CallView,
    ) {
        self.tool_call_of(call_id, tool_id, kind, args, view, None);
    }

    /// Announces a call; a subagent's (`parent`: the `task` call id and the agent's name) is
    /// titled after the agent and linked to that call in `_meta`.
    fn tool_call_of(
        &self,
        call_id: String,
        tool_id: String,
        kind: ToolKind,
        args: Value,
        view: CallView,
        parent: Option<(&str, &str)>,
    ) {
        let kind = kinds::acp_kind(kind);
        let mut title = view.title;
        if let Some((_, agent)) = parent {
            title = format!("{agent}: {title}");
        }
        let locations = kinds::locations(&view.locations);
        let mut call = ToolCall::new(call_id.clone(), title.clone())
            .name(tool_id.clone())
            .kind(kind)
            .status(ToolCallStatus::Pending)
            .raw_input(args)
            .locations(locations.clone());
        if let Some((parent_call_id, agent)) = parent {
            call = call.meta(subagent_meta(parent_call_id, agent));
        }
        lock(&self.calls).insert(
            call_id.clone(),
            CallState {
                tool_id,
                title,
                kind,
                locations,
                terminal: None,
                output: String::new(),
                last_flush: None,
                flush_scheduled: false,
            },
        );
        lock(&self.order).push(call_id);
        self.send(SessionUpdate::ToolCall(call));
    }

    fn progress(&self, call_id: &str, progress: ToolProgress) {
        match progress {
            ToolProgress::Terminal(terminal_id) => {
                let title = lock(&self.calls).get_mut(call_id).and_then(|call| {
                    call.terminal = Some(terminal_id.clone());
                    (call.kind == AcpKind::Execute).then(|| call.title.clone())
                });
                let content = vec![ToolCallContent::Terminal(Terminal::new(terminal_id))];
                let mut fields = ToolCallUpdateFields::new()
                    .status(ToolCallStatus::InProgress)
                    .content(content);
                // The editor labels a terminal with the program it was asked to run (the
                // sandbox helper); the title of an execute call replaces that label in Zed
                // (`update_command_label`), so the user reads the command itself.
                if let Some(title) = title {
                    fields = fields.title(title);
                }
                self.update(call_id, fields);
            }
            ToolProgress::Output(chunk) => {
                let mut calls = lock(&self.calls);
                let Some(call) = calls.get_mut(call_id) else {
                    return;
                };
                call.output.push_str(&chunk);
                let wait = call.last_flush.map_or(Duration::ZERO, |at| {
                    OUTPUT_THROTTLE.saturating_sub(at.elapsed())
                });
                if wait.is_zero() {
                    // Sent under the lock, so it cannot pass the call's final update.
                    flush_output(&self.shared, call_id, call);
                } else if !call.flush_scheduled {
                    call.flush_scheduled = true;
                    self.schedule_flush(call_id, wait);
                }
            }
        }
    }

    /// Sends the output that arrived inside the throttle window once it closes, so output that
    /// stops coming (a build going quiet) is still shown before the call ends.
    fn schedule_flush(&self, call_id: &str, wait: Duration) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let calls = self.calls.clone();
        let shared = self.shared.clone();
        let call_id = call_id.to_owned();
        runtime.spawn(async move {
            tokio::time::sleep(wait).await;
            let mut calls = lock(&calls);
            // Gone: the call finished, and its final update has everything.
            if let Some(call) = calls.get_mut(&call_id)
                && call.flush_scheduled
            {
                flush_output(&shared, &call_id, call);
            }
        });
    }

    fn result(&self, call_id: &str, call_status: CallStatus, envelope: Envelope) {
        let call = lock(&self.calls).remove(call_id);
        let Some(call) = call else {
            // A result for a call never announced, or the later answer of a background task:
            // still close it on the client, with what it said.
            let mut content = Vec::new();
            if let Some(transcript) = lock(&self.transcripts).remove(call_id)
                && !transcript.text.trim().is_empty()
            {
                content.push(ToolCallContent::from(transcript.text.trim().to_owned()));
            }
            let internal = envelope.internal_error();
            if (internal.is_none() || envelope.error_text.is_none()) && !envelope.text().is_empty()
            {
                content.push(ToolCallContent::from(
                    head(envelope.text(), FINAL_OUTPUT).to_owned(),
                ));
            }
            if let Some(report) = internal {
                content.push(ToolCallContent::from(internal_error_text(report)));
            }
            self.update(
                call_id,
                ToolCallUpdateFields::new()
                    .status(status(call_status))
                    .content(content)
                    .raw_output(serde_json::to_value(&envelope).ok()),
            );
            return;
        };
        let mut content = content::final_content(&call, &envelope);
        // A call that completed although Keel failed a part of it (a command's whole output
        // could not be saved): the details follow what it showed.
        if envelope.error_text.is_none()
            && let Some(report) = envelope.internal_error()
        {
            content.push(ToolCallContent::from(internal_error_text(report)));
        }
        // A subagent's transcript stays above its answer (which usually ends it).
        if let Some(transcript) = lock(&self.transcripts).remove(call_id)
            && !transcript.text.trim().is_empty()
        {
            let said = transcript.text.trim();
            let answer = envelope.text().trim();
            if envelope.error_text.is_none() && !answer.is_empty() && said.ends_with(answer) {
                content = vec![ToolCallContent::from(said.to_owned())];
            } else {
                content.insert(0, ToolCallContent::from(said.to_owned()));
            }
        }
        let mut fields = ToolCallUpdateFields::new()
            .status(status(call_status))
            .content(content)
            .raw_output(serde_json::to_value(&envelope).ok());
        let touched: Vec<ToolCallLocation> = envelope
            .artifacts
            .iter()
            .filter_map(|artifact| match artifact {
                Artifact::Location { path, line } => {
                    Some(ToolCallLocation::new(PathBuf::from(path)).line(*line))
                }
                _ => None,
            })
            .collect();
        if !touched.is_empty() {
            fields = fields.locations(touched);
        }
        self.update(call_id, fields);
        if let Some(terminal_id) = &call.terminal {
            self.shared.terminals.release(
                &self.shared.connection,
                &self.shared.session_id,
                terminal_id,
            );
        }
    }

    /// What the permission prompt shows of a call: what its `tool_call` showed, or the same
    /// computed from the request when the call was never announced.
    fn view(&self, request: &ApprovalRequest) -> PermissionView {
        if let Some(call) = lock(&self.calls).get(&request.call_id) {
            return PermissionView {
                title: call.title.clone(),
                kind: call.kind,
                locations: call.locations.clone(),
            };
        }
        if request.tool_id == TRUST_QUESTION_ID {
            return PermissionView {
                title: "Trust this project's settings?".into(),
                kind: AcpKind::Other,
                locations: Vec::new(),
            };
        }
        PermissionView {
            title: request.view.title.clone(),
            kind: kinds::acp_kind(request.kind),
            locations: kinds::locations(&request.view.locations),
        }
    }

    async fn approve_inner(&self, request: ApprovalRequest) -> ApprovalAnswer {
        let _turn = tokio::select! {
            guard = self.shared.prompts.lock() => guard,
            () = self.cancel.cancelled() => return ApprovalAnswer::Cancelled,
        };
        if self.cancel.is_cancelled() {
            return ApprovalAnswer::Cancelled;
        }
        let view = self.view(&request);
        // A question the loop did not announce as a call (the project-trust question): announce
        // it, so every client has a call to hang the prompt on, and close it after the answer.
        let unannounced = !lock(&self.calls).contains_key(&request.call_id);
        if unannounced {
            let call = ToolCall::new(request.call_id.clone(), view.title.clone())
                .name(request.tool_id.clone())
                .kind(view.kind)
                .status(ToolCallStatus::Pending)
                .raw_input(request.args.clone());
            self.send(SessionUpdate::ToolCall(call));
        }
        let call_id = request.call_id.clone();
        let answer = self.ask_permission(request, view).await;
        if unannounced {
            let status = match answer {
                ApprovalAnswer::Answered(Answer::AllowOnce)
                | ApprovalAnswer::Answered(Answer::AllowAlways) => ToolCallStatus::Completed,
                _ => ToolCallStatus::Failed,
            };
            self.update(&call_id, ToolCallUpdateFields::new().status(status));
        }
        answer
    }

    async fn ask_permission(
        &self,
        request: ApprovalRequest,
        view: PermissionView,
    ) -> ApprovalAnswer {
        let mut request = request;
        // The preview names the working directory relative to the workspace; show where.
        if let Some(Preview::Command { cwd, .. }) = &mut request.preview {
            *cwd = self.shared.roots.absolute(cwd).display().to_string();
        }
        let wire = permission::request(&self.shared.session_id, &request, view, &self.shared.roots);
        let sent = self.shared.connection.send_request(wire).block_task();
        tokio::select! {
            reply = sent => match reply {
                Ok(response) => permission::answer(&response.outcome, request.unconfined),
                Err(error) => {
                    tracing::warn!(
                        call_id = %request.call_id,
                        error = %error.message,
                        "permission request failed; rejecting the call"
                    );
                    ApprovalAnswer::Answered(Answer::RejectOnce)
                }
            },
            () = self.cancel.cancelled() => ApprovalAnswer::Cancelled,
        }
    }

    // String error: the refusal (a skip, a decline, the editor's text) is what the model reads.
    async fn ask_inner(&self, questions: Vec<QuestionItem>) -> Result<Vec<Vec<String>>, String> {
        let call_id = lock(&self.order)
            .iter()
            .rev()
            .find(|id| {
                lock(&self.calls)
                    .get(*id)
                    .is_some_and(|call| call.tool_id == BundledTool::Question.id())
            })
            .cloned()
            .unwrap_or_else(|| BundledTool::Question.id().to_owned());
        if self.shared.elicitation {
            return super::question::ask_form(self, &call_id, &questions).await;
        }
        let mut answers = Vec::new();
        for item in questions {
            if item.options.is_empty() {
                return Err(format!(
                    "The editor can only offer choices; \"{}\" needs a free-text answer. \
                     Proceed with your best judgement and say what you assumed.",
                    item.question
                ));
            }
            let answer = super::question::ask_one(self, &call_id, &item).await?;
            answers.push(answer);
        }
        Ok(answers)
    }

    /// A subagent's event: its calls become calls of their own, linked to the `task` call;
    /// its text and a line per call go into the `task` call's content.
    fn subagent(&self, parent: &str, agent: &str, event: AgentEvent) {
        match event {
            AgentEvent::ToolCall {
                call_id,
                tool_id,
                kind,
                args,
                view,
            } => {
                let title = view.title.clone();
                self.tool_call_of(call_id, tool_id, kind, args, view, Some((parent, agent)));
                self.transcript(parent, agent, &format!("\n- {title}\n"), true);
            }
            AgentEvent::Text { text, .. } => self.transcript(parent, agent, &text, false),
            AgentEvent::Subagent {
                parent_call_id,
                agent,
                event,
            } => self.subagent(&parent_call_id, &agent, *event),
            event @ (AgentEvent::ToolStatus { .. }
            | AgentEvent::ToolProgress { .. }
            | AgentEvent::ToolResult { .. }
            | AgentEvent::Waiting { .. }) => self.event(event),
            // The child's plan, usage, title and notices are its own business.
            AgentEvent::Thinking { .. }
            | AgentEvent::Plan { .. }
            | AgentEvent::Usage { .. }
            | AgentEvent::Compacted { .. }
            | AgentEvent::SessionTitle { .. }
            | AgentEvent::Notice { .. } => {}
        }
    }

    /// Adds to a `task` call's transcript and shows it (at a line end, a call, or every
    /// [`TRANSCRIPT_STEP`] bytes).
    fn transcript(&self, parent: &str, agent: &str, text: &str, now: bool) {
        // A background task's call has finished already: nothing later would show the rest.
        let running = lock(&self.calls).contains_key(parent);
        let mut transcripts = lock(&self.transcripts);
        let transcript = transcripts.entry(parent.to_owned()).or_default();
        transcript.text.push_str(text);
        if !(now
            || !running
            || text.contains('\n')
            || transcript.text.len() - transcript.sent >= TRANSCRIPT_STEP)
        {
            return;
        }
        transcript.sent = transcript.text.len();
        let fields = ToolCallUpdateFields::new().content(vec![ToolCallContent::from(
            transcript.text.trim().to_owned(),
        )]);
        // Sent under the lock, so updates of one call keep their order.
        self.send(SessionUpdate::ToolCallUpdate(
            ToolCallUpdate::new(parent.to_owned(), fields).meta(subagent_meta(parent, agent)),
        ));
    }

    pub(super) fn shared(&self) -> &HostShared {
        &self.shared
    }

    pub(super) fn cancel_token(&self) -> &CancellationToken {
        &self.cancel
    }
}

impl TurnHost for AcpTurnHost {
    fn ready(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.shared.backlog.ready())
    }

    fn event(&self, event: AgentEvent) {
        match event {
            AgentEvent::Text { message_id, text } => {
                self.send(SessionUpdate::AgentMessageChunk(
                    ContentChunk::new(ContentBlock::from(text))
                        .message_id(MessageId::new(message_id)),
                ));
            }
            AgentEvent::Thinking { message_id, text } => {
                self.send(SessionUpdate::AgentThoughtChunk(
                    ContentChunk::new(ContentBlock::from(text))
                        .message_id(MessageId::new(message_id)),
                ));
            }
            AgentEvent::ToolCall {
                call_id,
                tool_id,
                kind,
                args,
                view,
            } => self.tool_call(call_id, tool_id, kind, args, view),
            AgentEvent::ToolStatus {
                call_id,
                status: call_status,
            } => {
                self.update(
                    &call_id,
                    ToolCallUpdateFields::new().status(status(call_status)),
                );
            }
            AgentEvent::ToolProgress { call_id, progress } => self.progress(&call_id, progress),
            AgentEvent::ToolResult {
                call_id,
                status: call_status,
                envelope,
            } => self.result(&call_id, call_status, envelope),
            AgentEvent::Plan { entries } => {
                self.send(SessionUpdate::Plan(Plan::new(
                    entries.iter().map(plan_entry).collect(),
                )));
            }
            AgentEvent::Usage { used, size, cost } => {
                // No cost field when a price is unknown (`pricing`), rather than a wrong one.
                let update =
                    UsageUpdate::new(used, size).cost(cost.map(|usd| Cost::new(usd, "USD")));
                self.send(SessionUpdate::UsageUpdate(update));
            }
            AgentEvent::Compacted {
                before,
                after,
                size,
            } => {
                let text = format!(
                    "The conversation was compacted to fit the context window: about {before} \
                     tokens became {after}."
                );
                if self.shared.compaction {
                    let id = format!("keel-compaction-{}", uuid::Uuid::new_v4());
                    self.send(SessionUpdate::CompactionUpdate(
                        CompactionUpdate::new(id, CompactionStatus::Completed)
                            .summary(vec![ContentBlock::from(text)]),
                    ));
                } else {
                    self.shared.notice(Severity::Info, &text);
                }
                self.send(SessionUpdate::UsageUpdate(UsageUpdate::new(after, size)));
            }
            AgentEvent::SessionTitle { title } => {
                self.send(SessionUpdate::SessionInfoUpdate(
                    SessionInfoUpdate::new().title(title),
                ));
            }
            AgentEvent::Subagent {
                parent_call_id,
                agent,
                event,
            } => self.subagent(&parent_call_id, &agent, *event),
            AgentEvent::Waiting { text } => {
                tracing::info!(session = %self.shared.session_id, "{}", text.trim_end());
                self.shared.notice(Severity::Info, &text);
            }
            AgentEvent::Notice { text } => {
                tracing::info!(session = %self.shared.session_id, "{text}");
                self.shared.notice(Severity::Warning, &text);
            }
        }
    }

    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'_, ApprovalAnswer> {
        Box::pin(self.approve_inner(request))
    }

    // String error: the refusal (a skip, a decline, the editor's text) is what the model reads.
    fn ask(&self, questions: Vec<QuestionItem>) -> BoxFuture<'_, Result<Vec<Vec<String>>, String>> {
        Box::pin(self.ask_inner(questions))
    }

    fn call_finished(&self, _call_id: &str, artifacts: &[Artifact]) {
        for artifact in artifacts {
            if let Artifact::Terminal { terminal_id } = artifact {
                self.shared.terminals.release(
                    &self.shared.connection,
                    &self.shared.session_id,
                    terminal_id,
                );
            }
        }
    }
}
