//! `/tools`: the tools the current project's runs can call — the
//! built-ins, each MCP server's and the project's own HTTP tools — with
//! their descriptions, flags and argument schemas, and the health of each
//! configured MCP server.
//!
//! The filters (`source`, `q`) and the page (`offset`) live in the URL and
//! are set by a plain GET form and links, so the page works and can be
//! bookmarked without JavaScript. Schemas are folded (`<details>`), shown as
//! text (escaped like every payload).

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use runlens_engine::model::{McpServerStatus, McpState, ToolInfo};

use crate::api::tools::{get_tools_page, SourceCount, ToolsPageData, TOOLS_PAGE_SIZE};
use crate::components::{Badge, Loaded};
use crate::format;

/// The filters and page, as read from the query string.
#[derive(Clone, Debug, Default, PartialEq)]
struct Filters {
    source: String,
    q: String,
    offset: u32,
}

impl Filters {
    /// The page's address with these filters at `offset`, or with `source`.
    fn href(&self, source: &str, offset: u32) -> String {
        let offset = if offset == 0 { String::new() } else { offset.to_string() };
        let qs = format::query_string([("source", source), ("q", self.q.as_str()), ("offset", offset.as_str())]);
        if qs.is_empty() {
            "/tools".into()
        } else {
            format!("/tools?{qs}")
        }
    }
}

#[component]
pub fn ToolsPage() -> impl IntoView {
    let query = use_query_map();
    let filters = Memo::new(move |_| {
        let q = query.read();
        Filters {
            source: q.get("source").unwrap_or_default(),
            q: q.get("q").unwrap_or_default(),
            offset: q.get("offset").and_then(|o| o.parse().ok()).unwrap_or(0),
        }
    });
    let page =
        crate::resource::new(move || filters.get(), |f| get_tools_page(Some(f.source), Some(f.q), Some(f.offset)));
    view! {
        <Title text="Tools · runlens"/>
        <div class="page-head">
            <h1>"Tools"</h1>
            <span class="muted">"What this project's runs can call: attach them by name, by source or "
                <code>"all"</code></span>
            <span class="spacer"></span>
            <a class="button" href="/tools/http" data-testid="http-tools-link">"HTTP tools…"</a>
        </div>
        <Loaded load=move || async move { page.await } loading="Loading tools…" let:data>
            {view! { <ToolsView data filters=filters.get_untracked()/> }}
        </Loaded>
    }
}

#[component]
fn ToolsView(data: ToolsPageData, filters: Filters) -> impl IntoView {
    let ToolsPageData { tools, total, offset, next_offset, sources, servers, role: _ } = data;
    let shown = tools.len();
    let options = sources
        .iter()
        .map(|s| {
            let selected = s.source == filters.source;
            let label = format!("{} ({})", s.source, s.tools);
            view! { <option value=s.source.clone() selected=selected>{label}</option> }
        })
        .collect::<Vec<_>>();
    let chips = source_chips(&sources, &filters);
    let rows = tools.into_iter().map(|tool| view! { <ToolRow tool/> }).collect::<Vec<_>>();
    let prev = (offset > 0).then(|| {
        let href = filters.href(&filters.source, offset.saturating_sub(TOOLS_PAGE_SIZE));
        view! { <a class="button subtle" href=href data-testid="tools-prev">"← Previous"</a> }
    });
    let next = next_offset.map(|n| {
        let href = filters.href(&filters.source, n as u32);
        view! { <a class="button subtle" href=href data-testid="tools-next">"Next →"</a> }
    });
    let range = match shown {
        0 => "No tools match.".to_string(),
        n => format!("{}–{} of {total}", offset + 1, offset as usize + n),
    };
    view! {
        <form method="get" action="/tools" class="filters" data-testid="tools-filters">
            <label class="field">
                <span>"Source"</span>
                <select name="source" data-testid="source-filter">
                    <option value="" selected=filters.source.is_empty()>"Any source"</option>
                    {options}
                </select>
            </label>
            <label class="field grow">
                <span>"Name or description"</span>
                <input type="search" name="q" value=filters.q.clone() placeholder="email, weather, echo…"
                    data-testid="tools-q"/>
            </label>
            <button type="submit" class="button" data-testid="tools-filter-submit">"Filter"</button>
        </form>
        {chips}
        <p class="muted" data-testid="tools-range">{range}</p>
        <div class="tool-list" data-testid="tool-list">{rows}</div>
        <div class="pager">{prev}{next}</div>
        <h2>"MCP servers"</h2>
        <ServerTable servers/>
    }
}

/// Every source as a link that filters by it, with its count.
fn source_chips(sources: &[SourceCount], filters: &Filters) -> impl IntoView {
    let chips = sources
        .iter()
        .map(|s| {
            let href = filters.href(&s.source, 0);
            let current = s.source == filters.source;
            view! {
                <a class="tag source-chip" class:current=current href=href data-testid="source-chip"
                    data-source=s.source.clone()>
                    <span class="tag-key">{s.source.clone()}</span> " " {s.tools}
                </a>
            }
        })
        .collect::<Vec<_>>();
    view! { <div class="tags source-chips">{chips}</div> }
}

/// One tool: name, source, flags, description and its schema (folded).
#[component]
fn ToolRow(tool: ToolInfo) -> impl IntoView {
    let schema = format::pretty_json(&tool.schema);
    let approval = tool.requires_approval.then(|| {
        view! { <span class="badge badge-awaiting_approval" data-testid="tool-needs-approval"
        title="A person approves each call unless the run's policy says otherwise">"needs approval"</span> }
    });
    let idempotent = match tool.idempotent {
        true => view! { <span class="muted flag" data-testid="tool-idempotent"
        title="Safe to run again after a crash interrupted it">"idempotent"</span> }
        .into_any(),
        false => view! { <span class="muted flag" data-testid="tool-not-idempotent"
        title="Has outside effects: an interrupted call is reported, never repeated">"not idempotent"</span> }
        .into_any(),
    };
    view! {
        <div class="card tool-card" data-testid="tool-row" data-tool=tool.name.clone() data-source=tool.source.clone()>
            <div class="tool-head">
                <span class="mono tool-name" data-testid="tool-name">{tool.name.clone()}</span>
                <span class="tag" data-testid="tool-source">{tool.source.clone()}</span>
                {approval}
                {idempotent}
            </div>
            <p class="desc" data-testid="tool-description">{tool.description}</p>
            <details class="schema">
                <summary>"Arguments schema"</summary>
                <pre class="json" data-testid="tool-schema">{schema}</pre>
            </details>
        </div>
    }
}

fn state_word(state: McpState) -> &'static str {
    match state {
        McpState::Connecting => "connecting",
        McpState::Ready => "ready",
        McpState::Down => "down",
    }
}

/// Each configured MCP server's state, tools, restarts, last error and next retry.
#[component]
fn ServerTable(servers: Vec<McpServerStatus>) -> impl IntoView {
    if servers.is_empty() {
        return view! {
            <p class="muted" data-testid="no-mcp-servers">
                "No MCP servers are configured. The operator adds them to the config file as "
                <code>"[mcp.NAME]"</code> " sections (see the README's Tools section)."
            </p>
        }
        .into_any();
    }
    let rows = servers
        .into_iter()
        .map(|s| {
            let state = state_word(s.state);
            view! {
                <tr data-testid="mcp-server" data-name=s.name.clone() data-state=state>
                    <td class="mono">{s.name.clone()}</td>
                    <td>{s.transport.clone()}</td>
                    <td><Badge status=state testid="mcp-state"/></td>
                    <td data-testid="mcp-tools">{s.tools}</td>
                    <td data-testid="mcp-restarts">{s.restarts}</td>
                    <td class="nowrap">{format::opt_time(s.connected_at.as_ref())}</td>
                    <td class="error-text" data-testid="mcp-last-error">{s.last_error.unwrap_or_default()}</td>
                    <td class="nowrap" data-testid="mcp-retry-at">{format::opt_time(s.retry_at.as_ref())}</td>
                </tr>
            }
        })
        .collect::<Vec<_>>();
    view! {
        <div class="table-scroll"><table class="table mcp-servers" data-testid="mcp-servers">
            <thead>
                <tr>
                    <th>"Server"</th>
                    <th>"Transport"</th>
                    <th>"State"</th>
                    <th>"Tools"</th>
                    <th>"Restarts"</th>
                    <th>"Connected (UTC)"</th>
                    <th>"Last error"</th>
                    <th>"Retry at (UTC)"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table></div>
    }
    .into_any()
}
