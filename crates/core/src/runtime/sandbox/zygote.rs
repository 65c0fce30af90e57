//! The warm holder, Keel's side (decisions 0039 and 0048; the helper's side is
//! `keel_sandbox::zygote`). Under namespaces the holder keeps the contained profile's new root
//! and each command gets its own PID, mount and IPC namespace and init; its end is answered
//! `done` once init has emptied the namespace ([`WarmChild::emptied`]). What follows is the
//! fallback's case, where the same holder keeps a Landlock domain.
//!
//! A contained command under the fallback used to build its own Landlock domain: the profile's
//! ruleset and Keel's prebuilt mask ruleset ([`super::mask`]). The kernel copies every rule
//! into each new domain, about 1.3 ms for the 6,000 rules of a large workspace's masks. Here
//! one process per session and profile (`keel-sandbox zygote`) keeps the domain, and each
//! contained command is forked from it: Keel sends the command's argv, working directory,
//! environment and standard descriptors over a socket, and gets back the command's pid and,
//! later, its wait status.
//!
//! [`Zygotes`] keeps one zygote: the one of the last contained profile. A different profile
//! (the masked list changed, so [`super::mask::MaskRulesets`] gave a new ruleset or added a
//! rule; a working directory outside the roots) retires it (the commands it runs finish under
//! it) and starts another. A zygote that is gone (a command killed its holder), or that
//! answers `gone` (a command stopped its holder), is replaced at the next command; one that
//! did not answer at all is killed, never asked again. When none can start, the command goes
//! through the per-command helper as before.
//!
//! The wait for the zygote's answer (about a fork and an exec, at most `START_TIMEOUT`) never
//! holds a runtime worker: on a multi-threaded runtime it runs under
//! [`tokio::task::block_in_place`], which hands the worker's other tasks (the ACP dispatch
//! loop's among them) to another thread first.

#![expect(
    clippy::disallowed_methods,
    reason = "the runtime is where ambient authority lives"
)]

use std::io::Read as _;
use std::os::fd::{AsFd as _, AsRawFd as _, OwnedFd};
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use keel_sandbox::zygote::{
    CommandRequest, MAX_MESSAGE, Ready, ToZygote, recv_with_fds, send_with_fds, seqpacket_pair,
};
use nix::sys::socket::{setsockopt, sockopt};
use nix::sys::time::TimeVal;
use tokio::io::AsyncReadExt as _;

use super::PROFILE_ENV;
use super::mask::MaskFd;

/// How long Keel waits for a zygote to be ready, or for a command to start.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// What a contained command needs to run through a warm holder
/// ([`super::ShellInvocation::warm`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmStart {
    /// The helper program and the arguments before its stage.
    pub helper: PathBuf,
    pub prefix: Vec<String>,
    /// The profile (JSON) without what varies per command (nonce, status file, working
    /// directory): the holder's domain.
    pub profile: String,
    /// The mask ruleset the profile names ([`super::Profile::mask_ruleset`]).
    pub mask: Option<MaskFd>,
    pub argv: Vec<String>,
    pub nonce: String,
    pub status_file: PathBuf,
}

impl WarmStart {
    /// What one zygote serves: the profile and the very ruleset (and its rules so far).
    fn key(&self) -> (String, Option<MaskFd>) {
        (self.profile.clone(), self.mask.clone())
    }

    /// Whether a zygote of `key` serves this command (compared without copying the profile).
    fn served_by(&self, key: &(String, Option<MaskFd>)) -> bool {
        key.0 == self.profile && key.1 == self.mask
    }
}

/// Why a command could not go through a warm holder.
#[derive(Debug, thiserror::Error)]
pub enum WarmError {
    /// Nothing of the command ran: the per-command helper may run it instead.
    #[error("the warm holder is not available: {0}")]
    Unavailable(String),
    /// The command may have started (no answer in time): it must not run twice.
    #[error("the sandbox's warm holder did not answer: {0}")]
    NoAnswer(String),
}

/// A session's warm holder (one zygote at a time).
#[derive(Default)]
pub struct Zygotes {
    current: Mutex<Option<Zygote>>,
    /// Zygotes started so far (for tests and the benchmark).
    started: AtomicU64,
    /// The key whose zygote could not start (no Landlock, no list of children): its commands
    /// go straight to the helper, without trying again each time.
    failed: Mutex<Option<(String, Option<MaskFd>)>>,
}

impl std::fmt::Debug for Zygotes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zygotes").finish_non_exhaustive()
    }
}

struct Zygote {
    key: (String, Option<MaskFd>),
    process: std::process::Child,
    control: OwnedFd,
}

impl Zygote {
    fn start(warm: &WarmStart) -> Result<Self, WarmError> {
        let unavailable =
            |what: &str, e: &dyn std::fmt::Display| WarmError::Unavailable(format!("{what}: {e}"));
        let (control, theirs) = seqpacket_pair().map_err(|e| unavailable("socketpair", &e))?;
        let mut command = std::process::Command::new(&warm.helper);
        command
            .args(&warm.prefix)
            .arg("zygote")
            .arg("--control")
            .arg(theirs.as_raw_fd().to_string())
            .env_clear()
            .env(PROFILE_ENV, &warm.profile)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        super::mask::inherit_fd(&mut command, theirs.as_raw_fd());
        if let Some(mask) = &warm.mask {
            mask.inherit(&mut command);
        }
        let mut process = command.spawn().map_err(|e| unavailable("spawn", &e))?;
        drop(theirs);
        let timeout = TimeVal::new(START_TIMEOUT.as_secs() as _, 0);
        let _ = setsockopt(&control, sockopt::ReceiveTimeout, &timeout);
        let mut buffer = vec![0u8; 64 * 1024];
        let ready = match recv_with_fds(control.as_fd(), &mut buffer, false) {
            Ok(Some((n, _))) => serde_json::from_slice::<Ready>(&buffer[..n]).ok(),
            _ => None,
        };
        match ready {
            Some(Ready::Ready { .. }) => Ok(Self {
                key: warm.key(),
                process,
                control,
            }),
            other => {
                let _ = process.kill();
                let _ = process.wait();
                Err(WarmError::Unavailable(match other {
                    Some(Ready::Failed { reason }) => reason,
                    _ => "the zygote did not start".into(),
                }))
            }
        }
    }

    /// Tells the zygote to take no more commands (the running ones finish under it) and
    /// closes the control socket; its process is what is left to wait for.
    fn close(self) -> std::process::Child {
        if let Ok(text) = serde_json::to_vec(&ToZygote::Retire) {
            let _ = send_with_fds(self.control.as_fd(), &text, &[]);
        }
        drop(self.control);
        self.process
    }

    /// [`Zygote::close`], its process waited for on a thread of its own (it ends when its last
    /// command has).
    fn retire(self) {
        Self::wait_aside(self.close());
    }

    /// Ends a zygote that did not answer in time (stopped, or stuck): it is never asked again.
    /// Its holder and starters end by their parent-death signal; the commands it ran are
    /// answered as killed (their streams close), without `empty`.
    fn kill(self) {
        let mut process = self.process;
        let _ = process.kill();
        drop(self.control);
        Self::wait_aside(process);
    }

    fn wait_aside(mut process: std::process::Child) {
        let spawned = std::thread::Builder::new()
            .name("keel-zygote-wait".into())
            .spawn(move || {
                let _ = process.wait();
            });
        if let Err(e) = spawned {
            tracing::debug!(error = %e, "cannot wait for a retired zygote on a thread");
        }
    }
}

impl Zygotes {
    /// Starts `warm`'s command through the zygote of its profile (started, or replaced, here):
    /// stdin `/dev/null`, stdout and stderr the given descriptors. Blocks until the command's
    /// process exists (about a fork and an exec), off the runtime's workers on a
    /// multi-threaded runtime. Must be called inside a tokio runtime.
    pub fn spawn(
        &self,
        warm: &WarmStart,
        cwd: &Path,
        env: Vec<(String, String)>,
        stdout: OwnedFd,
        stderr: OwnedFd,
    ) -> Result<WarmChild, WarmError> {
        let multi_threaded = tokio::runtime::Handle::try_current().is_ok_and(|handle| {
            handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
        });
        if multi_threaded {
            tokio::task::block_in_place(|| self.spawn_blocking(warm, cwd, env, stdout, stderr))
        } else {
            self.spawn_blocking(warm, cwd, env, stdout, stderr)
        }
    }

    fn spawn_blocking(
        &self,
        warm: &WarmStart,
        cwd: &Path,
        env: Vec<(String, String)>,
        stdout: OwnedFd,
        stderr: OwnedFd,
    ) -> Result<WarmChild, WarmError> {
        let unavailable =
            |what: &str, e: &dyn std::fmt::Display| WarmError::Unavailable(format!("{what}: {e}"));
        let request = ToZygote::Run(CommandRequest {
            argv: warm.argv.clone(),
            cwd: cwd.to_path_buf(),
            env,
            nonce: warm.nonce.clone(),
            status_file: warm.status_file.clone(),
        });
        let text = serde_json::to_vec(&request).map_err(|e| unavailable("request", &e))?;
        if text.len() > MAX_MESSAGE {
            return Err(WarmError::Unavailable("the command is too large".into()));
        }
        let stdin = std::fs::File::open("/dev/null").map_err(|e| unavailable("/dev/null", &e))?;
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        // The zygote there is, then a fresh one if that one is gone (a command killed its
        // holder): nothing of the command ran until the zygote said `started`.
        let mut last = String::new();
        for _ in 0..2 {
            if current.as_mut().is_some_and(|z| {
                !warm.served_by(&z.key) || !matches!(z.process.try_wait(), Ok(None))
            }) && let Some(old) = current.take()
            {
                old.retire();
            }
            if current.is_none() {
                let mut failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
                if failed.as_ref().is_some_and(|key| warm.served_by(key)) {
                    return Err(WarmError::Unavailable(
                        "the zygote of this profile could not start".into(),
                    ));
                }
                match Zygote::start(warm) {
                    Ok(zygote) => {
                        self.started.fetch_add(1, Ordering::Relaxed);
                        *current = Some(zygote);
                    }
                    Err(error) => {
                        *failed = Some(warm.key());
                        return Err(error);
                    }
                }
            }
            let Some(zygote) = current.as_ref() else {
                break;
            };
            let (mut reply, theirs) = std::os::unix::net::UnixStream::pair()
                .map_err(|e| unavailable("socketpair", &e))?;
            let fds = [
                stdin.as_raw_fd(),
                stdout.as_raw_fd(),
                stderr.as_raw_fd(),
                theirs.as_raw_fd(),
            ];
            let sent = send_with_fds(zygote.control.as_fd(), &text, &fds);
            drop(theirs);
            if let Err(e) = sent {
                last = format!("sending the command: {e}");
                if let Some(gone) = current.take() {
                    gone.retire();
                }
                continue;
            }
            let answer = started(&mut reply);
            let answer = match answer {
                Ok(answer) => answer,
                Err(error) => {
                    // No answer in time: this zygote is stopped or stuck. The command may have
                    // started, so it is not asked again, here or of a fresh zygote.
                    if let Some(stuck) = current.take() {
                        stuck.kill();
                    }
                    return Err(error);
                }
            };
            match answer {
                Started::Pid(pid) => {
                    drop(current);
                    return WarmChild::new(pid, reply);
                }
                Started::Failed(reason) => return Err(WarmError::Unavailable(reason)),
                Started::Gone(line) => {
                    last = format!("the zygote answered {line:?}");
                    if let Some(gone) = current.take() {
                        gone.retire();
                    }
                }
            }
        }
        Err(WarmError::Unavailable(last))
    }

    /// How many zygotes this session has started (for tests and the benchmark).
    pub fn started(&self) -> u64 {
        self.started.load(Ordering::Relaxed)
    }

    /// The running zygote's pid, if one runs.
    pub fn pid(&self) -> Option<u32> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|z| z.process.id())
    }

    /// Retires the zygote and waits until it has ended (its commands first). For the
    /// benchmark, whose CPU measure counts only what it waited for.
    pub fn shutdown(&self) {
        let taken = self
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(zygote) = taken {
            let _ = zygote.close().wait();
        }
    }
}

impl Drop for Zygotes {
    fn drop(&mut self) {
        let taken = self
            .current
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(zygote) = taken {
            zygote.retire();
        }
    }
}

/// A command a zygote started: its pid (the leader of its own session and process group) and
/// the stream its wait status comes on.
#[derive(Debug)]
pub struct WarmChild {
    pid: i32,
    reply: tokio::net::UnixStream,
    pending: Vec<u8>,
    status: Option<ExitStatus>,
    /// The zygote said `done`: every process of the command's PID namespace is gone, and
    /// its init (Keel's process group) is ending with the namespaces' teardown.
    emptied: bool,
}

/// The zygote's first answer to a command.
enum Started {
    Pid(i32),
    /// The command could not start (`failed REASON`).
    Failed(String),
    /// The zygote went away, said it is ending (`gone REASON`: its holder is dead), or said
    /// something else, before starting it: a fresh zygote is asked.
    Gone(String),
}

/// Reads `started PID` (or `failed REASON`) from a command's stream, byte by byte so nothing
/// after the line is taken from it.
fn started(reply: &mut std::os::unix::net::UnixStream) -> Result<Started, WarmError> {
    let _ = reply.set_read_timeout(Some(START_TIMEOUT));
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match reply.read(&mut byte) {
            Ok(0) => break,
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) => line.push(byte[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(WarmError::NoAnswer(e.to_string())),
        }
    }
    let line = String::from_utf8_lossy(&line).into_owned();
    Ok(match line.split_once(' ') {
        Some(("started", pid)) => match pid.trim().parse::<i32>() {
            Ok(pid) if pid > 1 => Started::Pid(pid),
            _ => Started::Gone(line),
        },
        Some(("failed", reason)) => Started::Failed(reason.to_owned()),
        _ => Started::Gone(line),
    })
}

impl WarmChild {
    fn new(pid: i32, reply: std::os::unix::net::UnixStream) -> Result<Self, WarmError> {
        reply
            .set_nonblocking(true)
            .map_err(|e| WarmError::NoAnswer(e.to_string()))?;
        let reply = tokio::net::UnixStream::from_std(reply)
            .map_err(|e| WarmError::NoAnswer(e.to_string()))?;
        Ok(Self {
            pid,
            reply,
            pending: Vec::new(),
            status: None,
            emptied: false,
        })
    }

    /// The command's pid (and process group).
    pub fn id(&self) -> u32 {
        self.pid.unsigned_abs()
    }

    /// The command's wait status once the zygote has ended everything it left behind. A
    /// zygote gone without saying counts as `SIGKILL`. Cancel-safe.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.parse() {
                return Ok(status);
            }
            let mut chunk = [0u8; 256];
            match self.reply.read(&mut chunk).await {
                Ok(0) => return Ok(self.gone()),
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Ok(self.gone()),
            }
        }
    }

    /// The wait status if the zygote has sent it.
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        loop {
            if let Some(status) = self.parse() {
                return Ok(Some(status));
            }
            let mut chunk = [0u8; 256];
            match self.reply.try_read(&mut chunk) {
                Ok(0) => return Ok(Some(self.gone())),
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Ok(Some(self.gone())),
            }
        }
    }

    fn gone(&mut self) -> ExitStatus {
        let status = ExitStatus::from_raw(nix::sys::signal::Signal::SIGKILL as i32);
        self.status = Some(status);
        status
    }

    fn parse(&mut self) -> Option<ExitStatus> {
        if self.status.is_some() {
            return self.status;
        }
        // Whole lines only: `exit 1` may be the start of `exit 15`.
        let end = self.pending.iter().rposition(|b| *b == b'\n')?;
        let text = String::from_utf8_lossy(&self.pending[..end]);
        let (raw, emptied) = text.lines().find_map(|line| {
            let (raw, emptied) = match line.strip_prefix("exit ") {
                Some(raw) => (raw, false),
                None => (line.strip_prefix("done ")?, true),
            };
            Some((raw.trim().parse::<i32>().ok()?, emptied))
        })?;
        let status = ExitStatus::from_raw(raw);
        self.status = Some(status);
        self.emptied = emptied;
        Some(status)
    }

    /// Whether the zygote said the command's PID namespace is empty (`done`, under namespaces):
    /// nothing of the command is left, and its process group (init) is only ending.
    pub fn emptied(&self) -> bool {
        self.emptied
    }
}
