//! Background commands: a session's jobs table.
//!
//! - [`Jobs`]: one per session ([`crate::tool::SessionState::jobs`]). Starts commands in the
//!   background (at most `limit` running at once), finds them by id (`bg-1`, `bg-2`, ...), lists
//!   them for `/jobs`, and stops them all when the session closes or is dropped.
//! - [`Job`]: one command. Its output is kept twice: the last `ring_bytes` in memory (what
//!   [`Job::read`] returns, new output only) and all of it in a sidecar file in the session's
//!   scratch directory (up to [`SIDECAR_MAX_BYTES`](super::process::SIDECAR_MAX_BYTES)). A job
//!   that ends on its own keeps its exit status and the output not yet read until a read
//!   returns them; it is then removed.
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

mod drive;
mod output;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt as _;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::AccessError;
use super::sandbox::Confinement;
use super::{Runtime, TerminalBackend, TerminalExit, TerminalRequest};
use drive::{Sidecar, drive_local, drive_pane, started_confinement};
use output::{Output, new_part};

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
