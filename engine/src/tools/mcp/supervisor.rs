//! One task per server keeps it connected: it connects, lists the tools
//! (every page) into the registry, lists again when the server announces a
//! change, pings it now and then, and when the connection dies starts over
//! with exponential backoff (1 s doubling to 30 s; back to 1 s after a
//! minute of health). Its status is written to the registry at each change.
//!
//! While a server is down its tools keep their last listing, and a call
//! fails at once with an error saying so (see [`Link::peer`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use futures::FutureExt;
use rmcp::model::{ClientRequest, PingRequest};
use rmcp::{Peer, RoleClient};
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

use super::config::{McpServer, Secrets};
use super::connect::{self, Handler, LastWords};
use super::tool::McpTool;
use crate::model::{mcp_source, McpServerStatus, McpState};
use crate::tools::{Tool, ToolRegistry};

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Connected this long, a server's next failure starts the backoff afresh.
const HEALTHY: Duration = Duration::from_secs(60);
/// The most a handshake, a listing or a ping may take.
const REQUEST_LIMIT: Duration = Duration::from_secs(30);
const PING_LIMIT: Duration = Duration::from_secs(10);
const PING_EVERY: Duration = Duration::from_secs(20);
/// The most tools registered from one server.
const MAX_TOOLS: usize = 1000;

/// What a server's tools share with its supervisor: the live connection
/// (or why there is none) and the status the board shows.
pub(super) struct Link {
    server: McpServer,
    state: Mutex<LinkState>,
    /// A call failed at the transport: the supervisor checks the connection.
    suspect: Notify,
    /// Set once the first attempt to connect has ended (either way).
    attempted: watch::Sender<bool>,
}

struct LinkState {
    peer: Option<Peer<RoleClient>>,
    status: McpServerStatus,
}

impl Link {
    pub(super) fn new(server: McpServer) -> Arc<Self> {
        let status = McpServerStatus {
            name: server.name.clone(),
            transport: server.transport_name().to_owned(),
            state: McpState::Connecting,
            tools: 0,
            restarts: 0,
            last_error: None,
            connected_at: None,
            retry_at: None,
        };
        Arc::new(Self {
            server,
            state: Mutex::new(LinkState { peer: None, status }),
            suspect: Notify::new(),
            attempted: watch::channel(false).0,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The connection to call over, or the error the model is shown.
    pub(super) fn peer(&self) -> Result<Peer<RoleClient>, String> {
        let state = self.lock();
        if let Some(peer) = &state.peer {
            return Ok(peer.clone());
        }
        let status = &state.status;
        let what = match (status.state, status.retry_at) {
            (McpState::Down, Some(at)) => {
                let secs = (at - Utc::now()).num_seconds().max(0);
                let verb = if self.server.transport_name() == "stdio" { "restarting" } else { "reconnecting" };
                format!("{verb}: next attempt in {secs} s")
            }
            _ => "connecting".to_owned(),
        };
        let last = status.last_error.as_deref().map(|e| format!("; last error: {e}")).unwrap_or_default();
        Err(format!("MCP server `{}` is not connected ({what}{last})", self.server.name))
    }

    pub(super) fn secrets(&self) -> Secrets {
        self.server.secrets.clone()
    }

    pub(super) fn timeout(&self) -> Duration {
        self.server.timeout
    }

    /// `restarted` (stdio) or `reconnected` (HTTP).
    pub(super) fn restart_verb(&self) -> &'static str {
        match self.server.transport_name() {
            "stdio" => "restarted",
            _ => "reconnected",
        }
    }

    pub(super) fn suspect(&self) {
        self.suspect.notify_one();
    }

    pub(super) fn status(&self) -> McpServerStatus {
        self.lock().status.clone()
    }

    /// Waits until the first attempt to connect has ended.
    pub(super) async fn first_attempt(&self) {
        let mut rx = self.attempted.subscribe();
        let _ = rx.wait_for(|done| *done).await;
    }

    fn update(&self, registry: &ToolRegistry, change: impl FnOnce(&mut LinkState)) {
        let status = {
            let mut state = self.lock();
            change(&mut state);
            state.status.clone()
        };
        registry.set_mcp_status(status);
    }
}

/// Keeps `link`'s server connected until `stop` (see the module docs).
pub(super) async fn supervise(link: Arc<Link>, registry: ToolRegistry, stop: CancellationToken) {
    let name = link.server.name.clone();
    let mut backoff = FIRST_BACKOFF;
    let mut first = true;
    loop {
        link.update(&registry, |s| {
            s.status.state = McpState::Connecting;
            s.status.retry_at = None;
            if !first {
                s.status.restarts += 1;
            }
        });
        first = false;
        // A bug in the client must not leave the server unsupervised.
        let attempt = std::panic::AssertUnwindSafe(session(&link, &registry, &stop)).catch_unwind().await;
        let (healthy_for, error) =
            attempt.unwrap_or_else(|_| (Duration::ZERO, "the MCP client failed (a panic)".into()));
        link.attempted.send_replace(true);
        if stop.is_cancelled() {
            link.update(&registry, |s| s.peer = None);
            return;
        }
        if healthy_for >= HEALTHY {
            backoff = FIRST_BACKOFF;
        }
        tracing::warn!(server = %name, error = %error, retry_in = ?backoff, "MCP server is down");
        let retry_at = Utc::now() + chrono::Duration::from_std(backoff).unwrap_or_default();
        link.update(&registry, |s| {
            s.peer = None;
            s.status.state = McpState::Down;
            s.status.last_error = Some(error);
            s.status.retry_at = Some(retry_at);
        });
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.cancelled() => return,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// One connection, from start to death: how long it was healthy and why it ended.
async fn session(link: &Arc<Link>, registry: &ToolRegistry, stop: &CancellationToken) -> (Duration, String) {
    let server = &link.server;
    let tools_changed = Arc::new(Notify::new());
    let last_words = LastWords::default();
    let handler = Handler { tools_changed: tools_changed.clone() };
    let opened = tokio::select! {
        opened = tokio::time::timeout(REQUEST_LIMIT, connect::open(server, handler, &last_words)) => opened,
        _ = stop.cancelled() => return (Duration::ZERO, "stopped".into()),
    };
    let session = match opened {
        Ok(Ok(session)) => session,
        Ok(Err(e)) => return (Duration::ZERO, e),
        Err(_) => {
            return (Duration::ZERO, format!("no answer to the MCP handshake within {} s", REQUEST_LIMIT.as_secs()))
        }
    };
    let peer = session.peer().clone();
    if let Err(e) = list(link, registry, &peer).await {
        let _ = tokio::time::timeout(Duration::from_secs(3), session.cancel()).await;
        return (Duration::ZERO, e);
    }
    let connected = tokio::time::Instant::now();
    link.update(registry, |s| {
        s.peer = Some(peer.clone());
        s.status.state = McpState::Ready;
        s.status.connected_at = Some(Utc::now());
        s.status.retry_at = None;
    });
    link.attempted.send_replace(true);
    tracing::info!(server = %server.name, tools = link.status().tools, "MCP server connected");

    let cancel = session.cancellation_token();
    let ended = session.waiting();
    tokio::pin!(ended);
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING_EVERY, PING_EVERY);
    let mut closed = false;
    let why = loop {
        tokio::select! {
            _ = &mut ended => {
                closed = true;
                let words = last_words.take().map(|w| format!(" (its last words: {w})")).unwrap_or_default();
                break format!("the server closed the connection{words}");
            }
            _ = tools_changed.notified() => {
                if let Err(e) = list(link, registry, &peer).await {
                    break e;
                }
            }
            _ = link.suspect.notified() => {
                if let Err(e) = alive(&peer, &server.secrets).await {
                    break e;
                }
            }
            _ = ping.tick() => {
                if let Err(e) = alive(&peer, &server.secrets).await {
                    break e;
                }
            }
            _ = stop.cancelled() => break "stopped".into(),
        }
    };
    // Calls fail at once from here on, rather than on a dead connection.
    link.update(registry, |s| s.peer = None);
    cancel.cancel();
    if !closed {
        let _ = tokio::time::timeout(Duration::from_secs(3), ended).await;
    }
    (connected.elapsed(), why)
}

/// A ping answered in time, or why not.
async fn alive(peer: &Peer<RoleClient>, secrets: &Secrets) -> Result<(), String> {
    let ping = ClientRequest::PingRequest(PingRequest { method: Default::default(), extensions: Default::default() });
    match tokio::time::timeout(PING_LIMIT, peer.send_request(ping)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("the server did not answer a ping: {}", super::describe(&e, secrets))),
        Err(_) => Err(format!("the server did not answer a ping within {} s", PING_LIMIT.as_secs())),
    }
}

/// Lists every tool (all pages) and makes them the server's tools in the
/// registry; tools that cannot be offered are logged and left out.
async fn list(link: &Arc<Link>, registry: &ToolRegistry, peer: &Peer<RoleClient>) -> Result<(), String> {
    let server = &link.server;
    let listed = match tokio::time::timeout(REQUEST_LIMIT, peer.list_all_tools()).await {
        Ok(Ok(listed)) => listed,
        Ok(Err(e)) => return Err(format!("listing its tools failed: {}", super::describe(&e, &server.secrets))),
        Err(_) => return Err(format!("no answer to tools/list within {} s", REQUEST_LIMIT.as_secs())),
    };
    let mut names = HashSet::new();
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    let mut left_out = Vec::new();
    for listed_tool in listed.iter().take(MAX_TOOLS) {
        match McpTool::new(server, link, listed_tool) {
            Ok(tool) if names.insert(tool.name().to_owned()) => tools.push(Arc::new(tool)),
            Ok(tool) => left_out.push(format!(
                "`{}`: another tool of the server is also named `{}`",
                listed_tool.name,
                tool.name()
            )),
            Err(why) => left_out.push(why),
        }
    }
    if listed.len() > MAX_TOOLS {
        left_out.push(format!("{} tools past the first {MAX_TOOLS}", listed.len() - MAX_TOOLS));
    }
    let offered = tools.len();
    let invalid = registry.replace_source(&mcp_source(&server.name), tools);
    let count = offered - invalid.len();
    for why in left_out.iter().chain(&invalid) {
        tracing::warn!(server = %server.name, "an MCP tool is left out: {why}");
    }
    link.update(registry, |s| s.status.tools = count as u32);
    Ok(())
}
