//! What driving a run comes to, for the scheduler to act on: the run ended,
//! paused with the deadlines of its calls awaiting a decision, or was not
//! the driver's to move.

use std::time::Duration;

use tokio::time::Instant;

use crate::model::RunStatus;

/// How a call to [`super::drive`] ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The run reached `done`, `failed` or `cancelled`.
    Ended(RunStatus),
    /// The run is paused until its calls awaiting approval are decided;
    /// those the run's approval timeout applies to are listed with the
    /// moment they are to be rejected (empty without a timeout). The
    /// deadlines were fixed before the run was seen paused.
    Paused { deadlines: Vec<Deadline> },
    /// The run's agent calls wait for these child runs (started here or
    /// earlier); the driver stopped, and a child's end starts it again.
    Waiting { children: Vec<String> },
    /// Nothing to do: the run is gone, not pending or running, or was
    /// already past where a driver could take it.
    NotDriven,
}

/// When a call awaiting approval is rejected for want of a decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Deadline {
    pub call_id: String,
    pub at: Instant,
}

impl Deadline {
    /// The deadline `after` from now; `None` when that moment is too far
    /// away for the clock to represent.
    pub fn after(call_id: String, after: Duration) -> Option<Deadline> {
        Some(Deadline { call_id, at: Instant::now().checked_add(after)? })
    }
}
