//! Ending what a command leaves behind: the zygote finds a starter's descendants in `/proc`
//! and kills them until none is left. Each process found is stopped first with its whole tree
//! ([`reaper::freeze`], the per-command reaper's), then all of it killed: killing one look's
//! processes at a time ends a chain of processes (each the parent of the next, each in a session
//! of its own) one level per look, and a chain 2,500 deep outlived the two seconds.

#![expect(
    clippy::disallowed_methods,
    reason = "the helper is the layer that confines processes: the zygote reads /proc to find what a \
              command left, outside Keel's runtime"
)]

use super::*;

/// How long the zygote keeps killing what a command left before it gives up (and does not
/// write `empty`).
pub(super) const SWEEP_LIMIT: Duration = Duration::from_secs(2);

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
pub(super) fn alive(pid: Pid) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')').is_some_and(|(_, rest)| {
            let state = rest.trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        })
    })
}

/// Kills every descendant of `starter` (the starter reaps them; what they leave reparents to
/// it) until it has no child left; whether it has none.
pub(super) fn sweep(starter: Pid) -> bool {
    // Unreadable: the starter is gone; it ends only once it has no child left, and a starter
    // killed earlier left its orphans to the zygote (`Zygote::kill_orphans`).
    kill_until_none(|| children(starter.as_raw()))
}

/// Stops process `pid` and every descendant of it until no new one appears, then kills them
/// all (a stopped process dies of `SIGKILL`).
fn kill_tree(pid: i32) {
    let _ = kill(Pid::from_raw(pid), Signal::SIGSTOP);
    for descendant in reaper::freeze(pid) {
        let _ = kill(Pid::from_raw(descendant), Signal::SIGKILL);
    }
    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
}

/// Kills what `living` lists, each with its whole tree (`None`: nothing is left to watch),
/// until it lists nothing or [`SWEEP_LIMIT`] has passed; whether nothing is left.
pub(super) fn kill_until_none(mut living: impl FnMut() -> Option<Vec<i32>>) -> bool {
    let until = Instant::now() + SWEEP_LIMIT;
    loop {
        let Some(processes) = living() else {
            return true;
        };
        if processes.is_empty() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        for pid in processes {
            kill_tree(pid);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Kills every descendant of this process (a subreaper: all of them end up its children) and
/// reaps them; whether none is left (only `waitpid` says so: the list in `/proc` may lag).
pub(super) fn kill_descendants_of_self() -> bool {
    let me = getpid().as_raw();
    let until = Instant::now() + SWEEP_LIMIT;
    loop {
        if reaper::reap_ended() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        for pid in reaper::freeze(me) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
