//! `/experiments/:id/compare?with=…`: two experiments of one dataset item
//! by item (improved, regressed, unchanged, missing), filtered by change,
//! each row one click from the step-aligned compare of its two runs.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_params_map, use_query_map};
use runlens_engine::model::{ComparedItem, ExperimentComparison, ItemChange};

use super::{clipped, experiment_href, experiment_not_found};
use crate::api::experiments::{get_experiment_comparison, ROWS_SHOWN};
use crate::components::Loaded;
use crate::format;

#[component]
pub fn ExperimentComparePage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let with = Memo::new(move |_| query.read().get("with").unwrap_or_default());
    let change = Memo::new(move |_| query.read().get("change"));
    let cursor = Memo::new(move |_| query.read().get("cursor"));
    let data = crate::resource::new(
        move || (id.get(), with.get(), change.get(), cursor.get()),
        |(id, with, change, cursor)| get_experiment_comparison(id, with, change, cursor),
    );
    view! {
        <Loaded load=move || async move { data.await } loading="Comparing…" keep_previous=true let:cmp>
            {match cmp {
                Some(cmp) => view! { <Comparison cmp change=change.get_untracked()/> }.into_any(),
                None => experiment_not_found().into_any(),
            }}
        </Loaded>
    }
}

#[component]
fn Comparison(cmp: ExperimentComparison, change: Option<String>) -> impl IntoView {
    let ExperimentComparison { base, other, improved, regressed, unchanged, missing, items, next_cursor } = cmp;
    let title = format::rcdata_text(&format!("{} vs {} · experiments · runlens", base.name, other.name));
    let here = format!("{}/compare", experiment_href(&base.id));
    let link = |c: Option<&str>| {
        let mut pairs = vec![("with", other.id.as_str())];
        if let Some(c) = c {
            pairs.push(("change", c));
        }
        format!("{here}?{}", format::query_string(pairs))
    };
    let filter = |c: Option<ItemChange>, n: u32, label: &'static str| {
        let current = change.as_deref() == c.map(ItemChange::as_str);
        let class = if current { "button" } else { "button subtle" };
        let testid = format!("compare-filter-{}", c.map_or("all", ItemChange::as_str));
        view! { <a class=class href=link(c.map(ItemChange::as_str)) data-testid=testid aria-current=current.then_some("true")>{label} " " <strong>{n}</strong></a> }
    };
    let total = improved + regressed + unchanged + missing;
    let next = next_cursor.map(|c| {
        let mut pairs = vec![("with", other.id.as_str()), ("cursor", c.as_str())];
        if let Some(ch) = change.as_deref() {
            pairs.push(("change", ch));
        }
        let href = format!("{here}?{}", format::query_string(pairs));
        view! { <a class="button subtle" href=href data-testid="compare-next">"Next " {ROWS_SHOWN} " items →"</a> }
    });
    let empty = items.is_empty().then(|| view! { <p class="empty">"No items of this kind."</p> });
    let rows = items.into_iter().map(compared_row).collect::<Vec<_>>();
    view! {
        <Title text=title/>
        <div class="page-head">
            <div>
                <div class="crumbs"><a href="/experiments">"Experiments"</a> " /"</div>
                <h1>
                    <a href=experiment_href(&base.id)>{base.name.clone()}</a> " vs "
                    <a href=experiment_href(&other.id)>{other.name.clone()}</a>
                </h1>
            </div>
        </div>
        <p class="muted">
            "Each item by the mean of its run's scores (yes = 1): improved when "
            <strong>{other.name.clone()}</strong> " scored higher than " <strong>{base.name.clone()}</strong> "."
        </p>
        <div class="inline-form compare-filters" data-testid="compare-counts">
            {filter(None, total, "All")}
            {filter(Some(ItemChange::Improved), improved, "Improved")}
            {filter(Some(ItemChange::Regressed), regressed, "Regressed")}
            {filter(Some(ItemChange::Unchanged), unchanged, "Unchanged")}
            {filter(Some(ItemChange::Missing), missing, "Missing")}
        </div>
        <div class="table-scroll">
            <table class="table" data-testid="compare-items">
                <thead>
                    <tr>
                        <th scope="col">"Item"</th>
                        <th scope="col">"Change"</th>
                        <th scope="col" class="num">{base.name.clone()}</th>
                        <th scope="col" class="num">{other.name.clone()}</th>
                        <th scope="col">"Runs"</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
        {empty}
        {next}
    }
}

fn compared_row(item: ComparedItem) -> impl IntoView {
    let score = |s: Option<f64>| s.map(|v| format!("{v:.2}")).unwrap_or_else(|| "—".into());
    let badge = match item.change {
        ItemChange::Improved => "badge badge-done",
        ItemChange::Regressed => "badge badge-failed",
        ItemChange::Unchanged => "badge badge-cancelled",
        ItemChange::Missing => "badge badge-pending",
    };
    let runs = match (&item.base_run_id, &item.other_run_id) {
        (Some(a), Some(b)) => {
            let href = format!("/compare?{}", format::query_string([("a", a.as_str()), ("b", b.as_str())]));
            view! { <a href=href data-testid="compare-runs">"compare the two runs"</a> }.into_any()
        }
        (Some(r), None) | (None, Some(r)) => {
            let href = format!("/runs/{}", format::url_encode(r));
            view! { <a href=href>"its run"</a> }.into_any()
        }
        (None, None) => view! { <span class="muted">"—"</span> }.into_any(),
    };
    view! {
        <tr data-testid="compare-item" data-change=item.change.as_str()>
            <td class="score-comment" title=item.item_id.clone()>{clipped(&item.input)}</td>
            <td><span class=badge>{item.change.as_str()}</span></td>
            <td class="num">{score(item.base_score)}</td>
            <td class="num">{score(item.other_score)}</td>
            <td>{runs}</td>
        </tr>
    }
}
