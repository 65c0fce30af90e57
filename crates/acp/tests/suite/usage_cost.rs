//! `usage_update` carries the session's cost for models whose prices Keel knows (the dated table
//! in `keel_core::provider::pricing`), and no cost for the others.

use std::path::Path;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{SessionUpdate, UsageUpdate};
use keel_core::agent::EngineConfig;
use keel_core::provider::{ProviderConfig, ProviderKind};
use keel_testkit::acp_client::ClientOptions;
use keel_testkit::mock_model::{MockModel, Turn};

use super::support::{EngineHarness, engine_config};

fn config_at(base_url: &str, model: &str) -> EngineConfig {
    let mut config = engine_config(None, Path::new("/nonexistent"));
    let vars = [
        ("ANTHROPIC_BASE_URL", base_url.to_owned()),
        ("ANTHROPIC_API_KEY", "test-key".to_owned()),
    ];
    let env = move |name: &str| {
        vars.iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.clone())
    };
    config.providers = vec![ProviderConfig::from_env(ProviderKind::Anthropic, &env)];
    config.env = Arc::new(env);
    config.model = Some(model.to_owned());
    config
}

fn usage_updates(harness: &EngineHarness) -> Vec<UsageUpdate> {
    harness
        .client
        .updates(&harness.session)
        .into_iter()
        .filter_map(|update| match update {
            SessionUpdate::UsageUpdate(usage) => Some(usage),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn usage_update_carries_the_sessions_cost_for_a_priced_model() {
    let mock = MockModel::start().await;
    // Claude Sonnet 4.5: $3 input, $15 output, $0.30 cache read, $3.75 cache write per MTok.
    for _ in 0..2 {
        mock.push_anthropic(
            Turn::text_only("hello")
                .usage(10_000, 2_000)
                .cache(50_000, 4_000),
        );
    }
    let base = mock.base_url();
    let harness = EngineHarness::with_config(
        ClientOptions::editor(),
        &[],
        mock,
        config_at(&base, "anthropic/claude-sonnet-4-5-20250929"),
    )
    .await;
    harness.client.prompt(&harness.session, "hi").await.unwrap();
    harness
        .client
        .prompt(&harness.session, "again")
        .await
        .unwrap();
    let one = (10_000.0 * 3.0 + 2_000.0 * 15.0 + 50_000.0 * 0.3 + 4_000.0 * 3.75) / 1e6;
    let costs: Vec<(f64, String)> = usage_updates(&harness)
        .into_iter()
        .map(|usage| {
            let cost = usage
                .cost
                .expect("a priced model's usage_update has a cost");
            (cost.amount, cost.currency)
        })
        .collect();
    assert_eq!(costs.len(), 2, "{costs:?}");
    assert!((costs[0].0 - one).abs() < 1e-9, "{costs:?}");
    // Cumulative over the session.
    assert!((costs[1].0 - 2.0 * one).abs() < 1e-9, "{costs:?}");
    assert!(costs.iter().all(|(_, currency)| currency == "USD"));
}

#[tokio::test]
async fn usage_update_has_no_cost_when_the_price_is_unknown() {
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::text_only("hello").usage(10_000, 2_000));
    let base = mock.base_url();
    let harness = EngineHarness::with_config(
        ClientOptions::editor(),
        &[],
        mock,
        config_at(&base, "anthropic/claude-unreleased"),
    )
    .await;
    harness.client.prompt(&harness.session, "hi").await.unwrap();
    let updates = usage_updates(&harness);
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].used, 12_000);
    assert!(updates[0].cost.is_none(), "{:?}", updates[0]);
    let wire = serde_json::to_value(&updates[0]).unwrap();
    assert!(wire.get("cost").is_none(), "{wire}");
}
