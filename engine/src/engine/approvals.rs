//! Decisions on paused runs: approve, reject, the inbox, and timeouts.
//!
//! A decision is applied by the store in one transaction that also resumes
//! the run when it was the step's last pending call; the engine then starts
//! a driver for it. Everything lives in the database, so a restart loses no
//! pending call and no decision (see `resume_paused`).

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use serde_json::Value;

use super::{now, Engine, Inner};
use crate::error::{EngineError, Result};
use crate::events::EventKind;
use crate::model::{ApprovalDecision, Decision, DecisionRequest, Interruption, RunStatus, ToolCall, ToolCallStatus};
use crate::runner;
use crate::store::{DecideOutcome, DecisionWrite, RunPatch};

/// What the model is told when a decision gives no reason.
const DEFAULT_REASON: &str = "no reason given";

impl Engine {
    /// Approves a call awaiting approval (optionally with edited arguments,
    /// a comment, or "always" for this tool in this run).
    pub async fn approve(&self, run_id: &str, call_id: &str, req: DecisionRequest, by: &str) -> Result<ToolCall> {
        if req.reason.is_some() {
            return Err(EngineError::Invalid("`reason` is for rejections; an approval takes `comment`".into()));
        }
        self.decide(run_id, call_id, Decision::Approved, req, by).await
    }

    /// Rejects a call awaiting approval; the model receives the reason.
    pub async fn reject(&self, run_id: &str, call_id: &str, req: DecisionRequest, by: &str) -> Result<ToolCall> {
        if req.arguments.is_some() {
            return Err(EngineError::Invalid("`arguments` can only be edited when approving".into()));
        }
        self.decide(run_id, call_id, Decision::Rejected, req, by).await
    }

    /// Calls awaiting a decision across all runs, oldest first.
    pub async fn pending_approvals(&self) -> Result<Vec<Interruption>> {
        self.inner.store.interruptions(None).await
    }

    async fn decide(
        &self,
        run_id: &str,
        call_id: &str,
        decision: Decision,
        req: DecisionRequest,
        by: &str,
    ) -> Result<ToolCall> {
        req.check_bounds().map_err(EngineError::Invalid)?;
        // Only the run's head and the one call are read (and, for "always",
        // the call's own step): never the run's other steps or payloads.
        let head = self.run_head(run_id).await?;
        let call = self
            .inner
            .store
            .tool_call(run_id, call_id)
            .await?
            .ok_or_else(|| EngineError::NotFound(format!("tool call `{call_id}` in run `{run_id}`")))?;
        if call.status != ToolCallStatus::AwaitingApproval {
            return Err(already_decided(&call));
        }
        if head.status != RunStatus::Paused {
            return Err(EngineError::Conflict(format!("run `{run_id}` is {}, not paused", head.status)));
        }
        let edited = req.arguments.clone().filter(|a| *a != call.arguments);
        if let Some(args) = &edited {
            self.inner.tools.validate(&call.tool_name, args).map_err(|e| EngineError::Invalid(e.to_string()))?;
        }
        let comment = match decision {
            Decision::Approved => req.comment.filter(|c| !c.trim().is_empty()),
            Decision::Rejected => {
                Some(req.reason.filter(|r| !r.trim().is_empty()).unwrap_or_else(|| DEFAULT_REASON.into()))
            }
        };
        let record = ApprovalDecision {
            decision,
            decided_by: by.to_owned(),
            decided_at: now(),
            always: req.always,
            original_arguments: call.arguments.clone(),
            edited_arguments: edited,
            comment,
        };
        let decided = self.apply(run_id, &call, &record).await?;
        if req.always {
            // "Always" also settles this tool's other calls waiting in the step.
            let step = self.inner.store.steps_page(run_id, call.step_index, 1).await?;
            let siblings = step.iter().flat_map(|s| s.tool_calls.iter()).filter(|c| {
                c.id != call.id && c.tool_name == call.tool_name && c.status == ToolCallStatus::AwaitingApproval
            });
            for other in siblings {
                let mut rec = record.clone();
                rec.original_arguments = other.arguments.clone();
                rec.edited_arguments = None;
                if let Err(e) = self.apply(run_id, other, &rec).await {
                    tracing::debug!(run_id, call_id = %other.id, error = %e, "sibling already decided");
                }
            }
        }
        Ok(decided)
    }

    async fn apply(&self, run_id: &str, call: &ToolCall, record: &ApprovalDecision) -> Result<ToolCall> {
        let final_arguments: Value = record.edited_arguments.clone().unwrap_or_else(|| call.arguments.clone());
        let error = (record.decision == Decision::Rejected).then(|| {
            format!("rejected by {}: {}", record.decided_by, record.comment.as_deref().unwrap_or(DEFAULT_REASON))
        });
        let write = DecisionWrite { call, decision: record, final_arguments: &final_arguments, error: error.clone() };
        match self.inner.store.decide(write).await? {
            DecideOutcome::NotAwaiting => {
                let current = self.inner.store.tool_call(run_id, &call.id).await?;
                Err(match current {
                    Some(c) if c.status != ToolCallStatus::AwaitingApproval => already_decided(&c),
                    _ => EngineError::Conflict(format!("run `{run_id}` is no longer paused")),
                })
            }
            DecideOutcome::Applied { resumed } => {
                let mut decided = call.clone();
                decided.arguments = final_arguments;
                decided.approval = Some(record.clone());
                decided.status = match record.decision {
                    Decision::Approved => ToolCallStatus::Pending,
                    Decision::Rejected => ToolCallStatus::Rejected,
                };
                decided.error = error;
                self.inner.bus.publish(run_id, EventKind::ToolCallUpdated { tool_call: decided.clone() });
                if resumed {
                    self.inner
                        .bus
                        .publish(run_id, EventKind::RunStatus { old: RunStatus::Paused, new: RunStatus::Running });
                    self.spawn(run_id.to_owned());
                }
                Ok(decided)
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
        let ids = self.inner.store.run_ids_with_status(RunStatus::Paused).await?;
        let mut resumed = 0;
        for id in ids {
            let outcome = std::panic::AssertUnwindSafe(self.resume_one(&id)).catch_unwind().await;
            let problem = match outcome {
                Ok(Ok(true)) => {
                    resumed += 1;
                    continue;
                }
                Ok(Ok(false)) => continue,
                Ok(Err(Undecodable(problem))) => runner::undecodable(&problem),
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
        let run = match self.inner.store.run_to_drive(id).await.map_err(Failed)? {
            None => return Ok(false),
            Some(Err(problem)) => return Err(Undecodable(problem)),
            Some(Ok(run)) => run,
        };
        let pending = self.inner.store.interruptions(Some(id)).await.map_err(Failed)?;
        if pending.is_empty() {
            runner::set_status(&self.inner, &run, RunStatus::Running, Default::default()).await.map_err(Failed)?;
            self.spawn(id.to_owned());
            return Ok(true);
        }
        for i in pending {
            if let Some(deadline) = i.deadline {
                let left = (deadline - chrono::Utc::now()).to_std().unwrap_or(Duration::ZERO);
                arm_approval_timeout(&self.inner, id, vec![i.call_id], left);
            }
        }
        Ok(false)
    }

    /// Fails a paused run that cannot be recovered, with `reason`; its calls
    /// awaiting a decision are cancelled. Reads nothing it would have to decode.
    async fn fail_paused(&self, id: &str, reason: String) {
        let patch = RunPatch { failure_reason: Some(reason), ..RunPatch::default() };
        match self.inner.store.transition(id, RunStatus::Paused, RunStatus::Failed, patch).await {
            Ok(run) => {
                if let Err(e) = self.inner.store.cancel_awaiting(id).await {
                    tracing::warn!(run_id = %id, error = %e, "could not cancel the calls of a failed run");
                }
                self.inner.bus.publish(id, EventKind::RunStatus { old: RunStatus::Paused, new: RunStatus::Failed });
                self.inner.bus.publish(
                    id,
                    EventKind::RunFinished {
                        status: RunStatus::Failed,
                        result: run.result,
                        summary: run.summary,
                        usage: run.usage,
                    },
                );
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

fn already_decided(call: &ToolCall) -> EngineError {
    let message = match &call.approval {
        Some(d) => format!(
            "tool call `{}` was already {} by {} at {}",
            call.id,
            d.decision.as_str(),
            d.decided_by,
            d.decided_at.to_rfc3339()
        ),
        None => format!("tool call `{}` is {}, not awaiting approval", call.id, call.status.as_str()),
    };
    EngineError::AlreadyDecided { message, decision: call.approval.clone().map(Box::new) }
}

/// Rejects the given calls with "approval timed out" after `after`, unless
/// they were decided first.
///
/// The deadline is fixed here, before the task is spawned, and the runner arms
/// the timer before it marks the run paused: whoever sees the run paused also
/// sees its timer running, whenever the spawned task first gets polled. If the
/// timer fires while the driver is still finishing the pause, it waits for it.
pub(crate) fn arm_approval_timeout(inner: &Arc<Inner>, run_id: &str, call_ids: Vec<String>, after: Duration) {
    // A deadline too far away to represent (or past any useful horizon) is
    // never reached: no timer is armed rather than an overflow.
    let Some(at) = (after <= MAX_TIMEOUT).then(|| tokio::time::Instant::now().checked_add(after)).flatten() else {
        tracing::debug!(run_id, "approval timeout too far away to arm");
        return;
    };
    let engine = Engine { inner: inner.clone() };
    let run_id = run_id.to_owned();
    tokio::spawn(async move {
        tokio::time::sleep_until(at).await;
        for id in call_ids {
            for _ in 0..PAUSE_WAIT_TRIES {
                let req = DecisionRequest { reason: Some("approval timed out".into()), ..DecisionRequest::default() };
                match engine.reject(&run_id, &id, req, "system").await {
                    Err(EngineError::Conflict(_)) if still_pausing(&engine, &run_id).await => {
                        tokio::time::sleep(PAUSE_WAIT).await;
                    }
                    Ok(_)
                    | Err(EngineError::AlreadyDecided { .. } | EngineError::Conflict(_) | EngineError::NotFound(_)) => {
                        break
                    }
                    Err(e) => {
                        tracing::warn!(run_id, call_id = %id, error = %e, "approval timeout could not reject");
                        break;
                    }
                }
            }
        }
    });
}

/// Timeouts longer than this (about 100 years) are not armed.
const MAX_TIMEOUT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// How long, in all, a fired timeout waits for the driver to finish pausing.
const PAUSE_WAIT: Duration = Duration::from_millis(20);
const PAUSE_WAIT_TRIES: u32 = 250;

/// True while the run is still `running`: the driver has recorded the pending
/// calls but not yet the `paused` status.
async fn still_pausing(engine: &Engine, run_id: &str) -> bool {
    matches!(engine.get_run(run_id).await, Ok(run) if run.status == RunStatus::Running)
}
