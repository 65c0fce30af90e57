//! [`StoredEvent`]: one line of a session's event log.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ApprovalAnswer, CallStatus, TurnStop, UserContent};
use crate::provider::{Message, push_merged};
use crate::tool::{Artifact, Envelope, ToolKind};

/// Everything a session's log records, in the order it happened. Two streams share the log:
/// what the user saw (prompts, answers, thoughts, tool calls with their final content, plans,
/// permission answers, mode and model changes, usage), replayed by `session/load`; and the
/// model's view of the conversation ([`StoredEvent::Message`], [`StoredEvent::Compaction`]), from
/// which a reopened session continues.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum StoredEvent {
    /// The user's prompt, as the client sent it.
    User { content: Vec<UserContent> },
    /// A chunk of the assistant's answer.
    Text { message_id: String, text: String },
    /// A chunk of the model's visible reasoning.
    Thinking { message_id: String, text: String },
    /// The model asked for a tool call.
    ToolCall {
        call_id: String,
        tool_id: String,
        kind: ToolKind,
        args: Value,
        /// The call's title (sessions recorded before titles were stored have none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default)]
        locations: Vec<(String, Option<u32>)>,
    },
    /// A tool call finished. Terminal artifacts are never stored: a terminal id means nothing to
    /// a client that did not create it.
    ToolResult {
        call_id: String,
        status: CallStatus,
        envelope: Envelope,
        #[serde(default)]
        artifacts: Vec<Artifact>,
    },
    /// The user's answer to a permission prompt.
    Permission {
        call_id: String,
        tool_id: String,
        answer: ApprovalAnswer,
    },
    /// The todo list changed.
    Plan {
        entries: Vec<crate::tool::PlanEntry>,
    },
    /// Context used by the latest request versus the model's window.
    Usage {
        used: u64,
        size: u64,
        /// The session's cost so far in USD, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost: Option<f64>,
    },
    /// The security mode changed (its name, as `Mode::as_str`).
    Mode { mode: String },
    /// The model changed (`provider/model`).
    Model { model: String },
    /// The thinking budget of the next requests changed (`None`: off).
    ThinkingBudget { budget: Option<u32> },
    /// A message joined the model's view of the conversation.
    Message { message: Message },
    /// The model's view was compacted: `messages` replaces everything before.
    Compaction {
        messages: Vec<Message>,
        /// Estimated tokens before and after.
        before: u64,
        after: u64,
    },
    /// A turn ended.
    TurnEnd { stop: TurnStop },
}

impl StoredEvent {
    /// The event to store for a finished call: the terminal artifacts are dropped.
    pub fn tool_result(call_id: &str, status: CallStatus, envelope: &Envelope) -> StoredEvent {
        let artifacts = envelope
            .artifacts
            .iter()
            .filter(|artifact| !matches!(artifact, Artifact::Terminal { .. }))
            .cloned()
            .collect();
        StoredEvent::ToolResult {
            call_id: call_id.to_owned(),
            status,
            envelope: envelope.clone(),
            artifacts,
        }
    }
}

/// The model's view of the conversation that `events` leave behind: the messages in order, each
/// compaction replacing what came before. Consecutive user messages merge (as the turn loop
/// merges a prompt into the user message an interrupted turn left).
pub fn model_history(events: &[StoredEvent]) -> Vec<Message> {
    let mut history: Vec<Message> = Vec::new();
    for event in events {
        match event {
            StoredEvent::Message { message } => push_merged(&mut history, message.clone()),
            StoredEvent::Compaction { messages, .. } => history = messages.clone(),
            _ => {}
        }
    }
    history
}
