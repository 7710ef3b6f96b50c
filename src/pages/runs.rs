//! `/runs`: the run list, with status/outcome/tag/text/agent/metadata
//! filters and cursor pagination.
//!
//! Filters live in the URL query (`status`, `outcome`, `tag`, `q`, `agent`, `metadata`,
//! `session_id`, `user`, `score`, `all`, `group`, `cursor`) and are set by a plain GET form, so the page
//! works and can be bookmarked without JS. Only root runs are listed unless
//! `all` asks for the child runs too (a root run shows how many children its
//! agent calls started); `group=agent` groups the page's runs by the saved
//! agent they ran, `group=session` by their session. The hydrated page refetches when the all-runs event
//! stream reports a status change (debounced), and every 15 s while that
//! stream is down.
//!
//! The Import control uploads a run state document (from a trace page's
//! Export) as a plain multipart form post to `POST /runs/import`, which
//! redirects to the new run or back here with `import_error=…`.

use std::sync::Arc;
use std::time::Duration;

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use runlens_engine::model::Run;

use crate::api::run_tree::agent_name;
use crate::api::{agent_choices, list_runs, AgentChoice, RunList};
use crate::components::token_chart::{cost_text, thousands};
use crate::components::{ErrorBox, Loaded};
use crate::format;
use crate::live_updates::poll_while;
use crate::live_updates::RunsFeed;
use crate::pages::runs_filters::{FilterForm, Filters, Grouping};
pub use crate::pages::runs_table::{CompareSelected, MetadataChips, RunsTable, SessionChips};

/// How often the list refetches while the live event stream is down.
const POLL_EVERY: Duration = Duration::from_secs(15);

#[component]
pub fn RunsPage() -> impl IntoView {
    let query = use_query_map();
    let filters = Memo::new(move |_| {
        let q = query.read();
        let flag = |k: &str| q.get(k).is_some_and(|v| !v.is_empty() && v != "0" && v != "false");
        Filters {
            status: q.get("status").unwrap_or_default(),
            outcome: q.get("outcome").unwrap_or_default(),
            tag: q.get("tag").unwrap_or_default(),
            q: q.get("q").unwrap_or_default(),
            agent: q.get("agent").unwrap_or_default(),
            metadata: q.get("metadata").unwrap_or_default(),
            session_id: q.get("session_id").unwrap_or_default(),
            user: q.get("user").unwrap_or_default(),
            score: q.get("score").unwrap_or_default(),
            all: flag("all"),
            group: q.get("group").unwrap_or_default(),
            cursor: q.get("cursor").unwrap_or_default(),
        }
    });
    // Live: the feed's version moves on status changes; the slow poll only
    // runs while the stream is down.
    let feed = RunsFeed::get();
    let tick = RwSignal::new(0u64);
    let runs =
        crate::resource::new(move || (filters.get(), feed.version.get(), tick.get()), |(f, ..)| list_runs(f.query()));
    // The agent filter's choices and the names of the agents runs carry.
    let agents = crate::resource::new(|| (), |_| agent_choices());
    poll_while(feed.failed, tick, POLL_EVERY);

    let import_error = Memo::new(move |_| query.read().get("import_error").filter(|e| !e.is_empty()));

    view! {
        <Title text="Runs · runlens"/>
        <div class="page-head">
            <h1>"Runs"</h1>
            <div class="actions">
                <a class="button" href=move || filters.read().export_href() download="runs.jsonl"
                    data-testid="runs-export"
                    title="Every run these filters select, with its steps and tool calls, as JSON lines">
                    "Export JSONL"
                </a>
                <ImportForm/>
                <a class="button primary" href="/playground">"New run"</a>
            </div>
        </div>
        {move || import_error.get().map(|e| view! {
            <ErrorBox message=format!("Import failed: {e}") testid="import-error"/>
        })}
        <Loaded load=move || async move { agents.await } loading="Loading filters…" let:agents>
            <FilterForm filters agents/>
        </Loaded>
        <Loaded load=move || async move { Ok((runs.await?, agents.await.unwrap_or_default())) }
            loading="Loading runs…" keep_previous=true let:loaded>
            <RunTable list=loaded.0 agents=Arc::new(loaded.1) filters=filters.get_untracked()/>
        </Loaded>
    }
}

/// File picker and button that import a run state document.
#[component]
fn ImportForm() -> impl IntoView {
    view! {
        <form method="post" action="/runs/import" enctype="multipart/form-data"
            class="import-form" data-testid="import-run">
            <label class="import-pick" title="A run state document (.json) exported from a trace page">
                <span>"Import"</span>
                <input type="file" name="file" accept=".json,application/json" required
                    data-testid="import-file"/>
            </label>
            <button type="submit" class="button" data-testid="import-submit">"Import run"</button>
        </form>
    }
}

/// The table of one page of runs (grouped by agent when asked), or the
/// empty message, plus pagination.
#[component]
fn RunTable(list: RunList, agents: Arc<Vec<AgentChoice>>, filters: Filters) -> impl IntoView {
    let RunList { page, now, pricing, role: _, scores } = list;
    if page.runs.is_empty() {
        // Filtered: the way out is to clear them (keeping how the list is
        // shown); past the last page, back to the first; else a first run.
        let (message, href, action) = if filters.is_filtered() {
            let cleared = Filters { all: filters.all, group: filters.group.clone(), ..Filters::default() };
            ("No runs match these filters.", cleared.with_cursor(""), "Clear filters")
        } else if !filters.cursor.is_empty() {
            ("No more runs.", filters.with_cursor(""), "Back to the first page")
        } else {
            ("No runs yet. Start one from the playground.", "/playground".to_owned(), "Open the playground →")
        };
        return view! {
            <div class="empty" data-testid="runs-empty">
                <p>{message}</p>
                <p><a href=href data-testid="runs-empty-action">{action}</a></p>
            </div>
        }
        .into_any();
    }
    let names: Arc<Vec<(String, String)>> = Arc::new(agents.iter().map(|a| (a.id.clone(), a.name.clone())).collect());
    let next = page.next_cursor.map(|c| filters.with_cursor(&c));
    let first = (!filters.cursor.is_empty()).then(|| filters.with_cursor(""));
    let with_costs = priced(page.runs, &pricing);
    let matches = page.matches;
    let tables = match filters.grouping() {
        None => view! { <RunsTable runs=with_costs now names select=true matches scores/> }.into_any(),
        Some(grouping) => {
            let key = move |r: &Run| match grouping {
                Grouping::Agent => r.agent_id.clone(),
                Grouping::Session => r.session_id.clone(),
            };
            group_by(with_costs, key)
                .into_iter()
                .map(|(key, runs)| {
                    let count = runs.len();
                    let tokens: u64 = runs.iter().map(|(r, _)| r.usage.total_tokens).sum();
                    let cost = runs.iter().try_fold(0.0, |sum, (_, c)| c.map(|c| sum + c));
                    let heading = match (&key, grouping) {
                        (Some(id), Grouping::Agent) => {
                            let href = format!("/agents/{}", format::url_encode(id));
                            view! { <a href=href>{agent_name(&names, id)}</a> }.into_any()
                        }
                        (Some(id), Grouping::Session) => {
                            let href = format!("/sessions/{}", format::url_encode(id));
                            view! { <a href=href>"Session " <span class="mono">{id.clone()}</span></a> }.into_any()
                        }
                        (None, Grouping::Agent) => view! { <span class="muted">"No saved agent"</span> }.into_any(),
                        (None, Grouping::Session) => view! { <span class="muted">"No session"</span> }.into_any(),
                    };
                    let (agent, session) = match grouping {
                        Grouping::Agent => (key.clone().unwrap_or_default(), String::new()),
                        Grouping::Session => (String::new(), key.clone().unwrap_or_default()),
                    };
                    view! {
                        <section class="run-group" data-testid="run-group" data-agent=agent data-session=session>
                            <h3 class="run-group-head">
                                {heading}
                                <span class="count">
                                    {count} {if count == 1 { " run" } else { " runs" }} " · "
                                    {thousands(tokens)} " tokens · " {cost_text(cost)}
                                </span>
                            </h3>
                            <RunsTable runs now names=names.clone() select=true matches=matches.clone()
                                scores=scores.clone()/>
                        </section>
                    }
                })
                .collect::<Vec<_>>()
                .into_any()
        }
    };
    view! {
        <CompareSelected/>
        {tables}
        <nav class="pager">
            {first.map(|href| view! { <a href=href data-testid="first-page">"← First page"</a> })}
            {next.map(|href| view! { <a href=href data-testid="next-page">"Next →"</a> })}
        </nav>
    }
    .into_any()
}

/// A run and its cost (`None`: its model has no price).
type RunCost = (Run, Option<f64>);

/// Runs by `key` (the saved agent they started from, their session), in
/// order of first appearance; runs without one last.
fn group_by(runs: Vec<RunCost>, key: impl Fn(&Run) -> Option<String>) -> Vec<(Option<String>, Vec<RunCost>)> {
    let mut groups: Vec<(Option<String>, Vec<RunCost>)> = Vec::new();
    for (run, cost) in runs {
        let key = key(&run);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, list)) => list.push((run, cost)),
            None => groups.push((key, vec![(run, cost)])),
        }
    }
    groups.sort_by_key(|(k, _)| k.is_none());
    groups
}

/// Each run with its cost from the project's prices.
pub(crate) fn priced(runs: Vec<Run>, pricing: &runlens_engine::cost::Pricing) -> Vec<(Run, Option<f64>)> {
    runs.into_iter()
        .map(|run| {
            let cost = pricing.run_cost_usd(&run);
            (run, cost)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, agent: Option<&str>) -> Run {
        let mut run: Run = serde_json::from_value(serde_json::json!({
            "id": id, "name": "", "status": "done", "model": "builtin", "model_settings": null,
            "system_prompt": null, "initial_prompt": "p", "input": null, "tools": [], "tags": {},
            "context": null, "max_turns": 10, "agent_id": null, "result": null, "summary": null,
            "failure_reason": null, "usage": {}, "step_count": 1,
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            "started_at": null, "finished_at": null,
        }))
        .unwrap();
        run.agent_id = agent.map(str::to_string);
        run
    }

    #[test]
    fn runs_group_by_agent_in_order_with_no_agent_last() {
        let runs = vec![
            (run("1", None), None),
            (run("2", Some("b")), Some(1.0)),
            (run("3", Some("a")), None),
            (run("4", Some("b")), Some(2.0)),
        ];
        let groups = group_by(runs, |r| r.agent_id.clone());
        let shape: Vec<(Option<&str>, Vec<&str>)> =
            groups.iter().map(|(k, list)| (k.as_deref(), list.iter().map(|(r, _)| r.id.as_str()).collect())).collect();
        assert_eq!(shape, vec![(Some("b"), vec!["2", "4"]), (Some("a"), vec!["3"]), (None, vec!["1"])]);
    }

    #[test]
    fn runs_group_by_session_with_runs_of_no_session_last() {
        let mut a = run("1", None);
        a.session_id = Some("s1".into());
        let groups = group_by(vec![(run("0", None), None), (a, None)], |r| r.session_id.clone());
        let keys: Vec<Option<&str>> = groups.iter().map(|(k, _)| k.as_deref()).collect();
        assert_eq!(keys, [Some("s1"), None]);
    }
}
