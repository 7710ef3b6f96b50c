//! The event stream: every state change of every run, numbered and persisted.
//!
//! `publish` hands the event to one background task (see [`writer`]) through
//! a bounded queue (see [`queue`]; a publisher waits when it is full). The
//! task gives each event its run's next sequence number (1, 2, 3… per run,
//! gap-free, in publish order), commits a whole batch in one transaction
//! (group commit; see [`persist`]), and only then broadcasts it. No
//! subscriber ever sees an event that is not in the database, so a `seq` a
//! client has seen is never handed out again, even after a crash; a reader
//! that subscribes first, then reads the database (see [`replay`]), misses
//! nothing.
//!
//! With a store several servers share, a run's events may be committed by
//! any of them: the log numbers each run's events in commit order whoever
//! commits them, servers tell each other `(run_id, seq)` (see [`remote`]),
//! and a reader that finds a gap reads it from the log.
//!
//! Broadcast channels are bounded: a subscriber that falls behind gets
//! `Lagged` (and the SSE layer drops it) instead of stalling the engine.
//!
//! The events themselves, [`Event`] and [`EventKind`], are model types
//! (`model::event`, also in the browser bundle), re-exported here.

mod persist;
mod queue;
mod remote;
mod replay;
mod writer;

use tokio::sync::broadcast;

pub use crate::model::{Event, EventKind};
pub use persist::{EventLog, StoreLog, LOUD_AFTER};
pub use replay::{RunEvents, StreamEnd};
pub use writer::{EventBus, QUEUE_LIMIT};

/// Receives every run's events live (no replay); see [`EventBus::subscribe`].
pub type AllEvents = broadcast::Receiver<Event>;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn subscribers_see_numbered_events_in_order() {
        let bus = EventBus::new(16, None);
        let mut rx = bus.subscribe();
        bus.publish("r1", EventKind::StepStarted { index: 0 });
        bus.publish("r2", EventKind::StepStarted { index: 0 });
        bus.publish("r1", EventKind::StepStarted { index: 1 });
        let got: Vec<(String, u64)> = [rx.recv().await, rx.recv().await, rx.recv().await]
            .into_iter()
            .map(|e| e.map(|e| (e.run_id, e.seq)).unwrap())
            .collect();
        assert_eq!(got, [("r1".into(), 1), ("r2".into(), 1), ("r1".into(), 2)]);
    }

    #[tokio::test]
    async fn a_slow_subscriber_lags_instead_of_blocking() {
        let bus = EventBus::new(16, None);
        let mut rx = bus.subscribe();
        for i in 0..100 {
            bus.publish("r1", EventKind::StepStarted { index: i });
        }
        bus.flush().await;
        assert!(matches!(rx.recv().await, Err(broadcast::error::RecvError::Lagged(_))));
    }
}
