//! [`RunStore`] for every backend: creating runs, reading and listing
//! them, status changes, families, trees, comparison groups, blobs and
//! emails.
//!
//! Three writes are each backend's own path: creating runs and moving a
//! run's status go through SQLite's write thread (group commit with the
//! turns' writes, see `sqlite::commit`) and, on PostgreSQL, through a
//! transaction fenced by this server's lease on the run (see
//! `postgres::cluster`); an email, the side effect of `send_email`, is
//! written the same way.

use async_trait::async_trait;

use super::columns::RUN_COLUMNS;
use super::{conversation, sql, with_db, Db, SqlStore};
use crate::error::{EngineError, Result};
use crate::model::{Email, FamilyMember, Message, Run, RunFilter, RunPage, RunStatus, Step, Usage};
use crate::store::encode_cursor;
use crate::store::rows::{EmailRow, RunRow};
use crate::store::{ApprovalStore, Blob, HistoryInsert, HistoryWrite, RunHead, RunOverrides, RunPatch, RunStore};

/// Why a compare-and-set on a run's status changed nothing.
pub(crate) async fn transition_refused(store: &impl RunStore, id: &str, from: RunStatus, to: RunStatus) -> EngineError {
    match store.get_run(id).await {
        Err(e) => e,
        Ok(None) => EngineError::NotFound(format!("run `{id}`")),
        Ok(Some(run)) => match run.status.check(to) {
            Err(e) => e.into(),
            Ok(()) => EngineError::Conflict(format!("run `{id}` is {}, not {from} as expected", run.status)),
        },
    }
}

/// Stores runs with their histories in one transaction; `false`, with
/// nothing stored, when one of the ids exists.
async fn insert_runs<S: SqlStore>(store: &S, runs: &[(&Run, &[Message], &[Step])]) -> Result<bool> {
    match store.db() {
        Db::Sqlite(store) => store.insert_runs_on_thread(runs).await,
        #[cfg(feature = "postgres")]
        Db::Postgres(store) => store.insert_runs_in_transaction(runs).await,
    }
}

#[async_trait]
impl<S: SqlStore> RunStore for S {
    async fn insert_run(&self, run: &Run, first: &Message) -> Result<bool> {
        insert_runs(self, &[(run, std::slice::from_ref(first), &[])]).await
    }

    async fn insert_run_with_history(&self, run: &Run, messages: &[Message], steps: &[Step]) -> Result<bool> {
        insert_runs(self, &[(run, messages, steps)]).await
    }

    async fn insert_runs(&self, runs: &[(Run, Vec<Message>)]) -> Result<bool> {
        let runs: Vec<(&Run, &[Message], &[Step])> = runs.iter().map(|(r, m)| (r, m.as_slice(), &[][..])).collect();
        insert_runs(self, &runs).await
    }

    async fn insert_run_with_blobs(&self, write: HistoryWrite<'_>) -> Result<HistoryInsert> {
        conversation::insert_run_with_blobs(self.db(), write).await
    }

    async fn get_run(&self, id: &str) -> Result<Option<Run>> {
        let row: Option<RunRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(D, format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?")))
                .bind(id)
                .fetch_optional(pool)
                .await?
        });
        let Some(mut run) = row.map(Run::from) else { return Ok(None) };
        if run.status == RunStatus::Paused {
            run.interruptions = self.interruptions(Some(id), None).await?;
        }
        Ok(Some(run))
    }

    async fn run_to_drive(&self, id: &str) -> Result<Option<std::result::Result<Run, String>>> {
        let row: std::result::Result<Option<RunRow>, sqlx::Error> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(D, format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?")))
                .bind(id)
                .fetch_optional(pool)
                .await
        });
        match row {
            Ok(row) => Ok(row.map(RunRow::decode)),
            // A column of the wrong type: the row exists but is not a run.
            Err(e @ (sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_))) => Ok(Some(Err(e.to_string()))),
            Err(e) => Err(e.into()),
        }
    }

    async fn run_head(&self, id: &str) -> Result<Option<RunHead>> {
        let row: Option<(String, String, i64, String, Option<String>)> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(D, "SELECT status, model, step_count, project, source::text FROM runs WHERE id = ?"))
                .bind(id)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.map(|(status, model, steps, project, source)| RunHead {
            status: RunStatus::parse(&status).unwrap_or(RunStatus::Failed),
            model,
            step_count: steps as u32,
            project,
            source: source.and_then(|s| serde_json::from_str(&s).ok()),
        }))
    }

    async fn list_runs(&self, f: &RunFilter) -> Result<RunPage> {
        let limit = f.limit.unwrap_or(50).clamp(1, 200) as i64;
        if let Some(words) = f.search_words().map_err(EngineError::Invalid)? {
            return super::search::search_runs(self.db(), f, &words, limit as usize).await;
        }
        if f.cursor.as_deref().is_some_and(super::search::is_search_cursor) {
            // A search's cursor without the search: no page of this list follows it.
            return Ok(RunPage::default());
        }
        let rows: Vec<RunRow> = with_db!(self.db(), |pool, D| super::list_query::<D>(f, limit, "")?
            .build_query_as()
            .fetch_all(pool)
            .await?);
        let mut runs: Vec<Run> = rows.into_iter().map(Run::from).collect();
        let next_cursor = if runs.len() as i64 > limit {
            runs.truncate(limit as usize);
            runs.last().map(encode_cursor)
        } else {
            None
        };
        Ok(RunPage { runs, next_cursor, matches: Vec::new() })
    }

    async fn run_ids_with_status(&self, status: RunStatus) -> Result<Vec<String>> {
        Ok(with_db!(self.db(), |pool, D| {
            sqlx::query_scalar(sql!(D, "SELECT id FROM runs WHERE status = ? AND source IS NULL ORDER BY created_at"))
                .bind(status.as_str())
                .fetch_all(pool)
                .await?
        }))
    }

    async fn unannounced_finishes(&self) -> Result<Vec<String>> {
        Ok(with_db!(self.db(), |pool, D| {
            sqlx::query_scalar(sql!(D, "SELECT id FROM runs WHERE finish_unannounced")).fetch_all(pool).await?
        }))
    }

    async fn transition(&self, id: &str, from: RunStatus, to: RunStatus, patch: RunPatch) -> Result<Run> {
        from.check(to)?;
        let moved = match self.db() {
            Db::Sqlite(store) => store.transition_on_thread(id, from, to, patch).await?,
            #[cfg(feature = "postgres")]
            Db::Postgres(store) => store.transition_fenced(id, from, to, patch).await?,
        };
        match moved {
            Some(run) => Ok(run),
            None => Err(transition_refused(self, id, from, to).await),
        }
    }

    async fn follow_up(&self, run_id: &str, text: &str, o: &RunOverrides) -> Result<Option<(Run, Message)>> {
        conversation::follow_up(self.db(), run_id, text, o).await
    }

    async fn family(&self, run_id: &str) -> Result<Vec<FamilyMember>> {
        conversation::family(self.db(), run_id).await
    }

    async fn children(&self, id: &str) -> Result<Vec<Run>> {
        let rows: Vec<RunRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                format!(
                    "SELECT {RUN_COLUMNS} FROM runs WHERE parent_run_id = ? AND parent_call_id IS NOT NULL
                     ORDER BY created_at, id"
                )
            ))
            .bind(id)
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(Run::from).collect())
    }

    async fn group_runs(&self, group_id: &str, limit: u32) -> Result<Vec<Run>> {
        let rows: Vec<RunRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                format!("SELECT {RUN_COLUMNS} FROM runs WHERE group_id = ? ORDER BY created_at, id LIMIT ?")
            ))
            .bind(group_id)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(Run::from).collect())
    }

    async fn tree_sums(&self, id: &str) -> Result<Vec<(String, u64, Usage)>> {
        type Row = (String, i64, i64, i64, i64, i64, i64, i64);
        let rows: Vec<Row> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                "WITH RECURSIVE tree(id) AS (
                    SELECT ?::text UNION ALL
                    SELECT r.id FROM runs r JOIN tree t ON r.parent_run_id = t.id WHERE r.parent_call_id IS NOT NULL)
                 SELECT model, count(*), sum(input_tokens)::bigint, sum(output_tokens)::bigint,
                    sum(cache_read_tokens)::bigint, sum(reasoning_tokens)::bigint, sum(total_tokens)::bigint,
                    sum(requests)::bigint
                 FROM runs WHERE id IN (SELECT id FROM tree) GROUP BY model"
            ))
            .bind(id)
            .fetch_all(pool)
            .await?
        });
        let n = |v: i64| v.max(0) as u64;
        Ok(rows
            .into_iter()
            .map(|(model, runs, i, o, c, r, t, q)| {
                let usage = Usage {
                    input_tokens: n(i),
                    output_tokens: n(o),
                    cache_read_tokens: n(c),
                    reasoning_tokens: n(r),
                    total_tokens: n(t),
                    requests: n(q),
                };
                (model, n(runs), usage)
            })
            .collect())
    }

    async fn insert_blob(&self, blob: &Blob) -> Result<()> {
        conversation::insert_blob(self.db(), blob).await
    }

    async fn get_blob(&self, id: &str) -> Result<Option<Blob>> {
        conversation::get_blob(self.db(), id).await
    }

    async fn run_blobs(&self, run_id: &str) -> Result<Vec<Blob>> {
        conversation::run_blobs(self.db(), run_id).await
    }

    async fn insert_email(&self, e: &Email) -> Result<()> {
        match self.db() {
            Db::Sqlite(store) => store.insert_email_on_thread(e).await,
            #[cfg(feature = "postgres")]
            Db::Postgres(store) => store.insert_email_fenced(e).await,
        }
    }

    async fn email(&self, id: &str) -> Result<Option<Email>> {
        let row: Option<EmailRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(D, "SELECT * FROM outbox WHERE id = ?")).bind(id).fetch_optional(pool).await?
        });
        Ok(row.map(Email::from))
    }

    async fn outbox(&self, limit: u32, project: Option<&str>) -> Result<Vec<Email>> {
        let rows: Vec<EmailRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                "SELECT outbox.* FROM outbox
                 WHERE ?1::text IS NULL OR run_id IN (SELECT id FROM runs WHERE project = ?1)
                 ORDER BY created_at DESC, id DESC LIMIT ?2"
            ))
            .bind(project)
            .bind(limit.clamp(1, 1000) as i64)
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(Email::from).collect())
    }
}
