//! The bounded queue between publishers and the writer task.
//!
//! At most `limit` events wait here. When the queue is full, a publisher
//! waits for the writer to take a batch — backpressure on the run loop
//! instead of memory growth while the database is slow or failing:
//! - [`Queue::push_async`] waits without holding a thread;
//! - [`Queue::push`] (the synchronous `publish`) blocks its thread, inside
//!   `tokio::task::block_in_place` on a multi-threaded runtime (the server's)
//!   so the worker's other tasks move elsewhere meanwhile. A current-thread
//!   runtime cannot wait inside a synchronous call (the writer runs on that
//!   same thread), so there the event is queued past the limit and a warning
//!   is logged; the server never runs on one.
//!
//! Flush requests are not counted: each caller adds one and waits for it.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

use chrono::{DateTime, Utc};
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::{oneshot, Notify};
use tokio::time::Instant;

use super::persist::LINGER;
use super::EventKind;

// Nearly every command is a `Publish`: boxing it would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub(super) enum Command {
    Publish { run_id: String, at: DateTime<Utc>, kind: EventKind },
    Flush(oneshot::Sender<()>),
}

#[derive(Default)]
struct State {
    items: VecDeque<Command>,
    /// Publish commands in `items`.
    events: usize,
    /// Flush commands in `items`.
    flushes: usize,
    closed: bool,
    warned: bool,
}

pub(super) struct Queue {
    state: Mutex<State>,
    limit: usize,
    /// Wakes the writer.
    ready: Notify,
    /// Wakes async publishers waiting for room.
    room: Notify,
    /// Wakes blocked synchronous publishers.
    room_sync: Condvar,
}

impl Queue {
    pub(super) fn new(limit: usize) -> Self {
        Queue { state: Mutex::default(), limit, ready: Notify::new(), room: Notify::new(), room_sync: Condvar::new() }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn len(&self) -> usize {
        self.lock().events
    }

    /// Adds an event, waiting for room when the queue is full (see the module docs).
    pub(super) fn push(&self, cmd: Command) {
        let mut state = self.lock();
        if state.events >= self.limit && !state.closed {
            state = match Handle::try_current().map(|h| h.runtime_flavor()) {
                Ok(RuntimeFlavor::CurrentThread) => {
                    if !state.warned {
                        state.warned = true;
                        tracing::warn!(
                            limit = self.limit,
                            "event queue full on a current-thread runtime; queueing past its limit"
                        );
                    }
                    state
                }
                Ok(_) => tokio::task::block_in_place(|| self.wait_for_room(state)),
                Err(_) => self.wait_for_room(state),
            };
        }
        self.add(state, cmd);
    }

    fn wait_for_room<'a>(&'a self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.room_sync.wait_while(state, |s| s.events >= self.limit && !s.closed).unwrap_or_else(|e| e.into_inner())
    }

    /// Adds an event once the queue has room.
    pub(super) async fn push_async(&self, cmd: Command) {
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let state = self.lock();
                if state.events < self.limit || state.closed {
                    return self.add(state, cmd);
                }
            }
            room.await;
        }
    }

    /// Adds a flush request (never waits).
    pub(super) fn push_flush(&self, done: oneshot::Sender<()>) {
        let state = self.lock();
        self.add(state, Command::Flush(done));
    }

    fn add(&self, mut state: MutexGuard<'_, State>, cmd: Command) {
        if state.closed {
            return; // the writer is gone: nobody would store it (a flush answers at once)
        }
        match cmd {
            Command::Publish { .. } => state.events += 1,
            Command::Flush(_) => state.flushes += 1,
        }
        state.items.push_back(cmd);
        drop(state);
        self.ready.notify_one();
    }

    /// Stops accepting commands; the writer ends once the queue is empty.
    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_one();
        self.room.notify_waiters();
        self.room_sync.notify_all();
    }

    /// The next batch: at most `max` events (and the flushes among them), in
    /// order. With `linger`, a batch that is not full and has no flush waits
    /// up to [`LINGER`] for more, so a busy engine makes one transaction per
    /// linger rather than one per event. `None` once closed and empty.
    pub(super) async fn take(&self, max: usize, linger: bool) -> Option<Vec<Command>> {
        loop {
            let ready = self.ready.notified();
            {
                let state = self.lock();
                if !state.items.is_empty() {
                    break;
                }
                if state.closed {
                    return None;
                }
            }
            ready.await;
        }
        if linger {
            let deadline = Instant::now() + LINGER;
            loop {
                let ready = self.ready.notified();
                {
                    let state = self.lock();
                    if state.events >= max || state.flushes > 0 || state.closed {
                        break;
                    }
                }
                if tokio::time::timeout_at(deadline, ready).await.is_err() {
                    break;
                }
            }
        }
        let mut state = self.lock();
        let mut batch = Vec::new();
        let mut events = 0;
        while events < max {
            let Some(cmd) = state.items.pop_front() else { break };
            match cmd {
                Command::Publish { .. } => {
                    events += 1;
                    state.events -= 1;
                }
                Command::Flush(_) => state.flushes -= 1,
            }
            batch.push(cmd);
        }
        // A flush right behind a full batch joins it.
        while matches!(state.items.front(), Some(Command::Flush(_))) {
            state.flushes -= 1;
            batch.extend(state.items.pop_front());
        }
        drop(state);
        self.room.notify_waiters();
        self.room_sync.notify_all();
        Some(batch)
    }
}
