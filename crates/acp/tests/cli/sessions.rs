//! `keel sessions` and `keel exec --resume` over the store a real run leaves behind.

use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::Value;

use super::common::{Output, Sandbox, run};

async fn keel(sandbox: &Sandbox, mock: &MockModel, args: &[&str]) -> Output {
    let mut command = sandbox.keel(args);
    command
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.base_url())
        .env("KEEL_MODEL", "anthropic/mock-model");
    tokio::task::spawn_blocking(move || run(command))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_exec_run_is_listed_shown_exported_resumed_and_removed() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::text_only("The answer is 42."));
    let out = keel(&sandbox, &mock, &["exec", "what is the answer?"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);

    let out = keel(&sandbox, &mock, &["sessions", "list", "--json"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let listed: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["title"], "what is the answer?");
    assert_eq!(
        listed[0]["cwd"].as_str().unwrap(),
        sandbox.workspace.display().to_string()
    );
    let id = listed[0]["id"].as_str().unwrap().to_owned();

    let out = keel(&sandbox, &mock, &["sessions", "list"]).await;
    assert!(out.stdout.starts_with("ID"), "{}", out.stdout);
    assert!(out.stdout.contains(&id));

    let out = keel(&sandbox, &mock, &["sessions", "show", &id]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.starts_with("# what is the answer?\n"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("## User\n\nwhat is the answer?\n"));
    assert!(out.stdout.contains("## Assistant\n\nThe answer is 42."));

    let out = keel(
        &sandbox,
        &mock,
        &["sessions", "export", &id, "--format", "json"],
    )
    .await;
    let exported: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(exported["meta"]["id"], id.as_str());
    assert!(exported["events"].as_array().unwrap().len() >= 4);

    // Headless continuation: the model sees the earlier exchange.
    mock.push_anthropic(Turn::text_only("Still 42."));
    let out = keel(&sandbox, &mock, &["exec", "--resume", &id, "sure?"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("Still 42."));
    let body = mock.requests().last().unwrap().body.to_string();
    assert!(body.contains("what is the answer?") && body.contains("The answer is 42."));
    assert!(body.contains("sure?"));

    let out = keel(&sandbox, &mock, &["sessions", "rm", &id]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = keel(&sandbox, &mock, &["sessions", "show", &id]).await;
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("no session"), "{}", out.stderr);
    let out = keel(&sandbox, &mock, &["exec", "--resume", "../etc", "hi"]).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("not a valid session id"),
        "{}",
        out.stderr
    );
}
