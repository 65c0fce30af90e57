//! Benchmark: `tool_search` over 10,000 indexed tools (BM25 over names and descriptions, exact
//! name first). Run: `cargo bench -p keel-core --bench tool_search`. Builds the index once
//! (reported), then runs `KEEL_BENCH_RUNS` (default 2,000) searches of varied queries and
//! reports the median, 99th percentile and worst time per search, and checks that each
//! query's target tool is found first.
#![expect(
    clippy::print_stdout,
    clippy::unwrap_used,
    reason = "a benchmark binary: it prints a table"
)]

use std::time::{Duration, Instant};

use keel_core::tools::tool_search::{IndexedTool, ToolIndex};

const VERBS: &[&str] = &[
    "create", "list", "delete", "update", "get", "search", "query", "send", "fetch", "sync",
    "archive", "merge", "close", "open", "export", "import",
];
const NOUNS: &[&str] = &[
    "issue",
    "pull_request",
    "comment",
    "file",
    "table",
    "row",
    "message",
    "channel",
    "user",
    "invoice",
    "ticket",
    "deployment",
    "bucket",
    "record",
    "event",
    "report",
    "page",
    "label",
];
const SERVERS: &[&str] = &[
    "github", "gitlab", "slack", "postgres", "jira", "stripe", "s3", "notion", "sentry", "linear",
];

fn tools(count: usize) -> Vec<IndexedTool> {
    (0..count)
        .map(|n| {
            let verb = VERBS[n % VERBS.len()];
            let noun = NOUNS[(n / VERBS.len()) % NOUNS.len()];
            let server = SERVERS[(n / (VERBS.len() * NOUNS.len())) % SERVERS.len()];
            IndexedTool {
                id: format!("mcp__{server}__{verb}_{noun}_{n}"),
                description: format!(
                    "{verb} a {noun} in {server} (variant {n}). Returns the {noun} as JSON; \
                     fails when the {noun} does not exist or access is denied."
                ),
            }
        })
        .collect()
}

fn main() {
    let runs: usize = std::env::var("KEEL_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let tools = tools(10_000);
    let started = Instant::now();
    let index = ToolIndex::new(tools.clone());
    let build = started.elapsed();
    let mut times: Vec<Duration> = Vec::with_capacity(runs);
    let mut right = 0;
    for run in 0..runs {
        let target = &tools[(run * 7919) % tools.len()];
        // Half the queries name the tool; half describe it in words.
        let query = if run % 2 == 0 {
            target.id.clone()
        } else {
            target.description.split(" (").next().unwrap().to_owned()
                + &format!(" variant {}", (run * 7919) % tools.len())
        };
        let started = Instant::now();
        let found = index.search(&query, 5);
        times.push(started.elapsed());
        if found.first().map(|t| t.id.as_str()) == Some(target.id.as_str()) {
            right += 1;
        }
    }
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
    println!("tool_search over {} tools, {runs} searches", index.len());
    println!("  index build: {:?}", build);
    println!(
        "  per search: median {:?}, p99 {:?}, worst {:?}",
        at(0.5),
        at(0.99),
        times[times.len() - 1]
    );
    println!("  target found first: {right} of {runs}");
}
