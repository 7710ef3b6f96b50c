//! Which tools a step offered the model when its run had more attached
//! than one turn offers (`[tool_selection] max`): how many of how many, the
//! text they were scored against, and each offered tool with its reason
//! (`used` earlier in the run, or `relevant`) and BM25 score. Folded by
//! default; the summary line says the counts.

use leptos::prelude::*;
use runlens_engine::model::ToolSelection;

/// A step's tool selection (see the module docs).
#[component]
pub fn SelectionView(selection: ToolSelection) -> impl IntoView {
    let ToolSelection { attached, max, query, offered } = selection;
    let used = offered.iter().filter(|o| o.reason == "used").count();
    let summary = format!(
        "{} of {attached} attached tools offered (at most {max}){}",
        offered.len(),
        match used {
            0 => String::new(),
            n => format!(", {n} used before"),
        }
    );
    let rows = offered
        .into_iter()
        .map(|o| {
            let score = format!("{:.3}", o.score);
            let class = format!("reason reason-{}", o.reason);
            view! {
                <tr data-testid="offered-tool" data-tool=o.name.clone() data-reason=o.reason.clone()>
                    <td class="mono">{o.name.clone()}</td>
                    <td><span class=class>{o.reason.clone()}</span></td>
                    <td class="num" title="BM25 relevance to the query">{score}</td>
                </tr>
            }
        })
        .collect::<Vec<_>>();
    let query = (!query.is_empty()).then(|| {
        view! { <p class="selection-query">"Scored against: " <q data-testid="selection-query">{query}</q></p> }
    });
    view! {
        <details class="selection" data-testid="tool-selection" data-attached=attached.to_string()
            data-max=max.to_string()>
            <summary data-testid="selection-summary">{summary}</summary>
            {query}
            <table class="table compact">
                <thead><tr><th>"Tool"</th><th>"Why"</th><th>"Score"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </details>
    }
}
