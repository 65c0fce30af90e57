//! Ending what a command leaves behind: the zygote finds a starter's descendants in `/proc`
//! and kills them until none is left.

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

/// Kills what `living` lists (`None`: nothing is left to watch) until it lists nothing or
/// [`SWEEP_LIMIT`] has passed; whether nothing is left.
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
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
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
