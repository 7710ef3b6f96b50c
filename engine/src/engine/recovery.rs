//! Recovery at start-up: what a previous process left behind is picked up.
//!
//! In two parts, so a server can serve while the second goes on:
//! - [`Engine::prepare_recovery`], before serving: the projects' HTTP tools
//!   are loaded into the tool registry, and the `run.finished` events lost
//!   with the previous process are published (before anything this process
//!   does could finish a run and publish its own);
//! - [`Engine::recover_runs`], in the background while requests are served:
//!   runs left `pending` or `running` are driven again from what was
//!   persisted (see the runner), then the paused runs are gone through in
//!   bulk, never with a query per run: one keyset-paged walk over the calls
//!   awaiting a decision whose run has an approval timeout queues their
//!   deadlines in the scheduler (see `deadlines`); one query finds the
//!   paused runs nothing awaits any more (every decision was made before a
//!   crash, or the run waits only on its children), which resume; and pages
//!   of paused runs are checked for records that cannot be decoded, whose
//!   runs fail with the reason (the others are recovered all the same).
//!
//! A request about a run recovery has not reached yet is answered from the
//! store as always, since nothing recovery does is kept only in memory but
//! the deadlines: a decision is the store's compare-and-set (it resumes the
//! run in the same transaction, and starts its driver), a cancel is one too,
//! and recovery acts on a run only through compare-and-sets of its own, so
//! whichever comes second finds the run moved and leaves it. A deadline
//! queued for a call decided meanwhile finds it decided and does nothing.

use std::time::Duration;

use futures::FutureExt;
use tokio::sync::mpsc;

use super::Engine;
use crate::error::{EngineError, Result};
use crate::events::EventKind;
use crate::model::RunStatus;
use crate::runtime::undecodable;
use crate::store::recovery::{CallCursor, RunCursor};
use crate::store::RunPatch;

/// Calls read per page of the deadline walk, and runs per page of the record check.
const CALLS_PAGE: u32 = 2_000;
const RUNS_PAGE: u32 = 500;

/// What one pass of [`Engine::recover_runs`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Runs left `pending` or `running` that are driven again (on a shared
    /// store: claimed here).
    pub driven: usize,
    /// Paused runs with nothing left to decide, resumed.
    pub resumed: usize,
    /// Approval deadlines queued (calls of paused runs with a timeout).
    pub deadlines: usize,
    /// Paused runs whose record could not be decoded, failed with the reason.
    pub failed: usize,
}

impl Engine {
    /// All of recovery, awaited: [`Engine::prepare_recovery`], then
    /// [`Engine::recover_runs`]. Returns how many runs were picked up
    /// (driven again, or resumed).
    pub async fn recover(&self) -> Result<usize> {
        self.prepare_recovery().await?;
        let done = self.recover_runs().await?;
        Ok(done.driven + done.resumed)
    }

    /// The part of recovery that comes before serving (see the module
    /// docs): quick, whatever the backlog.
    pub async fn prepare_recovery(&self) -> Result<()> {
        // The projects' HTTP tools first: runs created or picked up may call them.
        let tools = self.http_tools().load_http_tools().await?;
        if tools > 0 {
            tracing::info!(tools, "loaded the projects' HTTP tools");
        }
        self.announce_lost_finishes().await
    }

    /// The rest of recovery (see the module docs), which may run while
    /// requests are served.
    pub async fn recover_runs(&self) -> Result<Recovered> {
        self.recover_runs_paced(None).await
    }

    /// [`Engine::recover_runs`] that stops where `pace` says (tests only:
    /// see [`RecoveryPace`]).
    #[doc(hidden)]
    pub async fn recover_runs_paced(&self, pace: Option<&RecoveryPace>) -> Result<Recovered> {
        let mut done = Recovered::default();
        stop(pace, "start").await;
        // On a shared store, runs are claimed from the queue as slots allow
        // (those a dead server held, once its leases expire), not all taken here.
        if self.member().is_some() {
            done.driven = self.claim_free_slots().await?;
        } else {
            let mut ids = self.rt.store.run_ids_with_status(RunStatus::Running).await?;
            ids.extend(self.rt.store.run_ids_with_status(RunStatus::Pending).await?);
            for id in ids {
                // One a request has started meanwhile goes on as it is.
                if self.drivers.driver(&id).is_none() {
                    self.spawn(id);
                    done.driven += 1;
                }
            }
        }
        let experiments = self.experiments().resume_running().await?;
        if experiments > 0 {
            tracing::info!(experiments, "experiments picked up where they stopped");
        }
        let started = std::time::Instant::now();
        done.deadlines = self.queue_deadlines(pace).await?;
        let queued = started.elapsed();
        done.resumed = self.resume_decided(pace).await?;
        let resumed = started.elapsed();
        done.failed = self.fail_undecodable(pace).await?;
        tracing::info!(
            deadlines = done.deadlines,
            deadlines_ms = queued.as_millis() as u64,
            resumed = done.resumed,
            resumed_ms = (resumed - queued).as_millis() as u64,
            failed = done.failed,
            checked_ms = (started.elapsed() - resumed).as_millis() as u64,
            "paused runs recovered"
        );
        Ok(done)
    }

    /// Publishes the `run.finished` of runs whose status change was stored
    /// but whose event was lost with the previous process, so every finished
    /// run's event stream ends with one.
    async fn announce_lost_finishes(&self) -> Result<()> {
        if self.member().is_some() {
            // On a shared store only runs whose finishing server is gone
            // (see `announce_finishes_of_the_dead`).
            return self.announce_finishes_of_the_dead().await;
        }
        self.announce_finishes(self.rt.store.unannounced_finishes().await?).await;
        Ok(())
    }

    /// On a shared store: publishes the `run.finished` of runs whose server
    /// finished them and died before storing it (this server takes them on).
    pub(super) async fn announce_finishes_of_the_dead(&self) -> Result<()> {
        let (Some(cluster), Some(member)) = (self.rt.store.cluster(), self.member()) else { return Ok(()) };
        let ids = cluster.take_lost_finishes(&member.id(), self.lease_ms()).await?;
        if !ids.is_empty() {
            tracing::info!(runs = ids.len(), "publishing the end of runs a stopped server finished");
        }
        self.announce_finishes(ids).await;
        Ok(())
    }

    async fn announce_finishes(&self, ids: Vec<String>) {
        for id in ids {
            let Ok(Some(run)) = self.rt.store.get_run(&id).await else { continue };
            if run.status.is_terminal() {
                let kind = EventKind::RunFinished {
                    status: run.status,
                    result: run.result.clone(),
                    summary: run.summary.clone(),
                    usage: run.usage,
                };
                self.rt.bus.publish(&id, kind);
            }
        }
    }

    /// Queues the approval deadlines of every call awaiting a decision on a
    /// paused run with a timeout, a page of calls at a time; how many.
    /// A deadline already past is due at once.
    async fn queue_deadlines(&self, pace: Option<&RecoveryPace>) -> Result<usize> {
        let mut after: Option<CallCursor> = None;
        let mut queued = 0;
        loop {
            let (calls, next) = self.rt.store.call_deadlines(after.as_ref(), CALLS_PAGE).await?;
            stop(pace, "deadlines").await;
            let (now, clock) = (chrono::Utc::now(), tokio::time::Instant::now());
            // The calls of one run with one deadline (those of one pause) share an entry.
            let mut calls = calls.into_iter().filter_map(|c| Some((c.run_id, c.deadline?, c.call_id))).peekable();
            while let Some((run_id, deadline, call_id)) = calls.next() {
                let mut ids = vec![call_id];
                while let Some((_, _, id)) = calls.next_if(|(r, d, _)| *r == run_id && *d == deadline) {
                    ids.push(id);
                }
                let left = (deadline - now).to_std().unwrap_or(Duration::ZERO);
                match clock.checked_add(left) {
                    Some(at) => {
                        queued += ids.len();
                        self.arm_approval_timeout(&run_id, ids, at);
                    }
                    None => tracing::debug!(run_id, "approval timeout too far away to arm"),
                }
            }
            match next {
                Some(next) => after = Some(next),
                None => return Ok(queued),
            }
        }
    }

    /// Resumes the paused runs nothing awaits any more (a crash right after
    /// the last decision cannot strand one); how many.
    ///
    /// Each run is resumed on its own: one whose record cannot be decoded
    /// (or whose resume fails in any way, a panic included) is failed with
    /// the reason, and the others are resumed all the same.
    async fn resume_decided(&self, pace: Option<&RecoveryPace>) -> Result<usize> {
        let ids = self.rt.store.paused_runs_awaiting_nothing().await?;
        stop(pace, "decided").await;
        let mut resumed = 0;
        for id in ids {
            let outcome = std::panic::AssertUnwindSafe(self.resume_one(&id)).catch_unwind().await;
            let problem = match outcome {
                Ok(Ok(true)) => {
                    resumed += 1;
                    continue;
                }
                Ok(Ok(false)) => continue,
                Ok(Err(Undecodable(problem))) => undecodable(&problem),
                Ok(Err(Failed(e))) => format!("internal error: recovery failed: {e}"),
                Err(_) => "internal error: recovery panicked".to_owned(),
            };
            tracing::error!(run_id = %id, reason = %problem, "a paused run could not be recovered; failing it");
            self.fail_paused(&id, problem).await;
        }
        Ok(resumed)
    }

    /// Resumes one paused run nothing awaits (see `resume_decided`); `true`
    /// when it resumed, `false` when it was no longer paused with nothing
    /// to decide (a request moved it first).
    async fn resume_one(&self, id: &str) -> std::result::Result<bool, RecoveryError> {
        let run = match self.rt.store.run_to_drive(id).await.map_err(Failed)? {
            None => return Ok(false),
            Some(Err(problem)) => return Err(Undecodable(problem)),
            Some(Ok(run)) => run,
        };
        if run.status != RunStatus::Paused {
            return Ok(false);
        }
        // Paused again, with calls of a new step, since it was listed.
        if !self.rt.store.interruptions(Some(id), None).await.map_err(Failed)?.is_empty() {
            return Ok(false);
        }
        if let Err(e) = self.rt.set_status(&run, RunStatus::Running, Default::default()).await {
            // Lost the compare-and-set to a request (a cancel): leave the run to it.
            return match self.rt.store.run_head(id).await {
                Ok(Some(head)) if head.status != RunStatus::Paused => Ok(false),
                _ => Err(Failed(e)),
            };
        }
        self.spawn(id.to_owned());
        Ok(true)
    }

    /// Fails the paused runs whose stored record cannot be decoded (they
    /// could never be driven on), a page of runs at a time; how many.
    async fn fail_undecodable(&self, pace: Option<&RecoveryPace>) -> Result<usize> {
        let mut after: Option<RunCursor> = None;
        let mut failed = 0;
        loop {
            let (bad, next) = self.rt.store.undecodable_paused_runs(after.as_ref(), RUNS_PAGE).await?;
            stop(pace, "records").await;
            for run in bad {
                let reason = undecodable(&run.problem);
                tracing::error!(run_id = %run.run_id, %reason, "a paused run could not be recovered; failing it");
                if self.fail_paused(&run.run_id, reason).await {
                    failed += 1;
                }
            }
            match next {
                Some(next) => after = Some(next),
                None => return Ok(failed),
            }
        }
    }

    /// Fails a paused run that cannot be recovered, with `reason`; its calls
    /// awaiting a decision are cancelled. Reads nothing it would have to
    /// decode. `true` when it did (`false`: the run is no longer paused).
    async fn fail_paused(&self, id: &str, reason: String) -> bool {
        let patch = RunPatch { failure_reason: Some(reason), ..RunPatch::default() };
        match self.rt.store.transition(id, RunStatus::Paused, RunStatus::Failed, patch).await {
            Ok(run) => {
                if let Err(e) = self.rt.store.cancel_awaiting(id).await {
                    tracing::warn!(run_id = %id, error = %e, "could not cancel the calls of a failed run");
                }
                self.drivers.deadlines.forget_run(id);
                self.rt.publish_status(RunStatus::Paused, &run);
                true
            }
            Err(e) => {
                tracing::error!(run_id = %id, error = %e, "could not fail an unrecoverable run");
                false
            }
        }
    }

    /// Approval deadlines queued in the scheduler now (entries: the calls of
    /// one pause share one).
    pub fn queued_deadlines(&self) -> usize {
        self.drivers.deadlines.len()
    }
}

/// Why one paused run could not be recovered.
enum RecoveryError {
    /// Its stored record cannot be decoded.
    Undecodable(String),
    Failed(EngineError),
}
use RecoveryError::{Failed, Undecodable};

/// A test's hold on [`Engine::recover_runs_paced`]: at each of its stops
/// (`start`; `deadlines` after each page of calls is read; `decided` after
/// the runs to resume are listed; `records` after each page of runs is
/// read — each before recovery acts on what it read) recovery reports the
/// stop on [`PaceControl::reached`] and waits for a [`PaceControl::go`].
/// Once `go` is dropped, recovery no longer waits.
#[doc(hidden)]
pub struct RecoveryPace {
    reached: mpsc::UnboundedSender<&'static str>,
    go: tokio::sync::Mutex<mpsc::UnboundedReceiver<()>>,
}

/// The test's side of a [`RecoveryPace`].
#[doc(hidden)]
pub struct PaceControl {
    pub reached: mpsc::UnboundedReceiver<&'static str>,
    pub go: mpsc::UnboundedSender<()>,
}

impl RecoveryPace {
    pub fn new() -> (RecoveryPace, PaceControl) {
        let (reached_tx, reached) = mpsc::unbounded_channel();
        let (go, go_rx) = mpsc::unbounded_channel();
        (RecoveryPace { reached: reached_tx, go: tokio::sync::Mutex::new(go_rx) }, PaceControl { reached, go })
    }
}

async fn stop(pace: Option<&RecoveryPace>, at: &'static str) {
    if let Some(pace) = pace {
        let _ = pace.reached.send(at);
        let _ = pace.go.lock().await.recv().await;
    }
}
