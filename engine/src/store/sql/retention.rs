//! [`RetentionStore`] for every backend: a project's policy on its row, and
//! the batches that delete the runs it no longer keeps.
//!
//! A batch first reads which runs to delete (the oldest finished root runs
//! past the policy, with their child runs), then deletes them in one
//! transaction whose first statement is the runs' own `DELETE … RETURNING`
//! guarded by their status: a run reopened meanwhile (a follow-up) is kept,
//! and only the rows of the runs that statement deleted go next. The run
//! text index goes with its runs (its triggers). Emails sent, webhook
//! deliveries and the audit log are kept: they record what happened, not the
//! run.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;

use super::{sql, with_db, Dialect, SqlStore};
use crate::error::Result;
use crate::model::Retention;
use crate::store::{to_ms, RetentionStore};

/// The statuses of a run that retention may delete.
const FINISHED: &str = "('done', 'failed', 'cancelled')";

/// The tables holding a run's rows by `run_id`, deleted with it.
const RUN_ROWS: [&str; 10] = [
    "run_tags",
    "scores",
    "steps",
    "tool_calls",
    "messages",
    "approval_decisions",
    "blobs",
    "run_events",
    "grants",
    "pending_calls",
];

const DAY_MS: i64 = 86_400_000;
/// How long after its last change a finished run is left alone.
const GRACE_MS: i64 = 60_000;

#[async_trait]
impl<S: SqlStore> RetentionStore for S {
    async fn retention(&self, project: &str) -> Result<Retention> {
        let row: Option<(Option<i64>, Option<i64>)> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(D, "SELECT retention_days, retention_max_runs FROM projects WHERE name = ?"))
                .bind(project)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.map(policy).unwrap_or_default())
    }

    async fn set_retention(&self, project: &str, p: &Retention) -> Result<bool> {
        let n = with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(D, "UPDATE projects SET retention_days = ?, retention_max_runs = ? WHERE name = ?"))
                .bind(p.max_age_days.map(i64::from))
                .bind(p.max_runs.map(|n| n as i64))
                .bind(project)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(n == 1)
    }

    async fn retained_projects(&self) -> Result<Vec<(String, Retention)>> {
        let rows: Vec<(String, Option<i64>, Option<i64>)> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                "SELECT name, retention_days, retention_max_runs FROM projects
                 WHERE retention_days IS NOT NULL OR retention_max_runs IS NOT NULL ORDER BY name"
            ))
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(|(name, days, runs)| (name, policy((days, runs)))).collect())
    }

    async fn prune_runs(&self, project: &str, p: &Retention, now: DateTime<Utc>, batch: u32) -> Result<Vec<String>> {
        if !p.is_set() {
            return Ok(Vec::new());
        }
        let cutoff = p.max_age_days.map(|d| to_ms(now) - i64::from(d) * DAY_MS);
        with_db!(self.db(), |pool, D| {
            // The newest root run past the count, if the count is exceeded.
            let past_count: Option<(i64, String)> = match p.max_runs {
                Some(keep) => {
                    sqlx::query_as(sql!(
                        D,
                        "SELECT created_at, id FROM runs WHERE project = ? AND parent_call_id IS NULL
                     ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET ?"
                    ))
                    .bind(project)
                    .bind(keep.min(i64::MAX as u64) as i64)
                    .fetch_optional(pool)
                    .await?
                }
                None => None,
            };
            if cutoff.is_none() && past_count.is_none() {
                return Ok(Vec::new());
            }
            let mut q = QueryBuilder::<<D as Dialect>::DB>::new(format!(
                "SELECT id FROM runs WHERE parent_call_id IS NULL AND status IN {FINISHED} AND project = "
            ));
            // A run finished within the last minute may still have events on
            // their way to the store: it waits for the next pass.
            q.push_bind(project.to_owned()).push(" AND updated_at < ").push_bind(to_ms(now) - GRACE_MS);
            q.push(" AND (FALSE");
            if let Some(cutoff) = cutoff {
                q.push(" OR created_at < ").push_bind(cutoff);
            }
            if let Some((at, id)) = past_count {
                q.push(" OR (created_at, id) <= (").push_bind(at).push(", ").push_bind(id).push(")");
            }
            // A tree with a run still going waits for it; so does a run of
            // a running experiment (its driver counts the item as run by it).
            q.push(format!(
                ") AND NOT EXISTS (SELECT 1 FROM runs c WHERE c.root_run_id = runs.id
                   AND c.parent_call_id IS NOT NULL AND c.status NOT IN {FINISHED})
                 AND NOT EXISTS (SELECT 1 FROM experiments e WHERE e.id = runs.experiment_id
                   AND e.status = 'running')
                 ORDER BY created_at, id LIMIT "
            ))
            .push_bind(i64::from(batch));
            let roots: Vec<String> = q.build_query_scalar().fetch_all(pool).await?;
            if roots.is_empty() {
                return Ok(Vec::new());
            }
            let tree: Vec<String> = sqlx::query_scalar(sql!(
                D,
                format!(
                    "SELECT id FROM runs WHERE id {in_list} UNION
                     SELECT id FROM runs WHERE parent_call_id IS NOT NULL AND root_run_id {in_list}",
                    in_list = D::IN_LIST
                )
            ))
            .bind(D::list(&roots))
            .bind(D::list(&roots))
            .fetch_all(pool)
            .await?;

            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            let deleted: Vec<(String, Option<String>)> = sqlx::query_as(sql!(
                D,
                format!(
                    "DELETE FROM runs WHERE id {} AND status IN {FINISHED} RETURNING id, {}",
                    D::IN_LIST,
                    D::json_text("source", &["trace_id"])
                )
            ))
            .bind(D::list(&tree))
            .fetch_all(&mut *tx)
            .await?;
            let ids: Vec<String> = deleted.iter().map(|(id, _)| id.clone()).collect();
            for table in RUN_ROWS {
                // One text per table (`sql!` keeps one per call site).
                let delete = D::rewrite(&format!("DELETE FROM {table} WHERE run_id {}", D::IN_LIST));
                sqlx::query(&delete).bind(D::list(&ids)).execute(&mut *tx).await?;
            }
            sqlx::query(sql!(D, format!("DELETE FROM run_trees WHERE root_run_id {}", D::IN_LIST)))
                .bind(D::list(&ids))
                .execute(&mut *tx)
                .await?;
            let traces: Vec<String> = deleted.into_iter().filter_map(|(_, trace)| trace).collect();
            if !traces.is_empty() {
                for table in ["otlp_spans", "otlp_traces"] {
                    let delete =
                        D::rewrite(&format!("DELETE FROM {table} WHERE project = ? AND trace_id {}", D::IN_LIST));
                    sqlx::query(&delete).bind(project).bind(D::list(&traces)).execute(&mut *tx).await?;
                }
            }
            tx.commit().await?;
            Ok(ids)
        })
    }
}

/// A policy from its columns (a stored value out of bounds is no limit).
fn policy((days, runs): (Option<i64>, Option<i64>)) -> Retention {
    Retention {
        max_age_days: days.and_then(|d| u32::try_from(d).ok()),
        max_runs: runs.and_then(|n| u64::try_from(n).ok()),
    }
}
