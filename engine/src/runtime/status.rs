//! Status changes: stored first (a compare-and-set the status machine in
//! [`crate::status`] approved, see `Store::transition`), then published as
//! `run.status`, with `run.finished` when the run ended.

use crate::error::Result;
use crate::events::EventKind;
use crate::model::{Run, RunStatus};
use crate::store::RunPatch;

use super::Runtime;

impl Runtime {
    /// Moves `run` to `to` in the store and publishes the change.
    pub async fn set_status(&self, run: &Run, to: RunStatus, patch: RunPatch) -> Result<Run> {
        let updated = self.store.transition(&run.id, run.status, to, patch).await?;
        self.publish_status(run.status, &updated);
        Ok(updated)
    }

    /// Announces a status change already stored (`updated` is the run after it).
    pub fn publish_status(&self, old: RunStatus, updated: &Run) {
        let to = updated.status;
        self.publish_transition(&updated.id, old, to);
        if to.is_terminal() {
            self.bus.publish(
                &updated.id,
                EventKind::RunFinished {
                    status: to,
                    result: updated.result.clone(),
                    summary: updated.summary.clone(),
                    usage: updated.usage,
                },
            );
        }
    }

    /// Announces that run `run_id` moved from `old` to `new`, a change already
    /// stored and which did not end the run (see [`Runtime::publish_status`]).
    pub fn publish_transition(&self, run_id: &str, old: RunStatus, new: RunStatus) {
        self.bus.publish(run_id, EventKind::RunStatus { old, new });
    }

    /// Marks a run `failed` if it is still pending or running (after an
    /// internal error, or when its record cannot be decoded: only its status
    /// is read, so even then the run ends with the reason). `true` when it did.
    pub async fn fail_if_active(&self, run_id: &str, reason: String) -> bool {
        let head = match self.store.run_head(run_id).await {
            Ok(Some(head)) => head,
            Ok(None) => return false,
            Err(e) => {
                tracing::error!(run_id, error = %e, "could not read the run to mark it failed");
                return false;
            }
        };
        if !matches!(head.status, RunStatus::Pending | RunStatus::Running) {
            return false;
        }
        let patch = RunPatch { failure_reason: Some(reason), ..RunPatch::default() };
        match self.store.transition(run_id, head.status, RunStatus::Failed, patch).await {
            Ok(updated) => {
                self.publish_status(head.status, &updated);
                true
            }
            Err(e) => {
                tracing::error!(run_id, error = %e, "could not mark the run failed");
                false
            }
        }
    }
}

/// What a run cancelled on request records.
pub(crate) fn cancelled_patch() -> RunPatch {
    RunPatch { summary: Some("Cancelled on request.".into()), ..RunPatch::default() }
}

/// The failure reason of a run whose stored record cannot be decoded.
pub(crate) fn undecodable(problem: &str) -> String {
    format!("the stored run could not be read: {problem}")
}
