//! The "attach whole sources" checkboxes of the playground and the agent
//! form: `all`, and each source the project has tools from (`builtin`,
//! `mcp:NAME`, `http`) with its count. A checked box submits its value in
//! the tools list, which the engine expands to the source's tools when a
//! run is created (an agent keeps it as written), so large tool sets are
//! attached without listing every tool.

use std::collections::BTreeMap;

use leptos::prelude::*;
use runlens_engine::model::ToolInfo;

/// Each source of `tools` with its count, by name.
pub fn source_counts(tools: &[ToolInfo]) -> Vec<(String, usize)> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for tool in tools {
        *counts.entry(tool.source.as_str()).or_default() += 1;
    }
    counts.into_iter().map(|(s, n)| (s.to_owned(), n)).collect()
}

/// `all` and one box per source, named `field`, checked when `chosen` lists it.
#[component]
pub fn SourceBoxes(field: &'static str, tools: Vec<ToolInfo>, chosen: Vec<String>) -> impl IntoView {
    let all_label = format!("All tools ({})", tools.len());
    let all = chosen.iter().any(|c| c == "all");
    let boxes = source_counts(&tools)
        .into_iter()
        .map(|(source, n)| {
            let checked = chosen.contains(&source);
            let label = format!("{source} ({n})");
            view! {
                <label class="check">
                    <input type="checkbox" name=field value=source.clone() checked=checked
                        data-testid="attach-source" data-source=source/>
                    <span class="mono">{label}</span>
                </label>
            }
        })
        .collect::<Vec<_>>();
    view! {
        <div class="attach-sources" data-testid="attach-sources">
            <span class="muted">"Attach whole sources (their tools when the run starts):"</span>
            <label class="check">
                <input type="checkbox" name=field value="all" checked=all data-testid="attach-all"/>
                <strong>{all_label}</strong>
            </label>
            {boxes}
        </div>
    }
}
