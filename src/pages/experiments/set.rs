//! `/experiments/sets/:id`: the experiments of several models over one
//! dataset version side by side — each model's progress, scores, tokens and
//! cost (the best of each scorer marked), then the items in pages with every
//! model's answer and scores beside each other, each one click from its
//! trace. Read again while any of them runs.

use std::collections::HashMap;

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};
use runlens_engine::model::{ExperimentReport, ExperimentRow, ExperimentRows, ExperimentStatus, ScoreSummary};

use super::{clipped, experiment_href, headline, refresh_while, score_chips, status_badge};
use crate::api::experiments::{get_experiment_set, ExperimentSetView, SET_ROWS_SHOWN};
use crate::components::token_chart::cost_text;
use crate::components::Loaded;
use crate::format;

#[component]
pub fn ExperimentSetPage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let cursor = Memo::new(move |_| query.read().get("cursor"));
    let running = RwSignal::new(false);
    let tick = refresh_while(running);
    let data =
        crate::resource::new(move || (id.get(), cursor.get(), tick.get()), |(id, c, _)| get_experiment_set(id, c));
    view! {
        <Loaded load=move || async move { data.await } loading="Loading the experiments…" keep_previous=true let:view>
            {match view {
                Some(view) => {
                    let busy = view.set.reports.iter().any(|r| r.experiment.status == ExperimentStatus::Running);
                    running.set(busy);
                    view! { <SetDetail view/> }.into_any()
                }
                None => view! {
                    <Title text="Experiments not found · runlens"/>
                    <p class="empty" data-testid="experiment-set-not-found">
                        "No such set of experiments in this project. " <a href="/experiments">"All experiments"</a>
                    </p>
                }
                .into_any(),
            }}
        </Loaded>
    }
}

/// A model's scorer value to rank by: the share of yes, else the mean.
fn rank_value(s: &ScoreSummary) -> Option<f64> {
    match s.yes + s.no {
        0 => s.mean,
        n => Some(f64::from(s.yes) / f64::from(n)),
    }
}

/// The model an experiment of a set runs (its agent's, when none was given).
fn model_of(r: &ExperimentReport) -> String {
    let e = &r.experiment;
    match (&e.spec.model, &e.spec.agent_id) {
        (Some(model), Some(agent)) => format!("{model} (agent {agent})"),
        (Some(model), None) => model.clone(),
        (None, _) => e.name.clone(),
    }
}

#[component]
fn SetDetail(view: ExperimentSetView) -> impl IntoView {
    let ExperimentSetView { set, rows } = view;
    let Some(first) = set.reports.first() else {
        return view! { <p class="empty">"This set has no experiments."</p> }.into_any();
    };
    let e = &first.experiment;
    let title = format!("{} v{}: {} models", e.dataset_name, e.dataset_version, set.reports.len());
    let dataset = format!("/datasets/{}", format::url_encode(&e.dataset_id));
    let base_id = e.id.clone();
    // Every scorer of any of them, in the order they first appear.
    let mut scorer_names: Vec<String> = Vec::new();
    for r in &set.reports {
        for a in &r.scorers {
            if !scorer_names.contains(&a.summary.name) {
                scorer_names.push(a.summary.name.clone());
            }
        }
    }
    let best: Vec<Option<f64>> = scorer_names
        .iter()
        .map(|name| {
            set.reports
                .iter()
                .filter_map(|r| r.scorers.iter().find(|a| &a.summary.name == name).and_then(|a| rank_value(&a.summary)))
                .fold(None, |best: Option<f64>, v| Some(best.map_or(v, |b| b.max(v))))
        })
        .collect();
    let scorer_heads = scorer_names.iter().map(|n| view! { <th scope="col">{n.clone()}</th> }).collect::<Vec<_>>();
    let model_rows = set
        .reports
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let p = &r.progress;
            let ended = p.done + p.failed + p.cancelled;
            let cells = scorer_names
                .iter()
                .zip(&best)
                .map(|(name, best)| match r.scorers.iter().find(|a| &a.summary.name == name) {
                    Some(a) => {
                        let top = rank_value(&a.summary).is_some() && rank_value(&a.summary) == *best;
                        let text = headline(&a.summary);
                        if top {
                            view! { <td data-testid="set-score" data-best="true"><strong>{text}</strong> " ★"</td> }
                                .into_any()
                        } else {
                            view! { <td data-testid="set-score">{text}</td> }.into_any()
                        }
                    }
                    None => view! { <td class="muted">"—"</td> }.into_any(),
                })
                .collect::<Vec<_>>();
            let compare = (i > 0).then(|| {
                let href = format!(
                    "{}/compare?{}",
                    experiment_href(&base_id),
                    format::query_string([("with", r.experiment.id.as_str())])
                );
                view! { <a href=href data-testid="set-compare">"item by item vs first"</a> }
            });
            view! {
                <tr data-testid="set-model-row">
                    <th scope="row"><a href=experiment_href(&r.experiment.id)>{model_of(r)}</a></th>
                    <td>{status_badge(r.experiment.status)}</td>
                    <td class="num">{ended} " of " {p.items}</td>
                    {cells}
                    <td class="num">{r.usage.total_tokens}</td>
                    <td class="num">{cost_text(r.cost_usd)}</td>
                    <td>{compare}</td>
                </tr>
            }
        })
        .collect::<Vec<_>>();
    let model_heads = set.reports.iter().map(|r| view! { <th scope="col">{model_of(r)}</th> }).collect::<Vec<_>>();
    let next = rows.first().and_then(|r| r.next_cursor.clone()).map(|c| {
        let link = format!(
            "/experiments/sets/{}?{}",
            format::url_encode(&set.set_id),
            format::query_string([("cursor", c.as_str())])
        );
        view! { <a class="button subtle" href=link data-testid="set-next">"Next " {SET_ROWS_SHOWN} " items →"</a> }
    });
    let item_rows = item_rows(rows);
    view! {
        <Title text=format::rcdata_text(&format!("{title} · experiments · runlens"))/>
        <div class="page-head">
            <div>
                <div class="crumbs"><a href="/experiments">"Experiments"</a> " /"</div>
                <h1 data-testid="experiment-set-title">{title}</h1>
            </div>
        </div>
        <p class="muted">
            "The same items of " <a href=dataset>{e.dataset_name.clone()}</a> " v" {e.dataset_version}
            ", run once per model with the same settings, tools and scorers. ★ marks the best of each scorer."
        </p>
        <div class="table-scroll">
            <table class="table" data-testid="experiment-set-models">
                <caption class="visually-hidden">"Each model's progress, scores, tokens and cost"</caption>
                <thead>
                    <tr>
                        <th scope="col">"Model"</th>
                        <th scope="col">"Status"</th>
                        <th scope="col" class="num">"Ended"</th>
                        {scorer_heads}
                        <th scope="col" class="num">"Tokens"</th>
                        <th scope="col" class="num">"Cost"</th>
                        <th scope="col">"Compare"</th>
                    </tr>
                </thead>
                <tbody>{model_rows}</tbody>
            </table>
        </div>
        <h2>"Items"</h2>
        <div class="table-scroll">
            <table class="table" data-testid="experiment-set-items">
                <thead>
                    <tr>
                        <th scope="col">"Input"</th>
                        <th scope="col">"Expected"</th>
                        {model_heads}
                    </tr>
                </thead>
                <tbody>{item_rows}</tbody>
            </table>
        </div>
        {next}
    }
    .into_any()
}

/// One table row per item of the first experiment's page, with each
/// experiment's row of the same item (the same dataset version, so the
/// same items) in its column.
fn item_rows(rows: Vec<ExperimentRows>) -> Vec<AnyView> {
    let mut columns: Vec<HashMap<String, ExperimentRow>> = Vec::with_capacity(rows.len());
    let mut order: Vec<(String, String, Option<serde_json::Value>)> = Vec::new();
    for (i, page) in rows.into_iter().enumerate() {
        let mut by_item = HashMap::new();
        for row in page.rows {
            if i == 0 {
                order.push((row.item_id.clone(), row.input.clone(), row.expected.clone()));
            }
            by_item.insert(row.item_id.clone(), row);
        }
        columns.push(by_item);
    }
    order
        .into_iter()
        .map(|(item, input, expected)| {
            let expected = expected.map(|v| match v {
                serde_json::Value::String(s) => clipped(&s),
                other => clipped(&other.to_string()),
            });
            let cells = columns
                .iter()
                .map(|col| match col.get(&item) {
                    Some(row) => model_cell(row),
                    None => view! { <td class="muted">"—"</td> }.into_any(),
                })
                .collect::<Vec<_>>();
            view! {
                <tr data-testid="set-item" data-item-id=item>
                    <td class="score-comment">{clipped(&input)}</td>
                    <td class="score-comment mono">{expected}</td>
                    {cells}
                </tr>
            }
            .into_any()
        })
        .collect()
}

/// One model's answer to an item: its output (linked to the trace) and scores.
fn model_cell(row: &ExperimentRow) -> AnyView {
    let output = row.output.as_deref().map(clipped).unwrap_or_else(|| "not run yet".to_owned());
    let answer = match &row.run_id {
        Some(run) => {
            let href = format!("/runs/{}", format::url_encode(run));
            view! { <a href=href data-testid="set-item-trace">{output}</a> }.into_any()
        }
        None => view! { <span class="muted">{output}</span> }.into_any(),
    };
    view! { <td class="score-comment" data-testid="set-item-answer">{answer} <div>{score_chips(&row.scores)}</div></td> }
        .into_any()
}
