//! The fallback's warm domain: `keel-sandbox zygote --control FD`, one per session and per
//! contained profile, which keeps a Landlock domain alive and forks each contained command from
//! it (docs/sandbox.md, "The warm holder"; decision 0038).
//!
//! `landlock_restrict_self` copies every rule of the caller's domain into the new one, so a
//! domain of 6,000 rules (the credential masks of a large workspace) costs about 1.3 ms per
//! command when each command builds its own. Here the domain is built once and inherited by
//! `fork`, which copies nothing. Three kinds of process, each with one job:
//!
//! - **The zygote** (this process's `main`): unconfined, in a session of its own, a child
//!   subreaper, not dumpable. It talks to Keel over the control socket (a `SOCK_SEQPACKET`
//!   descriptor Keel passes), writes each command's status file, and is the one that ends what a
//!   command leaves behind. It is outside the commands' Landlock domain, so no command can signal
//!   or trace it (Landlock scopes signals and `ptrace` to the domain, ABI 6).
//! - **The holder**: the zygote's child, confined once by the profile (its Landlock ruleset,
//!   Keel's mask ruleset as a second layer, seccomp, no capabilities, no new privileges). It
//!   receives each command (argv, working directory, environment, and its three standard
//!   descriptors by `SCM_RIGHTS`) and forks a starter for it.
//! - **A starter** per command: a fork of the holder (same domain), a child subreaper, so
//!   whatever the command leaves behind (a `setsid` daemon included) stays its descendant. It
//!   forks the command (a session and process group of its own), reports its pid and, once it
//!   exits, its wait status; the zygote then kills every descendant of the starter (it reads
//!   `/proc`, which the domain hides), writes `empty` to the status file and answers Keel.
//!
//! A starter or the holder is in the command's domain, so a command can kill them. A starter
//! killed before its command ended, or the holder killed: their orphans reach the zygote (the
//! subreaper), which kills them all, and reports each command it had as killed (`SIGKILL`). A
//! zygote without a holder exits; Keel starts another for the next command.

#![expect(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "the helper is the layer that confines processes: the zygote opens status files and \
              reads /proc, the starter spawns the command, outside Keel's runtime"
)]

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{IoSlice, IoSliceMut, Write as _};
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, killpg, sigprocmask};
use nix::sys::signalfd::SignalFd;
use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, getpid, getppid};
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::helper::{fail, proxy_env};
use crate::profile::{Profile, Status};
use crate::{EXIT_HELPER_FAILED, fallback, reaper};

/// How many descriptors a command hands over: its standard input, output and error, and the
/// stream the zygote answers it on.
pub const COMMAND_FDS: usize = 4;

/// The largest message either side sends (a command's environment and arguments).
pub const MAX_MESSAGE: usize = 1 << 20;

/// What Keel sends the zygote on the control socket.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ToZygote {
    /// Run a command. Sent with [`COMMAND_FDS`] descriptors: stdin, stdout, stderr, and one end
    /// of a stream socket the zygote answers on (`started PID`, then `exit STATUS`, or `failed
    /// REASON`, one line each).
    Run(CommandRequest),
    /// Take no more commands; end once the running ones have (a new holder replaces this one).
    Retire,
}

/// One contained command: all that varies between two commands of one profile.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommandRequest {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The program's environment (the profile's allowlist is applied again, and `TMPDIR` set).
    pub env: Vec<(String, String)>,
    /// Written back in the status file once the command runs confined.
    pub nonce: String,
    pub status_file: PathBuf,
}

/// The zygote's first message on the control socket.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Ready {
    /// The holder is confined; `notes` say what is not enforced (as a status line's).
    Ready { notes: Vec<String> },
    /// Nothing can run here (`reason`); Keel uses the per-command helper instead.
    Failed { reason: String },
}

/// What the holder is asked (the status file stays with the zygote).
#[derive(Debug, Serialize, Deserialize)]
struct HolderRequest {
    id: u64,
    argv: Vec<String>,
    cwd: PathBuf,
    env: Vec<(String, String)>,
}

/// What the holder and its starters tell the zygote.
#[derive(Debug, Serialize, Deserialize)]
enum FromHolder {
    Ready { notes: Vec<String> },
    Failed { reason: String },
    Started { id: u64, starter: i32, command: i32 },
    Exited { id: u64, status: i32 },
    NotStarted { id: u64, reason: String },
}

/// Sends `bytes` with `fds` as one message on a `SOCK_SEQPACKET` socket.
pub fn send_with_fds(socket: BorrowedFd<'_>, bytes: &[u8], fds: &[RawFd]) -> nix::Result<()> {
    let iov = [IoSlice::new(bytes)];
    let rights = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage<'_>] = if fds.is_empty() { &[] } else { &rights };
    loop {
        match sendmsg::<()>(
            socket.as_raw_fd(),
            &iov,
            cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        ) {
            Err(Errno::EINTR) => {}
            Ok(_) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// Receives one message and the descriptors that came with it (close-on-exec); `Ok(None)` at
/// the end of the stream. `nonblocking`: `Err(EAGAIN)` when nothing is queued.
pub fn recv_with_fds(
    socket: BorrowedFd<'_>,
    buffer: &mut [u8],
    nonblocking: bool,
) -> nix::Result<Option<(usize, Vec<OwnedFd>)>> {
    let mut flags = MsgFlags::MSG_CMSG_CLOEXEC;
    if nonblocking {
        flags |= MsgFlags::MSG_DONTWAIT;
    }
    let mut space = nix::cmsg_space!([RawFd; COMMAND_FDS]);
    loop {
        let mut iov = [IoSliceMut::new(buffer)];
        let msg = match recvmsg::<()>(socket.as_raw_fd(), &mut iov, Some(&mut space), flags) {
            Err(Errno::EINTR) => continue,
            other => other?,
        };
        let mut fds = Vec::new();
        for cmsg in msg.cmsgs()? {
            if let ControlMessageOwned::ScmRights(raw) = cmsg {
                for fd in raw {
                    // SAFETY: the kernel just installed this descriptor in this process for
                    // this message; nothing else owns it.
                    #[expect(unsafe_code, reason = "adopting a received descriptor (see SAFETY)")]
                    fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
        }
        if msg.bytes == 0 && fds.is_empty() {
            return Ok(None);
        }
        if msg.flags.contains(MsgFlags::MSG_TRUNC) || msg.flags.contains(MsgFlags::MSG_CTRUNC) {
            return Err(Errno::EMSGSIZE);
        }
        return Ok(Some((msg.bytes, fds)));
    }
}

/// A `SOCK_SEQPACKET` pair, close-on-exec.
pub fn seqpacket_pair() -> nix::Result<(OwnedFd, OwnedFd)> {
    socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
}

/// The raw wait status (`waitpid`'s) of an ending.
fn raw_status(status: WaitStatus) -> Option<i32> {
    match status {
        WaitStatus::Exited(_, code) => Some((code & 0xff) << 8),
        WaitStatus::Signaled(_, signal, core) => Some(signal as i32 | if core { 0x80 } else { 0 }),
        _ => None,
    }
}

/// `pidfd_open(pid)`: readable once `pid` has exited (child or not).
fn pidfd_open(pid: Pid) -> Option<OwnedFd> {
    // SAFETY: integer arguments only.
    #[expect(unsafe_code, reason = "pidfd_open has no wrapper in nix (see SAFETY)")]
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    let fd = RawFd::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the kernel just returned this new descriptor; nothing else owns it.
    #[expect(unsafe_code, reason = "adopting a new pidfd (see SAFETY)")]
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `poll` on `fds` (each `POLLIN`); returns which are ready (readable, hung up or in error).
fn poll_in(fds: &[RawFd], timeout: Option<Duration>) -> Vec<bool> {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: *fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let timeout = timeout.map_or(-1, |t| i32::try_from(t.as_millis()).unwrap_or(i32::MAX));
    // SAFETY: `polled` is a live array of `pollfd` of the length given; the kernel writes only
    // its `revents` fields during the call.
    #[expect(unsafe_code, reason = "poll on a live array (see SAFETY)")]
    let result = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, timeout) };
    if result <= 0 {
        return vec![false; fds.len()];
    }
    polled.iter().map(|p| p.revents != 0).collect()
}

/// The zygote's entry point: `zygote --control FD`, the profile in [`crate::PROFILE_ENV`].
pub(crate) fn main(args: &[OsString]) -> i32 {
    let control = match args {
        [flag, fd] if flag == "--control" => fd.to_str().and_then(|fd| fd.parse::<RawFd>().ok()),
        _ => None,
    };
    let Some(control) = control.filter(|fd| *fd > 2) else {
        return fail(&Error::UnexpectedArgument(
            "expected `zygote --control FD`".into(),
        ));
    };
    // SAFETY: Keel passes the descriptor's number and nothing else in this process uses it.
    #[expect(
        unsafe_code,
        reason = "adopting the inherited control socket (see SAFETY)"
    )]
    let control = unsafe { OwnedFd::from_raw_fd(control) };
    // SAFETY: fcntl with integer arguments on a descriptor this process owns.
    #[expect(unsafe_code, reason = "fcntl(F_SETFD) (see SAFETY)")]
    unsafe {
        let _ = libc::fcntl(control.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
    }
    let profile = match crate::helper::load_from_env() {
        Ok(profile) => profile,
        Err(error) => {
            let reason = error.to_string();
            answer_ready(&control, &Ready::Failed { reason });
            return fail(&error);
        }
    };
    fallback::close_mask_on_exec(&profile);
    let keel = getppid();
    if keel.as_raw() == 1 {
        return fail(&Error::Orphaned);
    }
    let _ = nix::unistd::setsid();
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let _ = nix::sys::prctl::set_dumpable(false);
    // Keel's thread that started the zygote ending sends this; so does Keel's end. Either way
    // the control socket says more (an end without `Retire` ends everything).
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGTERM);
    let mut zygote = match Zygote::start(&profile, control) {
        Ok(zygote) => zygote,
        Err(code) => return code,
    };
    zygote.serve(keel)
}

fn answer_ready(control: &OwnedFd, ready: &Ready) {
    if let Ok(text) = serde_json::to_vec(ready) {
        let _ = send_with_fds(control.as_fd(), &text, &[]);
    }
}

/// A command the zygote runs.
struct Running {
    /// The stream Keel waits on.
    reply: std::os::unix::net::UnixStream,
    status_file: std::fs::File,
    nonce: String,
    /// Once started: the starter (with a pidfd that says when it is gone) and the command.
    started: Option<(Pid, OwnedFd, Pid)>,
}

struct Zygote {
    control: OwnedFd,
    holder: Pid,
    holder_gone: OwnedFd,
    to_holder: OwnedFd,
    signals: SignalFd,
    notes: Vec<String>,
    running: HashMap<u64, Running>,
    next_id: u64,
    retiring: bool,
    buffer: Vec<u8>,
}

impl Zygote {
    /// Forks the holder and waits until it is confined; answers Keel either way.
    fn start(profile: &Profile, control: OwnedFd) -> Result<Self, i32> {
        let failed = |control: &OwnedFd, reason: String| {
            answer_ready(control, &Ready::Failed { reason });
            EXIT_HELPER_FAILED
        };
        let mut set = SigSet::empty();
        for signal in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
            set.add(signal);
        }
        let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None);
        let signals = match SignalFd::new(&set) {
            Ok(signals) => signals,
            Err(e) => return Err(failed(&control, format!("signalfd: {e}"))),
        };
        let (to_holder, holder_end) = match seqpacket_pair() {
            Ok(pair) => pair,
            Err(e) => return Err(failed(&control, format!("socketpair: {e}"))),
        };
        let zygote = getpid();
        if children(zygote.as_raw()).is_none() {
            // Without the kernel's list of children the zygote could not find what a command
            // leaves behind.
            return Err(failed(
                &control,
                "this kernel has no /proc/PID/task/PID/children".into(),
            ));
        }
        // SAFETY: `fork` is sound in a single-threaded process, and the zygote is one: its
        // `main` runs before any thread is started, and nothing here starts one.
        #[expect(unsafe_code, reason = "fork in a single-threaded process (see SAFETY)")]
        let forked = unsafe { nix::unistd::fork() };
        let holder = match forked {
            Ok(ForkResult::Child) => {
                drop(control);
                drop(to_holder);
                drop(signals);
                let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None);
                std::process::exit(hold(profile, &holder_end, zygote));
            }
            Ok(ForkResult::Parent { child }) => child,
            Err(e) => return Err(failed(&control, format!("fork: {e}"))),
        };
        drop(holder_end);
        // The holder has applied the mask ruleset (or failed to): the zygote never needs it.
        if let Some(fd) = profile.mask_ruleset {
            // SAFETY: closing a numbered descriptor this process inherited for this purpose.
            #[expect(unsafe_code, reason = "close of the inherited ruleset (see SAFETY)")]
            unsafe {
                let _ = libc::close(fd);
            }
        }
        let holder_gone = pidfd_open(holder);
        let mut buffer = vec![0u8; MAX_MESSAGE];
        let first = recv_with_fds(to_holder.as_fd(), &mut buffer, false);
        let message = match first {
            Ok(Some((n, _))) => serde_json::from_slice::<FromHolder>(&buffer[..n]).ok(),
            _ => None,
        };
        let notes = match (message, holder_gone) {
            (Some(FromHolder::Ready { notes }), Some(gone)) => (notes, gone),
            (Some(FromHolder::Failed { reason }), _) => {
                let _ = waitpid(holder, None);
                return Err(failed(&control, reason));
            }
            _ => {
                let _ = kill(holder, Signal::SIGKILL);
                let _ = waitpid(holder, None);
                return Err(failed(&control, "the sandbox holder did not start".into()));
            }
        };
        answer_ready(
            &control,
            &Ready::Ready {
                notes: notes.0.clone(),
            },
        );
        Ok(Self {
            control,
            holder,
            holder_gone: notes.1,
            to_holder,
            signals,
            notes: notes.0,
            running: HashMap::new(),
            next_id: 0,
            retiring: false,
            buffer,
        })
    }

    /// Serves Keel until it retires the zygote (and the last command ended), goes away, or the
    /// holder is gone.
    fn serve(&mut self, keel: Pid) -> i32 {
        loop {
            self.reap();
            if self.retiring && self.running.is_empty() {
                return self.end_all();
            }
            let mut fds = vec![
                // Retired: Keel's end is closed (always readable) and says nothing more.
                if self.retiring {
                    -1
                } else {
                    self.control.as_raw_fd()
                },
                self.to_holder.as_raw_fd(),
                self.holder_gone.as_raw_fd(),
                self.signals.as_fd().as_raw_fd(),
            ];
            let ids: Vec<u64> = self.running.keys().copied().collect();
            for id in &ids {
                let running = &self.running[id];
                fds.push(running.reply.as_raw_fd());
                if let Some((_, gone, _)) = &running.started {
                    fds.push(gone.as_raw_fd());
                }
            }
            let ready = poll_in(&fds, None);
            if ready[3] {
                let signal = self.signals.read_signal().ok().flatten();
                let from_thread_end = signal.is_some_and(|info| {
                    info.ssi_signo == Signal::SIGTERM as u32 && getppid() == keel
                });
                // A parent-death signal from the end of Keel's thread alone (Keel lives on) is
                // not Keel's end: the control socket says when that comes.
                if !from_thread_end {
                    return self.end_all();
                }
            }
            // Whether or not `ready[1]` says so: a starter's message is queued before its end
            // is seen, and must be read before its end is taken for a kill.
            self.read_holder();
            if ready[0] && !self.retiring && !self.read_keel() {
                // Keel is gone (its end closed without `Retire`): nobody waits for the commands.
                return self.end_all();
            }
            if ready[2] {
                // The holder is gone (a command killed it): nothing it started may stay.
                return self.end_all();
            }
            for id in ids {
                self.check_running(id);
            }
        }
    }

    /// Reaps what reached the zygote (the holder, orphans it kills).
    fn reap(&self) {
        while let Ok(status) = waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            if status == WaitStatus::StillAlive {
                break;
            }
        }
    }

    /// One message from Keel; `false` when Keel's end is closed.
    fn read_keel(&mut self) -> bool {
        let (n, fds) = match recv_with_fds(self.control.as_fd(), &mut self.buffer, true) {
            Ok(Some(message)) => message,
            Ok(None) => return false,
            Err(Errno::EAGAIN) => return true,
            Err(_) => return false,
        };
        match serde_json::from_slice::<ToZygote>(&self.buffer[..n]) {
            Ok(ToZygote::Retire) => self.retiring = true,
            Ok(ToZygote::Run(request)) => self.run(request, fds),
            Err(_) => {}
        }
        true
    }

    fn run(&mut self, request: CommandRequest, fds: Vec<OwnedFd>) {
        let Ok([stdin, stdout, stderr, reply]): Result<[OwnedFd; COMMAND_FDS], _> = fds.try_into()
        else {
            return;
        };
        let mut reply = std::os::unix::net::UnixStream::from(reply);
        let status_file = match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&request.status_file)
        {
            Ok(file) => file,
            Err(e) => {
                let _ = writeln!(reply, "failed cannot open the status file: {e}");
                return;
            }
        };
        let id = self.next_id;
        self.next_id += 1;
        let message = HolderRequest {
            id,
            argv: request.argv,
            cwd: request.cwd,
            env: request.env,
        };
        let sent = serde_json::to_vec(&message).ok().is_some_and(|text| {
            send_with_fds(
                self.to_holder.as_fd(),
                &text,
                &[stdin.as_raw_fd(), stdout.as_raw_fd(), stderr.as_raw_fd()],
            )
            .is_ok()
        });
        if !sent {
            let _ = writeln!(reply, "failed the sandbox holder is gone");
            return;
        }
        self.running.insert(
            id,
            Running {
                reply,
                status_file,
                nonce: request.nonce,
                started: None,
            },
        );
    }

    /// Every message queued from the holder and the starters.
    fn read_holder(&mut self) {
        loop {
            let n = match recv_with_fds(self.to_holder.as_fd(), &mut self.buffer, true) {
                Ok(Some((n, _))) => n,
                Ok(None) | Err(_) => return,
            };
            match serde_json::from_slice::<FromHolder>(&self.buffer[..n]) {
                Ok(FromHolder::Started {
                    id,
                    starter,
                    command,
                }) => self.started(id, Pid::from_raw(starter), Pid::from_raw(command)),
                Ok(FromHolder::Exited { id, status }) => self.exited(id, status),
                Ok(FromHolder::NotStarted { id, reason }) => {
                    if let Some(mut running) = self.running.remove(&id) {
                        let _ = writeln!(running.reply, "failed {reason}");
                    }
                }
                _ => {}
            }
        }
    }

    fn started(&mut self, id: u64, starter: Pid, command: Pid) {
        let Some(running) = self.running.get_mut(&id) else {
            return;
        };
        let Some(gone) = pidfd_open(starter) else {
            // Already gone: its end is handled as a starter killed.
            let _ = kill(command, Signal::SIGKILL);
            return;
        };
        let status = Status {
            nonce: running.nonce.clone(),
            mechanism: "landlock".into(),
            notes: self.notes.clone(),
        };
        if let Ok(text) = serde_json::to_string(&status) {
            // The status line and the guard in one `write`.
            let _ = running
                .status_file
                .write_all(format!("{text}\nguard {starter}\n").as_bytes());
        }
        running.started = Some((starter, gone, command));
        let _ = writeln!(running.reply, "started {command}");
    }

    /// The command's process exited: end what it left (the starter's other descendants), then
    /// say so.
    fn exited(&mut self, id: u64, status: i32) {
        let Some(mut running) = self.running.remove(&id) else {
            return;
        };
        let Some((starter, _, _)) = running.started else {
            return;
        };
        let swept = sweep(starter);
        // A starter already gone (killed after it said so) left its orphans to the zygote.
        let orphans_gone = alive(starter) || self.kill_orphans();
        if swept && orphans_gone {
            let _ = running.status_file.write_all(b"\nempty\n");
        }
        let _ = kill(starter, Signal::SIGKILL);
        let _ = writeln!(running.reply, "exit {status}");
    }

    /// A command whose stream Keel closed, or whose starter is gone before it said the command
    /// exited (something in the domain killed it): end the command and what it left.
    fn check_running(&mut self, id: u64) {
        let Some(running) = self.running.get(&id) else {
            return;
        };
        let keel_gone = poll_in(&[running.reply.as_raw_fd()], Some(Duration::ZERO))[0];
        let starter_gone = running
            .started
            .as_ref()
            .is_some_and(|(_, gone, _)| poll_in(&[gone.as_raw_fd()], Some(Duration::ZERO))[0]);
        if !keel_gone && !starter_gone {
            return;
        }
        let Some(mut running) = self.running.remove(&id) else {
            return;
        };
        if let Some((starter, _, command)) = running.started {
            let _ = killpg(command, Signal::SIGKILL);
            let _ = kill(command, Signal::SIGKILL);
            let _ = sweep(starter);
            let _ = kill(starter, Signal::SIGKILL);
        }
        if starter_gone {
            // Its orphans reached the zygote: every child but the holder is one.
            let orphans_gone = self.kill_orphans();
            if orphans_gone {
                let _ = running.status_file.write_all(b"\nempty\n");
            }
            let _ = writeln!(running.reply, "exit {}", Signal::SIGKILL as i32);
        }
    }

    /// Kills every child of the zygote but the holder (orphans of a killed starter) until none
    /// is left; whether none is.
    fn kill_orphans(&self) -> bool {
        let me = getpid();
        let until = Instant::now() + SWEEP_LIMIT;
        loop {
            self.reap();
            let orphans: Vec<i32> = children(me.as_raw())
                .unwrap_or_default()
                .into_iter()
                .filter(|pid| *pid != self.holder.as_raw())
                .collect();
            if orphans.is_empty() {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            for pid in orphans {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Ends everything: the holder, every starter and command, every orphan; answers every
    /// running command as killed. Returns the zygote's exit code.
    fn end_all(&mut self) -> i32 {
        let _ = kill(self.holder, Signal::SIGKILL);
        for running in self.running.values() {
            if let Some((starter, _, command)) = running.started {
                let _ = killpg(command, Signal::SIGKILL);
                let _ = kill(starter, Signal::SIGKILL);
            }
        }
        let empty = kill_descendants_of_self();
        for (_, mut running) in self.running.drain() {
            if empty && running.started.is_some() {
                let _ = running.status_file.write_all(b"\nempty\n");
            }
            let _ = writeln!(running.reply, "exit {}", Signal::SIGKILL as i32);
        }
        0
    }
}

/// How long the zygote keeps killing what a command left before it gives up (and does not
/// write `empty`).
const SWEEP_LIMIT: Duration = Duration::from_secs(2);

/// The children of process `pid` (`/proc/PID/task/PID/children`: every process the zygote
/// watches is single-threaded); `None` when it cannot be read (the process is gone).
pub(crate) fn children(pid: i32) -> Option<Vec<i32>> {
    let list = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    Some(
        list.split_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .collect(),
    )
}

/// Whether process `pid` is alive (not a zombie).
fn alive(pid: Pid) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')').is_some_and(|(_, rest)| {
            let state = rest.trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        })
    })
}

/// Kills every descendant of `starter` (the starter reaps them; what they leave reparents to
/// it) until it has no child left; whether it has none.
fn sweep(starter: Pid) -> bool {
    let until = Instant::now() + SWEEP_LIMIT;
    loop {
        // Unreadable: the starter is gone; it ends only once it has no child left, and a
        // starter killed earlier left its orphans to the zygote (`Zygote::kill_orphans`).
        let Some(children) = children(starter.as_raw()) else {
            return true;
        };
        if children.is_empty() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        for child in children {
            let _ = kill(Pid::from_raw(child), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Kills every descendant of this process (a subreaper: all of them end up its children) and
/// reaps them; whether none is left.
fn kill_descendants_of_self() -> bool {
    let me = getpid().as_raw();
    let until = Instant::now() + SWEEP_LIMIT;
    loop {
        loop {
            match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Err(Errno::ECHILD) => return true,
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(_) => {}
            }
        }
        if Instant::now() >= until {
            return false;
        }
        let mut todo = children(me).unwrap_or_default();
        let mut seen = Vec::new();
        while let Some(pid) = todo.pop() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            todo.extend(children(pid).unwrap_or_default());
            seen.push(pid);
            if seen.len() > 100_000 {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn tell(socket: &OwnedFd, message: &FromHolder) {
    if let Ok(text) = serde_json::to_vec(message) {
        let _ = send_with_fds(socket.as_fd(), &text, &[]);
    }
}

/// The holder: confines itself once, then forks a starter per command. Returns its exit code.
fn hold(profile: &Profile, socket: &OwnedFd, zygote: Pid) -> i32 {
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    if getppid() != zygote {
        return EXIT_HELPER_FAILED;
    }
    let _ = nix::sys::prctl::set_dumpable(false);
    let mut prepared = match fallback::prepare(profile) {
        Ok(prepared) => prepared,
        Err(e) => {
            tell(
                socket,
                &FromHolder::Failed {
                    reason: format!("Landlock/seccomp unavailable: {e}"),
                },
            );
            return EXIT_HELPER_FAILED;
        }
    };
    if let Err(e) = prepared.apply() {
        tell(
            socket,
            &FromHolder::Failed {
                reason: format!("applying Landlock/seccomp: {e}"),
            },
        );
        return EXIT_HELPER_FAILED;
    }
    if let Some(fd) = profile.mask_ruleset {
        // SAFETY: closing a numbered descriptor this process inherited; applied above.
        #[expect(unsafe_code, reason = "close of the inherited ruleset (see SAFETY)")]
        unsafe {
            let _ = libc::close(fd);
        }
    }
    let mut notes = std::mem::take(&mut prepared.notes);
    notes.push(reaper::FALLBACK_NOTE.into());
    notes.push(WARM_NOTE.into());
    tell(socket, &FromHolder::Ready { notes });
    let proxy_port = prepared.proxy_port;
    let mut buffer = vec![0u8; MAX_MESSAGE];
    loop {
        while let Ok(status) = waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            if status == WaitStatus::StillAlive {
                break;
            }
        }
        let (n, fds) = match recv_with_fds(socket.as_fd(), &mut buffer, false) {
            Ok(Some(message)) => message,
            // The zygote is gone or retired the holder.
            Ok(None) | Err(_) => return 0,
        };
        let Ok(request) = serde_json::from_slice::<HolderRequest>(&buffer[..n]) else {
            continue;
        };
        let Ok(stdio): Result<[OwnedFd; 3], _> = fds.try_into() else {
            tell(
                socket,
                &FromHolder::NotStarted {
                    id: request.id,
                    reason: "no standard descriptors".into(),
                },
            );
            continue;
        };
        // SAFETY: the holder is single-threaded (a fork of the single-threaded zygote that
        // starts no thread).
        #[expect(unsafe_code, reason = "fork in a single-threaded process (see SAFETY)")]
        let forked = unsafe { nix::unistd::fork() };
        match forked {
            Ok(ForkResult::Child) => {
                std::process::exit(start(profile, socket, request, stdio, proxy_port));
            }
            Ok(ForkResult::Parent { .. }) => drop(stdio),
            Err(e) => tell(
                socket,
                &FromHolder::NotStarted {
                    id: request.id,
                    reason: format!("fork: {e}"),
                },
            ),
        }
    }
}

/// The note every command through the holder carries.
const WARM_NOTE: &str = "Landlock fallback, warm holder: contained commands of this session \
                         share one Landlock domain, so one may signal another running at the \
                         same time (never Keel, an approved command or anything else)";

/// A starter: a subreaper in the holder's domain that starts one command and reaps everything
/// it leaves until the zygote has ended it all.
fn start(
    profile: &Profile,
    socket: &OwnedFd,
    request: HolderRequest,
    stdio: [OwnedFd; 3],
    proxy_port: Option<u16>,
) -> i32 {
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let id = request.id;
    let not_started = |reason: String| {
        tell(socket, &FromHolder::NotStarted { id, reason });
        EXIT_HELPER_FAILED
    };
    let Some((first, rest)) = request.argv.split_first() else {
        return not_started("no program".into());
    };
    let [stdin, stdout, stderr] = stdio;
    let mut command = Command::new(first);
    command
        .args(rest)
        .env_clear()
        .envs(
            request
                .env
                .iter()
                .filter(|(name, _)| crate::profile::env_allowed(&profile.env_allow, name))
                .map(|(name, value)| (name, value)),
        )
        .env("TMPDIR", &profile.tmp_dir)
        .current_dir(&request.cwd)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
    if let Some(port) = proxy_port {
        proxy_env(&mut command, port);
    }
    // SAFETY: the closure runs in the child between `fork` and `exec` and makes one system call
    // (setsid); the starter is single-threaded.
    #[expect(
        unsafe_code,
        reason = "pre_exec with one async-signal-safe system call (see SAFETY)"
    )]
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid()?;
            Ok(())
        });
    }
    let child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return not_started(format!("cannot run {first}: {e}")),
    };
    drop(command);
    let Ok(pid) = i32::try_from(child.id()) else {
        return EXIT_HELPER_FAILED;
    };
    let main = Pid::from_raw(pid);
    tell(
        socket,
        &FromHolder::Started {
            id,
            starter: getpid().as_raw(),
            command: pid,
        },
    );
    let mut main_done = false;
    loop {
        match waitpid(Pid::from_raw(-1), None) {
            Ok(status) if status.pid() == Some(main) => {
                if let Some(raw) = raw_status(status) {
                    main_done = true;
                    tell(socket, &FromHolder::Exited { id, status: raw });
                }
            }
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) if main_done => return 0,
            Err(_) => return EXIT_HELPER_FAILED,
        }
    }
}
