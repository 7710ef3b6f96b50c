//! Committing a batch: where events are stored, and what happens when the
//! store fails.
//!
//! A batch is committed in one transaction before anyone sees it. A failing
//! store is retried with growing pauses, without end: the batch is neither
//! broadcast nor dropped, the queue behind it fills up and then holds
//! publishers (backpressure), and once the store answers again everything
//! is committed in order. After [`LOUD_AFTER`] failed attempts the failure
//! is logged at error level and the bus reports it (`EventBus::health`)
//! until a commit succeeds.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;

use super::writer::{number, unknown_runs, Shared};
use super::{Event, EventKind};
use crate::error::Result;
use crate::store::Store;

/// How long a batch collects events before it is committed: long enough
/// for a few turns' events to share a commit, short enough that nobody
/// waits on it (every event is seen this much later at most; a run's end
/// was seen up to 10 ms late when this was 10 ms). The SQLite store's
/// write thread batches these commits with other writes anyway.
pub(super) const LINGER: Duration = Duration::from_millis(2);

/// Failed attempts after which a failing store is reported (error log, health).
pub const LOUD_AFTER: u32 = 3;

/// The longest pause between two attempts.
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// Where the bus stores events: the run store's event table.
#[async_trait]
pub trait EventLog: Send + Sync + 'static {
    /// Stores a batch of numbered events in one transaction.
    async fn append_events(&self, events: &[Arc<Event>]) -> Result<()>;
    /// Stores a batch like [`EventLog::append_events`] and says the `seq`
    /// each event got, in order. A log other servers write too numbers each
    /// run's events after the last one stored, whoever stored it; a log of
    /// one server keeps the numbers given.
    async fn append_numbered(&self, events: &[Arc<Event>]) -> Result<Vec<u64>> {
        self.append_events(events).await?;
        Ok(events.iter().map(|e| e.seq).collect())
    }
    /// Other servers write to this log too (a shared store): events of a
    /// run may have been committed elsewhere between two of this server's.
    fn shared(&self) -> bool {
        false
    }
    /// Up to `limit` events of a run with `seq > after`, in order.
    async fn events_after(&self, run_id: &str, after: u64, limit: u32) -> Result<Vec<Event>>;
    /// The `seq` and type of a run's last stored event.
    async fn last_event(&self, run_id: &str) -> Result<Option<(u64, String)>>;
}

/// A [`Store`] as the bus's event log.
pub struct StoreLog(pub Arc<dyn Store>);

#[async_trait]
impl EventLog for StoreLog {
    async fn append_events(&self, events: &[Arc<Event>]) -> Result<()> {
        self.0.append_events(events).await
    }
    async fn append_numbered(&self, events: &[Arc<Event>]) -> Result<Vec<u64>> {
        self.0.append_events_numbered(events).await
    }
    fn shared(&self) -> bool {
        self.0.cluster().is_some()
    }
    async fn events_after(&self, run_id: &str, after: u64, limit: u32) -> Result<Vec<Event>> {
        self.0.events_after(run_id, after, limit).await
    }
    async fn last_event(&self, run_id: &str) -> Result<Option<(u64, String)>> {
        self.0.last_event(run_id).await
    }
}

/// Numbers a batch and commits it, retrying until the store takes it.
pub(super) async fn number_and_commit(
    shared: &Shared,
    log: &dyn EventLog,
    raw: Vec<(String, chrono::DateTime<Utc>, EventKind)>,
) -> Vec<Arc<Event>> {
    let mut attempt = 0;
    // A run's counter continues from its last stored event: a failed read
    // is retried like a failed write, never guessed (a guess could reuse a
    // number a client has seen).
    let loaded = loop {
        match counters(log, unknown_runs(shared, &raw)).await {
            Ok(loaded) => break loaded,
            Err(e) => failed(shared, &mut attempt, "read the last event numbers", &e, raw.len()).await,
        }
    };
    let mut events = number(shared, raw, &loaded);
    let stored = loop {
        match log.append_numbered(&events).await {
            Ok(seqs) => break seqs,
            Err(e) => failed(shared, &mut attempt, "store events", &e, events.len()).await,
        }
    };
    if stored.len() == events.len() && stored.iter().zip(&events).any(|(s, e)| *s != e.seq) {
        // Other servers stored events of these runs meanwhile: the log
        // numbered ours after theirs, and the counters follow it.
        events = renumbered(shared, events, &stored);
    }
    if attempt >= LOUD_AFTER {
        tracing::warn!(attempts = attempt + 1, "the event log is writable again; waiting events are stored");
    }
    if attempt > 0 {
        *shared.failing.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
    events
}

/// `events` with the numbers the log gave them; each run's counter moves on
/// to its last one.
fn renumbered(shared: &Shared, events: Vec<Arc<Event>>, stored: &[u64]) -> Vec<Arc<Event>> {
    let mut runs = shared.lock();
    events
        .into_iter()
        .zip(stored)
        .map(|(e, &seq)| {
            if let Some(log) = runs.get_mut(&e.run_id) {
                log.numbered = Some(log.numbered.unwrap_or(0).max(seq));
            }
            if e.seq == seq {
                e
            } else {
                Arc::new(Event { seq, ..Event::clone(&e) })
            }
        })
        .collect()
}

async fn counters(log: &dyn EventLog, ids: Vec<String>) -> Result<HashMap<String, u64>> {
    let mut loaded = HashMap::new();
    for id in ids {
        let last = log.last_event(&id).await?.map_or(0, |(seq, _)| seq);
        loaded.insert(id, last);
    }
    Ok(loaded)
}

/// Notes a failed attempt (loudly from [`LOUD_AFTER`] on) and pauses.
async fn failed(shared: &Shared, attempt: &mut u32, what: &str, e: &crate::error::EngineError, events: usize) {
    *attempt += 1;
    let waiting = events + shared.queue.len();
    if *attempt < LOUD_AFTER {
        tracing::warn!(error = %e, attempt = *attempt, "could not {what}; retrying");
    } else if *attempt == LOUD_AFTER || attempt.is_multiple_of(30) {
        tracing::error!(error = %e, attempt = *attempt, waiting,
            "could not {what}: events are held (not shown, not dropped) and publishers wait once the queue is full; retrying");
    }
    if *attempt >= LOUD_AFTER {
        let why = format!("the event log cannot be written ({e}); {waiting} events wait, retrying");
        *shared.failing.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
    }
    let pause = Duration::from_millis(50).saturating_mul(1 << (*attempt).min(6)).min(MAX_PAUSE);
    tokio::time::sleep(pause).await;
}
