//! Other agents' tool names over the real `keel acp` binary: never offered, run as Keel's own
//! tool when called (same policy path, same approval), the result carrying `_deprecation`.

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason};
use keel_testkit::acp_client::{ClientOptions, PermissionReply, TestClient};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::{Value, json};

use super::support::{KeelHome, TEST_MODEL};

const LIB: &str = "pub fn greet() -> &'static str {\n    \"helo\"\n}\n";

/// Every name of the alias table that is not Keel's own tool name (opencode's `read` is, with
/// other argument names): none of them is offered to the model.
fn alias_names() -> Vec<&'static str> {
    keel_core::tools::aliases::ALIASES
        .iter()
        .filter(|alias| alias.name != alias.tool)
        .map(|alias| alias.name)
        .collect()
}

/// Runs `turns` against a fresh `keel acp` on a workspace holding `src/lib.rs`, every prompt
/// allowed once.
async fn run(turns: Vec<Turn>) -> (KeelHome, MockModel, TestClient) {
    let mock = MockModel::start().await;
    for turn in turns {
        mock.push_anthropic(turn);
    }
    mock.push_anthropic(Turn::text_only("Done."));
    let home = KeelHome::new();
    std::fs::create_dir_all(home.root.join("src")).unwrap();
    std::fs::write(home.root.join("src/lib.rs"), LIB).unwrap();
    let client = home
        .client(
            &mock,
            ClientOptions::default().permissions(
                (0..4).map(|_| PermissionReply::Choose(PermissionOptionKind::AllowOnce)),
            ),
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
    (home, mock, client)
}

/// The `tool_result` block the model was sent for `id`: its text and whether it is an error.
fn tool_result(mock: &MockModel, id: &str) -> (String, bool) {
    for request in mock.requests() {
        for message in request.body["messages"].as_array().into_iter().flatten() {
            for block in message["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" && block["tool_use_id"] == id {
                    return (
                        block["content"].to_string(),
                        block["is_error"].as_bool().unwrap_or(false),
                    );
                }
            }
        }
    }
    panic!("no tool_result for {id}")
}

/// The updates of one call, as JSON.
fn updates(client: &TestClient, id: &str) -> Vec<Value> {
    client
        .events()
        .iter()
        .map(|event| event.to_json())
        .filter(|event| event["update"]["toolCallId"] == id)
        .map(|event| event["update"].clone())
        .collect()
}

/// Checks that call `id` (named `alias`) ran as `tool`: announced as `tool`, finished, its
/// result to the model and its `rawOutput` carrying the `_deprecation` block; returns the
/// model's result text.
fn ran_as(mock: &MockModel, client: &TestClient, id: &str, alias: &str, tool: &str) -> String {
    let (result, is_error) = tool_result(mock, id);
    assert!(!is_error, "{result}");
    assert!(result.contains("_deprecation"), "{result}");
    assert!(
        result.contains(&format!("\\\"use_instead\\\":\\\"{tool}\\\"")),
        "{result}"
    );
    let updates = updates(client, id);
    let announced = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .unwrap_or_else(|| panic!("{id} not announced: {updates:#?}"));
    assert_eq!(announced["name"], tool, "{announced:#}");
    let done = updates.last().unwrap();
    assert_eq!(done["status"], "completed", "{done:#}");
    let block = &done["rawOutput"]["metadata"]["_deprecation"];
    assert_eq!(block["this_tool"], alias, "{done:#}");
    assert_eq!(block["use_instead"], tool, "{done:#}");
    // The first request offered none of the aliases (Keel's own names only).
    let first = &mock.requests()[0].body;
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for name in alias_names() {
        let keel_own = matches!(
            name,
            "read" | "write" | "edit" | "bash" | "grep" | "glob" | "web_fetch" | "apply_patch"
        );
        assert!(
            keel_own || !offered.contains(&name),
            "{name} offered: {offered:?}"
        );
    }
    result
}

#[tokio::test]
async fn claude_code_names_run_through_the_same_policy_as_keel_s() {
    let (home, mock, client) = run(vec![
        Turn::new().tool_call("c1", "Read", json!({"file_path": "src/lib.rs"})),
        Turn::new().tool_call(
            "c2",
            "Edit",
            json!({"file_path": "src/lib.rs", "old_string": "\"helo\"", "new_string": "\"hello\""}),
        ),
    ])
    .await;
    assert!(ran_as(&mock, &client, "c1", "Read", "read").contains("helo"));
    ran_as(&mock, &client, "c2", "Edit", "edit");
    // `Edit` was asked like `edit` (one prompt, about the canonical tool and its diff).
    let requests = client.permission_requests();
    assert_eq!(requests.len(), 1);
    let asked = serde_json::to_value(&requests[0].tool_call).unwrap();
    assert_eq!(asked["kind"], "edit", "{asked:#}");
    assert!(
        asked["content"].to_string().contains("\"type\":\"diff\""),
        "{asked:#}"
    );
    assert_eq!(
        std::fs::read_to_string(home.root.join("src/lib.rs")).unwrap(),
        LIB.replace("helo", "hello")
    );
}

#[tokio::test]
async fn gemini_cli_names_run_with_their_arguments_translated() {
    let (home, mock, client) = run(vec![
        Turn::new()
            .tool_call(
                "g1",
                "read_file",
                json!({"absolute_path": "src/lib.rs", "offset": 1, "limit": 1}),
            )
            .tool_call(
                "g2",
                "search_file_content",
                json!({"pattern": "helo", "include": "*.rs"}),
            ),
    ])
    .await;
    // Gemini's offset counts from 0: line 2 is the one with the string.
    let read = ran_as(&mock, &client, "g1", "read_file", "read");
    assert!(read.contains("\\\"helo\\\""), "{read}");
    assert!(!read.contains("greet"), "{read}");
    let found = ran_as(&mock, &client, "g2", "search_file_content", "grep");
    assert!(found.contains("lib.rs"), "{found}");
    drop(home);
}

#[tokio::test]
async fn codex_names_run_with_their_arguments_translated() {
    let (home, mock, client) = run(vec![
        Turn::new().tool_call(
            "x1",
            "shell",
            json!({"command": ["bash", "-lc", "echo from-codex"], "workdir": "src"}),
        ),
        Turn::new().tool_call(
            "x2",
            "update_plan",
            json!({"explanation": "steps", "plan": [{"step": "Fix the typo", "status": "in_progress"}]}),
        ),
    ])
    .await;
    let output = ran_as(&mock, &client, "x1", "shell", "bash");
    assert!(output.contains("from-codex"), "{output}");
    ran_as(&mock, &client, "x2", "update_plan", "todo");
    // The plan reached the editor as `todo`'s does.
    let plan = client
        .events()
        .iter()
        .map(|e| e.to_json())
        .find(|e| e["update"]["sessionUpdate"] == "plan")
        .expect("a plan update");
    assert_eq!(plan["update"]["entries"][0]["content"], "Fix the typo");
    drop(home);
}

#[tokio::test]
async fn opencode_names_run_with_their_arguments_translated() {
    let (home, mock, client) = run(vec![
        Turn::new().tool_call("o1", "read", json!({"filePath": "src/lib.rs"})),
        Turn::new().tool_call(
            "o2",
            "patch",
            json!({"patchText": "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-    \"helo\"\n+    \"hello\"\n*** End Patch\n"}),
        ),
    ])
    .await;
    assert!(ran_as(&mock, &client, "o1", "read", "read").contains("helo"));
    ran_as(&mock, &client, "o2", "patch", "apply_patch");
    assert_eq!(client.permission_requests().len(), 1);
    assert_eq!(
        std::fs::read_to_string(home.root.join("src/lib.rs")).unwrap(),
        LIB.replace("helo", "hello")
    );
}

/// An argument the table does not know stays a schema error of the canonical tool, and the
/// result still says which tool to use.
#[tokio::test]
async fn unknown_arguments_of_an_alias_are_a_schema_error() {
    let (_home, mock, client) = run(vec![Turn::new().tool_call(
        "u1",
        "Read",
        json!({"file_path": "src/lib.rs", "pages": "1-2"}),
    )])
    .await;
    let (result, is_error) = tool_result(&mock, "u1");
    assert!(is_error, "{result}");
    assert!(result.contains("invalid arguments for `read`"), "{result}");
    assert!(result.contains("pages"), "{result}");
    assert!(result.contains("_deprecation"), "{result}");
    assert_eq!(updates(&client, "u1").last().unwrap()["status"], "failed");
}
