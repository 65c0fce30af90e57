//! Instruction files: `AGENTS.md` (else `CLAUDE.md`) of the workspace and of the user's
//! configuration directory reach the model's system prompt, capped at 16 KiB.

use std::path::Path;

use keel_testkit::acp_client::ClientOptions;
use keel_testkit::mock_model::{MockModel, Turn};

use super::support::{EngineHarness, engine_config};

async fn system_prompt_with(
    workspace_files: &[(&str, &str)],
    user_files: &[(&str, &str)],
) -> String {
    let user_dir = tempfile::tempdir().unwrap();
    for (name, text) in user_files {
        std::fs::write(user_dir.path().join(name), text).unwrap();
    }
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::text_only("ok"));
    let mut config = engine_config(Some(&mock), Path::new("/nonexistent"));
    config.global_config_dir = Some(user_dir.path().to_path_buf());
    let harness =
        EngineHarness::with_config(ClientOptions::default(), workspace_files, mock, config).await;
    harness.prompt("hello").await;
    let requests = harness.mock.requests();
    let system = &requests[0].body["system"];
    system
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<String>()
        })
        .or_else(|| system.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[tokio::test]
async fn workspace_and_user_agents_md_reach_the_system_prompt() {
    let system = system_prompt_with(
        &[
            ("AGENTS.md", "Run `make test` before you finish."),
            ("CLAUDE.md", "ignored when AGENTS.md exists"),
        ],
        &[("AGENTS.md", "Answer in British English.")],
    )
    .await;
    assert!(
        system.contains(
            "The user's own instructions (from AGENTS.md in Keel's configuration directory):\nAnswer in British English."
        ),
        "{system}"
    );
    assert!(
        system.contains("Project instructions from AGENTS.md:\nRun `make test` before you finish."),
        "{system}"
    );
    assert!(
        !system.contains("ignored when AGENTS.md exists"),
        "{system}"
    );
}

#[tokio::test]
async fn claude_md_serves_when_there_is_no_agents_md_and_big_files_are_cut() {
    let big = format!("{}END-MARKER", "x".repeat(20 * 1024));
    let system = system_prompt_with(&[("CLAUDE.md", big.as_str())], &[]).await;
    assert!(
        system.contains("Project instructions from CLAUDE.md:\nxxx"),
        "{}",
        &system[..200]
    );
    assert!(!system.contains("END-MARKER"));
    assert!(
        system.contains("[... cut: the file is 20490 bytes; only the first 16384 are shown]"),
        "the cut is said"
    );
}
