//! The id of the child run a sub-agent call starts: derived from the
//! database's key (see `Runtime::id_key`) and the parent's stored identity
//! (its project and id) with the call's id. Derived, so starting a child is
//! idempotent (a crash between creating it and recording the call running
//! never starts a second one); keyed, so no client can predict it and
//! create a run under it first, in its own project or any other.

use crate::error::Result;
use crate::model::Run;
use crate::runtime::Runtime;

/// The id of the child run agent call `call_id` of `run` starts.
pub(super) async fn child_id(rt: &Runtime, run: &Run, call_id: &str) -> Result<String> {
    Ok(crate::identity::keyed_id(rt.id_key().await?, &["child run", &run.project, &run.id, call_id]))
}

/// Whether `child` is the run agent call `call_id` of `run` started: it
/// names them as its parent, in the same project.
pub(super) fn is_child_of(child: &Run, run: &Run, call_id: &str) -> bool {
    child.project == run.project
        && child.parent_run_id.as_deref() == Some(run.id.as_str())
        && child.parent_call_id.as_deref() == Some(call_id)
}
