//! [`AnthropicProvider`]: the Anthropic Messages API (`POST {base}/v1/messages`, streaming).
//!
//! Prompt caching: `cache_control: ephemeral` marks the system prompt, the last tool definition
//! and the last content block of the last message, so each turn reads the previous turn's prefix
//! from the cache (three of the four allowed breakpoints).

use std::collections::HashMap;

use eventsource_stream::Event;
use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};

use super::http::{Endpoint, HttpSettings, build_client, fetch_models, open_stream, secret_header};
use super::sse::{Decoder, ToolCalls, parse_data};
use super::{
    Message, ModelEvent, ModelRequest, ModelStream, Part, Provider, ProviderError, Role,
    StopReason, Usage,
};

/// The default base URL.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header sent.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// Anthropic's minimum thinking budget.
const MIN_THINKING_BUDGET: u32 = 1024;

/// A client of the Anthropic Messages API.
#[derive(Debug, Clone)]
pub struct AnthropicProvider {
    client: reqwest::Client,
    endpoint: Endpoint,
    settings: HttpSettings,
    context_window: Option<u64>,
}

impl AnthropicProvider {
    /// A client of `base_url` (default [`ANTHROPIC_BASE_URL`]) authenticating with `api_key`;
    /// `key_env` is the variable named when the key is rejected.
    pub fn new(
        base_url: Option<&str>,
        api_key: &str,
        key_env: &str,
        settings: HttpSettings,
    ) -> Result<Self, ProviderError> {
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", secret_header("x-api-key", api_key)?);
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        let mut endpoint = Endpoint::new(
            "Anthropic Messages API",
            base_url.unwrap_or(ANTHROPIC_BASE_URL),
            "/v1/messages",
            "/v1/models",
            headers,
            key_env,
        );
        endpoint.provider = "anthropic".to_owned();
        Ok(Self {
            client: build_client(&settings)?,
            endpoint,
            settings,
            context_window: None,
        })
    }

    /// Names the provider in errors and logs (e.g. the configured `ollama`); [`Provider::id`]
    /// stays the API's.
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.endpoint.provider = label.into();
        self
    }

    /// Overrides [`Provider::context_window`] for every model.
    pub fn with_context_window(mut self, tokens: Option<u64>) -> Self {
        self.context_window = tokens;
        self
    }

    /// Says in errors where the base URL came from, as a clause (`set by ANTHROPIC_BASE_URL`).
    pub fn with_base_url_source(mut self, set_by: impl Into<String>) -> Self {
        self.endpoint.base_url_from = set_by.into();
        self
    }

    /// The JSON body sent for `request`.
    pub fn request_body(request: &ModelRequest) -> Value {
        let mut body = json!({
            "model": request.model,
            "max_tokens": request.max_tokens,
            "stream": true,
            "messages": messages(&request.messages),
        });
        if !request.system.is_empty() {
            body["system"] = json!([{
                "type": "text",
                "text": request.system,
                "cache_control": {"type": "ephemeral"},
            }]);
        }
        if !request.tools.is_empty() {
            let mut tools: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| {
                    json!({
                        "name": tool.name,
                        "description": tool.description,
                        "input_schema": tool.input_schema,
                    })
                })
                .collect();
            if let Some(last) = tools.last_mut() {
                last["cache_control"] = json!({"type": "ephemeral"});
            }
            body["tools"] = Value::Array(tools);
        }
        if let Some(budget) = request.thinking_budget
            && request.max_tokens > MIN_THINKING_BUDGET
        {
            let budget = budget.clamp(MIN_THINKING_BUDGET, request.max_tokens - 1);
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        }
        body
    }
}

/// The `messages` array: empty messages skipped, a cache breakpoint on the last block.
fn messages(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<Value> = messages
        .iter()
        .filter_map(|message| {
            let content: Vec<Value> = message.content.iter().filter_map(block).collect();
            let role = match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            (!content.is_empty()).then(|| json!({"role": role, "content": content}))
        })
        .collect();
    let last_blocks = out
        .last_mut()
        .and_then(|message| message.get_mut("content"))
        .and_then(Value::as_array_mut);
    if let Some(blocks) = last_blocks
        && let Some(block) = blocks.iter_mut().rev().find(|block| {
            // Thinking blocks cannot carry cache_control.
            !matches!(
                block["type"].as_str(),
                Some("thinking" | "redacted_thinking")
            )
        })
    {
        block["cache_control"] = json!({"type": "ephemeral"});
    }
    out
}

/// One content block, or `None` for parts Anthropic would reject.
fn block(part: &Part) -> Option<Value> {
    Some(match part {
        Part::Text(text) if text.is_empty() => return None,
        Part::Text(text) => json!({"type": "text", "text": text}),
        Part::Image { media_type, data } => json!({
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }),
        Part::Thinking {
            text,
            signature: Some(signature),
        } => {
            json!({"type": "thinking", "thinking": text, "signature": signature})
        }
        Part::Thinking {
            signature: None, ..
        } => return None,
        Part::RedactedThinking { data } => json!({"type": "redacted_thinking", "data": data}),
        Part::ToolUse { id, name, input } => {
            json!({"type": "tool_use", "id": id, "name": name, "input": input})
        }
        Part::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => json!({
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            // Anthropic rejects an empty content on an error result.
            "content": if content.is_empty() { "(no output)" } else { content },
            "is_error": is_error,
        }),
    })
}

impl Provider for AnthropicProvider {
    fn id(&self) -> &str {
        "anthropic"
    }

    fn stream(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelStream, ProviderError>> {
        Box::pin(async move {
            let body = Self::request_body(&request);
            open_stream(
                &self.client,
                &self.endpoint,
                &body,
                &self.settings,
                AnthropicDecoder::default,
            )
            .await
        })
    }

    fn context_window(&self, _model: &str) -> u64 {
        self.context_window.unwrap_or(200_000)
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        Box::pin(fetch_models(
            &self.client,
            &self.endpoint,
            self.settings.connect_timeout,
        ))
    }

    fn label(&self) -> &str {
        &self.endpoint.provider
    }
}

/// What a content block index refers to.
#[derive(Debug, Clone, Copy)]
enum Block {
    Tool(usize),
    Other,
}

/// The Messages API event stream.
#[derive(Debug, Default)]
struct AnthropicDecoder {
    blocks: HashMap<u64, Block>,
    tools: ToolCalls,
    usage: Option<RawUsage>,
    stop: Option<String>,
}

/// Usage as Anthropic reports it (`input_tokens` excludes cached tokens).
#[derive(Debug, Default, Clone, Copy)]
struct RawUsage {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
}

impl RawUsage {
    /// Overwrites the counts present in `usage` (message_delta counts are cumulative).
    fn update(&mut self, usage: &Value) {
        let set = |field: &mut u64, key: &str| {
            if let Some(count) = usage.get(key).and_then(Value::as_u64) {
                *field = count;
            }
        };
        set(&mut self.input, "input_tokens");
        set(&mut self.output, "output_tokens");
        set(&mut self.cache_read, "cache_read_input_tokens");
        set(&mut self.cache_write, "cache_creation_input_tokens");
    }
}

impl Decoder for AnthropicDecoder {
    fn event(
        &mut self,
        provider: &str,
        event: &Event,
        out: &mut Vec<ModelEvent>,
    ) -> Result<bool, ProviderError> {
        if event.event == "ping" {
            return Ok(false);
        }
        let data = parse_data(provider, event)?;
        // Some proxies send only `data:` lines; the type is also in the payload.
        let kind = data["type"].as_str().unwrap_or(&event.event);
        match kind {
            "message_start" => {
                self.usage
                    .get_or_insert_default()
                    .update(&data["message"]["usage"]);
            }
            "content_block_start" => self.block_start(&data, out),
            "content_block_delta" => self.block_delta(&data, out),
            "content_block_stop" => {
                if let Some(Block::Tool(tool)) = index(&data).and_then(|i| self.blocks.get(&i)) {
                    self.tools.end(*tool, out);
                }
            }
            "message_delta" => {
                if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                    self.stop = Some(reason.to_owned());
                }
                self.usage.get_or_insert_default().update(&data["usage"]);
            }
            "message_stop" => {
                self.tools.end_all(out);
                if let Some(usage) = self.usage {
                    out.push(ModelEvent::Usage(Usage {
                        input_tokens: usage.input + usage.cache_read + usage.cache_write,
                        output_tokens: usage.output,
                        cache_read_tokens: usage.cache_read,
                        cache_write_tokens: usage.cache_write,
                    }));
                }
                out.push(ModelEvent::Stop(self.stop_reason()));
                return Ok(true);
            }
            "error" => return Err(stream_error(provider, &data["error"])),
            _ => {} // ping and future event types
        }
        Ok(false)
    }

    fn eof(&mut self, _out: &mut Vec<ModelEvent>) -> bool {
        false
    }
}

fn index(data: &Value) -> Option<u64> {
    data["index"].as_u64()
}

impl AnthropicDecoder {
    fn block_start(&mut self, data: &Value, out: &mut Vec<ModelEvent>) {
        let Some(index) = index(data) else { return };
        let block = &data["content_block"];
        let text = |key: &str| block[key].as_str().unwrap_or_default().to_owned();
        let kind = match block["type"].as_str() {
            Some("text") => {
                let initial = text("text");
                if !initial.is_empty() {
                    out.push(ModelEvent::TextDelta(initial));
                }
                Block::Other
            }
            Some("thinking") => {
                let initial = text("thinking");
                if !initial.is_empty() {
                    out.push(ModelEvent::ThinkingDelta { text: initial });
                }
                Block::Other
            }
            Some("redacted_thinking") => {
                out.push(ModelEvent::RedactedThinking(text("data")));
                Block::Other
            }
            Some("tool_use") => {
                let initial = block
                    .get("input")
                    .filter(|input| input.as_object().is_some_and(|map| !map.is_empty()))
                    .cloned();
                Block::Tool(self.tools.start(text("id"), text("name"), initial, out))
            }
            _ => Block::Other, // server tools, future block types
        };
        self.blocks.insert(index, kind);
    }

    fn block_delta(&mut self, data: &Value, out: &mut Vec<ModelEvent>) {
        let delta = &data["delta"];
        let text = |key: &str| delta[key].as_str().unwrap_or_default().to_owned();
        match delta["type"].as_str() {
            Some("text_delta") => out.push(ModelEvent::TextDelta(text("text"))),
            Some("thinking_delta") => out.push(ModelEvent::ThinkingDelta {
                text: text("thinking"),
            }),
            Some("signature_delta") => out.push(ModelEvent::ThinkingSignature(text("signature"))),
            Some("input_json_delta") => {
                if let Some(Block::Tool(tool)) = index(data).and_then(|i| self.blocks.get(&i)) {
                    self.tools
                        .delta(*tool, delta["partial_json"].as_str().unwrap_or(""), out);
                }
            }
            _ => {} // citations and future delta types
        }
    }

    fn stop_reason(&self) -> StopReason {
        match self.stop.as_deref() {
            Some("end_turn") => StopReason::EndTurn,
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens") => StopReason::MaxTokens,
            Some("refusal") => StopReason::Refusal,
            Some(other) => StopReason::Other(other.to_owned()),
            None if self.tools.any() => StopReason::ToolUse,
            None => StopReason::EndTurn,
        }
    }
}

/// The error of an in-stream `error` event.
fn stream_error(provider: &str, error: &Value) -> ProviderError {
    let kind = error["type"].as_str().unwrap_or("error").to_owned();
    let message = error["message"].as_str().unwrap_or_default().to_owned();
    let provider = provider.to_owned();
    match kind.as_str() {
        "overloaded_error" => ProviderError::Overloaded {
            provider,
            retry_after: None,
            body: message,
        },
        "rate_limit_error" => ProviderError::RateLimited {
            provider,
            retry_after: None,
            body: message,
        },
        _ => ProviderError::Api {
            provider,
            kind,
            message,
        },
    }
}
