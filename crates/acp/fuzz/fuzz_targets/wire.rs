//! libFuzzer over `keel acp`'s wire: the real engine (mock model on loopback) served through the
//! same transport as stdio, fed the input as lines, held to `keel_testkit::protocol_fuzz`'s
//! rules (every well-formed request answered, the connection usable after, the server ending
//! when its input closes). An input starting with a zero byte seeds the structured generator
//! (the property test's soups) with its next 8 bytes and appends the rest as raw lines.
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use keel_acp::server::{EngineSessions, SessionFactory};
use keel_core::agent::{Engine, EngineConfig};
use keel_core::provider::{ProviderConfig, ProviderKind};
use keel_testkit::mock_model::{Api, MockModel, Turn};
use keel_testkit::protocol_fuzz::{Rng, exchange_served, lines_of, soup};
use libfuzzer_sys::fuzz_target;

struct World {
    runtime: tokio::runtime::Runtime,
    factory: Arc<dyn SessionFactory>,
    mock: MockModel,
    cwd: String,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
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
        provider.api_key = Some("fuzz-key".into());
        provider.http.retry.max_attempts = 1;
        config.providers = vec![provider];
        config.model = Some("anthropic/test-model".into());
        let factory: Arc<dyn SessionFactory> = Arc::new(EngineSessions::new(Engine::new(config)));
        let cwd = std::fs::canonicalize(workspace.path())
            .unwrap()
            .display()
            .to_string();
        World {
            runtime,
            factory,
            mock,
            cwd,
            _dirs: (workspace, scratch),
        }
    })
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
    world.runtime.block_on(async {
        // Only the agent's memory is of interest: the mock keeps no history across inputs.
        world.mock.forget_requests();
        // One answer queued for whichever prompt comes; not one more per input (the queue
        // grew about 1.9 KB an input when every input pushed one).
        if world.mock.pending(Api::Anthropic) == 0 {
            world.mock.push_anthropic(Turn::text_only("done"));
        }
        if let Err(finding) = exchange_served(
            |(to_client, from_client)| {
                keel_acp::server::serve_io(world.factory.clone(), to_client, from_client)
            },
            &lines,
            lockstep,
            Duration::from_secs(20),
        )
        .await
        {
            panic!("{finding:?}");
        }
    });
});
