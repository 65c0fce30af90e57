//! Durable sessions over the real `keel acp` binary: the store survives SIGKILL, `session/load`
//! replays, `session/list` pages, resume / fork / close / delete, the lock between processes.

use std::path::Path;

use agent_client_protocol::v1::schema::{
    CloseSessionRequest, DeleteSessionRequest, ForkSessionRequest, ListSessionsRequest,
    LoadSessionRequest, PermissionOptionKind, ResumeSessionRequest, SessionId, SessionUpdate,
    StopReason,
};
use keel_core::provider::Message;
use keel_core::store::{SessionMeta, SessionStore, StoredEvent};
use keel_testkit::acp_client::{ClientOptions, PermissionReply, TestClient};
use keel_testkit::mock_model::{Api, MockModel, Reply, Turn};
use serde_json::{Value, json};

use super::support::{KeelHome, TEST_MODEL};

const LIB: &str = "pub fn greet() -> &'static str {\n    \"helo\"\n}\n";

/// A home and a workspace holding `src/lib.rs` ([`LIB`]).
fn with_lib() -> KeelHome {
    let home = KeelHome::new();
    std::fs::create_dir_all(home.root.join("src")).unwrap();
    std::fs::write(home.root.join("src/lib.rs"), LIB).unwrap();
    home
}

/// The session store the home's `keel acp` processes share.
fn store(home: &KeelHome) -> SessionStore {
    SessionStore::new(home.home.join("data/keel/sessions"))
}

/// One line per update, for comparing what a client was shown: consecutive chunks of one kind
/// are joined; ids that change from run to run are left out.
fn summary(updates: &[SessionUpdate]) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for update in updates {
        let value = serde_json::to_value(update).unwrap();
        let kind = value["sessionUpdate"].as_str().unwrap_or("?").to_owned();
        let line = match kind.as_str() {
            "user_message_chunk" | "agent_message_chunk" | "agent_thought_chunk" => {
                let text = value["content"]["text"].as_str().unwrap_or("").to_owned();
                if let Some(last) = lines.last_mut()
                    && last.starts_with(&format!("{kind}: "))
                {
                    last.push_str(&text);
                    continue;
                }
                format!("{kind}: {text}")
            }
            "tool_call" => format!(
                "tool_call {} {} {}",
                value["toolCallId"].as_str().unwrap_or(""),
                value["kind"].as_str().unwrap_or(""),
                value["title"].as_str().unwrap_or("")
            ),
            "tool_call_update" => {
                let content: Vec<String> = value["content"]
                    .as_array()
                    .map(|items| {
                        items
                            .iter()
                            .map(|item| match item["type"].as_str().unwrap_or("") {
                                "content" => format!(
                                    "text {:?}",
                                    item["content"]["text"].as_str().unwrap_or("")
                                ),
                                "diff" => format!(
                                    "diff {} {:?} -> {:?}",
                                    Path::new(item["path"].as_str().unwrap_or(""))
                                        .file_name()
                                        .map(|n| n.to_string_lossy().into_owned())
                                        .unwrap_or_default(),
                                    item["oldText"].as_str().unwrap_or(""),
                                    item["newText"].as_str().unwrap_or("")
                                ),
                                other => other.to_owned(),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                format!(
                    "update {} {} {}",
                    value["toolCallId"].as_str().unwrap_or(""),
                    value["status"].as_str().unwrap_or("-"),
                    content.join(" | ")
                )
            }
            "current_mode_update" => format!("mode {}", value["currentModeId"]),
            "session_info_update" => format!("title {}", value["title"]),
            other => other.to_owned(),
        };
        lines.push(line);
    }
    lines
}

/// The text of every user message the model was sent, in order.
fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "user")
        .flat_map(|message| match &message["content"] {
            Value::String(text) => vec![text.clone()],
            Value::Array(parts) => parts
                .iter()
                .filter_map(|part| part["text"].as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// The model's side of "fix the typo in lib.rs": a read, an edit, a command, then the answer.
fn push_fix_the_typo(mock: &MockModel) {
    mock.push_anthropic(Turn::new().tool_call("t0", "read", json!({"file_path": "src/lib.rs"})));
    mock.push_anthropic(Turn::new().tool_call(
        "t1",
        "edit",
        json!({"file_path": "src/lib.rs", "old_string": "\"helo\"", "new_string": "\"hello\""}),
    ));
    mock.push_anthropic(Turn::new().tool_call(
        "t2",
        "bash",
        json!({"command": "echo built-ok", "description": "Say it built"}),
    ));
    mock.push_anthropic(Turn::text_only("Fixed and checked."));
}

/// A `keel acp` process with terminals that fixes the typo in a new session (the edit and the
/// command allowed once); the process and the session's id.
async fn fix_the_typo(home: &KeelHome, mock: &MockModel) -> (TestClient, SessionId) {
    push_fix_the_typo(mock);
    let options = ClientOptions {
        terminals: true,
        ..ClientOptions::default()
    }
    .permissions([
        PermissionReply::Choose(PermissionOptionKind::AllowOnce),
        PermissionReply::Choose(PermissionOptionKind::AllowOnce),
    ]);
    let first = home.client(mock, options, &[TEST_MODEL]).await;
    let session = first.new_session(&home.root, &[]).await.unwrap().session_id;
    let answer = first
        .prompt(&session, "fix the typo in lib.rs")
        .await
        .unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    // The bash call ran in the client's terminal.
    assert!(!first.terminal_records().is_empty());
    let live = first.updates(&session);
    assert!(
        summary(&live).contains(&"title \"fix the typo in lib.rs\"".to_owned()),
        "{:#?}",
        summary(&live)
    );
    (first, session)
}

/// A second process cannot open the session while the first holds it.
async fn a_second_process_cannot_load(home: &KeelHome, mock: &MockModel, session: &SessionId) {
    let second = home
        .client(mock, ClientOptions::default(), &[TEST_MODEL])
        .await;
    let refused = second
        .request(LoadSessionRequest::new(session.clone(), &home.root))
        .await
        .unwrap_err();
    assert!(
        refused.message.contains("open in another Keel process"),
        "{refused:?}"
    );
    second.close().await.unwrap();
}

/// SIGKILL while a turn is in flight (its prompt sent, the model's answer stalled), waiting until
/// the process is gone.
async fn kill_mid_turn(mock: &MockModel, first: TestClient, session: &SessionId) {
    mock.push(
        Api::Anthropic,
        Reply::anthropic(&Turn::text_only("never finished")).stall_after(1),
    );
    let requests_before = mock.requests().len();
    let _pending = first.start_prompt(session, "now add a test");
    while mock.requests().len() == requests_before {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let pid = first.pid().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    drop(first);
    // The kernel releases the log's lock once the process is gone, not when the signal is sent.
    assert!(super::support::pid_gone(pid).await, "keel outlived SIGKILL");
}

/// A write cut short: half an event appended to the session's log.
fn tear_the_last_line(home: &KeelHome, session: &SessionId) {
    let log = store(home)
        .root()
        .join(session.0.as_ref())
        .join("events.jsonl");
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.extend_from_slice(br#"{"type":"text","message_id":"x","te"#);
    std::fs::write(&log, bytes).unwrap();
}

/// The workspace's listing holds the one session, with its title and time.
async fn listed_alone(client: &TestClient, home: &KeelHome, session: &SessionId) {
    let listed = client
        .request(ListSessionsRequest::new().cwd(home.root.clone()))
        .await
        .unwrap();
    assert_eq!(listed.sessions.len(), 1);
    assert_eq!(listed.sessions[0].session_id, *session);
    assert_eq!(
        listed.sessions[0].title.as_deref(),
        Some("fix the typo in lib.rs")
    );
    assert!(listed.sessions[0].updated_at.is_some());
}

/// `session/load` replays the fixed typo and the killed prompt (the torn line dropped), with
/// command output as text and no terminal.
async fn load_replays_the_killed_session(
    client: &TestClient,
    home: &KeelHome,
    session: &SessionId,
) {
    client
        .request(LoadSessionRequest::new(session.clone(), &home.root))
        .await
        .unwrap();
    let replayed = client.updates(session);
    let wire = serde_json::to_string(&replayed).unwrap();
    assert!(
        !wire.contains("terminal"),
        "a replay names a terminal: {wire}"
    );
    let lib_before = LIB;
    let lib_after = LIB.replace("helo", "hello");
    let expected = [
        "available_commands_update".to_owned(),
        "user_message_chunk: fix the typo in lib.rs".to_owned(),
        "tool_call t0 read Read src/lib.rs".to_owned(),
        format!(
            "update t0 completed text {:?}",
            "```\n     1\tpub fn greet() -> &'static str {\n     2\t    \"helo\"\n     3\t}\n```"
        ),
        "tool_call t1 edit Edit src/lib.rs".to_owned(),
        format!("update t1 completed diff lib.rs {lib_before:?} -> {lib_after:?}"),
        "tool_call t2 execute echo built-ok".to_owned(),
        // Command output as text, never the terminal it ran in.
        format!("update t2 completed text {:?}", "```console\nbuilt-ok\n```"),
        "agent_message_chunk: Fixed and checked.".to_owned(),
        // The prompt in flight when the process was killed.
        "user_message_chunk: now add a test".to_owned(),
        "usage_update".to_owned(),
        "mode \"allowlist\"".to_owned(),
        "config_option_update".to_owned(),
        "title \"fix the typo in lib.rs\"".to_owned(),
    ];
    assert_eq!(summary(&replayed), expected);
}

/// The next prompt continues the same conversation: the model gets every earlier prompt and call.
async fn the_next_prompt_continues(client: &TestClient, mock: &MockModel, session: &SessionId) {
    mock.push_anthropic(Turn::text_only("Added."));
    let answer = client.prompt(session, "go on").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    let request = mock.requests().last().unwrap().body.clone();
    let texts = user_texts(&request);
    assert_eq!(
        texts.first().map(String::as_str),
        Some("fix the typo in lib.rs")
    );
    assert!(
        texts.iter().any(|text| text == "now add a test"),
        "{texts:?}"
    );
    assert_eq!(texts.last().map(String::as_str), Some("go on"));
    let wire = request.to_string();
    for call in ["\"t0\"", "\"t1\"", "\"t2\"", "Fixed and checked."] {
        assert!(wire.contains(call), "the model lost {call}: {wire}");
    }
}

#[tokio::test]
async fn a_session_survives_sigkill_and_a_new_process_loads_and_continues_it() {
    let mock = MockModel::start().await;
    let home = with_lib();
    let (first, session) = fix_the_typo(&home, &mock).await;
    a_second_process_cannot_load(&home, &mock, &session).await;
    // A turn in flight when the process is killed: the prompt is kept.
    kill_mid_turn(&mock, first, &session).await;
    // A write cut short: the torn last line is dropped on load.
    tear_the_last_line(&home, &session);

    let third = home
        .client(&mock, ClientOptions::default(), &[TEST_MODEL])
        .await;
    listed_alone(&third, &home, &session).await;
    load_replays_the_killed_session(&third, &home, &session).await;
    the_next_prompt_continues(&third, &mock, &session).await;
    third.close().await.unwrap();
}

/// Stores a session directly, with one exchange in the model's view.
fn stored_session(store: &SessionStore, id: &str, cwd: &Path, title: &str) {
    let mut meta = SessionMeta::new(id, cwd.to_path_buf(), Vec::new());
    meta.title = Some(title.to_owned());
    let log = store.create(meta).unwrap();
    for event in [
        StoredEvent::User {
            content: vec![keel_core::agent::UserContent::Text {
                text: format!("question of {id}"),
            }],
        },
        StoredEvent::Message {
            message: Message::user_text(format!("question of {id}")),
        },
        StoredEvent::Text {
            message_id: "m".into(),
            text: format!("answer of {id}"),
        },
        StoredEvent::Message {
            message: Message::assistant_text(format!("answer of {id}")),
        },
    ] {
        log.append(&event).unwrap();
    }
}

/// Pages of 50, most recent first, filtered by cwd; the unused session is not listed, closing it
/// is fine, and a cursor Keel did not hand out is refused.
async fn lists_in_pages(client: &TestClient, home: &KeelHome, unused: &SessionId) {
    let first = client
        .request(ListSessionsRequest::new().cwd(home.root.clone()))
        .await
        .unwrap();
    assert_eq!(first.sessions.len(), 50);
    let cursor = first.next_cursor.clone().unwrap();
    let second = client
        .request(
            ListSessionsRequest::new()
                .cwd(home.root.clone())
                .cursor(cursor),
        )
        .await
        .unwrap();
    assert_eq!(second.sessions.len(), 10);
    assert_eq!(second.next_cursor, None);
    let mut ids: Vec<String> = first
        .sessions
        .iter()
        .chain(&second.sessions)
        .map(|s| s.session_id.to_string())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 60);
    assert!(!ids.contains(&unused.to_string()));
    client
        .request(CloseSessionRequest::new(unused.clone()))
        .await
        .unwrap();
    let all = client.request(ListSessionsRequest::new()).await.unwrap();
    assert_eq!(all.sessions.len(), 50);
    assert!(all.next_cursor.is_some());
    let bad = client
        .request(ListSessionsRequest::new().cursor("nonsense".to_owned()))
        .await
        .unwrap_err();
    assert!(bad.message.contains("invalid cursor"), "{bad:?}");
}

/// Resume: no replay, and the conversation continues.
async fn resume_continues_without_replay(
    client: &TestClient,
    mock: &MockModel,
    home: &KeelHome,
    id: &SessionId,
) {
    client
        .request(ResumeSessionRequest::new(id.clone(), &home.root))
        .await
        .unwrap();
    assert!(
        !summary(&client.updates(id))
            .iter()
            .any(|line| line.contains("question of s07")),
        "resume replayed history"
    );
    mock.push_anthropic(Turn::text_only("Resumed."));
    client.prompt(id, "and then?").await.unwrap();
    let texts = user_texts(&mock.requests().last().unwrap().body);
    assert_eq!(texts, vec!["question of s07", "and then?"]);
}

/// Fork: a new session with the same history; the source is untouched.
async fn fork_continues_and_leaves_its_source(
    client: &TestClient,
    mock: &MockModel,
    home: &KeelHome,
    id: &SessionId,
) {
    let forked = client
        .request(ForkSessionRequest::new(id.clone(), &home.root))
        .await
        .unwrap()
        .session_id;
    assert_ne!(forked, *id);
    mock.push_anthropic(Turn::text_only("Forked."));
    client.prompt(&forked, "in the fork").await.unwrap();
    let texts = user_texts(&mock.requests().last().unwrap().body);
    assert_eq!(
        texts,
        vec!["question of s07", "and then?", "in the fork"],
        "the fork continues from its source"
    );
    let (_, source_events) = store(home).read("s07").unwrap();
    assert!(
        !serde_json::to_string(&source_events)
            .unwrap()
            .contains("in the fork")
    );
}

/// A prompt naming a stored session this process has not opened reopens it.
async fn a_prompt_reopens_a_stored_session(client: &TestClient, mock: &MockModel) {
    mock.push_anthropic(Turn::text_only("Reopened."));
    client
        .prompt(&SessionId::new("s08"), "still there?")
        .await
        .unwrap();
    let texts = user_texts(&mock.requests().last().unwrap().body);
    assert_eq!(texts, vec!["question of s08", "still there?"]);
}

/// Delete: refused while another process holds the session, done once it is closed; then the
/// session is gone, and ids that could name a path are refused.
async fn delete_waits_for_close(
    client: &TestClient,
    mock: &MockModel,
    home: &KeelHome,
    id: &SessionId,
) {
    let other_process = home
        .client(mock, ClientOptions::default(), &[TEST_MODEL])
        .await;
    let refused = other_process
        .request(DeleteSessionRequest::new(id.clone()))
        .await
        .unwrap_err();
    assert!(
        refused.message.contains("open in another Keel process"),
        "{refused:?}"
    );
    client
        .request(CloseSessionRequest::new(id.clone()))
        .await
        .unwrap();
    other_process
        .request(DeleteSessionRequest::new(id.clone()))
        .await
        .unwrap();
    assert!(!store(home).contains("s07"));
    let gone = other_process
        .request(LoadSessionRequest::new(id.clone(), &home.root))
        .await
        .unwrap_err();
    assert_eq!(i32::from(gone.code), -32002, "{gone:?}");
    // Ids that could name a path are refused.
    let invalid = other_process
        .request(LoadSessionRequest::new(
            SessionId::new("../s08"),
            &home.root,
        ))
        .await
        .unwrap_err();
    assert!(
        invalid.message.contains("not a valid session id"),
        "{invalid:?}"
    );
    other_process.close().await.unwrap();
}

#[tokio::test]
async fn sessions_list_in_pages_resume_fork_close_and_delete() {
    let mock = MockModel::start().await;
    let home = with_lib();
    let other = tempfile::tempdir().unwrap();
    let store = store(&home);
    for n in 0..60 {
        stored_session(
            &store,
            &format!("s{n:02}"),
            &home.root,
            &format!("task {n}"),
        );
    }
    stored_session(&store, "elsewhere", other.path(), "another project");
    let client = home
        .client(&mock, ClientOptions::default(), &[TEST_MODEL])
        .await;
    // A session opened and never used is not listed (closing it removes it: the store's unit
    // tests show that; here the close may land before the session finished opening).
    let unused = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    lists_in_pages(&client, &home, &unused).await;

    let s07 = SessionId::new("s07");
    resume_continues_without_replay(&client, &mock, &home, &s07).await;
    fork_continues_and_leaves_its_source(&client, &mock, &home, &s07).await;
    a_prompt_reopens_a_stored_session(&client, &mock).await;
    delete_waits_for_close(&client, &mock, &home, &s07).await;
    client.close().await.unwrap();
}

/// A stored session belongs to its workspace: `session/load`, `session/resume` and
/// `session/fork` from another `cwd` are refused with an error naming both, the other project's
/// model never sees the history, and the stored session still opens from its own workspace
/// (also through a symlinked spelling of it: paths are compared canonical).
#[tokio::test]
async fn a_session_opens_only_in_its_own_workspace() {
    let mock = MockModel::start().await;
    let home = with_lib();
    let other = tempfile::tempdir().unwrap();
    let other = std::fs::canonicalize(other.path()).unwrap();
    let store = store(&home);
    stored_session(&store, "secret", &home.root, "the secret task");
    let client = home
        .client(&mock, ClientOptions::default(), &[TEST_MODEL])
        .await;
    let id = SessionId::new("secret");
    let refused = [
        client
            .request(LoadSessionRequest::new(id.clone(), &other))
            .await
            .unwrap_err(),
        client
            .request(ResumeSessionRequest::new(id.clone(), &other))
            .await
            .unwrap_err(),
        client
            .request(ForkSessionRequest::new(id.clone(), &other))
            .await
            .unwrap_err(),
    ];
    for error in &refused {
        assert_eq!(i32::from(error.code), -32602, "{error:?}");
        assert!(
            error.message.contains("belongs to the workspace")
                && error.message.contains(&home.root.display().to_string())
                && error.message.contains(&other.display().to_string()),
            "{error:?}"
        );
    }
    assert!(
        !summary(&client.updates(&id))
            .iter()
            .any(|line| line.contains("question of secret")),
        "the refused load replayed the history"
    );
    assert!(mock.requests().is_empty());
    // Only the source exists: the refused fork made no copy.
    let listed = client.request(ListSessionsRequest::new()).await.unwrap();
    assert_eq!(listed.sessions.len(), 1, "{listed:?}");

    // From its own workspace, spelled through a symlink, it loads and continues.
    let link = other.join("link");
    std::os::unix::fs::symlink(&home.root, &link).unwrap();
    client
        .request(LoadSessionRequest::new(id.clone(), &link))
        .await
        .unwrap();
    mock.push_anthropic(Turn::text_only("Still here."));
    client.prompt(&id, "and then?").await.unwrap();
    let texts = user_texts(&mock.requests().last().unwrap().body);
    assert_eq!(texts, vec!["question of secret", "and then?"]);
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_session_store_that_cannot_be_written_is_said_once_and_the_session_works() {
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::text_only("First."));
    mock.push_anthropic(Turn::text_only("Second."));
    let home = with_lib();
    // A file where the session store's directory should be: no session can be created there
    // (a permission bit would not stop a root test run).
    std::fs::create_dir_all(home.home.join("data/keel")).unwrap();
    std::fs::write(home.home.join("data/keel/sessions"), "not a directory").unwrap();
    let client = home
        .client(&mock, ClientOptions::default(), &[TEST_MODEL])
        .await;
    let session = client
        .new_session(&home.root, &[])
        .await
        .unwrap()
        .session_id;
    let answer = client.prompt(&session, "hello").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    let said = super::support::notices(&client, &session);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("This session is not saved") && said[0].contains("sessions"),
        "{}",
        said[0]
    );
    // The turn itself went on as usual, and the second turn does not repeat the notice.
    let answer = client.prompt(&session, "again").await.unwrap();
    assert_eq!(answer.stop_reason, StopReason::EndTurn);
    assert_eq!(super::support::notices(&client, &session).len(), 1);
    assert!(
        summary(&client.updates(&session))
            .iter()
            .any(|line| line.contains("Second.")),
        "{:#?}",
        summary(&client.updates(&session))
    );
    client.close().await.unwrap();
}
