//! The sandbox's cost per command: the real `keel` binary as the helper, against spawning the
//! program directly.
//!
//! Two measures per run:
//!
//! - **spawn → program start** (the measure): the program is this very benchmark binary,
//!   re-run with `KEEL_BENCH_STAMP=1`, which prints `CLOCK_MONOTONIC` first thing in `main` and
//!   exits. The benchmark reads the same clock just before spawning (the helper does not unshare
//!   a time namespace, so both readings are on one clock). The direct spawn of the same binary
//!   is the baseline; the difference is everything the helper adds before the program runs: its
//!   own exec, reading the profile, the namespaces and mounts (or Landlock and seccomp), and the
//!   program's spawn from inside the sandbox. That is an upper bound of "from the helper's start
//!   to the program's start" (it also counts the helper's exec).
//! - **spawn → exit**: the same runs, until the helper has exited (the tear-down included).
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    reason = "a benchmark reports on stdout and sets up its own fixtures"
)]

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use keel_core::runtime::sandbox::{DEFAULT_HOME_READABLE, Mechanism, Profile};
use nix::time::{ClockId, clock_gettime};

const WARMUP: usize = 5;
const RUNS: usize = 100;
const STAMP: &str = "KEEL_BENCH_STAMP";

fn now_ns() -> i128 {
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC).unwrap();
    i128::from(t.tv_sec()) * 1_000_000_000 + i128::from(t.tv_nsec())
}

/// Median, p95, min in milliseconds.
fn stats(mut samples: Vec<f64>) -> (f64, f64, f64) {
    samples.sort_by(f64::total_cmp);
    (
        samples[samples.len() / 2],
        samples[(samples.len() * 95 / 100).min(samples.len() - 1)],
        samples[0],
    )
}

/// Spawn → program start and spawn → exit, in milliseconds, for each timed run.
fn time(mut command: impl FnMut() -> Command) -> (Vec<f64>, Vec<f64>) {
    let (mut starts, mut exits) = (Vec::new(), Vec::new());
    for i in 0..WARMUP + RUNS {
        let mut cmd = command();
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .env(STAMP, "1");
        let t0 = now_ns();
        let mut child = cmd.spawn().unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let status = child.wait().unwrap();
        let t_exit = now_ns();
        assert!(status.success(), "{status:?}: {out}");
        let started: i128 = out.trim().parse().unwrap();
        if i >= WARMUP {
            starts.push((started - t0) as f64 / 1e6);
            exits.push((t_exit - t0) as f64 / 1e6);
        }
    }
    (starts, exits)
}

fn profile(base: &Path, mechanism: Mechanism, program_dir: &Path) -> PathBuf {
    let ws = base.join("ws");
    let home = base.join("home");
    let scratch = base.join(format!("scratch-{mechanism:?}"));
    for dir in [&ws, &home.join(".cargo"), &scratch.join("tmp")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    let profile = Profile {
        nonce: "bench".into(),
        status_file: scratch.join("status"),
        required: true,
        mechanism,
        cwd: ws.clone(),
        writable: vec![ws.clone()],
        // The stamping program (this benchmark's binary).
        readable: vec![program_dir.to_path_buf()],
        protected: vec![ws.join(".git/hooks")],
        pinned: vec![ws.join(".git")],
        home: Some(home.clone()),
        home_readable: DEFAULT_HOME_READABLE.iter().map(|r| home.join(r)).collect(),
        home_writable: Vec::new(),
        tmp_dir: scratch.join("tmp"),
        staging_dir: scratch.join("root"),
        network: false,
    };
    let path = scratch.join("profile.json");
    std::fs::write(&path, serde_json::to_string(&profile).unwrap()).unwrap();
    path
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn row(name: &str, samples: Vec<f64>, baseline: Option<f64>) -> f64 {
    let (median, p95, min) = stats(samples);
    let cost = baseline
        .map(|b| format!("  (cost: median {:.2} ms)", median - b))
        .unwrap_or_default();
    println!("{name:<44} median {median:>6.2} ms  p95 {p95:>6.2} ms  min {min:>6.2} ms{cost}");
    median
}

fn main() {
    if std::env::var_os(STAMP).is_some() {
        // The program being timed: the clock first, then nothing else.
        let t = now_ns();
        let mut stdout = std::io::stdout();
        let _ = writeln!(stdout, "{t}");
        return;
    }
    let keel = env!("CARGO_BIN_EXE_keel");
    let me = std::env::current_exe().unwrap().canonicalize().unwrap();
    let program_dir = me.parent().unwrap().to_path_buf();
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    println!("sandbox cost per command ({RUNS} runs, load {})", load());
    let (start, exit) = time(|| Command::new(&me));
    let direct_start = row("direct: spawn -> program start", start, None);
    let direct_exit = row("direct: spawn -> exit", exit, None);
    for mechanism in [Mechanism::Namespaces, Mechanism::Landlock] {
        let profile = profile(&base, mechanism, &program_dir);
        let (start, exit) = time(|| {
            let mut cmd = Command::new(keel);
            cmd.args(["sandbox", "run", "--profile"])
                .arg(&profile)
                .arg("--")
                .arg(&me);
            cmd
        });
        row(
            &format!("helper, {mechanism:?}: spawn -> program start"),
            start,
            Some(direct_start),
        );
        row(
            &format!("helper, {mechanism:?}: spawn -> exit"),
            exit,
            Some(direct_exit),
        );
    }
    println!("load after: {}", load());
}
