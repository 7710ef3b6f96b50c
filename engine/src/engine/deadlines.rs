//! Approval deadlines: one scheduler for every call awaiting a decision
//! whose run has an approval timeout.
//!
//! A deadline is an entry in one ordered queue (a few hundred bytes: the
//! run and call ids, the moment), not a task of its own, so a million
//! paused runs with timeouts cost a few hundred megabytes at most rather
//! than a million sleeping tasks. One task per engine sleeps until the
//! earliest entry and rejects what is due ("approval timed out"), unless
//! it was decided first; arming an earlier deadline wakes it. The calls of
//! one pause share their moment and are rejected one after the other.
//!
//! A run's entries are dropped when a driver starts on it (a decision
//! resumed it, so they are moot) and when it is cancelled; an entry that
//! outlives its call anyway (decided on another server, say) finds the call
//! decided when it fires and does nothing. The task holds the engine
//! weakly and ends with it.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Engine;
use crate::error::EngineError;
use crate::model::{Actor, DecisionRequest, RunStatus};

/// Timeouts longer than this (about 100 years) are not armed.
pub(super) const MAX_TIMEOUT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// How long, in all, a fired timeout waits for the driver to finish pausing.
const PAUSE_WAIT: Duration = Duration::from_millis(20);
const PAUSE_WAIT_TRIES: u32 = 250;

/// How many due entries the scheduler takes at once, and rejects at a time.
const BATCH: usize = 64;
const AT_ONCE: usize = 8;

/// The queue key: the moment, then the order of arming (unique).
type Key = (Instant, u64);

/// The deadlines of one engine (see the module docs).
#[derive(Default)]
pub(super) struct Deadlines {
    queue: Mutex<Queue>,
    /// Wakes the scheduler: an entry was armed (maybe earlier than the one it sleeps for).
    wake: Notify,
    /// Fired when the engine goes: the scheduler ends.
    stop: CancellationToken,
    started: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct Queue {
    due: BTreeMap<Key, Due>,
    /// The keys of each run's entries, to drop them with the run.
    by_run: HashMap<Arc<str>, Vec<Key>>,
    seq: u64,
}

/// Calls of one run to reject at one moment.
struct Due {
    run_id: Arc<str>,
    calls: Vec<Box<str>>,
    /// How many times the run was found still pausing when this fired.
    tries: u32,
}

impl Deadlines {
    /// Queues `calls` of `run_id` to be rejected at `at`; calls of the run
    /// already queued are left as they are. `true` when something was queued.
    fn arm(&self, run_id: &str, mut calls: Vec<String>, at: Instant, tries: u32) -> bool {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let q = &mut *q;
        let run: Arc<str> = match q.by_run.get_key_value(run_id) {
            Some((run, keys)) => {
                let queued = |call: &str| {
                    keys.iter().any(|k| q.due.get(k).is_some_and(|d| d.calls.iter().any(|c| &**c == call)))
                };
                let calls_left: Vec<String> = calls.into_iter().filter(|c| !queued(c)).collect();
                calls = calls_left;
                run.clone()
            }
            None => Arc::from(run_id),
        };
        if calls.is_empty() {
            return false;
        }
        let calls = calls.into_iter().map(String::into_boxed_str).collect();
        q.seq += 1;
        let key = (at, q.seq);
        q.due.insert(key, Due { run_id: run.clone(), calls, tries });
        // (`vec![key]`: a run's first key takes no room for more.)
        match q.by_run.entry(run) {
            Entry::Occupied(mut keys) => keys.get_mut().push(key),
            Entry::Vacant(slot) => {
                slot.insert(vec![key]);
            }
        }
        self.wake.notify_one();
        true
    }

    /// Drops every entry of `run_id`.
    pub(super) fn forget_run(&self, run_id: &str) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(keys) = q.by_run.remove(run_id) {
            for key in keys {
                q.due.remove(&key);
            }
        }
    }

    /// How many entries are queued (calls of one pause share one).
    pub(super) fn len(&self) -> usize {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).due.len()
    }

    /// The earliest moment queued.
    fn next(&self) -> Option<Instant> {
        let q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.due.first_key_value().map(|((at, _), _)| *at)
    }

    /// Takes up to `max` entries due at `now`.
    fn take_due(&self, now: Instant, max: usize) -> Vec<Due> {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let mut taken = Vec::new();
        while taken.len() < max {
            let Some(entry) = q.due.first_entry() else { break };
            if entry.key().0 > now {
                break;
            }
            let key = *entry.key();
            let due = entry.remove();
            if let Some(keys) = q.by_run.get_mut(&due.run_id) {
                keys.retain(|k| *k != key);
                if keys.is_empty() {
                    q.by_run.remove(&due.run_id);
                }
            }
            taken.push(due);
        }
        taken
    }

    /// Ends the scheduler (the engine is gone).
    pub(super) fn stop(&self) {
        self.stop.cancel();
    }
}

impl Engine {
    /// Rejects `call_ids` of `run_id` with "approval timed out" at `at`,
    /// unless they were decided first.
    ///
    /// The deadline was fixed before the run was marked paused (see
    /// `runner::Outcome::Paused`), so whoever saw the run paused and then
    /// moved the clock past it still sees the calls time out. Should the
    /// run still be `running` when the deadline comes (not paused yet), the
    /// calls wait for the pause.
    pub(super) fn arm_approval_timeout(&self, run_id: &str, call_ids: Vec<String>, at: Instant) {
        // A deadline too far away (past any useful horizon) is never reached.
        if at.saturating_duration_since(Instant::now()) > MAX_TIMEOUT {
            tracing::debug!(run_id, "approval timeout too far away to arm");
            return;
        }
        let deadlines = &self.drivers.deadlines;
        if deadlines.arm(run_id, call_ids, at, 0) && !deadlines.started.swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            tokio::spawn(scheduler(self.downgrade(), self.drivers.deadlines.clone()));
        }
    }

    /// Rejects the calls of one due entry; those whose run is still being
    /// paused are queued again a moment later (for up to 5 s).
    async fn reject_due(&self, due: Due) {
        let run_id = &*due.run_id;
        let mut waiting = Vec::new();
        for id in due.calls {
            let req = DecisionRequest { reason: Some("approval timed out".into()), ..DecisionRequest::default() };
            match self.approvals().reject(run_id, &id, req, &Actor::system()).await {
                Err(EngineError::Conflict(_)) if still_pausing(self, run_id).await => waiting.push(id.into_string()),
                Ok(_)
                | Err(EngineError::AlreadyDecided { .. } | EngineError::Conflict(_) | EngineError::NotFound(_)) => {}
                Err(e) => tracing::warn!(run_id, call_id = %id, error = %e, "approval timeout could not reject"),
            }
        }
        if !waiting.is_empty() && due.tries + 1 < PAUSE_WAIT_TRIES {
            self.drivers.deadlines.arm(run_id, waiting, Instant::now() + PAUSE_WAIT, due.tries + 1);
        }
    }
}

/// True while the run is still `running`: the driver has recorded the pending
/// calls but not yet the `paused` status.
async fn still_pausing(engine: &Engine, run_id: &str) -> bool {
    matches!(engine.runs().run_head(run_id).await, Ok(head) if head.status == RunStatus::Running)
}

/// The one task that fires deadlines (see the module docs).
async fn scheduler(engine: super::cluster::WeakEngine, deadlines: Arc<Deadlines>) {
    loop {
        let woken = deadlines.wake.notified();
        match deadlines.next() {
            None => {
                tokio::select! {
                    _ = woken => continue,
                    _ = deadlines.stop.cancelled() => return,
                }
            }
            Some(at) if at > Instant::now() => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => {}
                    _ = woken => continue,
                    _ = deadlines.stop.cancelled() => return,
                }
            }
            Some(_) => {}
        }
        let due = deadlines.take_due(Instant::now(), BATCH);
        if due.is_empty() {
            continue;
        }
        let Some(engine) = engine.upgrade() else { return };
        futures::stream::iter(due).for_each_concurrent(AT_ONCE, |d| engine.reject_due(d)).await;
    }
}
