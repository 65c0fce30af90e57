//! The world `keel acp`'s wire is exercised in by the fuzz target (`crates/acp/fuzz`, which
//! includes this file) and the `wire_memory` bench: the real engine, its only provider the mock
//! model on loopback (one attempt per request: a fault is the input's, not a retry's), served a
//! soup of lines on a fresh in-memory connection per input.

use std::sync::Arc;
use std::time::Duration;

use keel_acp::server::{EngineSessions, SessionFactory};
use keel_core::agent::{Engine, EngineConfig};
use keel_core::provider::{ProviderConfig, ProviderKind};
use keel_testkit::mock_model::{Api, MockModel, Turn};
use keel_testkit::protocol_fuzz::{Exchange, Finding, exchange_served};

pub struct WireWorld {
    pub runtime: tokio::runtime::Runtime,
    pub mock: MockModel,
    /// The workspace a soup's `session/new` names.
    pub cwd: String,
    factory: Arc<dyn SessionFactory>,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl WireWorld {
    pub fn new() -> Self {
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
        provider.api_key = Some("wire-key".into());
        provider.http.retry.max_attempts = 1;
        config.providers = vec![provider];
        config.model = Some("anthropic/test-model".into());
        let factory: Arc<dyn SessionFactory> = Arc::new(EngineSessions::new(Engine::new(config)));
        let cwd = std::fs::canonicalize(workspace.path())
            .unwrap()
            .display()
            .to_string();
        Self {
            runtime,
            mock,
            cwd,
            factory,
            _dirs: (workspace, scratch),
        }
    }

    /// Serves `lines` on a fresh connection and checks `protocol_fuzz`'s rules. The mock keeps
    /// no history across inputs and one answer queued for whichever prompt comes (not one more
    /// per input: most inputs send none, and the queue grew about 1.9 KB an input).
    pub fn serve(&self, lines: &[Vec<u8>], lockstep: bool) -> Result<Exchange, Finding> {
        self.runtime.block_on(async {
            self.mock.forget_requests();
            if self.mock.pending(Api::Anthropic) == 0 {
                self.mock.push_anthropic(Turn::text_only("done"));
            }
            exchange_served(
                |(to_client, from_client)| {
                    keel_acp::server::serve_io(self.factory.clone(), to_client, from_client)
                },
                lines,
                lockstep,
                Duration::from_secs(20),
            )
            .await
        })
    }
}
