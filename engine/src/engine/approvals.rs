//! Decisions on paused runs: approve, reject, and the inbox (in keyset
//! pages, oldest first, with its count kept by the store).
//!
//! A decision is applied by the store in one transaction that also resumes
//! the run when it was the step's last pending call; the engine then starts
//! a driver for it. Everything lives in the database, so a restart loses no
//! pending call and no decision (see `recovery`). Timeouts reject through
//! here too (see `schedule`).

use std::collections::HashMap;

use serde_json::Value;

use super::Engine;
use crate::error::{EngineError, Result};
use crate::events::EventKind;
use crate::model::{
    Actor, ApprovalDecision, Decision, DecisionRequest, Interruption, Role, RunRef, RunStatus, ToolCall, ToolCallStatus,
};
use crate::runtime::now;
use crate::store::{DecideOutcome, DecisionWrite, InboxFilter, InboxPage, PendingCall};

/// What the model is told when a decision gives no reason.
const DEFAULT_REASON: &str = "no reason given";

impl Engine {
    async fn decide(
        &self,
        run_id: &str,
        call_id: &str,
        decision: Decision,
        req: DecisionRequest,
        by: &Actor,
    ) -> Result<ToolCall> {
        req.check_bounds().map_err(EngineError::Invalid)?;
        // Only the run's head and the one call are read (and, for "always",
        // the call's own step): never the run's other steps or payloads.
        let head = self.runs().run_head(run_id).await?;
        if let Some(why) = head.read_only(run_id, "approved or rejected") {
            return Err(EngineError::Conflict(why));
        }
        let call = self
            .rt
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
        let role = self.decider_role(&head.project, by, decision).await?;
        let edited = req.arguments.clone().filter(|a| *a != call.arguments);
        if let Some(args) = &edited {
            self.rt
                .tools
                .view(&head.project)
                .validate(&call.tool_name, args)
                .map_err(|e| EngineError::Invalid(e.to_string()))?;
        }
        let comment = match decision {
            Decision::Approved => req.comment.filter(|c| !c.trim().is_empty()),
            Decision::Rejected => {
                Some(req.reason.filter(|r| !r.trim().is_empty()).unwrap_or_else(|| DEFAULT_REASON.into()))
            }
        };
        let record = ApprovalDecision {
            decision,
            decided_by: by.name.clone(),
            decided_by_id: Some(by.id.clone()),
            decided_at: now(),
            always: req.always,
            original_arguments: call.arguments.clone(),
            edited_arguments: edited,
            comment,
        };
        let decided = self.apply(run_id, &call, &record, role).await?;
        self.identity()
            .audit(Some(&head.project), by, decision.as_str(), Some(&format!("{run_id}/{call_id}")), None)
            .await;
        if req.always {
            // "Always" also settles this tool's other calls waiting in the step.
            let step = self.rt.store.steps_page(run_id, call.step_index, 1).await?;
            let siblings = step.iter().flat_map(|s| s.tool_calls.iter()).filter(|c| {
                c.id != call.id && c.tool_name == call.tool_name && c.status == ToolCallStatus::AwaitingApproval
            });
            for other in siblings {
                let mut rec = record.clone();
                rec.original_arguments = other.arguments.clone();
                rec.edited_arguments = None;
                if let Err(e) = self.apply(run_id, other, &rec, role).await {
                    tracing::debug!(run_id, call_id = %other.id, error = %e, "sibling already decided");
                }
            }
        }
        Ok(decided)
    }

    /// The role `by` holds in `project` now (read from the directory, never
    /// taken from the caller): only an approver decides; the engine itself
    /// only rejects (timeouts). An approval's grant records the role.
    async fn decider_role(&self, project: &str, by: &Actor, decision: Decision) -> Result<Option<Role>> {
        if by.id == Actor::system().id && decision == Decision::Rejected {
            return Ok(None);
        }
        self.require_approver(project, by).await.map(Some)
    }

    /// `by`'s role in `project`, read from the directory, when it is at
    /// least approver; otherwise a 403 (see [`crate::store::role_in`]).
    pub(crate) async fn require_approver(&self, project: &str, by: &Actor) -> Result<Role> {
        match crate::store::role_in(self.rt.store.directory(), &by.id, project).await? {
            Some(role) if role >= Role::Approver => Ok(role),
            _ => Err(EngineError::Forbidden(format!(
                "`{}` is not an approver of project `{project}`: only an approver decides",
                by.name
            ))),
        }
    }

    async fn apply(
        &self,
        run_id: &str,
        call: &ToolCall,
        record: &ApprovalDecision,
        role: Option<Role>,
    ) -> Result<ToolCall> {
        let final_arguments: Value = record.edited_arguments.clone().unwrap_or_else(|| call.arguments.clone());
        let error = (record.decision == Decision::Rejected).then(|| {
            format!("rejected by {}: {}", record.decided_by, record.comment.as_deref().unwrap_or(DEFAULT_REASON))
        });
        let write =
            DecisionWrite { call, decision: record, final_arguments: &final_arguments, error: error.clone(), role };
        match self.rt.store.decide(write).await? {
            DecideOutcome::NotAwaiting => {
                let current = self.rt.store.tool_call(run_id, &call.id).await?;
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
                self.rt.bus.publish(run_id, EventKind::ToolCallUpdated { tool_call: Box::new(decided.clone()) });
                if resumed {
                    self.rt.publish_transition(run_id, RunStatus::Paused, RunStatus::Running);
                    self.spawn(run_id.to_owned());
                    // A child resumed: its parent may stop being paused.
                    self.notify_parent(run_id).await;
                }
                Ok(decided)
            }
        }
    }
}

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

impl Approvals<'_> {
    /// Approves a call awaiting approval (optionally with edited arguments,
    /// a comment, or "always" for this tool in this run).
    pub async fn approve(self, run_id: &str, call_id: &str, req: DecisionRequest, by: &Actor) -> Result<ToolCall> {
        if req.reason.is_some() {
            return Err(EngineError::Invalid("`reason` is for rejections; an approval takes `comment`".into()));
        }
        self.decide(run_id, call_id, Decision::Approved, req, by).await
    }

    /// Rejects a call awaiting approval; the model receives the reason.
    pub async fn reject(self, run_id: &str, call_id: &str, req: DecisionRequest, by: &Actor) -> Result<ToolCall> {
        if req.arguments.is_some() {
            return Err(EngineError::Invalid("`arguments` can only be edited when approving".into()));
        }
        self.decide(run_id, call_id, Decision::Rejected, req, by).await
    }

    /// Calls awaiting a decision across the runs of a project (or of all
    /// projects), oldest first.
    pub async fn pending_approvals(self, project: Option<&str>) -> Result<Vec<Interruption>> {
        let pending = self.rt.store.interruptions(None, project).await?;
        self.with_chains(pending).await
    }

    /// The calls awaiting a decision in the runs below run `id` (its paused
    /// children, theirs, …), oldest first, each with its chain: what a
    /// parent paused on its children waits for. Reads the tree's paused runs
    /// by their parent and each one's own calls, never the project's inbox.
    pub async fn pending_below(self, id: &str) -> Result<Vec<Interruption>> {
        let mut pending = Vec::new();
        let mut level = vec![id.to_owned()];
        for _ in 0..=self.rt.config.max_depth {
            let mut below = Vec::new();
            for parent in &level {
                for child in self.rt.store.children(parent).await? {
                    if child.status == RunStatus::Paused {
                        pending.extend(self.rt.store.interruptions(Some(&child.id), None).await?);
                        below.push(child.id);
                    }
                }
            }
            if below.is_empty() {
                break;
            }
            level = below;
        }
        pending
            .sort_by(|a, b| (a.requested_at, &a.run_id, a.step_index).cmp(&(b.requested_at, &b.run_id, b.step_index)));
        self.with_chains(pending).await
    }

    /// One page of a project's inbox: the calls awaiting a decision, oldest
    /// first, with each child run's chain (see [`InboxFilter`]). Reads one
    /// index range and the chains of the page's child runs, whatever the
    /// backlog.
    pub async fn pending_inbox(self, filter: &InboxFilter) -> Result<InboxPage> {
        let page = self.rt.store.pending_inbox(filter).await?;
        // A page often holds several calls of one tree: each chain is read once.
        let mut chains: HashMap<String, Vec<RunRef>> = HashMap::new();
        let mut items = Vec::with_capacity(page.calls.len());
        for PendingCall { mut call, parent_run_id, .. } in page.calls {
            if let Some(parent) = parent_run_id {
                if !chains.contains_key(&parent) {
                    let chain = self.chain_from(Some(parent.clone())).await?;
                    chains.insert(parent.clone(), chain);
                }
                call.chain = chains[&parent].clone();
            }
            items.push(call);
        }
        Ok(InboxPage { items, next: page.next })
    }

    /// How many calls await a decision in `project` (the navigation badge):
    /// one stored row, kept by the store as calls pause and are decided.
    pub async fn pending_count(self, project: &str) -> Result<u64> {
        self.rt.store.pending_count(project).await
    }
}

crate::engine::facade_group!(Approvals, approvals, "Decisions on calls that wait for approval, and the inbox of them.");
