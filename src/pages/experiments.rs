//! `/experiments`: the project's experiments; `/experiments/:id`: one
//! experiment — its progress (refreshed while it runs), tokens and cost,
//! each scorer's mean and distribution, and its items with their runs in
//! pages — with Cancel for operators and a choice of another experiment of
//! the dataset to compare with; `/experiments/:id/compare?with=…`: the two
//! item by item (improved, regressed, unchanged), each row one click from
//! the step-aligned compare of its two runs.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};
use runlens_engine::model::{
    Experiment, ExperimentReport, ExperimentRow, ExperimentStatus, Role, RunStatus, ScoreSummary, ScorerAggregate,
};

use crate::api::experiments::{
    get_experiment, get_experiments, CancelExperiment, ExperimentView, ExperimentsView, ROWS_SHOWN,
};
use crate::components::token_chart::cost_text;
use crate::components::Loaded;
use crate::format;

mod compare;
mod dataset_form;
mod set;

pub use compare::ExperimentComparePage;
pub use dataset_form::DatasetExperiments;
pub use set::ExperimentSetPage;

/// How often a running experiment's page reads it again.
const REFRESH: std::time::Duration = std::time::Duration::from_millis(1500);
/// Characters of an input or output shown in a cell.
const CELL_CHARS: usize = 200;

/// A counter bumped every [`REFRESH`] while `running` holds: read in a
/// page's resource, it reads the page again while its experiments run.
fn refresh_while(running: RwSignal<bool>) -> RwSignal<u64> {
    let tick = RwSignal::new(0u64);
    Effect::new(move |_| {
        let bump = move || {
            if running.get_untracked() {
                tick.update(|t| *t += 1);
            }
        };
        if let Ok(handle) = set_interval_with_handle(bump, REFRESH) {
            on_cleanup(move || handle.clear());
        }
    });
    tick
}

/// A scorer's scores in a few words: `3 of 4 yes`, `mean 0.750`, `5 scores`.
fn headline(s: &ScoreSummary) -> String {
    match (s.yes + s.no, s.mean) {
        (n, _) if n > 0 => format!("{} of {} yes", s.yes, n),
        (_, Some(mean)) => format!("mean {mean:.3}"),
        _ => format!("{} scores", s.count),
    }
}

/// A run's scores as chips: `name: yes`, `name: 0.75`, `name: LABEL`.
fn score_chips(scores: &[ScoreSummary]) -> Vec<AnyView> {
    scores
        .iter()
        .map(|s| {
            let value = match (s.yes + s.no, s.mean) {
                (n, _) if n > 0 => if s.yes > 0 { "yes" } else { "no" }.to_owned(),
                (_, Some(m)) => format!("{m:.2}"),
                _ => s.labels.first().map(|(l, _)| l.clone()).unwrap_or_default(),
            };
            view! { <span class="score-chip">{s.name.clone()} ": " <strong>{value}</strong></span> " " }.into_any()
        })
        .collect()
}

fn clipped(text: &str) -> String {
    if text.chars().count() <= CELL_CHARS {
        return text.to_owned();
    }
    text.chars().take(CELL_CHARS).collect::<String>() + "…"
}

fn experiment_href(id: &str) -> String {
    format!("/experiments/{}", format::url_encode(id))
}

fn set_href(id: &str) -> String {
    format!("/experiments/sets/{}", format::url_encode(id))
}

fn status_badge(status: ExperimentStatus) -> impl IntoView {
    let class = match status {
        ExperimentStatus::Running => "badge badge-running",
        ExperimentStatus::Done => "badge badge-done",
        ExperimentStatus::Cancelled => "badge badge-cancelled",
    };
    view! { <span class=class data-testid="experiment-status">{status.as_str()}</span> }
}

/// What an experiment runs: `agent v3` or a model, and how its tools answer.
fn what_runs(e: &Experiment) -> String {
    let target = match (&e.spec.agent_id, e.spec.agent_version, &e.spec.model) {
        (Some(agent), Some(v), _) => format!("agent {agent} v{v}"),
        (Some(agent), None, _) => format!("agent {agent}"),
        (None, _, Some(model)) => format!("model {model}"),
        _ => "—".into(),
    };
    format!("{target} · {} tools", e.spec.tool_mode.as_str())
}

fn experiment_not_found() -> impl IntoView {
    view! {
        <Title text="Experiment not found · runlens"/>
        <p class="empty" data-testid="experiment-not-found">
            "No such experiment in this project. " <a href="/experiments">"All experiments"</a>
        </p>
    }
}

#[component]
pub fn ExperimentsPage() -> impl IntoView {
    let query = use_query_map();
    let dataset = Memo::new(move |_| query.read().get("dataset"));
    let list = crate::resource::new(move || dataset.get(), get_experiments);
    view! {
        <Title text="Experiments · runlens"/>
        <div class="page-head">
            <h1>"Experiments"</h1>
        </div>
        <p class="muted">
            "An agent or a model run over every item of a dataset version, scored. Start one from a "
            <a href="/datasets">"dataset"</a> "'s page or through the API ("
            <a href="/api/docs#tag/experiments">"experiments"</a> ")."
        </p>
        <Loaded load=move || async move { list.await } loading="Loading the experiments…" keep_previous=true let:view>
            <ExperimentList view/>
        </Loaded>
    }
}

#[component]
pub fn ExperimentList(view: ExperimentsView) -> impl IntoView {
    if view.experiments.is_empty() {
        return view! { <p class="empty" data-testid="experiments-empty">"No experiments yet."</p> }.into_any();
    }
    let rows = view.experiments.into_iter().map(experiment_row).collect::<Vec<_>>();
    view! {
        <div class="table-scroll">
            <table class="table" data-testid="experiments-table">
                <thead>
                    <tr>
                        <th scope="col">"Name"</th>
                        <th scope="col">"Status"</th>
                        <th scope="col">"Dataset"</th>
                        <th scope="col">"Runs"</th>
                        <th scope="col" class="num">"Items"</th>
                        <th scope="col">"Started (UTC)"</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
    .into_any()
}

fn experiment_row(e: Experiment) -> impl IntoView {
    let dataset = format!("/datasets/{}", format::url_encode(&e.dataset_id));
    view! {
        <tr data-testid="experiment-row" data-name=e.name.clone()>
            <td>
                <a href=experiment_href(&e.id)>{e.name.clone()}</a>
                {e.set_id.as_deref().map(|set| view! {
                    " " <a class="score-chip" href=set_href(set) data-testid="experiment-row-set">"models side by side"</a>
                })}
            </td>
            <td>{status_badge(e.status)}</td>
            <td><a href=dataset>{e.dataset_name.clone()}</a> " v" {e.dataset_version}</td>
            <td class="muted">{what_runs(&e)}</td>
            <td class="num">{e.item_count}</td>
            <td class="nowrap" title=e.created_at.to_rfc3339()>{format::time(&e.created_at)}</td>
        </tr>
    }
}

#[component]
pub fn ExperimentPage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let cursor = Memo::new(move |_| query.read().get("cursor"));
    let cancel = ServerAction::<CancelExperiment>::new();
    let running = RwSignal::new(false);
    let tick = refresh_while(running);
    let data = crate::resource::new(
        move || (id.get(), cursor.get(), tick.get(), cancel.version().get()),
        |(id, c, _, _)| get_experiment(id, c),
    );
    view! {
        <Loaded load=move || async move { data.await } loading="Loading the experiment…" keep_previous=true let:view>
            {match view {
                Some(view) => {
                    running.set(view.report.experiment.status == ExperimentStatus::Running);
                    view! { <ExperimentDetail view cancel/> }.into_any()
                }
                None => experiment_not_found().into_any(),
            }}
        </Loaded>
    }
}

#[component]
fn ExperimentDetail(view: ExperimentView, cancel: ServerAction<CancelExperiment>) -> impl IntoView {
    let ExperimentView { report, rows, others, role } = view;
    let ExperimentReport { experiment: e, progress, usage, cost_usd, scorers } = report;
    let title = format::rcdata_text(&format!("{} · experiments · runlens", e.name));
    let href = experiment_href(&e.id);
    let dataset = format!("/datasets/{}", format::url_encode(&e.dataset_id));
    let operator = role.is_some_and(|r| r >= Role::Operator);
    let cancel_form = (operator && e.status == ExperimentStatus::Running).then(|| {
        let id = e.id.clone();
        view! {
            <ActionForm action=cancel attr:class="inline-form" attr:data-testid="experiment-cancel">
                <input type="hidden" name="id" value=id/>
                <button type="submit" class="button danger">"Cancel the experiment"</button>
            </ActionForm>
        }
    });
    let cancel_error = move || {
        cancel.value().with(|v| match v {
            Some(Err(err)) => Some(view! { <p class="inline-error" role="alert">{err.message.clone()}</p> }),
            _ => None,
        })
    };
    let ended = progress.done + progress.failed + progress.cancelled;
    let pct = (ended * 100).checked_div(progress.items).unwrap_or(0);
    let compare = (!others.is_empty()).then(|| {
        let options = others
            .iter()
            .map(|o| view! { <option value=o.id.clone()>{format!("{} ({})", o.name, format::time(&o.created_at))}</option> })
            .collect::<Vec<_>>();
        view! {
            <form method="get" action=format!("{href}/compare") class="inline-form" data-testid="experiment-compare-form">
                <label class="field inline">
                    <span>"Compare with"</span>
                    <select name="with" data-testid="experiment-compare-with">{options}</select>
                </label>
                <button type="submit" class="button subtle">"Compare"</button>
            </form>
        }
    });
    let next = rows.next_cursor.clone().map(|c| {
        let link = format!("{href}?{}", format::query_string([("cursor", c.as_str())]));
        view! { <a class="button subtle" href=link data-testid="experiment-next">"Next " {ROWS_SHOWN} " items →"</a> }
    });
    let scorer_cards = scorers.into_iter().map(scorer_card).collect::<Vec<_>>();
    let no_scores = scorer_cards.is_empty().then(|| {
        view! { <p class="muted" data-testid="experiment-no-scores">"No scores yet."</p> }
    });
    let row_views = rows.rows.into_iter().map(row_view).collect::<Vec<_>>();
    view! {
        <Title text=title/>
        <div class="page-head">
            <div>
                <div class="crumbs"><a href="/experiments">"Experiments"</a> " /"</div>
                <h1 data-testid="experiment-title">{e.name.clone()} " " {status_badge(e.status)}</h1>
            </div>
            <div class="inline-form">{compare} {cancel_form}</div>
        </div>
        {cancel_error}
        <dl class="facts" data-testid="experiment-facts">
            <div class="fact"><dt>"Dataset"</dt><dd><a href=dataset>{e.dataset_name.clone()}</a> " v" {e.dataset_version}</dd></div>
            <div class="fact"><dt>"Runs"</dt><dd>{what_runs(&e)}</dd></div>
            {e.set_id.clone().map(|set| view! {
                <div class="fact">
                    <dt>"Models"</dt>
                    <dd><a href=set_href(&set) data-testid="experiment-set-link">"Side by side with the set's other models"</a></dd>
                </div>
            })}
            <div class="fact">
                <dt>"Progress"</dt>
                <dd data-testid="experiment-progress">
                    {ended} " of " {progress.items} " ended"
                    {(progress.waiting > 0).then(|| format!(" · {} waiting for approval", progress.waiting))}
                    {(progress.running > 0).then(|| format!(" · {} running", progress.running))}
                    <div class="meter" role="progressbar" aria-valuemin="0" aria-valuemax="100" aria-valuenow=pct
                        aria-label="Items ended">
                        <span style=format!("width: {pct}%")></span>
                    </div>
                </dd>
            </div>
            <div class="fact">
                <dt>"Outcomes"</dt>
                <dd>{progress.done} " done · " {progress.failed} " failed · " {progress.cancelled} " cancelled"</dd>
            </div>
            <div class="fact"><dt>"Tokens"</dt><dd>{usage.total_tokens}</dd></div>
            <div class="fact"><dt>"Cost"</dt><dd data-testid="experiment-cost">{cost_text(cost_usd)}</dd></div>
            <div class="fact"><dt>"Started"</dt><dd>{format::time(&e.created_at)} " by " {e.created_by.name.clone()}</dd></div>
        </dl>
        <h2>"Scores"</h2>
        <div class="scorer-cards" data-testid="experiment-scorers">{scorer_cards} {no_scores}</div>
        <h2>"Items"</h2>
        <div class="table-scroll">
            <table class="table" data-testid="experiment-rows">
                <thead>
                    <tr>
                        <th scope="col">"Input"</th>
                        <th scope="col">"Expected"</th>
                        <th scope="col">"Status"</th>
                        <th scope="col">"Output"</th>
                        <th scope="col">"Scores"</th>
                        <th scope="col" class="num">"Cost"</th>
                        <th scope="col" class="num">"Duration"</th>
                    </tr>
                </thead>
                <tbody>{row_views}</tbody>
            </table>
        </div>
        {next}
    }
}

fn scorer_card(agg: ScorerAggregate) -> impl IntoView {
    let s = agg.summary;
    let headline = headline(&s);
    let most = agg.distribution.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    let bars = agg
        .distribution
        .into_iter()
        .map(|b| {
            let width = b.count * 100 / most;
            view! {
                <li>
                    <span class="dist-label">{b.label}</span>
                    <span class="dist-bar"><span style=format!("width: {width}%")></span></span>
                    <span class="dist-count num">{b.count}</span>
                </li>
            }
        })
        .collect::<Vec<_>>();
    let name = s.name.clone();
    view! {
        <section class="card scorer-card" data-testid="scorer-card" data-name=name>
            <h3>{s.name}</h3>
            <p class="scorer-headline">{headline} <span class="muted">" · " {s.count} " runs"</span></p>
            <ul class="distribution">{bars}</ul>
        </section>
    }
}

fn run_status_badge(status: Option<RunStatus>) -> impl IntoView {
    match status {
        Some(s) => view! { <span class=format!("badge badge-{}", s.as_str())>{s.as_str()}</span> }.into_any(),
        None => view! { <span class="muted">"not started"</span> }.into_any(),
    }
}

fn row_view(row: ExperimentRow) -> impl IntoView {
    let expected = row.expected.as_ref().map(|v| match v {
        serde_json::Value::String(s) => clipped(s),
        other => clipped(&other.to_string()),
    });
    let scores = score_chips(&row.scores);
    let input = match &row.run_id {
        Some(run) => {
            let href = format!("/runs/{}", format::url_encode(run));
            view! { <a href=href data-testid="experiment-row-trace">{clipped(&row.input)}</a> }.into_any()
        }
        None => view! { <span>{clipped(&row.input)}</span> }.into_any(),
    };
    let duration = row.duration_ms.map(|ms| format::duration_ms(ms as i64)).unwrap_or_default();
    view! {
        <tr data-testid="experiment-row-item" data-item-id=row.item_id.clone()>
            <td class="score-comment">{input}</td>
            <td class="score-comment mono">{expected}</td>
            <td>{run_status_badge(row.status)}</td>
            <td class="score-comment">{row.output.as_deref().map(clipped)}</td>
            <td>{scores}</td>
            <td class="num">{cost_text(row.cost_usd)}</td>
            <td class="num nowrap">{duration}</td>
        </tr>
    }
}
