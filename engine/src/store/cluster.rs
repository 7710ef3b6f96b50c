//! Several servers on one database: run leases, the server registry, and the
//! notifications servers wake each other with. Only a store several servers
//! can share has this part (PostgreSQL; see [`Store::cluster`]); on SQLite,
//! one server drives everything and none of it applies.
//!
//! A run is driven by the server holding its lease: owner, expiry, and an
//! attempt number that grows with every claim. Every write of the run's loop
//! is fenced by the attempt (see [`Fence`]): a server that lost the lease
//! (it froze, its lease expired, another server claimed the run) has its
//! next write refused with [`EngineError::LeaseLost`] and stops.
//!
//! [`Store::cluster`]: super::Store::cluster
//! [`EngineError::LeaseLost`]: crate::error::EngineError::LeaseLost

use std::pin::Pin;

use async_trait::async_trait;
use futures::Stream;

use crate::error::Result;
use crate::model::{RunStatus, Server};

/// The lease a driver holds while it drives one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fence {
    pub run_id: String,
    pub owner: String,
    pub attempt: u64,
}

tokio::task_local! {
    /// The lease of the run the current task drives: set by the scheduler
    /// around a driver, checked by the store in each write of that run.
    pub static FENCE: Fence;
}

/// The fence of the current task when it drives `run_id`.
pub fn fence_for(run_id: &str) -> Option<Fence> {
    FENCE.try_with(|f| (f.run_id == run_id).then(|| f.clone())).ok().flatten()
}

/// A lease given back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Released {
    /// The run's status as the release found it.
    pub status: RunStatus,
    /// Another server tried to claim the run meanwhile (a child of it
    /// ended, a decision resumed it): the releasing server drives it again
    /// rather than leave it parked.
    pub woken: bool,
}

/// What one server tells the others (PostgreSQL `NOTIFY`, so at most a few
/// bytes: a notification carries ids, never payloads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// Events `first..=last` of `run_id` were committed by store instance
    /// `from` (see [`ClusterStore::instance`]).
    Events { from: String, run_id: String, first: u64, last: u64 },
    /// Run `run_id` was cancelled: its driver, wherever it is, stops.
    Cancel { run_id: String },
    /// A run became ready to drive (created, resumed, released).
    Work,
    /// The connection was lost and is back: notifications may have been
    /// missed meanwhile, so listeners re-read what they follow.
    Reconnected,
}

/// A stream of notices from every server (this one's own included).
pub type Notices = Pin<Box<dyn Stream<Item = Notice> + Send>>;

/// Leases, registry and notifications of a shared store.
#[async_trait]
pub trait ClusterStore: Send + Sync {
    /// This process's handle on the store, as its notifications name it
    /// (so a server can tell its own events from the others').
    fn instance(&self) -> &str;
    /// Registers `server` (or refreshes its row) and renews every lease it
    /// holds for `lease_ms`; returns how many runs it holds.
    async fn heartbeat(&self, server: &Server, lease_ms: i64) -> Result<u64>;
    /// The servers that renewed within the last `keep_ms` (the others' rows
    /// are removed), oldest first; `alive` when renewed within `lease_ms`.
    async fn servers(&self, lease_ms: i64, keep_ms: i64) -> Result<Vec<Server>>;
    /// A server stopping: its leases are released and its row removed.
    async fn leave(&self, server_id: &str) -> Result<()>;
    /// Takes the lease on run `run_id` when nobody holds it (or its holder's
    /// expired) and the run is `pending` or `running`; the new attempt. When
    /// another server holds it, that server is asked to look at the run
    /// again when it lets go (see [`Released::woken`]).
    async fn claim(&self, run_id: &str, owner: &str, lease_ms: i64) -> Result<Option<u64>>;
    /// Takes the lease on the oldest run nobody holds that is ready to drive
    /// (`FOR UPDATE SKIP LOCKED`: servers never take the same one).
    async fn claim_next(&self, owner: &str, lease_ms: i64) -> Result<Option<(String, u64)>>;
    /// Gives a lease up (unless it was lost meanwhile: `None`); `park` marks
    /// a run waiting for its children, which the queue then skips.
    async fn release(&self, fence: &Fence, park: bool) -> Result<Option<Released>>;
    /// Hands run `run_id`, which this server made ready to drive and has
    /// stored the events of, to the queue (it has no slot for it).
    async fn hand_over(&self, run_id: &str) -> Result<()>;
    /// Finished runs whose `run.finished` the server that finished them did
    /// not store before it died: taken on by `owner`, which publishes them.
    async fn take_lost_finishes(&self, owner: &str, lease_ms: i64) -> Result<Vec<String>>;
    /// Tells every server (this one included).
    async fn notify(&self, notice: &Notice) -> Result<()>;
    /// Starts listening (reconnecting by itself).
    async fn listen(&self) -> Result<Notices>;
}
