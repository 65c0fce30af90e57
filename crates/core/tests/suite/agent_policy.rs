//! The turn loop with the permission policy, over real HTTP against the mock model server:
//! headless runs (every ask a deny), the project-trust question, hard-linked files, and an edit
//! prepared once from policy to run.

use std::sync::Arc;

use futures::future::BoxFuture;
use keel_core::agent::{
    AgentEvent, Answer, ApprovalAnswer, ApprovalRequest, Engine, QuestionItem, TurnHost, TurnStop,
};
use keel_testkit::mock_model::{Api, Turn};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::agent::{Fixture, Host, fixture, options, prompt, tool_results};

#[tokio::test]
async fn headless_turns_ask_into_deny_and_real_reads_go_through() {
    let f = fixture(Api::Anthropic, 1).await;
    std::fs::write(f.workspace.join("notes.txt"), "alpha\nbeta\n").unwrap();
    f.mock.push_anthropic(
        Turn::new()
            .tool_call("r1", "read", json!({"file_path": "notes.txt"}))
            .tool_call(
                "w1",
                "write",
                json!({"file_path": "new.txt", "content": "x"}),
            ),
    );
    f.mock.push_anthropic(Turn::text_only("I could not write."));
    let session = f.engine.open_session(options(&f, false)).unwrap();
    let host = Arc::new(Host::default());
    let outcome = session
        .run_turn(prompt("go"), host.clone(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.denied_calls, 1);
    assert!(
        host.approvals.lock().unwrap().is_empty(),
        "a headless session never prompts"
    );
    let results = tool_results(Api::Anthropic, &f.mock.requests()[1].body);
    assert_eq!(results[0].0, "r1");
    assert!(
        results[0].1.starts_with("     1\talpha\n     2\tbeta"),
        "{}",
        results[0].1
    );
    assert_eq!(
        results[1],
        (
            "w1".to_owned(),
            keel_core::policy::HEADLESS_DENIAL.to_owned()
        )
    );
    assert!(!f.workspace.join("new.txt").exists());
}

#[tokio::test]
async fn a_headless_subagent_is_denied_what_would_ask_and_nothing_prompts() {
    let f = fixture(Api::Anthropic, 1).await;
    f.mock.push_anthropic(Turn::new().tool_call(
        "p1",
        "task",
        json!({"prompt": "Write new.txt.", "description": "Write a file"}),
    ));
    f.mock.push_anthropic(Turn::new().tool_call(
        "c1",
        "write",
        json!({"file_path": "new.txt", "content": "x"}),
    ));
    f.mock
        .push_anthropic(Turn::text_only("The write was denied."));
    f.mock
        .push_anthropic(Turn::text_only("The subagent could not write."));
    let session = f.engine.open_session(options(&f, false)).unwrap();
    let host = Arc::new(Host::default());
    let outcome = session
        .run_turn(prompt("go"), host.clone(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.final_text, "The subagent could not write.");
    assert!(
        host.approvals.lock().unwrap().is_empty(),
        "a headless subagent never prompts"
    );
    assert!(!f.workspace.join("new.txt").exists());
    let requests = f.mock.requests();
    let child = tool_results(Api::Anthropic, &requests[2].body);
    assert_eq!(
        child[0],
        (
            "c1".to_owned(),
            keel_core::policy::HEADLESS_DENIAL.to_owned()
        )
    );
    let parent = tool_results(Api::Anthropic, &requests[3].body);
    assert_eq!(
        parent[0],
        ("p1".to_owned(), "The write was denied.".to_owned())
    );
    // The child's events reached the host wrapped, its call id prefixed.
    let events = host.events.lock().unwrap();
    assert!(events.iter().any(|event| matches!(
        event,
        AgentEvent::Subagent { parent_call_id, event, .. }
            if parent_call_id == "p1"
                && matches!(event.as_ref(), AgentEvent::ToolCall { call_id, .. } if call_id == "p1/c1")
    )));
}

/// A project whose own rules allow the `change` tool; `user_data` holds the trust store.
fn trusting_fixture(f: &Fixture, user_data: &std::path::Path) -> Engine {
    std::fs::create_dir_all(f.workspace.join(".keel")).unwrap();
    std::fs::write(
        f.workspace.join(".keel/permissions.toml"),
        "[[permission]]\npermission = \"change\"\naction = \"allow\"\n",
    )
    .unwrap();
    let mut config = f.engine.config().clone();
    config.user_data_dir = Some(user_data.to_path_buf());
    Engine::new(config)
}

#[tokio::test]
async fn the_first_turn_asks_whether_to_trust_the_projects_rules() {
    let f = fixture(Api::Anthropic, 1).await;
    let user_data = tempfile::tempdir().unwrap();
    let engine = trusting_fixture(&f, user_data.path());
    f.mock
        .push_anthropic(Turn::new().tool_call("c1", "change", json!({"name": "x"})));
    f.mock.push_anthropic(Turn::text_only("changed"));
    let session = engine.open_session(options(&f, true)).unwrap();
    let host = Arc::new(Host::default());
    host.answers
        .lock()
        .unwrap()
        .push(ApprovalAnswer::Answered(Answer::AllowAlways));
    let outcome = session
        .run_turn(prompt("go"), host.clone(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.stop, TurnStop::EndTurn);
    let approvals = host.approvals.lock().unwrap().clone();
    // One question (trust), and the project's allow rule then lets `change` through unasked.
    assert_eq!(approvals.len(), 1, "{approvals:?}");
    assert_eq!(approvals[0].tool_id, keel_core::agent::TRUST_QUESTION_ID);
    assert!(
        approvals[0].reason.contains("change"),
        "{}",
        approvals[0].reason
    );
    assert_eq!(*f.probe.order.lock().unwrap(), vec!["x"]);
    // Remembered: a new session of the same project does not ask again.
    f.mock
        .push_anthropic(Turn::new().tool_call("c2", "change", json!({"name": "y"})));
    f.mock.push_anthropic(Turn::text_only("changed again"));
    let again = engine.open_session(options(&f, true)).unwrap();
    let host = Arc::new(Host::default());
    again
        .run_turn(prompt("go"), host.clone(), CancellationToken::new())
        .await
        .unwrap();
    assert!(host.approvals.lock().unwrap().is_empty());
}

#[tokio::test]
async fn an_untrusted_projects_allow_rules_stay_ignored() {
    let f = fixture(Api::Anthropic, 1).await;
    let user_data = tempfile::tempdir().unwrap();
    let engine = trusting_fixture(&f, user_data.path());
    f.mock
        .push_anthropic(Turn::new().tool_call("c1", "change", json!({"name": "x"})));
    f.mock.push_anthropic(Turn::text_only("not changed"));
    let session = engine.open_session(options(&f, true)).unwrap();
    let host = Arc::new(Host::default());
    host.answers.lock().unwrap().extend([
        ApprovalAnswer::Answered(Answer::RejectOnce),
        ApprovalAnswer::Answered(Answer::RejectOnce),
    ]);
    session
        .run_turn(prompt("go"), host.clone(), CancellationToken::new())
        .await
        .unwrap();
    let approvals = host.approvals.lock().unwrap().clone();
    // The trust question, then the call itself is asked about (the allow rule is ignored).
    assert_eq!(approvals.len(), 2, "{approvals:?}");
    assert_eq!(approvals[1].tool_id, "change");
    assert!(f.probe.order.lock().unwrap().is_empty());
    assert!(!user_data.path().join(keel_core::agent::TRUST_FILE).exists());
}

/// The engine wires the file rules into the run: a hard-linked file is read only after the
/// user approved that call (told why), and a grep whose glob re-includes `.env` files gets
/// their names, never their content.
#[tokio::test]
async fn hard_linked_reads_ask_and_grep_skips_secrets_end_to_end() {
    let f = fixture(Api::Anthropic, 1).await;
    let outside = tempfile::tempdir_in(f.workspace.parent().unwrap()).unwrap();
    std::fs::write(outside.path().join("secret.txt"), "outside secret\n").unwrap();
    std::fs::hard_link(
        outside.path().join("secret.txt"),
        f.workspace.join("linked.txt"),
    )
    .unwrap();
    std::fs::write(f.workspace.join(".env"), "TOKEN=hunter2\n").unwrap();
    std::fs::write(f.workspace.join("config.txt"), "TOKEN=public\n").unwrap();
    f.mock.push_anthropic(
        Turn::new()
            .tool_call("r1", "read", json!({"file_path": "linked.txt"}))
            .tool_call(
                "g1",
                "grep",
                json!({"pattern": "TOKEN", "glob": "**/.env*", "output_mode": "content"}),
            )
            .tool_call(
                "g2",
                "grep",
                json!({"pattern": "TOKEN", "output_mode": "content"}),
            ),
    );
    f.mock.push_anthropic(Turn::text_only("done"));
    let session = f.engine.open_session(options(&f, true)).unwrap();
    let host = Arc::new(Host::default());
    session
        .run_turn(prompt("go"), host.clone(), CancellationToken::new())
        .await
        .unwrap();
    let approvals = host.approvals.lock().unwrap().clone();
    assert_eq!(approvals.len(), 1, "{approvals:?}");
    assert_eq!(approvals[0].tool_id, "read");
    assert!(
        approvals[0].reason.contains("2 hard links"),
        "{}",
        approvals[0].reason
    );
    let results = tool_results(Api::Anthropic, &f.mock.requests()[1].body);
    let result = |id: &str| {
        results
            .iter()
            .find(|(call, _)| call == id)
            .map(|(_, text)| text.clone())
            .unwrap()
    };
    assert!(result("r1").contains("outside secret"), "{}", result("r1"));
    for grep in ["g1", "g2"] {
        let text = result(grep);
        assert!(!text.contains("hunter2"), "{grep}: {text}");
        assert!(!text.contains("outside secret"), "{grep}: {text}");
        assert!(text.contains("not searched"), "{grep}: {text}");
    }
    assert!(result("g2").contains("config.txt:1:TOKEN=public"));
}

/// Editing a hard-linked file: the read and the edit each ask (the prompt's diff is built with
/// the user's permission), and the edit replaces the workspace name instead of writing through
/// the link. An edit whose preview fails tells the model nothing of the file's content.
#[tokio::test]
async fn editing_a_hard_linked_file_asks_and_replaces_the_link() {
    let f = fixture(Api::Anthropic, 1).await;
    let outside = tempfile::tempdir_in(f.workspace.parent().unwrap()).unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "outside secret\n").unwrap();
    std::fs::hard_link(&secret, f.workspace.join("linked.txt")).unwrap();
    std::fs::hard_link(&secret, f.workspace.join("unread.txt")).unwrap();
    f.mock
        .push_anthropic(Turn::new().tool_call("r1", "read", json!({"file_path": "linked.txt"})));
    f.mock.push_anthropic(
        Turn::new()
            .tool_call(
                "e1",
                "edit",
                json!({"file_path": "linked.txt", "old_string": "outside secret", "new_string": "edited"}),
            )
            .tool_call(
                "e2",
                "edit",
                json!({"file_path": "unread.txt", "old_string": "nope", "new_string": "x"}),
            ),
    );
    f.mock.push_anthropic(Turn::text_only("done"));
    let session = f.engine.open_session(options(&f, true)).unwrap();
    let host = Arc::new(Host::default());
    session
        .run_turn(prompt("go"), host.clone(), CancellationToken::new())
        .await
        .unwrap();
    let approvals = host.approvals.lock().unwrap().clone();
    let asked: Vec<&str> = approvals.iter().map(|a| a.tool_id.as_str()).collect();
    assert_eq!(asked, ["read", "edit"], "{approvals:?}");
    assert!(approvals.iter().all(|a| a.reason.contains("hard links")));
    assert_eq!(
        std::fs::read_to_string(f.workspace.join("linked.txt")).unwrap(),
        "edited\n"
    );
    assert_eq!(
        std::fs::read_to_string(&secret).unwrap(),
        "outside secret\n"
    );
    let results = tool_results(Api::Anthropic, &f.mock.requests()[2].body);
    let e2 = &results.iter().find(|(id, _)| id == "e2").unwrap().1;
    assert!(e2.contains("could not be prepared"), "{e2}");
    assert!(!e2.contains("outside secret"), "{e2}");
}

/// One edit call, through the whole path (schema check, capability check, policy, the diff
/// for the user's approval, the run), costs one argument parse, one path resolution, one read
/// of the file and one diff. The prompt shows the diff the run then writes.
#[tokio::test]
async fn an_edit_is_prepared_once_through_policy_approval_and_run() {
    use keel_core::runtime::tally::{self, Counts, Tally as Counter};
    let f = fixture(Api::Anthropic, 1).await;
    std::fs::write(f.workspace.join("notes.txt"), "one\ntwo\nthree\n").unwrap();
    f.mock
        .push_anthropic(Turn::new().tool_call("r1", "read", json!({"file_path": "notes.txt"})));
    f.mock.push_anthropic(Turn::text_only("read it"));
    f.mock.push_anthropic(Turn::new().tool_call(
        "e1",
        "edit",
        json!({"file_path": "notes.txt", "old_string": "two", "new_string": "2"}),
    ));
    f.mock.push_anthropic(Turn::text_only("done"));
    let session = f.engine.open_session(options(&f, true)).unwrap();
    let host = Arc::new(Host::default());
    session
        .run_turn(prompt("read"), host.clone(), CancellationToken::new())
        .await
        .unwrap();
    let counter = Counter::new();
    tally::scope(
        counter.clone(),
        session.run_turn(prompt("edit"), host.clone(), CancellationToken::new()),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(f.workspace.join("notes.txt")).unwrap(),
        "one\n2\nthree\n"
    );
    let approvals = host.approvals.lock().unwrap().clone();
    let [approval] = approvals.as_slice() else {
        panic!("one prompt expected: {approvals:?}");
    };
    assert_eq!(approval.tool_id, "edit");
    assert_eq!(approval.view.title, "Edit notes.txt");
    let Some(keel_core::tool::Preview::Diff(diff)) = &approval.preview else {
        panic!("the prompt shows the diff: {approval:?}");
    };
    assert_eq!(
        (diff.old_text.as_deref(), diff.new_text.as_str()),
        (Some("one\ntwo\nthree\n"), "one\n2\nthree\n")
    );
    let Counts {
        resolve,
        parse,
        read,
        diff,
        ..
    } = counter.counts();
    assert_eq!((resolve, parse, read, diff), (1, 1, 1, 1));
}

/// A file changed between the prompt's diff and the user's answer is not overwritten: the
/// prepared edit checks the file's stamp before it writes.
#[tokio::test]
async fn a_file_changed_while_the_user_decides_is_not_overwritten() {
    let f = fixture(Api::Anthropic, 1).await;
    let path = f.workspace.join("notes.txt");
    std::fs::write(&path, "one\ntwo\n").unwrap();
    f.mock
        .push_anthropic(Turn::new().tool_call("r1", "read", json!({"file_path": "notes.txt"})));
    f.mock.push_anthropic(Turn::new().tool_call(
        "e1",
        "edit",
        json!({"file_path": "notes.txt", "old_string": "two", "new_string": "2"}),
    ));
    f.mock.push_anthropic(Turn::text_only("done"));
    let session = f.engine.open_session(options(&f, true)).unwrap();
    let host = Arc::new(ChangingHost {
        inner: Host::default(),
        path: path.clone(),
    });
    session
        .run_turn(prompt("go"), host.clone(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "one\ntwo\nchanged meanwhile, and longer\n"
    );
    let results = tool_results(Api::Anthropic, &f.mock.requests()[2].body);
    let e1 = &results.iter().find(|(id, _)| id == "e1").unwrap().1;
    assert!(e1.contains("changed after the edit was prepared"), "{e1}");
}

/// Allows every prompt, after changing `path` on the disk while "the user decides".
struct ChangingHost {
    inner: Host,
    path: std::path::PathBuf,
}

impl TurnHost for ChangingHost {
    fn event(&self, event: AgentEvent) {
        self.inner.event(event);
    }

    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'_, ApprovalAnswer> {
        if request.tool_id == "edit" {
            std::fs::write(&self.path, "one\ntwo\nchanged meanwhile, and longer\n").unwrap();
        }
        self.inner.approve(request)
    }

    fn ask(&self, questions: Vec<QuestionItem>) -> BoxFuture<'_, Result<Vec<Vec<String>>, String>> {
        self.inner.ask(questions)
    }
}
