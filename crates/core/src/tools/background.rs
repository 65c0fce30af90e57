//! Background commands: `bg_start`, `bg_read`, `bg_write`, `bg_stop`.
//!
//! - [`BgStartTool`] / [`BgStartParams`]: starts a command the way `bash` runs one (the same
//!   capability check, the same sandbox helper; the permission engine decides the call as a
//!   `bash` call with that command: [`ToolSpec::decided_as`]) and returns its id at once, with
//!   the output of its first second. It runs in the editor's terminal pane when the front-end
//!   has one, unless `stdin: true` asks for a process whose stdin Keel holds.
//! - [`BgReadTool`]: the output since the last read (optionally waiting for some), and the
//!   state; a job that ended is gone once a read returned its end.
//! - [`BgWriteTool`]: text to a local job's stdin.
//! - [`BgStopTool`]: kills a job and everything it started, checked.
//!
//! The jobs live in the session's table ([`crate::runtime::jobs::Jobs`]): at most
//! `limits.background_jobs` running, `limits.background_bytes` of each one's output in memory and
//! all of it in a sidecar file; all stopped when the session closes. A cancelled turn leaves them
//! running.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::bash::{report_confinement, working_directory};
use crate::capability::{RequirementSet, ShellRunRequirement};
use crate::runtime::jobs::{JobOutput, JobRequest, JobState, Place};
use crate::tool::view::{code, given, one_line};
use crate::tool::{
    CallTarget, CallView, CommandTarget, Describe, Prepared, Preview, Subject, Tool, ToolContext,
    ToolError, ToolKind, ToolOutput, ToolProgress, ToolSpec,
};

/// How long `bg_start` waits for the command's first output.
pub const START_WAIT: Duration = Duration::from_secs(1);
/// The longest wait a read waits (a longer `wait` is cut to it).
pub const MAX_WAIT: Duration = Duration::from_secs(600);

/// The tools' ids, as the registry spells them.
pub const START_ID: &str = crate::tool::BundledTool::BgStart.id();
pub const READ_ID: &str = crate::tool::BundledTool::BgRead.id();
pub const WRITE_ID: &str = crate::tool::BundledTool::BgWrite.id();
pub const STOP_ID: &str = crate::tool::BundledTool::BgStop.id();

const START: &str = "\
Starts a command in the background (a server, a watcher, a long build) like bash, same sandbox \
and rules; returns an id and its first output. Then bg_read, bg_write, bg_stop.";
const READ: &str = "A background command's new output since the last read, and its state.";
const WRITE: &str = "Writes to a background command's stdin (end lines with \\n).";
const STOP: &str = "Stops a background command and all it started.";

/// Arguments of `bg_start`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BgStartParams {
    /// Run with `bash -c`.
    #[schemars(length(min = 1))]
    pub command: String,
    pub cwd: Option<String>,
    /// Keep stdin open for bg_write.
    pub stdin: Option<bool>,
    /// As for bash.
    pub unsandboxed: Option<bool>,
}

/// Arguments of `bg_read`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BgReadParams {
    pub id: String,
    /// Milliseconds to wait for new output (default 0).
    pub wait: Option<u64>,
}

/// Arguments of `bg_write`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BgWriteParams {
    pub id: String,
    pub input: String,
}

/// Arguments of `bg_stop`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BgStopParams {
    pub id: String,
}

/// `bg_start`: start a command in the background.
#[derive(Debug, Clone, Copy, Default)]
pub struct BgStartTool;

/// `bg_read`: new output of a background command.
#[derive(Debug, Clone, Copy, Default)]
pub struct BgReadTool;

/// `bg_write`: write to a background command's stdin.
#[derive(Debug, Clone, Copy, Default)]
pub struct BgWriteTool;

/// `bg_stop`: stop a background command.
#[derive(Debug, Clone, Copy, Default)]
pub struct BgStopTool;

impl Tool for BgStartTool {
    type Params = BgStartParams;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<BgStartParams>(START_ID, START)
            .kind(ToolKind::Execute)
            .title("Start a background command")
            .subject(Subject::Command("command".into()))
            .decided_as(super::bash::ID)
            .requires(RequirementSet::fs_read(&["{workspace}/**"]).with_shell(
                ShellRunRequirement::any_args(crate::runtime::process::SHELL),
            ))
    }

    fn target(&self, params: &BgStartParams) -> CallTarget {
        CallTarget::Command(CommandTarget {
            line: params.command.clone(),
            cwd: params.cwd.clone(),
            unsandboxed: params.unsandboxed == Some(true),
        })
    }

    fn describe(&self, params: &BgStartParams, _how: Describe<'_>) -> CallView {
        let title = match given(Some(&params.command)) {
            Some(command) => format!("{} (background)", code(&one_line(command, 120))),
            None => "Start a background command".into(),
        };
        CallView {
            title,
            locations: Vec::new(),
        }
    }

    async fn prepare(
        &self,
        params: &BgStartParams,
        _subject: Option<&std::path::Path>,
        ctx: &ToolContext,
    ) -> Result<Option<Prepared>, ToolError> {
        let cwd = working_directory(params.cwd.as_deref(), ctx)?;
        let preview = Preview::Command {
            command: params.command.clone(),
            cwd: ctx.runtime.display_path(&cwd),
        };
        Ok(Some(Prepared::new(Some(preview), ())))
    }

    async fn run(&self, params: BgStartParams, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let cwd = working_directory(params.cwd.as_deref(), ctx)?;
        let jobs = ctx.session.jobs();
        let request = JobRequest {
            command: params.command.clone(),
            cwd,
            prefer_pane: params.stdin != Some(true),
        };
        let started = jobs
            .start(&ctx.runtime, request, ctx.session.next_sidecar("bg"))
            .await?;
        if let Some(terminal_id) = &started.terminal_id {
            ctx.progress
                .send(ToolProgress::Terminal(terminal_id.clone()));
        }
        let job = started.job;
        // The first output, if any comes soon; a cancel ends the wait, not the job.
        let first = tokio::select! {
            first = job.read(jobs, &ctx.runtime, START_WAIT) => first,
            () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        let place = match job.place() {
            Place::Local => match job.pid() {
                Some(pid) => format!("pid {pid}"),
                None => "a local process".to_owned(),
            },
            Place::Pane => "in the editor's terminal".to_owned(),
        };
        let mut text = format!("Started {} ({place}).\n", job.id);
        text.push_str(&render(&job.id, &first));
        let exit_code = match &first.state {
            JobState::Exited { code, .. } => *code,
            _ => Some(0),
        };
        let output = ToolOutput::text(text)
            .with("id", job.id.clone())
            .with("state", first.state.to_string());
        Ok(report_confinement(output, &started.confinement, exit_code))
    }
}

impl Tool for BgReadTool {
    type Params = BgReadParams;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<BgReadParams>(READ_ID, READ)
            .kind(ToolKind::Read)
            .title("Read a background command's output")
            .read_only()
    }

    fn describe(&self, params: &BgReadParams, _how: Describe<'_>) -> CallView {
        CallView {
            title: format!("Output of {}", code(&params.id)),
            locations: Vec::new(),
        }
    }

    async fn run(&self, params: BgReadParams, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let jobs = ctx.session.jobs();
        let job = jobs.get(&params.id)?;
        let wait = params
            .wait
            .map_or(Duration::ZERO, Duration::from_millis)
            .min(MAX_WAIT);
        let read = tokio::select! {
            read = job.read(jobs, &ctx.runtime, wait) => read,
            () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        Ok(ToolOutput::text(render(&job.id, &read)).with("state", read.state.to_string()))
    }
}

impl Tool for BgWriteTool {
    type Params = BgWriteParams;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<BgWriteParams>(WRITE_ID, WRITE)
            .kind(ToolKind::Execute)
            .title("Write to a background command")
    }

    fn describe(&self, params: &BgWriteParams, _how: Describe<'_>) -> CallView {
        CallView {
            title: format!(
                "Write {} to {}",
                code(&one_line(&params.input, 60)),
                code(&params.id)
            ),
            locations: Vec::new(),
        }
    }

    async fn run(&self, params: BgWriteParams, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let job = ctx.session.jobs().get(&params.id)?;
        job.write(&params.input).await?;
        Ok(ToolOutput::text(format!(
            "Wrote {} bytes to {}'s stdin; bg_read shows what it answers.",
            params.input.len(),
            job.id
        )))
    }
}

impl Tool for BgStopTool {
    type Params = BgStopParams;

    fn spec(&self) -> ToolSpec {
        // Stopping changes nothing but the session's own processes: allowed in every mode.
        ToolSpec::new::<BgStopParams>(STOP_ID, STOP)
            .kind(ToolKind::Execute)
            .title("Stop a background command")
            .read_only()
    }

    fn describe(&self, params: &BgStopParams, _how: Describe<'_>) -> CallView {
        CallView {
            title: format!("Stop {}", code(&params.id)),
            locations: Vec::new(),
        }
    }

    async fn run(&self, params: BgStopParams, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let jobs = ctx.session.jobs();
        let job = jobs.get(&params.id)?;
        let was_running = job.state().is_running();
        job.stop().await;
        // What it printed before it went, and its end (the job is then forgotten).
        let last = job.read(jobs, &ctx.runtime, Duration::ZERO).await;
        let mut text = if was_running {
            match &last.state {
                JobState::Stopped { verified: true } => format!(
                    "Stopped {}: it and every process it started are gone (checked).\n",
                    job.id
                ),
                JobState::Stopped { verified: false } => format!(
                    "Stopped {}, but Keel could not confirm that every process it started is \
                     gone.\n",
                    job.id
                ),
                other => format!("{} had already ended ({other}).\n", job.id),
            }
        } else {
            format!("{} had already ended.\n", job.id)
        };
        if !last.text.is_empty() {
            text.push_str("Its last output:\n");
        }
        text.push_str(&render(&job.id, &last));
        let verified = matches!(last.state, JobState::Stopped { verified: true })
            || matches!(last.state, JobState::Exited { .. });
        Ok(ToolOutput::text(text)
            .with("state", last.state.to_string())
            .with("verified", verified))
    }
}

/// New output and a closing line with the state, as the model reads it.
fn render(id: &str, read: &JobOutput) -> String {
    let mut text = String::new();
    if read.dropped > 0 {
        text.push_str(&format!(
            "[{} bytes of output were dropped from memory before this read",
            read.dropped
        ));
        if let Some(path) = &read.sidecar {
            text.push_str(&format!("; the whole output is in {}", path.display()));
        }
        text.push_str("]\n");
    }
    if read.pane_dropped {
        text.push_str("[the editor's terminal dropped some output before Keel read it]\n");
    }
    text.push_str(&read.text);
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if read.text.is_empty() && read.dropped == 0 {
        text.push_str("(no new output)\n");
    }
    for line in &read.restored {
        text.push_str(&format!("[{line}]\n"));
    }
    if let Some(fault) = &read.fault {
        text.push_str(&format!("[{fault}]\n"));
    }
    match &read.state {
        JobState::Running => text.push_str(&format!("[{id} is running]")),
        state => {
            text.push_str(&format!("[{id} {state}; it is no longer listed]"));
            if let Some(path) = &read.sidecar {
                text.push_str(&format!("\n[its whole output is in {}]", path.display()));
            }
        }
    }
    text
}
