//! The trace page's webhook deliveries: each status change of the run sent
//! to a hook (the run's own `on_status_change`, or a webhook of the
//! project), where it stands, when a pending one is tried next, and its
//! newest attempts with status code, latency and error. Loaded with the
//! page, again when the run's status changes or on "Refresh"; not shown for
//! a run without deliveries.

use leptos::prelude::*;
use runlens_engine::model::{Delivery, DeliveryAttempt, DeliveryState};

use crate::api::deliveries::{get_deliveries, RunDeliveries};
use crate::format;

/// The deliveries of the page's run, loaded with the page (a page-level
/// resource, like the trace's own), again when the run's status changes or
/// on "Refresh".
#[derive(Clone, Copy)]
pub struct PageDeliveries {
    list: crate::resource::Res<Result<Option<RunDeliveries>, ServerFnError>>,
    refresh: RwSignal<u64>,
}

/// Creates the page's [`PageDeliveries`] for the run `id` and provides it
/// to [`Deliveries`].
pub fn provide(id: Memo<String>, status_changed: RwSignal<u64>) {
    let refresh = RwSignal::new(0u64);
    let list =
        crate::resource::new(move || (id.get(), status_changed.get(), refresh.get()), |(id, ..)| get_deliveries(id));
    provide_context(PageDeliveries { list, refresh });
}

/// The deliveries section, where the trace page mounts it.
#[component]
pub fn Deliveries() -> impl IntoView {
    let Some(PageDeliveries { list, refresh }) = use_context::<PageDeliveries>() else {
        return ().into_any();
    };
    view! {
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                match list.await {
                    Ok(Some(data)) if !data.page.deliveries.is_empty() => {
                        view! { <DeliveryTable data refresh/> }.into_any()
                    }
                    // No deliveries (or none readable): nothing to show.
                    _ => ().into_any(),
                }
            })}
        </Transition>
    }
    .into_any()
}

#[component]
fn DeliveryTable(data: RunDeliveries, refresh: RwSignal<u64>) -> impl IntoView {
    let RunDeliveries { page, now } = data;
    let count = page.deliveries.len();
    let more = page.next_offset.is_some().then(|| {
        view! { <span class="muted">"(the newest; " <code>"GET /api/runs/…/deliveries"</code> " pages them all)"</span> }
    });
    let rows = page.deliveries.into_iter().map(|d| delivery_row(d, now)).collect::<Vec<_>>();
    view! {
        <section class="section" id="deliveries" data-testid="deliveries">
            <h2>
                "Webhook deliveries " <span class="count">{count}</span> " " {more} " "
                <button type="button" class="button subtle" data-testid="deliveries-refresh"
                    on:click=move |_| refresh.update(|n| *n += 1)>"Refresh"</button>
            </h2>
            <div class="table-scroll">
                <table class="table deliveries">
                    <thead>
                        <tr>
                            <th>"Change"</th>
                            <th>"To"</th>
                            <th>"State"</th>
                            <th class="num">"Attempts"</th>
                            <th>"Attempts, newest first"</th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
        </section>
    }
}

fn delivery_row(d: Delivery, now: chrono::DateTime<chrono::Utc>) -> impl IntoView {
    let change = format!("{} → {}", d.old_status, d.new_status);
    let hook = match &d.webhook_id {
        Some(id) => format!("webhook {}", format::short_id(id)),
        None => "the run's on_status_change".to_owned(),
    };
    let (class, label) = match d.state {
        DeliveryState::Pending => ("badge badge-pending", "pending"),
        DeliveryState::Delivered => ("badge badge-done", "delivered"),
        DeliveryState::Failed => ("badge badge-failed", "failed"),
    };
    let next = d.next_attempt_at.map(|at| {
        let wait = (at - now).num_milliseconds();
        let when = if wait > 0 { format!("in {}", format::duration_ms(wait)) } else { "now".to_owned() };
        view! {
            <div class="muted" data-testid="delivery-next" title=at.to_rfc3339()>"next attempt " {when}</div>
        }
    });
    let failure = d.failure.map(|why| view! { <div class="muted" data-testid="delivery-failure">{why}</div> });
    let attempts = d.attempts.into_iter().map(attempt_row).collect::<Vec<_>>();
    view! {
        <tr data-testid="delivery-row" data-delivery-id=d.id.clone() data-state=d.state.as_str()>
            <td class="nowrap" title=d.changed_at.to_rfc3339()>
                {change} <div class="muted">{format::time(&d.changed_at)}</div>
            </td>
            <td>
                {hook} <div class="mono muted" title=d.url.clone()>{d.url.clone()}</div>
            </td>
            <td><span class=class>{label}</span> {next} {failure}</td>
            <td class="num">{d.attempt_count}</td>
            <td class="attempts">{attempts}</td>
        </tr>
    }
}

fn attempt_row(a: DeliveryAttempt) -> impl IntoView {
    let code = a.status_code.map_or_else(|| "no answer".to_owned(), |c| c.to_string());
    let error = a.error.map(|e| view! { <span class="muted" data-testid="attempt-error">" · " {e}</span> });
    view! {
        <div data-testid="attempt-row" data-status=a.status_code.map(|c| c.to_string()).unwrap_or_default()
            title=a.at.to_rfc3339()>
            "#" {a.number} " " <span class="mono">{code}</span> " in " {format::duration_ms(a.latency_ms as i64)}
            " at " {format::clock(&a.at)} {error}
        </div>
    }
}
