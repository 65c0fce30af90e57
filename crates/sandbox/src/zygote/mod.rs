//! The warm holder: `keel-sandbox zygote --control FD`, one per session and per contained
//! profile, which keeps what confines the profile's commands alive and forks each contained
//! command from it (docs/sandbox.md, "The warm holder"; decisions 0039 and 0048). Under
//! namespaces the holder keeps the profile's new root and each command gets its own PID, mount
//! and IPC namespace and init (module `ns`); what follows is the fallback's, where the holder
//! keeps a Landlock domain. The zygote is the same for both.
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
//!
//! A command can also stop the holder (`kill -STOP -1` under the fallback). The zygote, its
//! parent, sees the stop (`SIGCHLD`, `waitpid` with `WUNTRACED`) and retires the holder: it
//! answers every later command `gone` at once (Keel starts a fresh zygote, with a fresh holder
//! and domain, for it), lets the commands already running end as they would (or be killed by
//! their timeout or cancel), then ends everything, the holder included, and exits.

#![expect(
    clippy::disallowed_types,
    reason = "the helper is the layer that confines processes: the zygote writes status files and \
              spawns the holder, outside Keel's runtime"
)]

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Write as _;
use std::os::fd::{AsFd as _, AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, killpg, sigprocmask};
use nix::sys::signalfd::SignalFd;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, getpid, getppid};

use crate::error::Error;
use crate::helper::{fail, proxy_env};
use crate::profile::{Profile, Status};
use crate::{EXIT_HELPER_FAILED, fallback, reaper};

mod holder;
mod ns;
mod sweep;
mod wire;

use holder::hold;
use sweep::*;
pub use wire::*;

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
    /// How the holder confines (`landlock` or `namespaces`), as the status line says it.
    mechanism: String,
    notes: Vec<String>,
    running: HashMap<u64, Running>,
    next_id: u64,
    retiring: bool,
    /// The holder was stopped (a command in its domain sent `SIGSTOP`): it starts nothing more,
    /// and the zygote ends once its running commands have.
    holder_stopped: bool,
    /// Written once the holder is retired: a starter forked after it runs nothing.
    retired: OwnedFd,
    /// Starters whose command has ended, killed but maybe not gone yet (checked when the
    /// holder stops; pruned as they go).
    ended: Vec<i32>,
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
        // `SIGCHLD` only wakes the loop: a child's end, or the holder stopped.
        for signal in [
            Signal::SIGTERM,
            Signal::SIGINT,
            Signal::SIGHUP,
            Signal::SIGCHLD,
        ] {
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
        let (retired_end, retired) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
            Ok(pipe) => pipe,
            Err(e) => return Err(failed(&control, format!("pipe: {e}"))),
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
                drop(retired);
                let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None);
                std::process::exit(hold(profile, &holder_end, &retired_end, zygote));
            }
            Ok(ForkResult::Parent { child }) => child,
            Err(e) => return Err(failed(&control, format!("fork: {e}"))),
        };
        drop(holder_end);
        drop(retired_end);
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
        let (mechanism, notes, holder_gone) = match (message, holder_gone) {
            (Some(FromHolder::Ready { mechanism, notes }), Some(gone)) => (mechanism, notes, gone),
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
                notes: notes.clone(),
            },
        );
        Ok(Self {
            control,
            holder,
            holder_gone,
            to_holder,
            signals,
            mechanism,
            notes,
            running: HashMap::new(),
            next_id: 0,
            retiring: false,
            holder_stopped: false,
            retired,
            ended: Vec::new(),
            buffer,
        })
    }

    /// Serves Keel until it retires the zygote (and the last command ended), goes away, or the
    /// holder is gone.
    fn serve(&mut self, keel: Pid) -> i32 {
        loop {
            reaper::reap_ended();
            self.check_holder_stopped();
            if (self.retiring || self.holder_stopped) && self.running.is_empty() {
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
                let child = signal.is_some_and(|info| info.ssi_signo == Signal::SIGCHLD as u32);
                // A parent-death signal from the end of Keel's thread alone (Keel lives on) is
                // not Keel's end: the control socket says when that comes.
                if !from_thread_end && !child {
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
        if self.holder_stopped {
            // Nothing ran: Keel retires this zygote and asks a fresh one.
            let _ = writeln!(reply, "gone the sandbox holder was stopped");
            return;
        }
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
            // Nothing ran, and this zygote is ending (it has not seen its holder's end yet):
            // Keel asks a fresh one.
            let _ = writeln!(reply, "gone the sandbox holder is gone");
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

    /// Whether the holder has stopped (a command in its domain sent it `SIGSTOP`): a stopped
    /// holder forks nothing, so every later command would wait for it in vain. It is retired:
    /// later commands are answered `gone`, the running ones end as they would, then the zygote
    /// ends it all. (A holder continued later changes nothing: it is retired already.)
    fn check_holder_stopped(&mut self) {
        if self.holder_stopped {
            return;
        }
        let flags = WaitPidFlag::WUNTRACED | WaitPidFlag::WNOHANG;
        if !matches!(
            waitpid(self.holder, Some(flags)),
            Ok(WaitStatus::Stopped(..))
        ) {
            return;
        }
        self.holder_stopped = true;
        // The commands sent to it that have not started: each either has a starter already
        // (forked before the stop: it goes on when continued, and says `started`), or never
        // will. From the byte on `retired` on, a starter the holder forks (continued later)
        // runs nothing; one forked before it is among the holder's children now, and one that
        // ended already said `started` before (read here). Without such a starter, none of them
        // runs: Keel asks a fresh zygote. With one, they wait for it (or Keel's timeout).
        let _ = nix::unistd::write(&self.retired, b"r");
        let holder = self.holder.as_raw();
        let forked: Vec<i32> = children(holder)
            .unwrap_or_default()
            .into_iter()
            .filter(|pid| alive(Pid::from_raw(*pid)))
            .collect();
        self.read_holder();
        let known: Vec<i32> = self
            .running
            .values()
            .filter_map(|running| running.started.as_ref())
            .map(|(starter, _, _)| starter.as_raw())
            .collect();
        if forked
            .iter()
            .any(|pid| !known.contains(pid) && !self.ended.contains(pid))
        {
            return;
        }
        let waiting: Vec<u64> = self
            .running
            .iter()
            .filter(|(_, running)| running.started.is_none())
            .map(|(id, _)| *id)
            .collect();
        for id in waiting {
            if let Some(mut running) = self.running.remove(&id) {
                let _ = writeln!(running.reply, "gone the sandbox holder was stopped");
            }
        }
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
                    guard,
                }) => self.started(id, Pid::from_raw(starter), Pid::from_raw(command), guard),
                Ok(FromHolder::Exited { id, status }) => self.exited(id, status),
                Ok(FromHolder::NotStarted { id, reason }) => {
                    if let Some(mut running) = self.running.remove(&id) {
                        let _ = writeln!(running.reply, "failed {reason}");
                    }
                }
                Ok(FromHolder::Stale { id, reason }) => {
                    // Keel retires this zygote and asks a fresh one; the commands running here
                    // finish first.
                    self.retiring = true;
                    if let Some(mut running) = self.running.remove(&id) {
                        let _ = writeln!(running.reply, "gone {reason}");
                    }
                }
                _ => {}
            }
        }
    }

    fn started(&mut self, id: u64, starter: Pid, command: Pid, guard: i32) {
        let Some(running) = self.running.get_mut(&id) else {
            // A command nobody waits for any more (answered `gone` when the holder stopped).
            let _ = killpg(command, Signal::SIGKILL);
            let _ = kill(command, Signal::SIGKILL);
            self.end_starter(starter);
            return;
        };
        let Some(gone) = pidfd_open(starter) else {
            // Already gone: its end is handled as a starter killed.
            let _ = kill(command, Signal::SIGKILL);
            return;
        };
        let status = Status {
            nonce: running.nonce.clone(),
            mechanism: self.mechanism.clone(),
            notes: self.notes.clone(),
        };
        if let Ok(text) = serde_json::to_string(&status) {
            // The status line and the guard in one `write`.
            let _ = running
                .status_file
                .write_all(format!("{text}\nguard {guard}\n").as_bytes());
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
        if self.mechanism == "namespaces" {
            // Init ended and reaped every other process of its PID namespace before it said
            // so; its own end (the guard, which Keel's check waits for) follows, with the
            // namespaces' teardown, after the answer. `done`: Keel need not wait for it.
            let _ = writeln!(running.reply, "done {status}");
            return;
        }
        let swept = sweep(starter);
        // A starter already gone (killed after it said so) left its orphans to the zygote.
        let orphans_gone = alive(starter) || self.kill_orphans();
        if swept && orphans_gone {
            let _ = running.status_file.write_all(b"\nempty\n");
        }
        self.end_starter(starter);
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
            self.end_starter(starter);
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

    /// Kills a starter whose command has ended (or is not waited for), and remembers it until
    /// it is gone: a starter still alive is not taken for one of a command yet to start.
    fn end_starter(&mut self, starter: Pid) {
        let _ = kill(starter, Signal::SIGKILL);
        // Pruned now and then, not per command (a look in `/proc` each).
        if self.ended.len() >= 16 {
            self.ended.retain(|pid| alive(Pid::from_raw(*pid)));
        }
        self.ended.push(starter.as_raw());
    }

    /// Kills every child of the zygote but the holder (orphans of a killed starter) until none
    /// is left; whether none is.
    fn kill_orphans(&self) -> bool {
        let me = getpid();
        kill_until_none(|| {
            reaper::reap_ended();
            let orphans = children(me.as_raw())
                .unwrap_or_default()
                .into_iter()
                .filter(|pid| *pid != self.holder.as_raw())
                .collect();
            Some(orphans)
        })
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
