//! The scores half of the store: judgements attached to runs (see
//! [`crate::model::Score`]), each kept with its project and deleted with its run.

use async_trait::async_trait;

use crate::error::Result;
use crate::model::{Score, ScoreSummary};

/// What [`ScoreStore::insert_score`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScoreInsert {
    Kept,
    /// The run has as many scores as it may; nothing kept.
    Full,
    /// `once`, and the run has a scorer's score of that name; nothing kept.
    Already,
}

#[async_trait]
pub trait ScoreStore: Send + Sync {
    /// Keeps `score` on its run of `project` when the run then has at most
    /// `max` scores and, with `once`, no scorer's score of the same name
    /// (checked and kept in one transaction serialized on the run, so two
    /// servers scoring one run keep one).
    async fn insert_score(&self, project: &str, score: &Score, max: u32, once: bool) -> Result<ScoreInsert>;
    /// The scores of run `run_id`, oldest first, at most `limit`.
    async fn run_scores(&self, run_id: &str, limit: u32) -> Result<Vec<Score>>;
    /// Per run of `run_ids` in `project` and per score name (by run, then
    /// name): how many, the mean of numbers and yes/no, the yes and no
    /// counts (labels are not counted one by one here: `labels` is empty).
    async fn summaries_of_runs(&self, project: &str, run_ids: &[String]) -> Result<Vec<(String, ScoreSummary)>>;
    /// Score `id` of `project`, if there is one.
    async fn score(&self, project: &str, id: &str) -> Result<Option<Score>>;
    /// Deletes score `id` of `project`; whether it was there.
    async fn delete_score(&self, project: &str, id: &str) -> Result<bool>;
}
