//! The trace page's "Add to dataset": for operators, once the run has
//! ended, a choice of the project's datasets and a button that adds the run
//! as an item (its conversation, its answer as what is expected, its
//! recorded tool results); then a line saying which version it made, with
//! a link. A plain form post without JavaScript.

use leptos::prelude::*;
use runlens_engine::model::Role;

use crate::api::datasets::{get_datasets, AddRunToDataset};
use crate::format;

#[component]
pub fn AddToDataset(run_id: String, ended: bool, role: Option<Role>) -> impl IntoView {
    if !ended || role.is_none_or(|r| r < Role::Operator) {
        return ().into_any();
    }
    let add = ServerAction::<AddRunToDataset>::new();
    let datasets = crate::resource::new(|| (), |_| get_datasets());
    let chosen = RwSignal::new(String::new());
    let outcome = move || {
        add.value().with(|v| match v {
            Some(Ok(version)) => {
                let href = format!("/datasets/{}", format::url_encode(&chosen.get_untracked()));
                Some(
                    view! {
                        <p class="muted" role="status" data-testid="to-dataset-added">
                            "Added, as version " {*version} " of the dataset. " <a href=href>"Open it"</a>
                        </p>
                    }
                    .into_any(),
                )
            }
            Some(Err(e)) => Some(
                view! {
                    <p class="inline-error" role="alert" data-testid="to-dataset-error">{e.message.clone()}</p>
                }
                .into_any(),
            ),
            None => None,
        })
    };
    view! {
        <Transition fallback=|| ()>
            {move || {
                let run_id = run_id.clone();
                Suspend::new(async move {
                let list = datasets.await.map(|v| v.datasets).unwrap_or_default();
                if list.is_empty() {
                    return view! {
                        <p class="muted to-dataset" data-testid="to-dataset-none">
                            "Keep this run as a test case: " <a href="/datasets">"make a dataset"</a>
                            ", then add it from here."
                        </p>
                    }
                    .into_any();
                }
                if chosen.get_untracked().is_empty() {
                    chosen.set(list[0].id.clone());
                }
                let options = list
                    .into_iter()
                    .map(|d| {
                        let count = format!(" ({} {})", d.item_count, if d.item_count == 1 { "item" } else { "items" });
                        view! { <option value=d.id.clone()>{d.name} {count}</option> }
                    })
                    .collect::<Vec<_>>();
                view! {
                    <ActionForm action=add attr:class="score-form to-dataset" attr:data-testid="to-dataset">
                        <input type="hidden" name="run_id" value=run_id/>
                        <label class="field">
                            <span>"Add this run to a dataset"</span>
                            <select name="dataset_id" data-testid="to-dataset-choice"
                                on:change=move |ev| chosen.set(event_target_value(&ev))>{options}</select>
                        </label>
                        <button type="submit" class="button" data-testid="to-dataset-submit"
                            disabled=move || add.pending().get()>"Add to dataset"</button>
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
