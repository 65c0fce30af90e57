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
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use keel_testkit::measure::status_kib;
use keel_testkit::mock_model::Api;
use keel_testkit::protocol_fuzz::{Rng, soup};

#[path = "support/wire_world.rs"]
mod wire_world;
use wire_world::WireWorld;

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
    let world = WireWorld::new();
    let started = Instant::now();
    let batch = (inputs / 12).max(1);
    println!("inputs  live heap KiB  live blocks  RssAnon KiB");
    for input in 0..inputs {
        let mut rng = Rng::new(input);
        let lines = soup(&mut rng, &world.cwd);
        let lockstep = rng.chance(50);
        world.serve(&lines, lockstep).unwrap();
        if input % batch == 0 || input + 1 == inputs {
            // Let timers and spawned clean-ups finish before counting.
            world
                .runtime
                .block_on(async { tokio::time::sleep(Duration::from_millis(50)).await });
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
        world.mock.pending(Api::Anthropic)
    );
}
