//! `/approvals`: the inbox of every tool call waiting for a decision, across
//! runs, oldest first, with the same card as the trace page.
//!
//! The hydrated page refetches the list when the all-runs event stream reports
//! a change (a run pausing, a call being decided), after each decision here,
//! and every 15 s while that stream is down.
//! Cards keep their place for the life of the page: a call that stops being
//! pending (decided here, elsewhere, or by a timeout) leaves a note where its
//! card was instead of vanishing, so the other cards never shift and what the
//! user is typing in them stays attached to the right call.

use std::collections::HashMap;
use std::time::Duration;

use leptos::either::Either;
use leptos::prelude::*;
use leptos_meta::Title;
use runlens_engine::model::{ApprovalDecision, Interruption};

use crate::api::{list_pending_approvals, ApprovalErrorKind, PendingApprovals};
use crate::components::approval_card::{ApprovalCard, DecisionActions};
use crate::components::approval_decision::SettledCall;
use crate::components::Loaded;
use crate::format;
use crate::live_updates::poll_while;
use crate::live_updates::RunsFeed;

/// How often the inbox looks for new pending calls while the stream is down.
const POLL_EVERY: Duration = Duration::from_secs(15);

#[component]
pub fn ApprovalsPage() -> impl IntoView {
    let actions = DecisionActions::new();
    let tick = RwSignal::new(0u64);
    let feed = RunsFeed::get();
    poll_while(feed.failed, tick, POLL_EVERY);
    let list = Resource::new(move || (feed.version.get(), tick.get(), actions.version()), |_| list_pending_approvals());
    // Every call shown since the page loaded, in order of first appearance.
    let seen = StoredValue::new(Vec::<Interruption>::new());
    // Decisions learnt from this page's own actions, by call id.
    let outcomes = RwSignal::new(HashMap::<String, ApprovalDecision>::new());
    remember_outcomes(actions, outcomes);

    view! {
        <Title text="Approvals · runlens"/>
        <div class="page-head">
            <h1>"Approvals"</h1>
            <span class="muted">"Tool calls waiting for a person, oldest first"</span>
        </div>
        <Loaded load=move || async move { list.await } loading="Loading approvals…" keep_previous=true let:pending>
            {
                seen.update_value(|s| merge_seen(s, &pending.items));
                view! { <Inbox pending slots=seen.get_value() outcomes=outcomes.get() actions/> }
            }
        </Loaded>
    }
}

/// Appends the calls not seen before, keeping the order of first appearance.
fn merge_seen(seen: &mut Vec<Interruption>, current: &[Interruption]) {
    for item in current {
        match seen.iter_mut().find(|s| s.call_id == item.call_id && s.run_id == item.run_id) {
            Some(known) => *known = item.clone(),
            None => seen.push(item.clone()),
        }
    }
}

/// Records the decision each completed action learnt about (its own, or the
/// one that beat it), so the call's slot can show it.
fn remember_outcomes(actions: DecisionActions, outcomes: RwSignal<HashMap<String, ApprovalDecision>>) {
    let record = move |result: Option<Result<runlens_engine::model::ToolCall, crate::api::ApprovalError>>| {
        let learnt = match result {
            Some(Ok(call)) => call.approval.map(|d| (call.id, d)),
            Some(Err(e)) if e.kind == ApprovalErrorKind::AlreadyDecided => e.call_id.zip(e.decision.map(|d| *d)),
            _ => None,
        };
        if let Some((id, decision)) = learnt {
            outcomes.update(|map| {
                map.insert(id, decision);
            });
        }
    };
    Effect::new(move |_| record(actions.approve.value().get()));
    Effect::new(move |_| record(actions.reject.value().get()));
}

#[component]
fn Inbox(
    pending: PendingApprovals,
    slots: Vec<Interruption>,
    outcomes: HashMap<String, ApprovalDecision>,
    actions: DecisionActions,
) -> impl IntoView {
    let PendingApprovals { items, now, cut_calls, role } = pending;
    crate::components::CallerRole::provide(role);
    // Long arguments come cut to a preview; the cards link to them in full.
    provide_context(crate::components::preview::Cuts { calls: cut_calls, ..Default::default() });
    let count = items.len();
    let empty = items.is_empty().then(|| {
        view! {
            <div class="empty" data-testid="approvals-empty">
                <p>"Nothing is waiting for a decision."</p>
                <p>"Runs pause here when they call a tool that needs approval, such as "
                    <code>"send_email"</code> "."</p>
            </div>
        }
    });
    let cards = slots
        .into_iter()
        .map(|slot| {
            if items.iter().any(|i| i.call_id == slot.call_id && i.run_id == slot.run_id) {
                return Either::Left(view! { <ApprovalCard item=slot now actions show_run=true/> });
            }
            let run_href = format!("/runs/{}", format::url_encode(&slot.run_id));
            let decision = outcomes.get(&slot.call_id).cloned();
            let note = "Decided elsewhere (or timed out): the run's trace shows the decision.";
            Either::Right(view! {
                <SettledCall tool=slot.tool_name call_id=slot.call_id decision note run_href/>
            })
        })
        .collect::<Vec<_>>();

    view! {
        <p class="inbox-count">
            <span data-testid="approvals-count">{count}</span>
            {if count == 1 { " call waits" } else { " calls wait" }} " for a decision"
        </p>
        {empty}
        <div class="approval-list" data-testid="approvals-list">{cards}</div>
    }
}
