//! The run status machine, and the one place that says which transitions are legal.
//!
//! Every status change in the engine and the store is checked here first, so an
//! illegal transition is an error everywhere instead of a silent overwrite.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a run is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum RunStatus {
    Pending,
    Running,
    Paused,
    Done,
    Failed,
    Cancelled,
}

/// Raised when code asks for a transition the status machine forbids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IllegalTransition {
    pub from: RunStatus,
    pub to: RunStatus,
}

impl fmt::Display for IllegalTransition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a {} run cannot become {}", self.from, self.to)
    }
}

impl std::error::Error for IllegalTransition {}

impl RunStatus {
    pub const ALL: [RunStatus; 6] =
        [Self::Pending, Self::Running, Self::Paused, Self::Done, Self::Failed, Self::Cancelled];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// `done`, `failed` and `cancelled` end a run (though `done` can be reopened).
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Done | Self::Failed | Self::Cancelled)
    }

    /// The status machine:
    /// `pending → running → paused → running → done | failed | cancelled`,
    /// and `done → running` for a follow-up message.
    pub fn can_become(self, to: RunStatus) -> bool {
        use RunStatus::*;
        matches!(
            (self, to),
            (Pending, Running)
                | (Pending, Cancelled)
                | (Pending, Failed)
                | (Running, Paused)
                | (Running, Done)
                | (Running, Failed)
                | (Running, Cancelled)
                | (Paused, Running)
                | (Paused, Cancelled)
                | (Paused, Failed)
                | (Done, Running)
        )
    }

    /// `Ok` when `self → to` is legal.
    pub fn check(self, to: RunStatus) -> Result<(), IllegalTransition> {
        if self.can_become(to) {
            Ok(())
        } else {
            Err(IllegalTransition { from: self, to })
        }
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finished_runs_only_reopen_from_done() {
        assert!(RunStatus::Done.can_become(RunStatus::Running));
        assert!(RunStatus::Failed.check(RunStatus::Running).is_err());
        assert!(RunStatus::Cancelled.check(RunStatus::Running).is_err());
        assert!(RunStatus::Done.check(RunStatus::Cancelled).is_err());
    }

    #[test]
    fn pending_cannot_skip_to_done() {
        let err = RunStatus::Pending.check(RunStatus::Done).unwrap_err();
        assert_eq!(err.to_string(), "a pending run cannot become done");
    }

    #[test]
    fn names_round_trip() {
        for st in RunStatus::ALL {
            assert_eq!(RunStatus::parse(st.as_str()), Some(st));
        }
        assert_eq!(RunStatus::parse("bogus"), None);
    }
}
