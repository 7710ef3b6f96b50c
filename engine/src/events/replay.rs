//! Replay then live: one run's events after a given `seq`, with no gap and
//! no duplicate.
//!
//! The reader subscribes to the run's channel first. Events are broadcast
//! only after they are committed, so every event is either committed before
//! the subscription (and in the database) or broadcast after it (and on the
//! channel); an event committed just before and broadcast just after is in
//! both. So the reader pages through the database, then the channel,
//! skipping any `seq` it has already delivered.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::{self, error::RecvError};

use super::writer::Shared;
use super::{Event, EventBus, EventKind};

/// Events read from the database per query while replaying.
const PAGE: u32 = 1000;

/// How long a finished run's stream waits for its `run.finished` when the
/// replay did not end with one (it is being published, or the run predates
/// persisted events).
const FINISH_GRACE: Duration = Duration::from_secs(2);

/// Why a stream stopped early; the client resumes from the last `seq` it got.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StreamEnd {
    /// The subscriber fell more than the channel's capacity behind.
    #[error("the subscriber fell behind by {0} events and was dropped")]
    Lagged(u64),
    /// The database could not be read.
    #[error("the event log could not be read: {0}")]
    Store(String),
}

/// One run's events after `after`, then live ones (see the module docs).
/// Ends after `run.finished` once nothing follows it.
pub struct RunEvents {
    run_id: String,
    shared: Arc<Shared>,
    live: broadcast::Receiver<Arc<Event>>,
    page: VecDeque<Event>,
    db_done: bool,
    last: u64,
    last_was_finish: bool,
    terminal_at_start: bool,
    replayed: bool,
    done: bool,
}

impl EventBus {
    /// Opens run `run_id`'s stream after `after` (see [`RunEvents`]);
    /// `terminal`: the run had finished when the stream was opened.
    pub async fn run_events(&self, run_id: &str, after: u64, terminal: bool) -> Result<RunEvents, StreamEnd> {
        if terminal {
            // The run's last events may have been published but not yet
            // committed (they are only shown once committed): wait for them,
            // so a finished run replays whole from the database.
            self.flush().await;
        }
        RunEvents::open(self.shared.clone(), run_id, after, terminal).await
    }
}

impl RunEvents {
    async fn open(shared: Arc<Shared>, run_id: &str, after: u64, terminal: bool) -> Result<Self, StreamEnd> {
        let live = shared.subscribe_run(run_id);
        let mut this = RunEvents {
            run_id: run_id.to_owned(),
            db_done: shared.log.is_none(),
            shared,
            live,
            page: VecDeque::new(),
            last: after,
            last_was_finish: false,
            terminal_at_start: terminal,
            replayed: false,
            done: false,
        };
        if terminal {
            // Nothing to send when the client already has the final
            // `run.finished`, or the run finished before events were kept.
            let last = match &this.shared.log {
                Some(log) => log.last_event(run_id).await.map_err(|e| StreamEnd::Store(e.to_string()))?,
                None => None,
            };
            // Without any stored event the stream waits briefly for a
            // `run.finished` still on its way (see `FINISH_GRACE`).
            this.done = match last {
                Some((seq, kind)) => seq <= after && kind == EventKind::NAMES[7],
                None => false,
            };
        }
        Ok(this)
    }

    /// `true` when the stream has nothing to send: the run finished and the
    /// client has seen its `run.finished` (SSE answers 204 then).
    pub fn is_over(&self) -> bool {
        self.done
    }

    /// The last `seq` delivered (or the `after` it started from).
    pub fn last_seq(&self) -> u64 {
        self.last
    }

    /// The next event; `None` at the end, `Some(Err)` when dropped.
    pub async fn next(&mut self) -> Option<Result<Event, StreamEnd>> {
        while !self.done {
            if let Some(e) = self.page.pop_front() {
                if e.seq > self.last {
                    return Some(Ok(self.deliver(e, false)));
                }
                continue;
            }
            if !self.db_done {
                if let Err(e) = self.read_page().await {
                    self.done = true;
                    return Some(Err(e));
                }
                continue;
            }
            if !self.replayed {
                self.replayed = true;
                if self.last_was_finish {
                    self.done = true;
                    break;
                }
            }
            let received = if self.terminal_at_start && !self.last_was_finish {
                match tokio::time::timeout(FINISH_GRACE, self.live.recv()).await {
                    Ok(r) => r,
                    Err(_) => {
                        self.done = true;
                        break;
                    }
                }
            } else {
                self.live.recv().await
            };
            match received {
                Ok(e) if e.seq <= self.last => continue,
                // Events of this run committed by another server came in
                // between (a shared store): they are in the log, so read on
                // from there (it holds this one too).
                Ok(e) if e.seq > self.last + 1 && self.shared.log.is_some() => {
                    self.db_done = false;
                    continue;
                }
                Ok(e) => return Some(Ok(self.deliver(Event::clone(&e), true))),
                Err(RecvError::Lagged(n)) => {
                    self.done = true;
                    return Some(Err(StreamEnd::Lagged(n)));
                }
                Err(RecvError::Closed) => self.done = true,
            }
        }
        None
    }

    fn deliver(&mut self, e: Event, live: bool) -> Event {
        self.last = e.seq;
        self.last_was_finish = matches!(e.kind, EventKind::RunFinished { .. });
        if live && self.last_was_finish {
            self.done = true;
        }
        e
    }

    async fn read_page(&mut self) -> Result<(), StreamEnd> {
        let Some(store) = &self.shared.log else {
            self.db_done = true;
            return Ok(());
        };
        let rows =
            store.events_after(&self.run_id, self.last, PAGE).await.map_err(|e| StreamEnd::Store(e.to_string()))?;
        self.db_done = (rows.len() as u32) < PAGE;
        self.page = rows.into();
        Ok(())
    }
}

impl Drop for RunEvents {
    fn drop(&mut self) {
        self.shared.release(&self.run_id, 1);
    }
}
