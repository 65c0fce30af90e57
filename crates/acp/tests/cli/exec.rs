//! `keel exec` against the mock model server over real HTTP: the headless host on the real engine.

use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::{Value, json};

use super::common::{Output, Sandbox, run};

/// Runs `keel exec` with the Anthropic provider pointed at `mock`, off the async runtime.
async fn exec(sandbox: &Sandbox, mock: &MockModel, args: &[&str]) -> Output {
    let mut command = sandbox.keel(args);
    command
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.base_url())
        .env("KEEL_MODEL", "anthropic/mock-model");
    tokio::task::spawn_blocking(move || run(command))
        .await
        .unwrap()
}

fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// A read that is allowed, an edit that would need approval, then a final answer.
fn script(mock: &MockModel) {
    mock.push_anthropic(Turn::new().text("Reading it.").tool_call(
        "call_read",
        "read",
        json!({"file_path": "greet.py"}),
    ));
    mock.push_anthropic(Turn::new().tool_call(
        "call_edit",
        "edit",
        json!({"file_path": "greet.py", "old_string": "Helo", "new_string": "Hello"}),
    ));
    mock.push_anthropic(Turn::text_only(
        "I could not edit greet.py without approval.",
    ));
}

fn sandbox_with_project() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write(&sandbox.workspace.join("greet.py"), "print(\"Helo\")\n");
    sandbox
}

#[tokio::test(flavor = "multi_thread")]
async fn json_events_show_an_allowed_read_and_a_denied_edit() {
    let sandbox = sandbox_with_project();
    let mock = MockModel::start().await;
    script(&mock);
    let out = exec(
        &sandbox,
        &mock,
        &["-vv", "exec", "--json", "fix the greeting"],
    )
    .await;
    assert_eq!(
        out.code, 1,
        "a denied call makes exit code 1\n{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.workspace.join("greet.py")).unwrap(),
        "print(\"Helo\")\n",
        "the denied edit changed the file"
    );

    let events = events(&out.stdout);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"turn_started"));
    assert_eq!(kinds.last(), Some(&"turn_finished"));
    assert_eq!(events[0]["model"], "anthropic/mock-model");
    assert_eq!(events[0]["mode"], "allowlist");

    let call = |id: &str, kind: &str| {
        events
            .iter()
            .find(|e| e["type"] == kind && e["call_id"] == id)
            .unwrap_or_else(|| panic!("no {kind} for {id} in {kinds:?}"))
            .clone()
    };
    let read = call("call_read", "tool_call");
    assert_eq!(
        (read["tool"].as_str(), read["kind"].as_str()),
        (Some("read"), Some("read"))
    );
    assert_eq!(read["title"], "Read greet.py");
    let read_result = call("call_read", "tool_result");
    assert_eq!(read_result["status"], "completed");
    assert!(
        read_result["envelope"]["data"]["output"]
            .as_str()
            .unwrap()
            .contains("Helo")
    );

    let edit_result = call("call_edit", "tool_result");
    assert_eq!(edit_result["status"], "failed");
    assert_eq!(edit_result["envelope"]["type"], "error");
    assert_eq!(
        edit_result["envelope"]["error_text"].as_str(),
        Some(keel_core::policy::HEADLESS_DENIAL)
    );
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert!(
        text.ends_with("I could not edit greet.py without approval."),
        "{text}"
    );
    let finished = events.last().unwrap();
    assert_eq!(finished["stop_reason"], "end_turn");
    assert_eq!(finished["exit_code"], 1);
    assert_eq!(finished["denied_calls"], 1);

    // The model was told the fixed headless message.
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        requests[2]
            .raw_body
            .contains("no user is present (headless run)")
    );
    // Logs went to stderr, not into the event stream.
    assert!(
        out.stderr.contains("DEBUG") || out.stderr.contains("INFO"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn text_mode_puts_only_the_answer_on_stdout_and_progress_on_stderr() {
    let sandbox = sandbox_with_project();
    let mock = MockModel::start().await;
    script(&mock);
    let out = exec(&sandbox, &mock, &["exec", "fix the greeting"]).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(out.stdout, "I could not edit greet.py without approval.\n");
    assert!(
        out.stderr.contains("Read greet.py (read)"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("Edit greet.py (edit)"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("no user is present"), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("stop reason: end_turn, 1 call(s) denied"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allowed_run_exits_0_and_the_prompt_can_come_from_stdin() {
    let sandbox = sandbox_with_project();
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::new().tool_call(
        "call_read",
        "read",
        json!({"file_path": "greet.py"}),
    ));
    mock.push_anthropic(Turn::text_only("It prints Helo."));
    let mut command = sandbox.keel(&["exec", "-"]);
    command
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.base_url())
        .write_stdin("what does greet.py print?");
    let out = tokio::task::spawn_blocking(move || run(command))
        .await
        .unwrap();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "It prints Helo.\n");
    let first = &mock.requests()[0];
    assert!(first.raw_body.contains("what does greet.py print?"));
}

#[tokio::test(flavor = "multi_thread")]
async fn model_and_configuration_errors_exit_2() {
    let sandbox = sandbox_with_project();
    // No credentials at all.
    let out = run(sandbox.keel(&["exec", "--json", "hello"]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    let events = events(&out.stdout);
    assert_eq!(events.last().unwrap()["type"], "turn_finished");
    assert_eq!(events.last().unwrap()["exit_code"], 2);
    assert!(out.stderr.contains("ANTHROPIC_API_KEY"), "{}", out.stderr);

    // The model's service fails.
    let mock = MockModel::start().await;
    mock.push(
        keel_testkit::mock_model::Api::Anthropic,
        keel_testkit::mock_model::Reply::error(
            keel_testkit::mock_model::Api::Anthropic,
            400,
            "bad request",
        ),
    );
    let out = exec(&sandbox, &mock, &["exec", "hello"]).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("model error"), "{}", out.stderr);

    // A bad configuration file.
    sandbox.write(&sandbox.project_file(), "mode = \"sometimes\"\n");
    let out = exec(&sandbox, &mock, &["exec", "hello"]).await;
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains(".keel/config.toml:1:8"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_mode_allowing_it_the_edit_runs_and_its_diff_is_on_stderr() {
    let sandbox = sandbox_with_project();
    let mock = MockModel::start().await;
    script(&mock);
    let out = exec(
        &sandbox,
        &mock,
        &["exec", "--mode", "yolo", "fix the greeting"],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(sandbox.workspace.join("greet.py")).unwrap(),
        "print(\"Hello\")\n"
    );
    assert!(out.stderr.contains("greet.py +1 −1"), "{}", out.stderr);
    assert!(out.stderr.contains("print(\"Hello\")"), "{}", out.stderr);
    assert!(
        !out.stderr.contains('\u{1b}'),
        "no colour when stderr is not a terminal"
    );
}

/// Headless, a patch touching a workflow file is denied as a write to it is, even in `yolo`,
/// and none of its files is written; the same patch without it runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_patch_touching_a_workflow_is_denied_headless_and_writes_nothing() {
    let sandbox = sandbox_with_project();
    let mock = MockModel::start().await;
    let patch = "*** Begin Patch\n*** Add File: notes.txt\n+note\n*** Add File: .github/workflows/ci.yml\n+on: push\n*** End Patch\n";
    mock.push_anthropic(Turn::new().tool_call("p1", "apply_patch", json!({ "input": patch })));
    mock.push_anthropic(Turn::new().tool_call(
        "p2",
        "apply_patch",
        json!({ "input": "*** Begin Patch\n*** Add File: notes.txt\n+note\n*** End Patch\n" }),
    ));
    mock.push_anthropic(Turn::text_only("Wrote the notes only."));
    let out = exec(
        &sandbox,
        &mock,
        &["exec", "--json", "--mode", "yolo", "add the files"],
    )
    .await;
    assert_eq!(
        out.code, 1,
        "a denied call makes exit code 1\n{}",
        out.stderr
    );
    assert!(!sandbox.workspace.join(".github/workflows/ci.yml").exists());
    let events = events(&out.stdout);
    let denied = events
        .iter()
        .find(|e| e["type"] == "tool_result" && e["call_id"] == "p1")
        .unwrap_or_else(|| panic!("no result of p1: {events:?}"));
    assert!(
        denied.to_string().contains("no user is present"),
        "{denied}"
    );
    assert_eq!(denied["status"], "failed");
    // The second patch, without the workflow, was allowed by the mode, and found no
    // `notes.txt` from the first (an add of an existing file fails).
    let allowed = events
        .iter()
        .find(|e| e["type"] == "tool_result" && e["call_id"] == "p2")
        .unwrap_or_else(|| panic!("no result of p2: {events:?}"));
    assert_eq!(allowed["status"], "completed", "{allowed}");
    assert_eq!(
        std::fs::read_to_string(sandbox.workspace.join("notes.txt")).unwrap(),
        "note\n"
    );
}
