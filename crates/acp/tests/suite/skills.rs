//! Skills over ACP with the real engine against the mock model: a project's skill waits for
//! trust, then is listed in the system prompt, loaded by the `skill` tool (with its files), and
//! offered as a slash command that loads it into the prompt. The user's skills need no trust.
//! A project's agent definitions wait for trust the same way.

use std::path::Path;

use agent_client_protocol::v1::schema::{PermissionOptionKind, SessionUpdate, StopReason};
use keel_testkit::acp_client::{ClientOptions, PermissionReply};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::{Value, json};

use super::support::{EngineHarness, engine_config};

const PROJECT_SKILL: &str = "---\nname: release-notes\ndescription: Writes release notes from \
the changelog\n---\nWrite the notes as a bulleted list, newest first.\n";
const USER_SKILL: &str =
    "---\ndescription: Greets the user politely\n---\nSay good morning, whatever the time.\n";

async fn harness(replies: Vec<PermissionReply>, turns: Vec<Turn>, config: &Path) -> EngineHarness {
    let mock = MockModel::start().await;
    for turn in turns {
        mock.push_anthropic(turn);
    }
    std::fs::create_dir_all(config.join("skills/greet")).unwrap();
    std::fs::write(config.join("skills/greet/SKILL.md"), USER_SKILL).unwrap();
    let mut engine = engine_config(Some(&mock), Path::new("/nonexistent"));
    engine.global_config_dir = Some(config.to_path_buf());
    EngineHarness::with_config(
        ClientOptions::default().permissions(replies),
        &[
            (".claude/skills/release-notes/SKILL.md", PROJECT_SKILL),
            (".claude/skills/release-notes/template.md", "## Changes\n"),
            (
                ".claude/agents/helper.md",
                "---\ndescription: Helps with chores\n---\nBe brief.\n",
            ),
        ],
        mock,
        engine,
    )
    .await
}

/// The description of the `task` tool in a recorded request.
fn task_description(request: &Value) -> String {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "task")
        .map(|tool| tool["description"].to_string())
        .unwrap_or_default()
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

/// The command names of the last `available_commands_update`.
fn last_commands(harness: &EngineHarness) -> Vec<String> {
    harness
        .client
        .updates(&harness.session)
        .iter()
        .rev()
        .find_map(|update| match update {
            SessionUpdate::AvailableCommandsUpdate(update) => Some(
                update
                    .available_commands
                    .iter()
                    .map(|command| command.name.clone())
                    .collect(),
            ),
            _ => None,
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_project_skill_after_trust_is_listed_loaded_and_offered_as_a_command() {
    let config = tempfile::tempdir().unwrap();
    let harness = harness(
        vec![PermissionReply::Choose(PermissionOptionKind::AllowOnce)],
        vec![
            Turn::new().tool_call("s1", "skill", json!({"name": "release-notes"})),
            Turn::new().tool_call("s2", "skill", json!({"name": "greet"})),
            Turn::text_only("Loaded both."),
            Turn::text_only("Notes written."),
        ],
        config.path(),
    )
    .await;
    assert_eq!(
        harness.prompt("write release notes").await.stop_reason,
        StopReason::EndTurn
    );
    // The trust question names the skill; trusting it brings the skill in.
    let prompts = harness.client.permission_requests();
    assert_eq!(prompts.len(), 1);
    let asked = serde_json::to_string(&prompts[0]).unwrap();
    assert!(
        asked.contains(r#"offers skill \"release-notes\" (\".claude/skills/release-notes\")"#),
        "{asked}"
    );
    assert!(
        asked.contains(r#"defines agent \"helper\" (\".claude/agents/helper.md\")"#),
        "{asked}"
    );
    let requests = harness.mock.requests();
    // The project's agent definition is offered to `task` once trusted.
    assert!(task_description(&requests[0].body).contains("- helper: Helps with chores"));
    let system = requests[0].body["system"].to_string();
    assert!(
        system.contains("- release-notes: Writes release notes from the changelog")
            && system.contains("- greet: Greets the user politely"),
        "{system}"
    );
    let loaded = tool_result(&requests[1].body, "s1");
    assert!(
        loaded.contains("Write the notes as a bulleted list") && loaded.contains("template.md"),
        "{loaded}"
    );
    assert!(
        !loaded.contains("description:"),
        "the front matter stays out: {loaded}"
    );
    // The user's skill is read through the session's scope too.
    let greet = tool_result(&requests[2].body, "s2");
    assert!(greet.contains("Say good morning"), "{greet}");
    // Offered as slash commands once trusted.
    let commands = last_commands(&harness);
    assert!(
        commands.contains(&"release-notes".to_owned()) && commands.contains(&"greet".to_owned()),
        "{commands:?}"
    );
    // `/release-notes for v2` loads the skill into the prompt.
    assert_eq!(
        harness.prompt("/release-notes for v2").await.stop_reason,
        StopReason::EndTurn
    );
    let requests = harness.mock.requests();
    let last = requests[3].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(
        last.contains("<skill name=\\\"release-notes\\\"")
            && last.contains("Write the notes as a bulleted list")
            && last.contains("for v2"),
        "{last}"
    );
}

#[tokio::test]
async fn an_untrusted_project_skill_stays_out() {
    let config = tempfile::tempdir().unwrap();
    let harness = harness(
        vec![PermissionReply::Choose(PermissionOptionKind::RejectOnce)],
        vec![
            Turn::new().tool_call("s1", "skill", json!({"name": "release-notes"})),
            Turn::text_only("No such skill."),
        ],
        config.path(),
    )
    .await;
    assert_eq!(
        harness.prompt("write release notes").await.stop_reason,
        StopReason::EndTurn
    );
    let requests = harness.mock.requests();
    let system = requests[0].body["system"].to_string();
    assert!(!system.contains("release-notes"), "{system}");
    assert!(!task_description(&requests[0].body).contains("helper"));
    assert!(system.contains("- greet: "), "{system}");
    let refused = tool_result(&requests[1].body, "s1");
    assert!(refused.contains("no skill `release-notes`"), "{refused}");
    assert!(!last_commands(&harness).contains(&"release-notes".to_owned()));
}
