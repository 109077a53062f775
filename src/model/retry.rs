//! Which failed requests are worth sending again, and after how long; provider-neutral.
//!
//! Retrying the wrong error costs money or hides a problem the user must fix: a rejected key or an exhausted
//! quota never fixes itself, a bad request fails the same way every time, and a prompt that is too long needs
//! compaction, not patience. What does pass is waited out politely: a rate limit for as long as the server
//! asks (its `Retry-After`, or the "try again in 1.5s" text OpenAI and Gemini put in the message), an
//! overloaded server with exponential backoff and jitter so many clients do not return in lockstep.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::types::ModelError;

/// How often and how patiently a request is retried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The backoff before the first retry; it doubles with every attempt.
    pub base_delay: Duration,
    /// The longest backoff.
    pub max_delay: Duration,
    /// The longest wait a server's `Retry-After` (or its "try again in" text) can impose.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// How long to wait before sending the request again after `err` ended attempt number `attempt`
    /// (counting from 1), or `None` to give up.
    pub fn delay_for(&self, err: &ModelError, attempt: u32) -> Option<Duration> {
        if attempt >= self.max_attempts {
            return None;
        }
        match classify(err) {
            ErrorClass::RateLimited | ErrorClass::Overloaded => Some(
                retry_hint(err)
                    .map(|wait| wait.min(self.max_retry_after))
                    .unwrap_or_else(|| self.backoff(attempt)),
            ),
            ErrorClass::Transient => Some(self.backoff(attempt)),
            _ => None,
        }
    }

    /// Exponential backoff with "equal jitter": a random point in the upper half of the doubled delay, so
    /// delays still grow while clients that failed together spread out.
    fn backoff(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(31);
        let full = self
            .base_delay
            .saturating_mul(1 << doublings)
            .min(self.max_delay);
        full / 2 + full.mul_f64(jitter() / 2.0)
    }
}

/// What kind of failure an error is, for deciding what to do about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// The key was rejected (401/403): stop and tell the user which variable to fix.
    Auth,
    /// The request itself is wrong (400 and most 4xx): sending it again fails again.
    BadRequest,
    /// The conversation does not fit the model's context: compact it, then try once more.
    ContextOverflow,
    /// Out of credit (`insufficient_quota`, billing): only the user can fix it.
    Quota,
    /// Too many requests (429): wait as long as the server asks.
    RateLimited,
    /// The server is failing or overloaded (5xx, 529, `overloaded_error`): back off.
    Overloaded,
    /// The connection failed, stalled or dropped mid-stream: try again from the start.
    Transient,
    /// Anything else: a client bug or a reply we cannot understand.
    Fatal,
}

impl ErrorClass {
    /// Whether sending the same request again may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorClass::RateLimited | ErrorClass::Overloaded | ErrorClass::Transient
        )
    }
}

/// Classifies an error; the order of the checks matters (a 429 can be a quota error, a 400 a context overflow).
pub fn classify(err: &ModelError) -> ErrorClass {
    match err {
        ModelError::Client(_) | ModelError::Stream(_) => ErrorClass::Fatal,
        ModelError::Connect { refused: true, .. } => ErrorClass::Fatal,
        ModelError::Connect { .. } | ModelError::Timeout { .. } | ModelError::Truncated(_) => {
            ErrorClass::Transient
        }
        ModelError::Auth { .. } => ErrorClass::Auth,
        _ if is_quota(err) => ErrorClass::Quota,
        _ if is_context_overflow(err) => ErrorClass::ContextOverflow,
        ModelError::Http { status, .. } => by_status(*status),
        ModelError::Provider { code, .. } => code.as_deref().map_or(ErrorClass::Fatal, by_code),
    }
}

fn by_status(status: u16) -> ErrorClass {
    match status {
        401 | 403 => ErrorClass::Auth,
        429 => ErrorClass::RateLimited,
        // Request timeout and conflict (e.g. a lock held upstream) are what the official SDKs retry too.
        408 | 409 => ErrorClass::Transient,
        400..=499 => ErrorClass::BadRequest,
        500..=599 => ErrorClass::Overloaded,
        _ => ErrorClass::Fatal,
    }
}

/// The code of an error reported inside a 200 response: an HTTP status (OpenRouter), an OpenAI error code or
/// an Anthropic error type.
fn by_code(code: &str) -> ErrorClass {
    if let Ok(status) = code.parse::<u16>() {
        return by_status(status);
    }
    match code {
        "overloaded_error" | "api_error" | "server_error" | "internal_server_error" => {
            ErrorClass::Overloaded
        }
        "rate_limit_error" | "rate_limit_exceeded" => ErrorClass::RateLimited,
        "authentication_error" | "permission_error" | "invalid_api_key" => ErrorClass::Auth,
        "invalid_request_error" | "not_found_error" | "request_too_large" => ErrorClass::BadRequest,
        _ => ErrorClass::Fatal,
    }
}

/// The provider's code and message, for the checks that look at both.
fn code_and_message(err: &ModelError) -> Option<(Option<&str>, &str)> {
    match err {
        ModelError::Http { code, message, .. } | ModelError::Provider { code, message } => {
            Some((code.as_deref(), message))
        }
        _ => None,
    }
}

/// Out of credit. A message that merely mentions quota or billing but names a wait is a per-minute limit
/// (Gemini's 429 says "exceeded your current quota ... Please retry in 37s"), which does pass.
fn is_quota(err: &ModelError) -> bool {
    let Some((code, message)) = code_and_message(err) else {
        return false;
    };
    let code = code.unwrap_or("").to_ascii_lowercase();
    if code.contains("insufficient_quota") || code.contains("billing") {
        return true;
    }
    let message = message.to_ascii_lowercase();
    let mentions = [
        "insufficient_quota",
        "billing",
        "credit balance",
        "exceeded your current quota",
    ]
    .iter()
    .any(|needle| message.contains(needle));
    mentions && hint_in_text(&message).is_none()
}

/// Whether the error says the prompt does not fit the model's context window.
pub(crate) fn is_context_overflow(err: &ModelError) -> bool {
    let Some((code, message)) = code_and_message(err) else {
        return false;
    };
    let message = message.to_ascii_lowercase();
    code == Some("context_length_exceeded")
        || [
            "context_length_exceeded",
            "prompt is too long",
            "maximum context length",
        ]
        .iter()
        .any(|needle| message.contains(needle))
}

/// How long the server asked us to wait: its `Retry-After` header, else a wait named in its message.
fn retry_hint(err: &ModelError) -> Option<Duration> {
    match err {
        ModelError::Http {
            retry_after: Some(wait),
            ..
        } => Some(*wait),
        _ => code_and_message(err).and_then(|(_, message)| hint_in_text(message)),
    }
}

/// A wait named in an error message: "Please try again in 1.5s", "try again in 6m0s", "Please retry after
/// 20 seconds", "Please retry in 37.2s".
fn hint_in_text(message: &str) -> Option<Duration> {
    let message = message.to_ascii_lowercase();
    ["try again in ", "retry after ", "retry in "]
        .iter()
        .find_map(|phrase| {
            let start = message.find(phrase)? + phrase.len();
            parse_duration_text(&message[start..])
        })
}

/// Parses a run of `<number><unit>` pairs (`1m30s`, `1.5 seconds`, `20ms`); a bare number is seconds.
fn parse_duration_text(text: &str) -> Option<Duration> {
    let mut rest = text.trim_start();
    let mut total = 0.0;
    let mut parsed = false;
    loop {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let Ok(number) = rest[..digits].parse::<f64>() else {
            break;
        };
        rest = rest[digits..].trim_start();
        let letters = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let Some(scale) = unit_seconds(&rest[..letters]) else {
            break;
        };
        total += number * scale;
        parsed = true;
        rest = &rest[letters..];
    }
    if !parsed {
        return None;
    }
    Duration::try_from_secs_f64(total).ok()
}

fn unit_seconds(unit: &str) -> Option<f64> {
    match unit {
        "ms" | "millisecond" | "milliseconds" => Some(0.001),
        "" | "s" | "sec" | "secs" | "second" | "seconds" => Some(1.0),
        "m" | "min" | "mins" | "minute" | "minutes" => Some(60.0),
        "h" | "hr" | "hour" | "hours" => Some(3600.0),
        _ => None,
    }
}

/// Parses a `Retry-After` value: delay seconds, or an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`) taken
/// relative to `now`. A date in the past means no wait.
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let date = parse_http_date(value)?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Parses an IMF-fixdate, the only HTTP date form servers may send (RFC 9110, section 5.6.7).
fn parse_http_date(value: &str) -> Option<SystemTime> {
    let parts: Vec<&str> = value.split_ascii_whitespace().collect();
    let [_weekday, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|name| name.eq_ignore_ascii_case(month))? as i64
        + 1;
    let day: i64 = day.parse().ok()?;
    let year: i64 = year.parse().ok()?;
    let hms: Vec<i64> = time
        .split(':')
        .map(|n| n.parse().ok())
        .collect::<Option<_>>()?;
    let [hours, minutes, seconds] = hms.as_slice() else {
        return None;
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hours * 3600 + minutes * 60 + seconds;
    Some(UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).ok()?))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// A random fraction in `[0, 1)`: 53 random bits, all an `f64` holds.
fn jitter() -> f64 {
    crate::sys::random::jitter_below(1 << 53) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, code: Option<&str>, message: &str, wait: Option<u64>) -> ModelError {
        ModelError::Http {
            status,
            code: code.map(str::to_string),
            message: message.to_string(),
            retry_after: wait.map(Duration::from_secs),
        }
    }

    #[test]
    fn retry_after_seconds_and_http_date() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777 - 30);
        assert_eq!(parse_retry_after(" 5 ", now), Some(Duration::from_secs(5)));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after(
                "Sun, 06 Nov 1994 08:49:37 GMT",
                now + Duration::from_secs(60)
            ),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
    }

    #[test]
    fn http_date_epoch_values() {
        let at = |text| {
            parse_http_date(text)
                .and_then(|time| time.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_secs())
        };
        assert_eq!(at("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(at("Tue, 29 Feb 2000 12:00:00 GMT"), Some(951_825_600));
        assert_eq!(at("Wed, 21 Oct 2015 07:28:00 GMT"), Some(1_445_412_480));
        assert_eq!(at("Wed, 21 Oct 2015 07:28:00 PST"), None);
    }

    #[test]
    fn wait_named_in_the_message() {
        let cases = [
            (
                "Rate limit reached. Please try again in 1.5s. Visit ...",
                1500,
            ),
            ("Please try again in 20ms.", 20),
            ("Please try again in 6m0s.", 360_000),
            ("Please retry after 20 seconds", 20_000),
            ("Quota exceeded. Please retry in 37.2s.", 37_200),
        ];
        for (message, millis) in cases {
            assert_eq!(
                hint_in_text(message),
                Some(Duration::from_millis(millis)),
                "{message}"
            );
        }
        assert_eq!(hint_in_text("try again in a moment"), None);
    }

    #[test]
    fn rate_limit_waits_as_asked_capped() {
        let policy = RetryPolicy::default();
        let header = http(429, None, "slow down", Some(7));
        assert_eq!(policy.delay_for(&header, 1), Some(Duration::from_secs(7)));
        let text = http(
            429,
            Some("rate_limit_exceeded"),
            "Please try again in 1.5s.",
            None,
        );
        assert_eq!(
            policy.delay_for(&text, 1),
            Some(Duration::from_millis(1500))
        );
        let long = http(429, None, "", Some(3600));
        assert_eq!(policy.delay_for(&long, 1), Some(policy.max_retry_after));
    }

    #[test]
    fn quota_and_billing_never_retried() {
        let policy = RetryPolicy::default();
        let quota = http(
            429,
            Some("insufficient_quota"),
            "You exceeded your current quota, please check your plan and billing details.",
            None,
        );
        assert_eq!(classify(&quota), ErrorClass::Quota);
        assert_eq!(policy.delay_for(&quota, 1), None);
        assert!(!quota.is_retryable());
        let credit = http(
            400,
            Some("invalid_request_error"),
            "Your credit balance is too low to access the Anthropic API.",
            None,
        );
        assert_eq!(classify(&credit), ErrorClass::Quota);
        // Gemini's per-minute limit mentions quota but names a wait: it passes.
        let per_minute = http(
            429,
            None,
            "You exceeded your current quota. Please retry in 2s.",
            None,
        );
        assert_eq!(classify(&per_minute), ErrorClass::RateLimited);
    }

    #[test]
    fn auth_and_bad_request_stop_at_once() {
        let policy = RetryPolicy::default();
        let auth = ModelError::Auth {
            status: 401,
            message: "bad key".into(),
        };
        assert_eq!(policy.delay_for(&auth, 1), None);
        assert_eq!(policy.delay_for(&http(400, None, "bad", None), 1), None);
        assert_eq!(
            policy.delay_for(&http(404, None, "no model", None), 1),
            None
        );
    }

    #[test]
    fn overloaded_backs_off_growing_and_capped() {
        let policy = RetryPolicy {
            max_attempts: 12,
            ..RetryPolicy::default()
        };
        let overloaded = http(529, Some("overloaded_error"), "Overloaded", None);
        let delays: Vec<Duration> = (1..12)
            .map(|attempt| policy.delay_for(&overloaded, attempt).expect("retried"))
            .collect();
        for (attempt, delay) in (1u32..).zip(&delays) {
            let full = (policy.base_delay * 2u32.pow(attempt - 1)).min(policy.max_delay);
            assert!(
                *delay >= full / 2 && *delay <= full,
                "attempt {attempt}: {delay:?}"
            );
        }
        // Before the cap the ranges [d/2, d] do not overlap, so delays never shrink.
        assert!(
            delays[..6].windows(2).all(|pair| pair[0] <= pair[1]),
            "{delays:?}"
        );
        assert_eq!(policy.delay_for(&overloaded, 12), None);
    }

    #[test]
    fn attempts_are_bounded() {
        let policy = RetryPolicy::default();
        let err = http(500, None, "boom", None);
        assert!(policy.delay_for(&err, 3).is_some());
        assert_eq!(policy.delay_for(&err, 4), None);
    }

    #[test]
    fn network_failures_retried() {
        let policy = RetryPolicy::default();
        let errors = [
            ModelError::Connect {
                url: "u".into(),
                message: "reset".into(),
                refused: false,
            },
            ModelError::Timeout {
                after: Duration::from_secs(1),
            },
            ModelError::Truncated("dropped".into()),
        ];
        for err in &errors {
            assert!(policy.delay_for(err, 1).is_some(), "{err:?}");
        }
        assert_eq!(
            policy.delay_for(&ModelError::Stream("bad json".into()), 1),
            None
        );
    }

    #[test]
    fn provider_error_codes() {
        let provider = |code: &str, message: &str| ModelError::Provider {
            code: Some(code.to_string()),
            message: message.to_string(),
        };
        assert_eq!(
            classify(&provider("overloaded_error", "Overloaded")),
            ErrorClass::Overloaded
        );
        assert_eq!(
            classify(&provider("502", "upstream")),
            ErrorClass::Overloaded
        );
        assert_eq!(
            classify(&provider("invalid_request_error", "nope")),
            ErrorClass::BadRequest
        );
    }

    #[test]
    fn context_overflow_recognised() {
        let cases = [
            http(
                400,
                Some("context_length_exceeded"),
                "This model's maximum context length is 128000 tokens.",
                None,
            ),
            http(
                400,
                Some("invalid_request_error"),
                "prompt is too long: 210000 tokens > 200000 maximum",
                None,
            ),
            ModelError::Provider {
                code: None,
                message: "This model's maximum context length is 8192 tokens".into(),
            },
        ];
        for err in &cases {
            assert!(err.is_context_overflow(), "{err:?}");
            assert_eq!(RetryPolicy::default().delay_for(err, 1), None);
        }
        assert!(!http(400, None, "bad", None).is_context_overflow());
    }
}
