//! [`ProviderError`] and [`StreamProgress`].

use std::fmt;
use std::time::Duration;

/// How far a response had got when it failed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamProgress {
    /// Server-sent events received.
    pub sse_events: usize,
    /// Model events produced from them.
    pub model_events: usize,
    /// The type of the last server-sent event (`content_block_delta`, `chunk`, ...).
    pub last_event: Option<String>,
}

impl fmt::Display for StreamProgress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} server events, {} model events",
            self.sse_events, self.model_events
        )?;
        if let Some(last) = &self.last_event {
            write!(f, ", last `{last}`")?;
        }
        Ok(())
    }
}

/// A provider failure.
///
/// "Retried" below means: retried by the HTTP providers with backoff, and only while no event of
/// the response has been produced yet. Once events were yielded, every error ends the stream.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    /// A non-success HTTP status not covered by a more specific variant.
    /// Retried when the status is 408 or 5xx; `retry_after` is honoured when present.
    #[error("{provider}: HTTP {status}: {body}")]
    Http {
        /// Provider id.
        provider: String,
        /// HTTP status.
        status: u16,
        /// Response body (truncated).
        body: String,
        /// The server's `retry-after`, if any.
        retry_after: Option<Duration>,
    },
    /// HTTP 429 or an in-stream `rate_limit_error`. Retried, honouring `retry_after`.
    #[error("{provider}: rate limited{}: {body}", fmt_after(retry_after))]
    RateLimited {
        /// Provider id.
        provider: String,
        /// The server's `retry-after`, if any.
        retry_after: Option<Duration>,
        /// Response body or error message.
        body: String,
    },
    /// HTTP 529 or an Anthropic `overloaded_error` (status or in-stream). Retried.
    #[error("{provider}: overloaded{}: {body}", fmt_after(retry_after))]
    Overloaded {
        /// Provider id.
        provider: String,
        /// The server's `retry-after`, if any.
        retry_after: Option<Duration>,
        /// Response body or error message.
        body: String,
    },
    /// An error the provider reported inside the stream (`error` event / `{"error": ..}` chunk).
    /// Retried only for `api_error` / `server_error` (the in-stream form of a 500).
    #[error("{provider}: {kind}: {message}")]
    Api {
        /// Provider id.
        provider: String,
        /// The provider's error type (`api_error`, `invalid_request_error`, ...).
        kind: String,
        /// The provider's message.
        message: String,
    },
    /// The request could not be sent or the response headers not received (connection refused,
    /// DNS, TLS, reset). Retried.
    #[error("{provider}: network error: {message}")]
    Network {
        /// Provider id.
        provider: String,
        /// The underlying error, with its causes.
        message: String,
    },
    /// Nothing complete arrived for `idle`: no response headers, or no whole server event (a
    /// stalled stream, or one trickling bytes that never finish an event). Retried.
    #[error("{provider}: no data for {idle:?} (stalled stream) after {after}")]
    Timeout {
        /// Provider id.
        provider: String,
        /// The configured idle timeout.
        idle: Duration,
        /// What had been received.
        after: StreamProgress,
    },
    /// The response ended (EOF or a broken connection) before its terminal event
    /// (`message_stop`, `[DONE]` or a `finish_reason`). Retried.
    #[error("{provider}: stream cut after {after}: {detail}")]
    StreamCut {
        /// Provider id.
        provider: String,
        /// What had been received.
        after: StreamProgress,
        /// The transport error, or `EOF` for a clean close.
        detail: String,
    },
    /// The response body grew past `limit` bytes, far beyond any model's answer: reading
    /// stopped. Not retried.
    #[error(
        "{provider}: the response exceeded {limit} bytes and was stopped (after {after}); this is not a model's answer, check the server"
    )]
    TooLarge {
        /// Provider id.
        provider: String,
        /// The cap, in bytes.
        limit: usize,
        /// What had been received.
        after: StreamProgress,
    },
    /// The response could not be understood (invalid JSON, unexpected content type). Not retried.
    #[error("{provider}: could not decode the response: {message}")]
    Decode {
        /// Provider id.
        provider: String,
        /// What was wrong.
        message: String,
    },
    /// Missing or rejected credentials (HTTP 401/403). Not retried.
    #[error("{provider}: {message}; set {env_var} to a valid API key")]
    Auth {
        /// Provider id.
        provider: String,
        /// The environment variable that holds the key.
        env_var: String,
        /// What went wrong (including the server's message for 401/403).
        message: String,
    },
    /// Invalid configuration or model name. Not retried.
    #[error("{0}")]
    Config(String),
    /// No model is named and no provider has credentials: the message names what to set.
    /// Not retried.
    #[error("{0}")]
    NoProvider(String),
    /// The provider's server could not be reached at all (connection refused, no such host).
    /// Retried (a local server may be starting).
    #[error(
        "{provider}: cannot connect to {base_url} (the base URL {set_by}): {message}. Is the \
         server running, and is that its address?"
    )]
    Unreachable {
        /// Provider id.
        provider: String,
        /// The base URL tried.
        base_url: String,
        /// Where the base URL came from, as a clause (`set by ANTHROPIC_BASE_URL`, ...).
        set_by: String,
        /// The underlying error.
        message: String,
    },
    /// The server answered, but not as the provider's API does (an HTML page, a plain-text
    /// 404): the base URL points somewhere else. Not retried.
    #[error(
        "{provider}: the base URL {base_url} does not look like the {api} (the base URL \
         {set_by}): {detail}"
    )]
    NotAnApi {
        /// Provider id.
        provider: String,
        /// The base URL tried.
        base_url: String,
        /// Where the base URL came from, as a clause.
        set_by: String,
        /// The API expected (`Anthropic Messages API`, `OpenAI-compatible API`).
        api: String,
        /// What came back instead.
        detail: String,
    },
    /// The provider does not know the model. Not retried.
    #[error(
        "{provider}: the model `{model}` is not available ({message}); {}",
        fmt_available(provider, available)
    )]
    UnknownModel {
        /// Provider id.
        provider: String,
        /// The model asked for.
        model: String,
        /// The provider's message.
        message: String,
        /// The provider's models (from its models endpoint), or why they could not be read.
        available: Result<Vec<String>, Box<ProviderError>>,
    },
    /// The scripted provider has no response left. Not retried.
    #[error("scripted provider: no response left (the script has {responses} responses)")]
    ScriptExhausted {
        /// How many responses the script had.
        responses: usize,
    },
}

fn fmt_after(retry_after: &Option<Duration>) -> String {
    match retry_after {
        Some(after) => format!(" (retry after {after:?})"),
        None => String::new(),
    }
}

fn fmt_available(provider: &str, available: &Result<Vec<String>, Box<ProviderError>>) -> String {
    match available {
        Ok(models) if models.is_empty() => "the provider lists no models".to_owned(),
        Ok(models) => format!(
            "the models {provider} offers are: {}; choose one with `model = \"{provider}/NAME\"`",
            models.join(", ")
        ),
        Err(why) => format!("its list of models could not be read ({why})"),
    }
}

impl ProviderError {
    /// Whether the failure is transient, i.e. retried by the HTTP providers when it happens
    /// before the first event of a response.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Http { status, .. } => *status == 408 || *status >= 500,
            Self::Api { kind, .. } => kind == "api_error" || kind == "server_error",
            Self::RateLimited { .. }
            | Self::Overloaded { .. }
            | Self::Network { .. }
            | Self::Unreachable { .. }
            | Self::Timeout { .. }
            | Self::StreamCut { .. } => true,
            Self::Decode { .. }
            | Self::TooLarge { .. }
            | Self::Auth { .. }
            | Self::NotAnApi { .. }
            | Self::UnknownModel { .. }
            | Self::Config(_)
            | Self::NoProvider(_)
            | Self::ScriptExhausted { .. } => false,
        }
    }

    /// Whether the model cannot answer for want of a credential (none found, or the one sent
    /// was refused): what `keel login` or setting the named variable fixes.
    pub fn is_missing_credentials(&self) -> bool {
        matches!(self, Self::Auth { .. } | Self::NoProvider(_))
    }

    /// Whether the provider rejected the request because the prompt exceeds the model's
    /// context window (Anthropic `prompt is too long`, OpenAI `context_length_exceeded`): the
    /// loop should compact the conversation rather than retry it as is.
    pub fn is_context_overflow(&self) -> bool {
        let text = match self {
            Self::Http {
                status: 400 | 413,
                body,
                ..
            } => body,
            Self::Api { message, .. } => message,
            _ => return false,
        };
        let text = text.to_ascii_lowercase();
        [
            "prompt is too long",
            "context_length_exceeded",
            "maximum context length",
            "context window",
        ]
        .iter()
        .any(|needle| text.contains(needle))
    }

    /// The delay the server asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Http { retry_after, .. }
            | Self::RateLimited { retry_after, .. }
            | Self::Overloaded { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// An error with its sources, `a: b: c`.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
