//! "Add to a review queue", on a run's trace page and a session's page: for
//! operators, a choice of the project's queues and a button that puts the
//! run (or the whole session) in front of its reviewers; then a line saying
//! so, with a link to the queue. A plain form post without JavaScript.

use leptos::prelude::*;
use runlens_engine::model::Role;

use crate::api::reviews::{get_review_queues, AddReviewItems};
use crate::format;

/// What goes in the queue.
#[derive(Clone, Debug, PartialEq)]
pub enum ReviewTarget {
    Run(String),
    Session(String),
}

#[component]
pub fn AddToReview(target: ReviewTarget, role: Option<Role>) -> impl IntoView {
    if role.is_none_or(|r| r < Role::Operator) {
        return ().into_any();
    }
    let add = ServerAction::<AddReviewItems>::new();
    let queues = crate::resource::new(|| (), |_| get_review_queues());
    let chosen = RwSignal::new(String::new());
    let (what, noun, ids) = match target {
        ReviewTarget::Run(id) => ("runs", "run", id),
        ReviewTarget::Session(id) => ("sessions", "session", id),
    };
    let outcome = move || {
        add.value().with(|v| match v {
            Some(Ok((added, _))) => {
                let href = format!("/reviews/{}", format::url_encode(&chosen.get_untracked()));
                let said = if *added > 0 { "Added to the queue. " } else { "Already in that queue. " };
                Some(
                    view! { <p class="muted" role="status" data-testid="to-review-added">{said} <a href=href>"Open it"</a></p> }
                        .into_any(),
                )
            }
            Some(Err(e)) => Some(
                view! { <p class="inline-error" role="alert" data-testid="to-review-error">{e.message.clone()}</p> }
                    .into_any(),
            ),
            None => None,
        })
    };
    view! {
        <Transition fallback=|| ()>
            {move || {
                let ids = ids.clone();
                Suspend::new(async move {
                    let list = queues.await.map(|v| v.queues).unwrap_or_default();
                    if list.is_empty() {
                        return ().into_any();
                    }
                    if chosen.get_untracked().is_empty() {
                        chosen.set(list[0].id.clone());
                    }
                    let options = list
                        .into_iter()
                        .map(|q| view! { <option value=q.id.clone()>{format!("{} ({} to review)", q.name, q.pending)}</option> })
                        .collect::<Vec<_>>();
                    view! {
                        <ActionForm action=add attr:class="score-form to-dataset" attr:data-testid="to-review">
                            <input type="hidden" name="ids" value=ids/>
                            <input type="hidden" name="what" value=what/>
                            <label class="field">
                                <span>{format!("Have people review this {noun}")}</span>
                                <select name="queue_id" data-testid="to-review-choice"
                                    on:change=move |ev| chosen.set(event_target_value(&ev))>{options}</select>
                            </label>
                            <button type="submit" class="button" data-testid="to-review-submit"
                                disabled=move || add.pending().get()>"Add to review queue"</button>
                            {outcome}
                        </ActionForm>
                    }
                    .into_any()
                })
            }}
        </Transition>
    }
    .into_any()
}
