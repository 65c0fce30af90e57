//! Benchmark: the `grep` and `glob` tools through the full tool path (schema validation, scope
//! checks, parallel walk, sorting, formatting, sidecar writes) against ripgrep and fd on the
//! same corpus with the same flags and thread count.
//!
//! Corpus: `scripts/bench-corpus.sh` (or `KEEL_BENCH_CORPUS=<dir>`). Run:
//! `cargo bench -p keel-core --bench search` (release profile). Each case runs a warm-up, then
//! `KEEL_BENCH_RUNS` (default 15) rounds in which the tool and the reference alternate; the
//! medians are reported with their ratio, the ratio of the fastest runs, and the CPU time
//! (user + system) per run of each side, which the machine's load disturbs less than wall time.
//! The result counts are compared, so both sides are known to do the same work.
//!
//! The last case searches the Rust toolchains (`~/.rustup/toolchains`, about 117,000 files, or
//! `KEEL_BENCH_TOOLCHAINS=<dir>`) with `grep` in `count` mode against `rg -c` on the same
//! pattern, with the permission policy's search gate installed as the engine installs it (every
//! file decided as a read of it would be), and counts the opens and stats of one `grep` call
//! with the runtime's tally: per file searched, ripgrep's cost is one open and no stat.
//! `KEEL_BENCH_TOOLCHAIN_RUNS` (default 5) rounds, `KEEL_BENCH_PATTERN` (default `unsafe fn`). Without `rg` on the PATH the case says so
//! and is skipped (`apt-get install ripgrep`).
#![expect(
    clippy::disallowed_methods,
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark binary: it runs the reference tools and prints a table"
)]

use keel_testkit::measure::{children_cpu_time, cpu_time, load_average};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_core::capability::RequirementSet;
use keel_core::runtime::{Runtime, RuntimeConfig};
use keel_core::tool::{
    DynTool, Limits, ProgressSink, SessionState, ToolContext, ToolOutput, Typed,
};
use keel_core::tools::glob::GlobTool;
use keel_core::tools::grep::GrepTool;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

struct Case {
    name: &'static str,
    tool: &'static str,
    args: Value,
    /// The reference command (run in the corpus directory) and what its output lines count.
    reference: &'static [&'static str],
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "grep literal, files_with_matches",
            tool: "grep",
            args: json!({"pattern": "PhantomData"}),
            reference: &["rg", "-j2", "-l", "PhantomData"],
        },
        Case {
            name: "grep regex, files_with_matches",
            tool: "grep",
            args: json!({"pattern": r"impl<[^>]+> \w+ for"}),
            reference: &["rg", "-j2", "-l", r"impl<[^>]+> \w+ for"],
        },
        Case {
            name: "grep -i literal, count",
            tool: "grep",
            args: json!({"pattern": "needle_", "-i": true, "output_mode": "count"}),
            reference: &["rg", "-j2", "-c", "-i", "needle_"],
        },
        Case {
            name: "grep rare literal, content",
            tool: "grep",
            args: json!({"pattern": "NEEDLE_07_", "output_mode": "content"}),
            reference: &["rg", "-j2", "-n", "--no-heading", "NEEDLE_07_"],
        },
        Case {
            name: "grep literal, type rust",
            tool: "grep",
            args: json!({"pattern": "unsafe", "type": "rust"}),
            reference: &["rg", "-j2", "-l", "-t", "rust", "unsafe"],
        },
        Case {
            name: "glob **/*.rs (many)",
            tool: "glob",
            args: json!({"pattern": "**/*.rs"}),
            reference: &["fdfind", "-j2", "-t", "f", "-g", "*.rs"],
        },
        Case {
            name: "glob **/Cargo.toml (few)",
            tool: "glob",
            args: json!({"pattern": "**/Cargo.toml"}),
            reference: &["fdfind", "-j2", "-t", "f", "-g", "Cargo.toml"],
        },
    ]
}

fn corpus() -> PathBuf {
    if let Ok(dir) = std::env::var("KEEL_BENCH_CORPUS") {
        return PathBuf::from(dir);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.keel-bench/corpus")
}

/// Median and minimum, in milliseconds.
fn summary(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (ms(samples[samples.len() / 2]), ms(samples[0]))
}

/// Runs the reference command; returns the wall time and its stdout.
fn reference_run(corpus: &Path, argv: &[&str]) -> (Duration, String) {
    let start = Instant::now();
    let output = Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(corpus)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {}: {e} (apt-get install ripgrep fd-find)",
                argv[0]
            )
        });
    (
        start.elapsed(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// Runs the tool through `DynTool::execute`; returns the wall time and the output.
async fn tool_run(
    tool: &Arc<dyn DynTool>,
    args: &Value,
    ctx: &ToolContext,
) -> (Duration, ToolOutput) {
    let start = Instant::now();
    let output = tool.execute(args.clone(), ctx).await.expect("tool failed");
    (start.elapsed(), output)
}

/// Result entries (files, or matching lines in content mode) of a tool output: the sidecar's
/// when the output was capped.
fn tool_entries(output: &ToolOutput) -> usize {
    match &output.output_path {
        Some(path) => count_entries(&std::fs::read_to_string(path).unwrap()),
        None => output
            .text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('['))
            .count(),
    }
}

fn count_entries(text: &str) -> usize {
    text.lines().filter(|l| !l.is_empty()).count()
}

/// CPU seconds (user + system) used so far by this process and by its waited-for children.
fn cpu_seconds() -> (f64, f64) {
    let pid = std::process::id();
    (
        cpu_time(pid).as_secs_f64(),
        children_cpu_time(pid).as_secs_f64(),
    )
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if filter.as_deref() == Some("toolchain") {
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        println!("load average before: {}", load_average());
        toolchain(
            &tokio,
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        );
        println!("load average after: {}", load_average());
        return;
    }
    let corpus = corpus();
    let Ok(corpus) = std::fs::canonicalize(&corpus) else {
        println!(
            "no corpus at {}: run scripts/bench-corpus.sh first",
            corpus.display()
        );
        std::process::exit(2);
    };
    let runs: usize = std::env::var("KEEL_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(15);
    let scratch = corpus.join("../scratch");
    let runtime = Runtime::new(RuntimeConfig {
        roots: vec![corpus.clone()],
        requirements: RequirementSet::fs_read(&["{workspace}/**", "{session}/**"]),
        scratch_dir: scratch.clone(),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let session = Arc::new(SessionState::new(
        "bench",
        runtime.scratch_dir().to_path_buf(),
        Limits::default(),
        false,
    ));
    let ctx = ToolContext {
        runtime,
        session,
        call_id: "bench".into(),
        cancel: CancellationToken::new(),
        progress: ProgressSink::default(),
    };
    let grep = Typed::wrap(GrepTool).unwrap();
    let glob = Typed::wrap(GlobTool).unwrap();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    println!("load average before: {}", load_average());
    println!(
        "corpus {} ({}), {runs} runs per case, {threads} CPUs, walker threads = CPUs (reference -j2)",
        corpus.display(),
        std::fs::read_to_string(corpus.join(".corpus-ready"))
            .unwrap_or_default()
            .trim()
    );
    println!(
        "{:<34} {:>11} {:>11} {:>6} {:>6} {:>9} {:>9} {:>6} {:>9}",
        "case",
        "keel median",
        "ref median",
        "ratio",
        "min",
        "keel cpu",
        "ref cpu",
        "ratio",
        "results"
    );
    for case in cases() {
        if filter.as_deref().is_some_and(|f| !case.name.contains(f)) {
            continue;
        }
        let tool = if case.tool == "grep" { &grep } else { &glob };
        // Warm-up (page cache, first-run allocations), and the result counts.
        let ours = tool_entries(&tokio.block_on(tool_run(tool, &case.args, &ctx)).1);
        let theirs = count_entries(&reference_run(&corpus, case.reference).1);
        let mut keel = Vec::with_capacity(runs);
        let mut reference = Vec::with_capacity(runs);
        let (self_before, children_before) = cpu_seconds();
        for _ in 0..runs {
            keel.push(tokio.block_on(tool_run(tool, &case.args, &ctx)).0);
            reference.push(reference_run(&corpus, case.reference).0);
        }
        let (self_after, children_after) = cpu_seconds();
        let keel_cpu = (self_after - self_before) * 1e3 / runs as f64;
        let reference_cpu = (children_after - children_before) * 1e3 / runs as f64;
        let ((keel, keel_min), (reference, reference_min)) = (summary(keel), summary(reference));
        let same = if ours == theirs {
            format!("{ours}")
        } else {
            format!("{ours}≠{theirs}")
        };
        println!(
            "{:<34} {:>8.1} ms {:>8.1} ms {:>5.2}x {:>5.2}x {:>6.0} ms {:>6.0} ms {:>5.2}x {:>9}",
            case.name,
            keel,
            reference,
            keel / reference,
            keel_min / reference_min,
            keel_cpu,
            reference_cpu,
            keel_cpu / reference_cpu,
            same
        );
    }
    if filter.as_deref().is_none_or(|f| "toolchain".contains(f)) {
        toolchain(&tokio, threads);
    }
    println!("load average after: {}", load_average());
    let _ = std::fs::remove_dir_all(&scratch);
}

/// `grep` over the toolchain tree against `rg -c`, gated as in a session, and its opens and
/// stats per file.
fn toolchain(tokio: &tokio::runtime::Runtime, threads: usize) {
    use keel_core::policy::{Mode, Policy, PolicyLayers, PolicySearchGate, Trust};
    use keel_core::runtime::tally::{self, Tally};
    use keel_core::tool::Tool as _;

    let pattern = std::env::var("KEEL_BENCH_PATTERN").unwrap_or_else(|_| "unsafe fn".to_owned());
    let pattern = pattern.as_str();
    let root = std::env::var("KEEL_BENCH_TOOLCHAINS").map_or_else(
        |_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".rustup/toolchains"),
        PathBuf::from,
    );
    let Ok(root) = std::fs::canonicalize(&root) else {
        println!("toolchain case: no tree at {}; skipped", root.display());
        return;
    };
    let reference = [
        "rg".to_owned(),
        format!("-j{threads}"),
        "-c".to_owned(),
        pattern.to_owned(),
    ];
    let reference: Vec<&str> = reference.iter().map(String::as_str).collect();
    if Command::new("rg").arg("--version").output().is_err() {
        println!(
            "toolchain case: ripgrep (rg) is not installed, so there is nothing to compare \
             with; skipped (apt-get install ripgrep)"
        );
        return;
    }
    let runs: usize = std::env::var("KEEL_BENCH_TOOLCHAIN_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let scratch = std::env::temp_dir().join(format!("keel-bench-toolchain-{}", std::process::id()));
    let runtime = Runtime::new(RuntimeConfig {
        roots: vec![root.clone()],
        requirements: RequirementSet::fs_read(&["{workspace}/**", "{session}/**"]),
        scratch_dir: scratch.clone(),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let layers = PolicyLayers::load(&root, None, Trust::Trusted)
        .unwrap()
        .with_home(std::env::var("HOME").ok().map(PathBuf::from));
    let policy = Arc::new(Policy::new(layers, Mode::default(), false).unwrap());
    let gate = Arc::new(PolicySearchGate::new(policy, GrepTool.spec()));
    let ctx = ToolContext {
        runtime: runtime.with_search_gate(gate),
        session: Arc::new(SessionState::new(
            "bench",
            scratch.clone(),
            Limits::default(),
            false,
        )),
        call_id: "bench".into(),
        cancel: CancellationToken::new(),
        progress: ProgressSink::default(),
    };
    let grep = Typed::wrap(GrepTool).unwrap();
    let args = json!({"pattern": pattern, "output_mode": "count"});
    let searched = count_entries(&reference_run(&root, &["rg", "--files"]).1);
    // Warm-up, result counts, and the tally of one call.
    let tally = Tally::new();
    let output = tokio.block_on(tally::scope(tally.clone(), tool_run(&grep, &args, &ctx)));
    let ours = tool_entries(&output.1);
    let theirs = count_entries(&reference_run(&root, &reference).1);
    let counts = tally.counts();
    let mut keel = Vec::with_capacity(runs);
    let mut rg = Vec::with_capacity(runs);
    let (self_before, children_before) = cpu_seconds();
    for _ in 0..runs {
        keel.push(tokio.block_on(tool_run(&grep, &args, &ctx)).0);
        rg.push(reference_run(&root, &reference).0);
    }
    let (self_after, children_after) = cpu_seconds();
    let keel_cpu = (self_after - self_before) * 1e3 / runs as f64;
    let rg_cpu = (children_after - children_before) * 1e3 / runs as f64;
    let each = |runs: &[Duration]| {
        runs.iter()
            .map(|d| format!("{:.0}", d.as_secs_f64() * 1e3))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!("  runs (ms): grep {} | rg {}", each(&keel), each(&rg));
    let ((keel, keel_min), (rg, rg_min)) = (summary(keel), summary(rg));
    println!();
    println!(
        "toolchain tree {} ({searched} files rg searches), pattern `{pattern}`, {runs} runs, \
         search gate installed",
        root.display()
    );
    println!(
        "  grep count vs `{}`: median {keel:.0} ms vs {rg:.0} ms ({:.2}x), fastest {:.2}x, \
         cpu {keel_cpu:.0} ms vs {rg_cpu:.0} ms ({:.2}x), files with matches {}",
        reference.join(" "),
        keel / rg,
        keel_min / rg_min,
        keel_cpu / rg_cpu,
        if ours == theirs {
            format!("{ours}")
        } else {
            format!("{ours}≠{theirs}")
        }
    );
    println!(
        "  one grep call: {} opens, {} stats for {searched} files ({:.3} opens and {:.3} stats \
         per file)",
        counts.open,
        counts.stat,
        counts.open as f64 / searched as f64,
        counts.stat as f64 / searched as f64
    );
    let _ = std::fs::remove_dir_all(&scratch);
}
