//! [`StepStore`] for every backend: the transcript's reads, and where a
//! turn's writes and a run's trace reads go.
//!
//! The hot paths are each backend's own: a step's writes go through
//! SQLite's write thread (group commit, see `sqlite::commit`) and, on
//! PostgreSQL, through one fenced statement (see `postgres::fenced`); a page
//! of steps with their calls is read by SQLite's trace reader (rusqlite on
//! the blocking pool, see `sqlite::read`) and by PostgreSQL in one
//! `REPEATABLE READ` snapshot (see `postgres::list`).

use async_trait::async_trait;

use super::columns::{CALL_COLUMNS, MESSAGE_COLUMNS};
use super::{sql, with_db, Db, Dialect, SqlStore};
use crate::error::Result;
use crate::model::{Message, Run, RunStatus, Step, StepOutline, ToolCall};
use crate::store::rows::{MessageRow, ToolCallRow};
use crate::store::{RecordedRequests, RunPatch, RunPosition, StepStore, StepWrite};

#[async_trait]
impl<S: SqlStore> StepStore for S {
    async fn save_step(&self, w: StepWrite<'_>) -> Result<()> {
        match self.db() {
            Db::Sqlite(store) => store.save_step_on_thread(w).await,
            #[cfg(feature = "postgres")]
            Db::Postgres(store) => store.save_step_fenced(w).await,
        }
    }

    async fn finish_step(&self, w: StepWrite<'_>, from: RunStatus, to: RunStatus, patch: RunPatch) -> Result<Run> {
        from.check(to)?;
        let id = w.step.run_id.clone();
        // Refused (the run was not in `from`): the step is rolled back with it.
        let moved = match self.db() {
            Db::Sqlite(store) => store.finish_step_on_thread(w, from, to, patch).await?,
            #[cfg(feature = "postgres")]
            Db::Postgres(store) => store.finish_step_fenced(w, from, to, patch).await?,
        };
        match moved {
            Some(run) => Ok(run),
            None => Err(super::transition_refused(self, &id, from, to).await),
        }
    }

    async fn save_tool_call(&self, call: &ToolCall, pos: usize) -> Result<()> {
        match self.db() {
            Db::Sqlite(store) => store.save_tool_call_on_thread(call, pos).await,
            #[cfg(feature = "postgres")]
            Db::Postgres(store) => store.save_tool_call_fenced(call, pos).await,
        }
    }

    async fn steps(&self, run_id: &str) -> Result<Vec<Step>> {
        self.steps_page(run_id, 0, u32::MAX).await
    }

    async fn steps_page(&self, run_id: &str, from: u32, limit: u32) -> Result<Vec<Step>> {
        match self.db() {
            Db::Sqlite(store) => store.steps_page_read(run_id, from, limit).await,
            #[cfg(feature = "postgres")]
            Db::Postgres(store) => store.steps_page_snapshot(run_id, from, limit).await,
        }
    }

    async fn step_outline(&self, run_id: &str) -> Result<Vec<StepOutline>> {
        match self.db() {
            Db::Sqlite(store) => store.step_outline_read(run_id).await,
            #[cfg(feature = "postgres")]
            Db::Postgres(store) => store.step_outline_snapshot(run_id).await,
        }
    }

    async fn last_step_index(&self, run_id: &str) -> Result<Option<u32>> {
        let idx: Option<i64> = with_db!(self.db(), |pool, D| {
            sqlx::query_scalar(sql!(D, "SELECT max(idx) FROM steps WHERE run_id = ?"))
                .bind(run_id)
                .fetch_one(pool)
                .await?
        });
        Ok(idx.and_then(|i| u32::try_from(i).ok()))
    }

    /// Three short backward walks of the `(run_id, idx)` key, each stopping
    /// at the first step whose request has the key.
    async fn recorded_requests(&self, run_id: &str, index: u32) -> Result<RecordedRequests> {
        let texts: (Option<String>, Option<String>, Option<String>) = with_db!(self.db(), |pool, D| {
            let latest = |key: &str| {
                format!(
                    "(SELECT request::text FROM steps WHERE run_id = ?1 AND idx <= ?2 AND {} IS NOT NULL
                      ORDER BY idx DESC LIMIT 1)",
                    D::json_text("request", &[key])
                )
            };
            sqlx::query_as(sql!(
                D,
                format!("SELECT {}, {}, {}", latest("model"), latest("tools"), latest("system_prompt"))
            ))
            .bind(run_id)
            .bind(i64::from(index))
            .fetch_one(pool)
            .await?
        });
        let decode = |text: Option<String>| text.and_then(|t| serde_json::from_str(&t).ok());
        Ok(RecordedRequests { model: decode(texts.0), tools: decode(texts.1), system_prompt: decode(texts.2) })
    }

    async fn tool_call(&self, run_id: &str, call_id: &str) -> Result<Option<ToolCall>> {
        let row: Option<ToolCallRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                format!(
                    "SELECT {CALL_COLUMNS} FROM tool_calls WHERE run_id = ? AND id = ?
                     ORDER BY step_idx DESC, pos DESC LIMIT 1"
                )
            ))
            .bind(run_id)
            .bind(call_id)
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(ToolCall::from))
    }

    async fn messages(&self, run_id: &str) -> Result<Vec<Message>> {
        self.messages_page(run_id, 0, u32::MAX).await
    }

    /// Up to `limit` messages of a run with `seq >= from`, through the
    /// `(run_id, seq)` key.
    async fn messages_page(&self, run_id: &str, from: u64, limit: u32) -> Result<Vec<Message>> {
        let rows: Vec<MessageRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE run_id = ? AND seq >= ? ORDER BY seq LIMIT ?")
            ))
            .bind(run_id)
            .bind(i64::try_from(from).unwrap_or(i64::MAX))
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().filter_map(MessageRow::into_message).collect())
    }

    /// The last `n` messages of a run in order, and how many it has: two
    /// short walks of the `(run_id, seq)` key in one snapshot, whatever the
    /// transcript's length.
    async fn messages_tail(&self, run_id: &str, n: u32) -> Result<(Vec<Message>, u64)> {
        let (mut rows, total): (Vec<MessageRow>, i64) = with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_SNAPSHOT).await?;
            let rows = sqlx::query_as(sql!(
                D,
                format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE run_id = ? ORDER BY seq DESC LIMIT ?")
            ))
            .bind(run_id)
            .bind(i64::from(n))
            .fetch_all(&mut *tx)
            .await?;
            let total = sqlx::query_scalar(sql!(D, "SELECT count(*) FROM messages WHERE run_id = ?"))
                .bind(run_id)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            (rows, total)
        });
        rows.reverse();
        Ok((rows.into_iter().filter_map(MessageRow::into_message).collect(), total as u64))
    }

    async fn last_message_seq(&self, run_id: &str) -> Result<Option<u64>> {
        let seq: Option<i64> = with_db!(self.db(), |pool, D| {
            sqlx::query_scalar(sql!(D, "SELECT max(seq) FROM messages WHERE run_id = ?"))
                .bind(run_id)
                .fetch_one(pool)
                .await?
        });
        Ok(seq.map(|s| u64::try_from(s).unwrap_or(0)))
    }

    async fn position(&self, run_id: &str) -> Result<RunPosition> {
        let (step, seq, agents): (Option<i64>, Option<i64>, i64) = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                "SELECT (SELECT max(idx) FROM steps WHERE run_id = ?1), (SELECT max(seq) FROM messages WHERE run_id = ?1),
                    (SELECT count(*) FROM messages WHERE run_id = ?1 AND type = 'agent')"
            ))
            .bind(run_id)
            .fetch_one(pool)
            .await?
        });
        Ok(RunPosition {
            last_step: step.and_then(|i| u32::try_from(i).ok()),
            last_seq: seq.map(|s| u64::try_from(s).unwrap_or(0)),
            agent_messages: u64::try_from(agents).unwrap_or(0),
        })
    }

    async fn count_messages(&self, run_id: &str, kind: &str) -> Result<u64> {
        let n: i64 = with_db!(self.db(), |pool, D| {
            sqlx::query_scalar(sql!(D, "SELECT count(*) FROM messages WHERE run_id = ? AND type = ?"))
                .bind(run_id)
                .bind(kind)
                .fetch_one(pool)
                .await?
        });
        Ok(u64::try_from(n).unwrap_or(0))
    }
}
