//! The agent turn loop and the front-end-neutral events it emits.
//!
//! A front-end (the ACP server, `keel exec`, `keel demo`) owns a [`Session`] per conversation and
//! calls [`Session::run_turn`] with the user's prompt, a [`TurnHost`] and a cancellation token.
//! The loop streams the model's answer, dispatches tool calls through schema check, capability
//! check, permission engine, watchdog and (when the policy says ask) [`TurnHost::approve`], runs
//! read-only calls of one model response in parallel and mutating ones one at a time, and reports
//! everything as [`AgentEvent`]s. It never sees ACP types.

mod events;

pub use events::{
    AgentEvent, ApprovalAnswer, ApprovalRequest, CallStatus, QuestionItem, QuestionOption,
    TurnHost, TurnOutcome, TurnStop, UserContent,
};
