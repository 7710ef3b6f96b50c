//! The operator's MCP servers as runlens tools, through the official Rust
//! SDK (rmcp) as the client.
//!
//! - [`config`]: the `[mcp.NAME]` sections checked and their `$VAR`s read
//!   at start-up ([`resolve`]); a mistake stops runlens (exit 2).
//! - `connect`: one connection (a child process on stdio, or a streamable
//!   HTTP session) and the handshake.
//! - `supervisor`: a task per server that keeps it connected, lists its
//!   tools into the [`ToolRegistry`] (again on `tools/list_changed`),
//!   restarts it with backoff when it dies and keeps its status current.
//! - `tool`: each listed tool as a [`crate::tools::Tool`] named
//!   `NAME__tool`, with approval and idempotence from the config and the
//!   tool's annotations, and calls with a time limit and the run's cancel.
//! - `result`: the stored shape of a result (text, images, resources,
//!   structured content), its bounds, and the lighter view the model reads
//!   ([`model_view`]).
//!
//! Start everything with [`McpHub::start`] (the engine's
//! `Engine::start_mcp`); the hub stops its servers when shut down or dropped.

pub mod config;
mod connect;
mod result;
mod supervisor;
mod tool;

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};

pub use config::{resolve, McpServer, Secrets};
pub use result::{model_view, MAX_RESULT_BYTES};

use crate::model::McpServerStatus;
use crate::tools::ToolRegistry;
use supervisor::Link;

/// The running supervisors of the configured servers.
pub struct McpHub {
    links: Vec<Arc<Link>>,
    tasks: Vec<JoinHandle<()>>,
    stop: CancellationToken,
    _stop_on_drop: DropGuard,
}

impl McpHub {
    /// Starts one supervisor per server; their tools join `registry` as
    /// they are listed. Must be called within a tokio runtime.
    pub fn start(servers: Vec<McpServer>, registry: ToolRegistry) -> Self {
        let stop = CancellationToken::new();
        let mut links = Vec::new();
        let mut tasks = Vec::new();
        for server in servers {
            let link = Link::new(server);
            registry.set_mcp_status(link.status());
            tasks.push(tokio::spawn(supervisor::supervise(link.clone(), registry.clone(), stop.child_token())));
            links.push(link);
        }
        Self { links, tasks, _stop_on_drop: stop.clone().drop_guard(), stop }
    }

    /// Waits until every server's first attempt to connect has ended (its
    /// tools listed, or a failure recorded), at most `limit`. Whether they
    /// all got that far.
    pub async fn first_attempts(&self, limit: Duration) -> bool {
        let all = futures::future::join_all(self.links.iter().map(|l| l.first_attempt()));
        tokio::time::timeout(limit, all).await.is_ok()
    }

    /// Every server's status, by name order of the config.
    pub fn status(&self) -> Vec<McpServerStatus> {
        self.links.iter().map(|l| l.status()).collect()
    }

    /// Stops every supervisor: connections are closed and stdio servers
    /// ended, all within two seconds (a server still running then is
    /// killed as its handle drops).
    pub async fn shutdown(self) {
        self.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(2), futures::future::join_all(self.tasks)).await;
    }
}

/// An error fit to show: its chain of causes, once each and without the
/// Rust type names some transports print, secrets blotted out, cut short.
pub(crate) fn describe(error: &(dyn std::error::Error + 'static), secrets: &Secrets) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        let text = without_type_names(&e.to_string());
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    short(&secrets.redact(&parts.join(": ")))
}

/// `Transport [rmcp::transport::…<…>] error` → `Transport error`.
fn without_type_names(text: &str) -> String {
    let mut out = text.to_owned();
    while let Some(start) = out.find(" [rmcp::") {
        let Some(len) = out[start..].find(']') else { break };
        out.replace_range(start..start + len + 1, "");
    }
    out
}

/// At most 500 characters of `text`, for errors and statuses.
pub(crate) fn short(text: &str) -> String {
    const MAX: usize = 500;
    if text.chars().count() <= MAX {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(MAX).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn errors_read_without_rust_type_names() {
        let text =
            "Transport send error: Transport [rmcp::transport::worker::WorkerTransport<rmcp::X<reqwest::Client>>] \
                    error: Client error";
        assert_eq!(super::without_type_names(text), "Transport send error: Transport error: Client error");
    }
}
