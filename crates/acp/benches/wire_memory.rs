//! Memory across many connections (issue 19): the fuzz target's world, without libFuzzer.
//! One engine serves thousands of protocol soups (the property test's generator), each on a
//! fresh connection; a counting allocator reports the heap still allocated after every batch,
//! next to the process's anonymous memory. A leak shows as live heap growing with the inputs;
//! allocator retention shows as RssAnon growing while live heap stays flat.
//! `cargo bench -p keel-acp --bench wire_memory [-- INPUTS]`.
#![expect(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "a benchmark reports on stdout and sets up its own fixtures"
)]
#![expect(
    unsafe_code,
    reason = "a counting global allocator forwards to the system's"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use keel_acp::server::{EngineSessions, SessionFactory};
use keel_core::agent::{Engine, EngineConfig};
use keel_core::provider::{ProviderConfig, ProviderKind};
use keel_testkit::measure::status_kib;
use keel_testkit::mock_model::{Api, MockModel, Turn};
use keel_testkit::protocol_fuzz::{Rng, exchange_served, soup};

struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);
static LIVE_BLOCKS: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        LIVE_BLOCKS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        LIVE_BLOCKS.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn main() {
    let inputs: u64 = std::env::args()
        .skip(1)
        .find_map(|arg| arg.parse().ok())
        .unwrap_or(6_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mock = runtime.block_on(MockModel::start());
    let workspace = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut config = EngineConfig::new(
        Arc::new(|_: &str| None),
        std::fs::canonicalize(scratch.path()).unwrap(),
    );
    let mut provider = ProviderConfig::new("anthropic", ProviderKind::Anthropic);
    provider.base_url = Some(mock.base_url());
    provider.api_key = Some("bench-key".into());
    provider.http.retry.max_attempts = 1;
    config.providers = vec![provider];
    config.model = Some("anthropic/test-model".into());
    let factory: Arc<dyn SessionFactory> = Arc::new(EngineSessions::new(Engine::new(config)));
    let cwd = std::fs::canonicalize(workspace.path())
        .unwrap()
        .display()
        .to_string();
    let started = Instant::now();
    let batch = (inputs / 12).max(1);
    println!("inputs  live heap KiB  live blocks  RssAnon KiB");
    for input in 0..inputs {
        let mut rng = Rng::new(input);
        let lines = soup(&mut rng, &cwd);
        let lockstep = rng.chance(50);
        runtime.block_on(async {
            mock.forget_requests();
            // One answer queued for whichever prompt comes; not one more per input.
            if mock.pending(Api::Anthropic) == 0 {
                mock.push_anthropic(Turn::text_only("done"));
            }
            exchange_served(
                |(to_client, from_client)| {
                    keel_acp::server::serve_io(factory.clone(), to_client, from_client)
                },
                &lines,
                lockstep,
                Duration::from_secs(20),
            )
            .await
            .unwrap();
        });
        if input % batch == 0 || input + 1 == inputs {
            // Let timers and spawned clean-ups finish before counting.
            runtime.block_on(async { tokio::time::sleep(Duration::from_millis(50)).await });
            println!(
                "{:>6}  {:>13}  {:>11}  {:>11}",
                input + 1,
                LIVE_BYTES.load(Ordering::Relaxed) / 1024,
                LIVE_BLOCKS.load(Ordering::Relaxed),
                status_kib(std::process::id(), "RssAnon").unwrap_or(0)
            );
        }
    }
    println!(
        "{inputs} inputs in {:.1?}; mock queue left {}",
        started.elapsed(),
        mock.pending(Api::Anthropic)
    );
}
