//! One tool call in the step tree: name, status, duration, and a body with
//! reasoning, arguments, approval, result and error.
//!
//! A call awaiting approval links to its card at the top of the page; a
//! decided one shows the decision. In long runs a call's long payloads come
//! cut to a preview: such a call starts folded, and unfolding it loads the
//! call in full (`get_tool_call`) — the page never loads what nobody opens.

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::model::{ToolCall, ToolCallStatus};

use super::search::Search;
use crate::api::trace_scan::call_node_id;
use crate::api::trace_window::get_tool_call;
use crate::components::approval_card::card_anchor;
use crate::components::approval_decision::DecisionView;
use crate::components::preview::ShowAll;
use crate::components::tool_result::ToolResult;
use crate::components::{server_error_message, Badge, JsonBlock};
use crate::format;

/// `cut`: the payloads are previews; `run_id`: where to load them from.
#[component]
pub fn ToolCallView(call: ToolCall, now: DateTime<Utc>, cut: bool, run_id: String, search: Search) -> impl IntoView {
    let status = call.status.as_str();
    let awaiting = awaiting_link(&call);
    let node = call_node_id(&call.id);
    let hit = {
        let node = node.clone();
        move || search.is_hit(&node)
    };
    let summary = call_summary(&call, now, cut);
    let (tool, call_id) = (call.tool_name.clone(), call.id.clone());
    // An agent call: the child run it started, nested under it.
    let child = call.child_run_id.as_deref().map(super::child_run::nested_child);
    // Without JavaScript, the call in full is its JSON.
    let show_all = cut.then(|| {
        let href = format!("/api/runs/{}/tool-calls/{}", format::url_encode(&run_id), format::url_encode(&call.id));
        view! { <ShowAll href/> }
    });
    let body = if cut {
        // Loaded once, the first time the call is unfolded.
        let full = RwSignal::new(None::<Result<ToolCall, String>>);
        let preview = call.clone();
        let load = move |ev: leptos::ev::Event| {
            let opened = event_target::<leptos::web_sys::HtmlDetailsElement>(&ev).open();
            if opened && full.get_untracked().is_none() {
                let (run_id, call_id) = (run_id.clone(), call_id.clone());
                leptos::task::spawn_local(async move {
                    let got = get_tool_call(run_id, call_id).await.map_err(|e| server_error_message(&e));
                    full.try_set(Some(got));
                });
            }
        };
        let body = move || match full.get() {
            Some(Ok(c)) => view! { <CallBody call=c cut=false/> }.into_any(),
            Some(Err(e)) => {
                view! { <p class="inline-error">{e}</p><CallBody call=preview.clone() cut=true/> }.into_any()
            }
            None => view! { <CallBody call=preview.clone() cut=true/> }.into_any(),
        };
        return view! {
            <details class="tool-call" id=node class:search-hit=hit data-testid="tool-call" data-tool=tool
                data-call-id=call.id.clone() data-status=status on:toggle=load>
                {summary}
                {awaiting}
                {show_all}
                {body}
                {child}
            </details>
        }
        .into_any();
    } else {
        view! { <CallBody call=call.clone() cut=false/> }
    };
    view! {
        <details class="tool-call" id=node class:search-hit=hit data-testid="tool-call" data-tool=tool
            data-call-id=call.id.clone() data-status=status open=true>
            {summary}
            // Beside the summary, not in it: a link inside a summary is a nested control.
            {awaiting}
            {body}
            {child}
        </details>
    }
    .into_any()
}

/// A call awaiting approval: a link up to its card (`None` otherwise).
fn awaiting_link(call: &ToolCall) -> Option<impl IntoView> {
    (call.status == ToolCallStatus::AwaitingApproval).then(|| {
        let href = format!("#{}", format::url_encode(&card_anchor(&call.id)));
        view! {
            <p class="awaiting-row">
                <a class="awaiting-link" href=href data-testid="awaiting-approval">"needs your decision ↑"</a>
            </p>
        }
    })
}

/// A call's folded line: tool, status, duration, preview note, id.
fn call_summary(call: &ToolCall, now: DateTime<Utc>, cut: bool) -> impl IntoView {
    let status = call.status.as_str();
    // A running call's time grows with the page's clock.
    let (started, completed, running) = (call.started_at, call.completed_at, !call.status.is_finished());
    let clock = super::clock::LiveClock::get();
    let duration = move || {
        let end = completed.or(running.then(|| clock.map_or(now, |c| c.now(now))));
        format::opt_duration(format::span_ms(started, end))
    };
    view! {
        <summary>
            <span class="mono tool-name">{call.tool_name.clone()}</span>
            <Badge status=status/>
            <span class="muted" data-testid="tool-duration">{duration}</span>
            {cut.then(|| view! { <span class="muted preview-note" data-testid="payload-preview">"preview: unfold to load in full"</span> })}
            <span class="spacer"></span>
            <span class="mono sub" title="tool call id">{call.id.clone()}</span>
        </summary>
    }
}

/// A call's reasoning, arguments, approval decision, result and error;
/// `cut`: its payloads are previews.
#[component]
fn CallBody(call: ToolCall, cut: bool) -> impl IntoView {
    let tool = call.tool_name.clone();
    view! {
        <div class="tool-body">
            {call.reasoning.map(|r| view! {
                <div class="label">"Reasoning"</div>
                <p class="reasoning" data-testid="tool-reasoning">{r}</p>
            })}
            <div class="label">"Arguments"</div>
            <JsonBlock value=call.arguments testid="tool-args" cut/>
            {call.approval.map(|decision| view! {
                <div class="label">"Approval"</div>
                <DecisionView decision tool/>
            })}
            {call.result.map(|result| view! {
                <div class="label">"Result"</div>
                <ToolResult value=result testid="tool-result"/>
            })}
            {call.error.map(|error| view! {
                <div class="label">"Error"</div>
                <pre class="text error-text" data-testid="tool-error">{error}</pre>
            })}
        </div>
    }
}
