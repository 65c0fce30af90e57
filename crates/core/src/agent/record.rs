//! [`RecordingHost`]: a [`TurnHost`] that writes what the user sees of a turn to the session's
//! log in the store, then passes it on.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::store::{SessionLog, StoreError, StoredEvent};
use crate::tool::Artifact;

use super::{AgentEvent, ApprovalAnswer, ApprovalRequest, QuestionItem, Session, TurnHost};

/// Records every event worth replaying, as it comes, before the front-end sees it.
pub(super) struct RecordingHost {
    pub(super) inner: Arc<dyn TurnHost>,
    pub(super) log: Arc<SessionLog>,
}

/// The stored form of an event, if it is kept. Status changes and live progress are not: the
/// final result carries what a replay shows, and a terminal id means nothing to a later client.
fn stored(event: &AgentEvent) -> Option<StoredEvent> {
    Some(match event {
        AgentEvent::Text { message_id, text } => StoredEvent::Text {
            message_id: message_id.clone(),
            text: text.clone(),
        },
        AgentEvent::Thinking { message_id, text } => StoredEvent::Thinking {
            message_id: message_id.clone(),
            text: text.clone(),
        },
        AgentEvent::ToolCall {
            call_id,
            tool_id,
            kind,
            args,
            view,
        } => StoredEvent::ToolCall {
            call_id: call_id.clone(),
            tool_id: tool_id.clone(),
            kind: *kind,
            args: args.clone(),
            title: Some(view.title.clone()),
            locations: view
                .locations
                .iter()
                .map(|l| (l.path.clone(), l.line))
                .collect(),
        },
        AgentEvent::ToolResult {
            call_id,
            status,
            envelope,
        } => StoredEvent::tool_result(call_id, *status, envelope),
        AgentEvent::Plan { entries } => StoredEvent::Plan {
            entries: entries.clone(),
        },
        AgentEvent::Usage { used, size, cost } => StoredEvent::Usage {
            used: *used,
            size: *size,
            cost: *cost,
        },
        AgentEvent::ToolStatus { .. }
        | AgentEvent::ToolProgress { .. }
        | AgentEvent::SessionTitle { .. }
        | AgentEvent::Compacted { .. }
        | AgentEvent::Notice { .. }
        | AgentEvent::Subagent { .. }
        | AgentEvent::Waiting { .. } => return None,
    })
}

/// What the user is told when the session's log cannot be written: said once, as a notice.
fn unwritable(error: &StoreError) -> String {
    format!(
        "This session's log cannot be written, so loading the session later will miss what \
         follows: {error}"
    )
}

/// What the user is told when a session meant to be kept could not be created in the store.
fn unkept(error: &StoreError) -> String {
    format!("This session is not saved (it cannot be loaded later): {error}")
}

impl Session {
    /// Tells the user, once, that the session is not kept or its log could not be written
    /// (since the last turn: a mode or model change between turns is recorded too).
    pub(super) fn tell_store_failure(&self, host: &dyn TurnHost) {
        let unkept_error = self
            .unkept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(error) = unkept_error {
            host.event(AgentEvent::Notice {
                text: unkept(&error),
            });
        }
        if let Some(error) = self.log.as_ref().and_then(|log| log.take_failure()) {
            host.event(AgentEvent::Notice {
                text: unwritable(&error),
            });
        }
    }
}

impl TurnHost for RecordingHost {
    fn event(&self, event: AgentEvent) {
        if let Some(stored) = stored(&event) {
            self.log.record(&stored);
        }
        self.inner.event(event);
        if let Some(error) = self.log.take_failure() {
            self.inner.event(AgentEvent::Notice {
                text: unwritable(&error),
            });
        }
    }

    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'_, ApprovalAnswer> {
        Box::pin(async move {
            let call_id = request.call_id.clone();
            let tool_id = request.tool_id.clone();
            let answer = self.inner.approve(request).await;
            self.log.record(&StoredEvent::Permission {
                call_id,
                tool_id,
                answer,
            });
            if let Some(error) = self.log.take_failure() {
                self.inner.event(AgentEvent::Notice {
                    text: unwritable(&error),
                });
            }
            answer
        })
    }

    // String error: the refusal (a skip, a decline, the editor's text) is what the model reads.
    fn ask(&self, questions: Vec<QuestionItem>) -> BoxFuture<'_, Result<Vec<Vec<String>>, String>> {
        self.inner.ask(questions)
    }

    fn ready(&self) -> BoxFuture<'_, ()> {
        self.inner.ready()
    }

    fn call_finished(&self, call_id: &str, artifacts: &[Artifact]) {
        self.inner.call_finished(call_id, artifacts);
    }
}
