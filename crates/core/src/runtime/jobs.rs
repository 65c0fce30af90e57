//! Background commands: a session's jobs table.
//!
//! - [`Jobs`]: one per session ([`crate::tool::SessionState::jobs`]). Starts commands in the
//!   background (at most `limit` running at once), finds them by id (`bg-1`, `bg-2`, ...), lists
//!   them for `/jobs`, and stops them all when the session closes or is dropped.
//! - [`Job`]: one command. Its output is kept twice: the last `ring_bytes` in memory (what
//!   [`Job::read`] returns, new output only) and all of it in a sidecar file in the session's
//!   scratch directory (up to [`SIDECAR_MAX_BYTES`]). A job that ends on its own keeps its exit
//!   status and the output not yet read until a read returns them; it is then removed.
//! - Two places a job runs: a local process ([`Runtime::spawn_shell_with_stdin`]: its own
//!   process group, stdin a pipe Keel holds, the same sandbox helper as `bash`), or the editor's
//!   terminal pane ([`TerminalBackend::start`], read with `terminal/output`, killed with
//!   `terminal/kill`; the pane takes no input from Keel).
//! - Stopping is verified: locally the whole process group is killed (`SIGTERM`, a grace,
//!   `SIGKILL`) and `/proc` is checked until none of it is left; in the pane the editor must
//!   report the exit. Either way the sandbox helper's guard must then say that nothing the
//!   command started is left (`ConfinementCheck::wait_gone`: the namespace's init has exited, or
//!   the fallback's reaper found its tree empty). [`stop_everywhere`] stops the jobs of every
//!   session of the process (`keel` exiting).
//!
//! The permission decision is not made here: a job is started by a tool call the policy decided
//! exactly as it decides `bash` with the same command.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::AccessError;
use super::process::{
    DRAIN_GRACE, KILL_GRACE, READ_CHUNK, SIDECAR_MAX_BYTES, ShellProcess, open_sidecar, read_chunk,
    signal_name,
};
use super::sandbox::{Confinement, ConfinementCheck, ShellInvocation};
use super::{Runtime, TerminalBackend, TerminalExit, TerminalRequest};

/// Running background commands a session may have at once (`[limits] backgroundJobs`).
pub const DEFAULT_JOB_LIMIT: usize = 8;
/// Bytes of a job's output kept in memory (`[limits] backgroundBytes`); the sidecar has all.
pub const DEFAULT_RING_BYTES: usize = 64 * 1024;
/// How long a start waits for the sandbox helper to say how it confined the command.
const HELPER_WAIT: Duration = Duration::from_secs(5);
/// How long a write waits for the command to take its input.
const WRITE_WAIT: Duration = Duration::from_secs(10);
/// How long a stop waits for the job's driver to report the group gone (the kill's own two
/// graces, the drain, and some slack).
const STOP_WAIT: Duration = Duration::from_secs(10);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How a job stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    Running,
    /// The command's process exited on its own (or by a signal from elsewhere).
    Exited {
        code: Option<i32>,
        signal: Option<String>,
    },
    /// Stopped by Keel (the stop tool, the session closing). `verified`: nothing of it is left
    /// (checked in `/proc`, or the editor reported the exit).
    Stopped {
        verified: bool,
    },
}

impl JobState {
    pub fn is_running(&self) -> bool {
        matches!(self, JobState::Running)
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobState::Running => f.write_str("running"),
            JobState::Exited {
                signal: Some(signal),
                ..
            } => write!(f, "killed by {signal}"),
            JobState::Exited {
                code: Some(code), ..
            } => write!(f, "exited with code {code}"),
            JobState::Exited { .. } => f.write_str("exited"),
            JobState::Stopped { verified: true } => f.write_str("stopped"),
            JobState::Stopped { verified: false } => {
                f.write_str("stopped (not verified: a process may survive)")
            }
        }
    }
}

/// Where a job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A process of Keel's (stdin writable).
    Local,
    /// The editor's terminal pane.
    Pane,
}

/// A job as `/jobs` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    pub id: String,
    pub command: String,
    pub state: JobState,
    /// Since it started, until it ended.
    pub runtime: Duration,
    pub place: Place,
    /// The process id of the local command's group leader (`None` in the pane).
    pub pid: Option<i32>,
}

/// What [`Job::read`] returns: the output not read before, and the state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutput {
    pub text: String,
    /// Bytes of new output no longer in memory (the sidecar has them).
    pub dropped: u64,
    pub state: JobState,
    /// The file with the whole output, once anything was written to it.
    pub sidecar: Option<PathBuf>,
    /// The editor's terminal dropped output Keel had not seen yet.
    pub pane_dropped: bool,
    /// Keel could not keep the whole output (its scratch directory failed).
    pub fault: Option<String>,
    /// Files of git's the command changed and the sandbox put back (at its end).
    pub restored: Vec<String>,
}

/// What a new job runs.
#[derive(Debug, Clone)]
pub struct JobRequest {
    pub command: String,
    /// The canonical working directory.
    pub cwd: PathBuf,
    /// In the editor's pane when the runtime has one (no stdin); else a local process.
    pub prefer_pane: bool,
}

/// A started job, for the start tool's answer.
#[derive(Debug, Clone)]
pub struct Started {
    pub job: Arc<Job>,
    pub confinement: Confinement,
    /// The editor's terminal, when the job runs in the pane.
    pub terminal_id: Option<String>,
}

/// One session's background commands.
#[derive(Debug)]
pub struct Jobs {
    limit: usize,
    ring_bytes: usize,
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    started: u64,
    jobs: BTreeMap<u64, Arc<Job>>,
}

/// Every job of the process whose driver still runs (or that a table still holds), for
/// [`stop_everywhere`].
static LIVE: Mutex<Vec<Weak<Job>>> = Mutex::new(Vec::new());

impl Jobs {
    /// A table allowing `limit` running jobs, each keeping `ring_bytes` of output in memory.
    pub fn new(limit: usize, ring_bytes: usize) -> Arc<Self> {
        Arc::new(Self {
            limit,
            ring_bytes: ring_bytes.max(1024),
            table: Mutex::new(Table::default()),
        })
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The running jobs.
    pub fn running(&self) -> Vec<Arc<Job>> {
        lock(&self.table)
            .jobs
            .values()
            .filter(|job| job.state().is_running())
            .cloned()
            .collect()
    }

    /// Every job in the table (running, or ended and not read since), oldest first.
    pub fn list(&self) -> Vec<JobInfo> {
        lock(&self.table)
            .jobs
            .values()
            .map(|job| job.info())
            .collect()
    }

    /// The job with this id.
    pub fn get(&self, id: &str) -> Result<Arc<Job>, AccessError> {
        let table = lock(&self.table);
        id.strip_prefix("bg-")
            .and_then(|n| n.parse::<u64>().ok())
            .and_then(|n| table.jobs.get(&n).cloned())
            .ok_or_else(|| {
                let known: Vec<&str> = table.jobs.values().map(|job| job.id.as_str()).collect();
                AccessError::NotFound(if known.is_empty() {
                    format!("no background command `{id}` (none is running)")
                } else {
                    format!(
                        "no background command `{id}`; there are: {}",
                        known.join(", ")
                    )
                })
            })
    }

    /// Forgets a job that ended and whose end was read.
    fn forget(&self, job: &Job) {
        lock(&self.table).jobs.remove(&job.number);
    }

    /// Starts `request.command` in the background: in the editor's pane when `prefer_pane` and
    /// the runtime has one, else as a local process with stdin kept open. Fails with a clear
    /// error when `limit` jobs are already running. The capability check runs here; the
    /// permission decision was made before (as for `bash`).
    pub async fn start(
        self: &Arc<Self>,
        runtime: &Runtime,
        request: JobRequest,
        sidecar: PathBuf,
    ) -> Result<Started, AccessError> {
        if self.limit == 0 {
            return Err(AccessError::Unavailable(
                "background commands are turned off in this session ([limits] backgroundJobs = \
                 0)"
                .into(),
            ));
        }
        let number = {
            let mut table = lock(&self.table);
            let running: Vec<&Arc<Job>> = table
                .jobs
                .values()
                .filter(|job| job.state().is_running())
                .collect();
            if running.len() >= self.limit {
                let ids: Vec<&str> = running.iter().map(|job| job.id.as_str()).collect();
                return Err(AccessError::Unavailable(format!(
                    "{} background commands are running already ({}), the most a session may \
                     have; stop one with `bg_stop` first",
                    self.limit,
                    ids.join(", ")
                )));
            }
            // Ended jobs nobody read stay for a read, but not without bound.
            while table.jobs.len() >= self.limit.saturating_mul(2).max(1) {
                let oldest_ended = table
                    .jobs
                    .iter()
                    .find(|(_, job)| !job.state().is_running())
                    .map(|(n, _)| *n);
                match oldest_ended {
                    Some(n) => drop(table.jobs.remove(&n)),
                    None => break,
                }
            }
            table.started += 1;
            table.started
        };
        if !sidecar.starts_with(runtime.scratch_dir()) {
            return Err(AccessError::invariant(
                "starting a background command",
                format!(
                    "{} is not in the session's scratch directory",
                    sidecar.display()
                ),
            ));
        }
        let pane = if request.prefer_pane {
            runtime.terminals().cloned()
        } else {
            None
        };
        let started = match pane {
            Some(backend) => {
                match self
                    .start_in_pane(runtime, request.clone(), number, sidecar.clone(), backend)
                    .await
                {
                    // A pane that runs no background commands: a local process then.
                    Err(AccessError::Unavailable(why)) => {
                        tracing::debug!(%why, "background command runs locally");
                        self.start_local(runtime, request, number, sidecar).await?
                    }
                    other => other?,
                }
            }
            None => self.start_local(runtime, request, number, sidecar).await?,
        };
        lock(&self.table).jobs.insert(number, started.job.clone());
        Ok(started)
    }

    fn new_job(
        &self,
        number: u64,
        command: &str,
        place: Place,
        pid: Option<i32>,
        terminal_id: Option<String>,
        (sidecar, roots): (PathBuf, &[PathBuf]),
    ) -> Arc<Job> {
        let (changed, _) = watch::channel(0_u64);
        let sidecar_path = sidecar.clone();
        let job = Arc::new(Job {
            number,
            id: format!("bg-{number}"),
            command: command.to_owned(),
            started: Instant::now(),
            place,
            pid,
            terminal_id,
            sidecar,
            roots: roots.to_vec(),
            stop: CancellationToken::new(),
            changed,
            output: Mutex::new(Output::new(self.ring_bytes)),
            file: tokio::sync::Mutex::new(Sidecar::new(sidecar_path)),
            stdin: tokio::sync::Mutex::new(None),
        });
        let mut live = lock(&LIVE);
        live.retain(|job| job.strong_count() > 0);
        live.push(Arc::downgrade(&job));
        job
    }

    async fn start_local(
        &self,
        runtime: &Runtime,
        request: JobRequest,
        number: u64,
        sidecar: PathBuf,
    ) -> Result<Started, AccessError> {
        let mut process = runtime.spawn_shell_with_stdin(&request.command, &request.cwd)?;
        let pid = process.process_group();
        let job = self.new_job(
            number,
            &request.command,
            Place::Local,
            Some(pid),
            None,
            (sidecar, runtime.roots()),
        );
        *job.stdin.lock().await = process.take_stdin();
        let invocation = process.invocation().clone();
        let confinement = started_confinement(&invocation, || process.leader_exited()).await;
        tracing::debug!(job = %job.id, pid, "started a background command");
        tokio::spawn(drive_local(job.clone(), process));
        Ok(Started {
            job,
            confinement,
            terminal_id: None,
        })
    }

    async fn start_in_pane(
        &self,
        runtime: &Runtime,
        request: JobRequest,
        number: u64,
        sidecar: PathBuf,
        backend: Arc<dyn TerminalBackend>,
    ) -> Result<Started, AccessError> {
        let cwd = runtime.check_shell(&request.command, &request.cwd)?;
        let invocation = runtime.shell_invocation(&request.command, &cwd)?;
        let terminal_id = backend
            .start(TerminalRequest {
                command: request.command.clone(),
                program: invocation.program.clone(),
                args: invocation.args.clone(),
                env: invocation.env.clone(),
                cwd,
                // A background command has no timeout: it runs until it ends or is stopped.
                timeout: Duration::MAX,
                output_limit: self.ring_bytes,
            })
            .await?;
        let job = self.new_job(
            number,
            &request.command,
            Place::Pane,
            None,
            Some(terminal_id.clone()),
            (sidecar, runtime.roots()),
        );
        tracing::debug!(job = %job.id, terminal_id, "started a background command in the pane");
        let confinement = started_confinement(&invocation, || false).await;
        tokio::spawn(drive_pane(
            job.clone(),
            backend.clone(),
            terminal_id.clone(),
            invocation,
        ));
        Ok(Started {
            job,
            confinement,
            terminal_id: Some(terminal_id),
        })
    }

    /// Stops every running job and waits until each is verified gone (bounded).
    pub async fn stop_all(&self) -> Vec<(String, JobState)> {
        let jobs: Vec<Arc<Job>> = lock(&self.table).jobs.values().cloned().collect();
        let stops = jobs.iter().map(|job| async move {
            let state = job.stop().await;
            (job.id.clone(), state)
        });
        futures::future::join_all(stops).await
    }

    /// Starts stopping every job without waiting (the session is closing in a context that
    /// cannot wait); each job's driver kills and checks its group.
    pub fn stop_all_now(&self) {
        for job in lock(&self.table).jobs.values() {
            job.stop.cancel();
        }
    }
}

impl Drop for Jobs {
    fn drop(&mut self) {
        // No job outlives its session: each driver kills its group once told.
        for job in lock(&self.table).jobs.values() {
            job.stop.cancel();
        }
    }
}

/// Stops every job of this process still running (closed sessions' jobs whose kill is under way
/// included) and waits until each is verified gone: `keel` is exiting. Returns what was stopped.
pub async fn stop_everywhere() -> Vec<(String, JobState)> {
    let jobs: Vec<Arc<Job>> = lock(&LIVE).iter().filter_map(Weak::upgrade).collect();
    let stops = jobs
        .iter()
        .filter(|job| job.state().is_running())
        .map(|job| async move { (job.id.clone(), job.stop().await) });
    futures::future::join_all(stops).await
}

/// Whether a background command of this process runs in a workspace that shares a root with
/// `roots`: a process that could swap a symlink onto a path between Keel's check and the
/// editor's write ([`super::Runtime::write`] then writes on the disk itself).
pub fn any_running_in(roots: &[PathBuf]) -> bool {
    lock(&LIVE).iter().filter_map(Weak::upgrade).any(|job| {
        job.state().is_running()
            && job.roots.iter().any(|root| {
                roots
                    .iter()
                    .any(|r| r.starts_with(root) || root.starts_with(r))
            })
    })
}

/// One background command.
#[derive(Debug)]
pub struct Job {
    number: u64,
    pub id: String,
    pub command: String,
    started: Instant,
    place: Place,
    pid: Option<i32>,
    /// The editor's terminal of a pane job.
    terminal_id: Option<String>,
    sidecar: PathBuf,
    /// The workspace roots of the session that started it.
    roots: Vec<PathBuf>,
    /// Fires to make the driver kill the command.
    stop: CancellationToken,
    /// Bumped on every new chunk and at the end.
    changed: watch::Sender<u64>,
    output: Mutex<Output>,
    /// The whole output's file; held while output is taken in, so a byte reaches the file before
    /// the ring and pane snapshots are taken in one at a time.
    file: tokio::sync::Mutex<Sidecar>,
    stdin: tokio::sync::Mutex<Option<tokio::process::ChildStdin>>,
}

#[derive(Debug)]
struct Output {
    ring: VecDeque<u8>,
    ring_bytes: usize,
    /// Bytes the command printed in all.
    total: u64,
    /// Bytes the model has read (an offset into the whole output).
    cursor: u64,
    state: JobState,
    ended: Option<Instant>,
    /// The sidecar file has been written to.
    sidecar_written: bool,
    /// The editor's pane dropped output before Keel read it.
    pane_dropped: bool,
    fault: Option<String>,
    /// What the sandbox put back once the command was gone.
    restored: Vec<String>,
    /// The pane's last snapshot (what `terminal/output` returned), to find the new part.
    seen: String,
}

impl Output {
    fn new(ring_bytes: usize) -> Self {
        Self {
            ring: VecDeque::new(),
            ring_bytes,
            total: 0,
            cursor: 0,
            state: JobState::Running,
            ended: None,
            sidecar_written: false,
            pane_dropped: false,
            fault: None,
            restored: Vec::new(),
            seen: String::new(),
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let keep = chunk.len().min(self.ring_bytes);
        let excess = (self.ring.len() + keep).saturating_sub(self.ring_bytes);
        self.ring.drain(..excess);
        self.ring.extend(&chunk[chunk.len() - keep..]);
    }
}

impl Job {
    pub fn state(&self) -> JobState {
        lock(&self.output).state.clone()
    }

    pub fn place(&self) -> Place {
        self.place
    }

    pub fn pid(&self) -> Option<i32> {
        self.pid
    }

    pub fn info(&self) -> JobInfo {
        let output = lock(&self.output);
        JobInfo {
            id: self.id.clone(),
            command: self.command.clone(),
            state: output.state.clone(),
            runtime: output
                .ended
                .unwrap_or_else(Instant::now)
                .saturating_duration_since(self.started),
            place: self.place,
            pid: self.pid,
        }
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn push(&self, chunk: &[u8]) {
        lock(&self.output).push(chunk);
        self.bump();
    }

    fn finish(&self, state: JobState) {
        {
            let mut output = lock(&self.output);
            output.state = state;
            output.ended = Some(Instant::now());
        }
        self.bump();
    }

    /// The output since the last read. When there is none and the job runs, waits up to `wait`
    /// for some (or for the end). Once a read has returned the end of a job that ended, the job
    /// is forgotten.
    pub async fn read(&self, jobs: &Jobs, runtime: &Runtime, wait: Duration) -> JobOutput {
        let mut changed = self.changed.subscribe();
        if self.place == Place::Pane && self.state().is_running() {
            self.refresh_pane(runtime).await;
        }
        let nothing_new = |job: &Job| {
            let output = lock(&job.output);
            output.cursor == output.total && output.state.is_running()
        };
        if nothing_new(self) && !wait.is_zero() {
            let until = tokio::time::Instant::now() + wait;
            while nothing_new(self) {
                let poll = match self.place {
                    // The pane reports nothing by itself: look again now and then.
                    Place::Pane => Duration::from_millis(200),
                    Place::Local => wait,
                };
                let next = (tokio::time::Instant::now() + poll).min(until);
                let woke = tokio::time::timeout_at(next, changed.changed()).await;
                if self.place == Place::Pane && self.state().is_running() {
                    self.refresh_pane(runtime).await;
                }
                if tokio::time::Instant::now() >= until || matches!(woke, Ok(Err(_))) {
                    break;
                }
            }
        }
        let result = {
            let mut output = lock(&self.output);
            let in_memory = output.ring.len() as u64;
            let oldest = output.total - in_memory;
            let dropped = oldest.saturating_sub(output.cursor);
            let from = usize::try_from(output.cursor.max(oldest) - oldest).unwrap_or(usize::MAX);
            let bytes: Vec<u8> = output.ring.iter().skip(from).copied().collect();
            output.cursor = output.total;
            JobOutput {
                text: String::from_utf8_lossy(&bytes).into_owned(),
                dropped,
                state: output.state.clone(),
                sidecar: output.sidecar_written.then(|| self.sidecar.clone()),
                pane_dropped: std::mem::take(&mut output.pane_dropped),
                fault: output.fault.clone(),
                restored: if output.state.is_running() {
                    Vec::new()
                } else {
                    std::mem::take(&mut output.restored)
                },
            }
        };
        if !result.state.is_running() {
            jobs.forget(self);
        }
        result
    }

    /// Writes `input` to the command's stdin.
    pub async fn write(&self, input: &str) -> Result<(), AccessError> {
        if self.place == Place::Pane {
            return Err(AccessError::Unavailable(format!(
                "{} runs in the editor's terminal pane, which takes no input from Keel; to write \
                 to a command, start it with `stdin: true`",
                self.id
            )));
        }
        let state = self.state();
        if !state.is_running() {
            return Err(AccessError::BadArgument(format!(
                "{} is no longer running ({state})",
                self.id
            )));
        }
        let mut stdin = self.stdin.lock().await;
        let Some(pipe) = stdin.as_mut() else {
            return Err(AccessError::Unavailable(format!(
                "{}'s stdin is closed",
                self.id
            )));
        };
        let written = async {
            pipe.write_all(input.as_bytes()).await?;
            pipe.flush().await
        };
        match tokio::time::timeout(WRITE_WAIT, written).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                *stdin = None;
                Err(AccessError::io(
                    format!(
                        "writing to {}'s stdin failed (the command closed it): {e}",
                        self.id
                    ),
                    e,
                ))
            }
            Err(_) => Err(AccessError::external(format!(
                "{} did not take the input within {}s (it is not reading its stdin); part of it \
                 may have been written",
                self.id,
                WRITE_WAIT.as_secs()
            ))),
        }
    }

    /// Stops the job and waits until its driver reports it gone (bounded); returns its state.
    /// A job that already ended keeps its state.
    pub async fn stop(&self) -> JobState {
        let mut changed = self.changed.subscribe();
        self.stop.cancel();
        let ended = async {
            loop {
                let state = self.state();
                if !state.is_running() {
                    return state;
                }
                if changed.changed().await.is_err() {
                    return self.state();
                }
            }
        };
        match tokio::time::timeout(STOP_WAIT, ended).await {
            Ok(state) => state,
            Err(_) => JobState::Stopped { verified: false },
        }
    }

    /// Keeps what the sandbox put back after the command, for the last read.
    fn restored(&self, confinement: &Confinement) {
        if let Confinement::Confined { restored, .. } = confinement
            && !restored.is_empty()
        {
            lock(&self.output).restored.extend(restored.iter().cloned());
        }
    }

    /// Reads the pane's output and keeps what is new since the last look.
    async fn refresh_pane(&self, runtime: &Runtime) {
        let Some(backend) = runtime.terminals() else {
            return;
        };
        self.take_pane_output(backend.as_ref()).await;
    }

    /// Takes a pane snapshot in: the part after what was seen before is new output, written to
    /// the sidecar, then to the ring. Returns the snapshot's exit status, if any.
    async fn take_pane_output(&self, backend: &dyn TerminalBackend) -> Option<TerminalExit> {
        let terminal_id = self.terminal_id.as_deref()?;
        let mut file = self.file.lock().await;
        let snapshot = match backend.snapshot(terminal_id).await {
            Ok(snapshot) => snapshot,
            Err(e) => {
                tracing::warn!(job = %self.id, error = %e, "terminal/output failed");
                return None;
            }
        };
        let new = {
            let mut output = lock(&self.output);
            let new = new_part(&output.seen, &snapshot.output, snapshot.truncated);
            if new.dropped {
                output.pane_dropped = true;
            }
            let text = new.text.to_owned();
            output.seen = snapshot.output;
            text
        };
        if !new.is_empty() {
            file.write(self, new.as_bytes()).await;
            self.push(new.as_bytes());
        }
        snapshot.exit
    }
}

/// How many places [`new_part`] tries as the start of the overlap of two pane snapshots.
const MAX_OVERLAP_TRIES: usize = 256;

/// What a pane snapshot adds to the one before.
struct NewPart<'a> {
    text: &'a str,
    /// Output was dropped between the two snapshots that Keel never saw.
    dropped: bool,
}

/// The part of `now` that follows `before`. The editor keeps a bounded buffer, dropping from
/// the start: `now` is then a suffix of `before` followed by new output. The longest such
/// overlap is taken; when none is found, all of `now` is new and some output was lost.
fn new_part<'a>(before: &str, now: &'a str, truncated: bool) -> NewPart<'a> {
    if let Some(rest) = now.strip_prefix(before) {
        return NewPart {
            text: rest,
            dropped: false,
        };
    }
    if truncated && let Some(&first) = now.as_bytes().first() {
        // Candidate starts: where `now`'s first byte occurs in `before`, longest overlap first;
        // a bounded number of them, so a repetitive output cannot make this quadratic.
        let candidates = before
            .bytes()
            .enumerate()
            .filter(|&(start, byte)| byte == first && before.is_char_boundary(start))
            .take(MAX_OVERLAP_TRIES);
        for (start, _) in candidates {
            if let Some(rest) = now.strip_prefix(&before[start..]) {
                return NewPart {
                    text: rest,
                    dropped: false,
                };
            }
        }
    }
    NewPart {
        text: now,
        dropped: !before.is_empty(),
    }
}

/// How the sandbox helper says it confined a command that has just started: its status file,
/// read (not removed: [`ShellInvocation::confinement`] does that, with the put-back of git's
/// files, once the command is gone) when the helper has written it, within [`HELPER_WAIT`] or
/// until `exited` says the command ended.
async fn started_confinement(
    invocation: &ShellInvocation,
    mut exited: impl FnMut() -> bool,
) -> Confinement {
    let Some(check) = &invocation.check else {
        // No helper runs it: the reason is known without one.
        return invocation.confinement();
    };
    let until = tokio::time::Instant::now() + HELPER_WAIT;
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(confinement) = peek_status(check).await {
            return confinement;
        }
        if exited() || tokio::time::Instant::now() >= until {
            return Confinement::Unconfined {
                reason: "the sandbox helper did not confirm that it confined the command".into(),
            };
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// The helper's status line, once written: confined (with the nonce) or not.
#[expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]
async fn peek_status(check: &ConfinementCheck) -> Option<Confinement> {
    let text = tokio::fs::read_to_string(&check.status_file).await.ok()?;
    let status: serde_json::Value =
        serde_json::from_str(super::sandbox::status_line(&text)?).ok()?;
    if status.get("nonce").and_then(serde_json::Value::as_str) != Some(check.nonce.as_str()) {
        return Some(Confinement::Unconfined {
            reason: "the sandbox helper did not confirm that it confined the command".into(),
        });
    }
    let mechanism = status.get("mechanism")?.as_str()?.to_owned();
    let notes: Vec<String> = status
        .get("notes")
        .and_then(serde_json::Value::as_array)
        .map(|notes| {
            notes
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Some(if mechanism == "none" {
        Confinement::Unconfined {
            reason: format!(
                "no confinement is available on this machine ({})",
                notes.join("; ")
            ),
        }
    } else {
        Confinement::Confined {
            mechanism,
            notes,
            restored: Vec::new(),
        }
    })
}

/// Runs a local job to its end: output to the ring and the sidecar, until the command's process
/// exits or a stop; then the group is killed (what the command left running too) and checked.
async fn drive_local(job: Arc<Job>, mut process: ShellProcess) {
    let mut sidecar = job.file.lock().await;
    let mut output = process.take_output();
    let mut buffer = vec![0_u8; READ_CHUNK];
    let mut stopped = false;
    loop {
        tokio::select! {
            biased;
            () = job.stop.cancelled() => {
                stopped = true;
                break;
            }
            read = read_chunk(&mut output, &mut buffer) => match read {
                Ok(0) => output = None,
                Ok(n) => {
                    // The sidecar first: a byte a read can see is already in the file.
                    sidecar.write(&job, &buffer[..n]).await;
                    job.push(&buffer[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!(job = %job.id, error = %e, "reading a background command's output failed");
                    output = None;
                }
            },
            status = process.wait_leader() => {
                if let Err(e) = status {
                    tracing::warn!(job = %job.id, error = %e, "waiting for a background command failed");
                }
                break;
            }
        }
    }
    // Closing stdin first lets a well-behaved command end on its own (a write stuck on a full
    // pipe holds it: the kill ends that write).
    if let Ok(mut stdin) = job.stdin.try_lock() {
        *stdin = None;
    }
    process.kill_group().await;
    if process.status().is_none() {
        let _ = tokio::time::timeout(KILL_GRACE, process.wait_leader()).await;
    }
    if let Some(reader) = output.as_mut() {
        let until = tokio::time::Instant::now() + DRAIN_GRACE;
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(until) => break,
                read = reader.read(&mut buffer) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        sidecar.write(&job, &buffer[..n]).await;
                        job.push(&buffer[..n]);
                    }
                },
            }
        }
    }
    sidecar.flush(&job).await;
    drop(sidecar);
    // Verified before the helper's files go.
    let gone = process.tree_gone().await;
    // Now that nothing of it runs: git's redirect files put back, the helper's files removed.
    job.restored(&process.confinement());
    if process.group_gone() {
        process.mark_finished();
    } else {
        tracing::warn!(job = %job.id, "a background command's process group outlived SIGKILL");
    }
    if !gone {
        tracing::warn!(job = %job.id, "Keel could not confirm that a background command's processes are gone");
    }
    let state = if stopped {
        JobState::Stopped { verified: gone }
    } else {
        use std::os::unix::process::ExitStatusExt as _;
        let status = process.status();
        JobState::Exited {
            code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()).map(signal_name),
        }
    };
    tracing::debug!(job = %job.id, %state, "background command ended");
    job.finish(state);
}

/// Runs a pane job to its end: waits for the editor to report the exit, or kills it on a stop;
/// then takes the pane's last output and releases the terminal.
async fn drive_pane(
    job: Arc<Job>,
    backend: Arc<dyn TerminalBackend>,
    terminal_id: String,
    invocation: ShellInvocation,
) {
    let mut stopped = false;
    let mut exit = None;
    tokio::select! {
        biased;
        () = job.stop.cancelled() => stopped = true,
        waited = backend.wait_exit(&terminal_id) => match waited {
            Ok(status) => exit = Some(status),
            Err(e) => {
                tracing::warn!(job = %job.id, error = %e, "terminal/wait_for_exit failed");
                stopped = true;
            }
        },
    }
    let mut verified = true;
    if stopped {
        match backend.kill(&terminal_id).await {
            Ok(status) => exit = status,
            Err(e) => {
                tracing::warn!(job = %job.id, error = %e, "terminal/kill failed");
                verified = false;
            }
        }
        verified = verified
            && exit.is_some()
            && match &invocation.check {
                Some(check) => check.wait_gone(KILL_GRACE).await,
                None => false,
            };
    }
    // What it printed last (the snapshot's exit status, if the kill's wait did not say).
    let last_exit = job.take_pane_output(backend.as_ref()).await;
    if exit.is_none() {
        exit = last_exit;
    }
    job.file.lock().await.flush(&job).await;
    backend.release(&terminal_id);
    job.restored(&invocation.confinement());
    let state = if stopped {
        JobState::Stopped { verified }
    } else {
        let exit = exit.unwrap_or_default();
        JobState::Exited {
            code: exit.code,
            signal: exit.signal,
        }
    };
    tracing::debug!(job = %job.id, %state, "background command in the pane ended");
    job.finish(state);
}

/// A job's sidecar file: created on the first byte, capped at [`SIDECAR_MAX_BYTES`].
#[derive(Debug)]
struct Sidecar {
    path: PathBuf,
    file: Option<tokio::fs::File>,
    written: u64,
    failed: bool,
}

impl Sidecar {
    fn new(path: PathBuf) -> Self {
        Self {
            path,
            file: None,
            written: 0,
            failed: false,
        }
    }

    async fn write(&mut self, job: &Job, bytes: &[u8]) {
        if self.failed || bytes.is_empty() {
            return;
        }
        if self.file.is_none() {
            match open_sidecar(&self.path).await {
                Ok(file) => self.file = Some(file),
                Err(e) => return self.fail(job, &self.path.clone(), e),
            }
        }
        let room = SIDECAR_MAX_BYTES.saturating_sub(self.written);
        let take = usize::try_from(room).unwrap_or(usize::MAX).min(bytes.len());
        let Some(file) = self.file.as_mut() else {
            return;
        };
        if let Err(e) = file.write_all(&bytes[..take]).await {
            return self.fail(job, &self.path.clone(), e);
        }
        self.written += take as u64;
        lock(&job.output).sidecar_written = true;
        if take < bytes.len() {
            self.failed = true;
            lock(&job.output).fault = Some(format!(
                "the sidecar file holds only the first {} MiB",
                SIDECAR_MAX_BYTES / (1024 * 1024)
            ));
        }
    }

    async fn flush(&mut self, job: &Job) {
        if let Some(file) = self.file.as_mut()
            && let Err(e) = file.flush().await
        {
            self.fail(job, &self.path.clone(), e);
        }
    }

    fn fail(&mut self, job: &Job, path: &Path, error: std::io::Error) {
        self.failed = true;
        tracing::error!(job = %job.id, path = %path.display(), error = %error, "cannot keep a background command's whole output");
        lock(&job.output).fault = Some(
            "the whole output could not be saved (internal error in Keel; see the log)".to_owned(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_that_extends_the_last_one_adds_its_tail() {
        let part = new_part("abc", "abcdef", false);
        assert_eq!((part.text, part.dropped), ("def", false));
    }

    #[test]
    fn a_truncated_snapshot_adds_what_follows_the_overlap() {
        // The pane dropped "ab" from the front and gained "XY".
        let part = new_part("abcdef", "cdefXY", true);
        assert_eq!((part.text, part.dropped), ("XY", false));
    }

    #[test]
    fn a_snapshot_without_overlap_is_all_new_and_says_output_was_lost() {
        let part = new_part("abc", "xyz", true);
        assert_eq!((part.text, part.dropped), ("xyz", true));
        let first = new_part("", "xyz", false);
        assert_eq!((first.text, first.dropped), ("xyz", false));
    }

    #[test]
    fn the_ring_keeps_the_last_bytes_and_counts_all() {
        let mut output = Output::new(4);
        output.push(b"abc");
        output.push(b"defgh");
        assert_eq!(output.total, 8);
        assert_eq!(output.ring.iter().copied().collect::<Vec<u8>>(), b"efgh");
    }
}
