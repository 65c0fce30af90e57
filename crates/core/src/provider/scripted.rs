//! [`ScriptedProvider`]: replays model responses from a JSON script, deterministically and
//! without delay, for tests and the offline demo.
//!
//! # Script format
//!
//! ```json
//! {
//!   "responses": [
//!     [ {"text": ["Hello", ", world"]} ],
//!     {"events": [
//!       {"thinking": "Let me read it.", "signature": "sig-1"},
//!       {"text": "Reading {workspace}/README.md"},
//!       {"tool_call": {"id": "call_1", "name": "read", "input": {"path": "{workspace}/README.md"}}},
//!       {"usage": {"input_tokens": 1200, "output_tokens": 40, "cache_read_tokens": 1000}},
//!       {"stop": "tool_use"}
//!     ]}
//!   ]
//! }
//! ```
//!
//! The top level is `{"responses": [...]}` or the array itself; a response is an array of
//! events or `{"events": [...]}`. Each [`Provider::stream`] call replays the next response.
//! Events (one key each):
//! - `{"text": "..."}` or `{"text": ["chunk", "chunk"]}`: one `TextDelta` per chunk.
//! - `{"thinking": "..." | [...], "signature": "..."}`: `ThinkingDelta`s, then
//!   `ThinkingSignature` when a signature is given.
//! - `{"redacted_thinking": "data"}`.
//! - `{"tool_call": {"id"?, "name", "input"}}`: `ToolCallStart`, one `ToolCallDelta`,
//!   `ToolCallEnd`. `"raw_input": "text"` instead of `input` sends unparsed arguments (invalid
//!   JSON gives `ToolCallInvalid`). A missing id becomes `call_<response>_<n>`.
//! - `{"usage": {"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"}}`
//!   (missing counts are 0).
//! - `{"stop": "end_turn" | "tool_use" | "max_tokens" | "refusal" | other}`. Without one, the
//!   response ends with `tool_use` if it made tool calls, `end_turn` otherwise.
//! - `{"error": {"kind": "rate_limited" | "overloaded" | "network" | "timeout" | "stream_cut" |
//!   "api", "message": "..."}}`: the stream fails there (as the first event, `stream()` itself
//!   fails, like an HTTP provider whose retries are exhausted).
//!
//! A response can also branch on what the tools answered (a demo whose user may reject an
//! edit): `{"cases": [{"when": {...}, "events": [...]}, ..., {"events": [...]}]}` replays the
//! events of the first case whose `when` holds for the request (a case without `when` always
//! does; no case holding is an error). `when` names a tool call and what its result in the
//! request says: `{"result": "call_edit", "is_error": true}` (the call failed or was refused),
//! `{"result": "call_test", "contains": "1 passed"}` (its text contains this); an array of
//! them must all hold. Each branch
//! takes the same place in the script: the next request replays the next response.
//!
//! Templating: `{name}` in any string (text, thinking, tool input values, raw input, error
//! messages) is replaced by the value given to [`ScriptedProvider::with_var`], e.g.
//! `{workspace}`. Unknown placeholders are left as they are.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::Value;

use super::sse::ToolCalls;
use super::{ModelEvent, ModelRequest, ModelStream, Provider, ProviderError, StopReason, Usage};

/// A provider replaying a script. See the module docs for the format.
#[derive(Debug)]
pub struct ScriptedProvider {
    responses: Vec<Vec<Case>>,
    vars: BTreeMap<String, String>,
    next: Mutex<usize>,
    requests: Mutex<Vec<ModelRequest>>,
    context_window: u64,
}

#[derive(Debug, Clone)]
enum ScriptEvent {
    Text(Vec<String>),
    Thinking {
        chunks: Vec<String>,
        signature: Option<String>,
    },
    RedactedThinking(String),
    ToolCall {
        id: Option<String>,
        name: String,
        arguments: Arguments,
    },
    Usage(Usage),
    Stop(StopReason),
    Error {
        kind: String,
        message: String,
    },
}

/// One branch of a response: its events, replayed when `when` holds (always without one).
#[derive(Debug, Clone)]
struct Case {
    /// Every one must hold (empty: always).
    when: Vec<When>,
    events: Vec<ScriptEvent>,
}

/// What a tool call's result in the request must say for a case to be replayed.
#[derive(Debug, Clone)]
struct When {
    call_id: String,
    is_error: Option<bool>,
    contains: Option<String>,
}

impl When {
    fn holds(&self, request: &ModelRequest) -> bool {
        request
            .messages
            .iter()
            .flat_map(|message| &message.content)
            .any(|part| match part {
                super::Part::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                    ..
                } if *tool_use_id == self.call_id => {
                    self.is_error.is_none_or(|wanted| wanted == *is_error)
                        && self
                            .contains
                            .as_ref()
                            .is_none_or(|text| content.contains(text.as_str()))
                }
                _ => false,
            })
    }
}

#[derive(Debug, Clone)]
enum Arguments {
    Json(Value),
    Raw(String),
}

const SCRIPTED: &str = "scripted";

impl ScriptedProvider {
    /// Loads a script from a JSON file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ProviderError> {
        let path = path.as_ref();
        // Reading the operator-chosen script is not a tool action; it does not go through the
        // capability-checked runtime.
        let text = crate::runtime::config_files::read(path).map_err(|error| {
            ProviderError::Config(format!("cannot read script {}: {error}", path.display()))
        })?;
        Self::from_json_str(&text)
            .map_err(|error| ProviderError::Config(format!("script {}: {error}", path.display())))
    }

    /// Parses a script from JSON text.
    pub fn from_json_str(text: &str) -> Result<Self, ProviderError> {
        let value = serde_json::from_str(text)
            .map_err(|error| ProviderError::Config(format!("invalid JSON: {error}")))?;
        Self::from_json(value)
    }

    /// Builds a provider from a parsed script.
    pub fn from_json(script: Value) -> Result<Self, ProviderError> {
        let responses = match script {
            Value::Object(mut object) => object.remove("responses"),
            array @ Value::Array(_) => Some(array),
            _ => None,
        };
        let Some(Value::Array(responses)) = responses else {
            return Err(ProviderError::Config(
                "a script is {\"responses\": [...]} or an array of responses".into(),
            ));
        };
        let responses = responses
            .into_iter()
            .enumerate()
            .map(|(number, response)| {
                parse_response(response).map_err(|error| {
                    ProviderError::Config(format!("response {}: {error}", number + 1))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            responses,
            vars: BTreeMap::new(),
            next: Mutex::new(0),
            requests: Mutex::new(Vec::new()),
            context_window: 200_000,
        })
    }

    /// Substitutes `{name}` with `value` in the replayed strings.
    pub fn with_var(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.vars.insert(name.into(), value.into());
        self
    }

    /// Substitutes every `{name}` of `vars`.
    pub fn with_vars<K: Into<String>, V: Into<String>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.vars.extend(
            vars.into_iter()
                .map(|(name, value)| (name.into(), value.into())),
        );
        self
    }

    /// The value of [`Provider::context_window`] (default 200 000).
    pub fn with_context_window(mut self, tokens: u64) -> Self {
        self.context_window = tokens;
        self
    }

    /// The requests received so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        lock(&self.requests).clone()
    }

    /// How many responses the script has.
    pub fn len(&self) -> usize {
        self.responses.len()
    }

    /// Whether the script has no response.
    pub fn is_empty(&self) -> bool {
        self.responses.is_empty()
    }

    /// How many responses are left.
    pub fn remaining(&self) -> usize {
        self.responses.len().saturating_sub(*lock(&self.next))
    }

    fn substitute(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (name, value) in &self.vars {
            text = text.replace(&format!("{{{name}}}"), value);
        }
        text
    }

    fn substitute_value(&self, value: &Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.substitute(text)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.substitute_value(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(key, v)| (key.clone(), self.substitute_value(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// The model events (and possibly a final error) of response `number`.
    fn replay(
        &self,
        number: usize,
        script: &[ScriptEvent],
    ) -> Vec<Result<ModelEvent, ProviderError>> {
        let mut items = Vec::new();
        let mut tools = ToolCalls::default();
        let mut stopped = false;
        for event in script {
            let mut out = Vec::new();
            match event {
                ScriptEvent::Text(chunks) => {
                    out.extend(
                        chunks
                            .iter()
                            .map(|chunk| ModelEvent::TextDelta(self.substitute(chunk))),
                    );
                }
                ScriptEvent::Thinking { chunks, signature } => {
                    out.extend(chunks.iter().map(|chunk| ModelEvent::ThinkingDelta {
                        text: self.substitute(chunk),
                    }));
                    out.extend(
                        signature
                            .iter()
                            .map(|sig| ModelEvent::ThinkingSignature(sig.clone())),
                    );
                }
                ScriptEvent::RedactedThinking(data) => {
                    out.push(ModelEvent::RedactedThinking(data.clone()))
                }
                ScriptEvent::ToolCall {
                    id,
                    name,
                    arguments,
                } => {
                    let id = id
                        .clone()
                        .unwrap_or_else(|| format!("call_{}_{}", number + 1, tools.len()));
                    let index = tools.start(id, name.clone(), None, &mut out);
                    let raw = match arguments {
                        Arguments::Json(input) => self.substitute_value(input).to_string(),
                        Arguments::Raw(raw) => self.substitute(raw),
                    };
                    tools.delta(index, &raw, &mut out);
                    tools.end(index, &mut out);
                }
                ScriptEvent::Usage(usage) => out.push(ModelEvent::Usage(*usage)),
                ScriptEvent::Stop(reason) => {
                    out.push(ModelEvent::Stop(reason.clone()));
                    stopped = true;
                }
                ScriptEvent::Error { kind, message } => {
                    items.push(Err(script_error(
                        kind,
                        self.substitute(message),
                        items.len(),
                    )));
                    return items;
                }
            }
            items.extend(out.into_iter().map(Ok));
            if stopped {
                return items;
            }
        }
        let reason = if tools.any() {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        };
        items.push(Ok(ModelEvent::Stop(reason)));
        items
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Provider for ScriptedProvider {
    fn id(&self) -> &str {
        SCRIPTED
    }

    fn stream(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelStream, ProviderError>> {
        lock(&self.requests).push(request);
        let number = {
            let mut next = lock(&self.next);
            let number = *next;
            *next += 1;
            number
        };
        let request = lock(&self.requests).last().cloned();
        let chosen = self.responses.get(number).map(|cases| {
            cases.iter().find(|case| {
                case.when
                    .iter()
                    .all(|when| request.as_ref().is_some_and(|r| when.holds(r)))
            })
        });
        let result = match chosen {
            None => Err(ProviderError::ScriptExhausted {
                responses: self.responses.len(),
            }),
            Some(None) => Err(ProviderError::Config(format!(
                "script response {}: no case holds for this request",
                number + 1
            ))),
            Some(Some(case)) => {
                let mut items = self.replay(number, &case.events).into_iter().peekable();
                // An error before any event fails `stream()` itself, as with HTTP providers.
                match items.next_if(Result::is_err) {
                    Some(Err(error)) => Err(error),
                    _ => Ok(futures::stream::iter(items).boxed()),
                }
            }
        };
        Box::pin(async move { result })
    }

    fn context_window(&self, _model: &str) -> u64 {
        self.context_window
    }
}

fn script_error(kind: &str, message: String, model_events: usize) -> ProviderError {
    let provider = SCRIPTED.to_owned();
    let after = super::StreamProgress {
        sse_events: 0,
        model_events,
        last_event: None,
    };
    match kind {
        "rate_limited" => ProviderError::RateLimited {
            provider,
            retry_after: None,
            body: message,
        },
        "overloaded" => ProviderError::Overloaded {
            provider,
            retry_after: None,
            body: message,
        },
        "network" => ProviderError::Network { provider, message },
        "timeout" => ProviderError::Timeout {
            provider,
            idle: Duration::from_secs(1),
            after,
        },
        "stream_cut" => ProviderError::StreamCut {
            provider,
            after,
            detail: message,
        },
        other => ProviderError::Api {
            provider,
            kind: other.to_owned(),
            message,
        },
    }
}

// String error: the script's fault, said to its author as is.
fn parse_response(response: Value) -> Result<Vec<Case>, String> {
    let Some(cases) = response.get("cases") else {
        return Ok(vec![Case {
            when: Vec::new(),
            events: parse_events(response)?,
        }]);
    };
    let Value::Array(cases) = cases else {
        return Err("`cases` is an array of {\"when\"?, \"events\"}".into());
    };
    cases
        .iter()
        .enumerate()
        .map(|(number, case)| {
            let when = match case.get("when") {
                None => Ok(Vec::new()),
                Some(Value::Array(all)) => all.iter().map(parse_when).collect(),
                Some(one) => parse_when(one).map(|when| vec![when]),
            };
            let events = case
                .get("events")
                .cloned()
                .ok_or_else(|| "a case needs `events`".to_owned())
                .and_then(parse_events);
            match (when, events) {
                (Ok(when), Ok(events)) => Ok(Case { when, events }),
                (Err(error), _) | (_, Err(error)) => Err(format!("case {}: {error}", number + 1)),
            }
        })
        .collect()
}

// String error: the script's fault, said to its author as is.
fn parse_when(when: &Value) -> Result<When, String> {
    let call_id = when
        .get("result")
        .and_then(Value::as_str)
        .ok_or("`when` needs `result`: the id of a tool call")?;
    let is_error = match when.get("is_error") {
        None => None,
        Some(value) => Some(value.as_bool().ok_or("`is_error` is a boolean")?),
    };
    let contains = match when.get("contains") {
        None => None,
        Some(value) => Some(value.as_str().ok_or("`contains` is a string")?.to_owned()),
    };
    Ok(When {
        call_id: call_id.to_owned(),
        is_error,
        contains,
    })
}

// String error: the script's fault, said to its author as is.
fn parse_events(response: Value) -> Result<Vec<ScriptEvent>, String> {
    let events = match response {
        Value::Array(events) => events,
        Value::Object(mut object) => match object.remove("events") {
            Some(Value::Array(events)) => events,
            _ => return Err("expected an array of events or {\"events\": [...]}".into()),
        },
        _ => return Err("expected an array of events or {\"events\": [...]}".into()),
    };
    events
        .iter()
        .enumerate()
        .map(|(number, event)| {
            parse_event(event).map_err(|error| format!("event {}: {error}", number + 1))
        })
        .collect()
}

// String error: the script's fault, said to its author as is.
fn parse_event(event: &Value) -> Result<ScriptEvent, String> {
    let string = |value: &Value| value.as_str().map(str::to_owned);
    if let Some(text) = event.get("text") {
        return chunks(text).map(ScriptEvent::Text);
    }
    if let Some(thinking) = event.get("thinking") {
        let signature = event.get("signature").and_then(string);
        return chunks(thinking).map(|chunks| ScriptEvent::Thinking { chunks, signature });
    }
    if let Some(data) = event.get("redacted_thinking") {
        return string(data)
            .map(ScriptEvent::RedactedThinking)
            .ok_or("redacted_thinking: a string".into());
    }
    if let Some(call) = event.get("tool_call") {
        let name = call
            .get("name")
            .and_then(string)
            .ok_or("tool_call needs a `name`")?;
        let arguments = match (call.get("input"), call.get("raw_input").and_then(string)) {
            (Some(input), None) => Arguments::Json(input.clone()),
            (None, Some(raw)) => Arguments::Raw(raw),
            (None, None) => Arguments::Json(Value::Object(Default::default())),
            (Some(_), Some(_)) => return Err("tool_call: `input` or `raw_input`, not both".into()),
        };
        return Ok(ScriptEvent::ToolCall {
            id: call.get("id").and_then(string),
            name,
            arguments,
        });
    }
    if let Some(usage) = event.get("usage") {
        let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
        return Ok(ScriptEvent::Usage(Usage {
            input_tokens: count("input_tokens"),
            output_tokens: count("output_tokens"),
            cache_read_tokens: count("cache_read_tokens"),
            cache_write_tokens: count("cache_write_tokens"),
        }));
    }
    if let Some(stop) = event.get("stop") {
        let reason = match stop.as_str().ok_or("stop: a string")? {
            "end_turn" => StopReason::EndTurn,
            "tool_use" => StopReason::ToolUse,
            "max_tokens" => StopReason::MaxTokens,
            "refusal" => StopReason::Refusal,
            other => StopReason::Other(other.to_owned()),
        };
        return Ok(ScriptEvent::Stop(reason));
    }
    if let Some(error) = event.get("error") {
        let kind = error
            .get("kind")
            .and_then(string)
            .ok_or("error needs a `kind`")?;
        let message = error.get("message").and_then(string).unwrap_or_default();
        return Ok(ScriptEvent::Error { kind, message });
    }
    Err(format!(
        "unknown event {event}; expected text, thinking, redacted_thinking, tool_call, usage, stop or error"
    ))
}

/// A string or an array of strings.
// String error: the script's fault, said to its author as is.
fn chunks(value: &Value) -> Result<Vec<String>, String> {
    match value {
        Value::String(text) => Ok(vec![text.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| "chunks must be strings".to_owned())
            })
            .collect(),
        _ => Err("expected a string or an array of strings".into()),
    }
}
