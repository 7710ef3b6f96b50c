//! A comparison group: one run configuration started on several models,
//! each run a column (model, status, result, steps, tokens, cost, duration),
//! and a plain GET form that opens any two of them in the pairwise diff.

use leptos::prelude::*;
use runlens_engine::model::{CompareGroup, CompareQuery, GroupMember};

use super::compare_href;
use crate::components::token_chart::{cost_text, thousands};
use crate::components::{Badge, JsonBlock};
use crate::format;

#[component]
pub fn GroupView(group: CompareGroup) -> impl IntoView {
    let CompareGroup { id, members, .. } = group;
    let active = members.iter().filter(|m| !m.status.is_terminal()).count();
    let header = members
        .iter()
        .map(|m| {
            let href = format!("/runs/{}", format::url_encode(&m.run_id));
            view! {
                <th scope="col" data-testid="group-column" data-run-id=m.run_id.clone() data-status=m.status.as_str()>
                    <span class="mono">{m.model.clone()}</span>
                    <div class="sub"><a href=href>{format::short_id(&m.run_id)}</a></div>
                </th>
            }
        })
        .collect::<Vec<_>>();
    let cells =
        |f: &dyn Fn(&GroupMember) -> AnyView| members.iter().map(f).map(|v| view! { <td>{v}</td> }).collect::<Vec<_>>();
    let status = cells(&|m| view! { <Badge status=m.status.as_str()/> }.into_any());
    let result = cells(&|m| match (&m.result, &m.failure_reason) {
        (Some(value), _) => view! { <div data-testid="group-result"><JsonBlock value=value.clone()/></div> }.into_any(),
        (None, Some(reason)) => view! { <span class="sub">"Failed: " {reason.clone()}</span> }.into_any(),
        (None, None) if m.status.is_terminal() => view! { <span class="muted">"no result"</span> }.into_any(),
        (None, None) => view! { <span class="muted">"…"</span> }.into_any(),
    });
    let num = |f: &dyn Fn(&GroupMember) -> String| {
        members.iter().map(|m| view! { <td class="num">{f(m)}</td> }).collect::<Vec<_>>()
    };
    let steps = num(&|m| m.step_count.to_string());
    let tokens = num(&|m| thousands(m.usage.total_tokens));
    let cost = num(&|m| cost_text(m.cost_usd));
    let duration = num(&|m| format::opt_duration(m.duration_ms.map(|d| d as i64)));
    let options = |selected: usize| {
        members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                view! { <option value=m.run_id.clone() selected=i == selected>{format!("{} · {}", m.model, format::short_id(&m.run_id))}</option> }
            })
            .collect::<Vec<_>>()
    };
    let first_pair = (members.len() >= 2).then(|| {
        compare_href(&CompareQuery { a: members[0].run_id.clone(), b: members[1].run_id.clone(), ..Default::default() })
    });
    view! {
        <p class="muted" data-testid="group-summary">
            {members.len()} " runs of one configuration"
            {(active > 0).then(|| format!(" · {active} still running (this page updates live)"))}
            " · group " <span class="mono">{format::short_id(&id)}</span>
        </p>
        <div class="scroll-x">
            <table class="table compare-group" data-testid="compare-group">
                <thead><tr><th scope="col">"Model"</th>{header}</tr></thead>
                <tbody>
                    <tr><th scope="row">"Status"</th>{status}</tr>
                    <tr><th scope="row">"Result"</th>{result}</tr>
                    <tr class="summary-row"><th scope="row">"Steps"</th>{steps}</tr>
                    <tr class="summary-row"><th scope="row">"Tokens"</th>{tokens}</tr>
                    <tr class="summary-row"><th scope="row">"Cost"</th>{cost}</tr>
                    <tr class="summary-row"><th scope="row">"Duration"</th>{duration}</tr>
                </tbody>
            </table>
        </div>
        {(members.len() >= 2).then(|| view! {
            <form method="get" action="/compare" class="filters" data-testid="group-pick">
                <label><span>"A"</span><select name="a" data-testid="group-pick-a">{options(0)}</select></label>
                <label><span>"B"</span><select name="b" data-testid="group-pick-b">{options(1)}</select></label>
                <button type="submit" class="button primary" data-testid="group-pick-submit">"Compare these two"</button>
                {first_pair.map(|h| view! { <a class="button subtle" href=h>"First two"</a> })}
            </form>
        })}
    }
}
