//! The online-evaluation half of the store: evaluators (see
//! [`crate::model::Evaluator`]), their cursors over the runs that end, and
//! those runs read in the order they ended.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::model::{Evaluator, Run};

/// Where an evaluator has read up to: the end time and id of the last run
/// it looked at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvaluatorCursor {
    pub at_ms: i64,
    pub run_id: String,
}

/// An evaluator with its cursor and project, as its worker reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchingEvaluator {
    pub project: String,
    pub evaluator: Evaluator,
    pub cursor: EvaluatorCursor,
}

#[async_trait]
pub trait EvaluatorStore: Send + Sync {
    /// Keeps a new evaluator of `project` reading from `cursor`, unless
    /// `project` has `max` already or one of the same name; whether it was
    /// kept (false: the name is taken or the cap reached, as `Err`-free
    /// outcomes the engine words).
    async fn insert_evaluator(
        &self,
        project: &str,
        e: &Evaluator,
        cursor: &EvaluatorCursor,
        max: u32,
    ) -> Result<CappedInsert>;
    /// Evaluator `id` of `project`.
    async fn evaluator(&self, project: &str, id: &str) -> Result<Option<Evaluator>>;
    /// `project`'s evaluators by name.
    async fn evaluators(&self, project: &str, limit: u32) -> Result<Vec<Evaluator>>;
    /// Replaces evaluator `id`'s settings (its name, spec and whether it is
    /// on) and, when given, moves its cursor; whether it exists (`Err` for
    /// a name another evaluator of the project has is the engine's check).
    async fn update_evaluator(
        &self,
        project: &str,
        e: &Evaluator,
        cursor: Option<&EvaluatorCursor>,
        at: DateTime<Utc>,
    ) -> Result<bool>;
    /// Deletes evaluator `id` of `project`; whether it existed.
    async fn delete_evaluator(&self, project: &str, id: &str) -> Result<bool>;
    /// Every evaluator that is on (of every project), with its cursor.
    async fn enabled_evaluators(&self) -> Result<Vec<WatchingEvaluator>>;
    /// Moves evaluator `id`'s cursor from `from` to `to` and adds to its
    /// counts; whether the cursor was still at `from` (another server may
    /// have moved it: then nothing changes).
    async fn advance_evaluator(
        &self,
        id: &str,
        from: &EvaluatorCursor,
        to: &EvaluatorCursor,
        seen: u64,
        scored: u64,
    ) -> Result<bool>;
    /// `project`'s runs that ended after `after`, in the order they ended, at most `limit`.
    /// (Only those that ended at `until_ms` or before.)
    async fn runs_ended_after(
        &self,
        project: &str,
        after: &EvaluatorCursor,
        until_ms: i64,
        limit: u32,
    ) -> Result<Vec<Run>>;
}

/// What an insert under a project's cap (an evaluator, a review queue) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CappedInsert {
    Kept,
    NameTaken,
    Full,
}

impl CappedInsert {
    /// `Ok` when kept, else a `Conflict` saying why: `a_thing` (`an
    /// evaluator`) named `name` exists, or the project holds `max` `things`.
    pub fn kept(self, a_thing: &str, things: &str, name: &str, max: u32) -> Result<()> {
        match self {
            CappedInsert::Kept => Ok(()),
            CappedInsert::NameTaken => {
                Err(crate::error::EngineError::Conflict(format!("{a_thing} named `{name}` exists")))
            }
            CappedInsert::Full => Err(crate::error::EngineError::Conflict(format!(
                "the project has {max} {things}, the most it may have; delete one first"
            ))),
        }
    }
}
