//! The words of a turn a session's log records, defined here so the store needs nothing of the
//! turn loop ([`crate::agent`] re-exports them): the user's prompt ([`UserContent`]), where a
//! call stands ([`CallStatus`]), how a prompt was answered ([`ApprovalAnswer`]), why a turn
//! stopped ([`TurnStop`]).

use serde::{Deserialize, Serialize};

use crate::policy::Answer;

/// A piece of the user's prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum UserContent {
    Text {
        text: String,
    },
    Image {
        media_type: String,
        data: String,
    },
    /// An embedded resource (a file the user attached), given to the model as text.
    Resource {
        uri: String,
        text: String,
    },
}

/// Where a tool call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    Pending,
    InProgress,
    Completed,
    Failed,
}

/// How an approval request ([`crate::agent::ApprovalRequest`]) ended: the user's [`Answer`] (the policy's one definition of an
/// answer), or no answer because the prompt was cancelled. Stored in session logs as
/// `allow_once`, `allow_always`, `reject_once`, `reject_always` or `cancelled`.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAnswer {
    /// The prompt was cancelled (the turn is being cancelled).
    Cancelled,
    /// The user answered.
    #[serde(untagged)]
    Answered(Answer),
}

/// `AllowOnce`, ..., `Cancelled`: the answer itself, as logs and tests have always shown it.
impl std::fmt::Debug for ApprovalAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApprovalAnswer::Answered(answer) => answer.fmt(f),
            ApprovalAnswer::Cancelled => f.write_str("Cancelled"),
        }
    }
}

impl From<Answer> for ApprovalAnswer {
    fn from(answer: Answer) -> Self {
        ApprovalAnswer::Answered(answer)
    }
}

/// Why a turn stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStop {
    EndTurn,
    MaxTokens,
    /// The turn made as many model requests as allowed.
    MaxRequests,
    Refusal,
    Cancelled,
}
