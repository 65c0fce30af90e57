//! Process spawning: the one place a shell command becomes an OS process.
//!
//! - [`Runtime::check_shell`]: the capability check for running `bash -c <command>` in a
//!   directory (the command against the shell scope, the directory against the file scope).
//! - [`Runtime::spawn_shell`]: checks, then starts `bash -c` as the leader of a new process group,
//!   stdin null, stdout and stderr on one pipe (so output keeps its arrival order), with an
//!   environment that turns pagers and colours off. Returns a [`ShellProcess`].
//! - [`ShellProcess`]: the running command. [`ShellProcess::wait_with_output`] streams output to
//!   a progress sink, enforces the timeout and the abort signal, keeps a bounded head and tail in
//!   memory and writes the whole output to a sidecar file once it passes the cap (it keeps
//!   draining, so a chatty command never dies of `SIGPIPE`). [`ShellProcess::kill_group`] ends
//!   every process of the group: `SIGTERM`, a short grace, then `SIGKILL`. Dropping a handle that
//!   has not finished kills its group: no command outlives its call.
//! - [`ShellOutput`] / [`ShellEnding`]: what a command printed and how it ended.
//!
//! When the command's own process exits, anything it left running in the background is ended
//! too (a `bash` call is one command, not a session).

mod capture;

use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::net::unix::pipe;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::AccessError;
use super::sandbox::{Confinement, ShellInvocation};
use super::{Runtime, paths};
use crate::capability::Access;
use crate::contract::{InternalError, ProgressSink};

/// The program every shell command runs under (`bash -c command`): the name the shell scope
/// is checked against.
pub const SHELL: &str = "bash";
pub(super) use capture::{CappedFile, Written, read_before, read_chunk};
use capture::{Collector, Sink, Utf8Stream, accept, read_done};

/// How long a process group gets between `SIGTERM` and `SIGKILL`.
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long output is still read once the group is gone (a process that escaped the group may
/// hold the pipe open).
pub(super) const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// The sidecar file stops growing here; the model cannot read more than this anyway.
pub const SIDECAR_MAX_BYTES: u64 = 64 * 1024 * 1024;
pub(super) const READ_CHUNK: usize = 64 * 1024;
/// Room left in the cap for the `[... N bytes omitted ...]` line.
const MARKER_RESERVE: usize = 64;
const POLL: Duration = Duration::from_millis(20);

/// Environment set for every command: no pagers, no colours, no prompts.
pub const QUIET_ENV: &[(&str, &str)] = &[
    ("TERM", "dumb"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("NO_COLOR", "1"),
    ("CLICOLOR", "0"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

/// Keel's own credentials (defined with the scrub list in [`super::secrets`]).
pub use super::secrets::SECRET_ENV;

/// How [`ShellProcess::wait_with_output`] keeps output: `limit` bytes for the model, the whole
/// output in `sidecar` (created only when the output passes `limit`; it must lie in the session's
/// scratch directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputCapture {
    pub limit: usize,
    pub sidecar: PathBuf,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellEnding {
    /// The command's process exited (on its own or by a signal from elsewhere).
    Exited,
    /// The timeout passed; the group was killed.
    TimedOut,
    /// The abort signal fired; the group was killed.
    Cancelled,
}

/// What a command printed (stdout and stderr interleaved) and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ShellOutput {
    /// The output for the model: all of it up to the cap, else its head, a marker line and its
    /// tail (together at most the cap).
    pub text: String,
    /// Bytes the command printed in all.
    pub total_bytes: u64,
    /// The sidecar file with the whole output, when the output passed the cap.
    pub output_path: Option<PathBuf>,
    /// Why the sidecar does not hold the whole output (size ceiling, write error), if it does not.
    pub sidecar_note: Option<String>,
    pub exit_code: Option<i32>,
    /// The signal that ended the command's process (`SIGKILL`, ...), if one did.
    pub signal: Option<String>,
    pub ending: ShellEnding,
    /// Whether the kernel sandbox confined the command (confirmed by the helper's nonce).
    pub confinement: Confinement,
    /// After a timeout or a cancel: whether Keel verified that every process the command
    /// started is gone (`ShellProcess::tree_gone`). `false` otherwise.
    pub gone_verified: bool,
    /// Keel could not save the whole output (its scratch directory failed): for the user and
    /// the log; the model reads only the neutral `sidecar_note`.
    pub fault: Option<InternalError>,
}

impl ShellOutput {
    /// Whether the command ran to completion and exited with status 0.
    pub fn success(&self) -> bool {
        self.ending == ShellEnding::Exited && self.exit_code == Some(0)
    }
}

impl Runtime {
    /// The capability check for running `bash -c command` in `cwd`: the command against the
    /// shell scope, the (resolved) directory against the read scope. Returns the resolved
    /// directory.
    pub fn check_shell(&self, command: &str, cwd: &Path) -> Result<PathBuf, AccessError> {
        self.scope()
            .check_command(SHELL, &["-c".to_owned(), command.to_owned()])?;
        let cwd = paths::resolve(cwd).map_err(|e| {
            AccessError::io(
                format!("cannot resolve working directory {}: {e}", cwd.display()),
                e,
            )
        })?;
        self.check(&cwd, Access::Read)?;
        Ok(cwd)
    }

    /// Starts `bash -c command` in `cwd` after [`Runtime::check_shell`]: a new process group,
    /// stdin null, stdout and stderr on one pipe. Must be called inside a tokio runtime.
    pub fn spawn_shell(&self, command: &str, cwd: &Path) -> Result<ShellProcess, AccessError> {
        self.spawn_shell_with(command, cwd, false)
    }

    /// [`Runtime::spawn_shell`] with stdin a pipe Keel holds (`ShellProcess::take_stdin`): a
    /// background command the model writes to.
    pub fn spawn_shell_with_stdin(
        &self,
        command: &str,
        cwd: &Path,
    ) -> Result<ShellProcess, AccessError> {
        self.spawn_shell_with(command, cwd, true)
    }

    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    fn spawn_shell_with(
        &self,
        command: &str,
        cwd: &Path,
        stdin: bool,
    ) -> Result<ShellProcess, AccessError> {
        let cwd = self.check_shell(command, cwd)?;
        if !cwd.is_dir() {
            return Err(AccessError::BadArgument(format!(
                "working directory {} is not a directory",
                self.display_path(&cwd)
            )));
        }
        let failed = |what: &str, e: std::io::Error| {
            AccessError::io(format!("cannot start bash ({what}): {e}"), e)
        };
        let invocation = self.local_shell_invocation(command, &cwd)?;
        let (reader, writer) = std::io::pipe().map_err(|e| failed("pipe", e))?;
        let writer_for_stderr = writer.try_clone().map_err(|e| failed("pipe", e))?;
        let environment = self.command_environment();
        let output =
            pipe::Receiver::from_owned_fd(OwnedFd::from(reader)).map_err(|e| failed("pipe", e))?;
        if let Some(warm) = invocation.warm.as_ref().filter(|_| !stdin)
            && let Some(env) = utf8_environment(&environment)
        {
            let stdout = OwnedFd::from(writer.try_clone().map_err(|e| failed("pipe", e))?);
            match self.inner.zygotes.spawn(
                warm,
                &cwd,
                env,
                stdout,
                OwnedFd::from(writer_for_stderr),
            ) {
                Ok(child) => {
                    drop(writer);
                    let pid = i32::try_from(child.id()).unwrap_or(i32::MAX);
                    tracing::debug!(pid, cwd = %cwd.display(), "started a contained command from the warm holder");
                    return Ok(ShellProcess {
                        child: Leader::Warm(child),
                        pgid: Pid::from_raw(pid),
                        output: Some(output),
                        done: None,
                        stdin: None,
                        scratch_dir: self.scratch_dir().to_path_buf(),
                        status: None,
                        finished: false,
                        invocation,
                    });
                }
                Err(error @ super::sandbox::zygote::WarmError::NoAnswer(_)) => {
                    return Err(AccessError::io(
                        format!("cannot start bash: {error}"),
                        std::io::Error::other(error.to_string()),
                    ));
                }
                Err(error) => {
                    tracing::debug!(%error, "the warm holder is not available; the helper runs the command");
                    return self.spawn_helper(
                        invocation,
                        &cwd,
                        &environment,
                        (writer, None),
                        stdin,
                        output,
                    );
                }
            }
        }
        self.spawn_helper(
            invocation,
            &cwd,
            &environment,
            (writer, Some(writer_for_stderr)),
            stdin,
            output,
        )
    }

    /// The environment every command gets: the allowlist of Keel's own, the quiet settings,
    /// without Keel's credentials.
    fn command_environment(&self) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
        let mut environment: Vec<(std::ffi::OsString, std::ffi::OsString)> =
            super::sandbox::profile::allowed_environment(&self.command_env_allow());
        let scrub = super::secrets::scrub_list();
        environment.retain(|(name, _)| {
            !QUIET_ENV.iter().any(|(quiet, _)| name == quiet)
                && !scrub.iter().any(|secret| name == secret.as_str())
        });
        environment.extend(
            QUIET_ENV
                .iter()
                .map(|(name, value)| ((*name).into(), (*value).into())),
        );
        environment
    }

    /// Starts the invocation's program (the sandbox helper, or `bash`) as a child of Keel.
    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    fn spawn_helper(
        &self,
        invocation: ShellInvocation,
        cwd: &Path,
        environment: &[(std::ffi::OsString, std::ffi::OsString)],
        (writer, writer_for_stderr): (std::io::PipeWriter, Option<std::io::PipeWriter>),
        stdin: bool,
        output: pipe::Receiver,
    ) -> Result<ShellProcess, AccessError> {
        let failed = |what: &str, e: std::io::Error| {
            AccessError::io(format!("cannot start bash ({what}): {e}"), e)
        };
        let writer_for_stderr = match writer_for_stderr {
            Some(writer) => writer,
            None => writer.try_clone().map_err(|e| failed("pipe", e))?,
        };
        let mut builder = tokio::process::Command::new(&invocation.program);
        builder
            .args(&invocation.args)
            .current_dir(cwd)
            .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(writer)
            .stderr(writer_for_stderr)
            .process_group(0)
            // Not `kill_on_drop`: `ShellProcess`'s `Drop` ends the group, leader last. A
            // SIGKILL to the leader (the sandbox helper) first would set free what its reaper
            // was to end under the Landlock fallback.
            .kill_on_drop(false);
        // An allowlist, not a scrub: `DATABASE_URL` or `MYSQL_PWD` have no secret-looking name.
        builder.env_clear().envs(environment.iter().cloned());
        for (key, value) in &invocation.env {
            builder.env(key, value);
        }
        if let Some(mask) = &invocation.mask {
            mask.inherit(builder.as_std_mut());
        }
        // A foreground command is reported done from init's line on this FIFO (opened before
        // the helper, which opens it without waiting); a background one waits for the exit.
        let done = if stdin {
            None
        } else {
            invocation
                .check
                .as_ref()
                .and_then(|check| check.done_fifo.as_deref())
                .and_then(|fifo| {
                    pipe::OpenOptions::new()
                        .read_write(true)
                        .open_receiver(fifo)
                        .ok()
                })
        };
        let mut child = builder.spawn().map_err(|e| failed("spawn", e))?;
        let stdin = child.stdin.take();
        // The command holds the parent's copies of the pipe's write end: close them now, or the
        // reader never sees end-of-file.
        drop(builder);
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .ok_or_else(|| {
                AccessError::invariant("starting bash", "bash exited before it could be tracked")
            })?;
        tracing::debug!(pid, cwd = %cwd.display(), "spawned shell command");
        Ok(ShellProcess {
            child: Leader::Process(child),
            pgid: Pid::from_raw(pid),
            output: Some(output),
            done,
            stdin,
            scratch_dir: self.scratch_dir().to_path_buf(),
            status: None,
            finished: false,
            invocation,
        })
    }
}

/// The environment as text, for a warm holder's request; `None` when a value is not UTF-8 (the
/// helper then runs the command).
fn utf8_environment(
    environment: &[(std::ffi::OsString, std::ffi::OsString)],
) -> Option<Vec<(String, String)>> {
    environment
        .iter()
        .map(|(name, value)| Some((name.to_str()?.to_owned(), value.to_str()?.to_owned())))
        .collect()
}

/// What Keel waits on for a command: its own child (the sandbox helper, or `bash`), or a
/// command the session's warm holder started ([`super::sandbox::zygote`]).
#[derive(Debug)]
enum Leader {
    Process(tokio::process::Child),
    Warm(super::sandbox::zygote::WarmChild),
}

impl Leader {
    async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self {
            Leader::Process(child) => child.wait().await,
            Leader::Warm(child) => child.wait().await,
        }
    }

    fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        match self {
            Leader::Process(child) => child.try_wait(),
            Leader::Warm(child) => child.try_wait(),
        }
    }

    /// Whether every process of the command is known gone though the leader may still be
    /// ending (a warm holder's init under namespaces, [`super::sandbox::zygote::WarmChild::emptied`]).
    fn emptied(&self) -> bool {
        match self {
            Leader::Process(_) => false,
            Leader::Warm(child) => child.emptied(),
        }
    }
}

/// A running `bash -c` command: the leader of its own process group.
#[derive(Debug)]
pub struct ShellProcess {
    child: Leader,
    pgid: Pid,
    output: Option<pipe::Receiver>,
    /// The read end of the helper's done FIFO ([`super::sandbox::ConfinementCheck::done_fifo`]).
    done: Option<pipe::Receiver>,
    /// The write end of stdin ([`Runtime::spawn_shell_with_stdin`] only).
    stdin: Option<tokio::process::ChildStdin>,
    scratch_dir: PathBuf,
    status: Option<ExitStatus>,
    finished: bool,
    invocation: ShellInvocation,
}

impl ShellProcess {
    /// The process group id (equal to the leader's pid).
    pub fn process_group(&self) -> i32 {
        self.pgid.as_raw()
    }

    /// The pipe the command's stdout and stderr go to (once; `None` after).
    pub(super) fn take_output(&mut self) -> Option<pipe::Receiver> {
        self.output.take()
    }

    /// The write end of the command's stdin (once; `None` after, or when stdin is null).
    pub(super) fn take_stdin(&mut self) -> Option<tokio::process::ChildStdin> {
        self.stdin.take()
    }

    /// Waits for the group's leader to exit and keeps its status.
    pub(super) async fn wait_leader(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = self.child.wait().await?;
        self.status = Some(status);
        Ok(status)
    }

    /// The leader's exit status, once known.
    pub(super) fn status(&self) -> Option<ExitStatus> {
        self.status
    }

    /// The group is gone (killed and checked): dropping the handle need not kill it again.
    pub(super) fn mark_finished(&mut self) {
        self.finished = true;
    }

    /// How the command was started (the helper's files, for [`super::jobs`]).
    pub(super) fn invocation(&self) -> &ShellInvocation {
        &self.invocation
    }

    /// Whether the group's leader has exited (its status is then kept).
    pub(super) fn leader_exited(&mut self) -> bool {
        if self.status.is_none()
            && let Ok(Some(status)) = self.child.try_wait()
        {
            self.status = Some(status);
        }
        self.status.is_some()
    }

    /// Whether no live process is left in the group (checked in `/proc`).
    pub(super) fn group_gone(&self) -> bool {
        !group_alive(self.pgid)
    }

    /// Whether the kernel sandbox confined the command.
    pub fn confinement(&self) -> Confinement {
        self.invocation.confinement()
    }

    /// Streams the output to `progress` as it arrives, until the command exits, `timeout`
    /// passes or `cancel` fires; on the latter two the whole group is killed. Background
    /// processes still running when the command's process exits are ended too. Timeouts and
    /// cancellation are reported in [`ShellOutput::ending`] (with the output so far), not as
    /// errors.
    pub async fn wait_with_output(
        &mut self,
        capture: OutputCapture,
        timeout: Duration,
        cancel: &CancellationToken,
        progress: &ProgressSink,
    ) -> Result<ShellOutput, AccessError> {
        if !capture.sidecar.starts_with(&self.scratch_dir) {
            return Err(AccessError::invariant(
                "capturing a command's output",
                format!(
                    "{} is not in the session's scratch directory",
                    capture.sidecar.display()
                ),
            ));
        }
        let mut collector = Collector::new(capture);
        let mut stream = Utf8Stream::default();
        let mut buffer = vec![0u8; READ_CHUNK];
        let mut output = self.output.take();
        let mut done = self.done.take();
        // Init said its namespace is empty: the command is done before the helper has exited.
        let mut emptied = false;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ending = ShellEnding::Exited;
        while self.status.is_none() {
            tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    ending = ShellEnding::Cancelled;
                    break;
                }
                () = &mut deadline => {
                    ending = ShellEnding::TimedOut;
                    break;
                }
                read = read_chunk(&mut output, &mut buffer) => match read {
                    Ok(0) => output = None,
                    Ok(n) => accept(&buffer[..n], &mut collector, &mut stream, progress).await,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "reading command output failed");
                        output = None;
                    }
                },
                line = read_done(&mut done) => {
                    match line.ok().and_then(|line| self.done_status(&line)) {
                        Some(status) => {
                            self.status = Some(status);
                            emptied = true;
                        }
                        // Not a line Keel can take: wait for the helper's exit instead.
                        None => done = None,
                    }
                }
                status = self.child.wait() => {
                    let status = status
                        .map_err(|e| AccessError::internal("waiting for a bash process", e))?;
                    self.status = Some(status);
                    // From the warm holder under namespaces: its PID namespace is empty.
                    emptied = self.child.emptied();
                }
            }
        }
        if emptied {
            // Every process of the command is gone (init reaped them all before it wrote the
            // line), so everything it printed is in the pipe: read it without waiting for the
            // end of file, which comes with the helper's own exit. The helper's group holds only
            // the helper (the program has a session of its own); it is reaped once it exits.
            if let Some(reader) = output.take() {
                let mut sink = Sink {
                    buffer: &mut buffer,
                    collector: &mut collector,
                    stream: &mut stream,
                    progress,
                };
                sink.read_what_is_there(&reader).await;
            }
        } else {
            // The command is done, timed out or cancelled: end its whole group (on a normal
            // exit, whatever it left running in the background), so the pipe closes.
            self.kill_group().await;
        }
        if self.status.is_none() {
            // Wait for the leader itself (the group is being killed), so its status is known.
            self.status = self.child.wait().await.ok();
        }
        // Read what is left in the pipe; bounded, in case a process escaped the group.
        if let Some(mut reader) = output {
            let mut sink = Sink {
                buffer: &mut buffer,
                collector: &mut collector,
                stream: &mut stream,
                progress,
            };
            sink.drain(&mut reader, Instant::now() + DRAIN_GRACE).await;
        }
        self.finished = true;
        let gone_verified = ending != ShellEnding::Exited && self.tree_gone().await;
        let status = self.status;
        let (text, total_bytes, output_path, sidecar_note, fault) = collector.finish().await;
        Ok(ShellOutput {
            text,
            total_bytes,
            output_path,
            sidecar_note,
            fault,
            exit_code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()).map(signal_name),
            ending,
            confinement: self.invocation.confinement(),
            gone_verified,
        })
    }

    /// The program's exit status from init's line on the done FIFO, when Keel can take it
    /// ([`super::sandbox::ConfinementCheck::done_ending`]).
    fn done_status(&self, line: &str) -> Option<ExitStatus> {
        let ending = self.invocation.check.as_ref()?.done_ending(line)?;
        Some(match ending {
            Ok(code) => ExitStatus::from_raw(code << 8),
            Err(signal) => ExitStatus::from_raw(signal),
        })
    }

    /// Whether every process the command started is gone, verified: its group, and what the
    /// sandbox helper guards (the namespace, or under the fallback the reaper's tree: processes
    /// that left the group and the session). Waits up to [`KILL_GRACE`] for the helper's guard
    /// to end. `false` for a command run without the helper: processes that left its group
    /// cannot be tracked.
    pub(super) async fn tree_gone(&self) -> bool {
        if group_alive(self.pgid) {
            return false;
        }
        match &self.invocation.check {
            Some(check) => check.wait_gone(KILL_GRACE).await,
            None => false,
        }
    }

    /// Ends every process of the group: `SIGTERM`, up to [`KILL_GRACE`] for them to go, then
    /// `SIGKILL`. Returns once no live process is left in the group (zombies awaiting their
    /// parent do not count), or after a further grace if one survives `SIGKILL`.
    pub async fn kill_group(&mut self) {
        if !group_alive(self.pgid) {
            return;
        }
        send(self.pgid, Signal::SIGTERM);
        // A stopped process only acts on SIGTERM once continued.
        send(self.pgid, Signal::SIGCONT);
        if self.wait_group_gone(KILL_GRACE).await {
            return;
        }
        tracing::debug!(
            pgid = self.pgid.as_raw(),
            "process group outlived SIGTERM; killing"
        );
        send(self.pgid, Signal::SIGKILL);
        if !self.wait_group_gone(KILL_GRACE).await {
            tracing::warn!(pgid = self.pgid.as_raw(), "process group outlived SIGKILL");
        }
    }

    async fn wait_group_gone(&mut self, within: Duration) -> bool {
        let until = Instant::now() + within;
        // A group usually goes within a few milliseconds of the signal: look again after 1 ms,
        // then back off to [`POLL`], so a cancel is answered soon without a busy loop.
        let mut pause = Duration::from_millis(1);
        loop {
            if self.status.is_none()
                && let Ok(Some(status)) = self.child.try_wait()
            {
                self.status = Some(status);
            }
            if !group_alive(self.pgid) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(POLL);
        }
    }
}

impl Drop for ShellProcess {
    fn drop(&mut self) {
        if !self.finished {
            // Abandoned mid-run (the call's future was dropped): `SIGTERM` now, so the sandbox
            // helper can end everything the command started (under the Landlock fallback its
            // reaper does that), and `SIGKILL` after the grace, whatever happens.
            let pgid = self.pgid;
            send(pgid, Signal::SIGTERM);
            send(pgid, Signal::SIGCONT);
            let kill_later = async move {
                tokio::time::sleep(KILL_GRACE).await;
                send(pgid, Signal::SIGKILL);
            };
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => drop(handle.spawn(kill_later)),
                // No runtime to wait in: Keel is exiting. Everything but the group's leader dies
                // now. The leader is the sandbox helper, which then ends what left the group
                // (its PID namespace dies with its init; under the fallback its reaper sweeps
                // the orphans): killing it too would set daemons free.
                Err(_) => match group_members(pgid) {
                    Some(members) => {
                        for pid in members.into_iter().filter(|pid| *pid != pgid) {
                            let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
                        }
                    }
                    None => send(pgid, Signal::SIGKILL),
                },
            }
        }
    }
}

/// A signal's name (`SIGKILL`), or `signal N` for one without a name.
pub(super) fn signal_name(number: i32) -> String {
    Signal::try_from(number).map_or_else(|_| format!("signal {number}"), |s| s.as_str().to_owned())
}

fn send(pgid: Pid, signal: Signal) {
    match killpg(pgid, signal) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(e) => tracing::warn!(pgid = pgid.as_raw(), %signal, error = %e, "killpg failed"),
    }
}

/// Whether the group has a live (not zombie) member. `kill(-pgid, 0)` alone also counts
/// zombies, which linger when the init process is slow to reap orphans.
fn group_alive(pgid: Pid) -> bool {
    if killpg(pgid, None) == Err(Errno::ESRCH) {
        return false;
    }
    // Without `/proc` the group is assumed alive (the caller then waits out its grace).
    group_members(pgid).is_none_or(|members| !members.is_empty())
}

/// The live (not zombie) processes of group `pgid`, or `None` when `/proc` cannot be read.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
fn group_members(pgid: Pid) -> Option<Vec<Pid>> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let mut members = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp ...`; comm may contain anything, so split after the last ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut fields = rest.split_ascii_whitespace();
        let state = fields.next().unwrap_or("");
        let pgrp = fields.nth(1).and_then(|p| p.parse::<i32>().ok());
        if pgrp == Some(pgid.as_raw()) && state != "Z" && state != "X" {
            members.push(Pid::from_raw(pid));
        }
    }
    Some(members)
}
