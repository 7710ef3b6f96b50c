//! The config file's `[otel]` section: where runs are exported.
//!
//! ```toml
//! [otel]
//! endpoint = "http://127.0.0.1:6006"        # OTLP/HTTP; `/v1/traces` is added unless given
//! headers = { authorization = "Bearer ${PHOENIX_API_KEY}" }   # `$VAR` / `${VAR}`: from the environment
//! service_name = "runlens"                  # the resource's `service.name`
//! capture_content = false                   # prompts, answers, tool arguments and results
//! queue = 1024                              # finished runs waiting to be sent; more are dropped, counted
//! batch = 32                                # runs per request at most
//! timeout_ms = 10000                        # one request
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::tools::mcp::config::expand;
use crate::tools::mcp::Secrets;

/// The `[otel]` section as written.
#[derive(Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtelConfig {
    pub endpoint: String,
    /// Sent with every request; values may name environment variables.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub service_name: Option<String>,
    /// Message contents, tool arguments and results go into the spans
    /// (off by default: traces often leave the team that owns the data).
    #[serde(default)]
    pub capture_content: bool,
    pub queue: Option<usize>,
    pub batch: Option<usize>,
    pub timeout_ms: Option<u64>,
}

/// Header values are secrets: `Debug` names their keys only.
impl std::fmt::Debug for OtelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtelConfig")
            .field("endpoint", &self.endpoint)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("service_name", &self.service_name)
            .field("capture_content", &self.capture_content)
            .finish_non_exhaustive()
    }
}

/// Where and how spans are sent: `[otel]` checked, its variables read.
#[derive(Clone)]
pub struct OtelTarget {
    /// The full URL spans are POSTed to (`…/v1/traces`).
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub service_name: String,
    pub capture_content: bool,
    pub queue: usize,
    pub batch: usize,
    pub timeout: Duration,
    /// The header values, to keep out of messages.
    pub secrets: Secrets,
}

impl std::fmt::Debug for OtelTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtelTarget").field("url", &self.url).finish_non_exhaustive()
    }
}

impl OtelConfig {
    /// Checks the section and reads the variables it names; `Err` says
    /// what to fix (the server refuses to start with it).
    pub fn resolve(&self, env: impl Fn(&str) -> Option<String>) -> Result<OtelTarget, String> {
        let at = "[otel]";
        let endpoint = self.endpoint.trim().trim_end_matches('/');
        let parsed = url::Url::parse(endpoint).map_err(|e| format!("{at} endpoint `{endpoint}` is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(format!(
                "{at} endpoint must be an http:// or https:// URL with a host, like http://127.0.0.1:4318"
            ));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(format!("{at} endpoint must not hold credentials: put them in `headers`"));
        }
        let url = if endpoint.ends_with("/v1/traces") { endpoint.to_owned() } else { format!("{endpoint}/v1/traces") };
        let mut secrets = Secrets::default();
        let mut headers = Vec::new();
        for (name, value) in &self.headers {
            if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(format!("{at} headers: `{name}` is not a valid header name"));
            }
            let value = expand(value, &env, &mut secrets).map_err(|var| {
                format!("{at} headers.{name} names the environment variable `{var}`, which is not set")
            })?;
            if reqwest::header::HeaderValue::from_str(&value).is_err() {
                return Err(format!("{at} headers.{name} is not a valid header value"));
            }
            headers.push((name.clone(), value));
        }
        let service_name = self.service_name.clone().unwrap_or_else(|| "runlens".into());
        if service_name.trim().is_empty() || service_name.chars().count() > 256 {
            return Err(format!("{at} service_name must be 1 to 256 characters"));
        }
        let bounded = |name: &str, value: Option<u64>, default: u64, max: u64| match value {
            None => Ok(default),
            Some(v) if (1..=max).contains(&v) => Ok(v),
            Some(v) => Err(format!("{at} {name} must be from 1 to {max}, not {v}")),
        };
        Ok(OtelTarget {
            url,
            headers,
            service_name,
            capture_content: self.capture_content,
            queue: bounded("queue", self.queue.map(|v| v as u64), 1024, 1_000_000)? as usize,
            batch: bounded("batch", self.batch.map(|v| v as u64), 32, 1000)? as usize,
            timeout: Duration::from_millis(bounded("timeout_ms", self.timeout_ms, 10_000, 600_000)?),
            secrets,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(text: &str) -> OtelConfig {
        crate::config::RunlensConfig::from_toml(text).unwrap().otel.expect("an [otel] section")
    }

    #[test]
    fn an_endpoint_gets_the_traces_path_and_header_variables_are_read() {
        let env = |k: &str| (k == "KEY").then(|| "s3cret-value".to_owned());
        let target = section(
            "[otel]\nendpoint = 'http://127.0.0.1:6006/'\nheaders = { authorization = 'Bearer ${KEY}' }\ncapture_content = true",
        )
        .resolve(env)
        .unwrap();
        assert_eq!(target.url, "http://127.0.0.1:6006/v1/traces");
        assert_eq!(target.headers, [("authorization".to_owned(), "Bearer s3cret-value".to_owned())]);
        assert_eq!((target.service_name.as_str(), target.capture_content), ("runlens", true));
        assert_eq!((target.queue, target.batch), (1024, 32));
        assert!(target.secrets.shows_in("… s3cret-value …"));
        assert!(!format!("{:?} {:?}", section("[otel]\nendpoint='http://h'\nheaders={a='x'}"), target).contains('x'));

        let full = section("[otel]\nendpoint = 'https://otel.example.com/v1/traces'").resolve(|_| None).unwrap();
        assert_eq!(full.url, "https://otel.example.com/v1/traces");
    }

    #[test]
    fn mistakes_are_named() {
        let err = |text: &str| section(text).resolve(|_| None).unwrap_err();
        assert!(err("[otel]\nendpoint = 'ftp://h'").contains("http://"));
        assert!(err("[otel]\nendpoint = 'not a url'").contains("not a URL"));
        assert!(err("[otel]\nendpoint = 'http://u:p@h'").contains("credentials"));
        assert!(err("[otel]\nendpoint = 'http://h'\nheaders = { a = '$UNSET' }").contains("`UNSET`"));
        assert!(err("[otel]\nendpoint = 'http://h'\nheaders = { 'bad name' = 'x' }").contains("header name"));
        assert!(err("[otel]\nendpoint = 'http://h'\nqueue = 0").contains("queue must be from 1"));
        assert!(crate::config::RunlensConfig::from_toml("[otel]\nendpoint='http://h'\nfoo=1").is_err());
    }
}
