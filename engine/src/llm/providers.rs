//! Model providers configured by the operator: the `[providers]` tables of
//! the config file (see `crate::config`) and/or env vars.
//!
//! ```toml
//! [providers.openai]
//! base_url = "https://api.openai.com/v1"
//! api_key_env = "OPENAI_API_KEY"     # or api_key = "…" (discouraged); neither: no auth
//! models = ["gpt-4.1-mini"]
//! context_window = 128000            # optional; bounds model_settings.max_tokens
//! ```
//!
//! Every model of every provider is registered as `provider/model` next to
//! `builtin`. Without a `[providers.openai]`, setting `OPENAI_API_KEY` (or
//! `RUNLENS_OPENAI_MODELS`) registers `openai` from the environment:
//! `OPENAI_BASE_URL` (default the OpenAI API) and the comma-separated
//! `RUNLENS_OPENAI_MODELS` (default `gpt-4.1-mini`).
//!
//! A provider whose `api_key_env` names an unset variable is a start-up
//! error, not a warning: the operator asked for that provider, and finding
//! out at the first run (as a 401) is later and less clear.
//!
//! Keys are only held in [`ApiKey`], whose `Debug` never shows them.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
pub const OPENAI_DEFAULT_MODEL: &str = "gpt-4.1-mini";

/// An API key. It is sent as `Authorization: Bearer …` and nowhere else:
/// `Debug` redacts it and it is not `Serialize`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key itself: only for the request header and for scrubbing errors.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// One OpenAI-compatible server.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// Up to and including the version, e.g. `https://api.openai.com/v1`;
    /// requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// The key inline. Prefer `api_key_env`: config files get copied around.
    #[serde(default)]
    pub api_key: Option<ApiKey>,
    /// The environment variable holding the key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    pub models: Vec<String>,
    #[serde(default)]
    pub context_window: Option<u64>,
    /// `false` for servers that cannot stream (or choke on `stream_options`).
    #[serde(default = "yes")]
    pub stream: bool,
    #[serde(default = "connect_timeout")]
    pub connect_timeout_secs: u64,
    /// The whole request, streamed answer included.
    #[serde(default = "request_timeout")]
    pub request_timeout_secs: u64,
    /// Silence allowed between two pieces of the answer: long enough for a
    /// slow first token (a local server loading its model), or for a whole
    /// answer with `stream = false`.
    #[serde(default = "read_timeout")]
    pub read_timeout_secs: u64,
    #[serde(default = "max_retries")]
    pub max_retries: u32,
    #[serde(default = "backoff_initial")]
    pub backoff_initial_ms: u64,
    #[serde(default = "backoff_max")]
    pub backoff_max_ms: u64,
    /// A longer `Retry-After` fails the run instead of being waited for.
    #[serde(default = "max_retry_after")]
    pub max_retry_after_secs: u64,
}

fn yes() -> bool {
    true
}
fn connect_timeout() -> u64 {
    10
}
fn request_timeout() -> u64 {
    600
}
fn read_timeout() -> u64 {
    300
}
fn max_retries() -> u32 {
    3
}
fn backoff_initial() -> u64 {
    500
}
fn backoff_max() -> u64 {
    20_000
}
fn max_retry_after() -> u64 {
    60
}

impl ProviderConfig {
    /// A provider at `base_url` serving `models`, with the default timeouts and retries.
    pub fn new(base_url: impl Into<String>, models: &[&str]) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            api_key_env: None,
            models: models.iter().map(|m| m.to_string()).collect(),
            context_window: None,
            stream: true,
            connect_timeout_secs: connect_timeout(),
            request_timeout_secs: request_timeout(),
            read_timeout_secs: read_timeout(),
            max_retries: max_retries(),
            backoff_initial_ms: backoff_initial(),
            backoff_max_ms: backoff_max(),
            max_retry_after_secs: max_retry_after(),
        }
    }
}

/// Adds `openai` from the environment to `providers` when they do not
/// configure it (see the module docs).
pub fn with_env_fallback(providers: &mut BTreeMap<String, ProviderConfig>, env: impl Fn(&str) -> Option<String>) {
    let env = |k: &str| env(k).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    let key = env("OPENAI_API_KEY");
    let models = env("RUNLENS_OPENAI_MODELS");
    if providers.contains_key("openai") || (key.is_none() && models.is_none()) {
        return;
    }
    let base_url = env("OPENAI_BASE_URL").unwrap_or_else(|| OPENAI_DEFAULT_BASE_URL.into());
    let models = models.unwrap_or_else(|| OPENAI_DEFAULT_MODEL.into());
    let models: Vec<&str> = models.split(',').map(str::trim).filter(|m| !m.is_empty()).collect();
    let mut provider = ProviderConfig::new(base_url, &models);
    provider.api_key = key.map(ApiKey);
    providers.insert("openai".into(), provider);
}

/// Checks every provider and reads each `api_key_env`, so all mistakes
/// show at start-up. Returns the providers with their keys resolved.
pub fn resolve(
    providers: &BTreeMap<String, ProviderConfig>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Vec<(String, ProviderConfig)>, String> {
    let mut out = Vec::new();
    for (name, p) in providers {
        let bad = |why: String| format!("provider `{name}`: {why}");
        if name.is_empty() || name == "builtin" || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(bad("the name must be letters, digits, `-`, `_` or `.`, and not `builtin`".into()));
        }
        if !(p.base_url.starts_with("http://") || p.base_url.starts_with("https://")) {
            return Err(bad(format!("base_url `{}` must start with http:// or https://", p.base_url)));
        }
        check_models(&p.models).map_err(bad)?;
        let mut p = p.clone();
        p.base_url = p.base_url.trim_end_matches('/').to_owned();
        match (&p.api_key, &p.api_key_env) {
            (Some(_), Some(_)) => return Err(bad("set `api_key` or `api_key_env`, not both".into())),
            (None, Some(var)) => match env(var).filter(|k| !k.trim().is_empty()) {
                Some(key) => p.api_key = Some(ApiKey(key.trim().to_owned())),
                None => return Err(bad(format!("api_key_env names `{var}`, which is not set"))),
            },
            _ => {}
        }
        out.push((name.clone(), p));
    }
    Ok(out)
}

fn check_models(models: &[String]) -> Result<(), String> {
    if models.is_empty() {
        return Err("`models` lists no model".into());
    }
    for (i, m) in models.iter().enumerate() {
        if m.trim().is_empty() || m.chars().any(char::is_whitespace) {
            return Err(format!("model name `{m}` is empty or has spaces"));
        }
        if models[..i].contains(m) {
            return Err(format!("model `{m}` is listed twice"));
        }
    }
    Ok(())
}
