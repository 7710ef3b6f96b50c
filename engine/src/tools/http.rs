//! HTTP tools: a project's own functions, called as a signed `POST` of
//! `{"run_id", "call_id", "tool", "arguments", "context"}` to the URL they
//! were registered with.
//!
//! Each request carries the registered headers, `content-type:
//! application/json`, `runlens-signature: t=…,v1=…` (HMAC-SHA256 of
//! `"<t>.<body>"` under the tool's secret: see [`crate::net::sign`]),
//! `runlens-idempotency-key: <run id>:<call id>` (the same on every attempt
//! and after a crash) and `runlens-attempt: <n>`.
//!
//! The answer: a 2xx answer's JSON body is the result (an empty body is
//! `null`, a text body that is not JSON a string); anything else (a non-2xx
//! answer, a timeout, no connection, an answer over 1 MiB) is a tool error
//! the model reads, with the status and a short excerpt of the body. An
//! idempotent tool is tried up to [`ATTEMPTS`] times, with exponential
//! backoff, when the answer is a 5xx or the connection failed; any other
//! tool is tried once. A cancelled run aborts the request.
//!
//! Where requests may go is [`crate::net`]'s policy: no redirects, no
//! proxy, and unless the operator allows private networks, no loopback,
//! private or link-local address, literal (checked before each call, so a
//! tool registered while private networks were allowed stops working when
//! they no longer are) or resolved.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use serde::Serialize;
use serde_json::Value;

use super::{Tool, ToolContext, ToolError};
use crate::model::limits::MAX_HTTP_TOOL_RESPONSE_BYTES;
use crate::model::SOURCE_HTTP;
use crate::net;
use crate::store::StoredHttpTool;

/// The header naming a call: `<run id>:<call id>`, the same on every attempt.
pub const IDEMPOTENCY_HEADER: &str = "runlens-idempotency-key";
/// The header numbering a call's attempts, from 1.
pub const ATTEMPT_HEADER: &str = "runlens-attempt";
/// Attempts of an idempotent tool's call (others make one).
pub const ATTEMPTS: u32 = 3;
/// The wait before the second attempt; it doubles before each next one.
const BACKOFF: Duration = Duration::from_millis(250);
/// Characters of an answer's body quoted in a tool error.
const EXCERPT_CHARS: usize = 300;

/// One of a project's HTTP tools, ready to call (see the module docs).
pub struct HttpTool {
    name: String,
    description: String,
    schema: Value,
    url: String,
    headers: HeaderMap,
    secret: String,
    timeout: Duration,
    idempotent: bool,
    requires_approval: bool,
    allow_private: bool,
    client: reqwest::Client,
}

/// What a call POSTs.
#[derive(Serialize)]
struct CallBody<'a> {
    run_id: &'a str,
    call_id: &'a str,
    tool: &'a str,
    arguments: &'a Value,
    context: &'a Value,
}

/// Why an attempt failed, and whether another may be made.
struct Failure {
    retry: bool,
    message: String,
}

impl HttpTool {
    /// The tool of a stored registration, calling with the address policy
    /// `allow_private`. Fails when a header cannot be sent (a registration
    /// checked it already; the message names the header, never its value).
    pub fn new(stored: &StoredHttpTool, allow_private: bool) -> Result<Self, String> {
        let t = &stored.tool;
        let mut headers = HeaderMap::new();
        for (name, value) in &stored.headers {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("tool `{}`: `{name}` is not a header name", t.name))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| format!("tool `{}`: the value of header `{name}` cannot be sent", t.name))?;
            value.set_sensitive(true);
            headers.insert(header, value);
        }
        let timeout = Duration::from_millis(t.timeout_ms);
        Ok(Self {
            name: t.name.clone(),
            description: t.description.clone(),
            schema: t.schema.clone(),
            url: t.url.clone(),
            headers,
            secret: stored.secret.clone(),
            timeout,
            idempotent: t.idempotent,
            requires_approval: t.requires_approval,
            allow_private,
            client: net::client(allow_private, timeout),
        })
    }

    /// One attempt: the request, and its answer read as the result.
    async fn attempt(&self, url: &reqwest::Url, body: &[u8], key: &str, attempt: u32) -> Result<Value, Failure> {
        let signature = net::sign(&self.secret, chrono::Utc::now().timestamp(), body);
        let request = self
            .client
            .post(url.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json")
            .header(net::SIGNATURE_HEADER, signature)
            .header(IDEMPOTENCY_HEADER, key)
            .header(ATTEMPT_HEADER, attempt.to_string())
            .body(body.to_vec());
        let mut response = request.send().await.map_err(|e| self.send_failure(&e))?;
        let status = response.status();
        let content_type =
            response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
        let (bytes, whole) = read_limited(&mut response).await.map_err(|e| self.send_failure(&e))?;
        if !status.is_success() {
            let redirect = if status.is_redirection() { " (redirects are not followed)" } else { "" };
            return Err(Failure {
                retry: status.is_server_error(),
                message: format!("`{}` answered HTTP {status}{redirect}: {}", self.name, excerpt(&bytes, whole)),
            });
        }
        if !whole {
            return Err(Failure {
                retry: false,
                message: format!(
                    "`{}` answered more than {} MiB; an HTTP tool's answer is read up to that",
                    self.name,
                    MAX_HTTP_TOOL_RESPONSE_BYTES / (1024 * 1024)
                ),
            });
        }
        self.result(bytes, &content_type).map_err(|message| Failure { retry: false, message })
    }

    /// A 2xx answer's body as the call's result (see the module docs).
    fn result(&self, bytes: Vec<u8>, content_type: &str) -> Result<Value, String> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        match serde_json::from_slice(&bytes) {
            Ok(v) => Ok(v),
            Err(e) if content_type.contains("json") => {
                Err(format!("`{}` answered invalid JSON ({e}): {}", self.name, excerpt(&bytes, true)))
            }
            Err(_) => String::from_utf8(bytes).map(Value::String).map_err(|e| {
                format!(
                    "`{}` answered {} bytes of binary data ({}); an HTTP tool answers JSON or text",
                    self.name,
                    e.as_bytes().len(),
                    if content_type.is_empty() { "no content type" } else { content_type }
                )
            }),
        }
    }

    fn send_failure(&self, e: &reqwest::Error) -> Failure {
        if e.is_timeout() {
            return Failure {
                retry: false,
                message: format!("`{}` did not answer within {} ms", self.name, self.timeout.as_millis()),
            };
        }
        let host = reqwest::Url::parse(&self.url).ok().and_then(|u| u.host_str().map(str::to_owned));
        let host = host.unwrap_or_default();
        if e.is_connect() {
            return Failure { retry: true, message: format!("could not connect to `{host}`: {}", causes(e)) };
        }
        Failure { retry: false, message: format!("the request to `{host}` failed: {}", causes(e)) }
    }

    fn cancelled(&self) -> ToolError {
        ToolError::Cancelled(format!(
            "cancelled: the run was cancelled while `{}` was being called; the request was aborted{}",
            self.name,
            if self.idempotent { "" } else { ", so the receiver may or may not have acted on it" }
        ))
    }
}

/// An error and its causes, each said once (reqwest repeats the URL, hyper
/// the kind of failure): the resolver's refusal of a private address is
/// among them.
fn causes(e: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(cause) = next {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = cause.source();
    }
    if parts.is_empty() {
        parts.push(e.to_string());
    }
    parts.join(": ")
}

/// The body, up to [`MAX_HTTP_TOOL_RESPONSE_BYTES`]; `false` when there was more.
async fn read_limited(response: &mut reqwest::Response) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut data = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = MAX_HTTP_TOOL_RESPONSE_BYTES - data.len();
        if chunk.len() > room {
            data.extend_from_slice(&chunk[..room]);
            return Ok((data, false));
        }
        data.extend_from_slice(&chunk);
    }
    Ok((data, true))
}

/// The start of a body, as a tool error quotes it: at most
/// [`EXCERPT_CHARS`] characters on one line.
fn excerpt(bytes: &[u8], whole: bool) -> String {
    let text = String::from_utf8_lossy(bytes);
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.is_empty() {
        return "(empty body)".into();
    }
    let mut cut: String = line.chars().take(EXCERPT_CHARS).collect();
    if cut.len() < line.len() || !whole {
        cut.push('…');
    }
    cut
}

#[async_trait]
impl Tool for HttpTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn schema(&self) -> Value {
        self.schema.clone()
    }
    fn requires_approval(&self) -> bool {
        self.requires_approval
    }
    fn idempotent(&self) -> bool {
        self.idempotent
    }
    fn source(&self) -> String {
        SOURCE_HTTP.to_owned()
    }

    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let url = net::check_url(&self.url, self.allow_private)
            .map_err(|e| ToolError::Failed(format!("`{}` was not called: {e}", self.name)))?;
        let body = CallBody {
            run_id: &ctx.run_id,
            call_id: &ctx.call_id,
            tool: &self.name,
            arguments: &args,
            context: &ctx.context,
        };
        let body = serde_json::to_vec(&body).map_err(|e| ToolError::Failed(format!("the call is not JSON: {e}")))?;
        let key = format!("{}:{}", ctx.run_id, ctx.call_id);
        let attempts = if self.idempotent { ATTEMPTS } else { 1 };
        let mut attempt = 1;
        loop {
            let outcome = tokio::select! {
                outcome = self.attempt(&url, &body, &key, attempt) => outcome,
                _ = ctx.cancel.cancelled() => return Err(self.cancelled()),
            };
            let failure = match outcome {
                Ok(result) => return Ok(result),
                Err(failure) => failure,
            };
            if !failure.retry || attempt >= attempts {
                let tries = if attempt > 1 { format!(" (attempt {attempt} of {attempts})") } else { String::new() };
                return Err(ToolError::Failed(format!("{}{tries}", failure.message)));
            }
            tracing::info!(tool = %self.name, run_id = %ctx.run_id, call_id = %ctx.call_id, attempt,
                reason = %failure.message, "an idempotent HTTP tool's call is tried again");
            tokio::select! {
                _ = tokio::time::sleep(BACKOFF * 2u32.pow(attempt - 1)) => {}
                _ = ctx.cancel.cancelled() => return Err(self.cancelled()),
            }
            attempt += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_short_single_lines() {
        assert_eq!(excerpt(b"", true), "(empty body)");
        assert_eq!(excerpt(b"  oops\n  here ", true), "oops here");
        let long = "x".repeat(1000);
        let cut = excerpt(long.as_bytes(), true);
        assert_eq!(cut.chars().count(), EXCERPT_CHARS + 1);
        assert!(cut.ends_with('…'));
        assert!(excerpt(b"short", false).ends_with('…'), "a body cut at the limit says so");
    }
}
