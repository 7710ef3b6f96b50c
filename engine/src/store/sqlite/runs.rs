//! [`RunStore`] on SQLite: creating runs (through the write thread, with
//! their first messages or whole histories, several at once for a batch),
//! reading and listing them, status changes, families, trees, comparison
//! groups, blobs and emails.

use async_trait::async_trait;

use super::hot::{self, Transition};
use super::{conversation, list, SqliteStore};
use crate::error::Result;
use crate::model::{Email, FamilyMember, Message, Run, RunFilter, RunPage, RunStatus, Step};
use crate::store::rows::{EmailRow, RunRow};
use crate::store::{
    to_ms, ApprovalStore, Blob, HistoryInsert, HistoryWrite, RunHead, RunOverrides, RunPatch, RunStore,
};

#[async_trait]
impl RunStore for SqliteStore {
    async fn insert_run(&self, run: &Run, first: &Message) -> Result<bool> {
        self.insert_run_with_history(run, std::slice::from_ref(first), &[]).await
    }

    async fn insert_run_with_history(&self, run: &Run, messages: &[Message], steps: &[Step]) -> Result<bool> {
        let new = hot::NewRun::new(run, messages, steps);
        Ok(self.committer.write(move |c| hot::insert_run(c, &new)).await?.is_some())
    }

    async fn insert_runs(&self, runs: &[(Run, Vec<Message>)]) -> Result<bool> {
        let new: Vec<hot::NewRun> = runs.iter().map(|(run, messages)| hot::NewRun::new(run, messages, &[])).collect();
        Ok(self.committer.write(move |c| hot::insert_runs(c, &new)).await?.is_some())
    }

    async fn insert_run_with_blobs(&self, write: HistoryWrite<'_>) -> Result<HistoryInsert> {
        self::conversation::insert_run_with_blobs(&self.pool, write).await
    }

    async fn get_run(&self, id: &str) -> Result<Option<Run>> {
        let row =
            sqlx::query_as::<_, RunRow>("SELECT * FROM runs WHERE id = ?").bind(id).fetch_optional(&self.pool).await?;
        let Some(mut run) = row.map(Run::from) else { return Ok(None) };
        if run.status == RunStatus::Paused {
            run.interruptions = self.interruptions(Some(id), None).await?;
        }
        Ok(Some(run))
    }

    async fn run_to_drive(&self, id: &str) -> Result<Option<std::result::Result<Run, String>>> {
        let row =
            sqlx::query_as::<_, RunRow>("SELECT * FROM runs WHERE id = ?").bind(id).fetch_optional(&self.pool).await;
        match row {
            Ok(row) => Ok(row.map(RunRow::decode)),
            // A column of the wrong type: the row exists but is not a run.
            Err(e @ (sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_))) => Ok(Some(Err(e.to_string()))),
            Err(e) => Err(e.into()),
        }
    }

    async fn run_head(&self, id: &str) -> Result<Option<RunHead>> {
        let row: Option<(String, String, i64, String, Option<String>)> =
            sqlx::query_as("SELECT status, model, step_count, project, source FROM runs WHERE id = ?")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|(status, model, steps, project, source)| RunHead {
            status: RunStatus::parse(&status).unwrap_or(RunStatus::Failed),
            model,
            step_count: steps as u32,
            project,
            source: source.and_then(|s| serde_json::from_str(&s).ok()),
        }))
    }

    async fn list_runs(&self, f: &RunFilter) -> Result<RunPage> {
        self::list::list_runs(&self.pool, f).await
    }

    async fn run_ids_with_status(&self, status: RunStatus) -> Result<Vec<String>> {
        let ids = sqlx::query_scalar::<_, String>(
            "SELECT id FROM runs WHERE status = ? AND source IS NULL ORDER BY created_at",
        )
        .bind(status.as_str())
        .fetch_all(&self.pool)
        .await?;
        Ok(ids)
    }

    async fn unannounced_finishes(&self) -> Result<Vec<String>> {
        let ids = sqlx::query_scalar::<_, String>("SELECT id FROM runs WHERE finish_unannounced = 1")
            .fetch_all(&self.pool)
            .await?;
        Ok(ids)
    }

    async fn transition(&self, id: &str, from: RunStatus, to: RunStatus, patch: RunPatch) -> Result<Run> {
        from.check(to)?;
        let t = Transition::new(id, from, to, patch);
        match self.committer.write(move |c| hot::transition(c, &t)).await? {
            Some(row) => Ok(row.into()),
            None => Err(self.transition_refused(id, from, to).await),
        }
    }

    async fn follow_up(&self, run_id: &str, text: &str, o: &RunOverrides) -> Result<Option<(Run, Message)>> {
        self::conversation::follow_up(&self.pool, run_id, text, o).await
    }

    async fn family(&self, run_id: &str) -> Result<Vec<FamilyMember>> {
        self::conversation::family(&self.pool, run_id).await
    }

    async fn children(&self, id: &str) -> Result<Vec<Run>> {
        let rows = sqlx::query_as::<_, RunRow>(
            "SELECT * FROM runs WHERE parent_run_id = ? AND parent_call_id IS NOT NULL ORDER BY created_at, id",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(Run::from).collect())
    }

    async fn group_runs(&self, group_id: &str, limit: u32) -> Result<Vec<Run>> {
        self::list::group_runs(&self.pool, group_id, limit).await
    }

    async fn tree_sums(&self, id: &str) -> Result<Vec<(String, u64, crate::model::Usage)>> {
        type Row = (String, i64, i64, i64, i64, i64, i64, i64);
        let rows: Vec<Row> = sqlx::query_as(
            "WITH RECURSIVE tree(id) AS (
                SELECT ?1 UNION ALL
                SELECT r.id FROM runs r JOIN tree t ON r.parent_run_id = t.id WHERE r.parent_call_id IS NOT NULL)
             SELECT model, count(*), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens),
                sum(reasoning_tokens), sum(total_tokens), sum(requests)
             FROM runs WHERE id IN tree GROUP BY model",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        let n = |v: i64| v.max(0) as u64;
        Ok(rows
            .into_iter()
            .map(|(model, runs, i, o, c, r, t, q)| {
                let usage = crate::model::Usage {
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
        self::conversation::insert_blob(&self.pool, blob).await
    }

    async fn get_blob(&self, id: &str) -> Result<Option<Blob>> {
        self::conversation::get_blob(&self.pool, id).await
    }

    async fn run_blobs(&self, run_id: &str) -> Result<Vec<Blob>> {
        self::conversation::run_blobs(&self.pool, run_id).await
    }

    async fn insert_email(&self, e: &Email) -> Result<()> {
        let e = e.clone();
        let write = move |c: &rusqlite::Connection| {
            let mut stmt = c.prepare_cached(
                "INSERT INTO outbox (id, run_id, recipient, subject, body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            )?;
            stmt.execute(rusqlite::params![e.id, e.run_id, e.to, e.subject, e.body, to_ms(e.created_at)])
                .map(|_| Some(()))
        };
        self.committer.write(write).await?;
        Ok(())
    }

    async fn email(&self, id: &str) -> Result<Option<Email>> {
        let row = sqlx::query_as::<_, EmailRow>("SELECT * FROM outbox WHERE id = ?1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(Email::from))
    }

    async fn outbox(&self, limit: u32, project: Option<&str>) -> Result<Vec<Email>> {
        let rows = sqlx::query_as::<_, EmailRow>(
            "SELECT outbox.* FROM outbox
             WHERE ?1 IS NULL OR run_id IN (SELECT id FROM runs WHERE project = ?1)
             ORDER BY created_at DESC, id DESC LIMIT ?2",
        )
        .bind(project)
        .bind(limit.clamp(1, 1000) as i64)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(Email::from).collect())
    }
}
