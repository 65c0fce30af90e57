//! What benchmarks and resource tests read of the machine and of a process, from `/proc`.
#![expect(
    clippy::disallowed_methods,
    reason = "dev-only: reads /proc to report load and memory; not Keel's file access"
)]

/// The 1, 5 and 15 minute load averages (`"0.83 1.85 4.49"`), or `"unknown"`.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".into())
}

/// A `/proc/PID/status` field given in KiB (`VmRSS`, `VmHWM`, `RssAnon`, ...).
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The whole machine's CPU time so far, from the first line of `/proc/stat`: how busy the
/// machine was during a benchmark, and how much time the hypervisor took from it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MachineCpu {
    /// Time the CPUs spent running anything: user, nice, system, irq and softirq.
    pub busy: std::time::Duration,
    /// Time the hypervisor ran something else while this machine's CPUs wanted to run.
    pub steal: std::time::Duration,
}

impl MachineCpu {
    /// The counters now (zero where `/proc/stat` cannot be read).
    pub fn now() -> Self {
        let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let ticks: Vec<u64> = text
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("cpu "))
            .map(|rest| {
                rest.split_whitespace()
                    .filter_map(|field| field.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        let at = |index: usize| ticks.get(index).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal; USER_HZ is 100 on Linux.
        let millis = |count: u64| std::time::Duration::from_millis(count * 10);
        MachineCpu {
            busy: millis(at(0) + at(1) + at(2) + at(5) + at(6)),
            steal: millis(at(7)),
        }
    }

    /// What was used between `earlier` and `self`.
    pub fn since(self, earlier: MachineCpu) -> MachineCpu {
        MachineCpu {
            busy: self.busy.saturating_sub(earlier.busy),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }
}

/// CPU time (user + system) process `pid` has used so far, all its threads; zero once it is
/// gone. `/proc/PID/stat` counts in 10 ms ticks, so compare long stretches.
pub fn cpu_time(pid: u32) -> std::time::Duration {
    stat_ticks(pid, 10)
}

/// CPU time (user + system) of the children `pid` has reaped so far (and of theirs): the
/// commands it ran, with their sandbox helpers.
pub fn children_cpu_time(pid: u32) -> std::time::Duration {
    stat_ticks(pid, 12)
}

/// The sum of the two tick counters at `field` and `field + 1` of `/proc/PID/stat`, counting
/// from the field after the state.
fn stat_ticks(pid: u32, field: usize) -> std::time::Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    ticks_at(&stat, field)
}

/// [`stat_ticks`] of the text of a `/proc/PID/stat`.
fn ticks_at(stat: &str, field: usize) -> std::time::Duration {
    // Each field keeps its position: `tpgid` is -1 without a controlling terminal, and a
    // field that does not parse as a count must not shift the ones after it.
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .skip(1)
                .map(|f| f.parse().unwrap_or(0))
                .collect()
        })
        .unwrap_or_default();
    // After the state: ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
    // stime cutime cstime. USER_HZ is 100 on Linux.
    let ticks =
        fields.get(field).copied().unwrap_or(0) + fields.get(field + 1).copied().unwrap_or(0);
    std::time::Duration::from_millis(ticks * 10)
}

/// A counter of `/proc/vmstat` (`pgmajfault`, `pgscan_direct`, ...), or 0.
pub fn vmstat(field: &str) -> u64 {
    std::fs::read_to_string("/proc/vmstat")
        .unwrap_or_default()
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(' ')?;
            (name == field).then(|| value.trim().parse().ok()).flatten()
        })
        .unwrap_or(0)
}

/// How late a thread that only sleeps woke up while a benchmark ran: a thread of the benchmark's
/// process that asks for 2 ms naps (500 wake-ups a second, about 0.2 s of CPU a minute) and
/// records each wake-up's lateness. Busy cores make it a few milliseconds late; a pause of the
/// whole machine (the hypervisor, the host's memory) makes it late by the length of the pause. Turns that were slow in such a pause are slow
/// because nothing on the machine ran, whatever the code under test does.
#[derive(Debug)]
pub struct StallProbe {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Stalls>,
}

/// What a [`StallProbe`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stalls {
    /// Naps taken.
    pub naps: u64,
    /// The latest wake-up.
    pub worst: std::time::Duration,
    /// Wake-ups later than [`Stalls::LONG`].
    pub long: u64,
    /// Their lateness, summed.
    pub long_total: std::time::Duration,
}

impl Stalls {
    /// A wake-up this late is a pause of the machine, not a busy core: on two busy cores the
    /// probe is at most about 15 ms late.
    pub const LONG: std::time::Duration = std::time::Duration::from_millis(20);
}

impl StallProbe {
    /// Starts the probe's thread.
    pub fn start() -> std::io::Result<StallProbe> {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("stall-probe".into())
            .spawn(move || {
                let nap = std::time::Duration::from_millis(2);
                let mut seen = Stalls::default();
                while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                    let asked = std::time::Instant::now();
                    std::thread::sleep(nap);
                    let late = asked.elapsed().saturating_sub(nap);
                    seen.naps += 1;
                    seen.worst = seen.worst.max(late);
                    if late > Stalls::LONG {
                        seen.long += 1;
                        seen.long_total += late;
                    }
                }
                seen
            })?;
        Ok(StallProbe { stop, thread })
    }

    /// Stops the probe and says what it saw.
    pub fn stop(self) -> Stalls {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// Whether a live (not zombie) process has `arg` among its arguments. Commands run in their own
/// PID namespace, so the pids they print are not the test's: tests and benchmarks mark their
/// processes with a unique argument instead (`sleep 600.0401`) and look for it here.
pub fn running_with(arg: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            return false;
        };
        cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes())
            && std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
            })
    })
}

#[cfg(test)]
mod tests {
    use super::ticks_at;
    use std::time::Duration;

    #[test]
    fn cpu_ticks_are_read_at_their_place_without_a_terminal() {
        // A process without a controlling terminal: tpgid is -1. utime 7, stime 5, cutime 30,
        // cstime 20.
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194304 100 0 0 0 7 5 30 20 20 0 3 0";
        assert_eq!(ticks_at(stat, 10), Duration::from_millis(120));
        assert_eq!(ticks_at(stat, 12), Duration::from_millis(500));
    }
}
