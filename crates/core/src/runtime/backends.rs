//! The two seams front-ends plug in through: a [`FileBackend`] (the editor's buffers, ACP
//! `fs/*_text_file`) and a [`TerminalBackend`] (the editor's terminal pane, ACP `terminal/*`).

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::AccessError;
use crate::contract::ProgressSink;

/// The editor's view of files. `None` from a method means "not handled here; use the disk".
pub trait FileBackend: Send + Sync + Debug {
    // String error: the editor's own refusal text, shown to the model as is.
    fn read_text<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, Option<Result<String, String>>>;
    // String error: the editor's own refusal text, shown to the model as is.
    fn write_text<'a>(
        &'a self,
        path: &'a Path,
        content: &'a str,
    ) -> BoxFuture<'a, Option<Result<(), String>>>;
}

/// A shell command to run in the host's terminal.
#[derive(Debug, Clone, PartialEq)]
pub struct TerminalRequest {
    /// The command as the model wrote it (for display).
    pub command: String,
    /// What the terminal runs: the sandbox helper wrapping `bash -c COMMAND`, or `bash` itself
    /// ([`Runtime::shell_invocation`](super::Runtime::shell_invocation)).
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Variables the program needs on top of the terminal's quiet environment (how the sandbox
    /// helper finds its profile, once the profile travels out of band rather than as
    /// arguments; empty today). The front-end passes them in `terminal/create`.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub timeout: Duration,
    /// Bytes of output the host keeps (the bash cap).
    pub output_limit: usize,
}

/// How a terminal run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TerminalOutcome {
    pub terminal_id: String,
    pub output: String,
    /// The host dropped output from the start to stay under the limit.
    pub truncated: bool,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    pub timed_out: bool,
}

/// What the editor's terminal holds now (`terminal/output`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TerminalSnapshot {
    pub output: String,
    /// The editor dropped output from the start to stay under the limit.
    pub truncated: bool,
    /// Set once the command has exited.
    pub exit: Option<TerminalExit>,
}

/// How a terminal's command ended.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TerminalExit {
    pub code: Option<i32>,
    pub signal: Option<String>,
}

fn no_background<T>() -> BoxFuture<'static, Result<T, AccessError>> {
    Box::pin(async {
        Err(AccessError::Unavailable(
            "this terminal pane runs no background commands".into(),
        ))
    })
}

/// The editor's terminal pane. The backend creates the terminal, reports its id through
/// `progress` ([`crate::tool::ToolProgress::Terminal`]), waits with the timeout, kills on timeout
/// or cancel, and returns the output. Releasing the terminal is the front-end's job, after its
/// final update for the call.
pub trait TerminalBackend: Send + Sync + Debug {
    fn run<'a>(
        &'a self,
        request: TerminalRequest,
        progress: ProgressSink,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<TerminalOutcome, AccessError>>;

    /// Creates a terminal for a background command and returns its id at once
    /// ([`jobs`](super::jobs)); the request's timeout is ignored. The front-end does not release it: the
    /// job does ([`TerminalBackend::release`]).
    fn start<'a>(&'a self, request: TerminalRequest) -> BoxFuture<'a, Result<String, AccessError>> {
        let _ = request;
        no_background()
    }

    /// The terminal's output now, and its exit status once it exited.
    fn snapshot<'a>(
        &'a self,
        terminal_id: &'a str,
    ) -> BoxFuture<'a, Result<TerminalSnapshot, AccessError>> {
        let _ = terminal_id;
        no_background()
    }

    /// Waits until the terminal's command exits.
    fn wait_exit<'a>(
        &'a self,
        terminal_id: &'a str,
    ) -> BoxFuture<'a, Result<TerminalExit, AccessError>> {
        let _ = terminal_id;
        no_background()
    }

    /// Kills the terminal's command and waits (bounded) for the editor to report its exit:
    /// `Some` once it did.
    fn kill<'a>(
        &'a self,
        terminal_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<TerminalExit>, AccessError>> {
        let _ = terminal_id;
        no_background()
    }

    /// Releases a terminal [`TerminalBackend::start`] created.
    fn release(&self, terminal_id: &str) {
        let _ = terminal_id;
    }
}
