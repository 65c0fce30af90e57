//! The stdio transport, with requests pipelined behind `initialize` held back until it is answered.
//!
//! The ACP crate refuses every request that arrives while the `initialize` response has not been
//! written yet ("initialization must complete"). A client is allowed to pipeline, though: an editor
//! that writes `initialize` and `session/new` back to back must get a session, not an error. So the
//! incoming side stops reading after an `initialize` request until the outgoing side has written
//! the answer with the same id; what the client sent meanwhile waits in the pipe, in order.

use std::sync::{Arc, Mutex, PoisonError};

use agent_client_protocol::Lines;
use futures::{Sink, Stream};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Notify;

/// Lines over `outgoing`/`incoming`, with requests that follow an `initialize` held back until
/// its answer has been written.
pub fn pipelined(
    outgoing: impl AsyncWrite + Send + Unpin + 'static,
    incoming: impl AsyncRead + Send + Unpin + 'static,
) -> Lines<
    impl Sink<String, Error = std::io::Error> + Send + 'static,
    impl Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    let gate = Arc::new(InitializeGate::default());
    let reader = BufReader::new(incoming).lines();
    let incoming = futures::stream::unfold((reader, gate.clone()), async |(mut reader, gate)| {
        gate.wait_open().await;
        let line = reader.next_line().await.transpose()?;
        if let Ok(text) = &line {
            gate.close_on_initialize(text);
        }
        Some((line, (reader, gate)))
    });
    let outgoing = futures::sink::unfold(
        (outgoing, gate),
        async |(mut writer, gate), line: String| {
            writer.write_all(line.as_bytes()).await?;
            writer.write_all(b"\n").await?;
            writer.flush().await?;
            gate.open_on_answer(&line);
            Ok::<_, std::io::Error>((writer, gate))
        },
    );
    Lines::new(Box::pin(outgoing), Box::pin(incoming))
}

/// The id of the `initialize` request that has not been answered yet, if any.
#[derive(Default)]
struct InitializeGate {
    pending: Mutex<Option<Value>>,
    opened: Notify,
}

impl InitializeGate {
    fn pending(&self) -> std::sync::MutexGuard<'_, Option<Value>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Closes the gate when `line` is an `initialize` request (it has an id to wait for).
    fn close_on_initialize(&self, line: &str) {
        // A cheap test first: nearly every line is something else.
        if !line.contains("\"initialize\"") {
            return;
        }
        let Ok(Value::Object(message)) = serde_json::from_str::<Value>(line) else {
            return;
        };
        if message.get("method").and_then(Value::as_str) == Some("initialize")
            && let Some(id) = message.get("id")
        {
            *self.pending() = Some(id.clone());
        }
    }

    /// Opens the gate when `line` answers the pending `initialize` (a result or an error). An
    /// error with a `null` id also opens it: the ACP crate answers so when it cannot read the
    /// `initialize` line as a request (an id it does not accept, such as `1.5`, `true` or
    /// 2^64, a missing `jsonrpc`, a stray `result`), and no answer with the line's own id will
    /// ever come; waiting for one would stop the server reading for good.
    fn open_on_answer(&self, line: &str) {
        let mut pending = self.pending();
        let Some(id) = pending.as_ref() else {
            return;
        };
        let Ok(Value::Object(message)) = serde_json::from_str::<Value>(line) else {
            return;
        };
        let answers = message.get("id") == Some(id)
            || (message.get("id") == Some(&Value::Null) && message.contains_key("error"));
        if !message.contains_key("method") && answers {
            *pending = None;
            drop(pending);
            self.opened.notify_one();
        }
    }

    async fn wait_open(&self) {
        while self.pending().is_some() {
            self.opened.notified().await;
        }
    }
}

impl std::fmt::Debug for InitializeGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InitializeGate").finish_non_exhaustive()
    }
}
