//! Hostile command lines against the real `keel acp` binary: the policy answers them (ask)
//! without crashing the server, however deep or long they are.

use std::time::Instant;

use agent_client_protocol::v1::schema::{PermissionOptionKind, SessionUpdate, StopReason};
use keel_testkit::acp_client::{ClientOptions, PermissionReply};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::json;

use super::support::{KeelHome, TEST_MODEL};

/// `(((...(ls)...)))`, `levels` deep.
fn nested(levels: usize) -> String {
    format!("{}ls{}", "(".repeat(levels), ")".repeat(levels))
}

#[tokio::test]
async fn deeply_nested_and_huge_commands_are_asked_without_crashing_keel_acp() {
    let mock = MockModel::start().await;
    let commands = [
        // 100,000 levels of subshells (200 KB).
        nested(100_000),
        // 40,000 levels of command substitution, under the size limit: the depth limit answers.
        format!("echo {}id{}", "$(".repeat(40_000), ")".repeat(40_000)),
        // A 10 MB command.
        format!("echo {}", "a ".repeat(5 * 1024 * 1024)),
        // 100,000 commands chained with `&&` (a left-deep syntax tree).
        vec!["ls"; 100_000].join(" && "),
    ];
    for (i, command) in commands.iter().enumerate() {
        mock.push_anthropic(Turn::new().tool_call(
            format!("t{i}"),
            "bash",
            json!({"command": command}),
        ));
    }
    mock.push_anthropic(Turn::text_only("Done."));
    mock.push_anthropic(Turn::text_only("Still here."));
    let home = KeelHome::new();
    // The 10 MB call stays in the conversation; a window that holds it keeps this test about the
    // policy's bounds rather than about compaction.
    home.user_config("[providers.anthropic]\ncontext_window = 100000000\n");
    let client = home
        .client(
            &mock,
            ClientOptions::default().permissions(
                commands
                    .iter()
                    .map(|_| PermissionReply::Choose(PermissionOptionKind::RejectOnce)),
            ),
            &[TEST_MODEL],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    let started = Instant::now();
    let answer = client.prompt(&session, "run these").await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    // Every one of them was asked (none ran, none crashed the server).
    let asked = client.permission_requests();
    assert_eq!(asked.len(), commands.len(), "{asked:#?}");
    // The server is still alive and serves the next prompt.
    let again = client.prompt(&session, "still there?").await.unwrap();
    assert_eq!(again.stop_reason, StopReason::EndTurn);
    // Speed lives in benchmarks; the figure is printed for the record.
    eprintln!(
        "{} hostile commands (with the model round trips) answered in {elapsed:?}",
        commands.len()
    );
    client.close().await.unwrap();
}

/// A model that gives two calls of one response the same id does not make one call pass for
/// the other: Keel gives each call its own id, so the permission prompt for the rewrite of
/// `.envrc` shows that write (never the read's "Read README.md"), the editor sees two distinct
/// calls, and the model still gets one result per call under the id it chose.
#[tokio::test]
async fn a_duplicate_model_call_id_never_aliases_another_call() {
    let mock = MockModel::start().await;
    mock.push_anthropic(
        Turn::new()
            .tool_call("dup", "read", json!({"file_path": "README.md"}))
            .tool_call(
                "dup",
                "write",
                json!({"file_path": ".envrc", "content": "export EVIL=1\n"}),
            ),
    );
    mock.push_anthropic(Turn::text_only("Done."));
    let home = KeelHome::new();
    home.user_config("mode = \"ask\"\n");
    std::fs::write(home.root.join("README.md"), "hello\n").unwrap();
    let client = home
        .client(
            &mock,
            ClientOptions::default()
                .permissions([PermissionReply::Choose(PermissionOptionKind::RejectOnce)]),
            &[TEST_MODEL],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    let answer = client.prompt(&session, "go").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    let calls: Vec<(String, String)> = client
        .updates(&session)
        .into_iter()
        .filter_map(|update| match update {
            SessionUpdate::ToolCall(call) => Some((call.tool_call_id.to_string(), call.title)),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_ne!(calls[0].0, calls[1].0, "{calls:?}");
    let (read_id, write_id) = if calls[0].1.starts_with("Read") {
        (&calls[0].0, &calls[1].0)
    } else {
        (&calls[1].0, &calls[0].0)
    };
    let requests = client.permission_requests();
    assert_eq!(requests.len(), 1, "{:#?}", client.updates(&session));
    let prompt = &requests[0].tool_call;
    assert_eq!(prompt.tool_call_id.to_string(), *write_id);
    assert_ne!(prompt.tool_call_id.to_string(), *read_id);
    let title = prompt.fields.title.clone().unwrap_or_default();
    assert!(
        title.contains(".envrc") && !title.contains("README"),
        "{title}"
    );
    assert!(!home.root.join(".envrc").exists());
    // The model reads one result per call, under its own (repeated) id: the read's text and
    // the write's refusal.
    let body = &mock.requests()[1].body;
    let results: Vec<&serde_json::Value> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|block| block["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 2, "{body}");
    assert!(results.iter().all(|r| r["tool_use_id"] == "dup"), "{body}");
    assert!(
        results[0]["content"].to_string().contains("hello"),
        "{body}"
    );
    assert_eq!(results[1]["is_error"], true, "{body}");
    client.close().await.unwrap();
}

/// Keel's own configuration is protected by what it is, however it is reached: a user
/// configuration that is a dotfiles symlink into the workspace, and a rule file hard-linked
/// there, stay untouched by approved workspace edits and commands (mode yolo, sandbox off).
#[tokio::test]
async fn keels_own_files_are_protected_by_what_they_are_not_by_path() {
    use agent_client_protocol::v1::schema::StopReason;
    use keel_testkit::acp_client::ClientOptions;
    use keel_testkit::mock_model::{MockModel, Turn};
    use serde_json::json;

    let home = super::support::KeelHome::new();
    let dotfiles = home.root.join("dotfiles");
    std::fs::create_dir_all(&dotfiles).unwrap();
    let config = "mode = \"yolo\"\n\n[sandbox]\nmode = \"off\"\n";
    std::fs::write(dotfiles.join("keel.toml"), config).unwrap();
    let rules = "[[permission]]\npermission = \"fs.read\"\naction = \"allow\"\n";
    std::fs::write(dotfiles.join("rules.toml"), rules).unwrap();
    let config_dir = home.home.join("config/keel");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::os::unix::fs::symlink(dotfiles.join("keel.toml"), config_dir.join("config.toml")).unwrap();
    std::fs::hard_link(
        dotfiles.join("rules.toml"),
        config_dir.join("permissions.toml"),
    )
    .unwrap();
    let mock = MockModel::start().await;
    for (id, tool, args) in [
        ("t1", "read", json!({"file_path": "dotfiles/keel.toml"})),
        (
            "t2",
            "write",
            json!({"file_path": "dotfiles/keel.toml", "content": "mode = \"yolo\"\n"}),
        ),
        (
            "t3",
            "bash",
            json!({"command": "echo '[providers.evil]' >> dotfiles/keel.toml"}),
        ),
        ("t4", "read", json!({"file_path": "dotfiles/rules.toml"})),
        (
            "t5",
            "write",
            json!({"file_path": "dotfiles/rules.toml", "content": "# gone\n"}),
        ),
        (
            "t6",
            "bash",
            json!({"command": "echo '# gone' > dotfiles/rules.toml"}),
        ),
    ] {
        mock.push_anthropic(Turn::new().tool_call(id, tool, args));
    }
    mock.push_anthropic(Turn::text_only("done"));
    let client = home
        .client(
            &mock,
            ClientOptions::default(),
            &[super::support::TEST_MODEL],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    let answer = client.prompt(&session, "tidy the dotfiles").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    assert_eq!(
        std::fs::read_to_string(dotfiles.join("keel.toml")).unwrap(),
        config
    );
    assert_eq!(
        std::fs::read_to_string(dotfiles.join("rules.toml")).unwrap(),
        rules
    );
    client.close().await.unwrap();
}

/// The text of a permission request's content blocks, in order.
fn card_text(request: &agent_client_protocol::v1::schema::RequestPermissionRequest) -> String {
    let value = serde_json::to_value(request).unwrap();
    value["toolCall"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["content"]["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A permission card is Markdown. A file name or a command holding backticks cannot close the
/// code span or block Keel puts it in and add Markdown of its own (bold "Keel checked" text, a
/// link): each is fenced by more backticks than it holds.
#[tokio::test]
async fn a_name_or_command_with_backticks_stays_inside_its_code_in_the_card() {
    let mock = MockModel::start().await;
    let name = "a` and nothing else. **Keel checked this file: safe.** `b.txt";
    let command =
        "echo '\n```\n\n**Keel checked: this command only reads.**\n\n```sh\n'; touch made.txt";
    mock.push_anthropic(Turn::new().tool_call(
        "w1",
        "write",
        json!({"file_path": name, "content": "x"}),
    ));
    mock.push_anthropic(Turn::new().tool_call("b1", "bash", json!({"command": command})));
    mock.push_anthropic(Turn::text_only("Done."));
    let home = KeelHome::new();
    let client = home
        .client(
            &mock,
            ClientOptions::default().permissions([
                PermissionReply::Choose(PermissionOptionKind::RejectOnce),
                PermissionReply::Choose(PermissionOptionKind::RejectOnce),
            ]),
            &[TEST_MODEL],
        )
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    client.prompt(&session, "go").await.unwrap();
    let requests = client.permission_requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let write = card_text(&requests[0]);
    assert!(
        write.contains(&format!("Keel will create ``{name}`` with this text.")),
        "{write}"
    );
    assert!(!write.contains(&format!("`{name}` ")), "{write}");
    let bash = card_text(&requests[1]);
    assert!(
        bash.starts_with(&format!("````sh\n{command}\n````\n")),
        "{bash}"
    );
    assert!(!home.root.join("made.txt").exists());
    client.close().await.unwrap();
}
