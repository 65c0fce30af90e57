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
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Lines over `outgoing`/`incoming`, with requests that follow an `initialize` held back until
/// its answer has been written.
pub fn pipelined(
    outgoing: impl AsyncWrite + Send + Unpin + 'static,
    incoming: impl AsyncRead + Send + Unpin + 'static,
    backlog: Arc<Backlog>,
) -> Lines<
    impl Sink<String, Error = std::io::Error> + Send + 'static,
    impl Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    let gate = Arc::new(InitializeGate::default());
    // The client stopped reading (its end of the pipe is closed): the connection is over, as at
    // the end of its input, and ends the same way.
    let gone = CancellationToken::new();
    let reader = BufReader::new(incoming);
    // Both sides write to the client: the incoming side answers a request it refused as too
    // long itself (the ACP crate never sees that request).
    let writer = Arc::new(tokio::sync::Mutex::new(outgoing));
    let incoming = futures::stream::unfold(
        (reader, gate.clone(), writer.clone(), gone.clone()),
        async |(mut reader, gate, writer, gone)| {
            loop {
                let next = async {
                    gate.wait_open().await;
                    next_line(&mut reader, MAX_LINE).await
                };
                let next = tokio::select! {
                    () = gone.cancelled() => return None,
                    next = next => next,
                };
                let line = match next {
                    Ok(None) => return None,
                    Err(error) => return Some((Err(error), (reader, gate, writer, gone))),
                    Ok(Some(Line::Text(text))) => text,
                    Ok(Some(Line::Oversized(refused))) => match refused.answer() {
                        Refusal::ToClient(answer) => {
                            let mut out = writer.lock().await;
                            let written = async {
                                out.write_all(answer.as_bytes()).await?;
                                out.write_all(b"\n").await?;
                                out.flush().await
                            };
                            if let Err(error) = written.await {
                                if error.kind() == std::io::ErrorKind::BrokenPipe {
                                    return None;
                                }
                                return Some((Err(error), (reader, gate, writer.clone(), gone)));
                            }
                            continue;
                        }
                        Refusal::ToServer(line) => line,
                    },
                };
                gate.close_on_initialize(&line);
                return Some((Ok(line), (reader, gate, writer, gone)));
            }
        },
    );
    let outgoing = futures::sink::unfold(
        (writer, gate, backlog, gone),
        async |(writer, gate, backlog, gone), mut line: String| {
            if gone.is_cancelled() {
                return Ok((writer, gate, backlog, gone));
            }
            // One write a message: in blocking mode, each write goes through a thread of its own.
            line.push('\n');
            let written = {
                let mut out = writer.lock().await;
                match out.write_all(line.as_bytes()).await {
                    Ok(()) => out.flush().await,
                    Err(error) => Err(error),
                }
            };
            match written {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {
                    tracing::info!("the client closed its end of the connection");
                    gone.cancel();
                    return Ok((writer, gate, backlog, gone));
                }
                Err(error) => return Err(error),
            }
            let line = line.strip_suffix('\n').unwrap_or(&line);
            gate.open_on_answer(line);
            backlog.written(line);
            Ok::<_, std::io::Error>((writer, gate, backlog, gone))
        },
    );
    Lines::new(Box::pin(outgoing), Box::pin(incoming))
}

/// The longest message read whole (8 MiB). A longer line is refused as it streams in, never
/// buffered: a request whose id can be read is answered with an error (the connection goes on),
/// an answer of the client fails the request of Keel's it answers, anything else becomes a
/// line that is not JSON, so the client gets a parse error for it.
pub const MAX_LINE: usize = 8 * 1024 * 1024;

/// How much of the start and of the end of a refused line is kept to find its id.
const KEPT: usize = 4096;

/// One line read from the client.
#[derive(Debug, PartialEq)]
enum Line {
    Text(String),
    Oversized(Oversized),
}

/// What is kept of a line over [`MAX_LINE`]: its first and last bytes and its length.
#[derive(Debug, PartialEq, Default)]
struct Oversized {
    head: Vec<u8>,
    tail: Vec<u8>,
    bytes: usize,
}

/// What to do with a refused line.
#[derive(Debug, PartialEq)]
enum Refusal {
    /// Write this error to the client (it answers the client's request).
    ToClient(String),
    /// Hand this line to the server in place of the refused one.
    ToServer(String),
}

impl Oversized {
    fn push(&mut self, chunk: &[u8]) {
        self.bytes += chunk.len();
        if self.head.len() < KEPT {
            let room = KEPT - self.head.len();
            self.head.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
        self.tail
            .extend_from_slice(&chunk[chunk.len().saturating_sub(KEPT)..]);
        if self.tail.len() > 2 * KEPT {
            self.tail.drain(..self.tail.len() - KEPT);
        }
    }

    fn answer(&self) -> Refusal {
        tracing::warn!(
            bytes = self.bytes,
            "a message over {MAX_LINE} bytes was refused"
        );
        let keys = top_level_keys(&self.head);
        let id = keys
            .iter()
            .find(|(key, _)| key == "id")
            .map(|(_, value)| value.clone())
            .or_else(|| trailing_id(&self.tail));
        let message = format!(
            "message refused: {} bytes is over Keel's limit of {MAX_LINE} bytes a message",
            self.bytes
        );
        let is_answer = keys
            .iter()
            .any(|(key, _)| key == "result" || key == "error");
        match id {
            Some(id) if !id.is_null() => {
                let error = serde_json::json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "error": {"code": -32600, "message": message},
                })
                .to_string();
                if is_answer {
                    Refusal::ToServer(error)
                } else {
                    Refusal::ToClient(error)
                }
            }
            _ => Refusal::ToServer(format!("<{message}>")),
        }
    }
}

/// The keys of the top-level object that start in `head` (the start of a JSON text), with the
/// value of each that is a string, a number or null (`Value::Bool(true)` for the others).
fn top_level_keys(head: &[u8]) -> Vec<(String, Value)> {
    let mut keys = Vec::new();
    let text = String::from_utf8_lossy(head);
    let mut chars = text.char_indices().peekable();
    let mut depth = 0usize;
    let mut expect_key = false;
    while let Some((at, c)) = chars.next() {
        match c {
            '{' | '[' => {
                depth += 1;
                expect_key = depth == 1 && c == '{';
            }
            '}' | ']' => depth = depth.saturating_sub(1),
            ',' => expect_key = depth == 1,
            '"' => {
                let start = at + 1;
                let mut end = None;
                let mut escaped = false;
                for (i, c) in chars.by_ref() {
                    match c {
                        _ if escaped => escaped = false,
                        '\\' => escaped = true,
                        '"' => {
                            end = Some(i);
                            break;
                        }
                        _ => {}
                    }
                }
                let Some(end) = end else { break };
                if !expect_key {
                    continue;
                }
                expect_key = false;
                let key = text[start..end].to_owned();
                let rest = text[end + 1..].trim_start();
                let Some(rest) = rest.strip_prefix(':') else {
                    break;
                };
                let value = scalar_prefix(rest.trim_start()).unwrap_or(Value::Bool(true));
                keys.push((key, value));
            }
            _ => {}
        }
    }
    keys
}

/// The JSON string, number or null `text` starts with, when it is whole in `text`.
fn scalar_prefix(text: &str) -> Option<Value> {
    let end = if text.starts_with('"') {
        let mut escaped = false;
        text.char_indices()
            .skip(1)
            .find(|(_, c)| match c {
                _ if escaped => {
                    escaped = false;
                    false
                }
                '\\' => {
                    escaped = true;
                    false
                }
                '"' => true,
                _ => false,
            })
            .map(|(i, _)| i + 1)?
    } else {
        text.find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '.')))?
    };
    match serde_json::from_str::<Value>(&text[..end]).ok()? {
        value @ (Value::String(_) | Value::Number(_) | Value::Null) => Some(value),
        _ => None,
    }
}

/// The id of a message that ends with it (`..., "id": 7}`), from the last bytes of the line.
fn trailing_id(tail: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(tail);
    let body = text.trim_end().strip_suffix('}')?.trim_end();
    let (value, before) = if let Some(inner) = body.strip_suffix('"') {
        let open = inner.rfind('"')?;
        if inner[open + 1..].contains('\\') {
            return None;
        }
        (&body[open..], &inner[..open])
    } else {
        let start = body
            .rfind(|c: char| !(c.is_ascii_digit() || c == '-'))
            .map_or(0, |i| i + 1);
        (&body[start..], &body[..start])
    };
    let before = before.trim_end().strip_suffix(':')?.trim_end();
    let before = before.strip_suffix("\"id\"")?.trim_end();
    if !(before.ends_with(',') || before.ends_with('{')) {
        return None;
    }
    match serde_json::from_str::<Value>(value).ok()? {
        value @ (Value::String(_) | Value::Number(_)) => Some(value),
        _ => None,
    }
}

/// The next line, without its `\n` (or `\r\n`). Bytes that are not UTF-8 are replaced (the
/// line then fails to parse and is answered with a parse error) rather than ending the
/// connection; a line over `max` bytes is discarded as it streams in, keeping only what
/// [`Oversized`] needs to answer it.
async fn next_line(
    reader: &mut (impl AsyncBufRead + Unpin),
    max: usize,
) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut oversized: Option<Oversized> = None;
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            if line.is_empty() && oversized.is_none() {
                return Ok(None);
            }
            break;
        }
        let (chunk, done) = match buffer.iter().position(|byte| *byte == b'\n') {
            Some(at) => (&buffer[..at], Some(at + 1)),
            None => (buffer, None),
        };
        match &mut oversized {
            Some(refused) => refused.push(chunk),
            None if line.len() + chunk.len() > max => {
                let mut refused = Oversized::default();
                refused.push(&line);
                refused.push(chunk);
                line = Vec::new();
                oversized = Some(refused);
            }
            None => line.extend_from_slice(chunk),
        }
        let consumed = done.unwrap_or(buffer.len());
        reader.consume(consumed);
        if done.is_some() {
            break;
        }
    }
    if let Some(refused) = oversized {
        return Ok(Some(Line::Oversized(refused)));
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(Some(Line::Text(match String::from_utf8(line) {
        Ok(text) => text,
        Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
    })))
}

/// The `session/update` notifications handed to the ACP crate and not yet written out.
///
/// The crate queues outgoing messages without bound; a client that stops reading stdout would
/// make that queue, and Keel's memory, grow with everything a turn produces. Hosts count what
/// they send ([`Backlog::queued`]), the transport what it wrote, and a turn waits in
/// [`Backlog::ready`] while more than [`Backlog::LIMIT`] are in between.
#[derive(Debug, Default)]
pub struct Backlog {
    queued: std::sync::atomic::AtomicUsize,
    written: std::sync::atomic::AtomicUsize,
    drained: Notify,
    /// The transport reports what it writes; without that, nobody waits.
    counted: bool,
}

impl Backlog {
    /// Updates in flight beyond which turns wait.
    pub const LIMIT: usize = 64;

    /// A backlog the transport reports to ([`pipelined`]).
    pub fn counted() -> Self {
        Self {
            counted: true,
            ..Self::default()
        }
    }

    /// A backlog for a transport that reports nothing: [`Backlog::ready`] never waits.
    pub fn uncounted() -> Self {
        Self::default()
    }

    /// A host handed one `session/update` to the crate.
    pub fn queued(&self) {
        self.queued
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// The transport wrote `line`.
    fn written(&self, line: &str) {
        // The crate writes `{"jsonrpc":"2.0","method":"session/update",...`: the method is
        // in the first bytes; a text that mentions it is escaped (`\"session/update\"`).
        let head = &line.as_bytes()[..line.len().min(64)];
        let marker = b"\"method\":\"session/update\"";
        if head.windows(marker.len()).any(|window| window == marker) {
            self.written
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
            self.drained.notify_waiters();
        }
    }

    fn in_flight(&self) -> usize {
        let written = self.written.load(std::sync::atomic::Ordering::Acquire);
        self.queued
            .load(std::sync::atomic::Ordering::Acquire)
            .saturating_sub(written)
    }

    /// Resolves once at most [`Backlog::LIMIT`] updates are in flight.
    pub async fn ready(&self) {
        if !self.counted {
            return;
        }
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.in_flight() <= Self::LIMIT {
                return;
            }
            drained.await;
        }
    }
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

/// The process's stdout, as the server writes its messages.
pub type Outgoing = Box<dyn AsyncWrite + Send + Unpin>;
/// The process's stdin, as the server reads the client's messages.
pub type Incoming = Box<dyn AsyncRead + Send + Unpin>;

/// stdout and stdin for the server. When they are pipes, as an editor starts an agent, they are
/// read and written in non-blocking mode on the runtime's own reactor; otherwise (a terminal, a
/// file, a socket) through tokio's stdio, which hands every read and write to a blocking
/// thread: two thread switches a message, a dozen messages a turn.
///
/// Non-blocking mode belongs to the open pipe, not to the descriptor, so stdout stays blocking
/// when stderr is the same pipe (`2>&1`): a log line must never fail for want of room.
pub fn stdio() -> (Outgoing, Incoming) {
    let outgoing: Outgoing = match nonblocking_stdout() {
        Ok(sender) => Box::new(sender),
        Err(reason) => {
            tracing::debug!(%reason, "stdout: blocking writes");
            Box::new(tokio::io::stdout())
        }
    };
    let incoming: Incoming = match nonblocking_stdin() {
        Ok(receiver) => Box::new(receiver),
        Err(reason) => {
            tracing::debug!(%reason, "stdin: blocking reads");
            Box::new(tokio::io::stdin())
        }
    };
    (outgoing, incoming)
}

/// A copy of descriptor `fd` (close-on-exec) as a file, leaving `fd` itself open: were it
/// closed, the next file opened could take its number and receive stray output.
fn duplicate(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<std::fs::File> {
    Ok(std::fs::File::from(fd.try_clone_to_owned()?))
}

fn nonblocking_stdout() -> std::io::Result<tokio::net::unix::pipe::Sender> {
    use std::os::fd::AsFd as _;
    use std::os::unix::fs::MetadataExt as _;
    let stdout = duplicate(std::io::stdout().as_fd())?;
    let stderr = duplicate(std::io::stderr().as_fd())?;
    let (out, err) = (stdout.metadata()?, stderr.metadata()?);
    if (out.dev(), out.ino()) == (err.dev(), err.ino()) {
        return Err(std::io::Error::other("stderr is the same pipe"));
    }
    // Fails unless stdout is a pipe; sets O_NONBLOCK on it.
    tokio::net::unix::pipe::Sender::from_file(stdout)
}

fn nonblocking_stdin() -> std::io::Result<tokio::net::unix::pipe::Receiver> {
    use std::os::fd::AsFd as _;
    tokio::net::unix::pipe::Receiver::from_file(duplicate(std::io::stdin().as_fd())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<String> {
        let mut reader = BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        while let Some(line) = next_line(&mut reader, max).await.unwrap() {
            out.push(match line {
                Line::Text(text) => text,
                Line::Oversized(refused) => format!("<{} bytes>", refused.bytes),
            });
        }
        out
    }

    #[tokio::test]
    async fn lines_survive_bad_bytes_crlf_and_oversized_messages() {
        let input = b"{\"a\":1}\r\n\xff\xfe{}\n0123456789abcdef\n\nlast";
        assert_eq!(
            lines(input, 12).await,
            vec![
                "{\"a\":1}".to_owned(),
                "\u{fffd}\u{fffd}{}".to_owned(),
                "<16 bytes>".to_owned(),
                String::new(),
                "last".to_owned(),
            ]
        );
        assert!(lines(b"", 12).await.is_empty());
    }

    fn refused(line: &str) -> Refusal {
        let mut kept = Oversized::default();
        for chunk in line.as_bytes().chunks(7) {
            kept.push(chunk);
        }
        kept.answer()
    }

    #[test]
    fn a_refused_line_is_answered_by_its_id() {
        let big = "x".repeat(3 * KEPT);
        // The id first, last, as a string; an answer of the client; no id at all.
        let first = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{{"p":"{big}"}}}}"#
        );
        let last = format!(
            r#"{{"jsonrpc":"2.0","method":"x","params":{{"id":1,"p":"{big}"}}, "id" : "a-1" }}"#
        );
        let answer = format!(r#"{{"jsonrpc":"2.0","id":3,"result":{{"content":"{big}"}}}}"#);
        let nested = format!(r#"{{"jsonrpc":"2.0","method":"x","params":{{"id":1,"p":"{big}"}}}}"#);
        let id_of = |refusal: Refusal| match refusal {
            Refusal::ToClient(text) => (
                "client",
                serde_json::from_str::<Value>(&text).unwrap()["id"].clone(),
            ),
            Refusal::ToServer(text) => (
                "server",
                serde_json::from_str::<Value>(&text).map_or(Value::Null, |v| v["id"].clone()),
            ),
        };
        assert_eq!(id_of(refused(&first)), ("client", serde_json::json!(7)));
        assert_eq!(id_of(refused(&last)), ("client", serde_json::json!("a-1")));
        assert_eq!(id_of(refused(&answer)), ("server", serde_json::json!(3)));
        assert_eq!(id_of(refused(&nested)), ("server", Value::Null));
    }
}
