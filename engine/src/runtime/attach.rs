//! Attaching tools to a run or an agent: a `tools` list names tools, whole
//! sources (`builtin`, `http`, `mcp:NAME`) or `all`, and is expanded to the
//! tools' names when a run is created (or switches agents), so the run
//! records exactly what it was given. An agent keeps its list as written
//! and is expanded at each run, so `mcp:NAME` follows the server's tools.
//!
//! `all`, `builtin` and `http` are keywords here: a tool of one of those
//! names cannot be attached by its name (HTTP tools are attached by name or
//! as `http`).

use std::collections::BTreeSet;

use super::Runtime;
use crate::error::{EngineError, Result};
use crate::model::{limits, mcp_source, SOURCE_BUILTIN, SOURCE_HTTP, SOURCE_MCP_PREFIX};

/// Attaches every tool project `project` can call (in a `tools` list).
pub(crate) const ALL_TOOLS: &str = "all";

/// A `tools` list expanded: the names, and the entries that named nothing.
struct Expansion {
    names: Vec<String>,
    unknown_tools: Vec<String>,
    unknown_sources: Vec<String>,
    /// Every source there is (for the error).
    sources: Vec<String>,
}

fn expand(rt: &Runtime, project: &str, list: &[String]) -> Expansion {
    let known = rt.tools.view(project);
    let infos = known.infos();
    let servers: BTreeSet<String> = rt.tools.mcp_status().into_iter().map(|s| mcp_source(&s.name)).collect();
    let is_source = |entry: &str| {
        entry == SOURCE_BUILTIN
            || entry == SOURCE_HTTP
            || servers.contains(entry)
            || (entry.starts_with(SOURCE_MCP_PREFIX) && infos.iter().any(|t| t.source == entry))
    };
    let (mut names, mut unknown_tools, mut unknown_sources) = (Vec::new(), Vec::new(), Vec::new());
    let mut seen = BTreeSet::new();
    for entry in list {
        let expanded: Vec<&str> = if entry == ALL_TOOLS {
            infos.iter().map(|t| t.name.as_str()).collect()
        } else if is_source(entry) {
            infos.iter().filter(|t| &t.source == entry).map(|t| t.name.as_str()).collect()
        } else if known.contains(entry) {
            vec![entry.as_str()]
        } else {
            match entry.starts_with(SOURCE_MCP_PREFIX) {
                true => unknown_sources.push(format!("`{entry}`")),
                false => unknown_tools.push(format!("`{entry}`")),
            }
            continue;
        };
        names.extend(expanded.into_iter().filter(|n| seen.insert(*n)).map(str::to_owned));
    }
    let mut mcp = servers;
    mcp.extend(infos.iter().map(|t| t.source.clone()).filter(|s| s.starts_with(SOURCE_MCP_PREFIX)));
    let sources = [SOURCE_BUILTIN.to_owned(), SOURCE_HTTP.to_owned()].into_iter().chain(mcp).collect();
    Expansion { names, unknown_tools, unknown_sources, sources }
}

/// The tools `list` attaches for project `project`, by name: each entry is
/// a tool's name, a source (`builtin`, `http`, `mcp:NAME`: its tools as they
/// are now) or `all`, expanded in order, each tool once. Entries naming no
/// tool or source are a 400 naming them all (errors start with `prefix`);
/// so is an expansion past [`limits::MAX_TOOL_NAMES`]. A configured MCP
/// server is a known source even while it lists no tools (it is down).
pub(crate) fn attach_tools(rt: &Runtime, project: &str, prefix: &str, list: &[String]) -> Result<Vec<String>> {
    let Expansion { names, unknown_tools, unknown_sources, sources } = expand(rt, project, list);
    let mut problems = Vec::new();
    if !unknown_tools.is_empty() {
        let noun = if unknown_tools.len() == 1 { "tool" } else { "tools" };
        problems.push(format!(
            "unknown {noun} {}; attach tools by name (GET /api/tools), by source (builtin, http, mcp:NAME) or all",
            unknown_tools.join(", ")
        ));
    }
    if !unknown_sources.is_empty() {
        problems.push(format!("unknown tool source {}; sources: {}", unknown_sources.join(", "), sources.join(", ")));
    }
    if !problems.is_empty() {
        return Err(EngineError::Invalid(format!("{prefix}{}", problems.join("; "))));
    }
    if names.len() > limits::MAX_TOOL_NAMES {
        return Err(EngineError::Invalid(format!(
            "{prefix}tools attaches {} tools; the limit is {} (attach fewer tools or sources)",
            names.len(),
            limits::MAX_TOOL_NAMES
        )));
    }
    Ok(names)
}

/// [`attach_tools`] for a list checked earlier (an agent's, at a handoff):
/// entries that name nothing any more (a tool removed since) are left out,
/// and the names are cut at [`limits::MAX_TOOL_NAMES`], rather than fail a
/// run that is under way.
pub(crate) fn attach_known(rt: &Runtime, project: &str, list: &[String]) -> Vec<String> {
    let mut names = expand(rt, project, list).names;
    names.truncate(limits::MAX_TOOL_NAMES);
    names
}
