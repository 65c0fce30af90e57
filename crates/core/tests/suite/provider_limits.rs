//! Requests the real providers accept, by their documented rules: every thinking level and a
//! session with 300 MCP tools sent to the mock model in its limit-checking mode
//! (`MockModel::check_limits`, which answers a body that breaks a rule with the real API's 400),
//! and one test per rule against the request body.

use std::sync::Arc;

use keel_core::config::Thinking;
use keel_core::provider::{
    AnthropicProvider, MaxTokensParam, Message, ModelEvent, ModelRequest, Part, Provider, Role,
    ToolDefinition,
};
use keel_testkit::{Api, MockModel, Reply, Turn};
use serde_json::{Value, json};

use super::provider_support::{anthropic, collect, openai};

/// Keel's bundled tools as a session offers them, then `mcp` MCP tools named the way the hub
/// names them (`mcp__SERVER__TOOL`), from servers whose tool names have dots, slashes and up to
/// 128 characters, and two servers whose names collide once cleaned.
fn session_tools(mcp: usize) -> Vec<ToolDefinition> {
    let registry = keel_core::tools::bundled(&|_: &str| None).unwrap();
    let mut tools: Vec<ToolDefinition> = registry.specs().map(ToolDefinition::of).collect();
    let schema = Arc::new(json!({"type": "object", "properties": {"q": {"type": "string"}}}));
    for i in 0..mcp {
        let name = match i % 4 {
            0 => format!("mcp__docs.internal__search.pages_{i}"),
            1 => format!("mcp__docs_internal__search_pages_{i}"),
            2 => format!("mcp__github__{}_{i}", "very_long_tool_name".repeat(6)),
            _ => format!("mcp__fs__read/{i}"),
        };
        tools.push(ToolDefinition {
            name,
            description: format!("MCP tool {i}"),
            input_schema: schema.clone(),
        });
    }
    tools
}

/// A conversation that already called a mapped tool, so the history is encoded too.
fn request(model: &str, tools: Vec<ToolDefinition>, thinking: Thinking) -> ModelRequest {
    let called = tools
        .last()
        .map(|tool| tool.name.clone())
        .unwrap_or_default();
    ModelRequest {
        model: model.to_owned(),
        system: "You are Keel.".to_owned(),
        messages: vec![
            Message::user_text("search the docs"),
            Message {
                role: Role::Assistant,
                content: vec![Part::ToolUse {
                    id: "call_1".into(),
                    name: called,
                    input: json!({"q": "x"}),
                }],
            },
            Message {
                role: Role::User,
                content: vec![
                    Part::ToolResult {
                        tool_use_id: "call_1".into(),
                        content: "found".into(),
                        is_error: false,
                    },
                    Part::Text("go on".into()),
                ],
            },
        ]
        .into(),
        tools,
        // The configured default.
        max_tokens: 8192,
        thinking_budget: thinking.budget(),
    }
}

/// The mock answers each request with a call of the tool described as `MCP tool 7`, under the
/// name the request offered it as.
fn call_mcp_tool_7(mock: &MockModel) {
    mock.respond_with(Arc::new(|api, recorded| {
        let tools = recorded.body["tools"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let name = tools.iter().find_map(|tool| {
            let (name, description) = match api {
                Api::Anthropic => (&tool["name"], &tool["description"]),
                Api::OpenAi => (&tool["function"]["name"], &tool["function"]["description"]),
            };
            (description == "MCP tool 7").then(|| name.as_str().map(str::to_owned))?
        });
        let turn = match name {
            Some(name) => Turn::new().tool_call("call_2", &name, json!({"q": "y"})),
            None => Turn::text_only("done"),
        };
        Some(match api {
            Api::Anthropic => Reply::anthropic(&turn),
            Api::OpenAi => Reply::openai(&turn),
        })
    }));
}

async fn send(provider: &dyn Provider, request: ModelRequest) -> Vec<ModelEvent> {
    let label = format!("{} {:?}", request.model, request.thinking_budget);
    let stream = match provider.stream(request).await {
        Ok(stream) => stream,
        Err(error) => panic!("{label}: the mock refused the body: {error}"),
    };
    let (events, error) = collect(stream).await;
    assert!(error.is_none(), "{label}: {error:?}");
    events
}

#[tokio::test]
async fn every_thinking_level_and_300_mcp_tools_pass_the_providers_documented_limits() {
    let mock = MockModel::start().await;
    mock.check_limits();
    call_mcp_tool_7(&mock);
    let anthropic = anthropic(&mock);
    let openai = openai(&mock).with_max_tokens_param(MaxTokensParam::MaxCompletionTokens);
    let anthropic_models = [
        "claude-sonnet-4-5-20250929",
        "claude-opus-4-1-20250805",
        "claude-opus-4-7",
        "claude-3-5-haiku-latest",
    ];
    let openai_models = ["gpt-5", "gpt-4.1", "o4-mini"];
    let mut sent = 0;
    for tools in [session_tools(0), session_tools(300)] {
        for thinking in Thinking::ALL {
            for model in anthropic_models {
                let events = send(&anthropic, request(model, tools.clone(), thinking)).await;
                assert_called_back(&events, &tools, model);
                sent += 1;
            }
            for model in openai_models {
                let events = send(&openai, request(model, tools.clone(), thinking)).await;
                assert_called_back(&events, &tools, model);
                sent += 1;
            }
        }
    }
    assert_eq!(mock.requests().len(), sent);
    // The mock does refuse what the real APIs refuse, e.g. what Keel sent before: an MCP tool's
    // dotted name, and `reasoning_effort` to a model that does not reason.
    let dotted = json!({"model": "claude-sonnet-4-5", "max_tokens": 8192, "messages": [],
        "tools": [{"name": "mcp__docs.internal__search", "input_schema": {}}]});
    assert!(!keel_testkit::mock_model::limits::anthropic(&dotted).is_empty());
    let effort = json!({"model": "gpt-4.1", "reasoning_effort": "high", "messages": []});
    assert!(!keel_testkit::mock_model::limits::openai(&effort).is_empty());
}

/// With MCP tools on offer, the model's call of `MCP tool 7` comes back under the tool's own
/// name.
fn assert_called_back(events: &[ModelEvent], tools: &[ToolDefinition], model: &str) {
    let Some(tool) = tools.iter().find(|tool| tool.description == "MCP tool 7") else {
        return;
    };
    let called = events.iter().find_map(|event| match event {
        ModelEvent::ToolCallEnd { name, .. } => Some(name.as_str()),
        _ => None,
    });
    assert_eq!(called, Some(tool.name.as_str()), "{model}");
}

fn body(provider_body: Vec<u8>) -> Value {
    serde_json::from_slice(&provider_body).unwrap()
}

#[test]
fn thinking_levels_are_distinct_and_leave_the_answer_its_allowance() {
    let mut seen = Vec::new();
    for thinking in [Thinking::Low, Thinking::Medium, Thinking::High] {
        let body = body(
            AnthropicProvider::request_body(&request("claude-sonnet-4-5", Vec::new(), thinking))
                .unwrap(),
        );
        let max = body["max_tokens"].as_u64().unwrap();
        let budget = body["thinking"]["budget_tokens"].as_u64().unwrap();
        assert!(budget >= 1024 && budget < max, "{body}");
        assert_eq!(max - budget, 8192, "the answer keeps its 8192: {body}");
        assert!(max <= 64_000);
        seen.push(budget);
    }
    assert_eq!(seen, [4096, 16_384, 32_000]);
    // Adaptive-only models get the level as an effort, never a budget.
    let body = body(
        AnthropicProvider::request_body(&request("claude-opus-4-7", Vec::new(), Thinking::Medium))
            .unwrap(),
    );
    assert_eq!(body["thinking"], json!({"type": "adaptive"}));
    assert_eq!(body["output_config"], json!({"effort": "medium"}));
}

#[test]
fn tool_names_fit_both_apis_and_history_uses_the_same_names() {
    let tools = session_tools(300);
    let anthropic = body(
        AnthropicProvider::request_body(&request(
            "claude-sonnet-4-5",
            tools.clone(),
            Thinking::Off,
        ))
        .unwrap(),
    );
    let names: Vec<&str> = anthropic["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), tools.len());
    let unique: std::collections::HashSet<&&str> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "names collide");
    assert!(
        names
            .iter()
            .all(|name| keel_core::provider::limits::valid_tool_name(name))
    );
    // The history's call of the last tool uses the name that tool is offered under.
    assert_eq!(
        anthropic["messages"][1]["content"][0]["name"].as_str(),
        names.last().copied()
    );
    // Keel's own tools keep their names.
    assert_eq!(names[0], tools[0].name);
}

#[test]
fn anthropic_cache_breakpoints_stay_within_four() {
    fn count(value: &Value) -> usize {
        match value {
            Value::Object(map) => {
                usize::from(map.contains_key("cache_control"))
                    + map.values().map(count).sum::<usize>()
            }
            Value::Array(items) => items.iter().map(count).sum(),
            _ => 0,
        }
    }
    for tools in [Vec::new(), session_tools(300)] {
        for system in ["", "You are Keel."] {
            let mut request = request("claude-sonnet-4-5", tools.clone(), Thinking::High);
            request.system = system.to_owned();
            let body = body(AnthropicProvider::request_body(&request).unwrap());
            let breakpoints = count(&body);
            assert!((1..=4).contains(&breakpoints), "{breakpoints}");
        }
    }
}

#[test]
fn openai_gets_at_most_128_tools_and_effort_only_on_reasoning_models() {
    let mock_free = openai_body("gpt-4.1", session_tools(300), Thinking::High);
    assert_eq!(mock_free["tools"].as_array().unwrap().len(), 128);
    assert!(mock_free.get("reasoning_effort").is_none(), "{mock_free}");
    assert_eq!(mock_free["max_completion_tokens"], 8192);
    let reasoning = openai_body("gpt-5", Vec::new(), Thinking::High);
    assert_eq!(reasoning["reasoning_effort"], "high");
    assert_eq!(reasoning["max_completion_tokens"], 8192 + 32_000);
}

fn openai_body(model: &str, tools: Vec<ToolDefinition>, thinking: Thinking) -> Value {
    let provider = keel_core::provider::OpenAiProvider::new(
        Some("https://api.openai.com/v1"),
        Some("sk-test"),
        "OPENAI_API_KEY",
        keel_core::provider::HttpSettings::default(),
    )
    .unwrap();
    body(
        provider
            .request_body(&request(model, tools, thinking))
            .unwrap(),
    )
}
