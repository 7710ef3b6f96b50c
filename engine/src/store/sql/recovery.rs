//! Recovery's bulk reads for every backend (see `store::recovery`).
//!
//! The calls awaiting a decision are walked by `(run_id, step_idx, pos)`,
//! the key of `tool_calls` (and, in SQLite, of its partial index of
//! awaiting calls); paused runs by `(created_at, id)` along
//! `runs_by_status`. A run's approval policy is JSON that may be damaged
//! (SQLite keeps it as text): its timeout is read with
//! [`Dialect::json_number`], NULL for anything but a number, so one
//! damaged policy never fails the whole query.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{FromRow, Row};

use super::columns::RUN_COLUMNS;
use super::{sql, with_db, Dialect, SqlStore};
use crate::error::Result;
use crate::store::recovery::{
    deadline_of, deadline_page, CallCursor, CallDeadline, DeadlineRow, RecoveryStore, RunCursor, Undecodable,
};
use crate::store::rows::RunRow;
use crate::store::to_ms;

#[async_trait]
impl<S: SqlStore> RecoveryStore for S {
    async fn call_deadlines(
        &self,
        after: Option<&CallCursor>,
        limit: u32,
    ) -> Result<(Vec<CallDeadline>, Option<CallCursor>)> {
        let start = CallCursor { run_id: String::new(), step_idx: i64::MIN, pos: i64::MIN };
        let after = after.unwrap_or(&start);
        // A page of the awaiting calls' key first (one range of the partial
        // index, in order), then their runs by primary key: the page costs
        // the same wherever it starts. Calls of runs that are not paused or
        // have no timeout are dropped from the page, not read past.
        let rows: Vec<DeadlineRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                "WITH page AS (
                 SELECT run_id, step_idx, pos, id, requested_at FROM tool_calls
                 WHERE status = 'awaiting_approval' AND (run_id, step_idx, pos) > (?1, ?2, ?3)
                 ORDER BY run_id, step_idx, pos
                 LIMIT ?4)
             SELECT p.run_id, p.step_idx, p.pos, p.id, p.requested_at, r.status, r.approval::text
             FROM page p LEFT JOIN runs r ON r.id = p.run_id
             ORDER BY p.run_id, p.step_idx, p.pos"
            ))
            .bind(&after.run_id)
            .bind(after.step_idx)
            .bind(after.pos)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        });
        Ok(deadline_page(rows, limit))
    }

    async fn paused_runs_awaiting_nothing(&self) -> Result<Vec<String>> {
        // The paused runs with no awaiting call are found from indexes alone
        // (no run row is read for the million that have one), then checked
        // for a source.
        let ids = with_db!(self.db(), |pool, D| {
            sqlx::query_scalar(sql!(
                D,
                "SELECT r.id FROM runs r
             WHERE r.id IN (SELECT p.id FROM runs p
                            WHERE p.status = 'paused'
                              AND NOT EXISTS (SELECT 1 FROM tool_calls tc
                                              WHERE tc.run_id = p.id AND tc.status = 'awaiting_approval'))
               AND r.source IS NULL
             ORDER BY r.created_at, r.id"
            ))
            .fetch_all(pool)
            .await?
        });
        Ok(ids)
    }

    async fn undecodable_paused_runs(
        &self,
        after: Option<&RunCursor>,
        limit: u32,
    ) -> Result<(Vec<Undecodable>, Option<RunCursor>)> {
        let start = RunCursor { created_at_ms: i64::MIN, id: String::new() };
        let after = after.unwrap_or(&start);
        with_db!(self.db(), |pool, D| {
            let rows = sqlx::query(sql!(
                D,
                format!(
                    "SELECT {RUN_COLUMNS} FROM runs
                     WHERE status = 'paused' AND source IS NULL AND (created_at, id) > (?1, ?2)
                     ORDER BY created_at, id
                     LIMIT ?3"
                )
            ))
            .bind(after.created_at_ms)
            .bind(&after.id)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?;
            let full = rows.len() as u64 == u64::from(limit);
            let mut bad = Vec::new();
            let mut next = None;
            for row in &rows {
                let id: String = row.try_get("id")?;
                // Each row is decoded on its own, so one damaged run (a
                // column of the wrong type included) does not hide the others.
                let problem = match RunRow::from_row(row) {
                    Ok(run) => run.decode().err(),
                    Err(e) => Some(e.to_string()),
                };
                match row.try_get::<i64, _>("created_at") {
                    Ok(created_at_ms) => next = Some(RunCursor { created_at_ms, id: id.clone() }),
                    // Not a time: the walk cannot go on past it (it sorts last).
                    Err(_) => next = None,
                }
                if let Some(problem) = problem {
                    bad.push(Undecodable { run_id: id, problem });
                }
            }
            Ok((bad, next.filter(|_| full)))
        })
    }

    async fn overdue_calls(&self, now: DateTime<Utc>, limit: u32) -> Result<Vec<(String, String)>> {
        let rows: Vec<(String, String, Option<i64>, String)> = with_db!(self.db(), |pool, D| {
            // The run's approval timeout in seconds (NULL without one).
            let timeout = D::json_number("r.approval", "timeout_s");
            sqlx::query_as(sql!(
                D,
                format!(
                    "SELECT tc.run_id, tc.id, tc.requested_at, r.approval::text
                     FROM tool_calls tc JOIN runs r ON r.id = tc.run_id
                     WHERE tc.status = 'awaiting_approval' AND r.status = 'paused' AND {timeout} IS NOT NULL
                       AND coalesce(tc.requested_at, 0) + {timeout} * 1000 <= ?1
                     LIMIT ?2"
                )
            ))
            .bind(to_ms(now))
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .filter(|(_, _, at, approval)| deadline_of(approval, at.unwrap_or_default()).is_some_and(|d| d <= now))
            .map(|(run, call, ..)| (run, call))
            .collect())
    }
}
