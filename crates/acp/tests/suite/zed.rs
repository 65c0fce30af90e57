//! Keel as Zed sees it (issue 31): the real engine and the real `keel acp` binary, driven by
//! the test client advertising exactly Zed's client capabilities (`ClientOptions::zed`, from
//! Zed's `client_capabilities_for_agent`; `zed_beta` adds what Zed's ACP beta flag adds).
//! One test per point of what the user sees: the terminal's label, the slash-command list,
//! the settings in the responses, readable cards and prompts, errors with their cause, status
//! where the protocol has a place for it, history, and an honest demo; then a snapshot of one
//! read/edit/bash turn as Zed receives it.

use std::path::Path;

use agent_client_protocol::v1::schema::{
    CloseSessionRequest, ForkSessionRequest, LoadSessionRequest, McpServer, McpServerStdio,
    NewSessionRequest, ResumeSessionRequest, SessionId, SessionUpdate,
    SetSessionConfigOptionRequest, StopReason,
};
use keel_testkit::acp_client::{ClientOptions, Event, TestClient};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::{Value, json};

use super::support::{EngineHarness, KeelHome, TEST_MODEL, engine_config};
use super::turns::{LIB, allow};

pub(super) const USER_SKILL: &str =
    "---\ndescription: Greets the user politely\n---\nSay good morning, whatever the time.\n";

/// The updates of `session` as JSON.
pub(super) fn updates(client: &TestClient, session: &SessionId) -> Vec<Value> {
    client
        .updates(session)
        .iter()
        .map(|update| serde_json::to_value(update).unwrap())
        .collect()
}

/// The `available_commands_update`s of `session`, as lists of names.
pub(super) fn command_lists(client: &TestClient, session: &SessionId) -> Vec<Vec<String>> {
    client
        .updates(session)
        .into_iter()
        .filter_map(|update| match update {
            SessionUpdate::AvailableCommandsUpdate(update) => Some(
                update
                    .available_commands
                    .into_iter()
                    .map(|command| command.name)
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

/// The option `id` of a config option list.
pub(super) fn option<'a>(options: &'a Value, id: &str) -> &'a Value {
    options
        .as_array()
        .unwrap()
        .iter()
        .find(|option| option["id"] == id)
        .unwrap_or_else(|| panic!("no option {id} in {options}"))
}

pub(super) fn choices(option: &Value) -> Vec<String> {
    option["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|choice| choice["value"].as_str().unwrap().to_owned())
        .collect()
}

/// An engine against `mock` that keeps sessions in `data` and reads the user's skills from
/// `config`.
pub(super) fn kept_config(
    mock: &MockModel,
    data: &Path,
    config: &Path,
) -> keel_core::agent::EngineConfig {
    std::fs::create_dir_all(config.join("skills/greet")).unwrap();
    std::fs::write(config.join("skills/greet/SKILL.md"), USER_SKILL).unwrap();
    let mut engine = engine_config(Some(mock), Path::new("/nonexistent"));
    engine.user_data_dir = Some(data.to_path_buf());
    engine.global_config_dir = Some(config.to_path_buf());
    engine.cache_dir = Some(data.join("cache"));
    engine
}

#[tokio::test]
async fn zed_an_execute_call_is_titled_with_the_command_and_relabels_its_terminal() {
    let harness = EngineHarness::start(
        ClientOptions::zed().permissions(allow(1)),
        &[],
        vec![
            Turn::new().tool_call(
                "t1",
                "bash",
                json!({"command": "mkdir -p out && echo made"}),
            ),
            Turn::text_only("Made."),
        ],
    )
    .await;
    harness.prompt("make it").await;
    let updates = updates(&harness.client, &harness.session);
    let call = updates
        .iter()
        .find(|update| update["sessionUpdate"] == "tool_call")
        .unwrap();
    // Zed draws an execute title as plain text: no backticks.
    assert_eq!(call["title"], "mkdir -p out && echo made");
    // Zed labels the terminal with what `terminal/create` ran (the sandbox helper); the update
    // that embeds the terminal sets the execute call's title, which replaces that label.
    let embedding = updates
        .iter()
        .find(|update| update["content"][0]["type"] == "terminal")
        .unwrap();
    assert_eq!(embedding["title"], "mkdir -p out && echo made");
    let created = harness
        .client
        .terminal_records()
        .into_iter()
        .find_map(|record| match record {
            keel_testkit::acp_client::TerminalRecord::Create { args, .. } => Some(args),
            _ => None,
        })
        .unwrap();
    // The command itself is what the terminal runs, last.
    assert_eq!(
        created.last().map(String::as_str),
        Some("mkdir -p out && echo made")
    );
    // The approval names the command in plain words too.
    let request = &harness.client.permission_requests()[0];
    assert_eq!(
        request.tool_call.fields.title.as_deref(),
        Some("mkdir -p out && echo made")
    );
}

#[tokio::test]
async fn zed_gets_one_whole_command_list_with_the_skills_after_new_load_and_resume() {
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::text_only("Hello."));
    let data = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    let engine = kept_config(&mock, data.path(), config.path());
    let harness = EngineHarness::with_config(ClientOptions::zed(), &[], mock, engine).await;
    harness.prompt("hi").await;
    let expected: Vec<String> = [
        "tools",
        "permissions",
        "mode",
        "model",
        "compact",
        "mcp",
        "jobs",
        "help",
        "clear",
        "init",
        "greet",
    ]
    .map(str::to_owned)
    .to_vec();
    // One list, complete (the user's skill included), before the turn's updates.
    assert_eq!(
        command_lists(&harness.client, &harness.session),
        std::slice::from_ref(&expected)
    );
    let first = harness.client.updates(&harness.session);
    assert!(matches!(
        first[0],
        SessionUpdate::AvailableCommandsUpdate(_)
    ));

    // Load and resume: one whole list each, the skill present at once.
    let client = &harness.client;
    client
        .request(CloseSessionRequest::new(harness.session.clone()))
        .await
        .unwrap();
    let before = client.events().len();
    client
        .request(LoadSessionRequest::new(
            harness.session.clone(),
            harness.root.clone(),
        ))
        .await
        .unwrap();
    let lists_after = |from: usize| -> Vec<Vec<String>> {
        client.events()[from..]
            .iter()
            .filter_map(|event| match event {
                Event::Update(n) => match &n.update {
                    SessionUpdate::AvailableCommandsUpdate(update) => Some(
                        update
                            .available_commands
                            .iter()
                            .map(|c| c.name.clone())
                            .collect(),
                    ),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    };
    assert_eq!(lists_after(before), std::slice::from_ref(&expected));
    client
        .request(CloseSessionRequest::new(harness.session.clone()))
        .await
        .unwrap();
    let before = client.events().len();
    client
        .request(ResumeSessionRequest::new(
            harness.session.clone(),
            harness.root.clone(),
        ))
        .await
        .unwrap();
    assert_eq!(lists_after(before), [expected]);
}

#[tokio::test]
async fn zed_finds_the_known_models_and_the_kept_thinking_level_in_the_responses() {
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::text_only("Thought about it."));
    let data = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    let engine = kept_config(&mock, data.path(), config.path());
    // The provider's list, as an earlier session left it in the cache.
    let cache = keel_core::provider::cache_file(&data.path().join("cache"), &engine.providers[0]);
    std::fs::create_dir_all(cache.parent().unwrap()).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    std::fs::write(
        &cache,
        json!({"fetched_at": now, "base_url": mock.base_url(), "models": ["claude-cached"]})
            .to_string(),
    )
    .unwrap();
    let harness = EngineHarness::with_config(ClientOptions::zed(), &[], mock, engine).await;
    let client = &harness.client;
    let root = harness.root.clone();

    // session/new: the cached model is a choice in the response itself, where Zed applies
    // the user's default settings.
    let response = client.new_session(&root, &[]).await.unwrap();
    let options = serde_json::to_value(&response.config_options).unwrap();
    assert!(
        choices(option(&options, "model")).contains(&"anthropic/claude-cached".to_owned()),
        "{options}"
    );
    assert!(option(&options, "mode")["currentValue"].is_string());
    assert!(option(&options, "thinking")["currentValue"].is_string());

    // Thinking and model chosen, a turn run: both are kept with the session.
    let session = response.session_id;
    for (id, value) in [("thinking", "high"), ("model", "anthropic/claude-cached")] {
        client
            .request(SetSessionConfigOptionRequest::new(
                session.clone(),
                id,
                value,
            ))
            .await
            .unwrap();
    }
    client.prompt(&session, "think hard").await.unwrap();
    for reopen in ["load", "resume"] {
        client
            .request(CloseSessionRequest::new(session.clone()))
            .await
            .unwrap();
        let options = if reopen == "load" {
            let response = client
                .request(LoadSessionRequest::new(session.clone(), root.clone()))
                .await
                .unwrap();
            serde_json::to_value(&response.config_options).unwrap()
        } else {
            let response = client
                .request(ResumeSessionRequest::new(session.clone(), root.clone()))
                .await
                .unwrap();
            serde_json::to_value(&response.config_options).unwrap()
        };
        assert_eq!(
            option(&options, "thinking")["currentValue"],
            "high",
            "{reopen}"
        );
        let model = option(&options, "model");
        assert_eq!(model["currentValue"], "anthropic/claude-cached", "{reopen}");
        // The default stays the default.
        assert_eq!(
            model["options"][0]["value"], "anthropic/test-model",
            "{reopen}"
        );
        assert_eq!(
            model["options"][0]["description"], "The default model",
            "{reopen}"
        );
        assert!(
            choices(option(&options, "model")).contains(&"anthropic/claude-cached".to_owned()),
            "{reopen}: {options}"
        );
    }
}

#[tokio::test]
async fn zed_shows_the_plan_as_the_todo_cards_text_and_prompts_in_plain_words() {
    let harness = EngineHarness::start(
        ClientOptions::zed().permissions(allow(1)),
        &[("src/lib.rs", LIB)],
        vec![
            Turn::new().tool_call(
                "p1",
                "todo",
                json!({"todos": [
                    {"content": "Fix the typo", "status": "in_progress"},
                    {"content": "Run the tests", "status": "pending"}
                ]}),
            ),
            Turn::new().tool_call("t1", "bash", json!({"command": "touch made.txt"})),
            Turn::text_only("Done."),
        ],
    )
    .await;
    harness.prompt("plan it").await;
    let updates = updates(&harness.client, &harness.session);
    let card = updates
        .iter()
        .find(|update| update["toolCallId"] == "p1" && update["status"] == "completed")
        .unwrap();
    // Zed shows a card's raw output when its content is empty: the plan is its text.
    assert_eq!(
        card["content"][0]["content"]["text"],
        "- [~] Fix the typo (in progress)\n- [ ] Run the tests"
    );
    let request = &harness.client.permission_requests()[0];
    let content = serde_json::to_value(&request.tool_call.fields.content).unwrap();
    let said = content[1]["content"]["text"].as_str().unwrap();
    let root = harness.root.display();
    assert!(
        said.starts_with(&format!(
            "Keel will run this command in `{root}`. Keel asks before this by default"
        )),
        "{said}"
    );
    let (plain, detail) = said.split_once("\n\n").unwrap();
    assert!(!plain.contains("manifest rule"), "{plain}");
    assert!(
        detail.starts_with("Rule: the manifest rule `shell.run` * → ask"),
        "{detail}"
    );
}

#[tokio::test]
async fn zed_reads_a_config_errors_key_file_line_and_column_in_its_data() {
    let home = KeelHome::new();
    home.user_config("mode = \"ask\"\nmodle = \"anthropic/x\"\n");
    let mock = MockModel::start().await;
    let client = home
        .client(&mock, ClientOptions::zed(), &[TEST_MODEL])
        .await;
    let error = client.new_session(&home.root, &[]).await.unwrap_err();
    let data = error.data.clone().unwrap();
    assert_eq!(data["key"], "modle", "{data}");
    assert_eq!(data["line"], 2, "{data}");
    assert_eq!(data["column"], 1, "{data}");
    assert!(
        data["file"]
            .as_str()
            .unwrap()
            .ends_with("config/keel/config.toml"),
        "{data}"
    );
    assert!(
        data["details"]
            .as_str()
            .unwrap()
            .contains("did you mean `model`"),
        "{data}"
    );
}

#[tokio::test]
async fn zed_reads_where_a_project_config_error_is_when_the_session_cannot_open() {
    // `keel acp` starts elsewhere; the session's project has a broken file.
    let home = KeelHome::new();
    let project = home.home.join("project");
    std::fs::create_dir_all(project.join(".keel")).unwrap();
    std::fs::write(
        project.join(".keel/config.toml"),
        "mode = \"ask\"\n[tools.bash\n",
    )
    .unwrap();
    let mock = MockModel::start().await;
    let client = home
        .client(&mock, ClientOptions::zed(), &[TEST_MODEL])
        .await;
    let session = client.new_session(&project, &[]).await.unwrap().session_id;
    let error = client.prompt(&session, "hello").await.unwrap_err();
    assert_eq!(i32::from(error.code), -32602, "{error:?}");
    assert!(
        error.message.starts_with("the session could not open:"),
        "{error:?}"
    );
    let data = error.data.clone().unwrap();
    assert!(
        data["file"]
            .as_str()
            .unwrap()
            .ends_with(".keel/config.toml"),
        "{data}"
    );
    assert_eq!(data["line"], 2, "{data}");
    assert!(data["column"].as_u64().is_some(), "{data}");
    assert!(
        data["details"].as_str().unwrap().contains("syntax error"),
        "{data}"
    );
}

#[tokio::test]
async fn zed_reads_why_an_mcp_server_failed_and_what_the_editor_refused() {
    // An MCP server that dies at start: its last stderr lines are in the notice.
    let harness = EngineHarness::start(
        ClientOptions::zed_beta()
            .refuse_terminals("Permission denied")
            .permissions(allow(1)),
        &[],
        vec![
            Turn::new().tool_call("t1", "bash", json!({"command": "mkdir refused"})),
            Turn::text_only("The editor refused."),
        ],
    )
    .await;
    let client = &harness.client;
    let failing = client
        .request(
            NewSessionRequest::new(harness.root.clone()).mcp_servers(vec![McpServer::Stdio(
                McpServerStdio::new("broken", "sh").args(vec![
                    "-c".into(),
                    "echo 'loading tools' >&2; echo 'fatal: GITHUB_TOKEN is not set' >&2; exit 3"
                        .into(),
                ]),
            )]),
        )
        .await
        .unwrap()
        .session_id;
    client
        .wait_for("the MCP failure notice", |events| {
            events.iter().any(|event| {
                matches!(event, Event::Update(n) if n.session_id == failing
                    && matches!(n.update, SessionUpdate::Notice(_)))
            })
        })
        .await;
    let notice = updates(client, &failing)
        .into_iter()
        .find(|update| update["sessionUpdate"] == "notice")
        .unwrap();
    assert_eq!(notice["severity"], "warning");
    assert!(
        notice["title"]
            .as_str()
            .unwrap()
            .starts_with("The MCP server `broken` failed to start"),
        "{notice}"
    );
    let description = notice["description"].as_str().unwrap();
    assert!(
        description.contains("fatal: GITHUB_TOKEN is not set")
            && description.contains("loading tools"),
        "{notice}"
    );

    // The editor refuses `terminal/create` (Zed: "Internal error", the cause in
    // `data.details`): the call says what the editor said.
    harness.prompt("make it").await;
    let failed = updates(client, &harness.session)
        .into_iter()
        .find(|update| update["toolCallId"] == "t1" && update["status"] == "failed")
        .unwrap();
    let text = failed["content"][0]["content"]["text"].as_str().unwrap();
    assert!(text.contains("Permission denied"), "{text}");
    assert!(!text.contains("Internal error"), "{text}");
}

#[tokio::test]
async fn zed_beta_gets_notices_and_compaction_updates_and_plain_zed_gets_marked_notices() {
    for beta in [true, false] {
        use keel_testkit::mock_model::{Api, Reply};
        let mock = MockModel::start().await;
        mock.push_anthropic(Turn::text_only("Noted."));
        // A rate limit before the second answer: a retry notice.
        mock.push(Api::Anthropic, Reply::rate_limited(Api::Anthropic, "0"));
        mock.push_anthropic(Turn::text_only("Noted again."));
        mock.push_anthropic(Turn::text_only("The user asked to remember two things."));
        let mut engine = engine_config(Some(&mock), Path::new("/nonexistent"));
        engine.providers[0].http.retry.base_delay = std::time::Duration::from_millis(1);
        let options = if beta {
            ClientOptions::zed_beta()
        } else {
            ClientOptions::zed()
        };
        let harness = EngineHarness::with_config(options, &[], mock, engine).await;
        harness.prompt("remember this").await;
        harness.prompt("and this").await;
        let answer = harness.prompt("/compact").await;
        assert_eq!(answer.stop_reason, StopReason::EndTurn);
        let updates = updates(&harness.client, &harness.session);
        let kinds: Vec<&str> = updates
            .iter()
            .map(|update| update["sessionUpdate"].as_str().unwrap())
            .collect();
        if beta {
            let notice = updates
                .iter()
                .find(|update| update["sessionUpdate"] == "notice")
                .unwrap();
            assert_eq!(notice["severity"], "info");
            assert!(
                notice["title"]
                    .as_str()
                    .unwrap()
                    .contains("rate limiting requests"),
                "{notice}"
            );
            let compaction = updates
                .iter()
                .find(|update| update["sessionUpdate"] == "compaction_update")
                .unwrap();
            assert_eq!(compaction["status"], "completed");
            assert!(
                compaction["summary"][0]["text"]
                    .as_str()
                    .unwrap()
                    .contains("compacted"),
                "{compaction}"
            );
        } else {
            assert!(!kinds.contains(&"notice") && !kinds.contains(&"compaction_update"));
            // Marked as Keel's: a quoted "Keel:" line, a message id that is no model
            // message's, and `_meta.keel.notice`.
            let notices: Vec<&Value> = updates
                .iter()
                .filter(|update| update["_meta"]["keel"]["notice"].is_string())
                .collect();
            assert_eq!(notices.len(), 2, "{updates:#?}");
            for notice in notices {
                assert_eq!(notice["sessionUpdate"], "agent_message_chunk");
                assert!(
                    notice["content"]["text"]
                        .as_str()
                        .unwrap()
                        .starts_with("> **Keel:** "),
                    "{notice}"
                );
                assert!(
                    notice["messageId"]
                        .as_str()
                        .unwrap()
                        .starts_with("keel-notice-")
                );
            }
        }
    }
}

#[tokio::test]
async fn zed_replays_user_chunks_with_ids_loads_an_unprompted_session_and_titles_forks() {
    let home = KeelHome::new();
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::text_only("One."));
    mock.push_anthropic(Turn::text_only("Two."));
    let client = home
        .client(&mock, ClientOptions::zed(), &[TEST_MODEL])
        .await;
    // Created and never prompted, then the process goes away: still loadable.
    let unprompted = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    client.prompt(&session, "first question").await.unwrap();
    client.prompt(&session, "second question").await.unwrap();
    client.close().await.unwrap();

    let client = home
        .client(&mock, ClientOptions::zed(), &[TEST_MODEL])
        .await;
    client
        .request(LoadSessionRequest::new(
            unprompted.clone(),
            home.root.clone(),
        ))
        .await
        .unwrap();
    client
        .request(LoadSessionRequest::new(session.clone(), home.root.clone()))
        .await
        .unwrap();
    // Every replayed user chunk has a message id, one per prompt: Zed never merges them.
    let ids: Vec<String> = client
        .updates(&session)
        .into_iter()
        .filter_map(|update| match update {
            SessionUpdate::UserMessageChunk(chunk) => {
                Some(chunk.message_id.expect("a message id").to_string())
            }
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    // A fork says it is one.
    let fork = client
        .request(ForkSessionRequest::new(session.clone(), home.root.clone()))
        .await
        .unwrap()
        .session_id;
    client
        .wait_for("the fork's title", |events| {
            events.iter().any(|event| {
                matches!(event, Event::Update(n) if n.session_id == fork
                    && matches!(n.update, SessionUpdate::SessionInfoUpdate(_)))
            })
        })
        .await;
    let titles: Vec<String> = client
        .updates(&fork)
        .into_iter()
        .filter_map(|update| match update {
            SessionUpdate::SessionInfoUpdate(info) => info.title.value().cloned(),
            _ => None,
        })
        .collect();
    assert_eq!(titles, ["Fork of first question"]);
}
