//! The trace page's transcript section, folded: the whole transcript of a
//! short run (sent with the page, drawn when unfolded), or the latest `MESSAGE_TAIL` messages of
//! a long one, loaded once the page is up so that a 10,000-step run's first
//! screen never waits for its 20,000 messages ([`TranscriptTail`]). A live
//! long run's tail is reloaded when the page refetches the trace.

use leptos::prelude::*;
use runlens_engine::model::{Message, Run};

use super::{follow_up, transcript};
use crate::api::trace_window::{get_transcript_tail, LiveTrace, MESSAGE_TAIL};
use crate::api::{EditMessage, SendFollowUp};
use crate::components::server_error_message;
use crate::live_updates::Latest;

/// A loaded tail: the message count and the latest messages, or the error.
type Loaded = Result<(usize, Vec<Message>), String>;

/// The loaded tail of a long run's transcript.
#[derive(Clone, Copy)]
pub struct TranscriptTail {
    /// Run id, message count, latest messages (or the error).
    loaded: RwSignal<Option<(String, Loaded)>>,
    /// Run id and the page's refetch count: reloaded when that changes.
    latest: Latest<(String, u64)>,
}

impl TranscriptTail {
    pub fn new() -> Self {
        TranscriptTail { loaded: RwSignal::new(None), latest: Latest::new() }
    }

    /// Loads the tail of `view`'s run when it is paged and the page has
    /// refetched (`version`) since the last load.
    pub fn track(self, view: &LiveTrace, version: u64) {
        if !view.paged() {
            return;
        }
        self.latest.want((view.run.id.clone(), version), move |(id, _)| async move {
            let got = get_transcript_tail(id.clone()).await;
            let got = got.map(|(messages, total)| (total, messages)).map_err(|e| server_error_message(&e));
            self.loaded.try_set(Some((id, got)));
        });
    }
}

/// The transcript, folded (each step's model call shows the messages it
/// sent; this is the whole conversation, where a message can be edited),
/// and the follow-up box. The messages are drawn when it is unfolded.
#[component]
pub fn TranscriptSection(
    view: LiveTrace,
    tail: TranscriptTail,
    edit: ServerAction<EditMessage>,
    follow_up: ServerAction<SendFollowUp>,
) -> impl IntoView {
    let run: Run = view.run.clone();
    let run_id = run.id.clone();
    // `?transcript` asks for it unfolded (the way in without JavaScript).
    let asked = leptos_router::hooks::use_query_map().with_untracked(|q| q.get("transcript").is_some());
    let opened = RwSignal::new(asked);
    let unfold_href = format!("/runs/{}?transcript=1#transcript", crate::format::url_encode(&run_id));
    let unfold = move || {
        (!opened.get()).then(|| {
            view! {
                <p class="muted"><a href=unfold_href.clone() data-testid="transcript-unfold">"Show the messages"</a></p>
            }
        })
    };
    let toggle = move |ev: leptos::ev::Event| {
        let details: leptos::web_sys::Element = event_target(&ev);
        opened.set(details.has_attribute("open"));
    };
    let (count, messages) = match view.paged() {
        false => {
            let messages = StoredValue::new(view.messages);
            let run_id = run_id.clone();
            let list = move || {
                opened.get().then(|| {
                    view! { <transcript::Transcript messages=messages.get_value() run_id=run_id.clone() edit/> }
                })
            };
            (view.message_total.to_string().into_any(), list.into_any())
        }
        true => {
            let count = {
                let run_id = run_id.clone();
                move || {
                    tail.loaded.with(|l| match l {
                        Some((id, Ok((total, _)))) if *id == run_id => total.to_string(),
                        _ => String::new(),
                    })
                }
            };
            let list = move || {
                if !opened.get() {
                    return None;
                }
                Some(match tail.loaded.get().filter(|(id, _)| *id == run_id) {
                    None => view! {
                        <p class="loading" data-testid="transcript-loading">"Loading the latest messages…"</p>
                    }
                    .into_any(),
                    Some((_, Err(e))) => view! { <p class="inline-error">{e}</p> }.into_any(),
                    Some((_, Ok((total, messages)))) => view! {
                        {(messages.len() < total).then(|| view! {
                            <p class="muted" data-testid="transcript-window">
                                "Showing the latest " {MESSAGE_TAIL} " of " {total} " messages."
                            </p>
                        })}
                        <transcript::Transcript messages run_id=run_id.clone() edit/>
                    }
                    .into_any(),
                })
            };
            (count.into_any(), list.into_any())
        }
    };
    view! {
        <section class="section" id="transcript">
            <details class="transcript-fold" data-testid="transcript-fold" open=asked on:toggle=toggle>
                <summary><h2>"Transcript " <span class="count">{count}</span></h2></summary>
                {unfold}
                {messages}
            </details>
            {crate::components::CallerRole::may(runlens_engine::model::Role::Operator)
                .then(|| view! { <follow_up::FollowUpBox run action=follow_up/> })}
        </section>
    }
}
