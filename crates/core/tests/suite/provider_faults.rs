//! Retries, timeouts, cut streams and cancellation, over real HTTP against the mock server.

use std::time::Duration;

use futures::StreamExt;
use keel_core::provider::{ModelEvent, Provider, ProviderError, RetryPolicy, StopReason};
use keel_testkit::MockModel;
use keel_testkit::mock_model::{Api, Reply, Turn, anthropic_error_event, anthropic_event};
use serde_json::json;

use super::provider_support::{
    anthropic, anthropic_with, collect, condensed, fast_settings, openai, openai_with,
    simple_request,
};

fn long_text() -> String {
    "All work and no play makes a dull model. ".repeat(20)
}

#[tokio::test]
async fn rate_limit_retry_after_seconds_is_honoured_then_succeeds() {
    let mock = MockModel::start().await;
    mock.push(Api::Anthropic, Reply::rate_limited(Api::Anthropic, "1"));
    mock.push_anthropic(Turn::text_only("after the wait"));
    let (events, error) =
        collect(anthropic(&mock).stream(simple_request("hi")).await.unwrap()).await;
    assert!(error.is_none());
    assert_eq!(
        condensed(&events)[0],
        ModelEvent::TextDelta("after the wait".into())
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    // A lower bound only: the client waited for the server's `retry-after: 1`, not its own
    // 10 ms backoff.
    let waited = requests[1].received_at - requests[0].received_at;
    assert!(waited >= Duration::from_millis(900), "{waited:?}");
}

#[tokio::test]
async fn rate_limit_retry_after_ms_is_honoured_then_succeeds() {
    let mock = MockModel::start().await;
    mock.push(
        Api::OpenAi,
        Reply::rate_limited(Api::OpenAi, "0").header("retry-after-ms", "200"),
    );
    mock.push_openai(Turn::text_only("ok"));
    let (_, error) = collect(openai(&mock).stream(simple_request("hi")).await.unwrap()).await;
    assert!(error.is_none());
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].received_at - requests[0].received_at >= Duration::from_millis(180));
}

#[tokio::test]
async fn server_errors_and_overload_are_retried() {
    let mock = MockModel::start().await;
    mock.push(Api::OpenAi, Reply::error(Api::OpenAi, 500, "boom"));
    mock.push(Api::OpenAi, Reply::error(Api::OpenAi, 503, "unavailable"));
    mock.push_openai(Turn::text_only("third time"));
    let (events, error) = collect(openai(&mock).stream(simple_request("hi")).await.unwrap()).await;
    assert!(error.is_none());
    assert_eq!(events.last(), Some(&ModelEvent::Stop(StopReason::EndTurn)));
    assert_eq!(mock.requests().len(), 3);

    let mock = MockModel::start().await;
    mock.push(
        Api::Anthropic,
        Reply::error(Api::Anthropic, 529, "Overloaded"),
    );
    // An in-stream overloaded_error before any content is retried too.
    mock.push(
        Api::Anthropic,
        Reply::sse(vec![
            anthropic_event(
                "message_start",
                json!({"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
            ),
            anthropic_error_event("overloaded_error", "Overloaded"),
        ]),
    );
    mock.push_anthropic(Turn::text_only("fine"));
    let (_, error) = collect(anthropic(&mock).stream(simple_request("hi")).await.unwrap()).await;
    assert!(error.is_none());
    assert_eq!(mock.requests().len(), 3);
}

#[tokio::test]
async fn retries_are_bounded() {
    let mock = MockModel::start().await;
    for _ in 0..5 {
        mock.push(
            Api::Anthropic,
            Reply::error(Api::Anthropic, 500, "still broken"),
        );
    }
    let error = anthropic(&mock)
        .stream(simple_request("hi"))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(error, ProviderError::Http { status: 500, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("still broken"), "{error}");
    assert_eq!(mock.requests().len(), 4, "default policy: 4 attempts");
}

#[tokio::test]
async fn unauthorized_is_an_auth_error_naming_the_variable_and_not_retried() {
    let mock = MockModel::start().await;
    mock.push(
        Api::Anthropic,
        Reply::error(Api::Anthropic, 401, "invalid x-api-key"),
    );
    mock.push_anthropic(Turn::text_only("never served"));
    let error = anthropic(&mock)
        .stream(simple_request("hi"))
        .await
        .err()
        .unwrap();
    let ProviderError::Auth { env_var, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(env_var, "ANTHROPIC_API_KEY");
    let message = error.to_string();
    assert!(
        message.contains("ANTHROPIC_API_KEY") && message.contains("invalid x-api-key"),
        "{message}"
    );
    assert_eq!(mock.requests().len(), 1);

    let mock = MockModel::start().await;
    mock.push(
        Api::OpenAi,
        Reply::error(Api::OpenAi, 403, "Incorrect API key provided"),
    );
    let error = openai(&mock)
        .stream(simple_request("hi"))
        .await
        .err()
        .unwrap();
    assert!(error.to_string().contains("set OPENAI_API_KEY"), "{error}");
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn a_cut_stream_is_a_stream_cut_error_never_a_truncation() {
    // Chunked body whose connection drops after 6 events (mid text), both APIs.
    let turn = Turn::text_only(long_text());
    let mock = MockModel::start().await;
    mock.push(Api::Anthropic, Reply::anthropic(&turn).cut_after(6));
    mock.push(Api::OpenAi, Reply::openai(&turn).cut_after(6));
    // Close-delimited body ending cleanly right before message_stop / [DONE]-and-finish.
    let anthropic_events = turn.anthropic_events();
    mock.push(
        Api::Anthropic,
        Reply::anthropic(&turn)
            .close_delimited()
            .cut_after(anthropic_events.len() - 1),
    );
    mock.push(
        Api::OpenAi,
        Reply::openai(&turn).close_delimited().cut_after(6),
    );

    let mut settings = fast_settings();
    settings.retry = RetryPolicy::none();
    let anthropic = anthropic_with(&mock, settings.clone());
    let openai = openai_with(&mock, settings);
    let cases = [
        (&anthropic as &dyn Provider, false),
        (&openai, false),
        (&anthropic, true),
        (&openai, true),
    ];
    for (provider, clean_eof) in cases {
        let (events, error) = collect(provider.stream(simple_request("hi")).await.unwrap()).await;
        let Some(ProviderError::StreamCut { after, detail, .. }) = &error else {
            panic!("{}: {error:?}", provider.id())
        };
        // A broken chunked body is a transport error; a close-delimited one a clean EOF.
        assert_eq!(detail.starts_with("EOF"), clean_eof, "{detail}");
        assert!(
            events
                .iter()
                .any(|event| matches!(event, ModelEvent::TextDelta(_)))
        );
        assert!(
            !events
                .iter()
                .any(|event| matches!(event, ModelEvent::Stop(_)))
        );
        assert_eq!(after.model_events, events.len());
        assert!(error.unwrap().to_string().contains("stream cut"));
    }
    assert_eq!(mock.requests().len(), 4);
}

#[tokio::test]
async fn a_cut_before_the_first_event_is_retried() {
    let mock = MockModel::start().await;
    mock.push(
        Api::Anthropic,
        Reply::anthropic(&Turn::text_only("x")).cut_after(1),
    );
    mock.push_anthropic(Turn::text_only("complete"));
    let (events, error) =
        collect(anthropic(&mock).stream(simple_request("hi")).await.unwrap()).await;
    assert!(error.is_none());
    assert_eq!(
        condensed(&events)[0],
        ModelEvent::TextDelta("complete".into())
    );
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn a_stalled_stream_hits_the_idle_timeout() {
    let mut settings = fast_settings();
    settings.idle_timeout = Duration::from_millis(150);
    settings.retry.max_attempts = 2;
    let mock = MockModel::start().await;
    let turn = Turn::text_only(long_text());
    // Mid-stream stall: the events so far are delivered, then a Timeout item.
    mock.push(Api::Anthropic, Reply::anthropic(&turn).stall_after(5));
    // Headers, then nothing, twice: stream() itself fails after its two attempts.
    mock.push(Api::OpenAi, Reply::openai(&turn).stall_after(0));
    mock.push(Api::OpenAi, Reply::openai(&turn).stall_after(0));

    let (events, error) = collect(
        anthropic_with(&mock, settings.clone())
            .stream(simple_request("hi"))
            .await
            .unwrap(),
    )
    .await;
    assert!(!events.is_empty());
    let Some(ProviderError::Timeout { idle, after, .. }) = error else {
        panic!("{error:?}")
    };
    assert_eq!((idle, after.sse_events), (Duration::from_millis(150), 5));

    let error = openai_with(&mock, settings)
        .stream(simple_request("hi"))
        .await
        .err()
        .unwrap();
    assert!(matches!(error, ProviderError::Timeout { .. }), "{error:?}");
    assert_eq!(mock.requests().len(), 3);
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let mock = MockModel::start().await;
    mock.push(
        Api::Anthropic,
        Reply::anthropic(&Turn::text_only(long_text()).chunk_chars(4))
            .chunk_delay(Duration::from_millis(20)),
    );
    let provider = anthropic(&mock);
    let mut stream = provider.stream(simple_request("hi")).await.unwrap();
    for _ in 0..2 {
        assert!(matches!(
            stream.next().await,
            Some(Ok(ModelEvent::TextDelta(_)))
        ));
    }
    assert_eq!(mock.disconnects(), 0);
    drop(stream);
    assert!(
        mock.wait_for_disconnect(Duration::from_secs(2)).await,
        "the server never saw the hang-up"
    );
    assert!(mock.requests()[0].client_disconnected);
}

#[tokio::test]
async fn dropping_the_future_cancels_the_backoff() {
    let mock = MockModel::start().await;
    mock.push(Api::OpenAi, Reply::rate_limited(Api::OpenAi, "3"));
    mock.push_openai(Turn::text_only("too late"));
    let provider = openai(&mock);
    let result = tokio::time::timeout(
        Duration::from_millis(200),
        provider.stream(simple_request("hi")),
    )
    .await;
    assert!(result.is_err(), "still waiting for retry-after: 3");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(mock.requests().len(), 1);
    assert_eq!(mock.pending(Api::OpenAi), 1);
}

#[tokio::test]
async fn a_retry_after_beyond_the_limit_is_returned_not_waited() {
    let mock = MockModel::start().await;
    mock.push(Api::Anthropic, Reply::rate_limited(Api::Anthropic, "3600"));
    let error = anthropic(&mock)
        .stream(simple_request("hi"))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(error, ProviderError::RateLimited { retry_after: Some(after), .. } if after == Duration::from_secs(3600)),
        "{error:?}"
    );
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn mid_stream_errors_end_the_stream_without_retry() {
    let mock = MockModel::start().await;
    let mut events = Turn::text_only("partial answer").anthropic_events();
    events.truncate(4); // message_start, ping, block start, one delta
    events.push(anthropic_error_event("overloaded_error", "Overloaded"));
    mock.push(Api::Anthropic, Reply::sse(events));
    let (events, error) =
        collect(anthropic(&mock).stream(simple_request("hi")).await.unwrap()).await;
    assert_eq!(events, vec![ModelEvent::TextDelta("partial ".into())]);
    assert!(
        matches!(error, Some(ProviderError::Overloaded { .. })),
        "{error:?}"
    );
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn unscripted_requests_get_a_clear_mock_error() {
    let mock = MockModel::start().await;
    let mut settings = fast_settings();
    settings.retry = RetryPolicy::none();
    let error = anthropic_with(&mock, settings)
        .stream(simple_request("hi"))
        .await
        .err()
        .unwrap();
    assert!(
        error
            .to_string()
            .contains("mock: no scripted response left"),
        "{error}"
    );
}
