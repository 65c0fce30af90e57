//! The HTTP side shared by the Anthropic and OpenAI clients: [`HttpSettings`], client
//! construction, sending one streaming POST with retries, and classifying failed responses.

use std::time::{Duration, SystemTime};

use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderValue};

use super::retry::{RetryPolicy, parse_retry_after, with_retries};
use super::sse::{Decoder, drive};
use super::{ModelStream, ProviderError, StreamProgress};

/// Timeouts and retries of an HTTP provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSettings {
    /// Limit on establishing the TCP/TLS connection. Default 10 s.
    pub connect_timeout: Duration,
    /// Limit on silence: waiting for the response headers, and between two body chunks.
    /// A stalled stream fails with [`ProviderError::Timeout`]. Default 300 s (reasoning models
    /// can think for minutes before their first byte on OpenAI-compatible servers).
    pub idle_timeout: Duration,
    /// Retries before the first event of a response.
    pub retry: RetryPolicy,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            retry: RetryPolicy::default(),
        }
    }
}

/// Builds the reqwest client of one provider ([`crate::runtime::net::provider_client`]).
pub(crate) fn build_client(settings: &HttpSettings) -> Result<reqwest::Client, ProviderError> {
    crate::runtime::net::provider_client(settings.connect_timeout).map_err(|error| {
        ProviderError::Config(format!("cannot build HTTP client: {}", chain(&error)))
    })
}

/// Where and how one provider posts its requests.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The provider's name in errors and logs (`anthropic`, `openai`, or a configured name
    /// such as `ollama`).
    pub provider: String,
    /// Full URL of the streaming endpoint.
    pub url: String,
    /// Auth and version headers.
    pub headers: HeaderMap,
    /// The variable named by [`ProviderError::Auth`].
    pub key_env: String,
    /// The base URL the paths are joined to, as the user gave it.
    pub base_url: String,
    /// Where the base URL came from, as a clause (`set by ANTHROPIC_BASE_URL`).
    pub base_url_from: String,
    /// The API's name in errors (`Anthropic Messages API`).
    pub api: &'static str,
    /// Full URL of the models list (`GET`, `{"data": [{"id": ...}]}`).
    pub models_url: String,
}

impl Endpoint {
    /// An endpoint of `api` at `base` (the stream at `base + path`, the models list at
    /// `base + models_path`).
    pub(crate) fn new(
        api: &'static str,
        base: &str,
        path: &str,
        models_path: &str,
        headers: HeaderMap,
        key_env: &str,
    ) -> Self {
        Self {
            provider: String::new(),
            url: join_url(base, path),
            headers,
            key_env: key_env.to_owned(),
            base_url: base.to_owned(),
            base_url_from: "is the official default".to_owned(),
            api,
            models_url: join_url(base, models_path),
        }
    }
}

/// The model ids a provider lists at its models endpoint (`{"data": [{"id": ...}, ...]}`, the
/// shape of both the Anthropic and the OpenAI API), within `timeout`.
pub(crate) async fn fetch_models(
    client: &reqwest::Client,
    endpoint: &Endpoint,
    timeout: Duration,
) -> Result<Vec<String>, ProviderError> {
    let provider = endpoint.provider.as_str();
    let request = client
        .get(&endpoint.models_url)
        .headers(endpoint.headers.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send();
    let response = match tokio::time::timeout(timeout, request).await {
        Err(_) => {
            return Err(ProviderError::Timeout {
                provider: provider.to_owned(),
                idle: timeout,
                after: StreamProgress::default(),
            });
        }
        Ok(Err(error)) => return Err(network_error(endpoint, &error)),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    let content_type = content_type(&response);
    let body = read_body(response, timeout).await;
    if let Some(error) = not_an_api(endpoint, status.as_u16(), &content_type, &body) {
        return Err(error);
    }
    if !status.is_success() {
        return Err(classify(endpoint, status.as_u16(), None, body));
    }
    let value: serde_json::Value =
        serde_json::from_str(&body).map_err(|error| ProviderError::Decode {
            provider: provider.to_owned(),
            message: format!("the models list is not JSON: {error}"),
        })?;
    let models = value
        .get("data")
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| ProviderError::Decode {
            provider: provider.to_owned(),
            message: "the models list has no `data` array".to_owned(),
        })?;
    Ok(models
        .iter()
        .filter_map(|model| model.get("id")?.as_str().map(str::to_owned))
        .collect())
}

/// The response's content type, lowercased (empty when absent).
fn content_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase()
}

/// A failure to send: [`ProviderError::Unreachable`] when no connection could be made, else
/// [`ProviderError::Network`].
fn network_error(endpoint: &Endpoint, error: &reqwest::Error) -> ProviderError {
    if error.is_connect() {
        ProviderError::Unreachable {
            provider: endpoint.provider.clone(),
            base_url: endpoint.base_url.clone(),
            set_by: endpoint.base_url_from.clone(),
            message: connect_cause(error),
        }
    } else {
        ProviderError::Network {
            provider: endpoint.provider.clone(),
            message: chain(error),
        }
    }
}

/// The innermost cause of a connect error (`Connection refused (os error 111)`), which says
/// more than reqwest's own wrapping.
fn connect_cause(error: &reqwest::Error) -> String {
    let mut last = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        last = cause.to_string();
        source = cause.source();
    }
    last
}

/// [`ProviderError::NotAnApi`] when a response is plainly not the API's: an HTML page (any
/// status), or a 404/405 whose body is not JSON.
fn not_an_api(
    endpoint: &Endpoint,
    status: u16,
    content_type: &str,
    body: &str,
) -> Option<ProviderError> {
    let path = endpoint
        .url
        .strip_prefix(endpoint.base_url.trim_end_matches('/'))
        .unwrap_or(&endpoint.url);
    let looks_html = content_type.starts_with("text/html")
        || body.trim_start().get(..15).is_some_and(|head| {
            head.to_ascii_lowercase().starts_with("<!doctype html") || head.starts_with("<html")
        });
    let detail = if looks_html {
        format!("`{path}` answered HTTP {status} with an HTML page")
    } else if matches!(status, 404 | 405)
        && serde_json::from_str::<serde_json::Value>(body).is_err()
    {
        let mut sample: String = body.chars().take(80).collect();
        if sample.is_empty() {
            sample = "an empty body".to_owned();
        }
        format!("`{path}` answered HTTP {status} with `{sample}` instead of a JSON error")
    } else {
        return None;
    };
    Some(ProviderError::NotAnApi {
        provider: endpoint.provider.clone(),
        base_url: endpoint.base_url.clone(),
        set_by: endpoint.base_url_from.clone(),
        api: endpoint.api.to_owned(),
        detail: format!("{detail}; check the address (and its path, such as `/v1`)"),
    })
}

/// Whether a 400/404 body says the model does not exist.
fn is_unknown_model(status: u16, body: &str) -> bool {
    if !matches!(status, 400 | 404) {
        return false;
    }
    let lower = body.to_ascii_lowercase();
    lower.contains("model_not_found")
        || (lower.contains("model")
            && (lower.contains("not_found_error")
                || lower.contains("not found")
                || lower.contains("does not exist")))
}

/// A secret header value (hidden from `Debug`), or a configuration error naming the header.
pub(crate) fn secret_header(name: &str, value: &str) -> Result<HeaderValue, ProviderError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| {
        ProviderError::Config(format!("invalid characters in the {name} header value"))
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// `base` without trailing slashes, joined with `path` (which starts with `/`).
pub(crate) fn join_url(base: &str, path: &str) -> String {
    format!("{}{path}", base.trim_end_matches('/'))
}

/// A request body in pieces, sent one after the other as they are: the kept runs of a long
/// conversation ([`super::History`]) go to the socket without being copied into one buffer.
#[derive(Debug, Clone, Default)]
pub(crate) struct RequestBody {
    pieces: Vec<bytes::Bytes>,
    len: usize,
}

impl RequestBody {
    /// Appends `piece` (an empty one is left out).
    pub(crate) fn push(&mut self, piece: impl Into<bytes::Bytes>) {
        let piece = piece.into();
        if !piece.is_empty() {
            self.len += piece.len();
            self.pieces.push(piece);
        }
    }

    /// The whole body in one buffer.
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.len);
        for piece in &self.pieces {
            bytes.extend_from_slice(piece);
        }
        bytes
    }

    /// The body as reqwest sends it, with its length: one piece as it is, several as a stream
    /// of them (the caller sets `Content-Length`, so it is not sent chunked).
    fn reqwest(&self) -> reqwest::Body {
        match self.pieces.as_slice() {
            [] => reqwest::Body::from(bytes::Bytes::new()),
            [one] => reqwest::Body::from(one.clone()),
            _ => reqwest::Body::wrap_stream(futures::stream::iter(
                self.pieces
                    .clone()
                    .into_iter()
                    .map(Ok::<_, std::convert::Infallible>),
            )),
        }
    }
}

impl From<Vec<u8>> for RequestBody {
    fn from(bytes: Vec<u8>) -> Self {
        let mut body = Self::default();
        body.push(bytes);
        body
    }
}

/// Posts `body` and returns the response's events, retrying transient failures until the first
/// event has been produced.
pub(crate) async fn open_stream<D, F>(
    client: &reqwest::Client,
    endpoint: &Endpoint,
    body: RequestBody,
    model: &str,
    settings: &HttpSettings,
    mut new_decoder: F,
) -> Result<ModelStream, ProviderError>
where
    D: Decoder,
    F: FnMut() -> D,
{
    let result = with_retries(&settings.retry, |attempt| {
        let decoder = new_decoder();
        let body = body.clone();
        async move {
            tracing::debug!(provider = %endpoint.provider, url = %endpoint.url, attempt, "model request");
            let response = post(client, endpoint, body, settings.idle_timeout).await?;
            let mut events = drive(response, decoder, endpoint.provider.clone(), settings.idle_timeout);
            match events.next().await {
                Some(Ok(first)) => {
                    Ok(futures::stream::once(async move { Ok(first) }).chain(events).boxed())
                }
                Some(Err(error)) => Err(error),
                None => Err(ProviderError::StreamCut {
                    provider: endpoint.provider.clone(),
                    after: StreamProgress::default(),
                    detail: "the response produced no event".into(),
                }),
            }
        }
    })
    .await;
    match result {
        Ok(stream) => Ok(stream),
        Err(error) => Err(explain_unknown_model(client, endpoint, model, error).await),
    }
}

/// One POST: the response when its status is a success, a classified error otherwise.
async fn post(
    client: &reqwest::Client,
    endpoint: &Endpoint,
    body: RequestBody,
    idle: Duration,
) -> Result<reqwest::Response, ProviderError> {
    let provider = endpoint.provider.as_str();
    let request = client
        .post(&endpoint.url)
        .headers(endpoint.headers.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::ACCEPT, "text/event-stream")
        .header(reqwest::header::CONTENT_LENGTH, body.len)
        .body(body.reqwest())
        .send();
    let response = match tokio::time::timeout(idle, request).await {
        Err(_) => {
            return Err(ProviderError::Timeout {
                provider: provider.to_owned(),
                idle,
                after: StreamProgress::default(),
            });
        }
        Ok(Err(error)) => return Err(network_error(endpoint, &error)),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    let content_type = content_type(&response);
    if content_type.starts_with("text/html") {
        let body = read_body(response, idle).await;
        return Err(
            not_an_api(endpoint, status.as_u16(), &content_type, &body).unwrap_or_else(|| {
                ProviderError::Decode {
                    provider: provider.to_owned(),
                    message: format!("expected an event stream, got HTML: {body}"),
                }
            }),
        );
    }
    if status.is_success() {
        if content_type.starts_with("application/json") {
            let body = read_body(response, idle).await;
            return Err(ProviderError::Decode {
                provider: provider.to_owned(),
                message: format!("expected an event stream, got JSON: {body}"),
            });
        }
        return Ok(response);
    }
    let retry_after = retry_after(response.headers());
    let body = read_body(response, idle).await;
    if let Some(error) = not_an_api(endpoint, status.as_u16(), &content_type, &body) {
        return Err(error);
    }
    Err(classify(endpoint, status.as_u16(), retry_after, body))
}

/// [`ProviderError::UnknownModel`] for `error` when it says the model does not exist, with the
/// provider's models (asked for within a few seconds); any other error as it is.
pub(crate) async fn explain_unknown_model(
    client: &reqwest::Client,
    endpoint: &Endpoint,
    model: &str,
    error: ProviderError,
) -> ProviderError {
    let ProviderError::Http { status, body, .. } = &error else {
        return error;
    };
    if !is_unknown_model(*status, body) {
        return error;
    }
    let available = fetch_models(client, endpoint, Duration::from_secs(5))
        .await
        .map_err(Box::new);
    ProviderError::UnknownModel {
        provider: endpoint.provider.clone(),
        model: model.to_owned(),
        message: format!("HTTP {status}: {}", error_message(body)),
        available,
    }
}

/// The error for a non-success status.
fn classify(
    endpoint: &Endpoint,
    status: u16,
    retry_after: Option<Duration>,
    body: String,
) -> ProviderError {
    let provider = endpoint.provider.clone();
    match status {
        401 | 403 => ProviderError::Auth {
            provider,
            env_var: endpoint.key_env.clone(),
            message: format!(
                "the API key was rejected (HTTP {status}): {}",
                error_message(&body)
            ),
        },
        429 => ProviderError::RateLimited {
            provider,
            retry_after,
            body,
        },
        529 => ProviderError::Overloaded {
            provider,
            retry_after,
            body,
        },
        _ if status >= 500 && body.contains("overloaded_error") => ProviderError::Overloaded {
            provider,
            retry_after,
            body,
        },
        _ => ProviderError::Http {
            provider,
            status,
            body,
            retry_after,
        },
    }
}

/// `error.message` of a JSON error body, or the body itself.
fn error_message(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|value| value.pointer("/error/message")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| body.to_owned())
}

/// `retry-after-ms` (OpenAI) or `retry-after` (seconds or HTTP date).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    if let Some(ms) = text("retry-after-ms").and_then(|ms| ms.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    parse_retry_after(text("retry-after")?, SystemTime::now())
}

/// The body of an error response, truncated, never failing (best effort within `idle`).
async fn read_body(response: reqwest::Response, idle: Duration) -> String {
    const LIMIT: usize = 4000;
    let text = match tokio::time::timeout(idle, response.text()).await {
        Ok(Ok(text)) => text,
        Ok(Err(error)) => format!("<unreadable body: {}>", chain(&error)),
        Err(_) => "<body timed out>".to_owned(),
    };
    let text = text.trim();
    match text.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// An error with its sources (defined with the provider errors; kept here for callers).
pub(crate) use super::error::chain;
