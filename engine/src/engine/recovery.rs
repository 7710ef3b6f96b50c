//! Recovery at start-up: what a previous process left behind is picked up.
//!
//! The projects' HTTP tools are loaded into the tool registry first.
//! Runs left `pending` or `running` are driven again from what was persisted
//! (see the runner); paused runs keep waiting, with their approval timers
//! armed again from the stored deadlines, unless all their calls were
//! decided (then they resume); the `run.finished` events lost with the
//! previous process are published. A run that cannot be recovered fails
//! with the reason, and the others are recovered all the same.

use std::time::Duration;

use futures::FutureExt;

use super::Engine;
use crate::error::{EngineError, Result};
use crate::events::EventKind;
use crate::model::RunStatus;
use crate::runtime::undecodable;
use crate::store::RunPatch;

impl Engine {
    /// Resumes runs a previous process left `pending` or `running` (and
    /// paused runs whose decisions were all made), and re-arms approval
    /// timeouts. Returns how many runs were picked up.
    pub async fn recover(&self) -> Result<usize> {
        // The projects' HTTP tools first: the runs picked up may call them.
        let tools = self.load_http_tools().await?;
        if tools > 0 {
            tracing::info!(tools, "loaded the projects' HTTP tools");
        }
        self.announce_lost_finishes().await?;
        // On a shared store, runs are claimed from the queue as slots allow
        // (those a dead server held, once its leases expire), not all taken here.
        if self.member().is_some() {
            let claimed = self.claim_free_slots().await?;
            return Ok(claimed + self.resume_paused().await?);
        }
        let mut ids = self.rt.store.run_ids_with_status(RunStatus::Running).await?;
        ids.extend(self.rt.store.run_ids_with_status(RunStatus::Pending).await?);
        let n = ids.len();
        for id in ids {
            self.spawn(id);
        }
        Ok(n + self.resume_paused().await?)
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

    /// At start-up: re-arms approval timeouts of paused runs, and resumes a
    /// paused run whose calls were all decided (a crash right after the last
    /// decision cannot strand it).
    ///
    /// Each run is recovered on its own: one whose record cannot be decoded
    /// (or whose recovery fails in any way, a panic included) is failed with
    /// the reason, and the others are recovered all the same.
    pub(super) async fn resume_paused(&self) -> Result<usize> {
        let ids = self.rt.store.run_ids_with_status(RunStatus::Paused).await?;
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

    /// Recovers one paused run (see `resume_paused`); `true` when it resumed.
    async fn resume_one(&self, id: &str) -> std::result::Result<bool, RecoveryError> {
        let run = match self.rt.store.run_to_drive(id).await.map_err(Failed)? {
            None => return Ok(false),
            Some(Err(problem)) => return Err(Undecodable(problem)),
            Some(Ok(run)) => run,
        };
        let pending = self.rt.store.interruptions(Some(id), None).await.map_err(Failed)?;
        if pending.is_empty() {
            self.rt.set_status(&run, RunStatus::Running, Default::default()).await.map_err(Failed)?;
            self.spawn(id.to_owned());
            return Ok(true);
        }
        for i in pending {
            if let Some(deadline) = i.deadline {
                let left = (deadline - chrono::Utc::now()).to_std().unwrap_or(Duration::ZERO);
                self.arm_after(id, i.call_id, left);
            }
        }
        Ok(false)
    }

    /// Fails a paused run that cannot be recovered, with `reason`; its calls
    /// awaiting a decision are cancelled. Reads nothing it would have to decode.
    async fn fail_paused(&self, id: &str, reason: String) {
        let patch = RunPatch { failure_reason: Some(reason), ..RunPatch::default() };
        match self.rt.store.transition(id, RunStatus::Paused, RunStatus::Failed, patch).await {
            Ok(run) => {
                if let Err(e) = self.rt.store.cancel_awaiting(id).await {
                    tracing::warn!(run_id = %id, error = %e, "could not cancel the calls of a failed run");
                }
                self.rt.publish_status(RunStatus::Paused, &run);
            }
            Err(e) => tracing::error!(run_id = %id, error = %e, "could not fail an unrecoverable run"),
        }
    }
}

/// Why one paused run could not be recovered.
enum RecoveryError {
    /// Its stored record cannot be decoded.
    Undecodable(String),
    Failed(EngineError),
}
use RecoveryError::{Failed, Undecodable};
