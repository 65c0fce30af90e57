//! The errors a user reads from `keel exec` when the model service is misconfigured or busy,
//! against the mock model server (or a closed port) over real HTTP.

use keel_testkit::mock_model::{Api, MockModel, Reply, Turn};

use super::common::{Output, Sandbox, run};

/// `keel exec PROMPT` with the Anthropic provider at `base_url`, the model `model`.
async fn exec_at(sandbox: &Sandbox, base_url: &str, model: &str, extra: &[&str]) -> Output {
    let mut args = vec!["exec"];
    args.extend_from_slice(extra);
    args.push("say hi");
    let mut command = sandbox.keel(&args);
    command
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("KEEL_MODEL", model);
    tokio::task::spawn_blocking(move || run(command))
        .await
        .unwrap()
}

/// A loopback address nothing listens on.
fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

#[tokio::test]
async fn exec_refused_connection_names_the_base_url_and_its_variable() {
    let sandbox = Sandbox::new();
    let url = closed_port();
    let out = exec_at(&sandbox, &url, "anthropic/some-model", &[]).await;
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "cannot connect to {url} (the base URL set by ANTHROPIC_BASE_URL)"
        )),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("Is the server running"),
        "{}",
        out.stderr
    );
    // Keel said it was retrying while it waited.
    assert!(
        out.stderr.contains("before trying again (attempt 2 of 4)"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn exec_html_answer_says_the_base_url_is_not_the_api() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(
        Api::Anthropic,
        Reply::html(
            200,
            "<!DOCTYPE html><html><body>Welcome to nginx!</body></html>",
        ),
    );
    let out = exec_at(&sandbox, &mock.base_url(), "anthropic/some-model", &[]).await;
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains(&format!(
            "the base URL {} does not look like the Anthropic Messages API (the base URL set by \
             ANTHROPIC_BASE_URL): `/v1/messages` answered HTTP 200 with an HTML page",
            mock.base_url()
        )),
        "{}",
        out.stderr
    );
    assert_eq!(mock.requests().len(), 1, "not retried");
}

#[tokio::test]
async fn exec_unknown_model_lists_the_providers_models() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.set_models(&["claude-alpha", "claude-beta"]);
    mock.push(
        Api::Anthropic,
        Reply::error(Api::Anthropic, 404, "model: claude-nope"),
    );
    let out = exec_at(&sandbox, &mock.base_url(), "anthropic/claude-nope", &[]).await;
    assert_ne!(out.code, 0);
    assert!(
        out.stderr
            .contains("the model `claude-nope` is not available"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(
            "the models anthropic offers are: claude-alpha, claude-beta; choose one with \
             `model = \"anthropic/NAME\"`"
        ),
        "{}",
        out.stderr
    );
    assert_eq!(mock.models_requests(), 1);
}

#[tokio::test]
async fn exec_rate_limit_says_it_waits_then_answers() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Api::Anthropic, Reply::rate_limited(Api::Anthropic, "1"));
    mock.push_anthropic(Turn::text_only("hello after the wait"));
    let out = exec_at(&sandbox, &mock.base_url(), "anthropic/some-model", &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "anthropic is rate limiting requests (HTTP 429); waiting 1 s before trying again \
             (attempt 2 of 4)."
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("hello after the wait"),
        "{}",
        out.stdout
    );

    // The same wait is an event of `--json`.
    mock.push(Api::Anthropic, Reply::rate_limited(Api::Anthropic, "1"));
    mock.push_anthropic(Turn::text_only("again"));
    let out = exec_at(
        &sandbox,
        &mock.base_url(),
        "anthropic/some-model",
        &["--json"],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .lines()
            .any(|line| line.contains(r#""type":"waiting""#)
                && line.contains("rate limiting requests")),
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn models_prints_the_answering_model_its_source_and_the_providers_list() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.set_models(&["claude-alpha", "claude-beta"]);
    let mut command = sandbox.keel(&["models"]);
    command
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.base_url());
    let out = tokio::task::spawn_blocking(move || run(command))
        .await
        .unwrap();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.starts_with(
            "The model that answers: anthropic/claude-sonnet-4-5 (ANTHROPIC_API_KEY is set, and \
             this is its default model)\n"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(
            "Models anthropic lists:\n  anthropic/claude-alpha\n  anthropic/claude-beta\n"
        ),
        "{}",
        out.stdout
    );

    let mut command = sandbox.keel(&["config", "show"]);
    command
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("KEEL_MODEL", "anthropic/claude-beta");
    let out = tokio::task::spawn_blocking(move || run(command))
        .await
        .unwrap();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.starts_with(
            "# the model that answers: anthropic/claude-beta (`model` set by environment \
             variable KEEL_MODEL)\n"
        ),
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn exec_thinking_setting_reaches_the_request_and_thoughts_are_json_events() {
    let sandbox = Sandbox::new();
    sandbox.write(&sandbox.user_file(), "thinking = \"low\"\n");
    let mock = MockModel::start().await;
    mock.push_anthropic(
        Turn::new()
            .thinking("Weighing the options.", "sig")
            .text("done"),
    );
    let out = exec_at(&sandbox, &mock.base_url(), "anthropic/m", &["--json"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        mock.requests()[0].body["thinking"],
        serde_json::json!({"type": "enabled", "budget_tokens": 4096})
    );
    let thoughts: String = out
        .stdout
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|event| event["type"] == "thinking")
        .map(|event| event["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(thoughts, "Weighing the options.");
}

#[tokio::test]
async fn exec_thinking_is_reasoning_effort_for_openai_style_servers() {
    let sandbox = Sandbox::new();
    sandbox.write(&sandbox.user_file(), "thinking = \"high\"\n");
    let mock = MockModel::start().await;
    mock.push_openai(Turn::text_only("done"));
    let mut command = sandbox.keel(&["exec", "say hi"]);
    command
        .env("OPENAI_BASE_URL", mock.openai_base_url())
        .env("KEEL_MODEL", "openai/local-model");
    let out = tokio::task::spawn_blocking(move || run(command))
        .await
        .unwrap();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(mock.requests()[0].body["reasoning_effort"], "high");
    assert_eq!(mock.requests()[0].body["model"], "local-model");
}

#[tokio::test]
async fn exec_refused_connection_names_the_config_key_and_its_file_line() {
    let sandbox = Sandbox::new();
    let url = closed_port();
    sandbox.write(
        &sandbox.user_file(),
        &format!("model = \"local/qwen3\"\n\n[providers.local]\nkind = \"openai\"\nbase_url = \"{url}/v1\"\n"),
    );
    let mut command = sandbox.keel(&["exec", "say hi"]);
    command.env_remove("KEEL_MODEL");
    let out = tokio::task::spawn_blocking(move || run(command))
        .await
        .unwrap();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "local: cannot connect to {url}/v1 (the base URL set by `providers.local.base_url` \
             at ~/.config/keel/config.toml:5:1)"
        )),
        "{}",
        out.stderr
    );
}
