//! Model providers: one streaming interface over Anthropic, OpenAI-compatible servers and a
//! scripted replay used by tests and the offline demo.
//!
//! Principal types:
//! - [`Provider`]: the trait the turn loop calls; [`Provider::stream`] sends one
//!   [`ModelRequest`] and returns a [`ModelStream`] of [`ModelEvent`]s.
//! - [`ModelRequest`], [`Message`], [`Part`], [`ToolDefinition`]: the provider-neutral
//!   conversation sent to the model.
//! - [`ModelEvent`], [`Usage`], [`StopReason`]: what comes back, in order.
//! - [`ProviderError`]: typed failures; each variant documents whether it is retried.
//! - [`ProviderConfig`], [`resolve_model`]: turning `provider/model` names and environment
//!   credentials into an `Arc<dyn Provider>`.
//! - [`AnthropicProvider`], [`OpenAiProvider`], [`ScriptedProvider`]: the implementations.
//! - [`HttpSettings`], [`RetryPolicy`]: timeouts and retries of the HTTP clients.
//!
//! # Event order
//!
//! A successful stream yields any number of `TextDelta`, `ThinkingDelta`/`ThinkingSignature`,
//! `RedactedThinking` and tool-call events, then (when the server reports it) one `Usage`, and
//! always ends with exactly one `Stop`. A stream that does not end with `Stop` ended with an
//! `Err` item instead; nothing is ever silently truncated.
//!
//! Tool calls: `ToolCallStart` → zero or more `ToolCallDelta` (raw argument JSON fragments) →
//! `ToolCallEnd` with the parsed input, or `ToolCallInvalid` when the accumulated arguments are
//! not a JSON object. `index` is the ordinal of the call within this response (0, 1, ...), the
//! same for every API. The loop should answer a `ToolCallInvalid` like a failed tool: record
//! `Part::ToolUse { input: {} }` in the assistant message and send back a
//! `Part::ToolResult { is_error: true, content: <the error> }` so the model can retry.
//!
//! Thinking: `ThinkingDelta`s accumulate into one thinking block; `ThinkingSignature` closes it
//! (Anthropic). The loop must send thinking blocks back verbatim, with their signature, as
//! [`Part::Thinking`] (and [`Part::RedactedThinking`]) in the assistant message.
//!
//! # Retries and cancellation
//!
//! HTTP providers retry transient failures (see [`ProviderError::is_retryable`]) with
//! exponential backoff and jitter, honouring `retry-after`, but only until the first event of a
//! response has been produced: [`Provider::stream`] resolves once the first event is in hand, and
//! after that errors are yielded as stream items. Dropping the future or the stream aborts the
//! HTTP request (the connection is closed) and any backoff sleep.

mod anthropic;
mod catalog;
mod error;
mod history;
mod http;
pub mod limits;
mod openai;
pub mod pricing;
mod resolve;
mod retry;
mod scripted;
mod sse;
mod tool_names;

use std::fmt;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};

pub use anthropic::{ANTHROPIC_BASE_URL, ANTHROPIC_VERSION, AnthropicProvider};
pub use catalog::{LIST_TIMEOUT, MODELS_MAX_AGE, cache_file, cached_models, discover_models};
pub use error::{ProviderError, StreamProgress};
pub(crate) use history::json_len;
pub use history::{History, push_merged};
pub use http::HttpSettings;
pub use openai::{MaxTokensParam, OPENAI_BASE_URL, OpenAiProvider};
pub use resolve::{
    DEFAULT_ANTHROPIC_MODEL, DEFAULT_OPENAI_MODEL, ProviderConfig, ProviderKind, default_model,
    provider_config, resolve_model, usable_providers,
};
pub use retry::{RetryNotice, RetryPolicy, observe_retries, parse_retry_after};
pub use scripted::ScriptedProvider;
pub use tool_names::WireNames;

/// Who authored a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The user, including tool results sent back to the model.
    User,
    /// The model.
    Assistant,
}

/// One piece of message content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// Plain text. Empty text parts are dropped when sending (Anthropic rejects them).
    Text(String),
    /// An image, base64-encoded (`data`) with its media type (`image/png`, ...).
    Image {
        /// e.g. `image/png`.
        media_type: String,
        /// Base64 of the image bytes, without a `data:` prefix.
        data: String,
    },
    /// Model reasoning. Anthropic requires it back verbatim with its signature; a thinking part
    /// without a signature is not sent to Anthropic. OpenAI-compatible servers never get it back.
    Thinking {
        /// The reasoning text.
        text: String,
        /// The opaque signature Anthropic attached to the block.
        signature: Option<String>,
    },
    /// Encrypted reasoning (Anthropic `redacted_thinking`), sent back verbatim.
    RedactedThinking {
        /// The opaque payload.
        data: String,
    },
    /// A tool call made by the model.
    ToolUse {
        /// Provider-assigned call id, echoed in the matching [`Part::ToolResult`].
        id: String,
        /// Tool name.
        name: String,
        /// Arguments; should be a JSON object.
        input: serde_json::Value,
    },
    /// The result of a tool call, in a [`Role::User`] message.
    ToolResult {
        /// The id of the [`Part::ToolUse`] this answers.
        tool_use_id: String,
        /// The result text (sent to Anthropic as `(no output)` when empty, which it rejects).
        content: String,
        /// Whether the tool failed. OpenAI has no such field: the content is prefixed with
        /// `Error: ` instead.
        is_error: bool,
    },
}

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Author.
    pub role: Role,
    /// Content, in order.
    pub content: Vec<Part>,
}

impl Message {
    /// A user message holding one text part.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![Part::Text(text.into())],
        }
    }

    /// An assistant message holding one text part.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: vec![Part::Text(text.into())],
        }
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Tool name.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object, shared by every request that offers the tool.
    pub input_schema: std::sync::Arc<serde_json::Value>,
}

impl ToolDefinition {
    /// The definition the model is sent for `spec`.
    pub fn of(spec: &crate::tool::ToolSpec) -> Self {
        Self {
            name: spec.id.clone(),
            description: spec.description.clone(),
            input_schema: std::sync::Arc::new(spec.model_schema()),
        }
    }
}

/// One request to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The model name as the provider knows it (no `provider/` prefix).
    pub model: String,
    /// The system prompt; empty means none.
    pub system: String,
    /// The conversation, oldest first: the session's own, shared, not copied ([`History`]).
    pub messages: History,
    /// Tools offered to the model; order is kept (and is part of the cached prefix).
    pub tools: Vec<ToolDefinition>,
    /// The answer's own output allowance (the configured `max_tokens`). With thinking on, the
    /// request's limit is this plus the thinking budget, within the model's output limit
    /// ([`limits::plan_output`]).
    pub max_tokens: u32,
    /// Thinking budget (`None`: off). Anthropic budget models: `budget_tokens` (at least 1024,
    /// below the request's `max_tokens`); Anthropic adaptive models and OpenAI reasoning models:
    /// an effort level ([`limits::effort`]); models that cannot think: nothing.
    pub thinking_budget: Option<u32>,
}

/// What the model produced, streamed in order. See the module docs for the order guarantees.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// A fragment of visible text.
    TextDelta(String),
    /// A fragment of reasoning text.
    ThinkingDelta {
        /// The fragment.
        text: String,
    },
    /// The signature closing the current thinking block.
    ThinkingSignature(String),
    /// A complete redacted thinking block (opaque data).
    RedactedThinking(String),
    /// A tool call begins.
    ToolCallStart {
        /// Ordinal of the call within this response.
        index: usize,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// A raw fragment of the call's argument JSON (for progress display only).
    ToolCallDelta {
        /// Ordinal of the call within this response.
        index: usize,
        /// The fragment.
        json: String,
    },
    /// A tool call is complete; `input` is the parsed arguments object (`{}` when the model sent
    /// no arguments).
    ToolCallEnd {
        /// Ordinal of the call within this response.
        index: usize,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Parsed arguments.
        input: serde_json::Value,
    },
    /// A tool call is complete but its arguments are not a JSON object. The stream goes on; the
    /// loop should answer with an error tool result (see the module docs).
    ToolCallInvalid {
        /// Ordinal of the call within this response.
        index: usize,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// The accumulated argument text as received.
        raw_input: String,
        /// Why it was rejected, phrased for the model.
        error: String,
    },
    /// Token accounting for this response.
    Usage(Usage),
    /// The response is complete. Always the last event of a successful stream.
    Stop(StopReason),
}

/// Token accounting for one response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// The whole prompt, including cached tokens (read and written).
    pub input_tokens: u64,
    /// Generated tokens, including reasoning.
    pub output_tokens: u64,
    /// Prompt tokens served from the cache.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the cache.
    pub cache_write_tokens: u64,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// The model finished its answer.
    EndTurn,
    /// The model wants tool results.
    ToolUse,
    /// `max_tokens` was reached.
    MaxTokens,
    /// The model declined (Anthropic `refusal`, OpenAI `content_filter`).
    Refusal,
    /// Anything else, as the provider named it (`pause_turn`, `stop_sequence`, ...).
    Other(String),
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EndTurn => f.write_str("end_turn"),
            Self::ToolUse => f.write_str("tool_use"),
            Self::MaxTokens => f.write_str("max_tokens"),
            Self::Refusal => f.write_str("refusal"),
            Self::Other(other) => f.write_str(other),
        }
    }
}

/// The events of one response. Dropping it aborts the underlying HTTP request.
pub type ModelStream = BoxStream<'static, Result<ModelEvent, ProviderError>>;

/// A model backend.
pub trait Provider: Send + Sync + fmt::Debug {
    /// `"anthropic"`, `"openai"` (any OpenAI-compatible server) or `"scripted"`.
    fn id(&self) -> &str;

    /// Sends `request` and resolves once the response's first event is available (retrying
    /// transient failures until then). Cancellation: drop the future or the stream.
    fn stream(&self, request: ModelRequest) -> BoxFuture<'_, Result<ModelStream, ProviderError>>;

    /// The context window of `model`, in tokens (a conservative default for unknown models).
    fn context_window(&self, model: &str) -> u64;

    /// The models the provider's server lists (its models endpoint), asked for with a short
    /// timeout. Providers without such a list answer with an empty one.
    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// The provider's name as the user configured it (`ollama`, `anthropic`); [`Provider::id`]
    /// by default.
    fn label(&self) -> &str {
        self.id()
    }
}
