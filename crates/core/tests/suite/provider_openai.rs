//! The OpenAI-compatible client against the mock server: stream reassembly and the request.

use keel_core::provider::{Message, ModelEvent, Part, Provider, Role, StopReason, Usage};
use keel_testkit::MockModel;
use keel_testkit::mock_model::{Api, Reply, Turn, openai_done, openai_event};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::provider_support::{
    arguments, collect, condensed, history_request, openai, simple_request,
};

#[tokio::test]
async fn multi_tool_response_is_reassembled_exactly() {
    let mock = MockModel::start().await;
    mock.push_openai(
        Turn::new()
            .thinking("Two lookups needed.", "")
            .text("Checking both.")
            .tool_call("call_1", "read_file", json!({"path": "src/lib.rs"}))
            .tool_call(
                "call_2",
                "grep",
                json!({"pattern": "impl Provider", "context": 2}),
            )
            .usage(40, 30)
            .cache(960, 0),
    );
    let (events, error) = collect(openai(&mock).stream(history_request()).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        condensed(&events),
        vec![
            ModelEvent::ThinkingDelta {
                text: "Two lookups needed.".into()
            },
            ModelEvent::TextDelta("Checking both.".into()),
            ModelEvent::ToolCallStart {
                index: 0,
                id: "call_1".into(),
                name: "read_file".into()
            },
            ModelEvent::ToolCallStart {
                index: 1,
                id: "call_2".into(),
                name: "grep".into()
            },
            ModelEvent::ToolCallEnd {
                index: 0,
                id: "call_1".into(),
                name: "read_file".into(),
                input: json!({"path": "src/lib.rs"}),
            },
            ModelEvent::ToolCallEnd {
                index: 1,
                id: "call_2".into(),
                name: "grep".into(),
                input: json!({"pattern": "impl Provider", "context": 2}),
            },
            ModelEvent::Usage(Usage {
                input_tokens: 1000,
                output_tokens: 30,
                cache_read_tokens: 960,
                cache_write_tokens: 0,
            }),
            ModelEvent::Stop(StopReason::ToolUse),
        ]
    );
    let (args, fragments) = arguments(&events, 1);
    assert!(fragments >= 3);
    assert_eq!(
        args,
        json!({"pattern": "impl Provider", "context": 2}).to_string()
    );
}

#[tokio::test]
async fn request_body_has_tool_messages_and_data_url_images() {
    let mock = MockModel::start().await;
    mock.push_openai(Turn::text_only("ok"));
    let mut request = history_request();
    request.messages.push(Message {
        role: Role::User,
        content: vec![
            Part::Text("And this screenshot?".into()),
            Part::Image {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into(),
            },
        ],
    });
    let (_, error) = collect(openai(&mock).stream(request).await.unwrap()).await;
    assert!(error.is_none());

    let requests = mock.requests();
    let request = &requests[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(request.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(
        request.body,
        json!({
            "model": "mock-model",
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 8192,
            "reasoning_effort": "low",
            "tools": [
                {"type": "function", "function": {
                    "name": "read_file",
                    "description": "Read a file",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                }},
                {"type": "function", "function": {
                    "name": "grep",
                    "description": "Search files",
                    "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}},
                }},
            ],
            "messages": [
                {"role": "system", "content": "You are Keel."},
                {"role": "user", "content": "Where is main?"},
                {"role": "assistant", "content": "Searching.", "tool_calls": [
                    {"id": "call_a", "type": "function",
                     "function": {"name": "grep", "arguments": "{\"pattern\":\"fn main\"}"}},
                    {"id": "call_b", "type": "function",
                     "function": {"name": "read_file", "arguments": "{\"path\":\"nope.rs\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_a", "content": "src/main.rs:1"},
                {"role": "tool", "tool_call_id": "call_b", "content": "Error: no such file"},
                {"role": "user", "content": [
                    {"type": "text", "text": "And this screenshot?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                ]},
            ],
        })
    );
}

#[tokio::test]
async fn official_endpoint_uses_max_completion_tokens_and_no_key_sends_no_auth() {
    let official = keel_core::provider::OpenAiProvider::new(
        None,
        Some("k"),
        "OPENAI_API_KEY",
        Default::default(),
    )
    .unwrap();
    let body: serde_json::Value =
        serde_json::from_slice(&official.request_body(&simple_request("hi")).unwrap()).unwrap();
    assert_eq!(body["max_completion_tokens"], json!(1024));
    assert_eq!(body.get("max_tokens"), None);

    let mock = MockModel::start().await;
    mock.push_openai(Turn::text_only("local"));
    let local = keel_core::provider::OpenAiProvider::new(
        Some(&format!("{}/", mock.base_url())), // no /v1, trailing slash: `/chat/completions`
        None,
        "OPENAI_API_KEY",
        super::provider_support::fast_settings(),
    )
    .unwrap();
    let (events, error) = collect(local.stream(simple_request("hi")).await.unwrap()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(condensed(&events)[0], ModelEvent::TextDelta("local".into()));
    let request = &mock.requests()[0];
    assert_eq!(request.path, "/chat/completions");
    assert_eq!(request.header("authorization"), None);
}

#[tokio::test]
async fn finish_reasons_are_mapped_and_missing_done_is_tolerated_after_finish() {
    let mock = MockModel::start().await;
    mock.push_openai(Turn::text_only("long").stop("length"));
    mock.push_openai(Turn::text_only("no").stop("content_filter"));
    // A server that ends after the finish_reason chunk without `[DONE]` (close-delimited).
    let mut events = Turn::text_only("bye").openai_events();
    events.pop();
    mock.push(Api::OpenAi, Reply::sse(events).close_delimited());
    let provider = openai(&mock);
    let mut stops = Vec::new();
    for _ in 0..3 {
        let (events, error) = collect(provider.stream(simple_request("hi")).await.unwrap()).await;
        assert!(error.is_none(), "{error:?}");
        stops.push(events.last().cloned().unwrap());
    }
    assert_eq!(
        stops,
        [
            StopReason::MaxTokens,
            StopReason::Refusal,
            StopReason::EndTurn
        ]
        .map(ModelEvent::Stop)
    );
}

#[tokio::test]
async fn whole_tool_calls_with_stop_and_reasoning_field_like_ollama() {
    let mock = MockModel::start().await;
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        openai_event(
            &json!({"id": "x", "object": "chat.completion.chunk", "model": "qwen3",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    mock.push(
        Api::OpenAi,
        Reply::sse(vec![
            chunk(
                json!({"role": "assistant", "content": "", "reasoning": "hmm"}),
                json!(null),
            ),
            chunk(
                json!({"role": "assistant", "content": "", "tool_calls": [
                    {"id": "call_q", "index": 0, "type": "function",
                     "function": {"name": "read_file", "arguments": "{\"path\":\"README.md\"}"}}]}),
                json!(null),
            ),
            chunk(json!({"role": "assistant", "content": ""}), json!("stop")),
            openai_done(),
        ]),
    );
    let (events, error) = collect(openai(&mock).stream(simple_request("hi")).await.unwrap()).await;
    assert!(error.is_none());
    assert_eq!(
        condensed(&events),
        vec![
            ModelEvent::ThinkingDelta { text: "hmm".into() },
            ModelEvent::ToolCallStart {
                index: 0,
                id: "call_q".into(),
                name: "read_file".into()
            },
            ModelEvent::ToolCallEnd {
                index: 0,
                id: "call_q".into(),
                name: "read_file".into(),
                input: json!({"path": "README.md"}),
            },
            ModelEvent::Stop(StopReason::ToolUse),
        ]
    );
}

#[test]
fn a_call_only_answer_has_null_content_and_texts_join() {
    let provider = keel_core::provider::OpenAiProvider::new(
        Some("http://127.0.0.1:9/v1"),
        Some("k"),
        "OPENAI_API_KEY",
        Default::default(),
    )
    .unwrap();
    let mut request = simple_request("first");
    request.messages[0].content.push(Part::Text(String::new()));
    request.messages[0]
        .content
        .push(Part::Text("second".into()));
    request.messages.push(Message {
        role: Role::Assistant,
        content: vec![Part::ToolUse {
            id: "call_1".into(),
            name: "read".into(),
            input: json!({"file_path": "a.txt"}),
        }],
    });
    request.messages.push(Message {
        role: Role::User,
        content: vec![Part::ToolResult {
            tool_use_id: "call_1".into(),
            content: "text".into(),
            is_error: false,
        }],
    });
    let body: serde_json::Value =
        serde_json::from_slice(&provider.request_body(&request).unwrap()).unwrap();
    assert_eq!(
        body["messages"],
        json!([
            // Empty texts are dropped; the rest join into one string.
            {"role": "user", "content": "first\n\nsecond"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "read", "arguments": "{\"file_path\":\"a.txt\"}"}},
            ]},
            // A user message of tool results alone adds no user message.
            {"role": "tool", "tool_call_id": "call_1", "content": "text"},
        ])
    );
    assert_eq!(body.get("tools"), None);
    assert_eq!(body.get("reasoning_effort"), None);
}
