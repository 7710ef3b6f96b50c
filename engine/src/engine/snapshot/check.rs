//! What an import checks before anything is stored: the run's settings (as
//! creating a run checks them), references inside the document, timestamps,
//! and the tool calls that have not finished, which must never run without
//! the decision they need.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::RunState;
use crate::error::{EngineError, Result};
use crate::model::limits::MAX_TURNS;
use crate::model::{Decision, MessageBody, RunStatus, StepStatus, ToolCall, ToolCallStatus};
use crate::runtime::create::is_object_or_null;
use crate::runtime::{now, Runtime};
use crate::store::Blob;

/// The longest approval timeout an imported run may carry: ten years.
pub(crate) const MAX_APPROVAL_TIMEOUT_S: u64 = 10 * 365 * 24 * 3600;
/// Timestamps must lie between 1970-01-01 and 9999-12-31 (Unix milliseconds).
const LATEST_MS: i64 = 253_402_300_799_999;

fn bad<T>(m: String) -> Result<T> {
    Err(EngineError::Invalid(m))
}

/// The run's own settings, checked as `POST /api/runs` checks them.
pub(super) fn run_settings(rt: &Runtime, s: &RunState) -> Result<()> {
    let run = &s.run;
    let model = rt.models.get(&run.model).ok_or_else(|| {
        EngineError::Invalid(format!("unknown model `{}`; available: {}", run.model, rt.models.names().join(", ")))
    })?;
    model
        .validate_settings(&run.model_settings)
        .map_err(|e| EngineError::Invalid(format!("run.model_settings: {e}")))?;
    let known = rt.tools.view(&run.project);
    if let Some(t) = run.tools.iter().find(|t| !known.contains(t)) {
        return bad(format!("unknown tool `{t}` in run.tools"));
    }
    // A run may have been let run longer than a request may ask for (a
    // generated trace): as many turns as its steps then, which the
    // document's size bounds.
    let most = MAX_TURNS.max(u32::try_from(s.steps.len()).unwrap_or(u32::MAX));
    if !(1..=most).contains(&run.max_turns) {
        return bad(format!(
            "run.max_turns must be between 1 and {most} (the larger of {MAX_TURNS} and the document's steps)"
        ));
    }
    if !is_object_or_null(&run.context) {
        return bad("run.context must be a JSON object".into());
    }
    for (k, v) in &run.tags {
        if k.is_empty() || k.len() > 64 || k.contains(':') || v.len() > 256 {
            return bad(format!("run.tags: `{k}` must be 1-64 characters without `:`, its value at most 256"));
        }
    }
    if let Some(name) = run.approval.listed_tools().iter().find(|t| !known.contains(t)) {
        return bad(format!("run.approval: unknown tool `{name}`"));
    }
    if let Some(t) = run.approval.timeout_s {
        if !(1..=MAX_APPROVAL_TIMEOUT_S).contains(&t) {
            return bad(format!("run.approval.timeout_s must be between 1 and {MAX_APPROVAL_TIMEOUT_S}"));
        }
    }
    if let Some(schema) = &run.result_schema {
        jsonschema::validator_for(schema)
            .map_err(|e| EngineError::Invalid(format!("run.result_schema is not a valid JSON Schema: {e}")))?;
    }
    times(s)
}

/// A kept id follows the rules of client-supplied run ids.
pub(super) fn kept_id(id: &str) -> Result<()> {
    match crate::model::limits::run_id_problem(id) {
        Some(problem) => bad(format!("run.id {problem} to be kept")),
        None => Ok(()),
    }
}

/// Every timestamp lies in the range runlens computes deadlines in.
fn times(s: &RunState) -> Result<()> {
    let check = |what: &str, t: Option<&DateTime<Utc>>| match t {
        Some(t) if !(0..=LATEST_MS).contains(&t.timestamp_millis()) => {
            bad(format!("{what} must lie between 1970-01-01 and 9999-12-31"))
        }
        _ => Ok(()),
    };
    let r = &s.run;
    check("run.created_at", Some(&r.created_at))?;
    check("run.updated_at", Some(&r.updated_at))?;
    check("run.started_at", r.started_at.as_ref())?;
    check("run.finished_at", r.finished_at.as_ref())?;
    for (i, m) in s.messages.iter().enumerate() {
        check(&format!("messages[{i}].createdAt"), Some(&m.created_at))?;
    }
    for (i, step) in s.steps.iter().enumerate() {
        check(&format!("steps[{i}].started_at"), Some(&step.started_at))?;
        check(&format!("steps[{i}].model_completed_at"), step.model_completed_at.as_ref())?;
        check(&format!("steps[{i}].completed_at"), step.completed_at.as_ref())?;
        for c in &step.tool_calls {
            let at = |k: &str| format!("tool call `{}`: {k}", c.id);
            check(&at("requested_at"), c.requested_at.as_ref())?;
            check(&at("started_at"), c.started_at.as_ref())?;
            check(&at("completed_at"), c.completed_at.as_ref())?;
            check(&at("approval.decided_at"), c.approval.as_ref().map(|a| &a.decided_at))?;
        }
    }
    Ok(())
}

/// Positions, ids and references inside the document.
pub(super) fn references(s: &RunState, blobs: &[Blob]) -> Result<()> {
    for (i, m) in s.messages.iter().enumerate() {
        if m.seq != i as u64 || m.run_id != s.run.id {
            return bad(format!("messages[{i}]: expected seq {i} of run `{}`", s.run.id));
        }
    }
    let blobs: HashSet<&str> = blobs.iter().map(|b| b.id.as_str()).collect();
    let dangling = |owner: String, r: Option<&Value>| match blob_ref(r) {
        Some(b) if !blobs.contains(b) => bad(format!("dangling reference: {owner} names blob `{b}`")),
        _ => Ok(()),
    };
    let mut calls = HashSet::new();
    for (i, step) in s.steps.iter().enumerate() {
        if step.index != i as u32 || step.run_id != s.run.id {
            return bad(format!("steps[{i}]: expected index {i} of run `{}`", s.run.id));
        }
        for c in &step.tool_calls {
            if c.step_index != step.index || c.run_id != s.run.id {
                return bad(format!("tool call `{}` does not belong to steps[{i}]", c.id));
            }
            if !calls.insert(c.id.as_str()) {
                return bad(format!("tool call id `{}` appears twice", c.id));
            }
            dangling(format!("tool call `{}`", c.id), c.result.as_ref())?;
        }
    }
    let mut invoked = HashSet::new();
    for m in &s.messages {
        match &m.body {
            MessageBody::Agent { invocations, .. } => invoked.extend(invocations.iter().map(|i| i.id.as_str())),
            MessageBody::InvocationResult { id, result, .. } => {
                if !invoked.contains(id.as_str()) {
                    return bad(format!(
                        "dangling reference: invocation-result `{}` answers no earlier tool call `{id}`",
                        m.id
                    ));
                }
                dangling(format!("invocation-result `{}`", m.id), Some(result))?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// The blob a result names, if any.
pub(super) fn blob_ref(result: Option<&Value>) -> Option<&str> {
    result?.get("blob_id")?.as_str()
}

/// Settles the calls that have not finished, and the run's status with them.
///
/// Such a call must be in the last step, which must still be running; its
/// tool must be known and attached to the run and its arguments must match
/// the tool's schema. A call that needs approval becomes
/// `awaiting_approval` (whatever status or decision the document gave it).
/// A run that was `running` or `pending` with such a call is imported
/// `paused`; otherwise it is imported `pending` and continues.
///
/// A document grants nothing (see the runner's gate): approvals recorded in
/// it are history, an unfinished call's approve decision is dropped, and
/// `always_approve` is emptied, whoever imports it. `always_reject` must be
/// backed by a recorded "always" reject decision of the run.
pub(super) fn settle_calls(rt: &Runtime, s: &mut RunState) -> Result<()> {
    s.run.always_approve.clear();
    let run = &s.run;
    for tool in &run.always_reject {
        let backed = s.steps.iter().flat_map(|st| &st.tool_calls).any(|c| {
            c.tool_name == *tool && c.approval.as_ref().is_some_and(|a| a.always && a.decision == Decision::Rejected)
        });
        if !backed {
            return bad(format!("run.always_reject: no recorded \"always\" decision of this run covers `{tool}`"));
        }
    }
    let last = s.steps.len().checked_sub(1);
    let at = now();
    let mut awaiting = false;
    for (i, step) in s.steps.iter_mut().enumerate() {
        for c in step.tool_calls.iter_mut().filter(|c| !c.status.is_finished()) {
            if Some(i) != last || step.status != StepStatus::Running {
                return bad(format!(
                    "tool call `{}` is unfinished ({}) in steps[{i}]; only the last step, while running, has \
                     unfinished calls",
                    c.id,
                    c.status.as_str()
                ));
            }
            if c.approval.as_ref().is_some_and(|a| a.decision == Decision::Approved) {
                c.approval = None;
            }
            settle_call(rt, run, c, at)?;
            awaiting |= c.status == ToolCallStatus::AwaitingApproval;
        }
    }
    let run = &mut s.run;
    match run.status {
        RunStatus::Running | RunStatus::Pending => {
            run.status = if awaiting { RunStatus::Paused } else { RunStatus::Pending };
        }
        RunStatus::Paused if !awaiting => return bad("a paused run must have a tool call awaiting approval".into()),
        _ => {}
    }
    Ok(())
}

fn settle_call(rt: &Runtime, run: &crate::model::Run, c: &mut ToolCall, at: DateTime<Utc>) -> Result<()> {
    let tool = c.tool_name.as_str();
    let known = rt.tools.view(&run.project);
    if !known.contains(tool) {
        return bad(format!("unknown tool `{tool}` in tool call `{}`", c.id));
    }
    if !run.tools.iter().any(|t| t == tool) {
        return bad(format!("tool call `{}` uses `{tool}`, which is not attached to the run (run.tools)", c.id));
    }
    known.validate(tool, &c.arguments).map_err(|e| EngineError::Invalid(format!("tool call `{}`: {e}", c.id)))?;
    match c.approval.as_ref().map(|a| a.decision) {
        Some(Decision::Rejected) => {
            bad(format!("tool call `{}` has a reject decision but is {}", c.id, c.status.as_str()))
        }
        // Dropped before (see `settle_calls`): a document approves nothing.
        Some(Decision::Approved) => bad(format!("tool call `{}` kept an approve decision", c.id)),
        None => {
            let by_default = known.get(tool).is_some_and(|t| t.requires_approval());
            let needs = run.approval.covers(tool, by_default);
            if needs || run.always_reject.iter().any(|t| t == tool) {
                c.status = ToolCallStatus::AwaitingApproval;
                c.requested_at.get_or_insert(at);
                c.started_at = None;
            }
            Ok(())
        }
    }
}
