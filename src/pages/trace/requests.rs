//! The trace page's "Approvals asked by the agent": the approval requests
//! and questions an agent runlens does not run sent for this run (those
//! naming its OpenTelemetry trace), oldest first, each with its tool or
//! question, where it stands and how it ended. Loaded with the page, again
//! when the run's status changes, and every few seconds while one is
//! pending; not shown for a run without requests. They are decided in the
//! approvals inbox (linked).

use std::time::Duration;

use leptos::prelude::*;
use runlens_engine::model::{AgentRequest, RequestKind, RequestStatus};

use crate::api::requests::{get_run_requests, RunRequests};
use crate::components::approval_decision::decider_label;
use crate::components::Badge;
use crate::format;
use crate::live_updates::poll_while;

/// How often the section looks again while a request is pending.
const POLL_EVERY: Duration = Duration::from_secs(5);

/// The requests of the page's run, a page-level resource (like the trace's own).
#[derive(Clone, Copy)]
pub struct PageRequests {
    list: crate::resource::Res<Result<Option<RunRequests>, ServerFnError>>,
    pending: RwSignal<bool>,
}

/// Creates the page's [`PageRequests`] for the run `id` and provides it to
/// [`RunRequestsSection`].
pub fn provide(id: Memo<String>, status_changed: RwSignal<u64>) {
    let (tick, pending) = (RwSignal::new(0u64), RwSignal::new(false));
    poll_while(pending, tick, POLL_EVERY);
    let list =
        crate::resource::new(move || (id.get(), status_changed.get(), tick.get()), |(id, ..)| get_run_requests(id));
    provide_context(PageRequests { list, pending });
}

/// The section, where the trace page mounts it.
#[component]
pub fn RunRequestsSection() -> impl IntoView {
    let Some(PageRequests { list, pending }) = use_context::<PageRequests>() else {
        return ().into_any();
    };
    view! {
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                match list.await {
                    Ok(Some(data)) if !data.requests.is_empty() => {
                        let waiting = data.requests.iter().any(|r| r.status == RequestStatus::Pending);
                        if pending.get_untracked() != waiting {
                            pending.set(waiting);
                        }
                        view! { <RequestTable data/> }.into_any()
                    }
                    // No requests (or none readable): nothing to show.
                    _ => ().into_any(),
                }
            })}
        </Transition>
    }
    .into_any()
}

#[component]
fn RequestTable(data: RunRequests) -> impl IntoView {
    let count = data.requests.len();
    let waiting = data.requests.iter().filter(|r| r.status == RequestStatus::Pending).count();
    let inbox = (waiting > 0).then(|| {
        view! { " " <a class="button subtle" href="/approvals" data-testid="run-requests-inbox">"Decide in the inbox →"</a> }
    });
    let rows = data.requests.into_iter().map(request_row).collect::<Vec<_>>();
    view! {
        <section class="section" id="agent-requests" data-testid="run-requests">
            <h2>"Approvals asked by the agent " <span class="count">{count}</span> {inbox}</h2>
            <div class="table-scroll">
                <table class="table run-requests">
                    <thead>
                        <tr>
                            <th>"Asked"</th>
                            <th>"Tool or question"</th>
                            <th>"Status"</th>
                            <th>"Outcome"</th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
        </section>
    }
}

fn request_row(r: AgentRequest) -> impl IntoView {
    let subject = match r.kind {
        RequestKind::Approval => {
            let tool = r.tool.clone().unwrap_or_default();
            view! { <span class="muted">"approve "</span> <code data-testid="run-request-tool">{tool}</code> }
                .into_any()
        }
        RequestKind::Question => {
            let q = r.question.clone().unwrap_or_default();
            view! { <span class="muted">"question: "</span> <span data-testid="run-request-question">{q}</span> }
                .into_any()
        }
    };
    let outcome = r.decision.clone().map(|d| {
        let detail = d.answer.clone().or(d.reason.clone()).or(d.comment.clone());
        let edited = d.edited.then(|| view! { <span class="muted">" (arguments edited)"</span> });
        view! {
            <span data-testid="run-request-outcome" data-outcome=d.outcome.as_str()>
                "by " {decider_label(&d.decided_by, Some(d.decided_by_id.as_str()))}
                " at " {format::time(&d.decided_at)} " UTC" {edited}
            </span>
            {detail.map(|t| view! { <div class="muted" data-testid="run-request-detail">{t}</div> })}
        }
    });
    let status = r.status.as_str();
    view! {
        <tr data-testid="run-request" data-request-id=r.id.clone() data-kind=r.kind.as_str() data-status=status>
            <td class="nowrap" title=r.created_at.to_rfc3339()>
                {format::time(&r.created_at)}
                <div class="muted">{r.requested_by.clone()}</div>
            </td>
            <td>{subject}</td>
            <td><Badge status=status/></td>
            <td>{outcome}</td>
        </tr>
    }
}
