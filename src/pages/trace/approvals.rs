//! The approvals area at the top of the trace page: a card for each call of
//! the current step that waits for a decision, replaced by the decision once
//! it is made.
//!
//! The area lists every call of the run's latest step that asked for
//! approval, in call order, so a call keeps its position (and its card keeps
//! its DOM, with whatever the user typed) across live refreshes until it is
//! decided; deciding swaps that one slot from a card to the decision. When
//! the run moves on to a step without approvals, the area goes away.

use chrono::{DateTime, Utc};
use leptos::either::EitherOf3;
use leptos::prelude::*;
use runlens_engine::model::{Interruption, Run, Step, ToolCall, ToolCallStatus};

use crate::components::approval_card::{ApprovalCard, DecisionActions};
use crate::components::approval_decision::SettledCall;

/// What one slot of the area shows.
enum Slot {
    /// Pending and the run is paused: decide it here.
    Card(Interruption),
    /// Pending, but the step's other calls are still running.
    Waiting(ToolCall),
    /// Decided (or cancelled).
    Settled(ToolCall),
}

/// The calls of the latest step that asked for approval, as slots.
fn slots(run: &Run, steps: &[Step]) -> Vec<Slot> {
    let Some(step) = steps.iter().max_by_key(|s| s.index) else {
        return Vec::new();
    };
    step.tool_calls
        .iter()
        .filter(|c| c.requested_at.is_some() || c.status == ToolCallStatus::AwaitingApproval)
        .map(|call| {
            if call.status != ToolCallStatus::AwaitingApproval {
                return Slot::Settled(call.clone());
            }
            match run.interruptions.iter().find(|i| i.call_id == call.id) {
                Some(item) => Slot::Card(item.clone()),
                None => Slot::Waiting(call.clone()),
            }
        })
        .collect()
}

/// Why a settled call has no decision to show.
fn settled_note(call: &ToolCall) -> String {
    match call.status {
        ToolCallStatus::Cancelled => "Cancelled with the run before anyone decided.".to_string(),
        other => format!("No longer awaiting approval ({}).", other.as_str().replace('_', " ")),
    }
}

#[component]
pub fn ApprovalArea(run: Run, steps: Vec<Step>, now: DateTime<Utc>, actions: DecisionActions) -> impl IntoView {
    let slots = slots(&run, &steps);
    if slots.is_empty() {
        return None;
    }
    let waiting = slots.iter().filter(|s| matches!(s, Slot::Card(_) | Slot::Waiting(_))).count();
    let heading = match waiting {
        0 => "Approvals".to_string(),
        1 => "1 tool call needs your decision".to_string(),
        n => format!("{n} tool calls need your decision"),
    };
    let items = slots
        .into_iter()
        .map(|slot| match slot {
            Slot::Card(item) => EitherOf3::A(view! { <ApprovalCard item now actions/> }),
            Slot::Waiting(call) => EitherOf3::B(view! {
                <SettledCall tool=call.tool_name call_id=call.id decision=None waiting=true
                    note="Awaiting approval: it can be decided once the step's other calls have finished."/>
            }),
            Slot::Settled(call) => {
                let note = settled_note(&call);
                EitherOf3::C(view! {
                    <SettledCall tool=call.tool_name call_id=call.id decision=call.approval note/>
                })
            }
        })
        .collect::<Vec<_>>();
    Some(view! {
        <section class="approvals-area" data-testid="approvals-area">
            <h2>{heading}</h2>
            <div class="approval-list">{items}</div>
        </section>
    })
}

/// Calls of runs below this one that wait for a decision: the run is
/// paused until they are decided. Each card names its chain of runs and
/// can be decided here.
#[component]
pub fn TreeApprovals(items: Vec<Interruption>, now: DateTime<Utc>, actions: DecisionActions) -> impl IntoView {
    if items.is_empty() {
        return None;
    }
    let heading = match items.len() {
        1 => "A child run's tool call needs your decision".to_string(),
        n => format!("{n} tool calls of child runs need your decision"),
    };
    let cards =
        items.into_iter().map(|item| view! { <ApprovalCard item now actions show_run=true/> }).collect::<Vec<_>>();
    Some(view! {
        <section class="approvals-area" data-testid="tree-approvals">
            <h2>{heading}</h2>
            <p class="muted">"This run waits on its child runs until these are decided."</p>
            <div class="approval-list">{cards}</div>
        </section>
    })
}
