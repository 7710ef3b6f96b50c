//! Several servers on one database (PostgreSQL; see `store::cluster`).
//!
//! With a shared store, this server is one member among several: it drives a
//! run only while it holds the run's lease, and three background tasks keep
//! it in step with the others:
//! - the **heartbeat** renews its row in the server registry and every lease
//!   it holds, every third of the lease (`EngineConfig::lease`, 15 s by default);
//! - the **claimer** takes work whenever a driver slot is free (and every
//!   few seconds rejects calls whose approval deadline passed on runs a
//!   server that died had paused, since its timers died with it): runs whose
//!   holder stopped renewing (taken over where their last step left them),
//!   then the oldest `pending` or resumed runs nobody holds. Claims use
//!   `FOR UPDATE SKIP LOCKED`, so `pending` runs form one queue across
//!   servers, each server taking no more than its `max_concurrent_runs`;
//! - the **listener** hears what other servers tell (`LISTEN`): a cancel
//!   stops the driver here, new events reach this server's subscribers, work
//!   wakes the claimer. A lost connection is followed by a re-read of what
//!   this server follows, and a slow poll backs it all up.
//!
//! The tasks hold the engine weakly: they end once every handle on it is gone.
//! On SQLite none of this runs: one server drives every run.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::Notify;

use super::schedule::Drivers;
use super::Engine;
use crate::model::Server;
use crate::runtime::Runtime;
use crate::store::cluster::{Fence, Notice};

/// How often an idle claimer looks for work it was not told about.
const POLL: Duration = Duration::from_secs(2);
/// How often calls past their approval deadline are looked for, and how
/// many are read at a time.
const OVERDUE_EVERY: Duration = Duration::from_secs(5);
const OVERDUE_BATCH: u32 = 500;
/// How long servers that stopped renewing stay listed.
const KEEP_GONE_MS: i64 = 24 * 3600 * 1000;

/// This server as a member of the cluster.
pub(super) struct Member {
    pub(super) server: Mutex<Server>,
    /// Wakes the claimer (work was announced, a slot came free).
    pub(super) work: Notify,
}

impl Member {
    pub(super) fn new(address: String, max_runs: usize) -> Self {
        let now = crate::store::now();
        let server = Server {
            id: uuid::Uuid::now_v7().to_string(),
            address,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            started_at: now,
            heartbeat_at: now,
            runs_held: 0,
            max_runs: max_runs as u64,
            alive: true,
            this: true,
        };
        Self { server: Mutex::new(server), work: Notify::new() }
    }

    pub(super) fn id(&self) -> String {
        self.server.lock().unwrap_or_else(|e| e.into_inner()).id.clone()
    }

    fn snapshot(&self) -> Server {
        self.server.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// An engine the background tasks hold without keeping it alive.
#[derive(Clone)]
pub(super) struct WeakEngine {
    rt: Weak<Runtime>,
    drivers: Weak<Drivers>,
}

impl WeakEngine {
    pub(super) fn upgrade(&self) -> Option<Engine> {
        Some(Engine { rt: self.rt.upgrade()?, drivers: self.drivers.upgrade()? })
    }
}

impl Engine {
    pub(super) fn downgrade(&self) -> WeakEngine {
        WeakEngine { rt: Arc::downgrade(&self.rt), drivers: Arc::downgrade(&self.drivers) }
    }

    /// How long a lease lasts without renewal, in milliseconds.
    pub(super) fn lease_ms(&self) -> i64 {
        i64::try_from(self.rt.config.lease.as_millis()).unwrap_or(i64::MAX).max(1000)
    }

    /// Claims runs ready to drive while this server has free slots (see the
    /// claimer), and starts their drivers; how many it took.
    pub(super) async fn claim_free_slots(&self) -> crate::error::Result<usize> {
        let (Some(cluster), Some(member)) = (self.rt.store.cluster(), self.member()) else { return Ok(0) };
        let owner = member.id();
        let mut taken = 0;
        while let Ok(permit) = self.drivers.permits.clone().try_acquire_owned() {
            let Some((run_id, attempt)) = cluster.claim_next(&owner, self.lease_ms()).await? else { break };
            let fence = Fence { run_id: run_id.clone(), owner: owner.clone(), attempt };
            self.start_driver(run_id, Some((fence, permit)));
            taken += 1;
        }
        Ok(taken)
    }

    /// Rejects calls whose approval deadline has passed ("approval timed
    /// out", as their timer would): the server that paused a run queues its
    /// deadlines, and should it die, the others catch its calls here, a few
    /// seconds late at most. Two servers rejecting one call is harmless
    /// (one decision wins). Only the overdue calls' ids are read, a batch
    /// at a time. How many it rejected.
    pub(super) async fn reject_overdue(&self) -> crate::error::Result<usize> {
        let mut rejected = 0;
        loop {
            let overdue = self.rt.store.overdue_calls(chrono::Utc::now(), OVERDUE_BATCH).await?;
            let full = overdue.len() as u64 == u64::from(OVERDUE_BATCH);
            let mut now_rejected = 0;
            for (run_id, call_id) in overdue {
                let req = crate::model::DecisionRequest {
                    reason: Some("approval timed out".into()),
                    ..crate::model::DecisionRequest::default()
                };
                if self.approvals().reject(&run_id, &call_id, req, &crate::model::Actor::system()).await.is_ok() {
                    now_rejected += 1;
                }
            }
            rejected += now_rejected;
            // Another batch only while this one made progress (a call that
            // cannot be rejected now is not read again and again).
            if !full || now_rejected == 0 {
                return Ok(rejected);
            }
        }
    }

    /// This server's membership, when the store is shared.
    pub(super) fn member(&self) -> Option<&Arc<Member>> {
        self.drivers.member.as_ref()
    }

    /// Starts the heartbeat, the claimer and the listener (see the module
    /// docs); nothing on a store one server has to itself.
    pub(super) fn start_membership(&self) {
        let Some(member) = self.member().cloned() else { return };
        let Some(_) = self.rt.store.cluster() else { return };
        tokio::spawn(heartbeat(self.downgrade(), member.clone()));
        tokio::spawn(claimer(self.downgrade(), member.clone()));
        tokio::spawn(listener(self.downgrade(), member));
    }

    /// Tells every server that run `run_id` was cancelled (its driver may be elsewhere).
    pub(super) async fn announce_cancel(&self, run_id: &str) {
        if let Some(cluster) = self.rt.store.cluster() {
            if let Err(e) = cluster.notify(&Notice::Cancel { run_id: run_id.to_owned() }).await {
                tracing::warn!(run_id, error = %e, "could not tell the other servers of a cancel");
            }
        }
    }
}

async fn heartbeat(engine: WeakEngine, member: Arc<Member>) {
    loop {
        let Some(engine) = engine.upgrade() else { return };
        let Some(cluster) = engine.rt.store.cluster() else { return };
        let lease = engine.lease_ms();
        match cluster.heartbeat(&member.snapshot(), lease).await {
            Ok(held) => {
                let mut s = member.server.lock().unwrap_or_else(|e| e.into_inner());
                s.runs_held = held;
                s.heartbeat_at = crate::store::now();
            }
            Err(e) => tracing::warn!(error = %e, "could not renew this server's leases"),
        }
        drop(engine);
        tokio::time::sleep(Duration::from_millis((lease / 3) as u64)).await;
    }
}

async fn claimer(weak: WeakEngine, member: Arc<Member>) {
    let mut swept = tokio::time::Instant::now();
    loop {
        let Some(permits) = weak.drivers.upgrade().map(|d| d.permits.clone()) else { return };
        // Wait for a free slot without keeping the engine alive.
        let Ok(permit) = permits.acquire_owned().await else { return };
        drop(permit);
        let Some(engine) = weak.upgrade() else { return };
        if let Err(e) = engine.announce_finishes_of_the_dead().await {
            tracing::warn!(error = %e, "could not look for runs a stopped server finished");
        }
        if swept.elapsed() >= OVERDUE_EVERY {
            swept = tokio::time::Instant::now();
            match engine.reject_overdue().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(calls = n, "rejected calls whose approval deadline passed"),
                Err(e) => tracing::warn!(error = %e, "could not look for overdue approvals"),
            }
        }
        let idle = match engine.claim_free_slots().await {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => {
                tracing::warn!(error = %e, "could not look for work");
                true
            }
        };
        let full = engine.drivers.permits.available_permits() == 0;
        drop(engine);
        if idle || full {
            // Until work is announced or a slot frees up; the poll is the safety net.
            tokio::select! {
                _ = member.work.notified() => {}
                _ = tokio::time::sleep(POLL) => {}
            }
        }
    }
}

async fn listener(weak: WeakEngine, member: Arc<Member>) {
    loop {
        let Some(engine) = weak.upgrade() else { return };
        let Some(cluster) = engine.rt.store.cluster() else { return };
        let me = cluster.instance().to_owned();
        let mut notices = match cluster.listen().await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "could not listen to the other servers; retrying");
                drop(engine);
                tokio::time::sleep(POLL).await;
                continue;
            }
        };
        // Whatever was missed before listening.
        engine.rt.bus.catch_up().await;
        drop(engine);
        loop {
            let notice = tokio::select! {
                n = notices.next() => n,
                // The safety net: notifications can be lost.
                _ = tokio::time::sleep(POLL * 5) => Some(Notice::Reconnected),
            };
            let Some(engine) = weak.upgrade() else { return };
            match notice {
                None => break,
                Some(Notice::Work) => member.work.notify_one(),
                Some(Notice::Cancel { run_id }) => {
                    if let Some((token, _)) = engine.drivers.driver(&run_id) {
                        token.cancel();
                    }
                }
                Some(Notice::Events { from, run_id, first, last }) => {
                    if from != me {
                        engine.rt.bus.remote(&run_id, first, last).await;
                    }
                }
                Some(Notice::Reconnected) => {
                    engine.rt.bus.catch_up().await;
                    member.work.notify_one();
                }
            }
        }
    }
}

impl Cluster<'_> {
    /// The servers sharing the store (this one marked), or just this one on
    /// a store of its own.
    pub async fn servers(self) -> crate::error::Result<Vec<Server>> {
        let Some(cluster) = self.rt.store.cluster() else {
            return Ok(vec![Server {
                id: "local".into(),
                address: "local".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                started_at: self.drivers.started_at,
                heartbeat_at: crate::store::now(),
                runs_held: self.drivers.running() as u64,
                max_runs: self.rt.config.max_concurrent_runs as u64,
                alive: true,
                this: true,
            }]);
        };
        let me = self.member().map(|m| m.id());
        let mut servers = cluster.servers(self.lease_ms(), KEEP_GONE_MS).await?;
        for s in &mut servers {
            s.this = Some(&s.id) == me.as_ref();
        }
        Ok(servers)
    }

    /// A server stopping cleanly: its leases go back to the queue at once
    /// (rather than when they expire) and it leaves the registry.
    pub async fn leave(self) {
        let (Some(member), Some(cluster)) = (self.member(), self.rt.store.cluster()) else { return };
        if let Err(e) = cluster.leave(&member.id()).await {
            tracing::warn!(error = %e, "could not leave the server registry");
        }
    }
}

crate::engine::facade_group!(Cluster, cluster, "The servers sharing one PostgreSQL database.");
