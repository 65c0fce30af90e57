//! [`OpenAiProvider`]: OpenAI Chat Completions (`POST {base}/chat/completions`, streaming),
//! usable against any OpenAI-compatible server (Ollama, vLLM, LM Studio, OpenRouter, DeepSeek)
//! by base URL.
//!
//! Differences from the neutral model: thinking parts are never sent back (DeepSeek rejects
//! them); a failed tool result is a `role: tool` message whose content starts with `Error: `;
//! reasoning arrives as `reasoning_content` (DeepSeek, vLLM) or `reasoning` (OpenRouter, Ollama)
//! deltas and becomes [`ModelEvent::ThinkingDelta`].

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use eventsource_stream::Event;
use futures::future::BoxFuture;
use reqwest::header::HeaderMap;
use serde::Serialize;
use serde_json::Value;

use super::http::{Endpoint, HttpSettings, build_client, fetch_models, open_stream, secret_header};
use super::limits::{self, ThinkingStyle};
use super::sse::{Decoder, ToolCalls, parse_data};
use super::tool_names::WireNames;
use super::{
    Message, ModelEvent, ModelRequest, ModelStream, Part, Provider, ProviderError, Role,
    StopReason, Usage,
};

/// The default base URL.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// Which field carries [`ModelRequest::max_tokens`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensParam {
    /// `max_completion_tokens`: required by OpenAI's reasoning models.
    MaxCompletionTokens,
    /// `max_tokens`: what most OpenAI-compatible servers understand.
    MaxTokens,
}

/// A client of an OpenAI-compatible Chat Completions endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    client: reqwest::Client,
    endpoint: Endpoint,
    settings: HttpSettings,
    max_tokens_param: MaxTokensParam,
    context_window: Option<u64>,
    /// Whether the cut of an over-long tool list was logged.
    warned_tools: Arc<AtomicBool>,
}

impl OpenAiProvider {
    /// A client of `base_url` (default [`OPENAI_BASE_URL`]); `api_key` is optional (local
    /// servers); `key_env` is the variable named when a key is rejected. api.openai.com gets
    /// `max_completion_tokens`, other servers `max_tokens` (see [`Self::with_max_tokens_param`]).
    pub fn new(
        base_url: Option<&str>,
        api_key: Option<&str>,
        key_env: &str,
        settings: HttpSettings,
    ) -> Result<Self, ProviderError> {
        let base = base_url.unwrap_or(OPENAI_BASE_URL);
        let mut headers = HeaderMap::new();
        if let Some(key) = api_key.filter(|key| !key.is_empty()) {
            headers.insert(
                "authorization",
                secret_header("authorization", &format!("Bearer {key}"))?,
            );
        }
        let max_tokens_param = if base.contains("api.openai.com") {
            MaxTokensParam::MaxCompletionTokens
        } else {
            MaxTokensParam::MaxTokens
        };
        let mut endpoint = Endpoint::new(
            "OpenAI-compatible API",
            base,
            "/chat/completions",
            "/models",
            headers,
            key_env,
        );
        endpoint.provider = "openai".to_owned();
        Ok(Self {
            client: build_client(&settings)?,
            endpoint,
            settings,
            max_tokens_param,
            context_window: None,
            warned_tools: Arc::default(),
        })
    }

    /// Overrides the field used for the output token limit.
    pub fn with_max_tokens_param(mut self, param: MaxTokensParam) -> Self {
        self.max_tokens_param = param;
        self
    }

    /// Says in errors where the base URL came from, as a clause (`set by OPENAI_BASE_URL`).
    pub fn with_base_url_source(mut self, set_by: impl Into<String>) -> Self {
        self.endpoint.base_url_from = set_by.into();
        self
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

    /// The JSON body sent for `request`, serialized straight from the conversation: no JSON
    /// tree is built, so a long history costs one pass.
    pub fn request_body(&self, request: &ModelRequest) -> Result<Vec<u8>, ProviderError> {
        self.encode(request).map(|(body, _)| body)
    }

    /// The body and the tool names it sent (to map the model's calls back).
    ///
    /// Limits (see [`limits`]): at most [`limits::OPENAI_MAX_TOOLS`] tools (the rest are left
    /// out, in order, and logged once per provider); a model OpenAI publishes gets
    /// `reasoning_effort` only when it reasons, with `max_completion_tokens` raised by the
    /// thinking budget within its output limit; any other server's model gets what was asked.
    fn encode(&self, request: &ModelRequest) -> Result<(Vec<u8>, Arc<WireNames>), ProviderError> {
        let offered = &request.tools[..request.tools.len().min(limits::OPENAI_MAX_TOOLS)];
        if offered.len() < request.tools.len() && !self.warned_tools.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                provider = %self.endpoint.provider,
                tools = request.tools.len(),
                "the Chat Completions API takes at most {} tools; the last {} are not offered",
                limits::OPENAI_MAX_TOOLS,
                request.tools.len() - offered.len()
            );
        }
        let names = Arc::new(WireNames::new(
            offered.iter().map(|tool| tool.name.as_str()),
        ));
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if !request.system.is_empty() {
            messages.push(ChatMessage::System {
                content: &request.system,
            });
        }
        for message in &request.messages {
            push_message(message, &names, &mut messages);
        }
        let (output, reasoning_effort) = match limits::openai_model(&request.model) {
            Some(model) => {
                let plan = limits::plan_output(request.max_tokens, request.thinking_budget, model);
                let effort = match model.thinking {
                    ThinkingStyle::Effort => plan.budget.map(limits::effort),
                    _ => None,
                };
                (plan.max_tokens, effort)
            }
            None => (
                request.max_tokens,
                request.thinking_budget.map(limits::effort),
            ),
        };
        let (max_completion_tokens, max_tokens) = match self.max_tokens_param {
            MaxTokensParam::MaxCompletionTokens => (Some(output), None),
            MaxTokensParam::MaxTokens => (None, Some(output)),
        };
        let body = ChatBody {
            model: &request.model,
            messages,
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            max_completion_tokens,
            max_tokens,
            tools: offered
                .iter()
                .map(|tool| FunctionTool {
                    kind: "function",
                    function: FunctionDefinition {
                        name: names.wire(&tool.name),
                        description: &tool.description,
                        parameters: &tool.input_schema,
                    },
                })
                .collect(),
            reasoning_effort,
        };
        let bytes =
            serde_json::to_vec(&body).map_err(|error| ProviderError::Config(error.to_string()))?;
        drop(body);
        Ok((bytes, names))
    }
}

/// The Chat Completions request body.
#[derive(Serialize)]
struct ChatBody<'a> {
    model: &'a str,
    messages: Vec<ChatMessage<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<FunctionTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'static str>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct FunctionTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionDefinition<'a>,
}

#[derive(Serialize)]
struct FunctionDefinition<'a> {
    name: Cow<'a, str>,
    description: &'a str,
    parameters: &'a Value,
}

/// One Chat Completions message.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum ChatMessage<'a> {
    System {
        content: &'a str,
    },
    Tool {
        tool_call_id: &'a str,
        content: Cow<'a, str>,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        /// `null` when the message is only tool calls.
        content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall<'a>>,
    },
}

/// A user message's content: one string when it is all text, parts otherwise.
#[derive(Serialize)]
#[serde(untagged)]
enum UserContent<'a> {
    Text(String),
    Parts(Vec<UserPart<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum UserPart<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Serialize)]
struct ImageUrl {
    url: String,
}

#[derive(Serialize)]
struct ToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionCall<'a>,
}

#[derive(Serialize)]
struct FunctionCall<'a> {
    name: Cow<'a, str>,
    /// The arguments as a JSON string.
    arguments: String,
}

/// Appends the Chat Completions messages for `message`.
fn push_message<'a>(message: &'a Message, names: &'a WireNames, out: &mut Vec<ChatMessage<'a>>) {
    match message.role {
        Role::User => {
            // Tool results first: they must directly follow the assistant's tool calls.
            let mut content = Vec::new();
            for part in &message.content {
                match part {
                    Part::ToolResult {
                        tool_use_id,
                        content: text,
                        is_error,
                    } => out.push(ChatMessage::Tool {
                        tool_call_id: tool_use_id,
                        content: if *is_error {
                            Cow::Owned(format!("Error: {text}"))
                        } else {
                            Cow::Borrowed(text)
                        },
                    }),
                    Part::Text(text) if !text.is_empty() => content.push(UserPart::Text { text }),
                    Part::Image { media_type, data } => content.push(UserPart::ImageUrl {
                        image_url: ImageUrl {
                            url: format!("data:{media_type};base64,{data}"),
                        },
                    }),
                    _ => {}
                }
            }
            if content.is_empty() {
                return;
            }
            let texts: Option<Vec<&str>> = content
                .iter()
                .map(|part| match part {
                    UserPart::Text { text } => Some(*text),
                    UserPart::ImageUrl { .. } => None,
                })
                .collect();
            let content = match texts {
                Some(texts) => UserContent::Text(texts.join("\n\n")),
                None => UserContent::Parts(content),
            };
            out.push(ChatMessage::User { content });
        }
        Role::Assistant => {
            let mut text = String::new();
            let mut tool_calls = Vec::new();
            for part in &message.content {
                match part {
                    Part::Text(chunk) => text.push_str(chunk),
                    Part::ToolUse { id, name, input } => tool_calls.push(ToolCall {
                        id,
                        kind: "function",
                        function: FunctionCall {
                            name: names.wire(name),
                            arguments: input.to_string(),
                        },
                    }),
                    _ => {}
                }
            }
            if text.is_empty() && tool_calls.is_empty() {
                return;
            }
            out.push(ChatMessage::Assistant {
                content: (!text.is_empty()).then_some(text),
                tool_calls,
            });
        }
    }
}

impl Provider for OpenAiProvider {
    fn id(&self) -> &str {
        "openai"
    }

    fn stream(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelStream, ProviderError>> {
        Box::pin(async move {
            let (body, names) = self.encode(&request)?;
            open_stream(
                &self.client,
                &self.endpoint,
                body.into(),
                &request.model,
                &self.settings,
                || OpenAiDecoder {
                    tools: ToolCalls::new(names.clone()),
                    ..OpenAiDecoder::default()
                },
            )
            .await
        })
    }

    fn context_window(&self, model: &str) -> u64 {
        self.context_window
            .unwrap_or_else(|| known_context_window(model))
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

/// Context windows of well-known models; 128k otherwise.
fn known_context_window(model: &str) -> u64 {
    let model = model.rsplit('/').next().unwrap_or(model);
    if model.starts_with("gpt-4.1") {
        1_047_576
    } else if model.starts_with("gpt-5") {
        400_000
    } else if ["o1", "o3", "o4", "claude"]
        .iter()
        .any(|family| model.starts_with(family))
    {
        200_000
    } else {
        128_000
    }
}

/// The Chat Completions chunk stream.
#[derive(Debug, Default)]
struct OpenAiDecoder {
    tools: ToolCalls,
    /// API tool-call index → ordinal.
    by_index: HashMap<u64, usize>,
    finish: Option<String>,
    usage: Option<Usage>,
}

impl Decoder for OpenAiDecoder {
    fn event(
        &mut self,
        provider: &str,
        event: &Event,
        out: &mut Vec<ModelEvent>,
    ) -> Result<bool, ProviderError> {
        if event.data.trim() == "[DONE]" {
            self.finish(out);
            return Ok(true);
        }
        let chunk = parse_data(provider, event)?;
        if let Some(error) = chunk.get("error").filter(|error| !error.is_null()) {
            return Err(stream_error(provider, error));
        }
        if let Some(choice) = chunk["choices"].as_array().and_then(|choices| {
            choices
                .iter()
                .find(|choice| choice["index"].as_u64().unwrap_or(0) == 0)
        }) {
            self.delta(&choice["delta"], out);
            if let Some(reason) = choice["finish_reason"].as_str() {
                self.finish = Some(reason.to_owned());
                self.tools.end_all(out);
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|usage| usage.is_object()) {
            self.usage = Some(map_usage(usage));
        }
        Ok(false)
    }

    fn eof(&mut self, out: &mut Vec<ModelEvent>) -> bool {
        // Some servers close the stream without `[DONE]`; a finish_reason means it completed.
        if self.finish.is_some() {
            self.finish(out);
            true
        } else {
            false
        }
    }
}

impl OpenAiDecoder {
    fn delta(&mut self, delta: &Value, out: &mut Vec<ModelEvent>) {
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta[key].as_str().filter(|text| !text.is_empty()) {
                out.push(ModelEvent::ThinkingDelta {
                    text: text.to_owned(),
                });
            }
        }
        if let Some(text) = delta["content"].as_str().filter(|text| !text.is_empty()) {
            out.push(ModelEvent::TextDelta(text.to_owned()));
        }
        for (position, call) in delta["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let function = &call["function"];
            let name = function["name"].as_str().unwrap_or_default();
            let id = call["id"].as_str().filter(|id| !id.is_empty());
            // Servers that omit `index` send each call whole, in order.
            let key = call["index"]
                .as_u64()
                .unwrap_or_else(|| (self.tools.len() + position) as u64);
            let ordinal = match self.by_index.get(&key) {
                Some(ordinal) => {
                    self.tools.name_if_missing(*ordinal, name);
                    *ordinal
                }
                None => {
                    let id = id.map_or_else(|| format!("call_{}", self.tools.len()), str::to_owned);
                    let ordinal = self.tools.start(id, name.to_owned(), None, out);
                    self.by_index.insert(key, ordinal);
                    ordinal
                }
            };
            match &function["arguments"] {
                Value::String(fragment) => self.tools.delta(ordinal, fragment, out),
                // Some servers send the arguments as an object.
                Value::Object(_) => {
                    self.tools
                        .delta(ordinal, &function["arguments"].to_string(), out)
                }
                _ => {}
            }
        }
    }

    /// Ends open tool calls and emits usage and the stop reason.
    fn finish(&mut self, out: &mut Vec<ModelEvent>) {
        self.tools.end_all(out);
        if let Some(usage) = self.usage {
            out.push(ModelEvent::Usage(usage));
        }
        let reason = match self.finish.as_deref() {
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            // Some servers (older Ollama) say `stop` after tool calls.
            Some("stop") | None if self.tools.any() => StopReason::ToolUse,
            Some("stop") | None => StopReason::EndTurn,
            Some("length") => StopReason::MaxTokens,
            Some("content_filter") => StopReason::Refusal,
            Some(other) => StopReason::Other(other.to_owned()),
        };
        out.push(ModelEvent::Stop(reason));
    }
}

/// `prompt_tokens` includes cached tokens, as [`Usage::input_tokens`] wants.
fn map_usage(usage: &Value) -> Usage {
    let count = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64);
    Usage {
        input_tokens: count("/prompt_tokens").unwrap_or(0),
        output_tokens: count("/completion_tokens").unwrap_or(0),
        cache_read_tokens: count("/prompt_tokens_details/cached_tokens")
            .or_else(|| count("/prompt_cache_hit_tokens")) // DeepSeek
            .unwrap_or(0),
        cache_write_tokens: 0,
    }
}

/// The error of an in-stream `{"error": ...}` chunk.
fn stream_error(provider: &str, error: &Value) -> ProviderError {
    let message = error["message"].as_str().unwrap_or_default().to_owned();
    let kind = error["type"]
        .as_str()
        .or_else(|| error["code"].as_str())
        .unwrap_or("error")
        .to_owned();
    let provider = provider.to_owned();
    match kind.as_str() {
        "rate_limit_exceeded" | "rate_limit_error" => ProviderError::RateLimited {
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
