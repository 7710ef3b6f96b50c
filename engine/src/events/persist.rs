//! The persister: stores numbered events in batches (group commit).
//!
//! It lingers a few milliseconds after the first event of a batch, so a
//! busy engine makes one write transaction per [`LINGER`] instead of one per
//! event: SQLite has a single writer, and every transaction of ours is one
//! the run loop may have to wait behind. Nothing waits for these commits but
//! `flush` (which skips the linger): readers get uncommitted events from the
//! run's in-memory tail until the commit lands, then drop them from it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::writer::{Persist, Shared, MAX_BATCH};
use super::Event;
use crate::store::Store;

/// How long a batch collects events before it is committed.
pub(super) const LINGER: Duration = Duration::from_millis(10);

pub(super) async fn persist_loop(shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<Persist>) {
    let mut batch: Vec<Arc<Event>> = Vec::new();
    let mut flushes = Vec::new();
    while let Some(first) = rx.recv().await {
        take(first, &mut batch, &mut flushes);
        let deadline = Instant::now() + LINGER;
        // Without a store there is nothing to group: just clear the tails.
        while shared.store.is_some() && batch.len() < MAX_BATCH && flushes.is_empty() {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(item)) => take(item, &mut batch, &mut flushes),
                Ok(None) | Err(_) => break,
            }
        }
        // Whatever else is already queued joins this batch.
        while let Ok(item) = rx.try_recv() {
            take(item, &mut batch, &mut flushes);
        }
        if let Some(store) = &shared.store {
            for chunk in batch.chunks(MAX_BATCH) {
                persist(store.as_ref(), chunk).await;
            }
        }
        committed(&shared, &batch);
        batch.clear();
        for done in flushes.drain(..) {
            let _ = done.send(());
        }
    }
}

fn take(item: Persist, batch: &mut Vec<Arc<Event>>, flushes: &mut Vec<oneshot::Sender<()>>) {
    match item {
        Persist::Events(events) => batch.extend(events),
        Persist::Flush(done) => flushes.push(done),
    }
}

/// Stores a batch, retrying a failing database a few times.
async fn persist(store: &dyn Store, events: &[Arc<Event>]) {
    for attempt in 1..=5u32 {
        match store.append_events(events).await {
            Ok(()) => return,
            Err(e) if attempt < 5 => {
                tracing::warn!(error = %e, attempt, "could not store events; retrying");
                tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
            }
            Err(e) => {
                tracing::error!(error = %e, lost = events.len(), "could not store events; they stay unreplayable")
            }
        }
    }
}

/// Takes committed events out of their runs' tails.
fn committed(shared: &Shared, events: &[Arc<Event>]) {
    let mut runs = shared.lock();
    for e in events {
        if let Some(log) = runs.get_mut(&e.run_id) {
            while log.uncommitted.front().is_some_and(|u| u.seq <= e.seq) {
                log.uncommitted.pop_front();
            }
        }
    }
}
