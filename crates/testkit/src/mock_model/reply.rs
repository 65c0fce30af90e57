//! One scripted HTTP answer ([`Reply`]) and a request as the server received it
//! ([`RecordedRequest`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Turn;

/// Which API a queue serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `/v1/messages`.
    Anthropic,
    /// `/v1/chat/completions`, `/chat/completions`.
    OpenAi,
}

/// How a response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Transfer-Encoding: chunked`, one chunk per event; the connection stays open after.
    Chunked,
    /// No length: the body ends when the server closes the connection.
    CloseDelimited,
}

/// One scripted HTTP answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub(super) status: u16,
    pub(super) headers: Vec<(String, String)>,
    pub(super) events: Vec<String>,
    /// A non-streamed body (error responses), sent with a Content-Length.
    pub(super) body: Option<String>,
    pub(super) framing: Framing,
    pub(super) chunk_delay: Duration,
    pub(super) cut_after: Option<usize>,
    pub(super) stall_after: Option<usize>,
    /// Sends the body one byte at a time, this long apart.
    pub(super) trickle: Option<Duration>,
    /// Sends nothing at all, not even a status line, until the client hangs up.
    pub(super) silent: bool,
    /// Waits this long before the status line: the model's time to its first byte.
    pub(super) delay: Duration,
    /// Where the time actually waited is added, in nanoseconds (see [`Reply::delay_counted`]).
    pub(super) waited: Option<Arc<std::sync::atomic::AtomicU64>>,
}

impl Reply {
    /// A 200 event stream of pre-rendered SSE events.
    pub fn sse(events: Vec<String>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            events,
            body: None,
            framing: Framing::Chunked,
            chunk_delay: Duration::ZERO,
            cut_after: None,
            stall_after: None,
            trickle: None,
            silent: false,
            delay: Duration::ZERO,
            waited: None,
        }
    }

    /// A 200 event stream from an SSE transcript (events separated by blank lines), e.g. a
    /// file of `fixtures/sse/`.
    pub fn sse_transcript(text: &str) -> Self {
        let text = text.replace("\r\n", "\n");
        let events = text
            .split("\n\n")
            .filter(|event| !event.trim().is_empty())
            .map(|event| format!("{}\n\n", event.trim_start_matches('\n')))
            .collect();
        Self::sse(events)
    }

    /// `turn` as an Anthropic stream.
    pub fn anthropic(turn: &Turn) -> Self {
        Self::sse(turn.anthropic_events())
    }

    /// `turn` as an OpenAI stream.
    pub fn openai(turn: &Turn) -> Self {
        Self::sse(turn.openai_events())
    }

    /// A JSON response with `status` and `body`.
    pub fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: Some(body.to_string()),
            ..Self::sse(Vec::new())
        }
    }

    /// An error status with the body `api` would send for it.
    pub fn error(api: Api, status: u16, message: &str) -> Self {
        let kind = match status {
            400 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            _ => "api_error",
        };
        let body = match api {
            Api::Anthropic => json!({"type": "error", "error": {"type": kind, "message": message}}),
            Api::OpenAi => json!({"error": {"message": message, "type": kind, "code": null}}),
        };
        Self::json(status, body)
    }

    /// An HTML page with `status` (what a web server that is not the API answers).
    pub fn html(status: u16, page: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "text/html; charset=utf-8".into())],
            body: Some(page.to_owned()),
            ..Self::sse(Vec::new())
        }
    }

    /// A 429 with `retry-after: {retry_after}`.
    pub fn rate_limited(api: Api, retry_after: &str) -> Self {
        Self::error(api, 429, "mock: rate limited").header("retry-after", retry_after)
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers
            .push((name.to_ascii_lowercase(), value.to_owned()));
        self
    }

    /// Closes the connection after `events` events (no chunked terminator: the client sees a
    /// truncated body; with [`Framing::CloseDelimited`], a clean EOF).
    pub fn cut_after(mut self, events: usize) -> Self {
        self.cut_after = Some(events);
        self
    }

    /// Sends `events` events, then nothing, keeping the connection open until the client
    /// hangs up. `stall_after(0)`: headers only.
    pub fn stall_after(mut self, events: usize) -> Self {
        self.stall_after = Some(events);
        self
    }

    /// Waits `delay` before the status line, as a model thinking before its first token does.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// [`Reply::delay`], adding the time actually waited (a timer fires late on a busy
    /// machine) to `waited`, in nanoseconds: a benchmark subtracts what the model really took.
    pub fn delay_counted(
        mut self,
        delay: Duration,
        waited: Arc<std::sync::atomic::AtomicU64>,
    ) -> Self {
        self.delay = delay;
        self.waited = Some(waited);
        self
    }

    /// Waits `delay` before each event after the first.
    pub fn chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = delay;
        self
    }

    /// Sends each event one byte at a time, `per_byte` apart (a server that trickles).
    pub fn trickle(mut self, per_byte: Duration) -> Self {
        self.trickle = Some(per_byte);
        self
    }

    /// Accepts the request and never answers: no status line, no headers, until the client
    /// hangs up.
    pub fn silent(mut self) -> Self {
        self.silent = true;
        self
    }

    /// Sends the body close-delimited instead of chunked.
    pub fn close_delimited(mut self) -> Self {
        self.framing = Framing::CloseDelimited;
        self
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// `POST`, ...
    pub method: String,
    /// The path, query included.
    pub path: String,
    /// Headers, names lowercased, in order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Null` when it is not JSON).
    pub body: Value,
    /// The body as text.
    pub raw_body: String,
    /// When the request was complete.
    pub received_at: Instant,
    /// The client closed the connection before the response was fully sent.
    pub client_disconnected: bool,
}

impl RecordedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}
