//! libFuzzer over `keel acp`'s wire: the real engine (mock model on loopback) served through the
//! same transport as stdio, fed the input as lines, held to `keel_testkit::protocol_fuzz`'s
//! rules (every well-formed request answered, the connection usable after, the server ending
//! when its input closes). An input starting with a zero byte seeds the structured generator
//! (the property test's soups) with its next 8 bytes and appends the rest as raw lines.
#![no_main]
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "a test harness: the world sets up its own fixtures, and `fuzz_target!` opens \
              libfuzzer-sys's debug output file"
)]

use std::sync::OnceLock;

use keel_testkit::protocol_fuzz::{Rng, lines_of, soup};
use libfuzzer_sys::fuzz_target;

#[path = "../../benches/support/wire_world.rs"]
mod wire_world;
use wire_world::WireWorld;

fn world() -> &'static WireWorld {
    static WORLD: OnceLock<WireWorld> = OnceLock::new();
    WORLD.get_or_init(WireWorld::new)
}

fuzz_target!(|data: &[u8]| {
    let world = world();
    let (lines, lockstep) = match data {
        [0, seed @ ..] if seed.len() >= 8 => {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&seed[..8]);
            let mut rng = Rng::new(u64::from_le_bytes(bytes));
            let mut lines = soup(&mut rng, &world.cwd);
            lines.extend(lines_of(&seed[8..], 16));
            (lines, rng.chance(50))
        }
        _ => (lines_of(data, 64), data.first().is_some_and(|b| b & 1 == 1)),
    };
    if let Err(finding) = world.serve(&lines, lockstep) {
        panic!("{finding:?}");
    }
});
