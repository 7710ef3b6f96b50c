//! `/approvals/decided`: the decisions made in the project, newest first,
//! 50 to a page: each with its tool, its run (by name, linked to the step)
//! and the decision as the trace shows it — who, when, "always", the comment
//! or reason, and the original arguments beside the edited ones.
//!
//! The page's place is the URL's `cursor` (plain links page it), so it works
//! and can be bookmarked without JavaScript. A decided card leaves the
//! inbox; this is where it stays.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use runlens_engine::model::DecidedCall;

use crate::api::{list_decided_approvals, DecidedApprovals};
use crate::components::approval_decision::DecisionView;
use crate::components::Loaded;
use crate::format;

/// The Pending / Decided tabs of the approvals pages.
#[component]
pub fn ApprovalTabs(decided: bool) -> impl IntoView {
    let tab = |href: &'static str, label: &'static str, current: bool| {
        let class = if current { "tab current" } else { "tab" };
        view! { <a class=class href=href aria-current=current.then_some("page")>{label}</a> }
    };
    view! {
        <nav class="tabs" aria-label="Approvals" data-testid="approval-tabs">
            {tab("/approvals", "Pending", !decided)}
            {tab("/approvals/decided", "Decided", decided)}
        </nav>
    }
}

#[component]
pub fn DecidedApprovalsPage() -> impl IntoView {
    let url = use_query_map();
    let cursor = Memo::new(move |_| url.read().get("cursor").filter(|c| !c.is_empty()));
    let page = crate::resource::new(move || cursor.get(), list_decided_approvals);
    view! {
        <Title text="Decided approvals · runlens"/>
        <div class="page-head">
            <h1>"Approvals"</h1>
            <span class="muted">"Decisions on tool calls, newest first"</span>
        </div>
        <ApprovalTabs decided=true/>
        <Loaded load=move || async move { page.await } loading="Loading decisions…" let:page>
            <DecidedList page first=cursor.get_untracked().is_none()/>
        </Loaded>
    }
}

#[component]
fn DecidedList(page: DecidedApprovals, first: bool) -> impl IntoView {
    let DecidedApprovals { items, now: _, next_cursor } = page;
    if items.is_empty() {
        let message = if first { "No decision yet in this project." } else { "No older decisions." };
        return view! { <div class="empty" data-testid="decided-empty"><p>{message}</p></div> }.into_any();
    }
    let cards = items.into_iter().map(|item| view! { <DecidedCard item/> }).collect::<Vec<_>>();
    let next = next_cursor.map(|c| {
        let href = format!("/approvals/decided?{}", format::query_string([("cursor", c.as_str())]));
        view! { <a class="button" href=href data-testid="decided-next">"Older decisions →"</a> }
    });
    let newest = (!first).then(|| view! { <a class="button" href="/approvals/decided">"Newest"</a> });
    view! {
        <div class="decided-list" data-testid="decided-list">{cards}</div>
        <div class="pager">{newest}{next}</div>
    }
    .into_any()
}

/// One decision: the call it was about (tool, run, step) over the decision.
#[component]
fn DecidedCard(item: DecidedCall) -> impl IntoView {
    let DecidedCall { run_id, run_name, call_id, step_index, tool_name, decision } = item;
    let href = format!("/runs/{}#step-{step_index}", format::url_encode(&run_id));
    let run_label = if run_name.trim().is_empty() { run_id.clone() } else { run_name };
    view! {
        <article class="decided-card" data-testid="decided-card" data-call-id=call_id data-run-id=run_id.clone()>
            <header class="approval-head">
                <span class="mono tool-name" data-testid="decided-tool">{tool_name.clone()}</span>
                " in run "
                <a href=href data-testid="decided-run">{run_label}</a>
                <span class="muted">" · step " {step_index}</span>
            </header>
            <DecisionView decision tool=tool_name/>
        </article>
    }
}
