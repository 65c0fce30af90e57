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
