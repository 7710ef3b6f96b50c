//! [`EvaluatorStore`] for every backend: the `evaluators` table, and the
//! runs that ended after a cursor, read through `runs_by_project_finished`
//! (an index range, whatever the table's size). A project's inserts take
//! turns ([`Dialect::serialize`]) so its cap holds under a race.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::columns::RUN_COLUMNS;
use super::{capped_named_room, sql, with_db, Dialect, SqlStore};
use crate::error::Result;
use crate::model::{Actor, Evaluator, EvaluatorTarget, NamedScorer, Run};
use crate::store::evaluators::{CappedInsert, EvaluatorCursor, EvaluatorStore, WatchingEvaluator};
use crate::store::rows::RunRow;
use crate::store::{from_ms, json_text, to_ms};

const COLUMNS: &str = "id, project, name, spec, enabled, cursor_at, cursor_id, runs_seen, runs_scored, \
    created_by_id, created_by, created_at, updated_at";

/// The `spec` column: what an evaluator watches and how it scores.
#[derive(Serialize, Deserialize, Default)]
struct Spec {
    target: EvaluatorTarget,
    sample_percent: u8,
    scorers: Vec<NamedScorer>,
}

#[derive(sqlx::FromRow)]
struct Row {
    id: String,
    project: String,
    name: String,
    spec: String,
    enabled: i64,
    cursor_at: i64,
    cursor_id: String,
    runs_seen: i64,
    runs_scored: i64,
    created_by_id: String,
    created_by: String,
    created_at: i64,
    updated_at: i64,
}

impl From<Row> for WatchingEvaluator {
    fn from(r: Row) -> WatchingEvaluator {
        // A row this store wrote always decodes; a damaged one scores nothing.
        let spec: Spec = serde_json::from_str(&r.spec).unwrap_or_default();
        WatchingEvaluator {
            project: r.project,
            cursor: EvaluatorCursor { at_ms: r.cursor_at, run_id: r.cursor_id },
            evaluator: Evaluator {
                id: r.id,
                name: r.name,
                target: spec.target,
                sample_percent: spec.sample_percent.min(100),
                scorers: spec.scorers,
                enabled: r.enabled != 0,
                runs_seen: u64::try_from(r.runs_seen).unwrap_or(0),
                runs_scored: u64::try_from(r.runs_scored).unwrap_or(0),
                created_by: Actor { id: r.created_by_id, name: r.created_by },
                created_at: from_ms(r.created_at),
                updated_at: from_ms(r.updated_at),
            },
        }
    }
}

fn spec_of(e: &Evaluator) -> String {
    json_text(&Spec { target: e.target.clone(), sample_percent: e.sample_percent, scorers: e.scorers.clone() })
}

#[async_trait]
impl<S: SqlStore> EvaluatorStore for S {
    async fn insert_evaluator(
        &self,
        project: &str,
        e: &Evaluator,
        cursor: &EvaluatorCursor,
        max: u32,
    ) -> Result<CappedInsert> {
        with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            D::serialize(&mut tx, &format!("runlens.evaluators:{project}")).await?;
            if let Some(why) = capped_named_room!(tx, D, "evaluators", project, &e.name, max) {
                return Ok(why);
            }
            sqlx::query(sql!(
                D,
                "INSERT INTO evaluators (id, project, name, spec, enabled, cursor_at, cursor_id, runs_seen,
                    runs_scored, created_by_id, created_by, created_at, updated_at)
                 VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, ?, ?)"
            ))
            .bind(&e.id)
            .bind(project)
            .bind(&e.name)
            .bind(spec_of(e))
            .bind(i64::from(e.enabled))
            .bind(cursor.at_ms)
            .bind(&cursor.run_id)
            .bind(&e.created_by.id)
            .bind(&e.created_by.name)
            .bind(to_ms(e.created_at))
            .bind(to_ms(e.updated_at))
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(CappedInsert::Kept)
        })
    }

    async fn evaluator(&self, project: &str, id: &str) -> Result<Option<Evaluator>> {
        with_db!(self.db(), |pool, D| {
            let row = sqlx::query_as::<_, Row>(sql!(
                D,
                format!("SELECT {COLUMNS} FROM evaluators WHERE id = ? AND project = ?")
            ))
            .bind(id)
            .bind(project)
            .fetch_optional(pool)
            .await?;
            Ok(row.map(|r| WatchingEvaluator::from(r).evaluator))
        })
    }

    async fn evaluators(&self, project: &str, limit: u32) -> Result<Vec<Evaluator>> {
        with_db!(self.db(), |pool, D| {
            let rows = sqlx::query_as::<_, Row>(sql!(
                D,
                format!("SELECT {COLUMNS} FROM evaluators WHERE project = ? ORDER BY name, id LIMIT ?")
            ))
            .bind(project)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?;
            Ok(rows.into_iter().map(|r| WatchingEvaluator::from(r).evaluator).collect())
        })
    }

    async fn update_evaluator(
        &self,
        project: &str,
        e: &Evaluator,
        cursor: Option<&EvaluatorCursor>,
        at: DateTime<Utc>,
    ) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let done = sqlx::query(sql!(
                D,
                "UPDATE evaluators SET name = ?, spec = ?, enabled = ?, updated_at = ?,
                    cursor_at = coalesce(?, cursor_at), cursor_id = coalesce(?, cursor_id)
                 WHERE id = ? AND project = ?"
            ))
            .bind(&e.name)
            .bind(spec_of(e))
            .bind(i64::from(e.enabled))
            .bind(to_ms(at))
            .bind(cursor.map(|c| c.at_ms))
            .bind(cursor.map(|c| c.run_id.clone()))
            .bind(&e.id)
            .bind(project)
            .execute(pool)
            .await?;
            Ok(done.rows_affected() > 0)
        })
    }

    async fn delete_evaluator(&self, project: &str, id: &str) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let done = sqlx::query(sql!(D, "DELETE FROM evaluators WHERE id = ? AND project = ?"))
                .bind(id)
                .bind(project)
                .execute(pool)
                .await?;
            Ok(done.rows_affected() > 0)
        })
    }

    async fn enabled_evaluators(&self) -> Result<Vec<WatchingEvaluator>> {
        with_db!(self.db(), |pool, D| {
            let rows = sqlx::query_as::<_, Row>(sql!(
                D,
                format!("SELECT {COLUMNS} FROM evaluators WHERE enabled = 1 ORDER BY id")
            ))
            .fetch_all(pool)
            .await?;
            Ok(rows.into_iter().map(WatchingEvaluator::from).collect())
        })
    }

    async fn advance_evaluator(
        &self,
        id: &str,
        from: &EvaluatorCursor,
        to: &EvaluatorCursor,
        seen: u64,
        scored: u64,
    ) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let done = sqlx::query(sql!(
                D,
                "UPDATE evaluators SET cursor_at = ?, cursor_id = ?, runs_seen = runs_seen + ?,
                    runs_scored = runs_scored + ?
                 WHERE id = ? AND cursor_at = ? AND cursor_id = ?"
            ))
            .bind(to.at_ms)
            .bind(&to.run_id)
            .bind(i64::try_from(seen).unwrap_or(i64::MAX))
            .bind(i64::try_from(scored).unwrap_or(i64::MAX))
            .bind(id)
            .bind(from.at_ms)
            .bind(&from.run_id)
            .execute(pool)
            .await?;
            Ok(done.rows_affected() > 0)
        })
    }

    async fn runs_ended_after(
        &self,
        project: &str,
        after: &EvaluatorCursor,
        until_ms: i64,
        limit: u32,
    ) -> Result<Vec<Run>> {
        let rows: Vec<RunRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                format!(
                    "SELECT {RUN_COLUMNS} FROM runs
                     WHERE project = ? AND finished_at IS NOT NULL AND (finished_at, id) > (?, ?)
                        AND finished_at <= ?
                     ORDER BY finished_at, id LIMIT ?"
                )
            ))
            .bind(project)
            .bind(after.at_ms)
            .bind(&after.run_id)
            .bind(until_ms)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(Run::from).collect())
    }
}
