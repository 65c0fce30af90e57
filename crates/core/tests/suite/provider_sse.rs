//! The clients against recorded-style SSE transcripts from `fixtures/sse/` (independent of the
//! mock's own renderer).

use keel_core::provider::{ModelEvent, Provider, StopReason, Usage};
use keel_testkit::MockModel;
use keel_testkit::mock_model::{Api, Reply};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::provider_support::{anthropic, collect, condensed, openai, simple_request};

#[tokio::test]
async fn anthropic_transcript_with_thinking_and_tool_use() {
    let mock = MockModel::start().await;
    mock.push(
        Api::Anthropic,
        Reply::sse_transcript(include_str!(
            "../../../../fixtures/sse/anthropic_thinking_tool.sse"
        )),
    );
    let (events, error) = collect(
        anthropic(&mock)
            .stream(simple_request("weather?"))
            .await
            .unwrap(),
    )
    .await;
    assert!(error.is_none(), "{error:?}");
    let id = "toolu_01T1x1fJ34qAmk2tNTrN7Up6".to_owned();
    assert_eq!(
        condensed(&events),
        vec![
            ModelEvent::ThinkingDelta {
                text: "The user wants the weather in San Francisco. I'll call get_weather in Fahrenheit.".into()
            },
            ModelEvent::ThinkingSignature("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds".into()),
            ModelEvent::TextDelta("I'll check the current weather — één moment.".into()),
            ModelEvent::ToolCallStart { index: 0, id: id.clone(), name: "get_weather".into() },
            ModelEvent::ToolCallEnd {
                index: 0,
                id,
                name: "get_weather".into(),
                input: json!({"location": "San Francisco, CA", "unit": "fahrenheit"}),
            },
            ModelEvent::Usage(Usage {
                input_tokens: 2520,
                output_tokens: 89,
                cache_read_tokens: 2048,
                cache_write_tokens: 0,
            }),
            ModelEvent::Stop(StopReason::ToolUse),
        ]
    );
}

#[tokio::test]
async fn openai_transcript_with_parallel_tool_calls() {
    let mock = MockModel::start().await;
    mock.push(
        Api::OpenAi,
        Reply::sse_transcript(include_str!(
            "../../../../fixtures/sse/openai_parallel_tools.sse"
        )),
    );
    let (events, error) = collect(
        openai(&mock)
            .stream(simple_request("weather?"))
            .await
            .unwrap(),
    )
    .await;
    assert!(error.is_none(), "{error:?}");
    let (paris, bogota) = (
        "call_DdmO9pD3xa9XTPNJ32zg2hcA".to_owned(),
        "call_Qk5mBkd6bU1yTt7dUVkGRn0D".to_owned(),
    );
    assert_eq!(
        condensed(&events),
        vec![
            ModelEvent::ToolCallStart {
                index: 0,
                id: paris.clone(),
                name: "get_weather".into()
            },
            ModelEvent::ToolCallStart {
                index: 1,
                id: bogota.clone(),
                name: "get_weather".into()
            },
            ModelEvent::ToolCallEnd {
                index: 0,
                id: paris,
                name: "get_weather".into(),
                input: json!({"location": "Paris, France"}),
            },
            ModelEvent::ToolCallEnd {
                index: 1,
                id: bogota,
                name: "get_weather".into(),
                input: json!({"location": "Bogotá, Colombia"}),
            },
            ModelEvent::Usage(Usage {
                input_tokens: 82,
                output_tokens: 48,
                ..Usage::default()
            }),
            ModelEvent::Stop(StopReason::ToolUse),
        ]
    );
}
