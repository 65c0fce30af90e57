//! The `bash` tool: runs one command with `bash -c`.
//!
//! - [`BashTool`] / [`BashParams`]: `command`, an optional `timeout` in milliseconds (default two
//!   minutes, at most ten), an optional `description` for the user, an optional `cwd` inside the
//!   workspace (default: the workspace root).
//!
//! The command runs through [`Runtime::spawn_shell`](crate::runtime::Runtime::spawn_shell) (its
//! own process group, killed whole on timeout or abort, stdout and stderr interleaved and streamed
//! as progress), or through the editor's terminal pane when the front-end provides one. The model
//! gets the output up to `limits.bash_bytes` (head and tail past it, the whole output in a
//! sidecar file), the exit code and the signal. A non-zero exit is an output, marked as such; a
//! timeout is an error that carries the output so far.
//!
//! Both ways the command runs inside the kernel sandbox ([`crate::runtime::sandbox`]): the
//! terminal runs Keel's helper wrapping `bash -c`. The result says which mechanism confined the
//! command (`sandbox` in the data), says plainly when it ran unconfined, and, when a confined
//! command failed on something the sandbox denies, says so.

use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::capability::{Access, RequirementSet, ShellRunRequirement};
use crate::runtime::TerminalRequest;
use crate::runtime::process::{KILL_GRACE, OutputCapture, ShellEnding, ShellOutput};
use crate::runtime::sandbox::Confinement;
use crate::tool::view::{given, one_line};
use crate::tool::{
    Artifact, CallTarget, CallView, CommandTarget, Describe, Prepared, Preview, Subject, Tool,
    ToolContext, ToolError, ToolKind, ToolOutput, ToolSpec,
};

/// The tool's id, as the registry spells it.
pub const ID: &str = crate::tool::BundledTool::Bash.id();

/// The timeout when the call gives none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest timeout a call may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);

const DESCRIPTION: &str = "\
Runs one command with `bash -c`; returns stdout and stderr combined, the exit code and signal.
- Runs in the workspace root (or `cwd`), a fresh shell each call: `cd` and variables do not \
carry over; background processes stop when it exits. stdin is closed; no pager, no colour.
- On timeout everything it started is killed. Long output is cut and saved whole to a file you \
can `read`.
- Prefer `read`, `glob`, `grep`, `edit`, `write` over cat, find, grep, sed. Quote paths with \
spaces; chain steps with `&&`.
- Runs in a kernel sandbox (little visible or writable outside the workspace, no network). Only \
when a command failed because the sandbox denied a path or host it needs, run it again with \
`unsandboxed: true`: the user is asked.";

/// Arguments of `bash`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashParams {
    /// The command line.
    #[schemars(length(min = 1))]
    pub command: String,
    /// In milliseconds (default 120000).
    #[schemars(range(min = 1, max = 600000))]
    pub timeout: Option<u64>,
    /// What it does, in 5-10 words, for the user.
    pub description: Option<String>,
    /// Default the workspace root.
    pub cwd: Option<String>,
    /// Run outside the sandbox (the user is asked).
    pub unsandboxed: Option<bool>,
}

/// `bash`: run one command.
#[derive(Debug, Clone, Copy, Default)]
pub struct BashTool;

/// Where a command runs: `cwd` resolved and checked, else the workspace root (shared with the
/// background tools).
pub(crate) fn working_directory(
    cwd: Option<&str>,
    ctx: &ToolContext,
) -> Result<PathBuf, ToolError> {
    match cwd {
        Some(cwd) => Ok(ctx.runtime.resolve_checked(cwd, Access::Read)?),
        None if ctx.runtime.roots().is_empty() => Err(ToolError::BadArgument(
            "no workspace is open; pass an absolute `cwd`".into(),
        )),
        None => Ok(ctx.runtime.root().to_path_buf()),
    }
}

impl BashTool {
    fn working_directory(params: &BashParams, ctx: &ToolContext) -> Result<PathBuf, ToolError> {
        working_directory(params.cwd.as_deref(), ctx)
    }

    async fn run_in_terminal(
        params: &BashParams,
        cwd: PathBuf,
        timeout: Duration,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let Some(terminals) = ctx.runtime.terminals() else {
            return Err(ToolError::Unavailable("no terminal backend".into()));
        };
        let cwd = ctx.runtime.check_shell(&params.command, &cwd)?;
        let invocation = ctx
            .runtime
            .shell_invocation(&params.command, &cwd)
            .map_err(crate::runtime::AccessError::from)?;
        let request = TerminalRequest {
            command: params.command.clone(),
            program: invocation.program.clone(),
            args: invocation.args.clone(),
            env: invocation.env.clone(),
            cwd,
            timeout,
            output_limit: ctx.session.limits.bash_bytes,
        };
        let outcome = terminals
            .run(request, ctx.progress.clone(), ctx.cancel.clone())
            .await?;
        // The editor reported the kill of a timed-out command; whether the namespace (or the
        // reaper's tree) is empty is the helper's to say (read before its files go).
        let gone = outcome.timed_out
            && match &invocation.check {
                Some(check) => check.wait_gone(KILL_GRACE).await,
                None => false,
            };
        let confinement = invocation.confinement();
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let mut text = String::new();
        if outcome.truncated {
            text.push_str("[earlier output was dropped by the terminal]\n");
        }
        text.push_str(&outcome.output);
        if outcome.timed_out {
            return Err(timeout_error(timeout, &text, None, gone));
        }
        let mut output = finish(text, outcome.exit_code, outcome.signal, None, None);
        output = report_confinement(output, &confinement, outcome.exit_code);
        output.artifacts.push(Artifact::Terminal {
            terminal_id: outcome.terminal_id,
        });
        Ok(output)
    }
}

impl Tool for BashTool {
    type Params = BashParams;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<BashParams>(ID, DESCRIPTION)
            .kind(ToolKind::Execute)
            .title("Run a command")
            .subject(Subject::Command("command".into()))
            .requires(RequirementSet::fs_read(&["{workspace}/**"]).with_shell(
                ShellRunRequirement::any_args(crate::runtime::process::SHELL),
            ))
    }

    fn target(&self, params: &BashParams) -> CallTarget {
        CallTarget::Command(CommandTarget {
            line: params.command.clone(),
            cwd: params.cwd.clone(),
            unsandboxed: params.unsandboxed == Some(true),
        })
    }

    fn describe(&self, params: &BashParams, _how: Describe<'_>) -> CallView {
        let title = match given(Some(&params.command)) {
            // The command as typed: editors draw an execute call's title as plain text.
            Some(command) => one_line(command, 120),
            None => "Run a command".into(),
        };
        CallView {
            title,
            locations: Vec::new(),
        }
    }

    async fn run(&self, params: BashParams, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let cwd = Self::working_directory(&params, ctx)?;
        let timeout = params
            .timeout
            .map_or(DEFAULT_TIMEOUT, Duration::from_millis)
            .min(MAX_TIMEOUT);
        if ctx.runtime.terminals().is_some() {
            return Self::run_in_terminal(&params, cwd, timeout, ctx).await;
        }
        let mut process = ctx.runtime.spawn_shell(&params.command, &cwd)?;
        let capture = OutputCapture {
            limit: ctx.session.limits.bash_bytes,
            sidecar: ctx.session.next_sidecar(ID),
        };
        let shell = process
            .wait_with_output(capture, timeout, &ctx.cancel, &ctx.progress)
            .await?;
        let ShellOutput {
            text,
            output_path,
            sidecar_note,
            exit_code,
            signal,
            ending,
            confinement,
            fault,
            gone_verified,
            ..
        } = shell;
        if let (Some(fault), false) = (&fault, ending == ShellEnding::Exited) {
            // No output reaches the user for these endings: the log keeps the failure.
            tracing::error!(error = %fault.report(), "internal error during a bash call");
        }
        match ending {
            ShellEnding::Cancelled => Err(ToolError::Cancelled),
            ShellEnding::TimedOut => Err(timeout_error(
                timeout,
                &text,
                output_path.as_deref(),
                gone_verified,
            )),
            ShellEnding::Exited => {
                let mut output = report_confinement(
                    finish(text, exit_code, signal, output_path, sidecar_note),
                    &confinement,
                    exit_code,
                );
                // The command ran; Keel failed to keep its whole output: the user is shown why.
                if let Some(fault) = fault {
                    output.artifacts.push(Artifact::InternalError {
                        report: fault.report(),
                    });
                }
                Ok(output)
            }
        }
    }

    /// The preview: the command and where it runs. The run itself starts nothing before it is
    /// allowed, so there is nothing else to prepare.
    async fn prepare(
        &self,
        params: &BashParams,
        _subject: Option<&std::path::Path>,
        ctx: &ToolContext,
    ) -> Result<Option<Prepared>, ToolError> {
        let cwd = Self::working_directory(params, ctx)?;
        let preview = Preview::Command {
            command: params.command.clone(),
            cwd: ctx.runtime.display_path(&cwd),
        };
        Ok(Some(Prepared::new(Some(preview), ())))
    }
}

/// Output lines that suggest the sandbox denied something.
const DENIAL_MARKERS: &[&str] = &[
    "Read-only file system",
    "Permission denied",
    "Operation not permitted",
    "Network is unreachable",
    "No such file or directory",
    "Could not resolve host",
    "Temporary failure in name resolution",
];

/// Adds the confinement to the output: `sandbox` in the data, a plain line when the command ran
/// unconfined, and a hint when a confined command failed on something the sandbox denies.
pub(crate) fn report_confinement(
    mut output: ToolOutput,
    confinement: &Confinement,
    exit_code: Option<i32>,
) -> ToolOutput {
    output = output.with("sandbox", confinement.label());
    match confinement {
        Confinement::Unconfined { reason } => {
            output = output.with("unconfined", reason.as_str());
            push_line(
                &mut output,
                &format!("[ran without the kernel sandbox: {reason}]"),
            );
        }
        Confinement::Confined { restored, .. } => {
            for line in restored {
                push_line(&mut output, &format!("[{line}]"));
            }
            let failed = exit_code != Some(0);
            if failed && DENIAL_MARKERS.iter().any(|m| output.text.contains(m)) {
                push_line(
                    &mut output,
                    "[the command ran in Keel's sandbox: only the workspace and a private /tmp \
                     are writable, the home directory is hidden but for tool caches, and the \
                     network is off. If it failed on a denied path or host it really needs, run \
                     it again with `unsandboxed: true` (the user is asked) rather than retrying \
                     as is]",
                );
            }
        }
    }
    output
}

fn push_line(output: &mut ToolOutput, line: &str) {
    if !output.text.ends_with('\n') {
        output.text.push('\n');
    }
    output.text.push_str(line);
}

/// The output of a finished command: its text, marked when it failed, and the status in data.
fn finish(
    mut text: String,
    exit_code: Option<i32>,
    signal: Option<String>,
    output_path: Option<PathBuf>,
    sidecar_note: Option<String>,
) -> ToolOutput {
    if text.is_empty() {
        text.push_str("(no output)");
    }
    let failed = exit_code != Some(0);
    if failed {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        match (&exit_code, &signal) {
            (_, Some(signal)) => text.push_str(&format!("[command was killed by {signal}]")),
            (Some(code), None) => text.push_str(&format!("[command failed with exit code {code}]")),
            (None, None) => text.push_str("[command ended without an exit code]"),
        }
    }
    let mut output = ToolOutput::text(text).artifact(Artifact::Exit { code: exit_code });
    if let Some(code) = exit_code {
        output = output.with("exit_code", code);
    }
    if let Some(signal) = signal {
        output = output.with("signal", signal);
    }
    if let Some(note) = sidecar_note {
        output = output.with("note", note);
    }
    output.output_path = output_path;
    output
}

fn timeout_error(
    timeout: Duration,
    text: &str,
    output_path: Option<&Path>,
    gone: bool,
) -> ToolError {
    let mut message = format!(
        "the command did not finish within {}s and was killed ({})",
        timeout.as_secs_f64(),
        if gone {
            "with every process it started: checked, none is left"
        } else {
            "Keel could not confirm that every process it started is gone"
        }
    );
    if text.is_empty() {
        message.push_str("; it printed nothing");
    } else {
        message.push_str(". Output so far:\n");
        message.push_str(text);
    }
    if let Some(path) = output_path {
        if !message.ends_with('\n') {
            message.push('\n');
        }
        message.push_str(&format!(
            "[the whole output so far is in {}]",
            path.display()
        ));
    }
    ToolError::external(message)
}
