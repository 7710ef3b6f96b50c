//! `/reviews`: the project's review queues (items pending, done, skipped)
//! and a form that makes one; `/reviews/:id`: a queue — its reviewers'
//! progress, its items, a form that adds runs; `/reviews/:id/review`: the
//! next pending item beside what its run was asked and answered, with the
//! queue's fields, a comment and a correction. Keys there: `y`/`n` fill
//! the first yes/no field, `1`-`9` pick a label of the first label field,
//! `s` skips, Ctrl+Enter saves (each form also works without JavaScript).

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;
use runlens_engine::model::{FieldKind, ReviewField, ReviewQueue, ReviewStatus, Role};

use crate::api::reviews::{
    get_next_review, get_review_queue, get_review_queues, AddReviewItems, CreateReviewQueue, NextReview,
    ReviewQueueView, ReviewQueuesView, ReviewedTurn, SubmitReview,
};
use crate::components::Loaded;
use crate::format;

fn queue_href(id: &str) -> String {
    format!("/reviews/{}", format::url_encode(id))
}

fn field_text(f: &ReviewField) -> String {
    match f.kind {
        FieldKind::YesNo => format!("{}: yes/no", f.name),
        FieldKind::Number => {
            let (min, max) = f.bounds();
            format!("{}: {min}-{max}", f.name)
        }
        FieldKind::Label => format!("{}: {}", f.name, f.labels.join(" | ")),
    }
}

fn counts(q: &ReviewQueue) -> String {
    format!("{} pending · {} done · {} skipped", q.pending, q.done, q.skipped)
}

#[component]
pub fn ReviewQueuesPage() -> impl IntoView {
    let create = ServerAction::<CreateReviewQueue>::new();
    let list = crate::resource::new(move || create.version().get(), |_| get_review_queues());
    view! {
        <Title text="Review queues · runlens"/>
        <div class="page-head"><h1>"Review queues"</h1></div>
        <p class="muted">
            "Runs put in front of people to score, item by item; a correction goes into a dataset as the "
            "item's expected answer. Also through the API (" <a href="/api/docs#tag/reviews">"reviews"</a> ")."
        </p>
        <Loaded load=move || async move { list.await } loading="Loading the queues…" keep_previous=true let:view>
            <QueuesBody view create/>
        </Loaded>
    }
}

#[component]
fn QueuesBody(view: ReviewQueuesView, create: ServerAction<CreateReviewQueue>) -> impl IntoView {
    let ReviewQueuesView { queues, datasets, role } = view;
    let table = if queues.is_empty() {
        view! { <p class="empty" data-testid="queues-empty">"No review queues yet."</p> }.into_any()
    } else {
        let rows = queues
            .into_iter()
            .map(|q| {
                let fields = q.fields.iter().map(field_text).collect::<Vec<_>>().join(" · ");
                view! {
                    <tr data-testid="queue-row" data-name=q.name.clone()>
                        <td><a href=queue_href(&q.id)>{q.name.clone()}</a></td>
                        <td>{fields}</td>
                        <td data-testid="queue-counts">{counts(&q)}</td>
                    </tr>
                }
            })
            .collect::<Vec<_>>();
        view! {
            <div class="table-scroll"><table class="table" data-testid="queues-table">
                <thead><tr><th scope="col">"Queue"</th><th scope="col">"Fields"</th><th scope="col">"Items"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table></div>
        }
        .into_any()
    };
    let form = role.is_some_and(|r| r >= Role::Operator).then(|| {
        let options = datasets
            .into_iter()
            .map(|(id, name)| view! { <option value=id>{name}</option> })
            .collect::<Vec<_>>();
        let error = crate::components::form_error::error_line(create.value(), "queue-error");
        view! {
            <section class="section" aria-labelledby="new-queue">
                <h2 id="new-queue">"New queue"</h2>
                <ActionForm action=create attr:class="experiment-form" attr:data-testid="new-queue">
                    <label class="field">
                        <span>"Name"</span>
                        <input type="text" name="name" required maxlength="200" autocomplete="off"
                            data-testid="queue-name" aria-describedby="queue-error"/>
                    </label>
                    <label class="field grow">
                        <span>"Fields " <em>"(name: yes/no, name: 1-5, or name: good | bad; one per line or ;)"</em></span>
                        <input type="text" name="fields" required autocomplete="off"
                            placeholder="correct: yes/no; tone: kind | neutral | rude" data-testid="queue-fields"
                            aria-describedby="queue-error"/>
                    </label>
                    <label class="field">
                        <span>"Corrections into"</span>
                        <select name="dataset_id" data-testid="queue-dataset">
                            <option value="">"no dataset"</option>
                            {options}
                        </select>
                    </label>
                    <button type="submit" class="button" data-testid="queue-create">"Make queue"</button>
                    {error}
                </ActionForm>
            </section>
        }
    });
    view! { {table} {form} }
}

#[component]
pub fn ReviewQueuePage() -> impl IntoView {
    let params = use_params_map();
    let id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let add = ServerAction::<AddReviewItems>::new();
    let data = crate::resource::new(move || (id.get(), add.version().get()), |(id, _)| get_review_queue(id));
    view! {
        <Loaded load=move || async move { data.await } loading="Loading the queue…" keep_previous=true let:view>
            {match view {
                Some(view) => view! { <QueueDetail view add/> }.into_any(),
                None => not_found().into_any(),
            }}
        </Loaded>
    }
}

fn not_found() -> impl IntoView {
    view! {
        <Title text="Review queue not found · runlens"/>
        <p class="empty" data-testid="queue-not-found">
            "No such review queue in this project. " <a href="/reviews">"All queues"</a>
        </p>
    }
}

#[component]
fn QueueDetail(view: ReviewQueueView, add: ServerAction<AddReviewItems>) -> impl IntoView {
    let ReviewQueueView { queue, items, role } = view;
    let title = format::rcdata_text(&format!("{} · review queues · runlens", queue.name));
    let reviewers = queue
        .reviewers
        .iter()
        .map(|r| view! { <li data-testid="reviewer">{format!("{}: {} done, {} skipped", r.reviewer.name, r.done, r.skipped)}</li> })
        .collect::<Vec<_>>();
    let rows = items
        .items
        .into_iter()
        .map(|i| {
            let (link, what) = match &i.session_id {
                Some(session) => {
                    let href = format!("/sessions/{}", format::url_encode(session));
                    (view! { <a href=href>"session " {session.clone()}</a> }.into_any(), "the session".to_owned())
                }
                None => {
                    let href = format!("/runs/{}", format::url_encode(&i.run_id));
                    let what = i.step_index.map(|s| format!("step {s}")).unwrap_or_else(|| "the run".into());
                    (view! { <a href=href class="mono">{format::short_id(&i.run_id)}</a> }.into_any(), what)
                }
            };
            let by = i.reviewed_by.map(|a| a.name).unwrap_or_default();
            let class = match i.status {
                ReviewStatus::Pending => "badge badge-pending",
                ReviewStatus::Done => "badge badge-done",
                ReviewStatus::Skipped => "badge badge-cancelled",
            };
            view! {
                <tr data-testid="queue-item" data-status=i.status.as_str()>
                    <td>{link}</td>
                    <td>{what}</td>
                    <td><span class=class>{i.status.as_str()}</span></td>
                    <td>{by}</td>
                    <td class="score-comment">{i.correction.unwrap_or_default()}</td>
                </tr>
            }
        })
        .collect::<Vec<_>>();
    let queue_id = queue.id.clone();
    let add_form = role.is_some_and(|r| r >= Role::Operator).then(move || {
        let outcome = move || {
            add.value().with(|v| {
                match v {
                Some(Err(e)) => Some(view! {
                    <p class="inline-error" role="alert" id="add-error" data-testid="add-error">{e.message.clone()}</p>
                }
                .into_any()),
                Some(Ok((added, already))) => Some(view! {
                    <p class="muted" role="status" data-testid="add-outcome">
                        {format!("{added} added, {already} already in the queue")}
                    </p>
                }
                .into_any()),
                None => None,
            }
            })
        };
        view! {
            <ActionForm action=add attr:class="experiment-form" attr:data-testid="add-runs">
                <input type="hidden" name="queue_id" value=queue_id/>
                <label class="field">
                    <span>"Add"</span>
                    <select name="what" data-testid="add-what">
                        <option value="runs" selected>"runs"</option>
                        <option value="sessions">"sessions (whole)"</option>
                    </select>
                </label>
                <label class="field grow">
                    <span>"Ids " <em>"(runs: separated by spaces or commas; sessions: one per line; up to 100)"</em></span>
                    <textarea name="ids" rows="1" required autocomplete="off" data-testid="add-run-ids"
                        aria-describedby="add-error"></textarea>
                </label>
                <button type="submit" class="button" data-testid="add-runs-submit">"Add"</button>
                {outcome}
            </ActionForm>
        }
    });
    let review = format!("{}/review", queue_href(&queue.id));
    view! {
        <Title text=title/>
        <div class="page-head">
            <div>
                <div class="crumbs"><a href="/reviews">"Review queues"</a> " /"</div>
                <h1 data-testid="queue-title">{queue.name.clone()}</h1>
            </div>
            <div class="actions">
                <a class="button primary" href=review data-testid="queue-review">"Review the next item"</a>
            </div>
        </div>
        <p data-testid="queue-facts">{counts(&queue)} " · fields: " {queue.fields.iter().map(field_text).collect::<Vec<_>>().join(" · ")}</p>
        <ul class="plain" data-testid="reviewers">{reviewers}</ul>
        {add_form}
        <div class="table-scroll"><table class="table" data-testid="queue-items">
            <thead><tr>
                <th scope="col">"Run or session"</th><th scope="col">"Reviews"</th><th scope="col">"Status"</th>
                <th scope="col">"By"</th><th scope="col">"Correction"</th>
            </tr></thead>
            <tbody>{rows}</tbody>
        </table></div>
    }
}

#[component]
pub fn ReviewPage() -> impl IntoView {
    let params = use_params_map();
    let id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let submit = ServerAction::<SubmitReview>::new();
    let data = crate::resource::new(move || (id.get(), submit.version().get()), |(id, _)| get_next_review(id));
    install_keys();
    view! {
        <Loaded load=move || async move { data.await } loading="Loading the next item…" keep_previous=true let:view>
            {match view {
                Some(next) => view! { <ReviewBody next submit/> }.into_any(),
                None => not_found().into_any(),
            }}
        </Loaded>
    }
}

#[component]
fn ReviewBody(next: NextReview, submit: ServerAction<SubmitReview>) -> impl IntoView {
    let NextReview { queue, item, may_review } = next;
    let back = queue_href(&queue.id);
    let head = view! {
        <Title text=format::rcdata_text(&format!("Review · {} · runlens", queue.name))/>
        <div class="page-head">
            <div>
                <div class="crumbs"><a href="/reviews">"Review queues"</a> " / " <a href=back.clone()>{queue.name.clone()}</a> " /"</div>
                <h1>"Review"</h1>
            </div>
            <p class="muted" data-testid="review-counts">{counts(&queue)}</p>
        </div>
    };
    let error = crate::components::form_error::error_line(submit.value(), "review-error");
    let Some((item, run)) = item else {
        return view! {
            {head}
            <p class="empty" data-testid="review-done">"Nothing left to review. " <a href=back>"Back to the queue"</a></p>
        }
        .into_any();
    };
    let trace = format!("/runs/{}", format::url_encode(&run.id));
    let steps = run.steps.iter().map(|s| view! { <li class="mono">{s.clone()}</li> }).collect::<Vec<_>>();
    let fields = queue.fields.iter().enumerate().map(|(i, f)| field_input(i, f)).collect::<Vec<_>>();
    let correction = queue.dataset_id.is_some().then(|| {
        view! {
            <label class="field">
                <span>"Correction " <em>"(the answer it should have given; into the queue's dataset)"</em></span>
                <textarea name="correction" rows="3" maxlength="32000" data-testid="review-correction"></textarea>
            </label>
        }
    });
    let form = if may_review {
        view! {
            <ActionForm action=submit attr:class="stack review-form" attr:data-testid="review-form" attr:id="review-form">
                <input type="hidden" name="queue_id" value=queue.id.clone()/>
                <input type="hidden" name="item_id" value=item.id.clone()/>
                {fields}
                <label class="field">
                    <span>"Comment " <em>"(optional)"</em></span>
                    <input type="text" name="comment" maxlength="4000" autocomplete="off" data-testid="review-comment"/>
                </label>
                {correction}
                <div class="actions">
                    <button type="submit" class="button primary" data-testid="review-save"
                        title="Ctrl+Enter">"Save and next"</button>
                    <button type="submit" name="skip" value="1" class="button" data-testid="review-skip"
                        title="s">"Skip"</button>
                </div>
                {error}
                <p class="muted">"Keys: y / n, 1-9 for a label, s to skip, Ctrl+Enter to save."</p>
            </ActionForm>
        }
        .into_any()
    } else {
        view! { <p class="muted" data-testid="review-not-yours">"You may read this queue; its items are reviewed by its assignees (operators and above)."</p> }.into_any()
    };
    view! {
        {head}
        <div class="review-layout" data-testid="review-item" data-run-id=run.id.clone()>
            <section class="section review-run" aria-label="The run">
                <h2><a href=trace data-testid="review-trace">{run.name.clone()}</a> " " <span class="badge">{run.status.clone()}</span></h2>
                {item.step_index.map(|s| view! { <p class="muted">"Reviewing step " {s}</p> })}
                {match &item.session_id {
                    Some(session) => session_turns(session, &run.turns).into_any(),
                    None => view! {
                        <h3>"Asked"</h3>
                        <pre class="review-text" data-testid="review-prompt">{run.prompt.clone()}</pre>
                        <h3>"Answered"</h3>
                        <pre class="review-text" data-testid="review-answer">{run.answer.clone().unwrap_or_else(|| "(no answer)".into())}</pre>
                        <h3>"Steps"</h3>
                        <ul class="plain">{steps}</ul>
                    }
                    .into_any(),
                }}
            </section>
            <section class="section" aria-label="Your review">{form}</section>
        </div>
    }
    .into_any()
}

/// A session under review: each of its runs, asked and answered, oldest
/// first (the verdict is kept on the latest, linked above).
fn session_turns(session: &str, turns: &[ReviewedTurn]) -> impl IntoView {
    let href = format!("/sessions/{}", format::url_encode(session));
    let items = turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let trace = format!("/runs/{}", format::url_encode(&t.run_id));
            view! {
                <li class="review-turn" data-testid="review-turn">
                    <h3><a href=trace>"Turn " {i + 1}</a></h3>
                    <p class="muted">"Asked"</p>
                    <pre class="review-text" data-testid="review-prompt">{t.prompt.clone()}</pre>
                    <p class="muted">"Answered"</p>
                    <pre class="review-text" data-testid="review-answer">{t.answer.clone().unwrap_or_else(|| "(no answer)".into())}</pre>
                </li>
            }
        })
        .collect::<Vec<_>>();
    view! {
        <p class="muted" data-testid="review-session">
            "Reviewing the whole session " <a href=href>{session.to_owned()}</a> ": " {turns.len()}
            " turns. Scores and a correction are kept on its latest run."
        </p>
        <ol class="plain">{items}</ol>
    }
}

/// The input of field `i` (posted as `f{i}`).
fn field_input(i: usize, f: &ReviewField) -> impl IntoView {
    let name = format!("f{i}");
    match f.kind {
        FieldKind::YesNo => view! {
            <fieldset class="field" data-testid="review-field" data-field=f.name.clone()>
                <legend>{f.name.clone()}</legend>
                <label><input type="radio" name=name.clone() value="yes" data-key="y"/> " yes (y)"</label>
                " "
                <label><input type="radio" name=name value="no" data-key="n"/> " no (n)"</label>
            </fieldset>
        }
        .into_any(),
        FieldKind::Number => {
            let (min, max) = f.bounds();
            view! {
                <label class="field" data-testid="review-field" data-field=f.name.clone()>
                    <span>{format!("{} ({min} to {max})", f.name)}</span>
                    <input type="number" name=name min=min max=max step="any"/>
                </label>
            }
            .into_any()
        }
        FieldKind::Label => {
            let options = f
                .labels
                .iter()
                .enumerate()
                .map(|(k, l)| {
                    view! {
                        <label><input type="radio" name=name.clone() value=l.clone() data-key=(k + 1).to_string()/>
                            {format!(" {l} ({})", k + 1)}</label>
                        " "
                    }
                })
                .collect::<Vec<_>>();
            view! {
                <fieldset class="field" data-testid="review-field" data-field=f.name.clone()>
                    <legend>{f.name.clone()}</legend>
                    {options}
                </fieldset>
            }
            .into_any()
        }
    }
}

/// The review page's keys (see the module docs); nothing on the server.
fn install_keys() {
    #[cfg(feature = "hydrate")]
    {
        use wasm_bindgen::JsCast;
        use web_sys::{HtmlElement, HtmlFormElement, KeyboardEvent};

        let handle = window_event_listener(leptos::ev::keydown, move |ev: KeyboardEvent| {
            if ev.default_prevented() || ev.alt_key() || ev.meta_key() || ev.is_composing() {
                return;
            }
            let doc = document();
            let Some(form) = doc.get_element_by_id("review-form") else { return };
            let key = ev.key();
            if ev.ctrl_key() {
                if key == "Enter" {
                    ev.prevent_default();
                    if let Some(form) = form.dyn_ref::<HtmlFormElement>() {
                        let _ = form.request_submit();
                    }
                }
                return;
            }
            let typing = doc.active_element().is_some_and(|a| {
                matches!(a.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT")
                    && a.get_attribute("type").as_deref() != Some("radio")
            });
            if typing {
                return;
            }
            let click = |selector: &str| {
                form.query_selector(selector)
                    .ok()
                    .flatten()
                    .and_then(|e| e.dyn_into::<HtmlElement>().ok())
                    .map(|e| e.click())
            };
            let done = match key.as_str() {
                "y" | "n" => click(&format!("input[type=radio][data-key=\"{key}\"]")),
                "s" => click("[data-testid=\"review-skip\"]"),
                k if k.len() == 1 && k.as_bytes()[0].is_ascii_digit() && k != "0" => {
                    click(&format!("input[type=radio][data-key=\"{k}\"]"))
                }
                _ => None,
            };
            if done.is_some() {
                ev.prevent_default();
            }
        });
        on_cleanup(move || handle.remove());
    }
}
