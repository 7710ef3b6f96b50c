//! [`ExperimentStore`] for every backend: the `experiments` table, and the
//! runs of an experiment read by their `experiment_id` (an index range:
//! `runs_by_experiment_item`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::columns::RUN_COLUMNS;
use super::{sql, with_db, Dialect, SqlStore};
use crate::error::Result;
use crate::model::{Actor, Experiment, ExperimentStatus, NewExperiment, Run, RunStatus, Usage};
use crate::store::experiments::{ExperimentStore, ItemRun, ValueCount};
use crate::store::rows::RunRow;
use crate::store::{from_ms, json_text, to_ms};

const COLUMNS: &str = "id, project, name, dataset_id, dataset_name, dataset_version, item_count, status, spec, \
    created_by_id, created_by, created_at, finished_at, set_id";

#[derive(sqlx::FromRow)]
struct Row {
    id: String,
    project: String,
    name: String,
    dataset_id: String,
    dataset_name: String,
    dataset_version: i64,
    item_count: i64,
    status: String,
    spec: String,
    created_by_id: String,
    created_by: String,
    created_at: i64,
    finished_at: Option<i64>,
    set_id: Option<String>,
}

impl From<Row> for Experiment {
    fn from(r: Row) -> Experiment {
        let count = |n: i64| u32::try_from(n).unwrap_or(u32::MAX);
        Experiment {
            id: r.id,
            project: r.project,
            name: r.name,
            dataset_id: r.dataset_id,
            dataset_name: r.dataset_name,
            dataset_version: count(r.dataset_version),
            item_count: count(r.item_count),
            // A row this store wrote always decodes; a damaged one reads as ended.
            status: ExperimentStatus::parse(&r.status).unwrap_or(ExperimentStatus::Cancelled),
            spec: serde_json::from_str::<NewExperiment>(&r.spec).unwrap_or_default(),
            created_by: Actor { id: r.created_by_id, name: r.created_by },
            created_at: from_ms(r.created_at),
            finished_at: r.finished_at.map(from_ms),
            set_id: r.set_id,
        }
    }
}

fn status_of(text: &str) -> RunStatus {
    RunStatus::parse(text).unwrap_or(RunStatus::Failed)
}

#[async_trait]
impl<S: SqlStore> ExperimentStore for S {
    async fn insert_experiment(&self, e: &Experiment) -> Result<()> {
        with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(
                D,
                "INSERT INTO experiments (id, project, name, dataset_id, dataset_name, dataset_version, item_count,
                    status, spec, created_by_id, created_by, created_at, finished_at, set_id)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ))
            .bind(&e.id)
            .bind(&e.project)
            .bind(&e.name)
            .bind(&e.dataset_id)
            .bind(&e.dataset_name)
            .bind(i64::from(e.dataset_version))
            .bind(i64::from(e.item_count))
            .bind(e.status.as_str())
            .bind(json_text(&e.spec))
            .bind(&e.created_by.id)
            .bind(&e.created_by.name)
            .bind(to_ms(e.created_at))
            .bind(e.finished_at.map(to_ms))
            .bind(&e.set_id)
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    async fn experiment(&self, project: &str, id: &str) -> Result<Option<Experiment>> {
        with_db!(self.db(), |pool, D| {
            let row = sqlx::query_as::<_, Row>(sql!(
                D,
                format!("SELECT {COLUMNS} FROM experiments WHERE id = ? AND project = ?")
            ))
            .bind(id)
            .bind(project)
            .fetch_optional(pool)
            .await?;
            Ok(row.map(Experiment::from))
        })
    }

    async fn experiments(
        &self,
        project: &str,
        dataset_id: Option<&str>,
        before: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Experiment>> {
        with_db!(self.db(), |pool, D| {
            let rows = sqlx::query_as::<_, Row>(sql!(
                D,
                format!(
                    "SELECT {COLUMNS} FROM experiments
                     WHERE project = ? AND (?::text IS NULL OR dataset_id = ?) AND (?::text IS NULL OR id < ?)
                     ORDER BY id DESC LIMIT ?"
                )
            ))
            .bind(project)
            .bind(dataset_id)
            .bind(dataset_id)
            .bind(before)
            .bind(before)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?;
            Ok(rows.into_iter().map(Experiment::from).collect())
        })
    }

    async fn experiments_in_set(&self, project: &str, set_id: &str) -> Result<Vec<Experiment>> {
        with_db!(self.db(), |pool, D| {
            let rows = sqlx::query_as::<_, Row>(sql!(
                D,
                format!("SELECT {COLUMNS} FROM experiments WHERE project = ? AND set_id = ? ORDER BY id")
            ))
            .bind(project)
            .bind(set_id)
            .fetch_all(pool)
            .await?;
            Ok(rows.into_iter().map(Experiment::from).collect())
        })
    }

    async fn running_experiments(&self) -> Result<Vec<Experiment>> {
        with_db!(self.db(), |pool, D| {
            let rows = sqlx::query_as::<_, Row>(sql!(
                D,
                format!("SELECT {COLUMNS} FROM experiments WHERE status = 'running' ORDER BY id")
            ))
            .fetch_all(pool)
            .await?;
            Ok(rows.into_iter().map(Experiment::from).collect())
        })
    }

    async fn finish_experiment(&self, id: &str, status: ExperimentStatus, at: DateTime<Utc>) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let done = sqlx::query(sql!(
                D,
                "UPDATE experiments SET status = ?, finished_at = ? WHERE id = ? AND status = 'running'"
            ))
            .bind(status.as_str())
            .bind(to_ms(at))
            .bind(id)
            .execute(pool)
            .await?
            .rows_affected();
            Ok(done == 1)
        })
    }

    async fn item_runs(&self, id: &str) -> Result<Vec<ItemRun>> {
        let rows: Vec<(String, String, String)> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                "SELECT experiment_item_id, id, status FROM runs WHERE experiment_id = ? ORDER BY experiment_item_id"
            ))
            .bind(id)
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|(item_id, run_id, status)| ItemRun { item_id, run_id, status: status_of(&status) })
            .collect())
    }

    async fn runs_of_items(&self, id: &str, item_ids: &[String]) -> Result<Vec<Run>> {
        if item_ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<RunRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                format!("SELECT {RUN_COLUMNS} FROM runs WHERE experiment_id = ? AND experiment_item_id {}", D::IN_LIST)
            ))
            .bind(id)
            .bind(D::list(item_ids))
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(Run::from).collect())
    }

    async fn usage_by_model(&self, id: &str) -> Result<Vec<(String, Usage)>> {
        type Row = (String, i64, i64, i64, i64, i64, i64);
        let rows: Vec<Row> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                "SELECT model, sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cache_read_tokens)::bigint,
                    sum(reasoning_tokens)::bigint, sum(total_tokens)::bigint, sum(requests)::bigint
                 FROM runs WHERE experiment_id = ? GROUP BY model ORDER BY model"
            ))
            .bind(id)
            .fetch_all(pool)
            .await?
        });
        let n = |v: i64| v.max(0) as u64;
        Ok(rows
            .into_iter()
            .map(|(model, input, output, cache, reasoning, total, requests)| {
                let usage = Usage {
                    input_tokens: n(input),
                    output_tokens: n(output),
                    cache_read_tokens: n(cache),
                    reasoning_tokens: n(reasoning),
                    total_tokens: n(total),
                    requests: n(requests),
                };
                (model, usage)
            })
            .collect())
    }

    async fn score_values(&self, id: &str, limit: u32) -> Result<Vec<ValueCount>> {
        let rows: Vec<(String, String, Option<f64>, i64)> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                "SELECT s.name, s.value, s.number, count(*) FROM scores s JOIN runs r ON r.id = s.run_id
                 WHERE r.experiment_id = ? AND s.source = 'scorer' AND s.step_index IS NULL AND s.call_id IS NULL
                 GROUP BY s.name, s.value, s.number ORDER BY s.name, s.value LIMIT ?"
            ))
            .bind(id)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|(name, value, number, count)| ValueCount {
                name,
                value,
                number,
                count: u32::try_from(count).unwrap_or(u32::MAX),
            })
            .collect())
    }

    async fn item_means(&self, id: &str) -> Result<Vec<(String, String, Option<f64>)>> {
        with_db!(self.db(), |pool, D| {
            let rows: Vec<(String, String, Option<f64>)> = sqlx::query_as(sql!(
                D,
                "SELECT r.experiment_item_id, r.id, avg(s.number) FROM runs r
                 LEFT JOIN scores s ON s.run_id = r.id AND s.source = 'scorer' AND s.number IS NOT NULL
                    AND s.step_index IS NULL AND s.call_id IS NULL
                 WHERE r.experiment_id = ? GROUP BY r.experiment_item_id, r.id ORDER BY r.experiment_item_id"
            ))
            .bind(id)
            .fetch_all(pool)
            .await?;
            Ok(rows)
        })
    }
}
