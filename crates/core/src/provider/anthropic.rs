//! [`AnthropicProvider`]: the Anthropic Messages API (`POST {base}/v1/messages`, streaming).
//!
//! Prompt caching: `cache_control: ephemeral` marks the system prompt, the last tool definition
//! and the last content block of the last message, so each turn reads the previous turn's prefix
//! from the cache (three of the four allowed breakpoints, [`limits::MAX_CACHE_BREAKPOINTS`]).
//!
//! Thinking and output limits are planned by [`limits::plan_output`] from the model's row of the
//! table in [`limits`]; tool names are sent as [`WireNames`] maps them.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use eventsource_stream::Event;
use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderValue};
use serde::Serialize;
use serde_json::Value;

use super::http::{
    Endpoint, HttpSettings, RequestBody, build_client, fetch_models, open_stream, secret_header,
};
use super::limits::{self, ThinkingStyle};
use super::sse::{Decoder, ToolCalls, parse_data};
use super::tool_names::WireNames;
use super::{
    History, Message, ModelEvent, ModelRequest, ModelStream, Part, Provider, ProviderError, Role,
    StopReason, Usage,
};

/// The default base URL.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header sent.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

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

    /// The JSON body sent for `request`, serialized straight from the conversation: no JSON
    /// tree is built, and the conversation's earlier messages are their kept forms.
    pub fn request_body(request: &ModelRequest) -> Result<Vec<u8>, ProviderError> {
        Self::encode(request).map(|(body, _)| body.to_vec())
    }

    /// The body, in pieces (the earlier conversation is sent from its kept runs, neither
    /// serialized nor copied), and the tool names it sent (to map the model's calls back).
    fn encode(request: &ModelRequest) -> Result<(RequestBody, Arc<WireNames>), ProviderError> {
        let names = Arc::new(WireNames::new(
            request.tools.iter().map(|tool| tool.name.as_str()),
        ));
        let limits = limits::anthropic_model(&request.model);
        let plan = limits::plan_output(request.max_tokens, request.thinking_budget, limits);
        let (thinking, output_config) = match (plan.budget, limits.thinking) {
            (Some(budget), ThinkingStyle::Budget) => (
                Some(Thinking {
                    kind: "enabled",
                    budget_tokens: Some(budget),
                }),
                None,
            ),
            (Some(budget), ThinkingStyle::Adaptive) => (
                Some(Thinking {
                    kind: "adaptive",
                    budget_tokens: None,
                }),
                Some(OutputConfig {
                    effort: limits::effort(budget),
                }),
            ),
            _ => (None, None),
        };
        let last_tool = request.tools.len().saturating_sub(1);
        let config = |error: serde_json::Error| ProviderError::Config(error.to_string());
        // `{"model":…,"max_tokens":…,"stream":true,"messages":[` …
        let mut head = serde_json::to_vec(&Head {
            model: &request.model,
            max_tokens: plan.max_tokens,
            stream: true,
        })
        .map_err(config)?;
        head.pop();
        head.extend_from_slice(b",\"messages\":[");
        let mut body = RequestBody::default();
        body.push(head);
        let mut tail = Vec::new();
        messages(&request.messages, &names, &mut body, &mut tail).map_err(config)?;
        // … `],"system":…,"tools":…}`
        tail.push(b']');
        let rest = serde_json::to_vec(&Rest {
            system: (!request.system.is_empty()).then(|| {
                [SystemText {
                    kind: "text",
                    text: &request.system,
                    cache_control: EPHEMERAL,
                }]
            }),
            tools: request
                .tools
                .iter()
                .enumerate()
                .map(|(index, tool)| WireTool {
                    name: names.wire(&tool.name),
                    description: &tool.description,
                    input_schema: &tool.input_schema,
                    cache_control: (index == last_tool).then_some(EPHEMERAL),
                })
                .collect(),
            thinking,
            output_config,
        })
        .map_err(config)?;
        if let Some(fields) = rest.get(1..rest.len().saturating_sub(1))
            && !fields.is_empty()
        {
            tail.push(b',');
            tail.extend_from_slice(fields);
        }
        tail.push(b'}');
        body.push(tail);
        Ok((body, names))
    }
}

/// The Messages API request body's fields before `messages`.
#[derive(Serialize)]
struct Head<'a> {
    model: &'a str,
    max_tokens: u32,
    stream: bool,
}

/// The body's fields after `messages`.
#[derive(Serialize)]
struct Rest<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<[SystemText<'a>; 1]>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<OutputConfig>,
}

/// `{"effort": "low" | "medium" | "high"}`: how much an adaptive model thinks.
#[derive(Serialize)]
struct OutputConfig {
    effort: &'static str,
}

/// `{"type": "ephemeral"}`: a prompt-cache breakpoint.
#[derive(Clone, Copy, Serialize)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };

#[derive(Serialize)]
struct SystemText<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    cache_control: CacheControl,
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: Cow<'a, str>,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    budget_tokens: Option<u32>,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: Role,
    content: Vec<WireBlock<'a>>,
}

/// One content block: a [`Part`] as Anthropic takes it, with an optional cache breakpoint.
struct WireBlock<'a> {
    part: &'a Part,
    cached: bool,
    names: &'a WireNames,
}

#[derive(Serialize)]
struct ImageSource<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: &'a str,
    data: &'a str,
}

impl Serialize for WireBlock<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(None)?;
        match self.part {
            Part::Text(text) => {
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", text)?;
            }
            Part::Image { media_type, data } => {
                map.serialize_entry("type", "image")?;
                let source = ImageSource {
                    kind: "base64",
                    media_type,
                    data,
                };
                map.serialize_entry("source", &source)?;
            }
            Part::Thinking { text, signature } => {
                map.serialize_entry("type", "thinking")?;
                map.serialize_entry("thinking", text)?;
                map.serialize_entry("signature", signature)?;
            }
            Part::RedactedThinking { data } => {
                map.serialize_entry("type", "redacted_thinking")?;
                map.serialize_entry("data", data)?;
            }
            Part::ToolUse { id, name, input } => {
                map.serialize_entry("type", "tool_use")?;
                map.serialize_entry("id", id)?;
                map.serialize_entry("name", &self.names.wire(name))?;
                map.serialize_entry("input", input)?;
            }
            Part::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                map.serialize_entry("type", "tool_result")?;
                map.serialize_entry("tool_use_id", tool_use_id)?;
                // Anthropic rejects an empty content on an error result.
                let content = if content.is_empty() {
                    "(no output)"
                } else {
                    content
                };
                map.serialize_entry("content", content)?;
                map.serialize_entry("is_error", is_error)?;
            }
        }
        if self.cached {
            map.serialize_entry("cache_control", &EPHEMERAL)?;
        }
        map.end()
    }
}

/// Writes the elements of the `messages` array: empty messages skipped, a cache breakpoint on
/// the last block. Every message but the last is serialized once in the history's life
/// ([`History`]), unless it calls a tool whose name is sent mapped (the mapping belongs to the
/// request's tool list). The leading messages' kept runs go to `body` as they are; what
/// follows them is written to `tail`.
fn messages(
    history: &History,
    names: &WireNames,
    body: &mut RequestBody,
    tail: &mut Vec<u8>,
) -> Result<(), serde_json::Error> {
    let last = history
        .iter()
        .rposition(|message| message.content.iter().any(sendable));
    let (runs, covered) = history.anthropic_runs(
        last.unwrap_or(history.len()),
        names_as_they_are,
        |message, out| match wire_message(message, false, names) {
            Some(wire) => serde_json::to_writer(out, &wire).is_ok(),
            None => true,
        },
    );
    let mut written = !runs.is_empty();
    for (index, run) in runs.into_iter().enumerate() {
        if index > 0 {
            body.push(bytes::Bytes::from_static(b","));
        }
        body.push(run);
    }
    for (index, message) in history.iter().enumerate().skip(covered) {
        let comma = |tail: &mut Vec<u8>, written: &mut bool| {
            if std::mem::replace(written, true) {
                tail.push(b',');
            }
        };
        if Some(index) != last && names_as_they_are(message) {
            let serialize = |message: &Message| {
                let wire = wire_message(message, false, names)?;
                serde_json::to_vec(&wire).ok().map(bytes::Bytes::from)
            };
            if let Some(kept) = history.anthropic(index, serialize) {
                comma(tail, &mut written);
                tail.extend_from_slice(&kept);
                continue;
            }
        }
        // The last message, one whose names are mapped, or one that could not be kept.
        if let Some(wire) = wire_message(message, Some(index) == last, names) {
            comma(tail, &mut written);
            serde_json::to_writer(&mut *tail, &wire)?;
        }
    }
    Ok(())
}

/// Whether every tool call of `message` is sent under its own name, so its serialized form
/// does not depend on the request.
fn names_as_they_are(message: &Message) -> bool {
    message.content.iter().all(|part| match part {
        Part::ToolUse { name, .. } => super::limits::valid_tool_name(name),
        _ => true,
    })
}

/// One message as Anthropic takes it (`None` when nothing of it is sendable); `breakpoint`
/// puts the cache breakpoint on its last block that may carry one.
fn wire_message<'a>(
    message: &'a Message,
    breakpoint: bool,
    names: &'a WireNames,
) -> Option<WireMessage<'a>> {
    let mut content: Vec<WireBlock<'_>> = message
        .content
        .iter()
        .filter(|part| sendable(part))
        .map(|part| WireBlock {
            part,
            cached: false,
            names,
        })
        .collect();
    if content.is_empty() {
        return None;
    }
    // Thinking blocks cannot carry cache_control.
    if breakpoint
        && let Some(block) = content.iter_mut().rev().find(|block| {
            !matches!(
                block.part,
                Part::Thinking { .. } | Part::RedactedThinking { .. }
            )
        })
    {
        block.cached = true;
    }
    Some(WireMessage {
        role: message.role,
        content,
    })
}

/// Whether Anthropic takes `part`: not an empty text, nor a thinking block without its
/// signature.
fn sendable(part: &Part) -> bool {
    match part {
        Part::Text(text) => !text.is_empty(),
        Part::Thinking { signature, .. } => signature.is_some(),
        _ => true,
    }
}

impl Provider for AnthropicProvider {
    fn id(&self) -> &str {
        "anthropic"
    }

    fn stream(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelStream, ProviderError>> {
        Box::pin(async move {
            let (body, names) = Self::encode(&request)?;
            open_stream(
                &self.client,
                &self.endpoint,
                body,
                &request.model,
                &self.settings,
                || AnthropicDecoder {
                    tools: ToolCalls::new(names.clone()),
                    ..AnthropicDecoder::default()
                },
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
