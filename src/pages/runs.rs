//! `/runs`: the run list, with status/tag/text filters and cursor pagination.
//!
//! Filters live in the URL query (`status`, `tag`, `q`, `cursor`) and are set
//! by a plain GET form, so the page works and can be bookmarked without JS.
//! The hydrated page refetches when the all-runs event stream reports a
//! status change (debounced), and every 15 s while that stream is down.
//!
//! The Import control uploads a run state document (from a trace page's
//! Export) as a plain multipart form post to `POST /runs/import`, which
//! redirects to the new run or back here with `import_error=…`.

use std::time::Duration;

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use runlens_engine::model::{Run, RunStatus};

use crate::api::{list_runs, RunList};
use crate::components::token_chart::{cost_text, thousands};
use crate::components::{Badge, ErrorBox, Loaded};
use crate::format;
use crate::live_updates::poll_while;
use crate::live_updates::RunsFeed;

/// How often the list refetches while the live event stream is down.
const POLL_EVERY: Duration = Duration::from_secs(15);

/// The filters as read from the query string; empty string means "any".
#[derive(Clone, Debug, Default, PartialEq)]
struct Filters {
    status: String,
    tag: String,
    q: String,
    cursor: String,
}

impl Filters {
    fn is_filtered(&self) -> bool {
        !(self.status.is_empty() && self.tag.is_empty() && self.q.is_empty())
    }

    /// Query string for the same filters at another cursor.
    fn with_cursor(&self, cursor: &str) -> String {
        let qs = format::query_string([
            ("status", self.status.as_str()),
            ("tag", self.tag.as_str()),
            ("q", self.q.as_str()),
            ("cursor", cursor),
        ]);
        if qs.is_empty() {
            "/runs".to_string()
        } else {
            format!("/runs?{qs}")
        }
    }
}

fn some(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

#[component]
pub fn RunsPage() -> impl IntoView {
    let query = use_query_map();
    let filters = Memo::new(move |_| {
        let q = query.read();
        Filters {
            status: q.get("status").unwrap_or_default(),
            tag: q.get("tag").unwrap_or_default(),
            q: q.get("q").unwrap_or_default(),
            cursor: q.get("cursor").unwrap_or_default(),
        }
    });
    // Live: the feed's version moves on status changes; the slow poll only
    // runs while the stream is down.
    let feed = RunsFeed::get();
    let tick = RwSignal::new(0u64);
    let runs = Resource::new(
        move || (filters.get(), feed.version.get(), tick.get()),
        |(f, ..)| list_runs(some(&f.status), some(&f.tag), some(&f.q), some(&f.cursor)),
    );
    poll_while(feed.failed, tick, POLL_EVERY);

    let import_error = Memo::new(move |_| query.read().get("import_error").filter(|e| !e.is_empty()));
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

    view! {
        <Title text="Runs · runlens"/>
        <div class="page-head">
            <h1>"Runs"</h1>
            <div class="actions">
                <ImportForm/>
                <a class="button primary" href="/playground">"New run"</a>
            </div>
        </div>
        {move || import_error.get().map(|e| view! {
            <ErrorBox message=format!("Import failed: {e}") testid="import-error"/>
        })}
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
                <span>"Tag"</span>
                <input type="text" name="tag" placeholder="key:value" data-testid="filter-tag"
                    value=move || filters.read().tag.clone()/>
            </label>
            <label class="grow">
                <span>"Search"</span>
                <input type="search" name="q" placeholder="name or prompt" data-testid="filter-q"
                    value=move || filters.read().q.clone()/>
            </label>
            <button type="submit" class="button">"Filter"</button>
            <a class="button subtle" href="/runs">"Clear"</a>
        </form>
        <Loaded load=move || async move { runs.await } loading="Loading runs…" keep_previous=true let:list>
            <RunTable list filters=filters.get_untracked()/>
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

/// The table of one page of runs, or the empty message, plus pagination.
#[component]
fn RunTable(list: RunList, filters: Filters) -> impl IntoView {
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

    let rows = page
        .runs
        .into_iter()
        .map(|run| {
            let cost = pricing.run_cost_usd(&run);
            run_row(run, cost, now)
        })
        .collect::<Vec<_>>();
    let next = page.next_cursor.map(|c| filters.with_cursor(&c));
    let first = (!filters.cursor.is_empty()).then(|| filters.with_cursor(""));
    view! {
        <table class="table runs">
            <thead>
                <tr>
                    <th>"Status"</th>
                    <th>"Name"</th>
                    <th>"Model"</th>
                    <th class="num">"Steps"</th>
                    <th class="num">"Tokens"</th>
                    <th class="num" title="at today's prices (Settings)">"Cost"</th>
                    <th class="num">"Duration"</th>
                    <th>"Created (UTC)"</th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
        <nav class="pager">
            {first.map(|href| view! { <a href=href data-testid="first-page">"← First page"</a> })}
            {next.map(|href| view! { <a href=href data-testid="next-page">"Next →"</a> })}
        </nav>
    }
    .into_any()
}

fn run_row(run: Run, cost: Option<f64>, now: chrono::DateTime<chrono::Utc>) -> impl IntoView {
    let href = format!("/runs/{}", format::url_encode(&run.id));
    let name = if run.name.trim().is_empty() { run.id.clone() } else { run.name.clone() };
    let duration = format::opt_duration(run.duration_ms(now));
    view! {
        <tr data-testid="run-row" data-run-id=run.id.clone() data-status=run.status.as_str()>
            <td><Badge status=run.status.as_str()/></td>
            <td class="name">
                <a href=href>{name}</a>
                <div class="sub mono" title=run.id.clone()>{format::short_id(&run.id)}</div>
            </td>
            <td class="mono">{run.model}</td>
            <td class="num">{run.step_count}</td>
            <td class="num">{thousands(run.usage.total_tokens)}</td>
            <td class="num" data-testid="run-row-cost">{cost_text(cost)}</td>
            <td class="num">{duration}</td>
            <td class="nowrap" title=run.created_at.to_rfc3339()>
                {format::time(&run.created_at)}
            </td>
        </tr>
    }
}
