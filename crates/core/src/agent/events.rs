//! What the turn loop tells its host, and what it asks of it.

use futures::future::BoxFuture;
use serde_json::Value;

pub use crate::policy::Answer;
pub use crate::store::{ApprovalAnswer, CallStatus, TurnStop, UserContent};
use crate::tool::{Artifact, CallView, Envelope, PlanEntry, Preview, ToolKind, ToolProgress};

/// Everything a turn reports, in order. Sending never blocks the loop.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// A chunk of the assistant's answer. `message_id` is stable within one model message.
    Text { message_id: String, text: String },
    /// A chunk of the model's visible reasoning.
    Thinking { message_id: String, text: String },
    /// The model asked for a tool call (arguments complete, validated or not).
    ToolCall {
        call_id: String,
        tool_id: String,
        kind: ToolKind,
        args: Value,
        /// The title and the places the call touches, from the tool's typed arguments.
        view: CallView,
    },
    /// The call's status changed (pending → in progress, ...).
    ToolStatus { call_id: String, status: CallStatus },
    /// Streamed output or a terminal id while the call runs.
    ToolProgress {
        call_id: String,
        progress: ToolProgress,
    },
    /// The call finished; `envelope` is what the model receives (artifacts ride along).
    ToolResult {
        call_id: String,
        status: CallStatus,
        envelope: Envelope,
    },
    /// The todo list changed.
    Plan { entries: Vec<PlanEntry> },
    /// Context used by the latest model request versus the model's window (not a running total).
    Usage {
        used: u64,
        size: u64,
        /// The session's cost so far in USD, when the price of every response is known
        /// ([`crate::provider::pricing`]).
        cost: Option<f64>,
    },
    /// The session got its title (from its first prompt).
    SessionTitle { title: String },
    /// Older turns were summarized: estimated input tokens before and after, and the window.
    Compacted { before: u64, after: u64, size: u64 },
    /// Something Keel itself tells the user (not the model's words, never in the history):
    /// the project settings an untrusted project's files ask for that were not applied.
    Notice { text: String },
    /// An event of a subagent started by the `task` call `parent_call_id`. Its call ids are
    /// prefixed with `{parent_call_id}/`, so they never clash with the parent's.
    Subagent {
        parent_call_id: String,
        /// The agent's name (`general` for a general-purpose one).
        agent: String,
        event: Box<AgentEvent>,
    },
    /// Keel is waiting before it asks the model again (a rate limit, an overloaded or
    /// unreachable service): a short status line for the user, never in the history.
    Waiting { text: String },
}

/// A call the policy says to ask about.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    pub call_id: String,
    pub tool_id: String,
    pub kind: ToolKind,
    pub args: Value,
    /// The call's title and locations (as its [`AgentEvent::ToolCall`] showed them).
    pub view: CallView,
    /// The diff of an edit or write, the command and cwd of a shell run.
    pub preview: Option<Preview>,
    /// Why the policy asks, in one sentence naming the deciding rule (the detail line).
    pub reason: String,
    /// Why the user is asked, in plain words ("No permission rule allows this yet, so Keel asks
    /// first."); empty when the reason says it all.
    pub why: String,
    /// What "always" would cover, in words ("commands starting with `cargo test`"); `None` when
    /// the call has no cacheable key (the host then offers once-only answers).
    pub always_scope: Option<String>,
    /// The call asks to run outside the kernel sandbox: the host offers "Allow once without the
    /// sandbox" (and "always", per approval key) instead of the plain allow options.
    pub unconfined: bool,
}

/// The `question` tool's questions: defined with the tool contract ([`crate::tool`]).
pub use crate::tool::{QuestionItem, QuestionOption};

/// The front-end side of a turn.
pub trait TurnHost: Send + Sync {
    /// Receives every event of the turn, in order. Must not block.
    fn event(&self, event: AgentEvent);

    /// Asks the human about a gated call. Headless hosts never get here (the policy turns ask
    /// into deny first). Hosts serialize their prompts per session.
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'_, ApprovalAnswer>;

    /// Asks the human the `question` tool's questions; one answer list per question. `Err` is the
    /// message the model gets (headless hosts answer with a fixed refusal).
    // String error: the refusal (a skip, a decline, the editor's text) is what the model reads.
    fn ask(&self, questions: Vec<QuestionItem>) -> BoxFuture<'_, Result<Vec<Vec<String>>, String>>;

    /// Resolves when the front-end can take more events. A host whose client stopped reading
    /// holds the turn here, so what the model and the tools produce waits upstream (in the
    /// model's TCP window, or dropped from a tool's live output) instead of piling up in memory.
    fn ready(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    /// The editor's artifacts for a finished call (diffs, terminals) are in the envelope;
    /// this hook lets a host release resources (e.g. an ACP terminal) after its final update.
    fn call_finished(&self, _call_id: &str, _artifacts: &[Artifact]) {}
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub stop: TurnStop,
    /// The assistant's final text of the turn (all text of the last model message).
    pub final_text: String,
    /// Tool calls the policy or the user denied during the turn.
    pub denied_calls: usize,
    /// Tool calls that failed.
    pub failed_calls: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_answers_keep_their_stored_names() {
        let cases = [
            (ApprovalAnswer::Answered(Answer::AllowOnce), "allow_once"),
            (
                ApprovalAnswer::Answered(Answer::AllowAlways),
                "allow_always",
            ),
            (ApprovalAnswer::Answered(Answer::RejectOnce), "reject_once"),
            (
                ApprovalAnswer::Answered(Answer::RejectAlways),
                "reject_always",
            ),
            (ApprovalAnswer::Cancelled, "cancelled"),
        ];
        for (answer, name) in cases {
            let json = serde_json::json!(name);
            assert_eq!(serde_json::to_value(answer).unwrap(), json);
            assert_eq!(
                serde_json::from_value::<ApprovalAnswer>(json).unwrap(),
                answer
            );
        }
        assert!(serde_json::from_value::<ApprovalAnswer>(serde_json::json!("allow-once")).is_err());
    }
}
