//! Tools: what runs of the current project can call (the built-ins, the MCP
//! servers' tools and the project's own HTTP tools), in pages, filtered by
//! source and text; and how each configured MCP server is doing.
//!
//! Viewers of the current project read both. A project's HTTP tools are
//! listed to that project only; MCP servers are the instance's, listed to
//! every project (their status never holds a secret: header and env values
//! are not part of it).

use axum::extract::State;
use axum::Json;
use runlens_engine::model::limits::{MAX_ID_CHARS, MAX_LIST_LIMIT, MAX_LIST_OFFSET, MAX_QUERY_TEXT_CHARS};
use runlens_engine::model::{McpServerStatus, Role, ToolInfo, SOURCE_BUILTIN, SOURCE_HTTP, SOURCE_MCP_PREFIX};
use runlens_engine::openapi::raw;
use runlens_engine::Engine;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::openapi::{RefOr, Schema};
use utoipa::{IntoParams, PartialSchema, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::{optional, AppQuery, Bounded};
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::listing::{page_offset, page_size, ListOffset, PageSize};
use super::ProjectHeader;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(tools)).routes(routes!(mcp_servers))
}

/// A tool source to list: `builtin`, `http` or `mcp:NAME`.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceFilter(pub String);

impl std::str::FromStr for SourceFilter {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let server = text.strip_prefix(SOURCE_MCP_PREFIX);
        let ok = text == SOURCE_BUILTIN
            || text == SOURCE_HTTP
            || server.is_some_and(|s| {
                !s.is_empty() && s.chars().count() <= MAX_ID_CHARS && !s.chars().any(|c| c.is_whitespace())
            });
        match ok {
            true => Ok(SourceFilter(text.to_owned())),
            false => Err(format!("must be builtin, http or mcp:NAME, not `{text}`")),
        }
    }
}

impl PartialSchema for SourceFilter {
    fn schema() -> RefOr<Schema> {
        let pattern = format!("^$|^(builtin|http|mcp:[^\\s]{{1,{MAX_ID_CHARS}}})$");
        RefOr::T(raw(json!({ "type": "string", "pattern": pattern })))
    }
}

/// A text to look for in tools' names and descriptions: at most
/// [`MAX_QUERY_TEXT_CHARS`] characters.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolText(pub String);

impl std::str::FromStr for ToolText {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text.chars().nth(MAX_QUERY_TEXT_CHARS).is_some() {
            return Err(format!("must be at most {MAX_QUERY_TEXT_CHARS} characters"));
        }
        Ok(ToolText(text.to_owned()))
    }
}

impl PartialSchema for ToolText {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "string", "maxLength": MAX_QUERY_TEXT_CHARS })))
    }
}

/// A page of the tool list, by `offset`, optionally filtered.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ToolsQuery {
    /// Tools in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// Tools to skip before the page.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ListOffset>, inline)]
    pub offset: Option<Bounded<0, { MAX_LIST_OFFSET as u64 }>>,
    /// Only tools of this source: `builtin`, `http` or `mcp:NAME`.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<SourceFilter>, inline)]
    pub source: Option<SourceFilter>,
    /// Only tools whose name or description holds this text (any case).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ToolText>, inline)]
    pub q: Option<ToolText>,
}

/// One page of the tools runs of the project can call, by name.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolList {
    pub tools: Vec<ToolInfo>,
    /// Tools matching the filters, in all pages.
    pub total: u64,
    /// The `offset` of the next page; null on the last one.
    pub next_offset: Option<u64>,
}

/// `tools` (sorted by name) of `source` whose name or description holds
/// `q` (any case).
pub fn matching(tools: Vec<ToolInfo>, source: Option<&str>, q: Option<&str>) -> Vec<ToolInfo> {
    let q = q.map(str::trim).filter(|q| !q.is_empty()).map(str::to_lowercase);
    tools
        .into_iter()
        .filter(|t| source.is_none_or(|s| t.source == s))
        .filter(|t| {
            q.as_deref().is_none_or(|q| t.name.to_lowercase().contains(q) || t.description.to_lowercase().contains(q))
        })
        .collect()
}

/// The page of `items` from `offset`, `limit` long, and the next page's offset.
pub fn page_of<T>(items: Vec<T>, offset: u32, limit: u32) -> (Vec<T>, u64, Option<u64>) {
    let total = items.len() as u64;
    let page: Vec<T> = items.into_iter().skip(offset as usize).take(limit as usize).collect();
    let end = u64::from(offset) + page.len() as u64;
    (page, total, (end < total).then_some(end))
}

/// The tools runs of the current project can call, with their argument
/// schemas and sources (`builtin`, `mcp:NAME`, `http`), by name in pages.
///
/// A run attaches them by name, by source or `all` (`CreateRun.tools`).
#[utoipa::path(
    get,
    path = "/api/tools",
    tag = "catalog",
    params(ProjectHeader, ToolsQuery),
    responses(
        (status = 200, description = "OK", body = ToolList),
        (status = 400, response = BadRequest),
        (status = 500, response = Internal),
    )
)]
async fn tools(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<ToolsQuery>,
) -> Result<Json<ToolList>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    let found =
        matching(engine.tools(project), q.source.as_ref().map(|s| s.0.as_str()), q.q.as_ref().map(|t| t.0.as_str()));
    let (tools, total, next_offset) = page_of(found, page_offset(q.offset), page_size(q.limit));
    Ok(Json(ToolList { tools, total, next_offset }))
}

/// A page of the MCP server list.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ServersQuery {
    /// Servers in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// Servers to skip before the page.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ListOffset>, inline)]
    pub offset: Option<Bounded<0, { MAX_LIST_OFFSET as u64 }>>,
}

/// The configured MCP servers, by name.
#[derive(Debug, Serialize, ToSchema)]
pub struct McpServerList {
    pub servers: Vec<McpServerStatus>,
    /// Servers configured, in all pages.
    pub total: u64,
    /// The `offset` of the next page; null on the last one.
    pub next_offset: Option<u64>,
}

/// How each MCP server of the config file (`[mcp.NAME]`) is doing: its
/// state, tools listed, restarts, last error and next retry.
#[utoipa::path(
    get,
    path = "/api/mcp/servers",
    tag = "catalog",
    params(ProjectHeader, ServersQuery),
    responses(
        (status = 200, description = "OK", body = McpServerList),
        (status = 400, response = BadRequest),
        (status = 500, response = Internal),
    )
)]
async fn mcp_servers(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<ServersQuery>,
) -> Result<Json<McpServerList>, AppError> {
    caller.require_current(Role::Viewer)?;
    let (servers, total, next_offset) = page_of(engine.mcp_servers(), page_offset(q.offset), page_size(q.limit));
    Ok(Json(McpServerList { servers, total, next_offset }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str, source: &str) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            description: description.into(),
            schema: json!({}),
            requires_approval: false,
            source: source.into(),
            idempotent: true,
        }
    }

    #[test]
    fn filters_and_pages() {
        let tools = vec![
            tool("calculator", "Evaluates arithmetic", "builtin"),
            tool("everything__echo", "Echoes back", "mcp:everything"),
            tool("lookup", "Looks up an ORDER", "http"),
        ];
        let names = |list: &[ToolInfo]| list.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&matching(tools.clone(), Some("mcp:everything"), None)), ["everything__echo"]);
        assert_eq!(names(&matching(tools.clone(), None, Some(" order "))), ["lookup"], "any case, trimmed");
        assert_eq!(names(&matching(tools.clone(), None, Some("ECHO"))), ["everything__echo"]);
        assert!(matching(tools.clone(), Some("http"), Some("echo")).is_empty());
        assert_eq!(matching(tools.clone(), None, Some("")).len(), 3);
        assert_eq!(page_of(vec![1, 2, 3], 0, 2), (vec![1, 2], 3, Some(2)));
        assert_eq!(page_of(vec![1, 2, 3], 2, 2), (vec![3], 3, None));
        assert_eq!(page_of(vec![1, 2, 3], 9, 2), (vec![], 3, None));
    }

    #[test]
    fn sources_are_checked() {
        for ok in ["builtin", "http", "mcp:everything", "mcp:a-b_c"] {
            assert_eq!(ok.parse::<SourceFilter>().unwrap().0, ok);
        }
        for bad in ["mcp:", "mcp:a b", "agent", "BUILTIN", "all"] {
            assert!(bad.parse::<SourceFilter>().is_err(), "{bad}");
        }
        assert!("x".repeat(MAX_QUERY_TEXT_CHARS + 1).parse::<ToolText>().is_err());
    }
}
