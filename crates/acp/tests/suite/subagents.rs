//! Subagents over ACP: the `task` tool with the real engine against the mock model. The child's
//! calls reach the client linked to the `task` call, its approvals go through the parent
//! session's `session/request_permission` naming the agent, the parent's answers, cancel and
//! depth bound it, and a background child's answer joins a later model request.

use std::path::Path;

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason};
use keel_core::provider::{ProviderConfig, ProviderKind};
use keel_testkit::acp_client::{ClientOptions, Event, PermissionReply};
use keel_testkit::mock_model::{Api, MockModel, Reply, Turn};
use serde_json::{Value, json};

use super::support::{EngineHarness, engine_config, gone_with};
use super::turns::{LIB, allow};

/// An engine against `mock` whose user config directory (`<dir>/agents`) holds `agents`
/// (file name, text).
async fn harness_with_agents(
    options: ClientOptions,
    files: &[(&str, &str)],
    mock: MockModel,
    agents: &[(&str, &str)],
    config_dir: &Path,
    child_mock: Option<&MockModel>,
) -> EngineHarness {
    std::fs::create_dir_all(config_dir.join("agents")).unwrap();
    for (name, text) in agents {
        std::fs::write(config_dir.join("agents").join(name), text).unwrap();
    }
    let mut config = engine_config(Some(&mock), Path::new("/nonexistent"));
    config.global_config_dir = Some(config_dir.to_path_buf());
    if let Some(child) = child_mock {
        let mut provider = ProviderConfig::new("sub", ProviderKind::Anthropic);
        provider.base_url = Some(child.base_url());
        provider.api_key = Some("test-key".into());
        config.providers.push(provider);
    }
    EngineHarness::with_config(options, files, mock, config).await
}

const FIXER: &str = "---\nname: fixer\ndescription: Fixes typos in one file\n\
tools: [read, edit]\n---\nFix only what you are asked to fix.\n";

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The `tool_result` blocks of a recorded Anthropic request, by tool use id.
/// The first request to `model` that carries the result of call `id` (whatever else the model
/// was asked before it).
fn request_with_result(model: &MockModel, id: &str) -> Option<Value> {
    model
        .requests()
        .into_iter()
        .find(|request| has_tool_result(&request.body, id))
        .map(|request| request.body)
}

fn has_tool_result(request: &Value, id: &str) -> bool {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|message| {
            message["content"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|block| block["type"] == "tool_result" && block["tool_use_id"] == id)
        })
}

fn tool_result(request: &Value, id: &str) -> String {
    for message in request["messages"].as_array().unwrap() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" && block["tool_use_id"] == id {
                return block["content"].to_string();
            }
        }
    }
    panic!("no tool_result for {id} in {request}")
}

/// The updates of one tool call id, in order.
fn updates_of(harness: &EngineHarness, call_id: &str) -> Vec<Value> {
    harness
        .events_json()
        .into_iter()
        .filter(|event| event["update"]["toolCallId"] == call_id)
        .map(|event| event["update"].clone())
        .collect()
}

fn fixer_turns() -> Vec<Turn> {
    vec![
        Turn::new().tool_call(
            "p1",
            "task",
            json!({"description": "Fix the greeting", "prompt": "Fix the typo helo in src/lib.rs.", "agent": "fixer"}),
        ),
        Turn::new()
            .text("Reading it.")
            .tool_call("c1", "read", json!({"file_path": "src/lib.rs"})),
        Turn::new().tool_call(
            "c2",
            "edit",
            json!({"file_path": "src/lib.rs", "old_string": "\"helo\"", "new_string": "\"hello\""}),
        ),
        Turn::text_only("Fixed helo to hello."),
        Turn::text_only("The fixer fixed the greeting."),
    ]
}

#[tokio::test]
async fn a_task_child_reads_and_edits_and_its_approval_names_the_subagent() {
    let mock = MockModel::start().await;
    for turn in fixer_turns() {
        mock.push_anthropic(turn);
    }
    let config_dir = tempfile::tempdir().unwrap();
    let harness = harness_with_agents(
        ClientOptions::default().permissions(allow(1)),
        &[("src/lib.rs", LIB)],
        mock,
        &[("fixer.md", FIXER)],
        config_dir.path(),
        None,
    )
    .await;
    let answer = harness.prompt("fix the greeting with a subagent").await;
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    assert_eq!(
        std::fs::read_to_string(harness.root.join("src/lib.rs")).unwrap(),
        LIB.replace("helo", "hello")
    );
    // One prompt, for the child's edit, on the parent's session, naming the agent.
    let prompts = harness.client.permission_requests();
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0].session_id, harness.session);
    assert_eq!(prompts[0].tool_call.tool_call_id.to_string(), "p1/c2");
    let title = prompts[0].tool_call.fields.title.clone().unwrap();
    assert!(title.starts_with("fixer: "), "{title}");
    let requests = harness.mock.requests();
    assert_eq!(requests.len(), 5);
    // The parent sees the agent in the task tool's description; the child only its tools.
    let task = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "task")
        .unwrap()
        .clone();
    assert!(
        task["description"]
            .as_str()
            .unwrap()
            .contains("- fixer: Fixes typos in one file"),
        "{task}"
    );
    assert_eq!(tool_names(&requests[1].body), ["read", "edit"]);
    let child_prompt = requests[1].body["messages"][0].to_string();
    assert!(
        child_prompt.contains("Fix only what you are asked to fix.")
            && child_prompt.contains("Fix the typo helo"),
        "{child_prompt}"
    );
    // The parent's next request has the child's final answer as the task's result.
    assert!(tool_result(&requests[4].body, "p1").contains("Fixed helo to hello."));
    // The child's calls are linked to the task call.
    let read = updates_of(&harness, "p1/c1");
    assert_eq!(read[0]["_meta"]["keel"]["parentToolCallId"], "p1");
    assert_eq!(read[0]["_meta"]["keel"]["subagent"], "fixer");
    insta::assert_json_snapshot!("task_child_update_stream", harness.events_json());
}

#[tokio::test]
async fn a_child_is_denied_what_the_parent_denies() {
    let harness = EngineHarness::start(
        ClientOptions::default()
            .permissions([PermissionReply::Choose(PermissionOptionKind::RejectAlways)]),
        &[],
        vec![
            Turn::new().tool_call("p1", "bash", json!({"command": "mkdir made"})),
            Turn::new().tool_call(
                "p2",
                "task",
                json!({"description": "Make the dir", "prompt": "Run mkdir made."}),
            ),
            Turn::new().tool_call("c1", "bash", json!({"command": "mkdir made"})),
            Turn::text_only("It was denied."),
            Turn::text_only("Neither of us may make it."),
        ],
    )
    .await;
    assert_eq!(
        harness.prompt("make a dir").await.stop_reason,
        StopReason::EndTurn
    );
    // The parent's "reject always" binds the child: no second prompt, no directory.
    assert_eq!(harness.client.permission_requests().len(), 1);
    assert!(!harness.root.join("made").exists());
    let child = updates_of(&harness, "p2/c1");
    let last = child.last().unwrap();
    assert_eq!(last["status"], "failed");
    let requests = harness.mock.requests();
    let denied = tool_result(&requests[3].body, "c1");
    assert!(
        denied.contains("Denied") || denied.contains("denied"),
        "{denied}"
    );
}

#[tokio::test]
async fn a_child_mode_is_never_looser_than_the_parent() {
    let yolo = "---\nname: reckless\ndescription: Claims yolo\nmode: yolo\n---\n";
    let mock = MockModel::start().await;
    for turn in [
        Turn::new().tool_call(
            "p1",
            "task",
            json!({"prompt": "Make the dir.", "agent": "reckless"}),
        ),
        Turn::new().tool_call("c1", "bash", json!({"command": "mkdir made"})),
        Turn::text_only("Rejected."),
        Turn::text_only("Done."),
    ] {
        mock.push_anthropic(turn);
    }
    let config_dir = tempfile::tempdir().unwrap();
    let harness = harness_with_agents(
        ClientOptions::default()
            .permissions([PermissionReply::Choose(PermissionOptionKind::RejectOnce)]),
        &[],
        mock,
        &[("reckless.md", yolo)],
        config_dir.path(),
        None,
    )
    .await;
    assert_eq!(harness.prompt("go").await.stop_reason, StopReason::EndTurn);
    // The parent is in allowlist mode: the child still asks, on the parent's session.
    let prompts = harness.client.permission_requests();
    assert_eq!(prompts.len(), 1);
    assert!(
        prompts[0]
            .tool_call
            .fields
            .title
            .clone()
            .unwrap()
            .starts_with("reckless: ")
    );
    assert!(!harness.root.join("made").exists());
}

#[tokio::test]
async fn cancelling_the_parent_stops_a_running_child_and_its_command() {
    let harness = EngineHarness::start(
        ClientOptions::default().permissions(allow(1)),
        &[],
        vec![
            Turn::new().tool_call("p1", "task", json!({"prompt": "Wait a long time."})),
            Turn::new().tool_call(
                "c1",
                "bash",
                json!({"command": "echo started; exec sleep 600.0417"}),
            ),
        ],
    )
    .await;
    let prompt = harness.client.start_prompt(&harness.session, "wait");
    harness
        .client
        .wait_for("the child's command output", |events| {
            events.iter().any(|event| {
                matches!(event, Event::Update(n) if serde_json::to_string(&n.update).unwrap().contains("started"))
            })
        })
        .await;
    harness.client.cancel(&harness.session).unwrap();
    assert_eq!(
        prompt.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    assert!(
        gone_with("600.0417").await,
        "the child's command still runs"
    );
    assert_eq!(
        updates_of(&harness, "p1/c1").last().unwrap()["status"],
        "failed"
    );
    assert_eq!(
        updates_of(&harness, "p1").last().unwrap()["status"],
        "failed"
    );
}

const BACKGROUND: &str =
    "---\nname: bg\ndescription: Works in the background\nmodel: sub/test-model\n---\n";

#[tokio::test]
async fn a_background_task_answer_arrives_in_a_later_model_request() {
    let mock = MockModel::start().await;
    let child = MockModel::start().await;
    mock.push_anthropic(Turn::new().tool_call(
        "p1",
        "task",
        json!({"description": "Count", "prompt": "Count the files.", "agent": "bg", "background": true}),
    ));
    mock.push_anthropic(Turn::text_only("Started it."));
    mock.push_anthropic(Turn::text_only("The count is 42."));
    child.push_anthropic(Turn::text_only("Background answer: 42 files."));
    let config_dir = tempfile::tempdir().unwrap();
    let harness = harness_with_agents(
        ClientOptions::default(),
        &[],
        mock,
        &[("bg.md", BACKGROUND)],
        config_dir.path(),
        Some(&child),
    )
    .await;
    assert_eq!(
        harness.prompt("count in the background").await.stop_reason,
        StopReason::EndTurn
    );
    let started = tool_result(&harness.mock.requests()[1].body, "p1");
    assert!(started.contains("task-1"), "{started}");
    // The task call shows the answer when it is in.
    harness
        .client
        .wait_for("the background answer", |events| {
            events.iter().any(|event| {
                matches!(event, Event::Update(n) if serde_json::to_string(&n.update).unwrap().contains("\"rawOutput\"") && serde_json::to_string(&n.update).unwrap().contains("Background answer: 42 files."))
            })
        })
        .await;
    assert_eq!(
        harness.prompt("and?").await.stop_reason,
        StopReason::EndTurn
    );
    let requests = harness.mock.requests();
    assert_eq!(requests.len(), 3);
    let later = requests[2].body["messages"].to_string();
    assert!(
        later.contains("<task-result handle=\\\"task-1\\\" agent=\\\"bg\\\"")
            && later.contains("Background answer: 42 files."),
        "{later}"
    );
    // The child ran on its own model.
    assert_eq!(child.requests().len(), 1);
    assert_eq!(child.requests()[0].body["model"], "test-model");
}

#[tokio::test]
async fn wait_takes_a_background_answer_once() {
    let mock = MockModel::start().await;
    let child = MockModel::start().await;
    mock.push_anthropic(Turn::new().tool_call(
        "p1",
        "task",
        json!({"prompt": "Count the files.", "agent": "bg", "background": true}),
    ));
    mock.push_anthropic(Turn::new().tool_call("p2", "task", json!({"wait": "task-1"})));
    mock.push_anthropic(Turn::new().tool_call("p3", "task", json!({"wait": "task-9"})));
    mock.push_anthropic(Turn::text_only("42."));
    child.push_anthropic(Turn::text_only("Waited answer: 42."));
    let config_dir = tempfile::tempdir().unwrap();
    let harness = harness_with_agents(
        ClientOptions::default(),
        &[],
        mock,
        &[("bg.md", BACKGROUND)],
        config_dir.path(),
        Some(&child),
    )
    .await;
    assert_eq!(
        harness.prompt("count").await.stop_reason,
        StopReason::EndTurn
    );
    let requests = harness.mock.requests();
    assert!(tool_result(&requests[2].body, "p2").contains("Waited answer: 42."));
    let unknown = tool_result(&requests[3].body, "p3");
    assert!(unknown.contains("no background task `task-9`"), "{unknown}");
    // Taken by `wait`, so not injected again.
    assert!(!requests[3].body.to_string().contains("<task-result"));
}

#[tokio::test]
async fn the_depth_limit_is_reached() {
    let harness = EngineHarness::start(
        ClientOptions::default(),
        &[],
        vec![
            Turn::new().tool_call("p1", "task", json!({"prompt": "Delegate further."})),
            Turn::new().tool_call("c1", "task", json!({"prompt": "And further."})),
            Turn::new().tool_call("g1", "task", json!({"prompt": "Too deep."})),
            Turn::text_only("I did it myself."),
            Turn::text_only("Child done."),
            Turn::text_only("All done."),
        ],
    )
    .await;
    assert_eq!(
        harness.prompt("go deep").await.stop_reason,
        StopReason::EndTurn
    );
    let requests = harness.mock.requests();
    assert_eq!(requests.len(), 6);
    assert!(tool_names(&requests[0].body).contains(&"task".to_owned()));
    assert!(tool_names(&requests[1].body).contains(&"task".to_owned()));
    // Depth 2: no `task` offered, and a call of it fails.
    assert!(!tool_names(&requests[2].body).contains(&"task".to_owned()));
    let refused = tool_result(&requests[3].body, "g1");
    assert!(refused.contains("unknown tool `task`"), "{refused}");
    // The grandchild's calls are linked to the child's task call.
    let nested = updates_of(&harness, "p1/c1/g1");
    assert_eq!(nested[0]["_meta"]["keel"]["parentToolCallId"], "p1/c1");
    assert!(tool_result(&requests[5].body, "p1").contains("Child done."));
}

/// The first model request with every tool the session offers, as the benchmark measures it
/// (docs/benchmarks.md): under 12,000 bytes with the extensions offered beside the locked set
/// (`apply_patch`, the four background tools), and the locked set alone under 10,500.
#[tokio::test]
async fn the_first_model_request_stays_under_12_kb() {
    let harness = EngineHarness::start(
        ClientOptions::default(),
        &[("src/lib.rs", LIB)],
        vec![Turn::text_only("Done.")],
    )
    .await;
    harness.prompt("fix the typo").await;
    let first = &harness.mock.requests()[0];
    let names = tool_names(&first.body);
    for tool in [
        "read",
        "write",
        "edit",
        "glob",
        "grep",
        "bash",
        "todo",
        "task",
        "question",
        "web_fetch",
        "skill",
    ] {
        assert!(
            names.contains(&tool.to_owned()),
            "{tool} missing: {names:?}"
        );
    }
    let bytes = serde_json::to_string(&first.body).unwrap().len();
    // The extensions offered beside the locked set (`apply_patch`, the background commands):
    // each definition and its separating comma.
    let extensions: usize = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|tool| {
            let name = tool["name"].as_str().unwrap_or_default();
            name == "apply_patch" || name.starts_with("bg_")
        })
        .map(|tool| tool.to_string().len() + 1)
        .sum();
    eprintln!("the first request: {bytes} bytes, {extensions} of them the extensions'");
    assert!(
        bytes - extensions < 10_500,
        "the first request with the locked tools is {} bytes",
        bytes - extensions
    );
    assert!(bytes < 12_000, "the first request is {bytes} bytes");
}

#[tokio::test]
async fn cancel_stops_a_background_task() {
    let mock = MockModel::start().await;
    let child = MockModel::start().await;
    mock.push_anthropic(Turn::new().tool_call(
        "p1",
        "task",
        json!({"prompt": "Think for ever.", "agent": "bg", "background": true}),
    ));
    mock.push_anthropic(Turn::new().tool_call("p2", "task", json!({"cancel": "task-1"})));
    mock.push_anthropic(Turn::text_only("Stopped it."));
    // The child's model answers with headers only and never finishes.
    child.push(
        Api::Anthropic,
        Reply::anthropic(&Turn::text_only("never")).stall_after(0),
    );
    let config_dir = tempfile::tempdir().unwrap();
    let harness = harness_with_agents(
        ClientOptions::default(),
        &[],
        mock,
        &[("bg.md", BACKGROUND)],
        config_dir.path(),
        Some(&child),
    )
    .await;
    assert_eq!(
        harness.prompt("start and stop").await.stop_reason,
        StopReason::EndTurn
    );
    let requests = harness.mock.requests();
    assert!(tool_result(&requests[2].body, "p2").contains("`task-1` was cancelled"));
    // The task call ends failed once the child is gone.
    harness
        .client
        .wait_for("the task call to fail", |events| {
            events.iter().any(|event| {
                matches!(event, Event::Update(n) if {
                    let update = serde_json::to_value(&n.update).unwrap();
                    update["toolCallId"] == "p1" && update["status"] == "failed"
                })
            })
        })
        .await;
    // If the child's model request had started, it was dropped.
    if !child.requests().is_empty() {
        assert!(
            child
                .wait_for_disconnect(std::time::Duration::from_secs(10))
                .await,
            "the child's model request was not dropped"
        );
    }
}

/// A `keel acp` home whose user configuration sets `mode` and a provider `sub` (the `child`
/// mock), with the background agent `bg` on it.
fn background_home(child: &MockModel, mode: &str) -> super::support::KeelHome {
    let home = super::support::KeelHome::new();
    home.user_config(&format!(
        "mode = \"{mode}\"\n\n[providers.sub]\nkind = \"anthropic\"\nbase_url = \"{}\"\n\
         api_key_env = \"SUB_API_KEY\"\nmodels = [\"test-model\"]\n",
        child.base_url()
    ));
    let agents = home.home.join("config/keel/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("bg.md"), BACKGROUND).unwrap();
    home
}

/// Waits until `check` holds (a hang guard, not a timing assertion).
async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..1200 {
        if check() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("never: {what}");
}

/// Background work belongs to the session: a background subagent started in one turn is
/// stopped by the `session/cancel` of a later turn (its model request is dropped and the
/// `task` call ends failed), over the real `keel acp`.
#[tokio::test]
async fn a_later_turns_cancel_stops_a_background_subagent() {
    let mock = MockModel::start().await;
    let child = MockModel::start().await;
    mock.push_anthropic(Turn::new().tool_call(
        "p1",
        "task",
        json!({"prompt": "Think for ever.", "agent": "bg", "background": true}),
    ));
    mock.push_anthropic(Turn::text_only("Started it."));
    // The second turn's model never finishes: the user cancels it.
    mock.push(
        Api::Anthropic,
        Reply::anthropic(&Turn::text_only("never")).stall_after(0),
    );
    child.push(
        Api::Anthropic,
        Reply::anthropic(&Turn::text_only("never")).stall_after(0),
    );
    let home = background_home(&child, "allowlist");
    let client = home
        .client(
            &mock,
            ClientOptions::default(),
            &[super::support::TEST_MODEL, ("SUB_API_KEY", "sub-key")],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    let first = client.prompt(&session, "start it").await.unwrap();
    assert_eq!(first.stop_reason, StopReason::EndTurn);
    eventually("the child asks its model", || child.requests().len() == 1).await;
    let second = client.start_prompt(&session, "something else");
    eventually("the second turn asks the model", || {
        mock.requests().len() == 3
    })
    .await;
    client.cancel(&session).unwrap();
    assert_eq!(
        second.await.unwrap().unwrap().stop_reason,
        StopReason::Cancelled
    );
    assert!(
        child
            .wait_for_disconnect(std::time::Duration::from_secs(30))
            .await,
        "the background child's model request was not dropped"
    );
    client
        .wait_for("the task call to fail", |events| {
            events.iter().any(|event| {
                matches!(event, Event::Update(n) if {
                    let update = serde_json::to_value(&n.update).unwrap();
                    update["toolCallId"] == "p1" && update["status"] == "failed"
                })
            })
        })
        .await;
    client.close().await.unwrap();
}

/// Every decision a background subagent makes reads the session's policy as it is now: the
/// child was started in yolo, the user switched the session to read-only meanwhile, and the
/// child's write is refused (nothing written), over the real `keel acp`.
#[tokio::test]
async fn a_mode_change_reaches_a_running_background_subagent() {
    use agent_client_protocol::v1::schema::SetSessionModeRequest;

    let mock = MockModel::start().await;
    let child = MockModel::start().await;
    mock.push_anthropic(Turn::new().tool_call(
        "p1",
        "task",
        json!({"prompt": "Make the file.", "agent": "bg", "background": true}),
    ));
    mock.push_anthropic(Turn::text_only("Started it."));
    // The child waits for the test's signal (a file), then writes.
    child.push_anthropic(Turn::new().tool_call(
        "c1",
        "bash",
        json!({"command": "while [ ! -e go ]; do sleep 0.05; done; echo ready"}),
    ));
    child.push_anthropic(Turn::new().tool_call(
        "c2",
        "write",
        json!({"file_path": "made.txt", "content": "written by the child\n"}),
    ));
    child.push_anthropic(Turn::text_only("Done."));
    let home = background_home(&child, "yolo");
    let client = home
        .client(
            &mock,
            ClientOptions::default(),
            &[super::support::TEST_MODEL, ("SUB_API_KEY", "sub-key")],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    let first = client.prompt(&session, "start it").await.unwrap();
    assert_eq!(first.stop_reason, StopReason::EndTurn);
    eventually("the child runs its command", || child.requests().len() == 1).await;
    client
        .request(SetSessionModeRequest::new(session.clone(), "read-only"))
        .await
        .unwrap();
    std::fs::write(home.root.join("go"), "").unwrap();
    let answered = || request_with_result(&child, "c2");
    eventually("the child finishes", || answered().is_some()).await;
    assert!(
        !home.root.join("made.txt").exists(),
        "the child wrote in read-only mode"
    );
    let refused = tool_result(&answered().unwrap(), "c2");
    assert!(refused.contains("read-only"), "{refused}");
    client.close().await.unwrap();
}

/// A "reject always" the user gives in the session after a background subagent started reaches
/// that subagent: its same command is refused without asking again, over the real `keel acp`.
#[tokio::test]
async fn a_later_reject_always_reaches_a_running_background_subagent() {
    let push = json!({"command": "git push origin main"});
    let mock = MockModel::start().await;
    let child = MockModel::start().await;
    mock.push_anthropic(Turn::new().tool_call(
        "p1",
        "task",
        json!({"prompt": "Push it.", "agent": "bg", "background": true}),
    ));
    mock.push_anthropic(Turn::text_only("Started it."));
    mock.push_anthropic(Turn::new().tool_call("p2", "bash", push.clone()));
    mock.push_anthropic(Turn::text_only("Not pushed."));
    // The child waits for the test's signal (a file), then runs the command the user rejected.
    child.push_anthropic(Turn::new().tool_call(
        "c1",
        "bash",
        json!({"command": "while [ ! -e go ]; do sleep 0.05; done; echo ready"}),
    ));
    child.push_anthropic(Turn::new().tool_call("c2", "bash", push));
    child.push_anthropic(Turn::text_only("Done."));
    let home = background_home(&child, "allowlist");
    let client = home
        .client(
            &mock,
            ClientOptions::default().permissions([
                PermissionReply::Choose(PermissionOptionKind::AllowOnce),
                PermissionReply::Choose(PermissionOptionKind::RejectAlways),
            ]),
            &[super::support::TEST_MODEL, ("SUB_API_KEY", "sub-key")],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    client.prompt(&session, "start it").await.unwrap();
    // The child's waiting command was approved (the first prompt); the session's push is
    // rejected for good (the second).
    eventually("the child runs its command", || child.requests().len() == 1).await;
    client
        .wait_for("the child's command to be approved", |events| {
            events
                .iter()
                .filter(|event| matches!(event, Event::Permission { .. }))
                .count()
                == 1
        })
        .await;
    client.prompt(&session, "push").await.unwrap();
    assert_eq!(client.permission_requests().len(), 2);
    std::fs::write(home.root.join("go"), "").unwrap();
    let answered = || request_with_result(&child, "c2");
    eventually("the child finishes", || answered().is_some()).await;
    let refused = tool_result(&answered().unwrap(), "c2");
    assert!(refused.contains("reject always"), "{refused}");
    // The child never asked about the push.
    assert_eq!(client.permission_requests().len(), 2);
    client.close().await.unwrap();
}

/// `read-only` is not stricter than `ask`: a `read-only` agent in an `ask` session would run
/// the read-only commands the session asks about. The session's mode holds, and the child's
/// `ls` is asked about.
#[tokio::test]
async fn a_read_only_child_in_an_ask_session_still_asks() {
    let reader = "---\nname: reader\ndescription: Reads\nmode: read-only\n---\n";
    let mock = MockModel::start().await;
    for turn in [
        Turn::new().tool_call(
            "p1",
            "task",
            json!({"prompt": "List the files.", "agent": "reader"}),
        ),
        Turn::new().tool_call("c1", "bash", json!({"command": "ls"})),
        Turn::text_only("Rejected."),
        Turn::text_only("Done."),
    ] {
        mock.push_anthropic(turn);
    }
    let config_dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(config_dir.path().join("agents")).unwrap();
    std::fs::write(config_dir.path().join("agents/reader.md"), reader).unwrap();
    let mut config = engine_config(Some(&mock), Path::new("/nonexistent"));
    config.global_config_dir = Some(config_dir.path().to_path_buf());
    config.mode = keel_core::config::Mode::Ask;
    let harness = EngineHarness::with_config(
        ClientOptions::default()
            .permissions([PermissionReply::Choose(PermissionOptionKind::RejectOnce)]),
        &[],
        mock,
        config,
    )
    .await;
    assert_eq!(harness.prompt("go").await.stop_reason, StopReason::EndTurn);
    let prompts = harness.client.permission_requests();
    let titles: Vec<String> = prompts
        .iter()
        .map(|p| p.tool_call.fields.title.clone().unwrap_or_default())
        .collect();
    assert_eq!(titles, ["reader: ls"], "{prompts:#?}");
}
