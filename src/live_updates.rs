//! Live updates from the server's Server-Sent Events streams, in the browser.
//!
//! [`open_stream`] wraps the browser's `EventSource`: it listens for the
//! named event types (`run.status`, `message.delta`, …; an `EventSource`
//! only hands unnamed events to `onmessage`), reads each one's `data:` into
//! the engine's own [`Event`] type (the very type the server serializes) and
//! reports it, along with `open` and `error`, to one callback. The `EventSource` reconnects by itself
//! after a network error and then sends `Last-Event-ID`, so the server resumes
//! the stream where it stopped. [`keep`] ties a stream to the current reactive
//! owner: it is closed when that owner is cleaned up (an effect re-running, a
//! page unmounting).
//!
//! [`RunsFeed`] is the app-wide subscription to `GET /api/events` (status
//! changes of all runs) behind the runs list and the approvals badge.
//!
//! [`poll_while`] is the fallback for pages that refresh on an interval
//! while the runs they show may still change.
//!
//! The server build has no `EventSource`: there `open_stream` returns `None`
//! (effects, the only callers, never run on the server anyway).

use std::time::Duration;

use leptos::prelude::*;
use runlens_engine::model::Event;

/// Event types of a run's stream (`GET /api/runs/{id}/events`).
pub use runlens_engine::model::RUN_EVENT_TYPES;

/// Event types of the all-runs stream (`GET /api/events`).
pub const ALL_RUNS_EVENT_TYPES: [&str; 3] = ["run.status", "run.finished", "tool_call.updated"];

/// How long a burst of events is collected before the page refetches.
pub const REFETCH_AFTER: Duration = Duration::from_millis(250);

/// What a stream reports to its callback.
pub enum StreamSignal {
    /// Connected (again).
    Open,
    /// An event, as the server sent it.
    Event(Box<Event>),
    /// An event whose `data:` did not read as an [`Event`] (a server newer
    /// than the page): what the page shows may have changed all the same.
    Unreadable,
    /// The connection failed; `closed` when the browser gave up (it retries otherwise).
    Error { closed: bool },
}

impl StreamSignal {
    /// The signal for an event's `data:` text.
    pub fn read(data: &str) -> Self {
        serde_json::from_str(data).map_or(Self::Unreadable, |e| Self::Event(Box::new(e)))
    }
}

/// An open `EventSource`, closed when dropped.
pub struct EventStream {
    #[cfg(feature = "hydrate")]
    _source: browser::Source,
}

/// Opens an `EventSource` on `url` for the event types `kinds`.
#[allow(unused_variables)]
pub fn open_stream(url: &str, kinds: &[&str], on: impl Fn(StreamSignal) + 'static) -> Option<EventStream> {
    #[cfg(feature = "hydrate")]
    return browser::open(url, kinds, std::rc::Rc::new(on)).map(|s| EventStream { _source: s });
    #[cfg(not(feature = "hydrate"))]
    None
}

/// Closes `stream` when the current reactive owner is cleaned up.
pub fn keep(stream: EventStream) {
    #[cfg(feature = "hydrate")]
    {
        let stream = send_wrapper::SendWrapper::new(stream);
        on_cleanup(move || drop(stream));
    }
    // On the server there is no stream to close.
    #[cfg(not(feature = "hydrate"))]
    let _ = stream;
}

/// `f`, run once `delay` after the first call of a burst of calls.
pub fn debounced(delay: Duration, f: impl Fn() + 'static) -> impl Fn() + Clone + 'static {
    let pending = std::rc::Rc::new(std::cell::Cell::new(false));
    let f = std::rc::Rc::new(f);
    move || {
        if !pending.replace(true) {
            let (pending, f) = (pending.clone(), f.clone());
            set_timeout(
                move || {
                    pending.set(false);
                    f();
                },
                delay,
            );
        }
    }
}

/// Loads what the page shows for a key (a run and how far along it is), one
/// load at a time: asking again while a load is under way loads the latest
/// key [`RELOAD_GAP`] after that load ends. A live 10,000-step run thus
/// costs the server one scan at a time, not one per event.
pub struct Latest<K: Send + Sync + 'static> {
    wanted: StoredValue<Option<K>>,
    loading: StoredValue<bool>,
}

impl<K: Send + Sync + 'static> Clone for Latest<K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K: Send + Sync + 'static> Copy for Latest<K> {}

/// Least time between two loads of a [`Latest`].
pub const RELOAD_GAP: Duration = Duration::from_secs(1);

impl<K: Clone + PartialEq + Send + Sync + 'static> Default for Latest<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Clone + PartialEq + Send + Sync + 'static> Latest<K> {
    pub fn new() -> Self {
        Latest { wanted: StoredValue::new(None), loading: StoredValue::new(false) }
    }

    /// Whether `key` is the one asked for last.
    pub fn is_latest(self, key: &K) -> bool {
        self.wanted.try_with_value(|w| w.as_ref() == Some(key)) == Some(true)
    }

    /// Asks for `key` (nothing happens if it was the last asked for).
    pub fn want<F, Fut>(self, key: K, load: F)
    where
        F: Fn(K) -> Fut + 'static,
        Fut: std::future::Future<Output = ()> + 'static,
    {
        if self.is_latest(&key) {
            return;
        }
        self.wanted.set_value(Some(key));
        if !self.loading.get_value() {
            self.run(std::rc::Rc::new(load));
        }
    }

    fn run<F, Fut>(self, load: std::rc::Rc<F>)
    where
        F: Fn(K) -> Fut + 'static,
        Fut: std::future::Future<Output = ()> + 'static,
    {
        let Some(Some(key)) = self.wanted.try_get_value() else { return };
        self.loading.set_value(true);
        leptos::task::spawn_local(async move {
            load(key.clone()).await;
            if self.is_latest(&key) {
                self.loading.try_set_value(false);
            } else {
                set_timeout(move || self.run(load), RELOAD_GAP);
            }
        });
    }
}

/// The app-wide feed of run status changes.
#[derive(Clone, Copy)]
pub struct RunsFeed {
    /// Bumped (debounced) when a run changed status or a call needing an
    /// approval changed, and when the stream (re)connects (it has no replay).
    pub version: RwSignal<u64>,
    /// The stream is down: pages fall back to slow polling.
    pub failed: RwSignal<bool>,
}

impl RunsFeed {
    /// Provides the feed to the app (see [`RunsFeed::connect`]).
    pub fn provide() {
        provide_context(RunsFeed { version: RwSignal::new(0), failed: RwSignal::new(false) });
    }

    /// Connects the app's feed, in the browser (pages for signed-in callers
    /// only: the stream needs one).
    pub fn connect() {
        let feed = Self::get();
        Effect::new(move |_| {
            let bump = debounced(REFETCH_AFTER, move || feed.version.update(|v| *v += 1));
            let stream = open_stream("/api/events", &ALL_RUNS_EVENT_TYPES, move |signal| match signal {
                // What changed before the stream was up is not replayed:
                // the pages reload once it is (on every reconnect too).
                StreamSignal::Open => {
                    feed.failed.set(false);
                    bump();
                }
                StreamSignal::Event(_) | StreamSignal::Unreadable => bump(),
                StreamSignal::Error { .. } => feed.failed.set(true),
            });
            if let Some(stream) = stream {
                keep(stream);
            }
        });
    }

    /// The app's feed (a disconnected one outside the app, e.g. in tests).
    pub fn get() -> Self {
        use_context().unwrap_or(RunsFeed { version: RwSignal::new(0), failed: RwSignal::new(true) })
    }
}

#[cfg(feature = "hydrate")]
mod browser {
    use std::rc::Rc;

    use wasm_bindgen::closure::Closure;
    use wasm_bindgen::JsCast;
    use web_sys::{Event, EventSource, MessageEvent};

    use super::StreamSignal;

    type Callback = Closure<dyn FnMut(Event)>;

    pub struct Source {
        source: EventSource,
        _callbacks: Vec<Callback>,
    }

    impl Drop for Source {
        fn drop(&mut self) {
            self.source.close();
        }
    }

    pub fn open(url: &str, kinds: &[&str], on: Rc<dyn Fn(StreamSignal)>) -> Option<Source> {
        let source = EventSource::new(url).ok()?;
        let mut callbacks = Vec::new();
        let mut listen = |kind: &str, cb: Callback| {
            let added = source.add_event_listener_with_callback(kind, cb.as_ref().unchecked_ref());
            callbacks.push(cb);
            added.ok()
        };
        for kind in kinds {
            let on = on.clone();
            listen(
                kind,
                Closure::new(move |e: Event| {
                    if let Some(data) = e.dyn_ref::<MessageEvent>().and_then(|m| m.data().as_string()) {
                        on(StreamSignal::read(&data));
                    }
                }),
            )?;
        }
        let on_open = on.clone();
        listen("open", Closure::new(move |_| on_open(StreamSignal::Open)))?;
        let watched = source.clone();
        listen(
            "error",
            Closure::new(move |_| on(StreamSignal::Error { closed: watched.ready_state() == EventSource::CLOSED })),
        )?;
        Some(Source { source, _callbacks: callbacks })
    }
}

/// Starts, in the browser only (effects never run on the server), an interval
/// that bumps `tick` every `every` while `active` is true. Pages put `tick` in
/// their resource's source, so each bump refetches; the interval is cleared
/// when the page unmounts. A refetch still in flight is superseded by the next
/// one rather than piling up.
pub fn poll_while(active: RwSignal<bool>, tick: RwSignal<u64>, every: Duration) {
    Effect::new(move |_| {
        let poll = move || {
            if active.get_untracked() {
                tick.update(|t| *t += 1);
            }
        };
        if let Ok(handle) = set_interval_with_handle(poll, every) {
            on_cleanup(move || handle.clear());
        }
    });
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use runlens_engine::model::{EventKind, RUN_EVENT_TYPES};

    use super::*;

    #[test]
    fn event_data_reads_as_the_event_the_server_sent() {
        let sent = Event {
            run_id: "r".into(),
            seq: 3,
            at: Utc::now(),
            kind: EventKind::MessageDelta { step_index: 1, text: "Hel".into() },
        };
        match StreamSignal::read(&sent.to_json()) {
            StreamSignal::Event(read) => assert_eq!(*read, sent),
            _ => panic!("the event did not read back"),
        }
        assert!(RUN_EVENT_TYPES.contains(&sent.kind.name()));
        for unreadable in [r#"{"type":"run.paused_forever","seq":1}"#, "not json", "{}"] {
            assert!(matches!(StreamSignal::read(unreadable), StreamSignal::Unreadable), "{unreadable}");
        }
    }
}
