//! [`RetryPolicy`]: bounded retries with exponential backoff and jitter, honouring `retry-after`.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::ProviderError;

/// How transient failures are retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts, including the first (at least 1). Default 4.
    pub max_attempts: u32,
    /// Backoff before the second attempt; doubled each time. Default 500 ms.
    pub base_delay: Duration,
    /// Cap on the exponential backoff. Default 30 s.
    pub max_delay: Duration,
    /// A server-requested `retry-after` longer than this is not waited for: the error is
    /// returned instead. Default 60 s.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The wait before attempt `failed_attempt + 1`, or `None` when the error must be returned.
    fn delay_after(&self, failed_attempt: u32, error: &ProviderError) -> Option<Duration> {
        if !error.is_retryable() || failed_attempt >= self.max_attempts {
            return None;
        }
        if let Some(after) = error.retry_after() {
            return (after <= self.max_retry_after).then_some(after);
        }
        let exponent = failed_attempt.saturating_sub(1).min(20);
        let backoff = self
            .base_delay
            .saturating_mul(1u32 << exponent)
            .min(self.max_delay);
        // Equal jitter: half fixed, half random, so concurrent clients spread out.
        let half = backoff / 2;
        Some(half + half.mul_f64(jitter_fraction()))
    }
}

/// A pseudo-random fraction in [0, 1) for jitter (quality is irrelevant here).
fn jitter_fraction() -> f64 {
    let bits = uuid::Uuid::new_v4().as_u128() as u64 >> 11;
    bits as f64 / (1u64 << 53) as f64
}

/// A retry about to be waited for, as [`observe_retries`] reports it.
#[derive(Debug, Clone)]
pub struct RetryNotice {
    /// The attempt that failed (1-based).
    pub failed_attempt: u32,
    /// Attempts allowed in all.
    pub max_attempts: u32,
    /// The wait before the next attempt.
    pub delay: Duration,
    /// Why the attempt failed.
    pub error: ProviderError,
}

type RetryObserver = Arc<dyn Fn(RetryNotice) + Send + Sync>;

tokio::task_local! {
    static RETRY_OBSERVER: RetryObserver;
}

/// Runs `future` (a [`super::Provider::stream`] call) with `observer` told of every retry the
/// provider waits for inside it, so a front-end can say what it is waiting for.
pub async fn observe_retries<F: Future>(
    observer: Arc<dyn Fn(RetryNotice) + Send + Sync>,
    future: F,
) -> F::Output {
    RETRY_OBSERVER.scope(observer, future).await
}

/// Runs `attempt` (given the 1-based attempt number) until it succeeds, fails permanently or
/// the policy is exhausted. The sleeps are plain `tokio` sleeps: dropping the future cancels them.
pub(crate) async fn with_retries<T, F, Fut>(
    policy: &RetryPolicy,
    mut attempt: F,
) -> Result<T, ProviderError>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, ProviderError>>,
{
    let mut number = 1;
    loop {
        match attempt(number).await {
            Ok(value) => return Ok(value),
            Err(error) => match policy.delay_after(number, &error) {
                Some(delay) => {
                    tracing::info!(attempt = number, ?delay, %error, "provider request failed, retrying");
                    let _ = RETRY_OBSERVER.try_with(|observer| {
                        observer(RetryNotice {
                            failed_attempt: number,
                            max_attempts: policy.max_attempts,
                            delay,
                            error: error.clone(),
                        });
                    });
                    tokio::time::sleep(delay).await;
                    number += 1;
                }
                None => return Err(error),
            },
        }
    }
}

/// Parses a `retry-after` value: delay seconds (decimals tolerated) or an HTTP date
/// (IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`), relative to `now`. Dates in the past give
/// zero.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let at = parse_http_date(value)?;
    let now = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(at.saturating_sub(now)))
}

/// IMF-fixdate to seconds since the epoch.
fn parse_http_date(value: &str) -> Option<u64> {
    // "Sun, 06 Nov 1994 08:49:37 GMT"; the weekday is optional here.
    let rest = value.split_once(", ").map_or(value, |(_, rest)| rest);
    let mut fields = rest.split_ascii_whitespace();
    let day: u64 = fields.next()?.parse().ok()?;
    let month = match fields.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = fields.next()?.parse().ok()?;
    let mut clock = fields.next()?.split(':').map(|n| n.parse::<u64>().ok());
    let (hour, minute, second) = (clock.next()??, clock.next()??, clock.next()??);
    if fields.next()? != "GMT"
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let days = days_from_civil(year, month, day as i64);
    let seconds = days * 86_400 + (hour * 3600 + minute * 60 + second) as i64;
    u64::try_from(seconds).ok()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            parse_http_date("Tue, 29 Feb 2000 12:00:00 GMT"),
            Some(951_825_600)
        );
        assert_eq!(parse_http_date("yesterday"), None);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let policy = RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(400),
            ..RetryPolicy::default()
        };
        let error = ProviderError::Network {
            provider: "p".into(),
            message: "m".into(),
        };
        for (attempt, full) in [(1, 100), (2, 200), (3, 400), (4, 400), (9, 400)] {
            let delay = policy.delay_after(attempt, &error).unwrap();
            assert!(
                delay >= Duration::from_millis(full / 2) && delay <= Duration::from_millis(full)
            );
        }
        assert_eq!(policy.delay_after(10, &error), None);
    }
}
