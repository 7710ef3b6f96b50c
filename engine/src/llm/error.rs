//! Why a model gave no answer. A model error fails the run: its text is the
//! run's failure reason (after `model error: `) and the step's recorded
//! `error`, so each `Display` below is exactly what users read.

use std::fmt;

/// Why a model turn gave no answer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// A provider's model failed (after any retries).
    #[error(transparent)]
    Provider(ProviderError),
    /// The built-in model's script played a turn that is a failure
    /// (`{"error": "…"}`, standing in for a provider's).
    #[error("{0}")]
    Scripted(String),
    /// The built-in model's script ended before a final text answer.
    #[error("the built-in model's script ran out: all {0} scripted turns were played without a final text answer")]
    ScriptRanOut(usize),
    /// A turn of the built-in model's script is not a valid turn.
    #[error("{0}")]
    InvalidScript(String),
    /// The run names a model this server does not have (any more).
    #[error("model `{0}` is not configured on this server")]
    NotConfigured(String),
}

/// A provider model's failure, with what was tried:
/// `provider/model: what failed (notes)`.
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderError {
    /// `provider/model`.
    pub model: String,
    pub failure: ProviderFailure,
    /// The provider asked to be retried after this many seconds, longer
    /// than its `max_retry_after_secs`, so the turn failed instead.
    pub retry_after_refused: Option<u64>,
    /// Requests made (more than one when it was retried).
    pub attempts: u32,
}

impl std::error::Error for ProviderError {}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.model, self.failure)?;
        if let Some(secs) = self.retry_after_refused {
            write!(f, " (it asked to retry after {secs}s, longer than max_retry_after_secs)")?;
        }
        if self.attempts > 1 {
            write!(f, " (gave up after {} attempts)", self.attempts)?;
        }
        Ok(())
    }
}

/// What went wrong talking to a provider.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ProviderFailure {
    /// It answered with an HTTP error status; `message` is what its body
    /// said (its error message, or an excerpt).
    #[error("the provider answered {}: {message}", status_text(*status))]
    Status { status: u16, message: String },
    /// No answer: the connection failed (refused, reset, TLS…).
    #[error("could not get an answer: {0}")]
    Unreachable(String),
    /// No answer in time (connect, read or whole-request timeout).
    #[error("could not get an answer: {0}")]
    TimedOut(String),
    /// The answer's stream broke off mid-way.
    #[error("the stream broke: {0}")]
    StreamBroke(String),
    /// The answer is not what the protocol says (not a Chat Completions
    /// response or chunk, no choices, a stream that ended early).
    #[error("{0}")]
    Protocol(String),
    /// The provider reported an error inside its answer.
    #[error("the provider reported an error{}: {message}", if *mid_stream { " mid-stream" } else { "" })]
    Reported { message: String, mid_stream: bool },
}

impl ProviderFailure {
    /// The same failure with `secret` replaced by `[redacted]` wherever a
    /// server echoed it.
    pub fn redacted(self, secret: &str) -> Self {
        let scrub = |text: String| text.replace(secret, "[redacted]");
        match self {
            Self::Status { status, message } => Self::Status { status, message: scrub(message) },
            Self::Unreachable(t) => Self::Unreachable(scrub(t)),
            Self::TimedOut(t) => Self::TimedOut(scrub(t)),
            Self::StreamBroke(t) => Self::StreamBroke(scrub(t)),
            Self::Protocol(t) => Self::Protocol(scrub(t)),
            Self::Reported { message, mid_stream } => Self::Reported { message: scrub(message), mid_stream },
        }
    }
}

/// `429 Too Many Requests`, as HTTP names the status.
fn status_text(status: u16) -> String {
    match reqwest::StatusCode::from_u16(status) {
        Ok(code) => code.to_string(),
        Err(_) => status.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_as_before() {
        let e = ModelError::Provider(ProviderError {
            model: "openai/gpt".into(),
            failure: ProviderFailure::Status { status: 429, message: "Quota exceeded".into() },
            retry_after_refused: Some(3600),
            attempts: 1,
        });
        assert_eq!(
            e.to_string(),
            "openai/gpt: the provider answered 429 Too Many Requests: Quota exceeded (it asked to retry after \
             3600s, longer than max_retry_after_secs)"
        );
        let e = ProviderError {
            model: "p/m".into(),
            failure: ProviderFailure::TimedOut("operation timed out".into()),
            retry_after_refused: None,
            attempts: 3,
        };
        assert_eq!(e.to_string(), "p/m: could not get an answer: operation timed out (gave up after 3 attempts)");
        let mid = ProviderFailure::Reported { message: "model crashed".into(), mid_stream: true };
        assert_eq!(mid.to_string(), "the provider reported an error mid-stream: model crashed");
        assert_eq!(
            ModelError::ScriptRanOut(2).to_string().split(':').next(),
            Some("the built-in model's script ran out")
        );
        assert_eq!(ModelError::NotConfigured("x".into()).to_string(), "model `x` is not configured on this server");
    }
}
