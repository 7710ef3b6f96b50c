//! A project's retention: how old and how many of its runs are kept, and
//! what a pass of the job that enforces it deleted.

use serde::{Deserialize, Serialize};

/// The most days a policy keeps runs (a hundred years).
pub const MAX_RETENTION_DAYS: u32 = 36_500;
/// The most runs a count policy keeps.
pub const MAX_RETENTION_RUNS: u64 = 100_000_000;

/// How long and how many of a project's runs are kept. Only finished runs
/// (done, failed, cancelled) are ever deleted, each with its child runs and
/// everything recorded of them; a paused or running run is kept however old.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct Retention {
    /// Runs created more than this many days ago are deleted (1–36,500; null: kept however old).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 36500))]
    pub max_age_days: Option<u32>,
    /// Only the newest this many root runs are kept (1–100,000,000; null: however many).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100000000))]
    pub max_runs: Option<u64>,
}

impl Retention {
    pub fn check_bounds(&self) -> Result<(), String> {
        if let Some(days) = self.max_age_days {
            if !(1..=MAX_RETENTION_DAYS).contains(&days) {
                return Err(format!("max_age_days must be 1 to {MAX_RETENTION_DAYS}, not {days}"));
            }
        }
        if let Some(runs) = self.max_runs {
            if !(1..=MAX_RETENTION_RUNS).contains(&runs) {
                return Err(format!("max_runs must be 1 to {MAX_RETENTION_RUNS}, not {runs}"));
            }
        }
        Ok(())
    }

    /// Whether the policy deletes anything at all.
    pub fn is_set(&self) -> bool {
        self.max_age_days.is_some() || self.max_runs.is_some()
    }
}

/// What one pass of retention over a project deleted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PruneReport {
    /// Runs deleted, child runs included.
    pub runs_deleted: u64,
    /// Transactions it took (each a small batch, so writes go on between them).
    pub batches: u32,
    /// The pass stopped at its budget with runs still to delete (the next pass goes on).
    pub more: bool,
}
