//! Benchmarks of the locked tools through the full tool path: schema check, runtime (scope
//! check on canonical paths), diff, atomic write. Run with
//! `cargo bench -p keel-core --bench tools`; each section prints median and p95 wall times.
//!
//! - [`bench_edit`]: `edit` of a 100,000-line file (budget: median under 20 ms).

#![expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![expect(
    clippy::disallowed_methods,
    reason = "the benchmark writes its fixture files directly"
)]
#![expect(
    clippy::disallowed_types,
    reason = "the benchmark makes its fixture directory directly"
)]

use keel_testkit::measure::load_average;
use std::error::Error;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use keel_core::capability::RequirementSet;
use keel_core::runtime::{Runtime, RuntimeConfig};
use keel_core::tool::{DynTool, Limits, ProgressSink, SessionState, ToolContext, Typed};
use keel_core::tools::edit::EditTool;
use keel_core::tools::read::ReadTool;

type BenchResult = Result<(), Box<dyn Error>>;

fn main() -> BenchResult {
    bench_edit()
}

// ---- edit ----

const EDIT_LINES: usize = 100_000;
const EDIT_WARMUP: usize = 5;
const EDIT_RUNS: usize = 100;
const EDIT_BUDGET: Duration = Duration::from_millis(20);

/// `edit` of a 100,000-line file (about 5 MB of code-like lines), each call through
/// `DynTool::execute` with JSON arguments: schema validation, path resolution and scope check,
/// read-before-write guard, UTF-8 decoding, replacement, keel-diff unified diff, the `Diff`
/// artifact's full texts, and the atomic write (temp file, fsync, rename).
fn bench_edit() -> BenchResult {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    println!(
        "## edit: {EDIT_LINES}-line file, full tool path ({EDIT_RUNS} runs after {EDIT_WARMUP} warm-up; load average {})",
        load_average()
    );
    println!("| case | file | median | p95 | min | max | CPU per call |");
    println!("|---|---|---|---|---|---|---|");
    let cases: [(&str, &str, &[&str; 2], bool); 4] = [
        (
            "one line in the middle",
            "\n",
            &["value_050000 =", "renamed_050000 ="],
            false,
        ),
        (
            "one line near the end",
            "\n",
            &["value_099990 =", "renamed_099990 ="],
            false,
        ),
        (
            "one line, CRLF file",
            "\r\n",
            &["value_050000 =", "renamed_050000 ="],
            false,
        ),
        (
            "replace_all, 1,000 lines",
            "\n",
            &["compute(", "evaluate("],
            true,
        ),
    ];
    // One untimed case first: the process's allocator grows to the state a long-running daemon
    // is in (the first case measured otherwise pays several ms of page faults per call).
    let cold = runtime.block_on(edit_case("\n", cases[0].2[0], cases[0].2[1], false))?;
    let mut worst_median = Duration::ZERO;
    for (name, ending, [a, b], all) in cases {
        let stats = runtime.block_on(edit_case(ending, a, b, all))?;
        println!(
            "| {name} | {:.1} MB | {} | {} | {} | {} | {} |",
            stats.file_bytes as f64 / 1e6,
            ms(stats.median),
            ms(stats.p95),
            ms(stats.min),
            ms(stats.max),
            ms(stats.cpu_per_call)
        );
        if !all {
            worst_median = worst_median.max(stats.median);
        }
    }
    println!(
        "(untimed first pass, fresh process, {}: median {}, CPU per call {})",
        cases[0].0,
        ms(cold.median),
        ms(cold.cpu_per_call)
    );
    let verdict = if worst_median < EDIT_BUDGET {
        "within"
    } else {
        "OVER"
    };
    println!(
        "single-occurrence edits: worst median {} — {verdict} the {} budget",
        ms(worst_median),
        ms(EDIT_BUDGET)
    );
    Ok(())
}

struct Stats {
    file_bytes: usize,
    /// CPU time (all threads, user and system) per call: the work, apart from waiting for the
    /// disk or for a CPU on a busy machine.
    cpu_per_call: Duration,
    median: Duration,
    p95: Duration,
    min: Duration,
    max: Duration,
}

async fn edit_case(
    ending: &str,
    a: &str,
    b: &str,
    replace_all: bool,
) -> Result<Stats, Box<dyn Error>> {
    let dir = tempfile::Builder::new()
        .prefix("keel-bench-edit")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))?;
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws)?;
    let content = code_like_file(ending);
    let file = ws.join("big.rs");
    std::fs::write(&file, &content)?;
    let ctx = context(&ws, &dir.path().join("scratch"))?;
    let read = Typed::wrap(ReadTool)?;
    let edit = Typed::wrap(EditTool)?;
    run(&read, json!({ "file_path": "big.rs", "limit": 10 }), &ctx).await?;

    let mut times = Vec::with_capacity(EDIT_RUNS);
    let mut cpu = Duration::ZERO;
    for i in 0..EDIT_WARMUP + EDIT_RUNS {
        // Alternate so every call changes the file and the next one finds its old_string.
        let (old, new) = if i % 2 == 0 { (a, b) } else { (b, a) };
        let args = json!({
            "file_path": "big.rs",
            "old_string": old,
            "new_string": new,
            "replace_all": replace_all,
        });
        let cpu_start = process_cpu_time();
        let start = Instant::now();
        run(&edit, args, &ctx).await?;
        let elapsed = start.elapsed();
        if i >= EDIT_WARMUP {
            times.push(elapsed);
            cpu += process_cpu_time().saturating_sub(cpu_start);
        }
    }
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    Ok(Stats {
        file_bytes: content.len(),
        cpu_per_call: cpu / EDIT_RUNS as u32,
        median: at(0.5),
        p95: at(0.95),
        min: at(0.0),
        max: at(1.0),
    })
}

/// 100,000 lines of Rust-like code; every 100th line calls `compute(` (1,000 in all).
fn code_like_file(ending: &str) -> String {
    let mut out = String::with_capacity(EDIT_LINES * 52);
    for i in 0..EDIT_LINES {
        let line = if i % 100 == 0 {
            format!("    let value_{i:06} = compute({i}, \"item {i}\");")
        } else {
            format!("    let value_{i:06} = table.get({i}).copied();")
        };
        out.push_str(&line);
        out.push_str(ending);
    }
    out
}

fn context(ws: &Path, scratch: &Path) -> Result<ToolContext, Box<dyn Error>> {
    let runtime = Runtime::new(RuntimeConfig {
        roots: vec![ws.to_path_buf()],
        requirements: RequirementSet::fs_read_write(
            &["{workspace}/**", "{session}/**"],
            &["{workspace}/**"],
        ),
        scratch_dir: scratch.to_path_buf(),
        ..RuntimeConfig::default()
    })?;
    Ok(ToolContext {
        runtime,
        session: Arc::new(SessionState::new(
            "bench",
            scratch.to_path_buf(),
            Limits::default(),
            false,
        )),
        call_id: "bench".into(),
        cancel: CancellationToken::new(),
        progress: ProgressSink::default(),
    })
}

async fn run(tool: &Arc<dyn DynTool>, args: Value, ctx: &ToolContext) -> BenchResult {
    tool.execute(args, ctx).await?;
    Ok(())
}

/// CPU time consumed so far by every thread of this process (`/proc/self/task/*/schedstat`,
/// nanoseconds on a CPU). Zero where /proc is missing.
fn process_cpu_time() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let nanos: u64 = tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}
