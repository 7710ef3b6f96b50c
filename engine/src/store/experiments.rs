//! The experiments half of the store: experiments (see
//! [`crate::model::Experiment`]) and what their runs say, read through the
//! runs' `experiment_id` and `experiment_item_id` columns (whose unique
//! index lets each item run once).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::model::{Experiment, ExperimentStatus, Run, RunStatus, Usage};

/// An item's run, as the experiment's driver sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ItemRun {
    pub item_id: String,
    pub run_id: String,
    pub status: RunStatus,
}

/// One score value of an experiment's runs, with how many runs got it.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueCount {
    pub name: String,
    /// As kept (JSON text).
    pub value: String,
    pub number: Option<f64>,
    pub count: u32,
}

#[async_trait]
pub trait ExperimentStore: Send + Sync {
    async fn insert_experiment(&self, e: &Experiment) -> Result<()>;
    /// Experiment `id` of `project`.
    async fn experiment(&self, project: &str, id: &str) -> Result<Option<Experiment>>;
    /// `project`'s experiments (of `dataset_id`, when given), newest first,
    /// older than the id `before`, at most `limit`.
    async fn experiments(
        &self,
        project: &str,
        dataset_id: Option<&str>,
        before: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Experiment>>;
    /// The experiments of set `set_id` of `project`, oldest first (at
    /// most [`crate::model::MAX_SET_MODELS`] are ever made).
    async fn experiments_in_set(&self, project: &str, set_id: &str) -> Result<Vec<Experiment>>;
    /// Every running experiment (of every project).
    async fn running_experiments(&self) -> Result<Vec<Experiment>>;
    /// Ends running experiment `id` as `status`; whether it was running.
    async fn finish_experiment(&self, id: &str, status: ExperimentStatus, at: DateTime<Utc>) -> Result<bool>;
    /// The runs of experiment `id`, one per item started.
    async fn item_runs(&self, id: &str) -> Result<Vec<ItemRun>>;
    /// The runs of experiment `id` for items `item_ids`.
    async fn runs_of_items(&self, id: &str, item_ids: &[String]) -> Result<Vec<Run>>;
    /// Experiment `id`'s usage per model of its runs.
    async fn usage_by_model(&self, id: &str) -> Result<Vec<(String, Usage)>>;
    /// The scorers' scores of experiment `id`'s runs, by name and value
    /// (at most `limit` distinct pairs).
    async fn score_values(&self, id: &str, limit: u32) -> Result<Vec<ValueCount>>;
    /// Per item of experiment `id`: its run and the mean of the run's
    /// numeric and yes/no scorer scores (none when it has none).
    async fn item_means(&self, id: &str) -> Result<Vec<(String, String, Option<f64>)>>;
}
