//! Events committed by other servers (a store several servers share): read
//! from the log when a server tells of them, and broadcast here to this
//! server's subscribers (a run's stream, and the all-runs feed).
//!
//! A notification names the run and the range of `seq` committed; one lost
//! while the connection was down is made up by [`EventBus::catch_up`], which
//! re-reads every run watched here. Readers that still see a gap read it
//! from the log themselves (see `replay`), so nothing is ever skipped.

use std::sync::Arc;

use super::writer::broadcast;
use super::{Event, EventBus};

/// Events read from the log per query while catching up.
const PAGE: u32 = 1000;

impl EventBus {
    /// Another server committed events `first..=last` of run `run_id`:
    /// broadcasts them here when anyone here follows the run or all runs.
    pub async fn remote(&self, run_id: &str, first: u64, last: u64) {
        let shared = &self.shared;
        let (watched, committed) = {
            let runs = shared.lock();
            let log = runs.get(run_id);
            let watched = log.and_then(|l| l.tx.as_ref()).is_some_and(|tx| tx.receiver_count() > 0);
            (watched, log.map_or(0, |l| l.committed))
        };
        if !watched && self.shared_global_receivers() == 0 {
            return;
        }
        // A run followed here is read on from what was broadcast here (the
        // notification of earlier events may have been lost); otherwise from
        // the range told.
        let after = if watched && committed > 0 && committed < first { committed } else { first.saturating_sub(1) };
        self.read_and_broadcast(run_id, after, last).await;
    }

    /// Re-reads every run followed here from the log: after notifications
    /// may have been lost (a reconnection) and now and then as a safety net.
    pub async fn catch_up(&self) {
        let Some(log) = self.shared.log.clone() else { return };
        let watched: Vec<(String, u64)> = {
            let runs = self.shared.lock();
            runs.iter()
                .filter(|(_, l)| l.tx.as_ref().is_some_and(|tx| tx.receiver_count() > 0))
                .map(|(id, l)| (id.clone(), l.committed))
                .collect()
        };
        for (run_id, committed) in watched {
            match log.last_event(&run_id).await {
                Ok(Some((last, _))) if last > committed => self.read_and_broadcast(&run_id, committed, last).await,
                Ok(_) => {}
                Err(e) => tracing::warn!(run_id, error = %e, "could not catch up with a run's events"),
            }
        }
    }

    fn shared_global_receivers(&self) -> usize {
        self.subscriber_count()
    }

    /// Reads events `after+1..=last` of `run_id` and broadcasts them in order.
    async fn read_and_broadcast(&self, run_id: &str, mut after: u64, last: u64) {
        let Some(log) = self.shared.log.clone() else { return };
        while after < last {
            let page = match log.events_after(run_id, after, PAGE).await {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(run_id, error = %e, "could not read events another server committed");
                    return;
                }
            };
            let events: Vec<Arc<Event>> = page.into_iter().filter(|e| e.seq <= last).map(Arc::new).collect();
            let Some(newest) = events.last().map(|e| e.seq) else { return };
            after = newest;
            broadcast(&self.shared, &events);
        }
    }
}
