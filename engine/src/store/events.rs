//! The events part of the store: each run's numbered events, written in
//! batches and read back in order after a given `seq`.

use std::sync::Arc;

use async_trait::async_trait;

use crate::error::Result;
use crate::model::Event;

#[async_trait]
pub trait EventStore: Send + Sync {
    /// Stores a batch of numbered events in one transaction.
    async fn append_events(&self, events: &[Arc<Event>]) -> Result<()>;
    /// Stores a batch like [`EventStore::append_events`] and says the `seq`
    /// each event got, in order. A store several servers share numbers each
    /// run's events after the last one stored, whoever stored it (and tells
    /// the other servers); a store of one server keeps the numbers given.
    async fn append_events_numbered(&self, events: &[Arc<Event>]) -> Result<Vec<u64>> {
        self.append_events(events).await?;
        Ok(events.iter().map(|e| e.seq).collect())
    }
    /// Up to `limit` events of a run with `seq > after`, in order.
    async fn events_after(&self, run_id: &str, after: u64, limit: u32) -> Result<Vec<Event>>;
    /// The `seq` and type of a run's last stored event.
    async fn last_event(&self, run_id: &str) -> Result<Option<(u64, String)>>;
}
