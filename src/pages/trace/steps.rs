//! The trace page's detail pane: one step of the run, in full, with its
//! tool calls (the tree pane lists them all).
//!
//! The step and each tool call is a `<details>`; the user can fold them, and a
//! live refresh keeps their open state (the renderer only touches attributes
//! whose computed value changed). Nodes carry DOM ids (`step-{index}`,
//! `call-{id}`) for the timeline and the search, which highlights matches.
//! A call whose payloads were cut to a preview (long runs) starts folded and
//! loads them in full when unfolded.

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::model::{Step, StepStatus};

use super::detail::Detail;
use super::fork_panel::ForkFromHere;
use super::search::Search;
use super::selection::SelectionView;
use super::tool_call::ToolCallView;
use crate::api::trace_scan::step_node_id;
use crate::api::trace_tree::{one_line, tool_names_line};
use crate::components::preview::{page_cuts, ShowAll};
use crate::components::token_chart::cost_text;
use crate::components::{Badge, JsonBlock, UsageParts};
use crate::format;

/// What the step tree needs besides the steps.
#[derive(Clone)]
pub struct TreeContext {
    pub run_id: String,
    /// Tool calls whose payloads were cut to a preview.
    pub cut_calls: std::sync::Arc<std::collections::HashSet<String>>,
    pub search: Search,
    /// For a fork made from a step: where it continues its parent (the
    /// steps up to it are inherited).
    pub fork_point: Option<super::fork_panel::ForkPoint>,
    /// The run's model and tools (comma-separated), as the fork panel's
    /// placeholders.
    pub model: String,
    pub tools: String,
    /// The run was recorded from spans: runlens did not call its model.
    pub ingested: bool,
}

pub fn step_status(status: StepStatus) -> &'static str {
    match status {
        StepStatus::Running => "running",
        StepStatus::Completed => "completed",
        StepStatus::Interrupted => "interrupted",
    }
}

/// `1 tool call`, `3 tool calls`.
pub(super) fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The detail pane: the step [`Detail`] chooses among the page's steps
/// (with their costs; `None`: the model has no price), in full, with the
/// way to its neighbours. A fork says where it continues its parent.
#[component]
pub fn StepDetail(
    steps: Vec<(Step, Option<f64>)>,
    now: DateTime<Utc>,
    tree: TreeContext,
    detail: Detail,
    count: u32,
    newest_here: bool,
) -> impl IntoView {
    if steps.is_empty() {
        return view! { <p class="muted" data-testid="no-steps">"No steps yet."</p> }.into_any();
    }
    let on_page: Vec<u32> = steps.iter().map(|(s, _)| s.index).collect();
    let shown = Memo::new(move |_| detail.shown(&on_page, newest_here));
    Effect::new(move |_| {
        let index = shown.get();
        if detail.drawn.get_untracked() != index {
            detail.drawn.set(index);
        }
    });
    let marker = tree.fork_point.clone().map(|point| view! { <super::fork_panel::ForkPointMarker point/> });
    let run_id = tree.run_id.clone();
    // Keyed by step and content: another step, or this one changed, gets
    // fresh DOM (no open fold or typed text of one step shows in another);
    // an unchanged step is kept as it is across live refreshes.
    let steps: Vec<_> = steps.into_iter().map(|(step, cost)| (fingerprint(&step), step, cost)).collect();
    let steps = StoredValue::new(steps);
    let key_of =
        move |index: u32| steps.with_value(|s| s.iter().find(|(_, s, _)| s.index == index).map(|(f, ..)| (index, *f)));
    view! {
        {marker}
        {move || shown.get().map(|index| view! { <StepNav run_id=run_id.clone() index count/> })}
        <div class="steps">
            <For each=move || shown.get().and_then(key_of) key=|k| *k let((index, _))>
                {steps.with_value(|s| s.iter().find(|(_, s, _)| s.index == index).cloned()).map(|(_, step, cost)| {
                    view! { <StepView step cost now tree=tree.clone()/> }
                })}
            </For>
        </div>
    }
    .into_any()
}

/// What a step's view shows changes with this: its progress, and each
/// call's (what a stored step or call says does not change once it has
/// finished).
fn fingerprint(step: &Step) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (step.index, step_status(step.status), step.model_completed_at, step.completed_at, step.usage.total_tokens)
        .hash(&mut h);
    step.response.text().map(str::len).hash(&mut h);
    for c in &step.tool_calls {
        (&c.id, c.status.as_str(), c.started_at, c.completed_at, c.approval.is_some(), c.result.is_some()).hash(&mut h);
        (c.error.as_deref(), c.child_run_id.as_deref()).hash(&mut h);
    }
    h.finish()
}

/// "#3 of 12 steps" with links to the step before and after (a plain link
/// without JavaScript; with it, the detail pane switches in place).
#[component]
fn StepNav(run_id: String, index: u32, count: u32) -> impl IntoView {
    let link = move |to: Option<u32>, label: &'static str, testid: &'static str| {
        to.map(|to| {
            let node = step_node_id(to);
            let href = format!("/runs/{}?from={to}#{node}", format::url_encode(&run_id));
            let click = move |ev: leptos::ev::MouseEvent| {
                if crate::components::node_select::select_node(&node) {
                    ev.prevent_default();
                }
            };
            view! { <a class="button subtle small" href=href data-testid=testid on:click=click>{label}</a> }
        })
    };
    let before = index.checked_sub(1);
    let after = (index + 1 < count).then_some(index + 1);
    view! {
        <nav class="step-nav" aria-label="Steps">
            {link(before, "← Previous", "step-prev")}
            <span class="muted" data-testid="step-position">"#" {index} " of " {count} " steps"</span>
            {link(after, "Next →", "step-next")}
            <span class="hint">"j / k · [ / ] for tool calls"</span>
        </nav>
    }
}

#[component]
fn StepView(step: Step, cost: Option<f64>, now: DateTime<Utc>, tree: TreeContext) -> impl IntoView {
    let status = step_status(step.status);
    let text = step.response.text().map(str::to_string);
    let selection = step.request.selection.clone();
    let schema_error = step.response.schema_error().map(str::to_string);
    // A structured result; a plain-text answer is the response text itself.
    let result = step.response.result().filter(|r| !r.is_string() && !r.is_null()).cloned();
    // A model turn runlens ran shows its model call in full (loaded when
    // unfolded); a handoff, or a step recorded from spans, what it stored.
    let model_call = step.kind == "model_turn" && !tree.ingested;
    // The payloads as stored, for the raw view.
    let raw_request = serde_json::to_value(&step.request).unwrap_or_default();
    let raw_response = serde_json::to_value(&step.response).unwrap_or_default();
    let call_count = step.tool_calls.len();
    let inherited = tree.fork_point.as_ref().is_some_and(|p| step.index <= p.step);
    let fork = fork_from_here(&step, &tree);
    // Long payloads come cut to a preview: link to the step in full.
    let step_cut = page_cuts().step(step.index);
    let full = step_cut.then(|| {
        let href = format!("/api/runs/{}/steps?from={}&limit=1", format::url_encode(&tree.run_id), step.index);
        view! { <ShowAll href/> }
    });
    let summary = step_summary(&step, cost, now, inherited);
    let meta = step_meta(&step);
    let calls = step
        .tool_calls
        .into_iter()
        .map(|call| {
            let cut = tree.cut_calls.contains(&call.id);
            view! { <ToolCallView call now cut run_id=tree.run_id.clone() search=tree.search/> }
        })
        .collect::<Vec<_>>();

    let node = step_node_id(step.index);
    let search = tree.search;
    // A handoff: the run switched agents here (no model call of its own).
    let handoff = step.kind == "handoff";
    let hit = {
        let node = node.clone();
        move || search.is_hit(&node)
    };
    view! {
        <details class="step" id=node class:search-hit=hit class:step-handoff=handoff
            class:inherited=inherited data-inherited=inherited.then_some("true") data-testid="step"
            data-index=step.index.to_string() data-status=status data-kind=step.kind.clone() open=true>
            {summary}
            <div class="step-body">
                {meta}
                {selection.map(|selection| view! { <SelectionView selection/> })}
                <div class="label">"Model response" " " {full}</div>
                {match text {
                    Some(t) if !t.is_empty() => {
                        view! { <pre class="text" data-testid="step-text">{t}</pre> }.into_any()
                    }
                    _ => view! { <p class="muted">"(no text)"</p> }.into_any(),
                }}
                {result.map(|r| view! {
                    <div class="label">"Result"</div>
                    <JsonBlock value=r testid="step-result" cut=step_cut/>
                })}
                {schema_error.map(|e| view! {
                    <div class="label">"Result schema error"</div>
                    <pre class="text error-text" data-testid="schema-error">{e}</pre>
                })}
                {(call_count > 0).then(|| view! {
                    <div class="label">"Tool calls"</div>
                    <div class="tool-calls">{calls}</div>
                })}
                {fork}
                {if model_call {
                    view! { <super::model_call::ModelCallView run_id=tree.run_id.clone() index=step.index/> }.into_any()
                } else {
                    view! {
                        <details class="raw">
                            <summary>"Recorded request / response"</summary>
                            <JsonBlock value=raw_request/>
                            <JsonBlock value=raw_response/>
                        </details>
                    }
                    .into_any()
                }}
            </div>
        </details>
    }
}

/// Time travel: "Fork from here" on a completed model turn, for operators.
fn fork_from_here(step: &Step, tree: &TreeContext) -> Option<impl IntoView> {
    (step.kind == "model_turn"
        && step.status == StepStatus::Completed
        && crate::components::CallerRole::may(runlens_engine::model::Role::Operator))
    .then(|| {
        let (run_id, cut_calls, cut) = (tree.run_id.clone(), tree.cut_calls.clone(), page_cuts().step(step.index));
        let (model, tools) = (tree.model.clone(), tree.tools.clone());
        view! { <ForkFromHere run_id step=step.clone() cut cut_calls model tools/> }
    })
}

/// A step's folded line: index, kind, status, calls, tokens, cost, times.
fn step_summary(step: &Step, cost: Option<f64>, now: DateTime<Utc>, inherited: bool) -> impl IntoView {
    let status = step_status(step.status);
    let running = step.status == StepStatus::Running;
    // While a step runs, time it against the page's clock (it grows).
    let clock = super::clock::LiveClock::get();
    let (started, model_done, done) = (step.started_at, step.model_completed_at, step.completed_at);
    let until = move |t: Option<DateTime<Utc>>| t.or(running.then(|| clock.map_or(now, |c| c.now(now))));
    let model_ms = move || format::opt_duration(format::span_ms(Some(started), until(model_done)));
    let total_ms = move || format::opt_duration(format::span_ms(Some(started), until(done)));
    let text = step.response.text().map(str::to_string);
    let handoff = step.kind == "handoff";
    // What the folded line says of the step: the tools it called and the
    // start of the model's text (a handoff's text is its whole line).
    let calls = tool_names_line(step.tool_calls.iter().map(|c| c.tool_name.as_str()), SUMMARY_CALLS);
    let preview = (!handoff).then(|| text.as_deref().and_then(one_line)).flatten();
    view! {
        <summary>
            <span class="step-index">"#" {step.index}</span>
            {handoff.then(|| view! { <span class="handoff-mark" aria-hidden="true">"⇄"</span> })}
            <span class="mono">{step.kind.clone()}</span>
            {handoff.then(|| view! {
                <span class="handoff-text" data-testid="handoff-text">{text.clone().unwrap_or_default()}</span>
            })}
            <Badge status=status/>
            {inherited.then(|| view! {
                <span class="inherited-tag" title="Copied from the run this one was forked from">"inherited"</span>
            })}
            <span class="muted">{plural(step.tool_calls.len(), "tool call")}</span>
            {calls.map(|c| view! { <span class="mono step-calls" data-testid="step-calls">{c}</span> })}
            {preview.map(|p| view! { <span class="step-preview" data-testid="step-preview">{p}</span> })}
            <span class="spacer"></span>
            <span class="metric" title="total tokens">
                <span data-testid="step-tokens">{step.usage.total_tokens}</span>
                " tok"
            </span>
            <span class="metric" title="cost at today's prices (Settings)">
                <span data-testid="step-cost">{cost_text(cost)}</span>
            </span>
            <span class="metric" title="model time / total step time">
                <span data-testid="step-model-time">{model_ms}</span>
                " / "
                <span data-testid="step-duration">{total_ms}</span>
            </span>
        </summary>
    }
}

/// The folded line's tool names, the rest counted.
const SUMMARY_CALLS: usize = 3;

/// A step's usage, start, finish reason, and messages left out of its request.
fn step_meta(step: &Step) -> impl IntoView {
    let finish = step.response.finish_reason().unwrap_or(format::NONE).to_string();
    let dropped = step.request.dropped_messages.filter(|n| *n > 0);
    view! {
        <div class="step-meta">
            <UsageParts usage=step.usage/>
            <span>"started " {format::clock(&step.started_at)}</span>
            <span>"finish " <span class="mono">{finish}</span></span>
            {dropped.map(|n| view! {
                <span class="dropped" data-testid="dropped-messages"
                    title="The stored transcript keeps them; the model did not see them this turn.">
                    {n} {if n == 1 { " oldest message" } else { " oldest messages" }}
                    " not sent: context window"
                </span>
            })}
        </div>
    }
}
