//! The config file's tool sections: the operator's MCP servers, the
//! outbound HTTP policy of HTTP tools and webhooks, and tool selection.
//!
//! ```toml
//! [mcp.everything]
//! command = ["npx", "-y", "@modelcontextprotocol/server-everything"]
//! env = { API_TOKEN = "$EVERYTHING_TOKEN" }     # `$VAR`: read from the environment
//! require_approval = ["get-env"]                # or true / false
//! timeout_secs = 60                             # one call at most (1 to 3600)
//!
//! [mcp.remote]
//! url = "http://127.0.0.1:3001/mcp"
//! headers = { Authorization = "Bearer ${REMOTE_MCP_TOKEN}" }
//! idempotent = ["search"]                       # run again after a crash; or true / false
//!
//! [http]
//! allow_private_networks = false                # loopback, private and link-local targets
//!
//! [tool_selection]
//! max = 20                                      # tools offered per turn
//!
//! [webhooks]                                    # status webhooks (all optional)
//! backoff_initial_ms = 5000                     # the first retry's wait; doubled each time
//! backoff_max_ms = 3600000                      # the longest wait between two attempts
//! give_up_after_secs = 86400                    # a delivery failing this long is given up
//! timeout_ms = 10000                            # one request
//! poll_ms = 2000                                # how often the outbox is looked at besides changes
//! max_pending_per_project = 10000               # further changes are recorded failed, not sent
//! retention_days = 30                           # finished deliveries are kept this long
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

/// The most tools one turn offers the model when no `[tool_selection]` says.
pub const DEFAULT_SELECTION_MAX: u32 = 20;

/// One `[mcp.NAME]` section: `command` (stdio) or `url` (streamable HTTP).
/// `tools::mcp::resolve` checks it and reads the environment variables it
/// names (header and env values are secrets: never shown or logged).
#[derive(Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The program and its arguments, started with a stdio transport.
    pub command: Option<Vec<String>>,
    /// Environment of `command` (on top of a few safe variables such as PATH
    /// and HOME: runlens's own environment is not passed on); a value
    /// `$VAR`, or `${VAR}` within it, is read from runlens's environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The streamable HTTP endpoint.
    pub url: Option<String>,
    /// Headers sent to `url`; `$VAR` / `${VAR}` as for `env`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Which tools need a person's approval; absent: those not annotated read-only.
    pub require_approval: Option<RequireApproval>,
    /// Which tools may run again when a crash interrupted a call; absent:
    /// those annotated idempotent or read-only (the others are reported to
    /// the model as interrupted instead).
    pub idempotent: Option<ToolMatch>,
    /// How long one call may take, in seconds (default 60).
    pub timeout_secs: Option<u64>,
}

/// Header and env values are secrets: `Debug` names their keys only.
impl std::fmt::Debug for McpServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServerConfig")
            .field("command", &self.command)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("url", &self.url.as_ref().map(|_| "…"))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("require_approval", &self.require_approval)
            .field("idempotent", &self.idempotent)
            .field("timeout_secs", &self.timeout_secs)
            .finish()
    }
}

/// `true | false | ["tool", …]`: every tool of the server, none, or the
/// listed ones (named as the server names them, without `NAME__`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ToolMatch {
    All(bool),
    Tools(Vec<String>),
}

impl ToolMatch {
    /// Whether the server's tool `tool` is matched.
    pub fn matches(&self, tool: &str) -> bool {
        match self {
            Self::All(all) => *all,
            Self::Tools(list) => list.iter().any(|t| t == tool),
        }
    }
}

/// `require_approval = true | false | ["tool", …]`.
pub type RequireApproval = ToolMatch;

/// `[http]`: where HTTP tools and webhooks may send requests.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// Allow loopback, private and link-local addresses (off by default).
    #[serde(default)]
    pub allow_private_networks: bool,
}

/// `[tool_selection]`: how many tools one turn offers at most.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectionConfig {
    #[serde(default = "default_max")]
    pub max: u32,
}

impl Default for SelectionConfig {
    fn default() -> Self {
        Self { max: DEFAULT_SELECTION_MAX }
    }
}

fn default_max() -> u32 {
    DEFAULT_SELECTION_MAX
}

/// `[webhooks]`: how status webhooks are sent and retried. Every value is
/// checked when the file is read (a start-up error, not a surprise later).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "RawWebhooks")]
pub struct WebhooksConfig {
    pub backoff_initial_ms: u64,
    pub backoff_max_ms: u64,
    pub give_up_after_secs: u64,
    pub timeout_ms: u64,
    pub poll_ms: u64,
    pub max_pending_per_project: u64,
    pub retention_days: u64,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        Self {
            backoff_initial_ms: 5_000,
            backoff_max_ms: 3_600_000,
            give_up_after_secs: 24 * 3600,
            timeout_ms: 10_000,
            poll_ms: 2_000,
            max_pending_per_project: 10_000,
            retention_days: 30,
        }
    }
}

/// `[webhooks]` as written; [`WebhooksConfig`] once checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebhooks {
    backoff_initial_ms: Option<u64>,
    backoff_max_ms: Option<u64>,
    give_up_after_secs: Option<u64>,
    timeout_ms: Option<u64>,
    poll_ms: Option<u64>,
    max_pending_per_project: Option<u64>,
    retention_days: Option<u64>,
}

impl TryFrom<RawWebhooks> for WebhooksConfig {
    type Error = String;

    fn try_from(raw: RawWebhooks) -> Result<Self, String> {
        let d = WebhooksConfig::default();
        let c = WebhooksConfig {
            backoff_initial_ms: raw.backoff_initial_ms.unwrap_or(d.backoff_initial_ms),
            backoff_max_ms: raw.backoff_max_ms.unwrap_or(d.backoff_max_ms),
            give_up_after_secs: raw.give_up_after_secs.unwrap_or(d.give_up_after_secs),
            timeout_ms: raw.timeout_ms.unwrap_or(d.timeout_ms),
            poll_ms: raw.poll_ms.unwrap_or(d.poll_ms),
            max_pending_per_project: raw.max_pending_per_project.unwrap_or(d.max_pending_per_project),
            retention_days: raw.retention_days.unwrap_or(d.retention_days),
        };
        let within = |name: &str, v: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!("[webhooks] {name} must be from {lo} to {hi}, not {v}"))
            }
        };
        within("backoff_initial_ms", c.backoff_initial_ms, 10, 24 * 3_600_000)?;
        within("backoff_max_ms", c.backoff_max_ms, c.backoff_initial_ms, 24 * 3_600_000)?;
        within("give_up_after_secs", c.give_up_after_secs, 1, 30 * 24 * 3600)?;
        within("timeout_ms", c.timeout_ms, 100, 120_000)?;
        within("poll_ms", c.poll_ms, 10, 600_000)?;
        within("max_pending_per_project", c.max_pending_per_project, 1, 10_000_000)?;
        within("retention_days", c.retention_days, 1, 3650)?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_settings_are_checked_when_read() {
        let c: WebhooksConfig = toml::from_str("backoff_initial_ms = 50\nbackoff_max_ms = 200").unwrap();
        assert_eq!((c.backoff_initial_ms, c.backoff_max_ms, c.give_up_after_secs), (50, 200, 86_400));
        let bad = toml::from_str::<WebhooksConfig>("backoff_initial_ms = 500\nbackoff_max_ms = 200").unwrap_err();
        assert!(bad.to_string().contains("backoff_max_ms must be from 500"), "{bad}");
        assert!(toml::from_str::<WebhooksConfig>("backof_initial_ms = 5").is_err(), "a typo is an error");
        assert_eq!(toml::from_str::<WebhooksConfig>("").unwrap(), WebhooksConfig::default());
    }
}
