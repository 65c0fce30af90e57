//! From an HTTP response body to [`ModelEvent`]s: the idle timeout between events, the size cap, server-sent
//! event parsing, the per-API [`Decoder`], and tool-call argument reassembly ([`ToolCalls`]).

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{Event, EventStream, EventStreamError, Eventsource};
use futures::stream::{BoxStream, StreamExt};

use super::error::chain;
use super::tool_names::WireNames;
use super::{ModelEvent, ModelStream, ProviderError, StreamProgress};

/// One API's translation of server-sent events into model events.
pub(crate) trait Decoder: Send + 'static {
    /// Handles one event, appending model events to `out`. Returns `true` once the response is
    /// complete (its terminal event was seen). `provider` labels errors.
    fn event(
        &mut self,
        provider: &str,
        event: &Event,
        out: &mut Vec<ModelEvent>,
    ) -> Result<bool, ProviderError>;

    /// The body ended before a terminal event. Returns `true` (after appending the final
    /// events) when what was received is nevertheless a complete response; `false` makes it a
    /// [`ProviderError::StreamCut`].
    fn eof(&mut self, out: &mut Vec<ModelEvent>) -> bool;
}

/// Failure of the response body.
#[derive(Debug)]
enum BodyError {
    /// The body grew past [`MAX_RESPONSE_BYTES`].
    TooLarge,
    /// The connection failed (reset, truncated chunked encoding, ...).
    Transport(String),
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLarge => write!(f, "more than {MAX_RESPONSE_BYTES} bytes"),
            Self::Transport(error) => f.write_str(error),
        }
    }
}

/// A response body larger than this is not a model's answer (the longest outputs models allow
/// are well under a megabyte of events): reading stops with [`ProviderError::TooLarge`] before
/// it can fill memory or the conversation.
pub(crate) const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// The response body, its errors labelled, cut off past [`MAX_RESPONSE_BYTES`].
fn bounded_body(response: reqwest::Response) -> BoxStream<'static, Result<Bytes, BodyError>> {
    let mut total = 0usize;
    response
        .bytes_stream()
        .map(move |chunk| match chunk {
            Ok(chunk) => {
                total = total.saturating_add(chunk.len());
                if total > MAX_RESPONSE_BYTES {
                    Err(BodyError::TooLarge)
                } else {
                    Ok(chunk)
                }
            }
            Err(error) => Err(BodyError::Transport(chain(&error))),
        })
        .boxed()
}

/// How long to keep reading after the terminal event, so the connection can be reused.
const DRAIN_LIMIT: Duration = Duration::from_millis(500);

struct Driver<D> {
    events: EventStream<BoxStream<'static, Result<Bytes, BodyError>>>,
    decoder: D,
    provider: String,
    idle: Duration,
    queue: VecDeque<ModelEvent>,
    error: Option<ProviderError>,
    progress: StreamProgress,
    state: State,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Reading,
    /// The terminal event was seen; read what is left of the body once queued events are out.
    Complete,
    Finished,
}

/// The model events of `response`, decoded by `decoder`.
pub(crate) fn drive<D: Decoder>(
    response: reqwest::Response,
    decoder: D,
    provider: String,
    idle: Duration,
) -> ModelStream {
    let driver = Driver {
        events: bounded_body(response).eventsource(),
        decoder,
        provider,
        idle,
        queue: VecDeque::new(),
        error: None,
        progress: StreamProgress::default(),
        state: State::Reading,
    };
    futures::stream::unfold(driver, |mut driver| async move {
        let item = driver.next_item().await?;
        Some((item, driver))
    })
    .boxed()
}

impl<D: Decoder> Driver<D> {
    async fn next_item(&mut self) -> Option<Result<ModelEvent, ProviderError>> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                self.progress.model_events += 1;
                return Some(Ok(event));
            }
            if let Some(error) = self.error.take() {
                self.state = State::Finished;
                return Some(Err(error));
            }
            match self.state {
                State::Finished => return None,
                State::Complete => {
                    self.state = State::Finished;
                    let drain = async { while let Some(Ok(_)) = self.events.next().await {} };
                    let _ = tokio::time::timeout(DRAIN_LIMIT, drain).await;
                    return None;
                }
                State::Reading => self.read().await,
            }
        }
    }

    /// Reads one server event and queues its model events (or an error). The idle timeout is
    /// per complete event, not per byte: a server that trickles a byte at a time, never
    /// finishing an event, times out like one that sends nothing.
    async fn read(&mut self) {
        let mut out = Vec::new();
        let Ok(next) = tokio::time::timeout(self.idle, self.events.next()).await else {
            self.error = Some(ProviderError::Timeout {
                provider: self.provider.clone(),
                idle: self.idle,
                after: self.after(),
            });
            return;
        };
        match next {
            Some(Ok(event)) => {
                self.progress.sse_events += 1;
                self.progress.last_event = Some(event.event.clone());
                match self.decoder.event(&self.provider, &event, &mut out) {
                    Ok(true) => self.state = State::Complete,
                    Ok(false) => {}
                    Err(error) => self.error = Some(error),
                }
            }
            Some(Err(error)) => self.error = Some(self.body_error(error)),
            None => {
                if self.decoder.eof(&mut out) {
                    self.state = State::Finished;
                } else {
                    self.error = Some(self.cut("EOF before the end of the response".into()));
                }
            }
        }
        self.queue.extend(out);
    }

    fn body_error(&self, error: EventStreamError<BodyError>) -> ProviderError {
        let provider = self.provider.clone();
        match error {
            EventStreamError::Transport(BodyError::TooLarge) => ProviderError::TooLarge {
                provider,
                limit: MAX_RESPONSE_BYTES,
                after: self.after(),
            },
            EventStreamError::Transport(BodyError::Transport(detail)) => self.cut(detail),
            EventStreamError::Utf8(error) => ProviderError::Decode {
                provider,
                message: format!("invalid UTF-8: {error}"),
            },
            EventStreamError::Parser(error) => ProviderError::Decode {
                provider,
                message: format!("invalid event stream: {error}"),
            },
        }
    }

    fn cut(&self, detail: String) -> ProviderError {
        ProviderError::StreamCut {
            provider: self.provider.clone(),
            after: self.after(),
            detail,
        }
    }

    /// Progress including the events still queued (they will be yielded before the error).
    fn after(&self) -> StreamProgress {
        let mut after = self.progress.clone();
        after.model_events += self.queue.len();
        after
    }
}

/// Parses the `data` of an event as JSON.
pub(crate) fn parse_data(
    provider: &str,
    event: &Event,
) -> Result<serde_json::Value, ProviderError> {
    serde_json::from_str(&event.data).map_err(|error| ProviderError::Decode {
        provider: provider.to_owned(),
        message: format!(
            "invalid JSON in `{}` event: {error}: {}",
            event.event, event.data
        ),
    })
}

/// The tool calls of one response, reassembled from argument fragments. Names are mapped back
/// from the names the request sent ([`WireNames`]).
#[derive(Debug, Default)]
pub(crate) struct ToolCalls {
    calls: Vec<ToolCall>,
    names: std::sync::Arc<WireNames>,
}

#[derive(Debug)]
struct ToolCall {
    id: String,
    name: String,
    arguments: String,
    /// Arguments given whole at the start (used only when no fragment follows).
    initial: Option<serde_json::Value>,
    ended: bool,
}

impl ToolCalls {
    /// No calls yet; names the model calls are mapped back through `names`.
    pub fn new(names: std::sync::Arc<WireNames>) -> Self {
        Self {
            calls: Vec::new(),
            names,
        }
    }

    /// Starts a call; returns its ordinal.
    pub fn start(
        &mut self,
        id: String,
        name: String,
        initial: Option<serde_json::Value>,
        out: &mut Vec<ModelEvent>,
    ) -> usize {
        let name = self.names.original(&name).to_owned();
        let index = self.calls.len();
        out.push(ModelEvent::ToolCallStart {
            index,
            id: id.clone(),
            name: name.clone(),
        });
        self.calls.push(ToolCall {
            id,
            name,
            arguments: String::new(),
            initial,
            ended: false,
        });
        index
    }

    /// Whether any call was started.
    pub fn any(&self) -> bool {
        !self.calls.is_empty()
    }

    /// Number of calls started.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// Appends an argument fragment to call `index`.
    pub fn delta(&mut self, index: usize, json: &str, out: &mut Vec<ModelEvent>) {
        if let Some(call) = self.calls.get_mut(index)
            && !json.is_empty()
        {
            call.arguments.push_str(json);
            out.push(ModelEvent::ToolCallDelta {
                index,
                json: json.to_owned(),
            });
        }
    }

    /// Sets the name of call `index` if it was not known at the start.
    pub fn name_if_missing(&mut self, index: usize, name: &str) {
        if let Some(call) = self.calls.get_mut(index)
            && call.name.is_empty()
        {
            call.name = self.names.original(name).to_owned();
        }
    }

    /// Ends call `index` (once): `ToolCallEnd`, or `ToolCallInvalid` when its arguments are
    /// not a JSON object.
    pub fn end(&mut self, index: usize, out: &mut Vec<ModelEvent>) {
        let Some(call) = self.calls.get_mut(index) else {
            return;
        };
        if call.ended {
            return;
        }
        call.ended = true;
        let (id, name) = (call.id.clone(), call.name.clone());
        match parse_arguments(&call.arguments, call.initial.take()) {
            Ok(input) => out.push(ModelEvent::ToolCallEnd {
                index,
                id,
                name,
                input,
            }),
            Err(error) => out.push(ModelEvent::ToolCallInvalid {
                index,
                id,
                name,
                raw_input: call.arguments.clone(),
                error,
            }),
        }
    }

    /// Ends every call not ended yet, in order.
    pub fn end_all(&mut self, out: &mut Vec<ModelEvent>) {
        for index in 0..self.calls.len() {
            self.end(index, out);
        }
    }
}

/// The arguments object of a call. Empty arguments are `{}`; a JSON string holding an object
/// (double-encoded by some servers) is accepted.
// String error: the reason the model reads for a call it sent malformed.
fn parse_arguments(
    arguments: &str,
    initial: Option<serde_json::Value>,
) -> Result<serde_json::Value, String> {
    let trimmed = arguments.trim();
    if trimmed.is_empty() {
        return Ok(initial.unwrap_or_else(|| serde_json::Value::Object(Default::default())));
    }
    match serde_json::from_str::<serde_json::Value>(trimmed) {
        Ok(value @ serde_json::Value::Object(_)) => Ok(value),
        Ok(serde_json::Value::String(inner)) => {
            match serde_json::from_str::<serde_json::Value>(&inner) {
                Ok(value @ serde_json::Value::Object(_)) => Ok(value),
                _ => Err("the tool arguments must be a JSON object, got a string".to_owned()),
            }
        }
        Ok(_) => Err("the tool arguments must be a JSON object".to_owned()),
        Err(error) => Err(format!("the tool arguments are not valid JSON ({error})")),
    }
}
