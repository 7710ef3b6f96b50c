//! When and how long to wait before asking a provider again.
//!
//! Providers shed load with 429 and fail transiently with 5xx or dropped
//! connections; a run should ride that out rather than fail on the first
//! hiccup, but not hammer a struggling server nor wait forever. So: a bounded
//! number of retries, exponential backoff with jitter (many runs hitting the
//! same limit must not retry in lock-step), and the server's own `Retry-After`
//! when it gives one.

use std::hash::{BuildHasher, RandomState};
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};

/// How a provider's requests are retried.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (so `max_retries + 1` attempts at most).
    pub max_retries: u32,
    /// The backoff before the first retry; it doubles with each retry…
    pub initial_backoff: Duration,
    /// …up to this.
    pub max_backoff: Duration,
    /// A `Retry-After` longer than this is not waited for: the run fails now
    /// with the provider's answer rather than sitting silent for an hour.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1 for the first retry), or `None`
    /// when the server asked for a longer wait than we are willing to give.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Option<Duration> {
        match retry_after {
            Some(wait) if wait > self.max_retry_after => None,
            Some(wait) => Some(wait),
            None => Some(self.backoff(retry, jitter_unit())),
        }
    }

    /// Exponential backoff with "equal jitter": half of the capped exponential
    /// wait is fixed, the other half scaled by `unit` (in `[0, 1)`), so waits
    /// still grow while concurrent retries spread out.
    pub fn backoff(&self, retry: u32, unit: f64) -> Duration {
        let factor = 2u32.saturating_pow(retry.saturating_sub(1));
        let capped = self.initial_backoff.saturating_mul(factor).min(self.max_backoff);
        capped / 2 + (capped / 2).mul_f64(unit.clamp(0.0, 1.0))
    }
}

/// Whether an HTTP status is worth retrying: request timeout, rate limited,
/// or a server-side failure. Other 4xx (bad request, bad key, unknown model)
/// would fail the same way again.
pub fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500..=599)
}

/// The wait a provider asked for: `retry-after-ms` (OpenAI's, in
/// milliseconds) or the standard `Retry-After`, in seconds or as an HTTP date.
pub fn retry_after(retry_after_ms: Option<&str>, retry_after: Option<&str>, now: DateTime<Utc>) -> Option<Duration> {
    if let Some(ms) = retry_after_ms.and_then(|v| v.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let value = retry_after?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = DateTime::parse_from_rfc2822(value).ok()?.with_timezone(&Utc);
    Some((at - now).to_std().unwrap_or(Duration::ZERO))
}

/// A number in `[0, 1)` that differs between calls and processes, without a
/// dependency on a random-number crate: std's `RandomState` is randomly keyed.
fn jitter_unit() -> f64 {
    let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let bits = RandomState::new().hash_one(nanos);
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_retries: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            max_retry_after: Duration::from_secs(30),
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_with_bounded_jitter() {
        let p = policy();
        let ms = |retry, unit| p.backoff(retry, unit).as_millis();
        assert_eq!([ms(1, 0.0), ms(2, 0.0), ms(3, 0.0), ms(4, 0.0), ms(5, 0.0)], [50, 100, 200, 400, 500]);
        assert_eq!([ms(1, 1.0), ms(2, 1.0), ms(3, 1.0), ms(4, 1.0), ms(5, 1.0)], [100, 200, 400, 800, 1000]);
        assert_eq!(ms(40, 0.5), 750, "no overflow far past the cap");
        for _ in 0..100 {
            let d = p.delay(3, None).unwrap();
            assert!(d >= Duration::from_millis(200) && d <= Duration::from_millis(400), "{d:?}");
        }
    }

    #[test]
    fn jitter_varies() {
        let units: std::collections::BTreeSet<u64> = (0..20).map(|_| (jitter_unit() * 1e9) as u64).collect();
        assert!(units.len() > 1);
        assert!((0..1000).map(|_| jitter_unit()).all(|u| (0.0..1.0).contains(&u)));
    }

    #[test]
    fn retry_after_is_honoured_unless_too_long() {
        let p = policy();
        assert_eq!(p.delay(1, Some(Duration::from_secs(2))), Some(Duration::from_secs(2)));
        assert_eq!(p.delay(1, Some(Duration::from_secs(31))), None);
    }

    #[test]
    fn retry_after_headers_are_read() {
        let now = DateTime::parse_from_rfc3339("2025-01-01T00:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(retry_after(None, Some("3"), now), Some(Duration::from_secs(3)));
        assert_eq!(retry_after(None, Some(" 1.5 "), now), Some(Duration::from_millis(1500)));
        assert_eq!(retry_after(Some("250"), Some("3"), now), Some(Duration::from_millis(250)));
        assert_eq!(retry_after(None, Some("Wed, 01 Jan 2025 00:00:07 GMT"), now), Some(Duration::from_secs(7)));
        assert_eq!(retry_after(None, Some("Tue, 31 Dec 2024 23:00:00 GMT"), now), Some(Duration::ZERO));
        assert_eq!(retry_after(None, Some("soon"), now), None);
        assert_eq!(retry_after(None, Some("-1"), now), None);
        assert_eq!(retry_after(None, None, now), None);
    }

    #[test]
    fn only_transient_statuses_are_retried() {
        for s in [408, 429, 500, 502, 503, 504] {
            assert!(retryable_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 422] {
            assert!(!retryable_status(s), "{s}");
        }
    }
}
