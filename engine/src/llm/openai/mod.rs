//! Models served by OpenAI-compatible Chat Completions servers.
//!
//! OpenAI itself, and Ollama, vLLM, llama.cpp's server, LM Studio, LiteLLM,
//! OpenRouter… all speak `POST {base_url}/chat/completions`. One
//! [`OpenAiProvider`] per configured server holds the HTTP client (one
//! connection pool) and the key; each of its models is an [`OpenAiModel`]
//! registered as `provider/model`.
//!
//! - `wire`: the JSON we send and read; `sse`: the event-stream parser;
//!   `stream`: an HTTP answer as a [`ModelStream`]; `retry`: backoff.
//! - Failures before the answer starts (429, 5xx, connection errors, timeouts)
//!   are retried per [`RetryPolicy`]; once text has been forwarded to the
//!   run's live view a broken stream fails the turn instead, since a retry
//!   would show the same text twice.
//! - The key is sent only in the `Authorization` header (marked sensitive)
//!   and scrubbed from every error message, in case a server echoes it.

mod retry;
mod sse;
mod stream;
mod wire;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::{stream as futures_stream, StreamExt};
use serde_json::Value;

pub use retry::RetryPolicy;
pub use sse::SseParser;
pub use wire::{request_body, validate_settings};

use super::providers::{ApiKey, ProviderConfig};
use super::{Model, ModelError, ModelRequest, ModelStream, ProviderError, ProviderFailure};

/// One configured OpenAI-compatible server. See the module docs.
pub struct OpenAiProvider {
    name: String,
    endpoint: String,
    api_key: Option<ApiKey>,
    client: reqwest::Client,
    stream: bool,
    retry: RetryPolicy,
    context_window: Option<u64>,
}

impl fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint)
            .field("api_key", &self.api_key)
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

impl OpenAiProvider {
    /// Builds the provider `name` from its (key-resolved) config.
    pub fn new(name: &str, config: &ProviderConfig) -> Result<Self, String> {
        let secs = Duration::from_secs;
        let client = crate::net::http_builder()
            .connect_timeout(secs(config.connect_timeout_secs.max(1)))
            .timeout(secs(config.request_timeout_secs.max(1)))
            .read_timeout(secs(config.read_timeout_secs.max(1)))
            .user_agent(concat!("runlens/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("provider `{name}`: cannot set up the HTTP client: {e}"))?;
        Ok(Self {
            name: name.to_owned(),
            endpoint: format!("{}/chat/completions", config.base_url.trim_end_matches('/')),
            api_key: config.api_key.clone(),
            client,
            stream: config.stream,
            retry: RetryPolicy {
                max_retries: config.max_retries,
                initial_backoff: Duration::from_millis(config.backoff_initial_ms),
                max_backoff: Duration::from_millis(config.backoff_max_ms.max(config.backoff_initial_ms)),
                max_retry_after: secs(config.max_retry_after_secs),
            },
            context_window: config.context_window,
        })
    }

    /// The model `model` of this provider (what the registry holds).
    pub fn model(self: &Arc<Self>, model: &str) -> OpenAiModel {
        OpenAiModel { provider: self.clone(), model: model.to_owned() }
    }
}

/// A model of an [`OpenAiProvider`].
#[derive(Debug)]
pub struct OpenAiModel {
    provider: Arc<OpenAiProvider>,
    model: String,
}

/// Names the model in errors and keeps the key out of them.
#[derive(Clone)]
pub(crate) struct Ctx {
    label: Arc<str>,
    key: Option<ApiKey>,
}

impl Ctx {
    /// The model's error for `failure` after one attempt, the key scrubbed
    /// from whatever the server echoed.
    fn error(&self, failure: ProviderFailure) -> ProviderError {
        let failure = match self.key.as_ref().map(ApiKey::expose).filter(|k| k.len() >= 4) {
            Some(key) => failure.redacted(key),
            None => failure,
        };
        ProviderError { model: self.label.to_string(), failure, retry_after_refused: None, attempts: 1 }
    }
}

/// Why one attempt failed, and whether another may succeed.
struct Failure {
    failure: ProviderFailure,
    retryable: bool,
    retry_after: Option<Duration>,
}

impl Failure {
    fn fatal(failure: ProviderFailure) -> Self {
        Self { failure, retryable: false, retry_after: None }
    }

    fn transport(e: reqwest::Error) -> Self {
        let retryable = !e.is_builder();
        let failure = match e.is_timeout() {
            true => ProviderFailure::TimedOut(describe(e)),
            false => ProviderFailure::Unreachable(describe(e)),
        };
        Self { failure, retryable, retry_after: None }
    }
}

#[async_trait]
impl Model for OpenAiModel {
    fn validate_settings(&self, settings: &Value) -> Result<(), String> {
        wire::validate_settings(settings, self.provider.context_window)
    }

    /// The run's `context_window`, else the provider's configured one, else
    /// the engine's default (set `context_window` for small local models).
    fn context_window(&self, settings: &Value) -> u64 {
        (settings.get("context_window").and_then(Value::as_u64)).or(self.provider.context_window).unwrap_or(128_000)
    }

    fn request_body(&self, request: &ModelRequest) -> Value {
        wire::request_body(&self.model, request, self.provider.stream)
    }

    fn response_body(&self, answer: &crate::llm::Answered<'_>) -> Value {
        wire::response_body(&self.model, answer)
    }

    async fn stream(&self, req: ModelRequest) -> Result<ModelStream, ModelError> {
        let p = &self.provider;
        let ctx = Ctx { label: format!("{}/{}", p.name, self.model).into(), key: p.api_key.clone() };
        let body = wire::request_body(&self.model, &req, p.stream);
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let failure = match self.attempt(&body, &ctx).await {
                Ok(stream) => return Ok(stream),
                Err(f) => f,
            };
            let retries_left = failure.retryable && attempts <= p.retry.max_retries;
            let wait = if retries_left { p.retry.delay(attempts, failure.retry_after) } else { None };
            let Some(wait) = wait else {
                let mut error = ctx.error(failure.failure);
                error.attempts = attempts;
                if retries_left {
                    error.retry_after_refused = failure.retry_after.map(|asked| asked.as_secs());
                }
                return Err(ModelError::Provider(error));
            };
            let reason = ctx.error(failure.failure).to_string();
            tracing::warn!(run_id = %req.run_id, attempt = attempts, wait_ms = wait.as_millis() as u64, %reason,
                "model request failed; retrying");
            tokio::time::sleep(wait).await;
        }
    }
}

impl OpenAiModel {
    /// One HTTP request: a stream once the server answered 2xx, else why not.
    async fn attempt(&self, body: &Value, ctx: &Ctx) -> Result<ModelStream, Failure> {
        let p = &self.provider;
        let mut request = p.client.post(&p.endpoint).json(body);
        if let Some(key) = &p.api_key {
            request = request.bearer_auth(key.expose()); // marked sensitive by reqwest
        }
        let response = request.send().await.map_err(Failure::transport)?;
        let status = response.status();
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        if !status.is_success() {
            let (ms, after) = (header("retry-after-ms"), header("retry-after"));
            let retry_after = retry::retry_after(ms.as_deref(), after.as_deref(), chrono::Utc::now());
            let text = response.text().await.unwrap_or_default();
            return Err(Failure {
                failure: ProviderFailure::Status { status: status.as_u16(), message: wire::error_message(&text) },
                retryable: retry::retryable_status(status.as_u16()),
                retry_after,
            });
        }
        let is_json = header("content-type").is_some_and(|t| t.contains("json"));
        if p.stream && !is_json {
            return Ok(stream::sse(response, ctx.clone()));
        }
        let bytes = response.bytes().await.map_err(Failure::transport)?;
        let answer: wire::StreamChunk = serde_json::from_slice(&bytes).map_err(|e| {
            Failure::fatal(ProviderFailure::Protocol(format!("the answer is not a Chat Completions response ({e})")))
        })?;
        let mut chunks = Vec::new();
        answer
            .into_chunks(&mut chunks)
            .map_err(|message| Failure::fatal(ProviderFailure::Reported { message, mid_stream: false }))?;
        if chunks.is_empty() {
            return Err(Failure::fatal(ProviderFailure::Protocol("the answer has no choices".into())));
        }
        Ok(futures_stream::iter(chunks.into_iter().map(Ok)).boxed())
    }
}

/// A transport error in words, without the URL (which the operator knows
/// and which may carry credentials) but with its causes, e.g.
/// `error sending request: client error (Connect): tcp connect error: Connection refused`.
fn describe(e: reqwest::Error) -> String {
    let timed_out = e.is_timeout();
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    if timed_out && !text.contains("timed out") {
        text.push_str(" (timed out)");
    }
    text
}

#[cfg(test)]
mod tests;
