//! Security modes and models: session modes and config options, both ways, kept in sync.

use agent_client_protocol::v1::schema::{
    SessionConfigOptionValue, SessionUpdate, SetSessionConfigOptionRequest, SetSessionModeRequest,
};
use keel_core::agent::TurnStop;
use keel_testkit::acp_client::{ClientOptions, Event};

use super::support::{Harness, outcome, script};

async fn harness() -> Harness {
    Harness::start(
        ClientOptions::default(),
        script(|_turn| async { Ok(outcome(TurnStop::EndTurn)) }),
    )
    .await
}

fn current(options: &serde_json::Value, id: &str) -> String {
    options
        .as_array()
        .unwrap()
        .iter()
        .find(|option| option["id"] == id)
        .map(|option| option["currentValue"].as_str().unwrap().to_owned())
        .unwrap()
}

#[tokio::test]
async fn set_mode_switches_and_updates_the_mode_option() {
    let harness = harness().await;
    let session = harness.session().await;
    harness
        .client
        .request(SetSessionModeRequest::new(session.clone(), "read-only"))
        .await
        .unwrap();
    harness
        .client
        .wait_for("the config option update", |events| {
            events.iter().any(|event| {
                matches!(event, Event::Update(n) if matches!(n.update, SessionUpdate::ConfigOptionUpdate(_)))
            })
        })
        .await;
    let updates = harness.turn_updates(&session);
    let SessionUpdate::ConfigOptionUpdate(update) = &updates[0] else {
        panic!("{updates:?}");
    };
    let options = serde_json::to_value(&update.config_options).unwrap();
    assert_eq!(current(&options, "mode"), "read-only");
    assert_eq!(current(&options, "model"), "smart");

    let error = harness
        .client
        .request(SetSessionModeRequest::new(session.clone(), "reckless"))
        .await
        .unwrap_err();
    assert_eq!(i32::from(error.code), -32602);
    assert!(
        error.message.contains("unknown mode `reckless`"),
        "{error:?}"
    );
}

#[tokio::test]
async fn config_options_round_trip_and_announce_the_mode() {
    let harness = harness().await;
    let session = harness.session().await;
    let answer = harness
        .client
        .request(SetSessionConfigOptionRequest::new(
            session.clone(),
            "mode",
            "yolo",
        ))
        .await
        .unwrap();
    let options = serde_json::to_value(&answer.config_options).unwrap();
    assert_eq!(current(&options, "mode"), "yolo");
    harness
        .client
        .wait_for("the mode update", |events| {
            events.iter().any(|event| {
                matches!(event, Event::Update(n) if matches!(&n.update, SessionUpdate::CurrentModeUpdate(mode) if mode.current_mode_id.to_string() == "yolo"))
            })
        })
        .await;

    let answer = harness
        .client
        .request(SetSessionConfigOptionRequest::new(
            session.clone(),
            "model",
            "fast",
        ))
        .await
        .unwrap();
    let options = serde_json::to_value(&answer.config_options).unwrap();
    assert_eq!(current(&options, "model"), "fast");
    assert_eq!(current(&options, "mode"), "yolo");

    for (config, value) in [
        ("model", SessionConfigOptionValue::value_id("huge")),
        ("colour", SessionConfigOptionValue::value_id("blue")),
        ("mode", SessionConfigOptionValue::boolean(true)),
    ] {
        let error = harness
            .client
            .request(SetSessionConfigOptionRequest::new(
                session.clone(),
                config,
                value,
            ))
            .await
            .unwrap_err();
        assert_eq!(i32::from(error.code), -32602, "{config}: {error:?}");
    }
}
