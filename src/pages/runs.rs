//! `/runs`: the run list, with status/outcome/tag/text/agent/metadata
//! filters and cursor pagination.
//!
//! Filters live in the URL query (`status`, `outcome`, `tag`, `q`, `agent`, `metadata`,
//! `session_id`, `user`, `all`, `group`, `cursor`) and are set by a plain GET form, so the page
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
use runlens_engine::model::{OutcomeFilter, Run, RunStatus};

use crate::api::run_tree::agent_name;
use crate::api::{agent_choices, list_runs, AgentChoice, RunList, RunsQuery};
use crate::components::token_chart::{cost_text, thousands};
use crate::components::{ErrorBox, Loaded};
use crate::format;
use crate::live_updates::poll_while;
use crate::live_updates::RunsFeed;
pub use crate::pages::runs_table::{CompareSelected, MetadataChips, RunsTable, SessionChips};

/// How often the list refetches while the live event stream is down.
const POLL_EVERY: Duration = Duration::from_secs(15);

/// The filters as read from the query string; empty string means "any".
#[derive(Clone, Debug, Default, PartialEq)]
struct Filters {
    status: String,
    outcome: String,
    tag: String,
    q: String,
    agent: String,
    metadata: String,
    /// Runs of this session.
    session_id: String,
    /// Runs that served this end user.
    user: String,
    /// Child runs too.
    all: bool,
    /// `agent` or `session`: group the page's runs by agent or by session.
    group: String,
    cursor: String,
}

impl Filters {
    fn is_filtered(&self) -> bool {
        !(self.status.is_empty()
            && self.outcome.is_empty()
            && self.tag.is_empty()
            && self.q.is_empty()
            && self.agent.is_empty()
            && self.metadata.is_empty()
            && self.session_id.is_empty()
            && self.user.is_empty())
    }

    /// What the page's runs are grouped by, if anything.
    fn grouping(&self) -> Option<Grouping> {
        match self.group.as_str() {
            "agent" => Some(Grouping::Agent),
            "session" => Some(Grouping::Session),
            _ => None,
        }
    }

    /// Query string for the same filters at another cursor.
    fn with_cursor(&self, cursor: &str) -> String {
        self.href(cursor, "")
    }

    /// The list's URL with these filters but `without` (a parameter name),
    /// at `cursor`.
    fn href(&self, cursor: &str, without: &str) -> String {
        let pairs = [
            ("status", self.status.as_str()),
            ("outcome", self.outcome.as_str()),
            ("tag", self.tag.as_str()),
            ("q", self.q.as_str()),
            ("agent", self.agent.as_str()),
            ("metadata", self.metadata.as_str()),
            ("session_id", self.session_id.as_str()),
            ("user", self.user.as_str()),
            ("all", if self.all { "1" } else { "" }),
            ("group", self.group.as_str()),
            ("cursor", cursor),
        ];
        let qs = format::query_string(pairs.into_iter().filter(|(k, _)| *k != without));
        if qs.is_empty() {
            "/runs".to_string()
        } else {
            format!("/runs?{qs}")
        }
    }

    /// The JSON-lines export of the runs these filters select (every page).
    fn export_href(&self) -> String {
        let (tag, metadata) = (format::key_value(&self.tag), format::key_value(&self.metadata));
        let pairs = [
            ("status", self.status.as_str()),
            ("outcome", self.outcome.as_str()),
            ("tag", tag.as_str()),
            ("q", self.q.trim()),
            ("agent_id", self.agent.as_str()),
            ("metadata", metadata.as_str()),
            ("session_id", self.session_id.as_str()),
            ("user", self.user.as_str()),
            ("all", if self.all { "true" } else { "" }),
        ];
        format!("/api/exports/runs?{}", format::query_string(pairs)).trim_end_matches('?').to_owned()
    }

    fn query(&self) -> RunsQuery {
        RunsQuery {
            status: some(&self.status),
            outcome: some(&self.outcome),
            tag: some(&self.tag),
            q: some(&self.q),
            agent: some(&self.agent),
            metadata: some(&self.metadata),
            session_id: some(&self.session_id),
            user: some(&self.user),
            all: self.all,
            cursor: some(&self.cursor),
        }
    }
}

/// What the runs of a page can be grouped by.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Grouping {
    Agent,
    Session,
}

fn some(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

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

/// The filters: a plain GET form (it works without JavaScript).
#[component]
fn FilterForm(filters: Memo<Filters>, agents: Vec<AgentChoice>) -> impl IntoView {
    let status_options = RunStatus::ALL
        .into_iter()
        .map(|s| {
            let name = s.as_str();
            view! {
                <option value=name selected=move || filters.read().status == name>
                    {name}
                </option>
            }
        })
        .collect::<Vec<_>>();
    let outcome_options = [
        (OutcomeFilter::Clean, "clean"),
        (OutcomeFilter::Issues, "with issues"),
        (OutcomeFilter::Rejected, "a call rejected"),
        (OutcomeFilter::ToolError, "a tool error"),
    ]
    .into_iter()
    .map(|(o, text)| {
        let name = o.as_str();
        view! { <option value=name selected=move || filters.read().outcome == name>{text}</option> }
    })
    .collect::<Vec<_>>();
    let agent_options = agents
        .into_iter()
        .map(|a| {
            let id = a.id.clone();
            view! { <option value=a.id selected=move || filters.read().agent == id>{a.name}</option> }
        })
        .collect::<Vec<_>>();
    // The words the search box holds, checked as the server checks them.
    let q_error = Memo::new(move |_| {
        let filter = runlens_engine::model::RunFilter { q: Some(filters.read().q.clone()), ..Default::default() };
        // Said of the box, not of the API's parameter.
        filter.search_words().err().map(|e| e.replacen("q has", "The search has", 1))
    });
    view! {
        <form method="get" action="/runs" class="filters" data-testid="runs-filter">
            <label>
                <span>"Status"</span>
                <select name="status" data-testid="filter-status">
                    <option value="" selected=move || filters.read().status.is_empty()>
                        "any"
                    </option>
                    {status_options}
                </select>
            </label>
            <label>
                <span>"Outcome"</span>
                <select name="outcome" data-testid="filter-outcome">
                    <option value="" selected=move || filters.read().outcome.is_empty()>"any"</option>
                    {outcome_options}
                </select>
            </label>
            <label>
                <span>"Agent"</span>
                <select name="agent" data-testid="filter-agent">
                    <option value="" selected=move || filters.read().agent.is_empty()>"any"</option>
                    {agent_options}
                </select>
            </label>
            <label>
                <span>"Tag"</span>
                <input type="text" name="tag" placeholder="key:value" data-testid="filter-tag"
                    value=move || filters.read().tag.clone()/>
            </label>
            <label>
                <span>"Metadata"</span>
                <input type="text" name="metadata" placeholder="key:value" data-testid="filter-metadata"
                    value=move || filters.read().metadata.clone()/>
            </label>
            <label class="grow">
                <span>"Search"</span>
                <input type="search" name="q" placeholder="words in prompts, answers, tool calls, errors…"
                    data-testid="filter-q" value=move || filters.read().q.clone()
                    aria-invalid=move || q_error.get().is_some().then_some("true")
                    aria-describedby=move || q_error.get().is_some().then_some("filter-q-error")/>
                {move || q_error.get().map(|e| view! {
                    <span class="field-error" id="filter-q-error" data-testid="filter-q-error">{e}</span>
                })}
            </label>
            <label class="check">
                <input type="checkbox" name="all" value="1" checked=move || filters.read().all
                    data-testid="filter-all"/>
                "Show child runs"
            </label>
            <label>
                <span>"Group"</span>
                <select name="group" data-testid="filter-group">
                    <option value="" selected=move || filters.read().grouping().is_none()>"none"</option>
                    <option value="agent" selected=move || filters.read().grouping() == Some(Grouping::Agent)>
                        "by agent"
                    </option>
                    <option value="session" selected=move || filters.read().grouping() == Some(Grouping::Session)>
                        "by session"
                    </option>
                </select>
            </label>
            {move || scope_chips(&filters.read())}
            <button type="submit" class="button" data-testid="filter-submit">"Filter"</button>
            <a class="button subtle" href="/runs">"Clear"</a>
        </form>
    }
}

/// The session and end-user filters, when set (a run's chips set them):
/// kept by the form as hidden fields, each with a link that drops it.
fn scope_chips(f: &Filters) -> Vec<impl IntoView> {
    [("session_id", "session", &f.session_id), ("user", "user", &f.user)]
        .into_iter()
        .filter(|(_, _, value)| !value.is_empty())
        .map(|(name, label, value)| {
            let drop = f.href("", name);
            view! {
                <span class="tag scope" data-testid=format!("filter-{name}")>
                    <input type="hidden" name=name value=value.clone()/>
                    <span class="tag-key">{label}</span> " " <span class="tag-value">{value.clone()}</span>
                    " " <a href=drop aria-label=format!("Remove the {label} filter") data-testid="filter-drop">"×"</a>
                </span>
            }
        })
        .collect()
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
    let RunList { page, now, pricing, role: _ } = list;
    if page.runs.is_empty() {
        let message = if filters.is_filtered() || !filters.cursor.is_empty() {
            "No runs match these filters."
        } else {
            "No runs yet. Start one from the playground."
        };
        return view! {
            <div class="empty" data-testid="runs-empty">
                <p>{message}</p>
                <p><a href="/playground">"Open the playground →"</a></p>
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
        None => view! { <RunsTable runs=with_costs now names select=true matches/> }.into_any(),
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
                            <RunsTable runs now names=names.clone() select=true matches=matches.clone()/>
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
    fn filters_keep_every_field_across_pages() {
        let f = Filters {
            agent: "agent-1".into(),
            metadata: "customer:acme".into(),
            all: true,
            group: "agent".into(),
            ..Filters::default()
        };
        assert!(f.is_filtered() && f.grouping() == Some(Grouping::Agent));
        assert_eq!(f.with_cursor("c1"), "/runs?agent=agent-1&metadata=customer%3Aacme&all=1&group=agent&cursor=c1");
        let q = f.query();
        assert_eq!((q.agent.as_deref(), q.all, q.cursor), (Some("agent-1"), true, None));
        let by_session = Filters { session_id: "chat 1".into(), user: "ada".into(), group: "session".into(), ..f };
        assert_eq!(by_session.grouping(), Some(Grouping::Session));
        assert_eq!(
            by_session.href("", "user"),
            "/runs?agent=agent-1&metadata=customer%3Aacme&session_id=chat%201&all=1&group=session"
        );
        let q = by_session.query();
        assert_eq!((q.session_id.as_deref(), q.user.as_deref()), (Some("chat 1"), Some("ada")));
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
