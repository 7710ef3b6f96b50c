//! The sequencer and background writer behind [`EventBus`].
//!
//! One task owns sequence numbers, so they are gap-free without any lock
//! on the publish path: `publish` only pushes onto an unbounded queue. The
//! task drains whatever has queued (up to [`MAX_BATCH`]), numbers it
//! (a run's counter starts from the database's last `seq` the first time the
//! run is seen, so numbering continues after a restart), records it in the
//! run's uncommitted tail, broadcasts it, and then commits the batch in one
//! transaction. While it commits, new events queue up and form the next
//! batch: the busier the engine, the bigger the batches (group commit).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use chrono::Utc;
use tokio::sync::{broadcast, mpsc, oneshot};

use super::{Event, EventKind};
use crate::model::RunStatus;
use crate::store::Store;

/// Events numbered per wake-up (and committed per transaction) at most.
pub(super) const MAX_BATCH: usize = 2048;

/// Fan-out of engine events to any number of subscribers, persisted.
#[derive(Clone)]
pub struct EventBus {
    queue: mpsc::UnboundedSender<Command>,
    pub(super) shared: Arc<Shared>,
}

pub(super) enum Persist {
    Events(Vec<Arc<Event>>),
    Flush(oneshot::Sender<()>),
}

// Nearly every command is a `Publish`: boxing it would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Command {
    Publish { run_id: String, at: chrono::DateTime<Utc>, kind: EventKind },
    Flush(oneshot::Sender<()>),
}

pub(super) struct Shared {
    pub(super) store: Option<Arc<dyn Store>>,
    global: broadcast::Sender<Event>,
    capacity: usize,
    pub(super) runs: Mutex<HashMap<String, RunLog>>,
}

/// What the bus keeps in memory about one run.
#[derive(Default)]
pub(super) struct RunLog {
    /// The last `seq` given out; `None` until read from the database.
    last_seq: Option<u64>,
    /// Broadcast but not yet committed, in order.
    pub(super) uncommitted: VecDeque<Arc<Event>>,
    /// The run's own channel, while someone replays or watches it.
    pub(super) tx: Option<broadcast::Sender<Arc<Event>>>,
    /// The last event was `run.finished` or a pause: the entry may be dropped.
    resting: bool,
}

impl Shared {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, RunLog>> {
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Subscribes to one run and takes its uncommitted tail, atomically.
    pub(super) fn subscribe_run(&self, run_id: &str) -> (broadcast::Receiver<Arc<Event>>, Vec<Arc<Event>>) {
        let mut runs = self.lock();
        let log = runs.entry(run_id.to_owned()).or_default();
        let rx = match &log.tx {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = broadcast::channel(self.capacity);
                log.tx = Some(tx);
                rx
            }
        };
        (rx, log.uncommitted.iter().cloned().collect())
    }

    /// Forgets a run a watcher created the entry for, once nobody watches it
    /// and it never got a number here. Numbered entries are only ever dropped
    /// by the writer task itself, so a counter cannot vanish mid-batch.
    pub(super) fn release(&self, run_id: &str, receivers_leaving: usize) {
        let mut runs = self.lock();
        if let Some(log) = runs.get(run_id) {
            let watched = log.tx.as_ref().is_some_and(|tx| tx.receiver_count() > receivers_leaving);
            if !watched && log.uncommitted.is_empty() && log.last_seq.is_none() {
                runs.remove(run_id);
            }
        }
    }
}

impl EventBus {
    /// `capacity` events are buffered per subscriber before it lags. With a
    /// store, events are persisted; must be called inside a tokio runtime.
    pub fn new(capacity: usize, store: Option<Arc<dyn Store>>) -> Self {
        let (queue, rx) = mpsc::unbounded_channel();
        let (to_persister, persister) = mpsc::unbounded_channel();
        let (global, _) = broadcast::channel(capacity.max(16));
        let shared = Arc::new(Shared { store, global, capacity: capacity.max(16), runs: Mutex::default() });
        tokio::spawn(sequence_loop(shared.clone(), rx, to_persister));
        tokio::spawn(super::persist::persist_loop(shared.clone(), persister));
        Self { queue, shared }
    }

    /// Queues an event of `run_id`; numbering, broadcast and storage follow
    /// in the background, in publish order. Never blocks.
    pub fn publish(&self, run_id: &str, kind: EventKind) {
        // Millisecond precision, as stored: live and replayed events are equal.
        let at = crate::engine::now();
        let _ = self.queue.send(Command::Publish { run_id: run_id.to_owned(), at, kind });
    }

    /// Every run's events from now on (no replay; see `Engine::run_events`).
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.shared.global.subscribe()
    }

    /// The last `seq` given to a run's events in this process, if any.
    pub fn last_seq(&self, run_id: &str) -> Option<u64> {
        self.shared.lock().get(run_id).and_then(|log| log.last_seq)
    }

    /// Waits until everything published before this call is committed.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.queue.send(Command::Flush(tx)).is_ok() {
            let _ = rx.await;
        }
    }
}

/// Numbers and broadcasts events as they come, then hands them to the
/// persister (see `persist`), so a slow commit never delays live delivery.
async fn sequence_loop(
    shared: Arc<Shared>,
    mut rx: mpsc::UnboundedReceiver<Command>,
    out: mpsc::UnboundedSender<Persist>,
) {
    let mut raw = Vec::new();
    let mut flushes = Vec::new();
    let mut resting: Vec<String> = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(cmd) = next.take() {
            match cmd {
                Command::Publish { run_id, at, kind } => raw.push((run_id, at, kind)),
                Command::Flush(done) => flushes.push(done),
            }
            if raw.len() < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        evict(&shared, &mut resting);
        let events = sequence(&shared, std::mem::take(&mut raw)).await;
        resting.extend(events.iter().filter(|e| at_rest(&e.kind)).map(|e| e.run_id.clone()));
        let _ = out.send(Persist::Events(events));
        for done in flushes.drain(..) {
            let _ = out.send(Persist::Flush(done));
        }
    }
}

/// Forgets runs at rest whose events are all committed and that nobody
/// watches. Only this task drops numbered entries, so a counter never
/// vanishes between reading it and using it.
fn evict(shared: &Shared, candidates: &mut Vec<String>) {
    if candidates.is_empty() {
        return;
    }
    let mut runs = shared.lock();
    candidates.retain(|id| match runs.get(id) {
        Some(log) if log.resting && !log.uncommitted.is_empty() => true, // look again later
        Some(log) if log.resting && !is_watched(log) => {
            runs.remove(id);
            false
        }
        _ => false,
    });
    // Runs that came to rest while watched linger; sweep them now and then.
    if runs.len() > SWEEP_ABOVE {
        runs.retain(|_, log| !log.uncommitted.is_empty() || !log.resting || is_watched(log));
    }
}

fn at_rest(kind: &EventKind) -> bool {
    matches!(kind, EventKind::RunFinished { .. } | EventKind::RunStatus { new: RunStatus::Paused, .. })
}

/// Numbers, records and broadcasts a batch.
async fn sequence(shared: &Shared, raw: Vec<(String, chrono::DateTime<Utc>, EventKind)>) -> Vec<Arc<Event>> {
    let unknown: Vec<String> = {
        let runs = shared.lock();
        let mut ids: Vec<String> = raw
            .iter()
            .filter(|(id, ..)| runs.get(id).and_then(|l| l.last_seq).is_none())
            .map(|(id, ..)| id.clone())
            .collect();
        ids.dedup();
        ids
    };
    let mut loaded = HashMap::new();
    for id in unknown {
        if loaded.contains_key(&id) {
            continue;
        }
        let last = match &shared.store {
            Some(store) => store.last_event(&id).await.map(|l| l.map_or(0, |(seq, _)| seq)).unwrap_or_else(|e| {
                tracing::error!(run_id = %id, error = %e, "cannot read the last event seq; numbering from 0");
                0
            }),
            None => 0,
        };
        loaded.insert(id, last);
    }
    let mut runs = shared.lock();
    let watched_globally = shared.global.receiver_count() > 0;
    raw.into_iter()
        .map(|(run_id, at, kind)| {
            let log = runs.entry(run_id.clone()).or_default();
            let seq = log.last_seq.or_else(|| loaded.get(&run_id).copied()).unwrap_or(0) + 1;
            log.last_seq = Some(seq);
            log.resting = at_rest(&kind);
            let event = Arc::new(Event { run_id, seq, at, kind });
            log.uncommitted.push_back(event.clone());
            if let Some(tx) = &log.tx {
                let _ = tx.send(event.clone());
            }
            if watched_globally {
                let _ = shared.global.send(Event::clone(&event));
            }
            event
        })
        .collect()
}

/// Entries kept in memory before resting, unwatched ones are swept.
const SWEEP_ABOVE: usize = 10_000;

fn is_watched(log: &RunLog) -> bool {
    log.tx.as_ref().is_some_and(|tx| tx.receiver_count() > 0)
}
