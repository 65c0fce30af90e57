//! The warm holder under namespaces (decision 0045): the holder builds the contained profile's
//! root once, in a user, mount and network namespace of its own, and each command's starter
//! does only what must be the command's own.
//!
//! - **The holder** ([`hold`]): `namespaces::hold_root`: its own user namespace (the caller
//!   mapped to root), a network namespace with only its loopback, a mount namespace with the
//!   profile's new root (system directories, home allowlist, `/tmp`, workspace, masks, `/dev`),
//!   the host's `/proc` bound at `/proc`, pivoted into, the old root detached, the root
//!   read-only. Before each command it checks that its mount table has not changed since
//!   ([`changed`]): a mount detached by the host (a masked file replaced by a rename takes its
//!   mask along) makes it stale, and a fresh holder runs the command.
//! - **A starter** per command ([`start`]): a fork of the holder; a PID, mount and IPC
//!   namespace of the command's own (`unshare`: the mount namespace a copy of the holder's,
//!   so nothing the command mounts reaches the holder or the next command), then forks init
//!   and watches it: an init that ends without its last word was killed, and the starter says
//!   so.
//! - **init** ([`init`]): PID 1 of the new namespace, a session of its own. It mounts the
//!   namespace's `/proc` over the host's (its host entries read-only), drops every capability
//!   in a nested user namespace (which locks every mount), sets `no_new_privs`, is not
//!   dumpable, tells the zygote the command starts (on the holder's socket, with its pid and
//!   the starter's as the host sees them), starts the program with the namespaces' seccomp
//!   filter in a session of its own, forwards signals to the whole namespace, and once the
//!   program has exited kills and reaps every other process of its namespace before it tells
//!   the zygote how the program ended. Keel waits on and signals init's group (it holds only
//!   init); init's end is the guard.

#![expect(
    clippy::disallowed_methods,
    reason = "the helper is the layer that confines processes: init starts the command, outside \
              Keel's runtime"
)]

use nix::sched::{CloneFlags, unshare};
use nix::unistd::{getgid, getuid};

use super::holder::{Held, request_command, tell};
use super::*;
use crate::helper::{Ending, block_signals, own_session, supervise};
use crate::profile::Mechanism;

/// The note every command through a holder under namespaces carries.
const WARM_NOTE: &str = "namespaces, warm holder: contained commands of this session share one \
                         network namespace with only its loopback (a datagram may reach \
                         another running at the same time, nothing else), each has a PID, \
                         mount and IPC namespace of its own";

/// Whether a holder of `profile` confines by namespaces: unless the fallback is forced or Keel
/// handed a Landlock mask ruleset (it saw the fallback used on this machine).
pub(super) fn wanted(profile: &Profile) -> bool {
    profile.mechanism != Mechanism::Landlock && profile.mask_ruleset.is_none()
}

/// Builds the holder's root ([`crate::namespaces::hold_root`]); what it holds, the mechanism and
/// the notes of its commands.
// String error: the reason is what the holder tells the zygote (`FromHolder::Failed`).
pub(super) fn hold(profile: &Profile) -> Result<(Held, String, Vec<String>), String> {
    let ids = (getuid().as_raw(), getgid().as_raw());
    crate::namespaces::hold_root(profile, ids)
        .map_err(|e| format!("namespaces unavailable: {e}"))?;
    // The host's `/proc` (bound at `/proc`): `self` is the holder.
    let mounts = std::fs::File::open("/proc/self/mountinfo")
        .map_err(|e| format!("reading the holder's mounts: {e}"))?;
    let filter = fallback::Prepared::for_namespaces(profile)
        .map_err(|e| format!("the namespaces' seccomp filter: {e}"))?;
    let held = Held::Namespaces {
        ids,
        mounts,
        filter: Some(filter),
    };
    Ok((held, "namespaces".into(), vec![WARM_NOTE.into()]))
}

/// Whether the holder's mount table has changed since `mounts` was opened (the kernel makes
/// `/proc/self/mountinfo` readable with `POLLPRI` once it has). The holder mounts nothing after
/// it opened it, and its mounts are private, so only a mount the host detached changes it: the
/// host unlinked or renamed over a mount point (a masked file, a bound directory).
pub(super) fn changed(mounts: &std::fs::File) -> bool {
    let mut polled = [libc::pollfd {
        fd: mounts.as_raw_fd(),
        events: libc::POLLPRI,
        revents: 0,
    }];
    // SAFETY: `polled` is a live array of one `pollfd`; the kernel writes only its `revents`.
    #[expect(unsafe_code, reason = "poll on a live array (see SAFETY)")]
    let result = unsafe { libc::poll(polled.as_mut_ptr(), 1, 0) };
    // A failed poll cannot say the table is unchanged.
    result != 0 && (result < 0 || polled[0].revents & (libc::POLLPRI | libc::POLLERR) != 0)
}

/// A starter: the command's PID, mount and IPC namespaces, and its init, which tells the
/// zygote how the command goes. The starter speaks only when init ends without its last word
/// (killed). Returns its exit code.
pub(super) fn start(
    profile: &Profile,
    socket: &OwnedFd,
    request: HolderRequest,
    stdio: [OwnedFd; 3],
    confinement: ((u32, u32), Option<fallback::Prepared>),
) -> i32 {
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    let id = request.id;
    let not_started = |reason: String| {
        tell(socket, &FromHolder::NotStarted { id, reason });
        EXIT_HELPER_FAILED
    };
    let flags = CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWIPC;
    if let Err(e) = unshare(flags) {
        return not_started(format!("the command's namespaces: {e}"));
    }
    let (mine, theirs) = match seqpacket_pair() {
        Ok(pair) => pair,
        Err(e) => return not_started(format!("socketpair: {e}")),
    };
    // SAFETY: the starter is single-threaded (a fork of the single-threaded holder).
    #[expect(unsafe_code, reason = "fork in a single-threaded process (see SAFETY)")]
    let forked = unsafe { nix::unistd::fork() };
    let init_pid = match forked {
        Ok(ForkResult::Child) => {
            drop(mine);
            let ends = (socket, &theirs);
            std::process::exit(init(profile, ends, &request, stdio, confinement));
        }
        Ok(ForkResult::Parent { child }) => child,
        Err(e) => return not_started(format!("fork: {e}")),
    };
    // Init's copies are the command's: the pipe's end of file must not wait for this process.
    drop(stdio);
    drop(theirs);
    watch(socket, id, &mine, init_pid)
}

/// Waits for init's last word; without it (init was killed, its namespace with it), tells the
/// zygote the command was killed, once init is gone. Init's own messages to the zygote, on the
/// same socket, are all queued before this one.
fn watch(socket: &OwnedFd, id: u64, from_init: &OwnedFd, init: Pid) -> i32 {
    let mut buffer = [0u8; 64];
    loop {
        match recv_with_fds(from_init.as_fd(), &mut buffer, false) {
            Ok(Some(_)) => return 0,
            Err(Errno::EINTR) => {}
            Ok(None) | Err(_) => break,
        }
    }
    let _ = waitpid(init, None);
    let status = Signal::SIGKILL as i32;
    tell(socket, &FromHolder::Exited { id, status });
    0
}

/// Tells the starter that init said its last word to the zygote.
fn done(to_starter: &OwnedFd) {
    let _ = send_with_fds(to_starter.as_fd(), b"done", &[]);
}

/// This process's pid and its parent's as the host's `/proc` shows them (init reads it before
/// it mounts its own namespace's over it).
fn host_pids() -> Option<(i32, i32)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let pid = stat.split(' ').next()?.parse().ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let parent = rest.split_whitespace().nth(1)?.parse().ok()?;
    Some((pid, parent))
}

/// The command's init: PID 1 of its namespace. It tells the zygote, on the holder's socket
/// (`to_zygote`, which the starters share), that the command starts, once it is confined and
/// before the program exists, and how it ended, once its namespace is empty. Returns its exit
/// code.
fn init(
    profile: &Profile,
    (to_zygote, to_starter): (&OwnedFd, &OwnedFd),
    request: &HolderRequest,
    stdio: [OwnedFd; 3],
    ((uid, gid), filter): ((u32, u32), Option<fallback::Prepared>),
) -> i32 {
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    let id = request.id;
    let failed = |reason: String| {
        tell(to_zygote, &FromHolder::NotStarted { id, reason });
        done(to_starter);
        EXIT_HELPER_FAILED
    };
    let Some((me, starter)) = host_pids() else {
        return failed("init cannot read its pid".into());
    };
    // Keel signals init's group: it holds init alone (the program has a session of its own).
    if let Err(e) = nix::unistd::setsid() {
        return failed(format!("setsid: {e}"));
    }
    if let Err(e) = confine(&request.cwd, uid, gid) {
        return failed(e.to_string());
    }
    let Some(filter) = filter else {
        return failed("the namespaces' seccomp filter was taken".into());
    };
    let started = FromHolder::Started {
        id,
        starter,
        command: me,
        guard: me,
    };
    tell(to_zygote, &started);
    let status = run(profile, request, stdio, filter);
    tell(to_zygote, &FromHolder::Exited { id, status });
    done(to_starter);
    0
}

/// Runs the program under `filter` and supervises it; once it has exited, ends and reaps every
/// other process of the namespace. Returns the program's wait status (`127` as an exit code
/// when it could not start, with the reason on its standard error).
fn run(
    profile: &Profile,
    request: &HolderRequest,
    stdio: [OwnedFd; 3],
    filter: fallback::Prepared,
) -> i32 {
    let tmp = std::path::Path::new("/tmp");
    let stderr = stdio[2].try_clone().ok();
    let Some(mut command) = request_command(profile, request, stdio, tmp) else {
        return 127 << 8;
    };
    own_session(&mut command, Some(filter));
    let child = command.spawn();
    // The command's descriptors are the program's alone now.
    drop(command);
    let child = match child {
        Ok(child) => child,
        Err(e) => {
            let program = request.argv.first().map_or("", String::as_str);
            if let Some(stderr) = stderr {
                let _ = writeln!(
                    std::fs::File::from(stderr),
                    "keel sandbox: cannot run {program}: {e}"
                );
            }
            return 127 << 8;
        }
    };
    drop(stderr);
    let Ok(pid) = i32::try_from(child.id()) else {
        return Signal::SIGKILL as i32;
    };
    let signals = block_signals();
    // `kill(-1, sig)` from init reaches every other process of the namespace.
    let ending = supervise(Pid::from_raw(pid), &signals, |signal| {
        let _ = kill(Pid::from_raw(-1), signal);
    });
    crate::init::empty_namespace();
    match ending {
        Ending::Code(code) => (code & 0xff) << 8,
        Ending::Signal(signal) => signal as i32,
    }
}

/// Init's part of the confinement: the namespace's `/proc` over the host's, then every
/// capability dropped (and the mounts locked), in the command's working directory.
fn confine(cwd: &std::path::Path, uid: u32, gid: u32) -> crate::error::Result<()> {
    crate::init::mount_proc(std::path::Path::new("/proc"))?;
    crate::init::drop_privileges(cwd, uid, gid)
}
