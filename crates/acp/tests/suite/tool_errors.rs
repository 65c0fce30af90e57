//! A failure of Keel itself during a tool call, over ACP: logged with its source chain, shown to
//! the user in the call's `tool_call_update`, and a neutral message for the model.

use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::StopReason;
use keel_core::tool::InternalError;
use keel_testkit::acp_client::ClientOptions;
use keel_testkit::mock_model::Turn;
use serde_json::{Value, json};

use super::support::EngineHarness;

/// The log, captured.
#[derive(Clone, Default)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogBuffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogBuffer {
    type Writer = LogBuffer;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test]
async fn an_internal_failure_is_logged_shown_to_the_user_and_neutral_for_the_model() {
    let log = LogBuffer::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(log.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::ERROR)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let lines: String = (0..300).map(|i| format!("needle {i}\n")).collect();
    let harness = EngineHarness::start(
        ClientOptions::default(),
        &[("big.txt", lines.as_str())],
        vec![
            Turn::new().tool_call(
                "g1",
                "grep",
                json!({"pattern": "needle", "output_mode": "content"}),
            ),
            Turn::text_only("ok"),
        ],
    )
    .await;
    // Keel's own state breaks: the session's scratch directory becomes a file, so the sidecar
    // of grep's long output cannot be written. `session/new` answers before the session has
    // opened in the background, so its directory may not be there yet.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let scratch = loop {
        let found = std::fs::read_dir(&harness.scratch)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|path| path.is_dir());
        match found {
            Some(path) => break path,
            None if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            None => panic!("the session's scratch directory did not appear"),
        }
    };
    std::fs::remove_dir_all(&scratch).unwrap();
    std::fs::write(&scratch, "not a directory").unwrap();

    assert_eq!(
        harness.prompt("find").await.stop_reason,
        StopReason::EndTurn
    );

    // The model: the neutral message only.
    let request = harness.mock.requests().last().unwrap().body.clone();
    let sent: Vec<Value> = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|block| block["type"] == "tool_result")
        .collect();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["is_error"], true);
    let for_model = sent[0]["content"].to_string();
    assert!(for_model.contains(InternalError::FOR_MODEL), "{for_model}");
    assert!(!for_model.contains("os error"), "{for_model}");
    assert!(!for_model.contains("scratch"), "{for_model}");

    // The user: the call failed, and its content says what Keel hit, source included.
    let events = harness.events_json();
    let last = events
        .iter()
        .rfind(|e| {
            e["update"]["sessionUpdate"] == "tool_call_update" && e["update"]["toolCallId"] == "g1"
        })
        .expect("the call's final update")
        .clone();
    assert_eq!(last["update"]["status"], "failed", "{last}");
    let shown = last["update"]["content"].to_string();
    assert!(
        shown.contains("Keel failed (not the model's call): internal error in Keel while writing a sidecar file: "),
        "{shown}"
    );
    assert!(shown.contains("os error"), "{shown}");

    // The log: the call, and the whole chain.
    let logged = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let line = logged
        .lines()
        .find(|line| line.contains("internal error during a tool call"))
        .unwrap_or_else(|| panic!("not logged: {logged}"));
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains("g1") && line.contains("grep"), "{line}");
    assert!(
        line.contains("internal error in Keel while writing a sidecar file: ")
            && line.contains("os error"),
        "{line}"
    );
}
