//! [`MockModel`]: a mock model server over real HTTP on 127.0.0.1, speaking the Anthropic
//! Messages and OpenAI Chat Completions streaming APIs from scripts.
//!
//! Principal types:
//! - [`MockModel`]: the server. Queue responses per API with [`MockModel::push_anthropic`],
//!   [`MockModel::push_openai`] or [`MockModel::push`]; inspect [`MockModel::requests`].
//! - [`Turn`]: a high-level response (text, thinking, tool calls, usage, stop reason) rendered
//!   as realistic SSE for either API.
//! - [`Reply`]: one HTTP answer, with faults: error statuses with `retry-after`
//!   ([`Reply::error`], [`Reply::rate_limited`]), a cut connection ([`Reply::cut_after`]), a
//!   slow stream ([`Reply::chunk_delay`]), a stall ([`Reply::stall_after`]), a body sent a byte
//!   at a time ([`Reply::trickle`]), a server that never answers ([`Reply::silent`]).
//! - [`RecordedRequest`]: what a client sent, including whether it hung up mid-response.
//!
//! Routes: `/v1/messages` serves the Anthropic queue; `/v1/chat/completions` and
//! `/chat/completions` serve the OpenAI queue; `GET /v1/models` (and `/models`) lists the models
//! set with [`MockModel::set_models`] in the shape both APIs share (`{"data": [{"id": ..}]}`),
//! counted by [`MockModel::models_requests`] and not recorded among [`MockModel::requests`]. An empty queue answers
//! `500 mock: no scripted response left`; an unknown path `404`. The server closes its
//! connections and stops when dropped.

pub mod limits;
mod reply;
mod turn;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::{JoinHandle, JoinSet};

pub use reply::{Api, Framing, RecordedRequest, Reply};
pub use turn::{Block, Turn, anthropic_error_event, anthropic_event, openai_done, openai_event};

/// Computes a reply from a request, for conversations too many or too concurrent to script
/// in order (load tests). `None` falls through to the "no scripted response" error.
pub type Responder = Arc<dyn Fn(Api, &RecordedRequest) -> Option<Reply> + Send + Sync>;

#[derive(Default)]
struct State {
    anthropic: VecDeque<Reply>,
    openai: VecDeque<Reply>,
    responder: Option<Responder>,
    /// See [`MockModel::lean`].
    lean: bool,
    /// See [`MockModel::check_limits`].
    check_limits: bool,
    requests: Vec<RecordedRequest>,
    /// Session-title requests ([`TITLE_MARKER`]): answered from `titles`, kept apart from
    /// the conversation's requests.
    titles: VecDeque<String>,
    title_requests: Vec<RecordedRequest>,
    disconnects: usize,
    models: Vec<String>,
    models_requests: usize,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    disconnected: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn record_disconnect(&self, request: usize) {
        let mut state = self.lock();
        state.disconnects += 1;
        if let Some(recorded) = state.requests.get_mut(request) {
            recorded.client_disconnected = true;
        }
        drop(state);
        self.disconnected.notify_waiters();
    }
}

/// The mock model server. See the module docs.
pub struct MockModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    server: JoinHandle<()>,
}

impl std::fmt::Debug for MockModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockModel")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl MockModel {
    /// Starts a server on `127.0.0.1:0`.
    pub async fn start() -> Self {
        match Self::try_start().await {
            Ok(mock) => mock,
            Err(error) => panic!("mock model: cannot bind 127.0.0.1: {error}"),
        }
    }

    /// Starts a server on `127.0.0.1:0`, reporting bind failures.
    #[expect(
        clippy::disallowed_methods,
        reason = "the mock model is a real HTTP server on loopback, outside Keel"
    )]
    pub async fn try_start() -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let server = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(Self {
            addr,
            shared,
            server,
        })
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:{port}`: the Anthropic base URL (the client appends `/v1/messages`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:{port}/v1`: the OpenAI base URL (the client appends
    /// `/chat/completions`).
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues `reply` for the next request to `api`.
    pub fn push(&self, api: Api, reply: Reply) {
        let mut state = self.shared.lock();
        match api {
            Api::Anthropic => state.anthropic.push_back(reply),
            Api::OpenAi => state.openai.push_back(reply),
        }
    }

    /// Drops the requests recorded so far (a long fuzz run would otherwise keep them all).
    pub fn forget_requests(&self) {
        self.shared.lock().requests.clear();
    }

    /// Keeps no requests and parses a body only for a [`Responder`]: for benchmarks of many or
    /// large requests, where the mock's own recording would be part of what is measured.
    pub fn lean(&self) {
        let mut state = self.shared.lock();
        state.lean = true;
        state.requests.clear();
    }

    /// Checks every request body against the provider's documented limits ([`limits`]) before
    /// answering: a body that breaks one gets the `400 invalid_request_error` the real API would
    /// send, naming the rules broken (the request is still recorded).
    pub fn check_limits(&self) {
        self.shared.lock().check_limits = true;
    }

    /// Answers every request that finds its queue empty with `responder`.
    pub fn respond_with(&self, responder: Responder) {
        self.shared.lock().responder = Some(responder);
    }

    pub fn push_anthropic(&self, turn: Turn) {
        self.push(Api::Anthropic, Reply::anthropic(&turn));
    }

    /// Queues `turn` as an OpenAI stream.
    pub fn push_openai(&self, turn: Turn) {
        self.push(Api::OpenAi, Reply::openai(&turn));
    }

    /// Replies still queued for `api`.
    pub fn pending(&self, api: Api) -> usize {
        let state = self.shared.lock();
        match api {
            Api::Anthropic => state.anthropic.len(),
            Api::OpenAi => state.openai.len(),
        }
    }

    /// Sets the models `GET /v1/models` lists (none until set).
    pub fn set_models(&self, models: &[&str]) {
        self.shared.lock().models = models.iter().map(|m| (*m).to_owned()).collect();
    }

    /// How many times the models list was asked for.
    pub fn models_requests(&self) -> usize {
        self.shared.lock().models_requests
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// Scripts the answer to the next session-title request (one whose system prompt has
    /// [`TITLE_MARKER`]); unscripted ones get a 400.
    pub fn push_title(&self, title: impl Into<String>) {
        self.shared.lock().titles.push_back(title.into());
    }

    /// The session-title requests received so far (not in [`MockModel::requests`]).
    pub fn title_requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().title_requests.clone()
    }

    /// How many responses the client hung up on before they were complete.
    pub fn disconnects(&self) -> usize {
        self.shared.lock().disconnects
    }

    /// Waits until at least one client hung up mid-response, up to `timeout`.
    pub async fn wait_for_disconnect(&self, timeout: Duration) -> bool {
        let wait = async {
            loop {
                let notified = self.shared.disconnected.notified();
                if self.disconnects() > 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(timeout, wait).await.is_ok()
    }
}

impl Drop for MockModel {
    fn drop(&mut self) {
        // Dropping the accept task drops its JoinSet, which aborts every connection.
        self.server.abort();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // Small SSE writes must not wait for delayed ACKs (40 ms each on Linux).
                    let _ = stream.set_nodelay(true);
                    connections.spawn(serve_connection(stream, Arc::clone(&shared)));
                }
                Err(error) => tracing::warn!(%error, "mock model: accept failed"),
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

struct Connection {
    reader: OwnedReadHalf,
    writer: OwnedWriteHalf,
    buffer: Vec<u8>,
}

/// Serves requests on one connection until it closes.
async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let (reader, writer) = stream.into_split();
    let mut connection = Connection {
        reader,
        writer,
        buffer: Vec::new(),
    };
    while let Some(mut request) = read_request(&mut connection).await {
        if request.method == "GET" && is_models_path(&request.path) {
            let reply = {
                let mut state = shared.lock();
                state.models_requests += 1;
                let data: Vec<Value> = state
                    .models
                    .iter()
                    .map(|id| json!({"id": id, "type": "model", "object": "model", "display_name": id}))
                    .collect();
                Reply::json(
                    200,
                    json!({"data": data, "object": "list", "has_more": false}),
                )
            };
            match send_reply(&mut connection, reply).await {
                Outcome::KeepAlive => continue,
                Outcome::Close | Outcome::ClientGone => break,
            }
        }
        let (keep, parse) = {
            let state = shared.lock();
            (
                !state.lean,
                !state.lean || state.responder.is_some() || state.check_limits,
            )
        };
        if parse {
            request.body = serde_json::from_str(&request.raw_body).unwrap_or(Value::Null);
        }
        if request.raw_body.contains(TITLE_MARKER) {
            let reply = title_reply(&shared, &request);
            shared.lock().title_requests.push(request);
            match send_reply(&mut connection, reply).await {
                Outcome::KeepAlive => continue,
                Outcome::Close | Outcome::ClientGone => break,
            }
        }
        let reply = route(&shared, &request);
        // A request that is not kept has no index: its disconnect is only counted.
        let index = if keep {
            let mut state = shared.lock();
            state.requests.push(request);
            state.requests.len() - 1
        } else {
            usize::MAX
        };
        match send_reply(&mut connection, reply).await {
            Outcome::KeepAlive => {}
            Outcome::Close => break,
            Outcome::ClientGone => {
                shared.record_disconnect(index);
                break;
            }
        }
    }
    let _ = connection.writer.shutdown().await;
}

fn is_models_path(path: &str) -> bool {
    matches!(path.split('?').next(), Some("/v1/models" | "/models"))
}

/// What Keel's session-title request says in its system prompt (the same words as
/// `keel_core::agent::TITLE_SYSTEM`, which a test of the ACP suite checks).
pub const TITLE_MARKER: &str = "You write the title of a coding session";

/// The answer to a session-title request: the next scripted title, else a refusal (a title
/// is never taken from the conversation's queue).
fn title_reply(shared: &Shared, request: &RecordedRequest) -> Reply {
    let api = if request.path.contains("chat/completions") {
        Api::OpenAi
    } else {
        Api::Anthropic
    };
    match shared.lock().titles.pop_front() {
        Some(title) => Reply::sse(match api {
            Api::Anthropic => Turn::text_only(title).anthropic_events(),
            Api::OpenAi => Turn::text_only(title).openai_events(),
        }),
        None => Reply::error(api, 400, "mock: no session title scripted"),
    }
}

fn route(shared: &Shared, request: &RecordedRequest) -> Reply {
    let path = request.path.split('?').next().unwrap_or(&request.path);
    let api = match path {
        "/v1/messages" => Api::Anthropic,
        "/v1/chat/completions" | "/chat/completions" => Api::OpenAi,
        _ => {
            return Reply::json(
                404,
                json!({"error": {"type": "not_found_error", "message": format!("mock: no route for {path}")}}),
            );
        }
    };
    let mut state = shared.lock();
    if state.check_limits {
        let errors = match api {
            Api::Anthropic => limits::anthropic(&request.body),
            Api::OpenAi => limits::openai(&request.body),
        };
        if !errors.is_empty() {
            return Reply::error(api, 400, &errors.join("; "));
        }
    }
    let next = match api {
        Api::Anthropic => state.anthropic.pop_front(),
        Api::OpenAi => state.openai.pop_front(),
    };
    let responder = state.responder.clone();
    drop(state);
    next.or_else(|| responder.and_then(|respond| respond(api, request)))
        .unwrap_or_else(|| Reply::error(api, 500, "mock: no scripted response left"))
}

/// Reads one request; `None` when the client closed the connection (or sent garbage).
async fn read_request(connection: &mut Connection) -> Option<RecordedRequest> {
    const MAX_HEAD: usize = 64 * 1024;
    const MAX_BODY: usize = 64 * 1024 * 1024;
    let head_end = loop {
        if let Some(end) = find(&connection.buffer, b"\r\n\r\n") {
            break end;
        }
        if connection.buffer.len() > MAX_HEAD || !fill(connection).await {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&connection.buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let (method, path) = (
        request_line.next()?.to_owned(),
        request_line.next()?.to_owned(),
    );
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse::<usize>().ok())
        .unwrap_or(0);
    if length > MAX_BODY {
        return None;
    }
    let body_start = head_end + 4;
    while connection.buffer.len() < body_start + length {
        if !fill(connection).await {
            return None;
        }
    }
    let rest = connection.buffer.split_off(body_start + length);
    let raw_body = String::from_utf8_lossy(&connection.buffer[body_start..]).into_owned();
    connection.buffer = rest;
    Some(RecordedRequest {
        method,
        path,
        headers,
        // Parsed by the caller when it is wanted (see `MockModel::lean`).
        body: Value::Null,
        raw_body,
        received_at: Instant::now(),
        client_disconnected: false,
    })
}

/// Reads more bytes into the buffer; `false` on EOF or error.
async fn fill(connection: &mut Connection) -> bool {
    connection.buffer.reserve(64 * 1024);
    matches!(connection.reader.read_buf(&mut connection.buffer).await, Ok(read) if read > 0)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

enum Outcome {
    KeepAlive,
    Close,
    ClientGone,
}

async fn send_reply(connection: &mut Connection, reply: Reply) -> Outcome {
    if reply.silent {
        return wait_for_hangup(connection).await;
    }
    if !reply.delay.is_zero() {
        let started = Instant::now();
        tokio::select! {
            () = tokio::time::sleep(reply.delay) => {}
            () = wait_for_eof(connection) => return Outcome::ClientGone,
        }
        if let Some(waited) = &reply.waited {
            let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            waited.fetch_add(nanos, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = &reply.body {
        head.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
        return match connection.writer.write_all(head.as_bytes()).await {
            Ok(()) => Outcome::KeepAlive,
            Err(_) => Outcome::ClientGone,
        };
    }
    head.push_str(match reply.framing {
        Framing::Chunked => "transfer-encoding: chunked\r\n\r\n",
        Framing::CloseDelimited => "connection: close\r\n\r\n",
    });
    if connection.writer.write_all(head.as_bytes()).await.is_err() {
        return Outcome::ClientGone;
    }
    for (number, event) in reply.events.iter().enumerate() {
        if reply.cut_after == Some(number) {
            return Outcome::Close;
        }
        if reply.stall_after == Some(number) {
            return wait_for_hangup(connection).await;
        }
        if number > 0 && !reply.chunk_delay.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(reply.chunk_delay) => {}
                () = wait_for_eof(connection) => return Outcome::ClientGone,
            }
        }
        let bytes = match reply.framing {
            Framing::Chunked => format!("{:x}\r\n{event}\r\n", event.len()),
            Framing::CloseDelimited => event.clone(),
        };
        if let Some(per_byte) = reply.trickle {
            for byte in bytes.as_bytes() {
                if connection.writer.write_all(&[*byte]).await.is_err() {
                    return Outcome::ClientGone;
                }
                let _ = connection.writer.flush().await;
                tokio::select! {
                    () = tokio::time::sleep(per_byte) => {}
                    () = wait_for_eof(connection) => return Outcome::ClientGone,
                }
            }
            continue;
        }
        if connection.writer.write_all(bytes.as_bytes()).await.is_err() {
            return Outcome::ClientGone;
        }
        let _ = connection.writer.flush().await;
    }
    if reply
        .stall_after
        .is_some_and(|after| after >= reply.events.len())
    {
        return wait_for_hangup(connection).await;
    }
    match reply.framing {
        Framing::Chunked if reply.cut_after.is_none() => {
            match connection.writer.write_all(b"0\r\n\r\n").await {
                Ok(()) => Outcome::KeepAlive,
                Err(_) => Outcome::ClientGone,
            }
        }
        _ => Outcome::Close,
    }
}

/// Stalls: keeps the connection open, sending nothing, until the client hangs up.
async fn wait_for_hangup(connection: &mut Connection) -> Outcome {
    wait_for_eof(connection).await;
    Outcome::ClientGone
}

/// Completes when the client closes its side (bytes it sends meanwhile are buffered).
async fn wait_for_eof(connection: &mut Connection) {
    while fill(connection).await {}
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "the tests are the mock's HTTP clients, on loopback"
)]
mod tests {
    use super::*;

    /// One raw HTTP/1.1 exchange; returns the whole response text (read to EOF or `until`).
    async fn exchange(mock: &MockModel, path: &str, body: &str, until: &str) -> String {
        let mut stream = TcpStream::connect(mock.addr()).await.unwrap();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nX-Api-Key: k\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = Vec::new();
        let mut chunk = [0u8; 4096];
        while !String::from_utf8_lossy(&response).contains(until) {
            let read = stream.read(&mut chunk).await.unwrap();
            if read == 0 {
                break;
            }
            response.extend_from_slice(&chunk[..read]);
        }
        String::from_utf8(response).unwrap()
    }

    #[tokio::test]
    async fn routes_records_and_reports_an_empty_queue() {
        let mock = MockModel::start().await;
        mock.push_anthropic(Turn::text_only("hello there"));
        let response = exchange(&mock, "/v1/messages", r#"{"model":"m"}"#, "0\r\n\r\n").await;
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(response.contains("transfer-encoding: chunked"));
        assert!(response.contains("event: message_stop"));
        assert!(response.contains(r#""text":"hello th""#));

        let response = exchange(&mock, "/chat/completions", "{}", "}}").await;
        assert!(response.starts_with("HTTP/1.1 500"), "{response}");
        assert!(response.contains("mock: no scripted response left"));
        let response = exchange(&mock, "/elsewhere", "", "}}").await;
        assert!(response.starts_with("HTTP/1.1 404"), "{response}");

        let requests = mock.requests();
        assert_eq!(requests.len(), 3);
        assert_eq!(requests[0].body, json!({"model": "m"}));
        assert_eq!(requests[0].header("x-api-key"), Some("k"));
        assert_eq!(requests[2].body, Value::Null);
    }

    #[tokio::test]
    async fn cut_and_close_delimited_bodies_end_without_terminator() {
        let mock = MockModel::start().await;
        mock.push(
            Api::OpenAi,
            Reply::openai(&Turn::text_only("abcdefghijklmnop")).cut_after(2),
        );
        let response = exchange(&mock, "/v1/chat/completions", "{}", "\u{0}").await;
        assert!(
            !response.contains("[DONE]") && !response.ends_with("0\r\n\r\n"),
            "{response}"
        );
        assert_eq!(response.matches("data: ").count(), 2);
    }

    #[tokio::test]
    async fn dropping_the_mock_stops_the_server() {
        let mock = MockModel::start().await;
        let addr = mock.addr();
        drop(mock);
        let mut refused = false;
        for _ in 0..100 {
            tokio::task::yield_now().await;
            if TcpStream::connect(addr).await.is_err() {
                refused = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(refused, "still accepting after drop");
    }

    #[test]
    fn openai_rendering_splits_arguments_and_sums_cached_prompt_tokens() {
        let events = Turn::new()
            .tool_call("c", "t", json!({"path": "a/long/enough/path.rs"}))
            .usage(10, 2)
            .cache(90, 0)
            .openai_events();
        let arguments: String = events
            .iter()
            .filter_map(|event| {
                let data: Value =
                    serde_json::from_str(event.strip_prefix("data: ")?.trim()).ok()?;
                data.pointer("/choices/0/delta/tool_calls/0/function/arguments")?
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        assert_eq!(
            arguments,
            json!({"path": "a/long/enough/path.rs"}).to_string()
        );
        assert!(
            events
                .iter()
                .filter(|event| event.contains("arguments"))
                .count()
                >= 4
        );
        assert!(
            events
                .iter()
                .any(|event| event.contains(r#""prompt_tokens":100"#))
        );
        assert_eq!(events.last().map(String::as_str), Some("data: [DONE]\n\n"));
    }
}
