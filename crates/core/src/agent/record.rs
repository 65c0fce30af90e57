//! [`RecordingHost`]: a [`TurnHost`] that writes what the user sees of a turn to the session's
//! log in the store, then passes it on.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::store::{SessionLog, StoredEvent};
use crate::tool::Artifact;

use super::{AgentEvent, ApprovalAnswer, ApprovalRequest, QuestionItem, TurnHost};

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

impl TurnHost for RecordingHost {
    fn event(&self, event: AgentEvent) {
        if let Some(stored) = stored(&event) {
            self.log.record(&stored);
        }
        self.inner.event(event);
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
            answer
        })
    }

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
