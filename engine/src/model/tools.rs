//! What clients see of tools beyond their schema: where each comes from,
//! the health of each MCP server, and which tools a step offered when a run
//! has more than the model is shown at once.

use serde::{Deserialize, Serialize};

/// Where a tool comes from: `builtin`, `mcp:NAME` (the operator's MCP
/// server `NAME`) or `http` (a project's own HTTP tool).
pub const SOURCE_BUILTIN: &str = "builtin";
/// The names of the built-in tools (the tool registry registers exactly
/// these; a test there checks it), in name order.
pub const BUILTIN_TOOLS: [&str; 4] = ["calculator", "current_time", "send_email", "wait"];

/// The source of a project's HTTP tools.
pub const SOURCE_HTTP: &str = "http";
/// The prefix of an MCP server's source (`mcp:NAME`).
pub const SOURCE_MCP_PREFIX: &str = "mcp:";

/// The source of MCP server `server`'s tools.
pub fn mcp_source(server: &str) -> String {
    format!("{SOURCE_MCP_PREFIX}{server}")
}

/// How an MCP server's connection is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum McpState {
    /// Starting or reconnecting: its tools (as last listed) fail with a clear error meanwhile.
    Connecting,
    /// Connected; its tools are callable.
    Ready,
    /// Down; the next attempt is at `McpServerStatus::retry_at`.
    Down,
}

/// One configured MCP server, as the Tools page and `GET /api/mcp/servers` show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct McpServerStatus {
    /// The `NAME` of `[mcp.NAME]`; its tools are named `NAME__tool`.
    pub name: String,
    /// `stdio` or `http`.
    pub transport: String,
    pub state: McpState,
    /// Tools last listed.
    pub tools: u32,
    /// Times the server was restarted (stdio) or reconnected (HTTP).
    pub restarts: u32,
    /// The last failure, when there was one (never a secret: header and env values are not shown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connected_at: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Which tools a step offered when the run had more attached than
/// `tool_selection.max` (absent when every attached tool was offered).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolSelection {
    /// Tools attached to the run.
    pub attached: u32,
    /// The most offered in one turn.
    pub max: u32,
    /// What the relevance was scored against (the latest messages, cut short).
    pub query: String,
    /// The tools offered, best first.
    pub offered: Vec<OfferedTool>,
}

/// One offered tool and why it was offered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OfferedTool {
    pub name: String,
    /// BM25 relevance to the query, rounded to 4 decimals (a `used` tool
    /// is kept whatever its score).
    pub score: f64,
    /// `used` (called earlier in the run, always kept) or `relevant`.
    pub reason: String,
}
