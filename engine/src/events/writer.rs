//! The sequencer behind [`EventBus`]: numbers events, commits them, and
//! only then broadcasts them.
//!
//! One task owns sequence numbers, so they are gap-free without any lock on
//! the numbering itself. `publish` pushes onto a bounded queue (see
//! [`queue`](super::queue)); the task drains whatever has queued (up to
//! [`MAX_BATCH`]), numbers it (a run's counter starts from the database's
//! last `seq` the first time the run is seen, so numbering continues after a
//! restart), commits the batch in one transaction (group commit; see
//! [`persist`](super::persist)), and then broadcasts it. While it commits,
//! new events queue up and form the next batch: the busier the engine, the
//! bigger the batches.
//!
//! Because nothing is broadcast before it is committed, a `seq` a client has
//! seen is always in the database: a restart continues after it and never
//! hands it out again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::Utc;
use tokio::sync::{broadcast, oneshot};

use super::persist::{EventLog, StoreLog};
use super::queue::{Command, Queue};
use super::{Event, EventKind};
use crate::model::RunStatus;
use crate::store::Store;

/// Events numbered per wake-up (and committed per transaction) at most.
pub(super) const MAX_BATCH: usize = 2048;

/// Events waiting to be numbered and committed, at most (see
/// [`queue`](super::queue)): a publisher that finds the queue this full
/// waits for the writer. 8,192 events are a few megabytes of streamed text
/// and four full batches, enough for the writer never to starve.
pub const QUEUE_LIMIT: usize = 4 * MAX_BATCH;

/// Fan-out of engine events to any number of subscribers, persisted.
#[derive(Clone)]
pub struct EventBus {
    pub(super) shared: Arc<Shared>,
    /// Closes the queue when the last handle goes, which ends the writer.
    _open: Arc<Open>,
}

struct Open(Arc<Shared>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.queue.close();
    }
}

pub(super) struct Shared {
    pub(super) log: Option<Arc<dyn EventLog>>,
    pub(super) queue: Queue,
    global: broadcast::Sender<Event>,
    capacity: usize,
    pub(super) runs: Mutex<HashMap<String, RunLog>>,
    /// Why the event log cannot be written, while it cannot.
    pub(super) failing: Mutex<Option<String>>,
    /// Told of every `run.finished` this bus commits (see [`EventBus::on_finished`]).
    finished: std::sync::OnceLock<FinishHook>,
}

/// See [`EventBus::on_finished`].
pub type FinishHook = Box<dyn Fn(&str) + Send + Sync>;

/// What the bus keeps in memory about one run.
#[derive(Default)]
pub(super) struct RunLog {
    /// The last `seq` given out; `None` until read from the database.
    pub(super) numbered: Option<u64>,
    /// The last `seq` committed (and so broadcast); 0 before any.
    pub(super) committed: u64,
    /// The run's own channel, while someone replays or watches it.
    pub(super) tx: Option<broadcast::Sender<Arc<Event>>>,
    /// The last event was `run.finished` or a pause: the entry may be dropped.
    resting: bool,
}

impl Shared {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, RunLog>> {
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Subscribes to one run's committed events from now on.
    pub(super) fn subscribe_run(&self, run_id: &str) -> broadcast::Receiver<Arc<Event>> {
        let mut runs = self.lock();
        let log = runs.entry(run_id.to_owned()).or_default();
        match &log.tx {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = broadcast::channel(self.capacity);
                log.tx = Some(tx);
                rx
            }
        }
    }

    /// Forgets a run a watcher created the entry for, once nobody watches it
    /// and it never got a number here. Numbered entries are only ever dropped
    /// by the writer task itself, so a counter cannot vanish mid-batch.
    pub(super) fn release(&self, run_id: &str, receivers_leaving: usize) {
        let mut runs = self.lock();
        if let Some(log) = runs.get(run_id) {
            let watched = log.tx.as_ref().is_some_and(|tx| tx.receiver_count() > receivers_leaving);
            if !watched && log.numbered.is_none() {
                runs.remove(run_id);
            }
        }
    }
}

impl EventBus {
    /// `capacity` events are buffered per subscriber before it lags. With a
    /// store, events are persisted; must be called inside a tokio runtime.
    pub fn new(capacity: usize, store: Option<Arc<dyn Store>>) -> Self {
        let log = store.map(|s| Arc::new(StoreLog(s)) as Arc<dyn EventLog>);
        Self::with_log(capacity, log, QUEUE_LIMIT)
    }

    /// A bus that persists through `log` and queues at most `queue_limit`
    /// events (see [`QUEUE_LIMIT`]); must be called inside a tokio runtime.
    pub fn with_log(capacity: usize, log: Option<Arc<dyn EventLog>>, queue_limit: usize) -> Self {
        let (global, _) = broadcast::channel(capacity.max(16));
        let shared = Arc::new(Shared {
            log,
            queue: Queue::new(queue_limit.max(1)),
            global,
            capacity: capacity.max(16),
            runs: Mutex::default(),
            failing: Mutex::default(),
            finished: std::sync::OnceLock::new(),
        });
        tokio::spawn(write_loop(shared.clone()));
        Self { _open: Arc::new(Open(shared.clone())), shared }
    }

    /// Calls `hook` with the run id of every `run.finished` event this bus
    /// commits, once committed: the runs this server ended, not those other
    /// servers sharing the store ended (their events only pass through).
    /// The hook must not block (the writer calls it); set once, later calls
    /// are ignored.
    pub fn on_finished(&self, hook: FinishHook) {
        let _ = self.shared.finished.set(hook);
    }

    /// Queues an event of `run_id`; numbering, storage and broadcast follow
    /// in the background, in publish order. When [`QUEUE_LIMIT`] events are
    /// already waiting, the calling thread waits for room (see
    /// [`queue`](super::queue) for the one case where it cannot).
    pub fn publish(&self, run_id: &str, kind: EventKind) {
        self.shared.queue.push(command(run_id, kind));
    }

    /// [`publish`](Self::publish) for async callers: waits for room in the
    /// queue without holding a thread.
    pub async fn publish_async(&self, run_id: &str, kind: EventKind) {
        self.shared.queue.push_async(command(run_id, kind)).await;
    }

    /// Events queued and not yet taken by the writer.
    pub fn queued(&self) -> usize {
        self.shared.queue.len()
    }

    /// Every run's events from now on, each once committed (no replay; see
    /// `Traces::run_events`).
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.shared.global.subscribe()
    }

    /// How many subscribers follow every run's events here.
    pub fn subscriber_count(&self) -> usize {
        self.shared.global.receiver_count()
    }

    /// The last `seq` of a run's events committed in this process, if any.
    pub fn last_seq(&self, run_id: &str) -> Option<u64> {
        self.shared.lock().get(run_id).filter(|log| log.numbered.is_some()).map(|log| log.committed)
    }

    /// `Err(why)` while the event log cannot be written: events then wait in
    /// the queue (publishers wait once it is full), nobody sees them, and the
    /// writer keeps retrying.
    pub fn health(&self) -> Result<(), String> {
        match &*self.shared.failing.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }

    /// Waits until everything published before this call is committed.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        self.shared.queue.push_flush(tx);
        let _ = rx.await;
    }
}

fn command(run_id: &str, kind: EventKind) -> Command {
    // Millisecond precision, as stored: live and replayed events are equal.
    Command::Publish { run_id: run_id.to_owned(), at: crate::store::now(), kind }
}

/// Takes batches off the queue: numbers, commits, then broadcasts each.
async fn write_loop(shared: Arc<Shared>) {
    let mut resting: Vec<String> = Vec::new();
    let linger = shared.log.is_some();
    while let Some(commands) = shared.queue.take(MAX_BATCH, linger).await {
        let mut raw = Vec::with_capacity(commands.len());
        let mut flushes = Vec::new();
        for cmd in commands {
            match cmd {
                Command::Publish { run_id, at, kind } => raw.push((run_id, at, kind)),
                Command::Flush(done) => flushes.push(done),
            }
        }
        evict(&shared, &mut resting);
        if !raw.is_empty() {
            let events = match &shared.log {
                Some(log) => super::persist::number_and_commit(&shared, log.as_ref(), raw).await,
                None => number(&shared, raw, &HashMap::new()),
            };
            broadcast(&shared, &events);
            if let Some(hook) = shared.finished.get() {
                events.iter().filter(|e| matches!(e.kind, EventKind::RunFinished { .. })).for_each(|e| hook(&e.run_id));
            }
            resting.extend(events.iter().filter(|e| at_rest(&e.kind)).map(|e| e.run_id.clone()));
        }
        for done in flushes {
            let _ = done.send(());
        }
    }
}

/// The runs in `raw` whose counter is not in memory yet.
pub(super) fn unknown_runs(shared: &Shared, raw: &[(String, chrono::DateTime<Utc>, EventKind)]) -> Vec<String> {
    let runs = shared.lock();
    let mut ids: Vec<String> = raw
        .iter()
        .filter(|(id, ..)| runs.get(id).and_then(|l| l.numbered).is_none())
        .map(|(id, ..)| id.clone())
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// Gives a batch its numbers; `loaded`: the last stored `seq` of the runs
/// whose counter was not in memory. Nothing is visible to readers yet.
pub(super) fn number(
    shared: &Shared,
    raw: Vec<(String, chrono::DateTime<Utc>, EventKind)>,
    loaded: &HashMap<String, u64>,
) -> Vec<Arc<Event>> {
    let mut runs = shared.lock();
    raw.into_iter()
        .map(|(run_id, at, kind)| {
            let log = runs.entry(run_id.clone()).or_default();
            let last = log.numbered.or_else(|| loaded.get(&run_id).copied()).unwrap_or(0);
            if log.numbered.is_none() {
                log.committed = last;
            }
            log.numbered = Some(last + 1);
            log.resting = at_rest(&kind);
            Arc::new(Event { run_id, seq: last + 1, at, kind })
        })
        .collect()
}

/// Sends a committed batch to the runs' channels and the global one.
pub(super) fn broadcast(shared: &Shared, events: &[Arc<Event>]) {
    let mut runs = shared.lock();
    let watched_globally = shared.global.receiver_count() > 0;
    for event in events {
        if let Some(log) = runs.get_mut(&event.run_id) {
            log.committed = log.committed.max(event.seq);
            if let Some(tx) = &log.tx {
                let _ = tx.send(event.clone());
            }
        }
        if watched_globally {
            let _ = shared.global.send(Event::clone(event));
        }
    }
}

/// Forgets runs at rest that nobody watches (every numbered event is
/// committed between batches). Only this task drops numbered entries, so a
/// counter never vanishes between reading it and using it.
fn evict(shared: &Shared, candidates: &mut Vec<String>) {
    if candidates.is_empty() {
        return;
    }
    let mut runs = shared.lock();
    for id in candidates.drain(..) {
        if runs.get(&id).is_some_and(|log| log.resting && !is_watched(log)) {
            runs.remove(&id);
        }
    }
    // Runs that came to rest while watched linger; sweep them now and then.
    if runs.len() > SWEEP_ABOVE {
        runs.retain(|_, log| !log.resting || is_watched(log));
    }
}

fn at_rest(kind: &EventKind) -> bool {
    matches!(kind, EventKind::RunFinished { .. } | EventKind::RunStatus { new: RunStatus::Paused, .. })
}

/// Entries kept in memory before resting, unwatched ones are swept.
const SWEEP_ABOVE: usize = 10_000;

fn is_watched(log: &RunLog) -> bool {
    log.tx.as_ref().is_some_and(|tx| tx.receiver_count() > 0)
}
