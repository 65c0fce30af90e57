//! The scripted provider: deterministic replay, templating, errors.

use keel_core::provider::{
    ModelEvent, Provider, ProviderError, ScriptedProvider, StopReason, Usage,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::provider_support::{collect, simple_request};

fn hello_path() -> String {
    format!(
        "{}/../../fixtures/scripted/hello.json",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[tokio::test]
async fn replays_the_fixture_deterministically() {
    let mut runs = Vec::new();
    for _ in 0..2 {
        let provider = ScriptedProvider::from_file(hello_path())
            .unwrap()
            .with_var("workspace", "/tmp/ws-1");
        assert_eq!((provider.id(), provider.len()), ("scripted", 2));
        let (first, error) = collect(provider.stream(simple_request("hi")).await.unwrap()).await;
        assert!(error.is_none());
        let (second, error) =
            collect(provider.stream(simple_request("again")).await.unwrap()).await;
        assert!(error.is_none());
        let exhausted = provider.stream(simple_request("more")).await.err().unwrap();
        assert!(matches!(
            exhausted,
            ProviderError::ScriptExhausted { responses: 2 }
        ));
        assert!(exhausted.to_string().contains("no response left"));
        assert_eq!(provider.requests().len(), 3);
        assert_eq!(
            provider.requests()[1].messages[0].content[0],
            keel_core::provider::Part::Text("again".into())
        );
        runs.push((first, second));
    }
    assert_eq!(runs[0], runs[1]);
    let (first, second) = &runs[0];
    assert_eq!(
        first,
        &vec![
            ModelEvent::TextDelta("Hello".into()),
            ModelEvent::TextDelta(" from".into()),
            ModelEvent::TextDelta(" Keel's".into()),
            ModelEvent::TextDelta(" scripted".into()),
            ModelEvent::TextDelta(" model.".into()),
            ModelEvent::Usage(Usage {
                input_tokens: 12,
                output_tokens: 6,
                ..Usage::default()
            }),
            ModelEvent::Stop(StopReason::EndTurn),
        ]
    );
    assert_eq!(second[2], ModelEvent::TextDelta(" in /tmp/ws-1.".into()));
    assert_eq!(second.last(), Some(&ModelEvent::Stop(StopReason::EndTurn)));
}

#[tokio::test]
async fn tool_calls_thinking_templating_and_invalid_arguments() {
    let provider = ScriptedProvider::from_json(json!({"responses": [{"events": [
        {"thinking": ["Plan: ", "read it"], "signature": "sig-1"},
        {"tool_call": {"id": "call_1", "name": "read_file", "input": {"path": "{workspace}/src/main.rs", "n": [1, "{workspace}"]}}},
        {"tool_call": {"name": "edit", "raw_input": "{\"path\": "}},
        {"tool_call": {"name": "list"}},
    ]}]}))
    .unwrap()
    .with_vars([("workspace", "/scratch/run-7")]);
    let (events, error) = collect(provider.stream(simple_request("go")).await.unwrap()).await;
    assert!(error.is_none());
    assert_eq!(
        events[..3],
        [
            ModelEvent::ThinkingDelta {
                text: "Plan: ".into()
            },
            ModelEvent::ThinkingDelta {
                text: "read it".into()
            },
            ModelEvent::ThinkingSignature("sig-1".into()),
        ]
    );
    assert!(events.contains(&ModelEvent::ToolCallEnd {
        index: 0,
        id: "call_1".into(),
        name: "read_file".into(),
        input: json!({"path": "/scratch/run-7/src/main.rs", "n": [1, "/scratch/run-7"]}),
    }));
    assert!(events.iter().any(|event| matches!(
        event,
        ModelEvent::ToolCallInvalid { index: 1, id, name, raw_input, .. }
            if id == "call_1_1" && name == "edit" && raw_input == "{\"path\": "
    )));
    assert!(events.contains(&ModelEvent::ToolCallEnd {
        index: 2,
        id: "call_1_2".into(),
        name: "list".into(),
        input: json!({})
    }));
    assert_eq!(events.last(), Some(&ModelEvent::Stop(StopReason::ToolUse)));
}

#[tokio::test]
async fn scripted_errors_fail_stream_or_end_it() {
    let provider = ScriptedProvider::from_json(json!([
        [{"error": {"kind": "overloaded", "message": "busy"}}],
        [{"text": "half"}, {"error": {"kind": "stream_cut", "message": "connection reset"}}],
    ]))
    .unwrap();
    let error = provider.stream(simple_request("a")).await.err().unwrap();
    assert!(
        matches!(error, ProviderError::Overloaded { .. }),
        "{error:?}"
    );
    let (events, error) = collect(provider.stream(simple_request("b")).await.unwrap()).await;
    assert_eq!(events, vec![ModelEvent::TextDelta("half".into())]);
    assert!(
        matches!(error, Some(ProviderError::StreamCut { .. })),
        "{error:?}"
    );
}

#[test]
fn bad_scripts_are_config_errors_with_a_location() {
    let error = ScriptedProvider::from_json(json!([[{"text": "ok"}, {"bogus": 1}]])).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("response 1") && message.contains("event 2"),
        "{message}"
    );
    let error = ScriptedProvider::from_file("/nonexistent/script.json").unwrap_err();
    assert!(error.to_string().contains("/nonexistent/script.json"));
    assert!(ScriptedProvider::from_json(json!({"nope": []})).is_err());
}

#[tokio::test]
async fn a_response_branches_on_the_tool_results_in_the_request() {
    use keel_core::provider::{Message, Part, Role};
    let script = json!({"responses": [
        {"cases": [
            {"when": {"result": "call_edit", "is_error": true}, "events": [{"text": "refused"}]},
            {"when": {"result": "call_test", "contains": "1 passed"}, "events": [{"text": "passes"}]},
            {"events": [{"text": "otherwise"}]}
        ]},
        {"cases": [{"when": {"result": "call_edit", "is_error": false}, "events": [{"text": "edited"}]}]}
    ]});
    let with_result = |id: &str, content: &str, is_error: bool| {
        let mut request = simple_request("go");
        request.messages.push(Message {
            role: Role::User,
            content: vec![Part::ToolResult {
                tool_use_id: id.into(),
                content: content.into(),
                is_error,
            }],
        });
        request
    };
    let text = |events: Vec<ModelEvent>| -> String {
        events
            .into_iter()
            .filter_map(|event| match event {
                ModelEvent::TextDelta(text) => Some(text),
                _ => None,
            })
            .collect()
    };
    for (request, said) in [
        (
            with_result("call_edit", "The user rejected", true),
            "refused",
        ),
        (
            with_result("call_test", "test_greet ... ok\n1 passed", false),
            "passes",
        ),
        (with_result("call_test", "FAILED", false), "otherwise"),
    ] {
        let provider = ScriptedProvider::from_json(script.clone()).unwrap();
        let (events, error) = collect(provider.stream(request).await.unwrap()).await;
        assert!(error.is_none());
        assert_eq!(text(events), said);
    }
    // Each branch takes one place; a response none of whose cases holds is an error.
    let provider = ScriptedProvider::from_json(script).unwrap();
    collect(provider.stream(simple_request("go")).await.unwrap()).await;
    let error = provider
        .stream(with_result("call_edit", "rejected", true))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&error, ProviderError::Config(message) if message.contains("no case holds")),
        "{error:?}"
    );
}
