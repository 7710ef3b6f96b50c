//! The Tools page's data: a page of the tools the current project's runs
//! can call (filtered by source and text, as `GET /api/tools` filters them),
//! every source with its count, and each configured MCP server's health.

use leptos::prelude::*;
use runlens_engine::model::{McpServerStatus, Role, ToolInfo};
use serde::{Deserialize, Serialize};

/// Tools on one page of the Tools page.
pub const TOOLS_PAGE_SIZE: u32 = 50;

/// One source of tools and how many it has.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceCount {
    /// `builtin`, `http` or `mcp:NAME`.
    pub source: String,
    pub tools: u32,
}

/// What the Tools page shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolsPageData {
    /// The page of tools matching the filters, by name.
    pub tools: Vec<ToolInfo>,
    /// Tools matching the filters, in all pages.
    pub total: u64,
    pub offset: u32,
    pub next_offset: Option<u64>,
    /// Every source the project has tools from (and every configured MCP
    /// server, even one listing none), with its count, by name.
    pub sources: Vec<SourceCount>,
    pub servers: Vec<McpServerStatus>,
    /// The caller's role in the project.
    pub role: Option<Role>,
}

/// The Tools page's data for the current project (viewers): tools of
/// `source` (any when blank) whose name or description holds `q`, from
/// `offset`.
#[server]
pub async fn get_tools_page(
    source: Option<String>,
    q: Option<String>,
    offset: Option<u32>,
) -> Result<ToolsPageData, ServerFnError> {
    use std::collections::BTreeMap;

    use crate::server::routes::tools::{matching, page_of, SourceFilter, ToolText};
    use runlens_engine::model::limits::MAX_LIST_OFFSET;

    let (engine, caller) = super::ssr::for_project(super::ssr::Role::Viewer)?;
    let source = match super::ssr::non_empty(source) {
        Some(s) => Some(s.parse::<SourceFilter>().map_err(|e| ServerFnError::new(format!("source {e}")))?.0),
        None => None,
    };
    let q = match q.filter(|q| !q.trim().is_empty()) {
        Some(q) => Some(q.parse::<ToolText>().map_err(|e| ServerFnError::new(format!("q {e}")))?.0),
        None => None,
    };
    let offset = offset.unwrap_or(0).min(MAX_LIST_OFFSET);
    let all = engine.tools(&caller.project);
    let servers = engine.mcp_servers();
    let mut counts: BTreeMap<String, u32> =
        servers.iter().map(|s| (runlens_engine::model::mcp_source(&s.name), 0)).collect();
    for tool in &all {
        *counts.entry(tool.source.clone()).or_default() += 1;
    }
    let sources = counts.into_iter().map(|(source, tools)| SourceCount { source, tools }).collect();
    let found = matching(all, source.as_deref(), q.as_deref());
    let (tools, total, next_offset) = page_of(found, offset, TOOLS_PAGE_SIZE);
    let role = caller.role_in(&caller.project);
    Ok(ToolsPageData { tools, total, offset, next_offset, sources, servers, role })
}
