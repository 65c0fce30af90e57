//! `keel doctor` as a new user runs it: a temporary home, no credentials in the environment.

use keel_testkit::mock_model::MockModel;

use super::common::{Sandbox, run};

#[test]
fn doctor_without_credentials_says_what_to_set_and_exits_1() {
    let sandbox = Sandbox::new();
    let out = run(sandbox.keel(&["doctor"]));
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(
            "  FIX   no model can answer\n        → set ANTHROPIC_API_KEY or OPENAI_API_KEY, or \
             set `model = \"provider/model\"` in the configuration"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("1 thing to fix (marked FIX above)."),
        "{}",
        out.stdout
    );
    // The configuration, trust and log checks pass on a fresh machine.
    assert!(
        out.stdout
            .contains("  ok    the permission rules are valid"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(
            "`keel acp` logs to {}",
            sandbox.home.join(".local/state/keel/keel.log").display()
        )),
        "{}",
        out.stdout
    );
    // The Zed settings name this very binary.
    let binary = assert_cmd::cargo::cargo_bin("keel");
    assert!(
        out.stdout.contains(&format!(
            "\"agent_servers\": {{\n    \"Keel\": {{\n      \"command\": \"{}\",\n      \"args\": [\"acp\"]",
            binary.display()
        )),
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn doctor_checks_the_providers_endpoint() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.set_models(&["claude-alpha"]);
    let mut command = sandbox.keel(&["doctor"]);
    command
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.base_url());
    let out = tokio::task::spawn_blocking(move || run(command))
        .await
        .unwrap();
    assert!(
        out.stdout
            .contains("  ok    provider `anthropic` answers (1 models listed)"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("FIX   no model"), "{}", out.stdout);

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let mut command = sandbox.keel(&["doctor"]);
    command
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", &closed);
    let out = tokio::task::spawn_blocking(move || run(command))
        .await
        .unwrap();
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stdout.contains(&format!(
            "  FIX   anthropic: cannot connect to {closed} (the base URL set by ANTHROPIC_BASE_URL)"
        )),
        "{}",
        out.stdout
    );
}
