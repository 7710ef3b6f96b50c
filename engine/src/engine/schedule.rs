//! Scheduling: which runs are driven, and what happens when a driver stops.
//!
//! Each run is driven by one tokio task at a time, holding a permit of the
//! semaphore (the rest wait as `pending`) and a cancellation token that
//! [`Runs::cancel`] fires. On a store several servers share, a driver also
//! holds the run's lease (see [`cluster`](super::cluster)): it starts only
//! once the lease is taken, every write it makes is fenced by it, and it
//! gives the lease back when it stops; a run this server has no slot for
//! waits in the queue every server takes work from. The task calls the runner and acts on the
//! [`Outcome`] it returns: a run paused with deadlines has them queued in
//! the deadline scheduler (see [`deadlines`](super::deadlines)); a driver
//! that failed or panicked fails its run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::deadlines::Deadlines;
use super::Engine;
use crate::error::EngineError;
use crate::model::RunStatus;
use crate::runner::{self, Deadline, Outcome};
use crate::store::cluster::{Fence, FENCE};

/// The runs driven now, and the permits that bound how many.
pub(super) struct Drivers {
    pub(super) permits: Arc<Semaphore>,
    active: Mutex<HashMap<String, Active>>,
    /// This server among the others sharing the store, if it is shared.
    pub(super) member: Option<Arc<super::cluster::Member>>,
    /// The approval deadlines of paused runs (see [`deadlines`](super::deadlines)).
    pub(super) deadlines: Arc<Deadlines>,
    /// When this engine started (the servers list of a store of its own).
    pub(super) started_at: chrono::DateTime<chrono::Utc>,
    /// The experiments driven here now (see [`experiments`](super::experiments)).
    pub(super) experiments: Mutex<std::collections::HashSet<String>>,
    /// Wakes the online evaluators' worker (see [`evaluators`](super::evaluators)).
    pub(super) evaluators: tokio::sync::Notify,
}

/// The driver of one run.
struct Active {
    cancel: CancellationToken,
    /// Becomes `true` once the driver is done and removed from `active`.
    done: watch::Receiver<bool>,
}

impl Drivers {
    /// Room for `max_concurrent_runs` drivers at once (at least one).
    pub(super) fn new(max_concurrent_runs: usize, member: Option<Arc<super::cluster::Member>>) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max_concurrent_runs.max(1))),
            active: Mutex::new(HashMap::new()),
            member,
            deadlines: Arc::default(),
            started_at: crate::store::now(),
            experiments: Mutex::default(),
            evaluators: tokio::sync::Notify::new(),
        }
    }

    /// How many runs are driven here now.
    pub(super) fn running(&self) -> usize {
        self.active.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The cancellation token and done-signal of run `id`'s driver, if one is running.
    pub(super) fn driver(&self, id: &str) -> Option<(CancellationToken, watch::Receiver<bool>)> {
        let map = self.active.lock().unwrap_or_else(|e| e.into_inner());
        map.get(id).map(|a| (a.cancel.clone(), a.done.clone()))
    }
}

impl Drop for Drivers {
    /// The engine is gone: its deadline scheduler ends.
    fn drop(&mut self) {
        self.deadlines.stop();
    }
}

impl Engine {
    /// Starts a driver for `run_id`, or, while one is still finishing, once
    /// it is done. On a shared store the run is driven here only when a slot
    /// is free and its lease can be taken; otherwise it waits in the queue.
    pub(super) fn spawn(&self, run_id: String) {
        if self.member().is_some() {
            let engine = self.clone();
            tokio::spawn(async move { engine.claim_and_drive(run_id).await });
            return;
        }
        self.start_driver(run_id, None);
    }

    /// Takes a free slot and the lease of `run_id`, then drives it; without
    /// a slot the other servers are told there is work, and without the
    /// lease another server drives the run (or is finishing with it, and
    /// drives it again when it gives the lease back).
    async fn claim_and_drive(&self, run_id: String) {
        let (Some(cluster), Some(member)) = (self.rt.store.cluster(), self.member()) else { return };
        // A driver here is still finishing with the run: claim once it has
        // let go (as without a shared store).
        if let Some((_, mut done)) = self.drivers.driver(&run_id) {
            let _ = done.wait_for(|d| *d).await;
        }
        // The events of what made the run ready (its creation, a decision,
        // a follow-up) are stored before any server may drive it, so its
        // driver's events always come after them.
        self.rt.bus.flush().await;
        let Ok(permit) = self.drivers.permits.clone().try_acquire_owned() else {
            if let Err(e) = cluster.hand_over(&run_id).await {
                tracing::warn!(run_id, error = %e, "could not hand a run to the queue; it goes there shortly");
            }
            return;
        };
        match cluster.claim(&run_id, &member.id(), self.lease_ms()).await {
            Ok(Some(attempt)) => {
                let fence = Fence { run_id: run_id.clone(), owner: member.id(), attempt };
                self.start_driver(run_id, Some((fence, permit)));
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(run_id, error = %e, "could not claim a run; it waits in the queue");
                drop(permit);
                let _ = cluster.hand_over(&run_id).await;
            }
        }
    }

    /// Drives `run_id` in a task of its own: with `lease`, under the run's
    /// lease and the slot taken for it; without, once a slot is free.
    pub(super) fn start_driver(&self, run_id: String, lease: Option<(Fence, OwnedSemaphorePermit)>) {
        let token = CancellationToken::new();
        let (done_tx, done_rx) = watch::channel(false);
        {
            let mut map = self.drivers.active.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(current) = map.get(&run_id) {
                // A driver is still finishing (e.g. it just paused the run and
                // a decision resumed it): start again once it is done.
                let mut done = current.done.clone();
                let engine = self.clone();
                tokio::spawn(async move {
                    let _ = done.wait_for(|d| *d).await;
                    match lease {
                        Some(lease) => engine.start_driver(run_id, Some(lease)),
                        None => engine.spawn(run_id),
                    }
                });
                return;
            }
            map.insert(run_id.clone(), Active { cancel: token.clone(), done: done_rx });
        }
        let engine = self.clone();
        tokio::spawn(async move {
            let (fence, permit) = match lease {
                Some((fence, permit)) => (Some(fence), Some(permit)),
                None => {
                    let permit = tokio::select! {
                        p = engine.drivers.permits.clone().acquire_owned() => p.ok(),
                        _ = token.cancelled() => None,
                    };
                    (None, permit)
                }
            };
            // The driving itself is a large future (~10 KB: the run loop's
            // state): boxed once the slot is taken, so a run waiting for one
            // costs a small task rather than that (with a backlog of
            // thousands of `pending` runs, hundreds of megabytes).
            Box::pin(engine.drive_with_slot(run_id, token, fence, permit, done_tx)).await;
        });
    }

    /// The driver of `run_id` once it has its slot (see `start_driver`).
    async fn drive_with_slot(
        self,
        run_id: String,
        token: CancellationToken,
        fence: Option<Fence>,
        permit: Option<OwnedSemaphorePermit>,
        done_tx: watch::Sender<bool>,
    ) {
        let engine = self;
        let drive = std::panic::AssertUnwindSafe(runner::drive(&engine.rt, &run_id, token)).catch_unwind();
        let outcome = match &fence {
            Some(fence) => FENCE.scope(fence.clone(), drive).await,
            None => drive.await,
        };
        // The lease goes back before anything follows up on the outcome,
        // so a child's end or a decision elsewhere can claim the run.
        let parked = matches!(outcome, Ok(Ok(Outcome::Waiting { .. })));
        let lost = matches!(outcome, Ok(Err(EngineError::LeaseLost(_))));
        let mut again = false;
        if let (Some(fence), Some(cluster)) = (&fence, engine.rt.store.cluster()) {
            match cluster.release(fence, parked).await {
                // Resumed, or a child ended, while this driver still held
                // the lease (another server could not claim it then).
                Ok(Some(released)) => {
                    again = released.woken
                        || (!parked && matches!(released.status, RunStatus::Pending | RunStatus::Running))
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(run_id, error = %e, "could not give a lease back; it expires"),
            }
        }
        let failure = match outcome {
            Ok(Ok(outcome)) => {
                if outcome != Outcome::NotDriven {
                    // The run was driven, so it left any earlier pause:
                    // that pause's deadlines are moot.
                    engine.drivers.deadlines.forget_run(&run_id);
                }
                engine.settle(&run_id, outcome).await;
                None
            }
            Ok(Err(EngineError::LeaseLost(_))) => {
                tracing::info!(run_id, "another server took the run over; this driver stops");
                None
            }
            Ok(Err(e)) => Some(format!("internal error: {e}")),
            Err(_) => Some("internal error: the run loop panicked".to_owned()),
        };
        if let Some(reason) = failure {
            tracing::error!(run_id, %reason, "run loop failed");
            engine.rt.fail_if_active(&run_id, reason).await;
        }
        drop(permit);
        engine.drivers.active.lock().unwrap_or_else(|e| e.into_inner()).remove(&run_id);
        let _ = done_tx.send(true);
        if again && !lost {
            engine.spawn(run_id);
        }
    }

    /// Acts on what a driver of `run_id` came to: a paused run's deadlines
    /// are armed; a run that ended, or was not driven, needs nothing more.
    async fn settle(&self, run_id: &str, outcome: Outcome) {
        match outcome {
            Outcome::Paused { deadlines } => {
                self.arm_deadlines(run_id, deadlines);
                self.notify_parent(run_id).await;
            }
            Outcome::Waiting { children } => {
                self.start_children(children);
                self.sync_tree(run_id).await;
            }
            Outcome::Ended(_) => {
                self.cancel_children(run_id).await;
                self.notify_parent(run_id).await;
            }
            Outcome::NotDriven => {}
        }
    }

    /// Queues one deadline per distinct moment in `deadlines` (the calls of one
    /// pause share theirs, and are rejected one after the other).
    pub(super) fn arm_deadlines(&self, run_id: &str, deadlines: Vec<Deadline>) {
        let mut groups: Vec<(Instant, Vec<String>)> = Vec::new();
        for Deadline { call_id, at } in deadlines {
            match groups.iter_mut().find(|(t, _)| *t == at) {
                Some((_, ids)) => ids.push(call_id),
                None => groups.push((at, vec![call_id])),
            }
        }
        for (at, ids) in groups {
            self.arm_approval_timeout(run_id, ids, at);
        }
    }

    /// Arms the timeout of call `call_id` of run `run_id` `after` from now
    /// (a paused run recovered or imported, whose deadline is stored).
    pub(super) fn arm_after(&self, run_id: &str, call_id: String, after: Duration) {
        match Deadline::after(call_id, after) {
            Some(deadline) => self.arm_deadlines(run_id, vec![deadline]),
            None => tracing::debug!(run_id, "approval timeout too far away to arm"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{json, Value};
    use tokio::time::Instant;
    use tokio_util::sync::CancellationToken;

    use super::super::{Engine, EngineConfig};
    use crate::model::{CreateRun, RunStatus, ToolCallStatus};
    use crate::runner::{self, Outcome};

    fn email(to: &str) -> Value {
        json!({"name": "send_email", "arguments": {"to": to, "subject": "Status", "body": "All good."}})
    }

    /// The contract between the runner and the scheduler: a run that pauses
    /// comes back as `Paused` with each waiting call's deadline, fixed before
    /// the run was marked paused; the façade arms them, and once the clock
    /// passes them the calls are rejected and the run goes on.
    #[tokio::test]
    async fn a_pause_returns_its_deadlines_and_the_facade_arms_them() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("schedule.db").display());
        let engine = Engine::open(&url, EngineConfig::default()).await.unwrap();
        let script = json!([{"tool_calls": [email("a@example.com"), email("b@example.com")]}, {"text": "sent"}]);
        let req = CreateRun {
            initial_prompt: "Send both.".into(),
            model_settings: Some(json!({ "script": script })),
            approval: Some(crate::model::ApprovalRequest::timeout_s(60)),
            ..CreateRun::default()
        };
        let (run, messages) =
            crate::runtime::create::prepare(&engine.rt, crate::model::DEFAULT_PROJECT, req, None).unwrap();
        assert!(engine.rt.store.insert_run_with_history(&run, &messages, &[]).await.unwrap());

        let before = Instant::now();
        let outcome = runner::drive(&engine.rt, &run.id, CancellationToken::new()).await.unwrap();
        let after = Instant::now();
        let Outcome::Paused { deadlines } = outcome else { panic!("expected a pause, got {outcome:?}") };
        let paused = engine.runs().get_run(&run.id).await.unwrap();
        assert_eq!(paused.status, RunStatus::Paused);
        let waiting: Vec<&str> = paused.interruptions.iter().map(|i| i.call_id.as_str()).collect();
        assert_eq!(waiting.len(), 2);
        assert_eq!(deadlines.iter().map(|d| d.call_id.as_str()).collect::<Vec<_>>(), waiting);
        let timeout = Duration::from_secs(60);
        assert!(deadlines.iter().all(|d| before + timeout <= d.at && d.at <= after + timeout), "{deadlines:?}");
        // Only a decision moves a paused run: a driver has nothing to do.
        let again = runner::drive(&engine.rt, &run.id, CancellationToken::new()).await.unwrap();
        assert_eq!(again, Outcome::NotDriven);

        engine.settle(&run.id, Outcome::Paused { deadlines }).await;
        tokio::time::pause();
        tokio::time::advance(timeout + Duration::from_secs(1)).await;
        tokio::time::resume();
        let mut status = RunStatus::Paused;
        for _ in 0..2000 {
            status = engine.runs().get_run(&run.id).await.unwrap().status;
            if status == RunStatus::Done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(status, RunStatus::Done);
        let calls = engine.runs().steps(&run.id).await.unwrap().swap_remove(0).tool_calls;
        assert_eq!(calls.len(), 2);
        for call in calls {
            assert_eq!(call.status, ToolCallStatus::Rejected);
            let decision = call.approval.unwrap();
            assert_eq!(
                (decision.decided_by.as_str(), decision.comment.as_deref()),
                ("runlens", Some("approval timed out"))
            );
        }
    }
}
