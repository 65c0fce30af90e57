//! Benchmarks for keel-diff: `cargo bench -p keel-diff`.
//!
//! The target: a 100,000-line file with 1,000 scattered edits goes from texts to the
//! model's unified text in under 10 ms. Inputs are generated in code from a fixed LCG seed,
//! each case is warmed up, then timed over many runs with `Instant`; the median and p95 are
//! printed as a Markdown table.
#![expect(
    clippy::print_stdout,
    reason = "a benchmark's whole job is to print its measurements"
)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use keel_diff::{DiffError, FileDiff, TerminalStyle};

const WARM_UP: usize = 5;
/// Timed runs per case; the pathological case, ~200 ms a run, gets fewer.
const RUNS: usize = 200;
const SLOW_RUNS: usize = 20;

/// Knuth's MMIX linear congruential generator: deterministic, no dependency.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}

const WORDS: &[&str] = &[
    "let",
    "mut",
    "value",
    "self",
    "return",
    "match",
    "Some(x)",
    "None",
    "fn",
    "impl",
    "=",
    "+",
    "count",
    "items",
    "&mut",
    "Vec::new()",
    "if",
    "else",
    "=>",
    "?;",
    "config.path",
    "0",
];

/// A code-like line: indentation, 3 to 10 words, sometimes a unique trailing comment.
fn line(rng: &mut Lcg, number: usize) -> String {
    let mut text = "    ".repeat(rng.below(4));
    for _ in 0..3 + rng.below(8) {
        text.push_str(WORDS[rng.below(WORDS.len())]);
        text.push(' ');
    }
    if rng.below(5) == 0 {
        text.push_str(&format!("// note {number}"));
    }
    text
}

/// `lines` lines, then the same with `edits` scattered edits (60% changed lines, 20% inserted,
/// 20% deleted).
fn generate(seed: u64, lines: usize, edits: usize) -> (String, String) {
    let mut rng = Lcg(seed);
    let mut text: Vec<String> = (0..lines).map(|n| line(&mut rng, n)).collect();
    let old = text.join("\n") + "\n";
    for edit in 0..edits {
        let at = rng.below(text.len());
        match rng.below(10) {
            0 | 1 => text.insert(at, format!("inserted line {edit}")),
            2 | 3 => {
                text.remove(at);
            }
            _ => text[at].push_str(" // edited"),
        }
    }
    (old, text.join("\n") + "\n")
}

struct Stats {
    median: Duration,
    p95: Duration,
    min: Duration,
}

fn measure(runs: usize, mut run: impl FnMut()) -> Stats {
    for _ in 0..WARM_UP {
        run();
    }
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed()
        })
        .collect();
    times.sort();
    Stats {
        median: times[runs / 2],
        p95: times[(runs * 95).div_ceil(100) - 1],
        min: times[0],
    }
}

/// The 1/5/15-minute load averages, to judge how much other work shared the machine.
#[expect(
    clippy::disallowed_methods,
    reason = "the benchmark reads /proc/loadavg to report machine load; no agent file access"
)]
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".to_owned())
}

fn report(name: &str, stats: &Stats) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "| {name} | {:.2} | {:.2} | {:.2} |",
        ms(stats.median),
        ms(stats.p95),
        ms(stats.min)
    );
}

fn main() -> Result<(), DiffError> {
    let (old, new) = generate(0x6b65_656c, 100_000, 1_000);
    let diff = FileDiff::compute("big.rs", Some(old.as_bytes()), Some(new.as_bytes()))?;
    println!(
        "input: {} -> {} bytes; {} hunks, +{} -{}; {RUNS} runs ({SLOW_RUNS} for the last case) \
         after {WARM_UP} warm-up runs; load average {}\n",
        old.len(),
        new.len(),
        diff.hunks.len(),
        diff.added,
        diff.removed,
        load_average()
    );
    println!("| case | median ms | p95 ms | min ms |");
    println!("| --- | ---: | ---: | ---: |");

    let texts_to_unified = || {
        if let Ok(diff) = FileDiff::compute(
            "big.rs",
            Some(black_box(old.as_bytes())),
            Some(black_box(new.as_bytes())),
        ) {
            black_box((diff.unified(), diff.summary()));
        }
    };
    report(
        "100k lines, 1,000 edits: texts → unified + summary (target < 10 ms)",
        &measure(RUNS, texts_to_unified),
    );
    report(
        "100k lines, 1,000 edits: compute only",
        &measure(RUNS, || {
            black_box(
                FileDiff::compute(
                    "big.rs",
                    Some(black_box(old.as_bytes())),
                    Some(black_box(new.as_bytes())),
                )
                .is_ok(),
            );
        }),
    );
    report(
        "100k lines, 1,000 edits: unified only",
        &measure(RUNS, || {
            black_box(diff.unified());
        }),
    );
    let colored = TerminalStyle {
        color: true,
        width: 120,
        tab_width: 4,
    };
    report(
        "100k lines, 1,000 edits: terminal, colour + word emphasis",
        &measure(RUNS, || {
            black_box(diff.render_terminal(&colored));
        }),
    );
    report(
        "100k lines, 1,000 edits: ACP (bounded form)",
        &measure(RUNS, || {
            black_box(diff.acp());
        }),
    );

    let (_, one_edit) = generate(0x6b65_656c, 100_000, 0);
    let one_edit = one_edit.replacen("value", "VALUE", 1);
    report(
        "100k lines, 1 edit: texts → unified",
        &measure(RUNS, || {
            if let Ok(diff) =
                FileDiff::compute("big.rs", Some(old.as_bytes()), Some(one_edit.as_bytes()))
            {
                black_box(diff.unified());
            }
        }),
    );

    let (small_old, small_new) = generate(7, 10_000, 2_000);
    report(
        "10k lines, 2,000 edits: texts → unified",
        &measure(RUNS, || {
            if let Ok(diff) = FileDiff::compute(
                "s.rs",
                Some(small_old.as_bytes()),
                Some(small_new.as_bytes()),
            ) {
                black_box(diff.unified());
            }
        }),
    );

    // Pathological: two unrelated texts drawn from a tiny alphabet of lines.
    let mut rng = Lcg(99);
    let mut noise = |count: usize| -> String {
        (0..count)
            .map(|_| ["a\n", "b\n", "c\n", "}\n"][rng.below(4)])
            .collect()
    };
    let (noise_old, noise_new) = (noise(50_000), noise(50_000));
    report(
        "50k vs 50k unrelated lines of a 4-line alphabet: texts → unified",
        &measure(SLOW_RUNS, || {
            if let Ok(diff) =
                FileDiff::compute("n", Some(noise_old.as_bytes()), Some(noise_new.as_bytes()))
            {
                black_box(diff.unified());
            }
        }),
    );
    println!("\nload average after: {}", load_average());
    Ok(())
}
