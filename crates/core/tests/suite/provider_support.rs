//! Shared helpers of the provider tests.

use std::time::Duration;

use futures::StreamExt;
use keel_core::provider::{
    AnthropicProvider, HttpSettings, Message, ModelEvent, ModelRequest, ModelStream,
    OpenAiProvider, Part, ProviderError, RetryPolicy, Role, ToolDefinition,
};
use keel_testkit::MockModel;
use serde_json::json;

/// Fast retries and short timeouts: no test waits long.
pub fn fast_settings() -> HttpSettings {
    HttpSettings {
        connect_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(5),
        retry: RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(40),
            max_retry_after: Duration::from_secs(5),
        },
    }
}

pub fn anthropic(mock: &MockModel) -> AnthropicProvider {
    anthropic_with(mock, fast_settings())
}

pub fn anthropic_with(mock: &MockModel, settings: HttpSettings) -> AnthropicProvider {
    AnthropicProvider::new(
        Some(&mock.base_url()),
        "test-key",
        "ANTHROPIC_API_KEY",
        settings,
    )
    .unwrap()
}

pub fn openai(mock: &MockModel) -> OpenAiProvider {
    openai_with(mock, fast_settings())
}

pub fn openai_with(mock: &MockModel, settings: HttpSettings) -> OpenAiProvider {
    OpenAiProvider::new(
        Some(&mock.openai_base_url()),
        Some("sk-test"),
        "OPENAI_API_KEY",
        settings,
    )
    .unwrap()
}

/// A one-message request.
pub fn simple_request(text: &str) -> ModelRequest {
    ModelRequest {
        model: "mock-model".into(),
        system: String::new(),
        messages: vec![Message::user_text(text)].into(),
        tools: Vec::new(),
        max_tokens: 1024,
        thinking_budget: None,
    }
}

pub fn tools() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition {
            name: "read_file".into(),
            description: "Read a file".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}})
                .into(),
        },
        ToolDefinition {
            name: "grep".into(),
            description: "Search files".into(),
            input_schema: json!({"type": "object", "properties": {"pattern": {"type": "string"}}})
                .into(),
        },
    ]
}

/// A request with history: thinking + tool use, then an ok and a failed tool result.
pub fn history_request() -> ModelRequest {
    ModelRequest {
        model: "mock-model".into(),
        system: "You are Keel.".into(),
        messages: vec![
            Message::user_text("Where is main?"),
            Message {
                role: Role::Assistant,
                content: vec![
                    Part::Thinking {
                        text: "Look first.".into(),
                        signature: Some("sig-prev".into()),
                    },
                    Part::Text("Searching.".into()),
                    Part::ToolUse {
                        id: "call_a".into(),
                        name: "grep".into(),
                        input: json!({"pattern": "fn main"}),
                    },
                    Part::ToolUse {
                        id: "call_b".into(),
                        name: "read_file".into(),
                        input: json!({"path": "nope.rs"}),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    Part::ToolResult {
                        tool_use_id: "call_a".into(),
                        content: "src/main.rs:1".into(),
                        is_error: false,
                    },
                    Part::ToolResult {
                        tool_use_id: "call_b".into(),
                        content: "no such file".into(),
                        is_error: true,
                    },
                ],
            },
        ]
        .into(),
        tools: tools(),
        max_tokens: 8192,
        thinking_budget: Some(2048),
    }
}

/// Every item of the stream: the events, and the error that ended it, if any.
pub async fn collect(mut stream: ModelStream) -> (Vec<ModelEvent>, Option<ProviderError>) {
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(error) => return (events, Some(error)),
        }
    }
    (events, None)
}

/// The events with deltas merged: consecutive text/thinking deltas joined, argument fragments
/// dropped (their concatenation is checked separately).
pub fn condensed(events: &[ModelEvent]) -> Vec<ModelEvent> {
    let mut out: Vec<ModelEvent> = Vec::new();
    for event in events {
        match (out.last_mut(), event) {
            (Some(ModelEvent::TextDelta(acc)), ModelEvent::TextDelta(more)) => acc.push_str(more),
            (
                Some(ModelEvent::ThinkingDelta { text: acc }),
                ModelEvent::ThinkingDelta { text: more },
            ) => acc.push_str(more),
            (_, ModelEvent::ToolCallDelta { .. }) => {}
            _ => out.push(event.clone()),
        }
    }
    out
}

/// The concatenated argument fragments of call `index`, and how many fragments there were.
pub fn arguments(events: &[ModelEvent], index: usize) -> (String, usize) {
    let fragments: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            ModelEvent::ToolCallDelta { index: i, json } if *i == index => Some(json.as_str()),
            _ => None,
        })
        .collect();
    (fragments.concat(), fragments.len())
}
