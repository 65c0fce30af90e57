//! The fallback's supervisor: with no PID namespace to end a command's processes, the helper
//! forks a reaper (a child subreaper in a session of its own) that runs the program confined by
//! Landlock + seccomp, forwards signals to its group, and once it has exited kills every
//! descendant until none is left, then writes `empty` to the status file (Keel's proof).

#![expect(
    clippy::disallowed_methods,
    reason = "the helper is the layer that confines processes: the reaper reads /proc to find \
              what the program left behind, outside Keel's runtime"
)]

use std::ffi::OsString;
use std::io::Write as _;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, getpid};

use crate::error::Error;
use crate::helper::{
    Ending, block_signals, fail, finish_like, own_session, program_command, proxy_env, signalled,
    supervise, write_guard, write_status,
};
use crate::profile::Profile;
use crate::{EXIT_HELPER_FAILED, fallback};

/// What every command under the fallback is told is not enforced.
pub(crate) const FALLBACK_NOTE: &str = "Landlock fallback: .git/hooks, .git/config, .keel and \
     the other files other programs run are writable while the command runs (Keel puts them \
     back after it); Unix sockets by path are reachable; no process's /proc (the command's own \
     included)";

/// Stage 1 under the fallback (or with no confinement at all): forks the reaper, which runs the
/// program, and forwards signals to it, as stage 1 does to the namespace's init.
pub(crate) fn start(
    profile: &Profile,
    program: &[OsString],
    mut status_file: std::fs::File,
    confinement: Option<fallback::Prepared>,
    notes: Vec<String>,
) -> i32 {
    let helper = getpid();
    // SAFETY: `fork` is sound in a single-threaded process, and the helper is one: its `main`
    // runs before any thread is started (see `main`), and nothing here starts one.
    #[expect(unsafe_code, reason = "fork in a single-threaded process (see SAFETY)")]
    let forked = unsafe { nix::unistd::fork() };
    let reaper_pid = match forked {
        Ok(ForkResult::Child) => std::process::exit(reaper(
            profile,
            program,
            &mut status_file,
            confinement,
            notes,
            helper,
        )),
        Ok(ForkResult::Parent { child }) => child,
        Err(e) => return fail(&Error::sys("starting the reaper", e)),
    };
    write_guard(&mut status_file, reaper_pid);
    let _ = nix::sys::prctl::set_dumpable(false);
    let signals = block_signals();
    let ending = supervise(reaper_pid, &signals, |signal| {
        let _ = kill(reaper_pid, signal);
    });
    match signalled(&mut status_file).1 {
        Some(signal) => finish_like(Ending::Signal(signal)),
        None => ending.code(),
    }
}

/// The reaper (no PID namespace): in a session of its own (the group kills Keel and the editor
/// send to the helper do not reach it; the helper forwards them), not dumpable and outside the
/// program's Landlock domain (the program can neither trace nor, from Landlock ABI 6, signal
/// it), a child subreaper (everything the program leaves behind, daemons that left its session
/// included, becomes its child). It runs the program confined, forwards signals to the
/// program's group, kills the program when the helper goes (a `SIGKILL` from the editor's
/// `terminal/kill` included: its parent-death signal), and once the program has exited kills
/// every descendant until none is left, then writes `empty`.
fn reaper(
    profile: &Profile,
    program: &[OsString],
    status_file: &mut std::fs::File,
    confinement: Option<fallback::Prepared>,
    mut notes: Vec<String>,
    helper: Pid,
) -> i32 {
    let _ = nix::unistd::setsid();
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGTERM);
    let _ = nix::sys::prctl::set_dumpable(false);
    if nix::unistd::getppid() != helper {
        // The helper is already gone: run nothing.
        return EXIT_HELPER_FAILED;
    }
    let Some((first, rest)) = program.split_first() else {
        return EXIT_HELPER_FAILED;
    };
    let mechanism = if confinement.is_some() {
        "landlock"
    } else {
        "none"
    };
    let proxy_port = confinement.as_ref().and_then(|c| c.proxy_port);
    if let Some(confinement) = &confinement {
        notes.extend(confinement.notes.iter().cloned());
        notes.push(FALLBACK_NOTE.into());
    }
    let mut command = program_command(profile, first, rest);
    command
        .env("TMPDIR", &profile.tmp_dir)
        .current_dir(&profile.cwd);
    if let Some(port) = proxy_port {
        proxy_env(&mut command, port);
    }
    own_session(&mut command, confinement);
    let child = match command.spawn() {
        Ok(child) => child,
        Err(source) => {
            fail(&Error::Exec {
                program: first.to_string_lossy().into_owned(),
                source,
            });
            return 127;
        }
    };
    // Confined (the confinement is applied before `exec`, so a started program is a confined
    // one): only now say so.
    if let Err(error) = write_status(status_file, profile, mechanism, notes) {
        fail(&error);
    }
    let Ok(pid) = i32::try_from(child.id()) else {
        return EXIT_HELPER_FAILED;
    };
    let main = Pid::from_raw(pid);
    let signals = block_signals();
    let ending = supervise(main, &signals, |signal| {
        // The helper gone (the parent-death signal, or any signal after it): end the program
        // now; the sweep below ends the rest.
        let orphaned = nix::unistd::getppid() != helper;
        let _ = nix::sys::signal::killpg(main, if orphaned { Signal::SIGKILL } else { signal });
        if orphaned {
            let _ = kill(main, Signal::SIGKILL);
        }
    });
    if kill_descendants() {
        let _ = status_file.write_all(b"\nempty\n");
    }
    if let Ending::Signal(signal) = ending {
        let _ = status_file.write_all(format!("\nsignal {}\n", signal as i32).as_bytes());
    }
    ending.code()
}

/// Reaps every child that has ended, without waiting; whether none is left at all (`ECHILD`).
pub(crate) fn reap_ended() -> bool {
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Err(Errno::ECHILD) => return true,
            Ok(WaitStatus::StillAlive) | Err(_) => return false,
            Ok(_) => {}
        }
    }
}

/// Kills every descendant of this process (orphans included, this being a subreaper) until none
/// is left; returns whether none is (`waitpid` says so).
///
/// Killing the children found in one look is not enough: a chain of processes that each fork
/// their successor before they exit (in a session of their own, so no group kill reaches them)
/// has only its head among the subreaper's children at any time, and grows faster than a kill
/// per look removes it. So every descendant found is stopped first (`SIGSTOP`: a stopped
/// process forks no more, and a fork under way when the signal comes is undone), the whole tree
/// looked at again until a look finds none that was not stopped, and only then are they all
/// killed.
fn kill_descendants() -> bool {
    let me = getpid().as_raw();
    for _ in 0..1000 {
        // No child at all (the usual case): nothing to look for.
        if reap_ended() {
            return true;
        }
        for pid in freeze(me) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    false
}

/// Stops every descendant of process `root` until a look at the whole tree finds none it had
/// not stopped yet; returns them all (to be killed: a stopped process dies of `SIGKILL`).
pub(crate) fn freeze(root: i32) -> Vec<i32> {
    let mut stopped: std::collections::HashSet<i32> = std::collections::HashSet::new();
    for _ in 0..10_000 {
        let mut fresh = false;
        // Every one again, not only the new ones: one not found yet may have continued
        // (`SIGCONT`) the others.
        for pid in descendants(root) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGSTOP);
            fresh |= stopped.insert(pid);
        }
        if !fresh {
            break;
        }
    }
    stopped.into_iter().collect()
}

/// Every descendant of process `root`: the kernel's lists of children, thread by thread, level
/// by level; else (or when the root's list came back empty, which it may while children are
/// being created) a scan of `/proc` by parent.
fn descendants(root: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let mut todo = task_children(root)
        .filter(|children| !children.is_empty())
        .unwrap_or_else(|| children_by_scan(root));
    let mut seen: std::collections::HashSet<i32> = std::collections::HashSet::new();
    while let Some(pid) = todo.pop() {
        if !seen.insert(pid) || seen.len() > 100_000 {
            continue;
        }
        found.push(pid);
        match task_children(pid) {
            Some(children) => todo.extend(children),
            None => todo.extend(children_by_scan(pid)),
        }
    }
    found
}

/// The children of every thread of `pid` (`/proc/PID/task/TID/children`); `None` when the
/// kernel has no such list.
fn task_children(pid: i32) -> Option<Vec<i32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut children = Vec::new();
    let mut any = false;
    for task in tasks.flatten() {
        let Ok(list) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        any = true;
        children.extend(
            list.split_whitespace()
                .filter_map(|pid| pid.parse::<i32>().ok()),
        );
    }
    // A process gone meanwhile has no task left: nothing below it either.
    any.then_some(children).or_else(|| {
        std::fs::metadata(format!("/proc/{pid}"))
            .is_err()
            .then(Vec::new)
    })
}

/// The processes whose parent is `parent`, by a scan of `/proc`.
fn children_by_scan(parent: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let rest = stat.rsplit_once(')')?.1;
                    rest.split_whitespace().nth(1)?.parse::<i32>().ok()
                })
                == Some(parent)
        })
        .collect()
}
