//! `apply_patch` over the real `keel acp` binary: one prompt showing every file's diff, all
//! files written or none, each file decided as a write to it is.

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason};
use keel_testkit::acp_client::{ClientOptions, PermissionReply, TestClient};
use keel_testkit::mock_model::{MockModel, Turn};
use serde_json::{Value, json};

use super::support::{KeelHome, TEST_MODEL};

const LIB: &str = "\
pub fn greet() -> &'static str {
    \"helo\"
}

pub fn part() -> u32 {
    1
}
";

const OLD: &str = "obsolete\n";

/// A patch that adds `notes.txt`, changes `src/lib.rs` in two hunks and deletes `old.txt`.
const THREE_FILES: &str = "\
*** Begin Patch
*** Add File: notes.txt
+first note
+second note
*** Update File: src/lib.rs
@@ pub fn greet() -> &'static str {
-    \"helo\"
+    \"hello\"
@@ pub fn part() -> u32 {
-    1
+    2
*** Delete File: old.txt
*** End Patch
";

/// The same change as a unified diff whose second hunk of `src/lib.rs` names a line that is
/// not there.
const SECOND_HUNK_WRONG: &str = "\
--- /dev/null
+++ b/notes.txt
@@ -0,0 +1,1 @@
+first note
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,3 +1,3 @@
 pub fn greet() -> &'static str {
-    \"helo\"
+    \"hello\"
 }
@@ -5,3 +5,3 @@
 pub fn part() -> u32 {
-    42
+    43
 }
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-obsolete
";

struct Workspace {
    home: KeelHome,
    mock: MockModel,
}

impl Workspace {
    async fn new(files: &[(&str, &str)]) -> Self {
        let home = KeelHome::new();
        for (path, text) in files {
            let path = home.root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        Self {
            home,
            mock: MockModel::start().await,
        }
    }

    fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.home.root.join(path)).ok()
    }

    /// Runs one prompt over a fresh `keel acp` answering permission prompts with `replies`.
    async fn prompt(&self, replies: Vec<PermissionReply>, extra: &[(&str, &str)]) -> TestClient {
        let mut env = vec![TEST_MODEL];
        env.extend_from_slice(extra);
        let client = self
            .home
            .client(
                &self.mock,
                ClientOptions::default().permissions(replies),
                &env,
            )
            .await;
        let session = client
            .new_session(&self.home.root, &[])
            .await
            .unwrap()
            .session_id;
        let answer = client.prompt(&session, "apply the change").await.unwrap();
        assert_eq!(answer.stop_reason, StopReason::EndTurn);
        client
    }
}

/// The `tool_result` the model was sent for `id`, as text.
fn tool_result(mock: &MockModel, id: &str) -> String {
    for request in mock.requests() {
        for message in request.body["messages"].as_array().into_iter().flatten() {
            for block in message["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" && block["tool_use_id"] == id {
                    return block["content"].to_string();
                }
            }
        }
    }
    panic!("no tool_result for {id}")
}

/// The last `tool_call_update` of a call, as JSON.
fn finished(client: &TestClient, id: &str) -> Value {
    client
        .events()
        .iter()
        .map(|event| event.to_json())
        .rfind(|event| {
            event["update"]["sessionUpdate"] == "tool_call_update"
                && event["update"]["toolCallId"] == id
        })
        .map(|event| event["update"].clone())
        .unwrap_or_else(|| panic!("no update of {id}"))
}

/// The diffs of some tool call content, as (path relative to `root`, old text, new text).
fn diffs(content: &Value, root: &std::path::Path) -> Vec<(String, Option<String>, String)> {
    content
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == "diff")
        .map(|item| {
            let path = item["path"].as_str().unwrap();
            (
                path.strip_prefix(&format!("{}/", root.display()))
                    .unwrap_or(path)
                    .to_owned(),
                item["oldText"].as_str().map(str::to_owned),
                item["newText"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn read_both() -> Turn {
    Turn::new()
        .tool_call("r1", "read", json!({"file_path": "src/lib.rs"}))
        .tool_call("r2", "read", json!({"file_path": "old.txt"}))
}

#[tokio::test]
async fn a_three_file_patch_is_approved_once_and_applied() {
    let work = Workspace::new(&[("src/lib.rs", LIB), ("old.txt", OLD)]).await;
    work.mock.push_anthropic(read_both());
    work.mock.push_anthropic(Turn::new().tool_call(
        "p1",
        "apply_patch",
        json!({"input": THREE_FILES}),
    ));
    work.mock.push_anthropic(Turn::text_only("Patched."));
    let client = work
        .prompt(
            vec![PermissionReply::Choose(PermissionOptionKind::AllowOnce)],
            &[],
        )
        .await;
    let root = &work.home.root;
    // One prompt, showing the three files' diffs and naming each file as a location.
    let requests = client.permission_requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let asked = serde_json::to_value(&requests[0].tool_call).unwrap();
    assert_eq!(asked["kind"], "edit", "{asked:#}");
    assert_eq!(
        diffs(&asked["content"], root),
        vec![
            (
                "notes.txt".to_owned(),
                None,
                "first note\nsecond note\n".to_owned()
            ),
            (
                "src/lib.rs".to_owned(),
                Some(LIB.to_owned()),
                LIB.replace("helo", "hello").replace("    1\n", "    2\n")
            ),
            ("old.txt".to_owned(), Some(OLD.to_owned()), String::new()),
        ]
    );
    let said = asked["content"].to_string();
    assert!(
        said.contains(
            "Keel will apply this patch to 3 files: `notes.txt`, `src/lib.rs`, `old.txt`."
        ),
        "{said}"
    );
    let locations: Vec<&str> = asked["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["path"].as_str().unwrap())
        .collect();
    assert_eq!(locations.len(), 3, "{asked:#}");
    assert!(
        locations
            .iter()
            .all(|p| p.starts_with(&root.display().to_string()))
    );
    // Applied: all three files.
    assert_eq!(
        work.read("notes.txt").as_deref(),
        Some("first note\nsecond note\n")
    );
    assert_eq!(
        work.read("src/lib.rs").unwrap(),
        LIB.replace("helo", "hello").replace("    1\n", "    2\n")
    );
    assert_eq!(work.read("old.txt"), None);
    // The editor gets every diff and every file as a location in the finished call.
    let done = finished(&client, "p1");
    assert_eq!(done["status"], "completed", "{done:#}");
    assert_eq!(diffs(&done["content"], root).len(), 3, "{done:#}");
    assert_eq!(
        done["locations"].as_array().map(Vec::len),
        Some(3),
        "{done:#}"
    );
    let result = tool_result(&work.mock, "p1");
    assert!(result.contains("Applied the patch to 3 files"), "{result}");
    assert!(result.contains("M src/lib.rs (+2 −2 lines)"), "{result}");
}

#[tokio::test]
async fn a_patch_whose_second_hunk_does_not_apply_changes_nothing() {
    let work = Workspace::new(&[("src/lib.rs", LIB), ("old.txt", OLD)]).await;
    work.mock.push_anthropic(read_both());
    work.mock.push_anthropic(Turn::new().tool_call(
        "p1",
        "apply_patch",
        json!({"input": SECOND_HUNK_WRONG}),
    ));
    work.mock
        .push_anthropic(Turn::text_only("It did not apply."));
    let client = work
        .prompt(
            vec![PermissionReply::Choose(PermissionOptionKind::AllowOnce)],
            &[],
        )
        .await;
    // A patch that cannot apply is refused before anyone is asked; every file is as it was.
    assert!(client.permission_requests().is_empty());
    assert_eq!(work.read("src/lib.rs").as_deref(), Some(LIB));
    assert_eq!(work.read("old.txt").as_deref(), Some(OLD));
    assert_eq!(work.read("notes.txt"), None);
    let result = tool_result(&work.mock, "p1");
    assert!(
        result.contains("src/lib.rs: hunk 2 does not apply"),
        "{result}"
    );
    assert!(result.contains("`    42` is not in the file"), "{result}");
    assert!(result.contains("Nothing was written"), "{result}");
    assert_eq!(finished(&client, "p1")["status"], "failed");
}

/// In `yolo` mode a write to a workflow file is still asked (CI runs it): a patch touching one
/// is asked as a write to it is, and rejecting it writes none of its files. The same patch
/// without the workflow runs unasked.
#[tokio::test]
async fn a_patch_touching_a_workflow_asks_as_a_write_to_it_does() {
    let patch = "\
*** Begin Patch
*** Add File: src/extra.rs
+pub fn extra() {}
*** Add File: .github/workflows/ci.yml
+on: push
*** End Patch
";
    let work = Workspace::new(&[("src/lib.rs", LIB)]).await;
    work.home.user_config("mode = \"yolo\"\n");
    work.mock.push_anthropic(Turn::new().tool_call(
        "w1",
        "write",
        json!({"file_path": ".github/workflows/ci.yml", "content": "on: push\n"}),
    ));
    work.mock
        .push_anthropic(Turn::new().tool_call("p1", "apply_patch", json!({"input": patch})));
    work.mock.push_anthropic(Turn::text_only("Rejected twice."));
    let client = work
        .prompt(
            vec![
                PermissionReply::Choose(PermissionOptionKind::RejectOnce),
                PermissionReply::Choose(PermissionOptionKind::RejectOnce),
            ],
            &[],
        )
        .await;
    let requests = client.permission_requests();
    assert_eq!(requests.len(), 2, "the write and the patch are both asked");
    let reason = |index: usize| -> String {
        serde_json::to_value(&requests[index].tool_call).unwrap()["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["content"]["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (write_reason, patch_reason) = (reason(0), reason(1));
    assert!(
        write_reason.contains("acted on by other programs"),
        "{write_reason}"
    );
    assert!(
        patch_reason.contains("acted on by other programs"),
        "{patch_reason}"
    );
    let asked = serde_json::to_value(&requests[1].tool_call).unwrap();
    assert_eq!(
        diffs(&asked["content"], &work.home.root).len(),
        2,
        "{asked:#}"
    );
    // No "always" for a file that is asked every time.
    assert!(
        !requests[1]
            .options
            .iter()
            .any(|o| o.kind == PermissionOptionKind::AllowAlways),
        "{:?}",
        requests[1].options
    );
    assert_eq!(work.read("src/extra.rs"), None);
    assert_eq!(work.read(".github/workflows/ci.yml"), None);
    assert!(tool_result(&work.mock, "p1").contains("The user rejected this tool call"));

    // Without the workflow, yolo runs the patch unasked.
    work.mock.push_anthropic(Turn::new().tool_call(
        "p2",
        "apply_patch",
        json!({"input": "*** Begin Patch\n*** Add File: src/extra.rs\n+pub fn extra() {}\n*** End Patch\n"}),
    ));
    work.mock.push_anthropic(Turn::text_only("Added."));
    let client = work.prompt(Vec::new(), &[]).await;
    assert!(client.permission_requests().is_empty());
    assert_eq!(
        work.read("src/extra.rs").as_deref(),
        Some("pub fn extra() {}\n")
    );
}
