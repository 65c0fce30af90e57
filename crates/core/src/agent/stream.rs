//! One model response streamed: text and thinking forwarded to the host as they come, tool
//! calls collected, retries said while the provider waits.

use std::sync::Arc;

use futures::StreamExt as _;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::turn::RequestedCall;
use super::{AgentEvent, TurnHost};
use crate::provider::{
    Message, ModelEvent, ModelRequest, Part, Provider, ProviderError, RetryNotice, Role,
    StopReason, Usage, observe_retries,
};

/// One streamed model response.
#[derive(Debug, Default)]
pub(super) struct Response {
    pub(super) parts: Vec<Part>,
    pub(super) calls: Vec<RequestedCall>,
    pub(super) text: String,
    pub(super) usage: Option<Usage>,
    pub(super) stop: Option<StopReason>,
    pub(super) thinking: String,
}

impl Response {
    pub(super) fn flush_thinking(&mut self, signature: Option<String>) {
        if !self.thinking.is_empty() || signature.is_some() {
            let text = std::mem::take(&mut self.thinking);
            self.parts.push(Part::Thinking { text, signature });
        }
    }

    pub(super) fn push_text(&mut self, delta: &str) {
        self.flush_thinking(None);
        self.text.push_str(delta);
        if let Some(Part::Text(text)) = self.parts.last_mut() {
            text.push_str(delta);
        } else {
            self.parts.push(Part::Text(delta.to_owned()));
        }
    }

    /// Records a complete tool call in the message and in the calls to run.
    pub(super) fn push_call(
        &mut self,
        id: String,
        name: String,
        input: Value,
        invalid: Option<String>,
    ) {
        self.flush_thinking(None);
        self.parts.push(Part::ToolUse {
            id: id.clone(),
            name: name.clone(),
            input: input.clone(),
        });
        self.calls.push(RequestedCall {
            model_id: id.clone(),
            id,
            name,
            input,
            invalid,
        });
    }

    pub(super) fn message(&self) -> Message {
        Message {
            role: Role::Assistant,
            content: self.parts.clone(),
        }
    }
}

pub(super) enum StreamEnd {
    Cancelled(Response),
    Failed(ProviderError),
}

/// Streams one model response, forwarding text and thinking to the host as they come.
pub(super) async fn stream_response(
    provider: &dyn Provider,
    request: ModelRequest,
    message_id: &str,
    host: &dyn TurnHost,
    cancel: &CancellationToken,
) -> Result<Response, StreamEnd> {
    let mut response = Response::default();
    // Retries inside the provider are said to the user while Keel waits.
    let (retries, mut retry_notices) = tokio::sync::mpsc::unbounded_channel();
    let observer: Arc<dyn Fn(RetryNotice) + Send + Sync> = Arc::new(move |notice| {
        let _ = retries.send(notice);
    });
    let opening = observe_retries(observer, provider.stream(request));
    tokio::pin!(opening);
    let mut stream = loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(StreamEnd::Cancelled(response)),
            Some(notice) = retry_notices.recv() => host.event(AgentEvent::Waiting {
                text: waiting_text(&notice),
            }),
            stream = &mut opening => break stream.map_err(StreamEnd::Failed)?,
        }
    };
    loop {
        // A front-end that cannot take more holds the stream here (see `TurnHost::ready`).
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(StreamEnd::Cancelled(response)),
            () = host.ready() => {}
        }
        let event = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(StreamEnd::Cancelled(response)),
            event = stream.next() => event,
        };
        let Some(event) = event else { break };
        match event.map_err(StreamEnd::Failed)? {
            ModelEvent::TextDelta(text) => {
                response.push_text(&text);
                host.event(AgentEvent::Text {
                    message_id: message_id.to_owned(),
                    text,
                });
            }
            ModelEvent::ThinkingDelta { text } => {
                response.thinking.push_str(&text);
                host.event(AgentEvent::Thinking {
                    message_id: message_id.to_owned(),
                    text,
                });
            }
            ModelEvent::ThinkingSignature(signature) => response.flush_thinking(Some(signature)),
            ModelEvent::RedactedThinking(data) => {
                response.flush_thinking(None);
                response.parts.push(Part::RedactedThinking { data });
            }
            ModelEvent::ToolCallStart { .. } | ModelEvent::ToolCallDelta { .. } => {}
            ModelEvent::ToolCallEnd {
                id, name, input, ..
            } => response.push_call(id, name, input, None),
            ModelEvent::ToolCallInvalid {
                id, name, error, ..
            } => response.push_call(id, name, Value::Object(serde_json::Map::new()), Some(error)),
            ModelEvent::Usage(usage) => response.usage = Some(usage),
            ModelEvent::Stop(stop) => response.stop = Some(stop),
        }
    }
    response.flush_thinking(None);
    Ok(response)
}

/// The status line for a retry: what failed, how long Keel waits, which attempt comes next.
pub(crate) fn waiting_text(notice: &RetryNotice) -> String {
    let why = match &notice.error {
        ProviderError::RateLimited { provider, .. } => {
            format!("{provider} is rate limiting requests (HTTP 429)")
        }
        ProviderError::Overloaded { provider, .. } => format!("{provider} is overloaded"),
        ProviderError::Unreachable {
            provider, base_url, ..
        } => format!("{provider} cannot be reached at {base_url}"),
        ProviderError::Http {
            provider, status, ..
        } => format!("{provider} answered HTTP {status}"),
        ProviderError::Timeout { provider, .. } => format!("{provider} stopped answering"),
        other => other.to_string(),
    };
    let seconds = notice.delay.as_secs_f64();
    let wait = if seconds < 1.0 {
        "a moment".to_owned()
    } else {
        format!("{} s", seconds.round())
    };
    format!(
        "{why}; waiting {wait} before trying again (attempt {} of {}).\n\n",
        notice.failed_attempt + 1,
        notice.max_attempts
    )
}
