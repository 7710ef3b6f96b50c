//! The trace page's live connection: its run's event stream, in the browser.
//!
//! While the run shown is active the page keeps one `EventSource` open on
//! `/api/runs/{id}/events?after=<seq>`, where `seq` came with the server
//! render (so a reload neither misses nor replays the run's history; see
//! `LiveTrace::stream_after`). Events that change what is stored — `item`,
//! `tool_call.updated`, `step.completed`, `usage`, `run.status`,
//! `run.finished` — refetch the trace, debounced; `step.started` and
//! `message.delta` (each read as the engine's `EventKind`, matched by
//! variant) go straight into [`Live::streaming`], the text of the step
//! the model is writing, shown by [`StreamingStep`] until that step is
//! stored. After a network error the browser reconnects with
//! `Last-Event-ID`; after `run.finished` the stream is closed.
//!
//! A call that runs without side effects is stored only with its step, so
//! the stored trace shows it `pending` until the whole step ends; its
//! `tool_call.updated` events carry the call itself, and [`Live::calls`]
//! keeps the latest of each, which [`Live::apply_calls`] lays over what a
//! refetch read: a call shows `running` as it starts and its result as it
//! finishes, whatever its step still waits for.
//!
//! The state lives at page level (outside the views a refetch rebuilds).

use leptos::prelude::*;
use runlens_engine::model::{EventKind, RunStatus, ToolCall, ToolCallStatus};

use crate::api::trace_window::LiveTrace;

use crate::format;
use crate::live_updates::{debounced, keep, open_stream, StreamSignal, REFETCH_AFTER, RUN_EVENT_TYPES};

#[derive(Clone, Copy)]
pub struct Live {
    /// Bumped (debounced) when the stored trace changed: refetch it.
    pub changed: RwSignal<u64>,
    /// Bumped when the run's status changed.
    pub status_changed: RwSignal<u64>,
    /// The step being streamed and its text so far.
    pub streaming: RwSignal<Option<(u32, String)>>,
    /// The model turn under way (not stored until the model answers): its
    /// step index and when it started, for the timeline.
    pub turn_started: RwSignal<Option<(u32, chrono::DateTime<chrono::Utc>)>>,
    /// The latest state of each call the stream reported, by call id.
    calls: RwSignal<std::collections::HashMap<String, ToolCall>>,
    /// The latest status change seen on the stream, in words, for the
    /// page's `aria-live` region ([`Announcer`]); empty until one happens
    /// while the page is open (nothing is announced on load).
    pub announcement: RwSignal<String>,
    /// The run followed and the seq its stream starts after.
    target: RwSignal<Option<(String, u64)>>,
}

impl Live {
    /// Creates the state and, in the browser, the effect that follows [`Self::track`].
    pub fn new() -> Self {
        let live = Live {
            changed: RwSignal::new(0),
            status_changed: RwSignal::new(0),
            streaming: RwSignal::new(None),
            turn_started: RwSignal::new(None),
            calls: RwSignal::new(Default::default()),
            announcement: RwSignal::new(String::new()),
            target: RwSignal::new(None),
        };
        Effect::new(move |_| {
            let Some((id, after)) = live.target.get() else { return };
            let url = format!("/api/runs/{}/events?after={after}", format::url_encode(&id));
            let refetch = debounced(REFETCH_AFTER, move || {
                live.changed.try_update(|n| *n += 1);
            });
            if let Some(stream) = open_stream(&url, &RUN_EVENT_TYPES, move |signal| live.on(signal, &refetch)) {
                keep(stream);
            }
        });
        live
    }

    /// Follows run `id` from event `after` while `active`; a stream already
    /// open on the same run is kept (it is at least as far along).
    pub fn track(self, id: &str, active: bool, after: u64) {
        let same = self.target.with_untracked(|t| match t {
            Some((current, _)) => active && current == id,
            None => !active,
        });
        if !same {
            let other_run = self.target.with_untracked(|t| t.as_ref().is_some_and(|(current, _)| current != id));
            if other_run || !active {
                self.streaming.set(None);
                self.turn_started.set(None);
                self.calls.update_untracked(|c| c.clear());
            }
            self.target.set(active.then(|| (id.to_string(), after)));
        }
    }

    fn on(self, signal: StreamSignal, refetch: &impl Fn()) {
        let event = match signal {
            StreamSignal::Event(event) => event,
            StreamSignal::Unreadable => return refetch(),
            StreamSignal::Open | StreamSignal::Error { .. } => return,
        };
        match event.kind {
            EventKind::StepStarted { index } => {
                self.streaming.set(Some((index, String::new())));
                self.turn_started.set(Some((index, event.at)));
            }
            EventKind::MessageDelta { step_index, text } => self.streaming.update(|s| match s {
                Some((current, so_far)) if *current == step_index => so_far.push_str(&text),
                _ => *s = Some((step_index, text)),
            }),
            EventKind::RunFinished { status, .. } => {
                self.announce(status);
                self.streaming.set(None);
                self.turn_started.set(None);
                self.status_changed.update(|n| *n += 1);
                self.changed.update(|n| *n += 1);
                self.target.set(None);
            }
            EventKind::RunStatus { new, .. } => {
                self.announce(new);
                self.status_changed.update(|n| *n += 1);
                refetch();
            }
            EventKind::ToolCallUpdated { tool_call } => {
                self.calls.update_untracked(|c| {
                    c.insert(tool_call.id.clone(), *tool_call);
                });
                refetch();
            }
            EventKind::Item { .. } | EventKind::StepCompleted { .. } | EventKind::Usage { .. } => refetch(),
        }
    }
}

impl Live {
    /// Lays the calls the stream reported over `view`'s, where the stream
    /// is further along (see the module docs); a call stored as far as the
    /// stream's is left as stored.
    pub fn apply_calls(self, view: &mut LiveTrace) {
        self.calls.with_untracked(|seen| {
            if seen.is_empty() {
                return;
            }
            let steps = view.steps.iter_mut().chain(view.latest_step.iter_mut());
            for call in steps.flat_map(|s| s.tool_calls.iter_mut()) {
                if let Some(newer) = seen.get(&call.id).filter(|n| progress(n.status) > progress(call.status)) {
                    *call = newer.clone();
                }
            }
        });
    }

    /// Puts a status the person should hear about in [`Self::announcement`]
    /// (`run.status` and `run.finished` both report the end of a run: it is
    /// said once).
    fn announce(self, status: RunStatus) {
        let text = match status {
            RunStatus::Paused => "Run paused: a tool call is waiting for approval.",
            RunStatus::Done => "Run finished (done).",
            RunStatus::Failed => "Run failed.",
            RunStatus::Cancelled => "Run cancelled.",
            RunStatus::Pending | RunStatus::Running => "",
        };
        if text.is_empty() {
            // Running again: the next pause is news.
            if !self.announcement.with_untracked(String::is_empty) {
                self.announcement.set(String::new());
            }
        } else if self.announcement.with_untracked(|a| a != text) {
            self.announcement.set(text.to_string());
        }
    }

    /// Forgets what was announced (another run is shown).
    pub fn reset_announcement(self) {
        self.announcement.set(String::new());
    }
}

/// The trace page's polite live region: screen readers say the run's
/// status changes (paused, done, failed, cancelled) while the page is open.
/// It stays in the page across live refreshes, so changes of its text are
/// announced.
#[component]
pub fn Announcer(live: Live) -> impl IntoView {
    view! {
        <div class="visually-hidden" role="status" aria-live="polite" aria-atomic="true"
            data-testid="run-announcer">
            {move || live.announcement.get()}
        </div>
    }
}

/// The step the model is writing: its number and the text streamed so far,
/// until the step is stored (`stored_up_to`: the latest stored step).
#[component]
pub fn StreamingStep(live: Live, stored_up_to: Option<u32>) -> impl IntoView {
    let shown = Memo::new(move |_| {
        live.streaming.with(|s| s.as_ref().map(|(i, _)| *i)).filter(|i| stored_up_to.is_none_or(|last| *i > last))
    });
    let text = move || live.streaming.with(|s| s.as_ref().map(|(_, t)| t.clone()).unwrap_or_default());
    move || {
        shown.get().map(|index| {
            view! {
                <div class="step live-step" id="live-step" data-testid="live-step" data-index=index.to_string()>
                    <div class="live-step-head">
                        <span class="step-index">"#" {index}</span>
                        <span class="badge badge-running">"model writing"</span>
                    </div>
                    <pre class="text streaming" data-testid="streaming-text">{text}</pre>
                </div>
            }
        })
    }
}

/// How far along a call is: waiting, then running, then finished.
fn progress(status: ToolCallStatus) -> u8 {
    match status {
        ToolCallStatus::Pending | ToolCallStatus::AwaitingApproval => 0,
        ToolCallStatus::Running => 1,
        ToolCallStatus::Succeeded | ToolCallStatus::Failed | ToolCallStatus::Rejected | ToolCallStatus::Cancelled => 2,
    }
}

/// Characters of the streamed text the live preview row shows (its end).
const PREVIEW_TAIL: usize = 160;

/// A row near the top of the page while the model writes a step: the end of
/// the text so far, linking down to the step (the page may be long).
#[component]
pub fn LivePreview(live: Live, stored_up_to: Option<u32>) -> impl IntoView {
    move || {
        live.streaming.with(|s| {
            let (index, text) = s.as_ref().filter(|(i, _)| stored_up_to.is_none_or(|last| *i > last))?;
            let words: Vec<&str> = text.split_whitespace().collect();
            let line = words.join(" ");
            let count = line.chars().count();
            let tail = match count > PREVIEW_TAIL {
                true => format!("…{}", line.chars().skip(count - PREVIEW_TAIL).collect::<String>()),
                false => line,
            };
            Some(view! {
                <a class="live-preview" href="#live-step" data-testid="live-preview">
                    <span class="badge badge-running">"model writing"</span>
                    <span class="step-index">"#" {*index}</span>
                    <span class="live-preview-text" data-testid="live-preview-text">{tail}</span>
                </a>
            })
        })
    }
}
