//! The gate: the only code that lets a tool call start.
//!
//! A call **needs approval** when its tool's definition requires it
//! (`Tool::requires_approval`, e.g. `send_email`) or the run's approval
//! policy covers it (`approval: "all"` or a list) — whichever path made the
//! call: the model, a `script`, a hand-written `model_output` in a fork, a
//! replay, an imported document. Such a call starts only against a
//! **grant** in the database (see `store::grants`): its own, made by a
//! decision on it and with exactly the arguments approved, or an "always"
//! of its tool in this run that no follow-up has ended; and only while the
//! grant's author is still an approver of the run's project. A grant is
//! written only by the decision path, which checks the decider's role, and
//! is never copied, so a fork, an edit, a replay, an import, a child run or
//! a batch run starts with none whatever its history or document says.
//!
//! A call that needs approval and has no grant is put back to
//! `awaiting_approval`: the run pauses for a person. When the grant cannot
//! be read, the call fails closed (it does not run; the model is told).
//!
//! [`Admitted`] is the proof: starting a tool (`calls::invoke`) or a child
//! run (`delegate::start_child`) takes one, and only [`admit`] makes them.

use crate::model::{Grant, GrantScope, Role, Run, ToolCall};
use crate::runtime::Runtime;
use crate::tools::ToolError;

/// A call the gate let through (see the module docs); it cannot be made
/// anywhere else.
#[derive(Debug)]
pub(super) struct Admitted(());

/// What the gate says of one call.
pub(super) enum Verdict {
    Admitted(Admitted),
    /// It needs approval and nothing grants it: ask a person.
    Ungranted,
    /// Whether it is granted could not be read: it does not run.
    Unknown(ToolError),
}

/// Whether `call` of `run` needs a person's approval, whatever made it: the
/// tool's definition or the run's policy (never the run's "always" lists,
/// which only save asking again for what a grant already covers).
pub(super) fn needs_approval(rt: &Runtime, run: &Run, tool: &str) -> bool {
    let by_default = rt.tools.view(&run.project).get(tool).is_some_and(|t| t.requires_approval());
    run.approval.covers(tool, by_default)
}

/// The gate's verdict on `call` (see the module docs).
pub(super) async fn admit(rt: &Runtime, run: &Run, call: &ToolCall) -> Verdict {
    if !needs_approval(rt, run, &call.tool_name) {
        return Verdict::Admitted(Admitted(()));
    }
    match granted(rt, run, call).await {
        Ok(Some(_)) => Verdict::Admitted(Admitted(())),
        Ok(None) => Verdict::Ungranted,
        Err(e) => {
            tracing::error!(run_id = %run.id, call_id = %call.id, error = %e, "not running a call whose grant could not be read");
            Verdict::Unknown(ToolError::NotRecorded(format!("its approval could not be read: {e}")))
        }
    }
}

/// The grant that lets `call` run, if one does.
async fn granted(rt: &Runtime, run: &Run, call: &ToolCall) -> crate::error::Result<Option<Grant>> {
    let Some(grant) = rt.store.grant_for(&run.id, &call.id, &call.tool_name).await? else { return Ok(None) };
    let covers = grant.run_id == run.id
        && grant.tool_name == call.tool_name
        && match grant.scope {
            GrantScope::Call => grant.call_id == call.id && grant.arguments == call.arguments,
            GrantScope::Run => grant.ended_at.is_none(),
        };
    if !covers || grant.grantor_role < Role::Approver {
        return Ok(None);
    }
    let role = crate::store::role_in(rt.store.directory(), &grant.grantor_id, &run.project).await?;
    Ok(role.is_some_and(|r| r >= Role::Approver).then_some(grant))
}
