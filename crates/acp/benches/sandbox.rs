//! The sandbox's cost per command: the real `keel` binary as the helper, from spawning the
//! helper to the program's exit, against spawning the program directly. The program is
//! `/bin/true`, so the difference is the helper's start (exec of `keel`, namespaces and mounts, or
//! Landlock and seccomp) plus its tear-down.
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    reason = "a benchmark reports on stdout and sets up its own fixtures"
)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel_core::runtime::sandbox::{DEFAULT_HOME_READABLE, Mechanism, Profile};

const WARMUP: usize = 5;
const RUNS: usize = 100;

fn stats(mut samples: Vec<Duration>) -> (f64, f64, f64) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (
        ms(samples[samples.len() / 2]),
        ms(samples[(samples.len() * 95 / 100).min(samples.len() - 1)]),
        ms(samples[0]),
    )
}

fn time(mut command: impl FnMut() -> Command) -> Vec<Duration> {
    let mut samples = Vec::new();
    for i in 0..WARMUP + RUNS {
        let mut cmd = command();
        let start = Instant::now();
        let status = cmd.stdin(Stdio::null()).status().unwrap();
        let elapsed = start.elapsed();
        assert!(status.success());
        if i >= WARMUP {
            samples.push(elapsed);
        }
    }
    samples
}

fn profile(base: &Path, mechanism: Mechanism) -> std::path::PathBuf {
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
        readable: Vec::new(),
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

fn main() {
    let keel = env!("CARGO_BIN_EXE_keel");
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    println!("sandbox cost per command ({RUNS} runs, load {})", load());
    let direct = stats(time(|| Command::new("/bin/true")));
    println!(
        "{:<28} median {:>6.2} ms  p95 {:>6.2} ms  min {:>6.2} ms",
        "direct /bin/true", direct.0, direct.1, direct.2
    );
    for mechanism in [Mechanism::Namespaces, Mechanism::Landlock] {
        let profile = profile(&base, mechanism);
        let samples = time(|| {
            let mut cmd = Command::new(keel);
            cmd.args(["sandbox", "run", "--profile"])
                .arg(&profile)
                .args(["--", "/bin/true"]);
            cmd
        });
        let (median, p95, min) = stats(samples);
        println!(
            "{:<28} median {median:>6.2} ms  p95 {p95:>6.2} ms  min {min:>6.2} ms  \
             (cost: median {:.2} ms)",
            format!("helper, {mechanism:?}"),
            median - direct.0
        );
    }
    println!("load after: {}", load());
}
