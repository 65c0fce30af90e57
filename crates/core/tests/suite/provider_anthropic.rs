//! The Anthropic client against the mock server: stream reassembly and the request it sends.

use keel_core::provider::{ModelEvent, Provider, StopReason, Usage};
use keel_testkit::MockModel;
use keel_testkit::mock_model::{Api, Reply, Turn, anthropic_event};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::provider_support::{
    anthropic, arguments, collect, condensed, history_request, simple_request,
};

fn multi_tool_turn() -> Turn {
    Turn::new()
        .thinking("I should read the file and search for callers.", "sig-abc")
        .text("Let me look at both.")
        .tool_call(
            "toolu_1",
            "read_file",
            json!({"path": "src/main.rs", "limit": 200}),
        )
        .tool_call(
            "toolu_2",
            "grep",
            json!({"pattern": "fn main", "paths": ["src", "tests"]}),
        )
        .usage(50, 80)
        .cache(1000, 200)
}

#[tokio::test]
async fn multi_tool_response_is_reassembled_exactly() {
    let mock = MockModel::start().await;
    mock.push_anthropic(multi_tool_turn());
    let provider = anthropic(&mock);

    let (events, error) = collect(provider.stream(history_request()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");

    assert_eq!(
        condensed(&events),
        vec![
            ModelEvent::ThinkingDelta {
                text: "I should read the file and search for callers.".into()
            },
            ModelEvent::ThinkingSignature("sig-abc".into()),
            ModelEvent::TextDelta("Let me look at both.".into()),
            ModelEvent::ToolCallStart {
                index: 0,
                id: "toolu_1".into(),
                name: "read_file".into()
            },
            ModelEvent::ToolCallEnd {
                index: 0,
                id: "toolu_1".into(),
                name: "read_file".into(),
                input: json!({"path": "src/main.rs", "limit": 200}),
            },
            ModelEvent::ToolCallStart {
                index: 1,
                id: "toolu_2".into(),
                name: "grep".into()
            },
            ModelEvent::ToolCallEnd {
                index: 1,
                id: "toolu_2".into(),
                name: "grep".into(),
                input: json!({"pattern": "fn main", "paths": ["src", "tests"]}),
            },
            ModelEvent::Usage(Usage {
                input_tokens: 1250,
                output_tokens: 80,
                cache_read_tokens: 1000,
                cache_write_tokens: 200,
            }),
            ModelEvent::Stop(StopReason::ToolUse),
        ]
    );
    // Text and arguments really arrived in several pieces.
    let text_deltas = events
        .iter()
        .filter(|e| matches!(e, ModelEvent::TextDelta(_)))
        .count();
    assert!(text_deltas > 1);
    let (args, fragments) = arguments(&events, 1);
    assert!(fragments >= 3, "{fragments}");
    assert_eq!(
        args,
        json!({"pattern": "fn main", "paths": ["src", "tests"]}).to_string()
    );
}

#[tokio::test]
async fn request_body_has_history_cache_breakpoints_and_thinking() {
    let mock = MockModel::start().await;
    mock.push_anthropic(Turn::text_only("ok"));
    let provider = anthropic(&mock);
    let (_, error) = collect(provider.stream(history_request()).await.unwrap()).await;
    assert!(error.is_none());

    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(request.header("x-api-key"), Some("test-key"));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("accept"), Some("text/event-stream"));
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(
        request.body,
        json!({
            "model": "mock-model",
            // The answer keeps its 8192; the thinking budget comes on top.
            "max_tokens": 8192 + 2048,
            "stream": true,
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "system": [{"type": "text", "text": "You are Keel.", "cache_control": ephemeral}],
            "tools": [
                {
                    "name": "read_file",
                    "description": "Read a file",
                    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
                },
                {
                    "name": "grep",
                    "description": "Search files",
                    "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}}},
                    "cache_control": ephemeral,
                },
            ],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Where is main?"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Look first.", "signature": "sig-prev"},
                    {"type": "text", "text": "Searching."},
                    {"type": "tool_use", "id": "call_a", "name": "grep", "input": {"pattern": "fn main"}},
                    {"type": "tool_use", "id": "call_b", "name": "read_file", "input": {"path": "nope.rs"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_a", "content": "src/main.rs:1", "is_error": false},
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_b",
                        "content": "no such file",
                        "is_error": true,
                        "cache_control": ephemeral,
                    },
                ]},
            ],
        })
    );
}

#[tokio::test]
async fn invalid_tool_arguments_become_an_invalid_call_event() {
    let mock = MockModel::start().await;
    let delta = |index: usize, json: &str| {
        anthropic_event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index,
                   "delta": {"type": "input_json_delta", "partial_json": json}}),
        )
    };
    mock.push(
        Api::Anthropic,
        Reply::sse(vec![
            anthropic_event("message_start", json!({"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}})),
            anthropic_event("content_block_start", json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "tool_use", "id": "toolu_x", "name": "edit", "input": {}}})),
            delta(0, "{\"path\": \"a.rs\", "),
            delta(0, "\"old\": tru"),
            anthropic_event("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
            anthropic_event("content_block_start", json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_y", "name": "list", "input": {}}})),
            anthropic_event("content_block_stop", json!({"type": "content_block_stop", "index": 1})),
            anthropic_event("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}})),
            anthropic_event("message_stop", json!({"type": "message_stop"})),
        ]),
    );
    let (events, error) =
        collect(anthropic(&mock).stream(simple_request("hi")).await.unwrap()).await;
    assert!(error.is_none());
    let ModelEvent::ToolCallInvalid {
        index,
        id,
        raw_input,
        error,
        ..
    } = &condensed(&events)[1]
    else {
        panic!("{events:#?}");
    };
    assert_eq!(
        (*index, id.as_str(), raw_input.as_str()),
        (0, "toolu_x", "{\"path\": \"a.rs\", \"old\": tru")
    );
    assert!(error.contains("not valid JSON"), "{error}");
    // A call without argument deltas has empty arguments: `{}`.
    assert!(events.contains(&ModelEvent::ToolCallEnd {
        index: 1,
        id: "toolu_y".into(),
        name: "list".into(),
        input: json!({}),
    }));
    assert_eq!(events.last(), Some(&ModelEvent::Stop(StopReason::ToolUse)));
}

#[tokio::test]
async fn stop_reasons_are_mapped() {
    let mock = MockModel::start().await;
    for reason in ["end_turn", "max_tokens", "refusal", "pause_turn"] {
        mock.push_anthropic(Turn::text_only("x").stop(reason));
    }
    let provider = anthropic(&mock);
    let mut stops = Vec::new();
    for _ in 0..4 {
        let (events, _) = collect(provider.stream(simple_request("hi")).await.unwrap()).await;
        stops.push(events.last().cloned().unwrap());
    }
    assert_eq!(
        stops,
        [
            StopReason::EndTurn,
            StopReason::MaxTokens,
            StopReason::Refusal,
            StopReason::Other("pause_turn".into()),
        ]
        .map(ModelEvent::Stop)
    );
}

#[tokio::test]
async fn thinking_budget_fits_within_the_models_output_limit() {
    let mut request = simple_request("hi");
    // Claude Opus 4.1 answers at most 32000 tokens: the answer keeps its 30000, thinking
    // gets what is left.
    request.model = "claude-opus-4-1-20250805".into();
    request.max_tokens = 30_000;
    request.thinking_budget = Some(10_000);
    let body: serde_json::Value = serde_json::from_slice(
        &keel_core::provider::AnthropicProvider::request_body(&request).unwrap(),
    )
    .unwrap();
    assert_eq!(body["max_tokens"], 32_000);
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2000})
    );
    // A model that cannot think gets no thinking, and its own output limit.
    request.model = "claude-3-5-haiku-latest".into();
    request.max_tokens = 1000;
    let body: serde_json::Value = serde_json::from_slice(
        &keel_core::provider::AnthropicProvider::request_body(&request).unwrap(),
    )
    .unwrap();
    assert_eq!(body.get("thinking"), None);
    // The last message's last block carries the breakpoint even without tools or system.
    assert_eq!(
        body["messages"][0]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(body.get("system"), None);
    assert_eq!(body.get("tools"), None);
}

#[tokio::test]
async fn redacted_thinking_round_trips() {
    let mock = MockModel::start().await;
    mock.push(
        Api::Anthropic,
        Reply::sse(vec![
            anthropic_event("message_start", json!({"type": "message_start", "message": {"usage": {"input_tokens": 3}}})),
            anthropic_event("content_block_start", json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}})),
            anthropic_event("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
            anthropic_event("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}})),
            anthropic_event("message_stop", json!({"type": "message_stop"})),
        ]),
    );
    let (events, _) = collect(anthropic(&mock).stream(simple_request("hi")).await.unwrap()).await;
    assert_eq!(
        events[0],
        ModelEvent::RedactedThinking("EmwKAhgBEgy3va3pzix".into())
    );

    let mut request = simple_request("hi");
    request.messages.push(keel_core::provider::Message {
        role: keel_core::provider::Role::Assistant,
        content: vec![
            keel_core::provider::Part::RedactedThinking {
                data: "EmwKAhgBEgy3va3pzix".into(),
            },
            keel_core::provider::Part::Thinking {
                text: "unsigned".into(),
                signature: None,
            },
            keel_core::provider::Part::Text(String::new()),
            keel_core::provider::Part::Text("answer".into()),
        ],
    });
    let body: serde_json::Value = serde_json::from_slice(
        &keel_core::provider::AnthropicProvider::request_body(&request).unwrap(),
    )
    .unwrap();
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
            {"type": "text", "text": "answer", "cache_control": {"type": "ephemeral"}},
        ])
    );
}

#[tokio::test]
async fn prompt_too_long_is_recognisable() {
    let mock = MockModel::start().await;
    mock.push(
        Api::Anthropic,
        Reply::error(
            Api::Anthropic,
            400,
            "prompt is too long: 201234 tokens > 200000 maximum",
        ),
    );
    let error = anthropic(&mock)
        .stream(simple_request("hi"))
        .await
        .err()
        .unwrap();
    assert!(
        error.is_context_overflow() && !error.is_retryable(),
        "{error:?}"
    );
    assert_eq!(mock.requests().len(), 1);
}

/// A request's history keeps each message's serialized form: the next request of a growing
/// conversation reuses them, and its body is byte for byte the body of the same conversation
/// serialized from nothing, whether the history grew by a new message or by a user message
/// merged into the last one (whose breakpoint moves with it), and after any other change.
#[test]
fn kept_serializations_give_the_body_of_a_fresh_history() {
    use keel_core::provider::{AnthropicProvider, History, Message, Part, Role};
    let body = |history: &History| {
        let mut request = history_request();
        request.messages = history.clone();
        String::from_utf8(AnthropicProvider::request_body(&request).unwrap()).unwrap()
    };
    let fresh = |history: &History| body(&History::new(history.to_vec()));
    let mut history = history_request().messages;
    assert_eq!(body(&history), fresh(&history));
    history.push_merged(Message::assistant_text("Found it."));
    assert_eq!(body(&history), fresh(&history));
    history.push_merged(Message::user_text("Now fix it."));
    assert_eq!(body(&history), fresh(&history));
    // Merged into the trailing user message: its serialized form is not reused.
    history.push_merged(Message::user_text("And test it."));
    let merged = body(&history);
    assert!(merged.contains("And test it."), "{merged}");
    assert_eq!(merged, fresh(&history));
    // A message with nothing sendable, then a change of an earlier message.
    history.push_merged(Message {
        role: Role::Assistant,
        content: vec![Part::Text(String::new())],
    });
    assert_eq!(body(&history), fresh(&history));
    history[0] = Message::user_text("Where is the entry point?");
    let changed = body(&history);
    assert!(changed.contains("entry point"), "{changed}");
    assert_eq!(changed, fresh(&history));
    // A long conversation, its kept runs merged as it grows (turns of uneven lengths, some
    // merged into the last user message, some sending nothing), and a request's copy of the
    // history that outlives the session's next change.
    for turn in 0..60 {
        let text = format!("turn {turn} ").repeat(1 + (turn * 7) % 23);
        history.push_merged(Message::user_text(text.clone()));
        if turn % 5 == 0 {
            history.push_merged(Message::user_text("and more"));
        }
        let held = history.clone();
        assert_eq!(body(&history), fresh(&history), "turn {turn}");
        let answer = if turn % 9 == 0 { String::new() } else { text };
        history.push_merged(Message::assistant_text(answer));
        assert_eq!(body(&held), fresh(&held), "turn {turn}");
        assert_eq!(body(&history), fresh(&history), "turn {turn}");
    }
}
