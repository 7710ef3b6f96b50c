//! The SQLite store: the embedded default, one file created and migrated on open.
//!
//! WAL mode with `synchronous = NORMAL`: a committed step survives a process
//! crash (only an OS crash can lose the last transactions), and readers never
//! block the writer. Every write transaction starts with a write, so SQLite
//! never has to upgrade a read lock (the classic source of `SQLITE_BUSY`).

mod agents;
mod approvals;
mod conversation;
mod directory;
mod events;
mod http_tools;
mod list;
mod read;
mod spans;
mod webhook_reads;
mod webhooks;
mod writes;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;

use self::read::TraceReader;
use self::writes::{insert_message, insert_run_row, transition_row, upsert_step, upsert_tool_call, write_step};
use crate::cost::ModelPrice;
use crate::error::{EngineError, Result};
use crate::events::Event;
use crate::model::{
    Email, FamilyMember, Interruption, Message, Run, RunFilter, RunPage, RunStatus, Step, StepOutline, ToolCall,
};
use crate::store::rows::{EmailRow, MessageRow, RunRow};
use crate::store::{
    to_ms, AgentStore, ApprovalStore, Blob, DecideOutcome, DecidedCall, DecisionCursor, DecisionWrite, Directory,
    EventStore, HistoryInsert, HistoryWrite, HttpToolStore, PriceStore, RunHead, RunOverrides, RunPatch, RunStore,
    StepStore, StepWrite, Store, WebhookStore,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

/// This process's claim to be the one server on a SQLite file (see
/// [`SqliteStore::lock_single_server`]); dropping it gives the claim up.
pub struct ServerLock {
    _file: std::fs::File,
}

/// A pool of connections to one SQLite database.
#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// Trace reads off the file (see `read`); `None` for an in-memory
    /// database, which only its one sqlx connection can see.
    reader: Option<TraceReader>,
}

impl SqliteStore {
    /// Opens (creating if needed) and migrates the database at `url`,
    /// e.g. `sqlite://runlens.db` or `sqlite::memory:`.
    pub async fn open(url: &str) -> Result<Self> {
        let memory = url.contains(":memory:");
        let opts = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(if memory { SqliteJournalMode::Memory } else { SqliteJournalMode::Wal })
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        // An in-memory database exists per connection, so it gets exactly one.
        let pool =
            SqlitePoolOptions::new().max_connections(if memory { 1 } else { 8 }).connect_with(opts.clone()).await?;
        MIGRATOR.run(&pool).await?;
        let reader = (!memory).then(|| TraceReader::new(opts.get_filename().to_owned()));
        Ok(Self { pool, reader })
    }

    /// Makes this process the one server on the database file at `url`
    /// (nothing for an in-memory database): an exclusive advisory lock
    /// (`flock`) on the file, held while the returned handle lives and
    /// released by the kernel when the process ends, however it ends. SQLite
    /// is a single-server store — two servers would each resume, drive and
    /// time out the other's runs — so a second server on the same file (by
    /// any path or link to it) is refused. Take it before [`SqliteStore::open`].
    ///
    /// The lock is `flock`, which SQLite's own `fcntl` locks do not see;
    /// the handle stays open for the process's life, so closing it never
    /// drops SQLite's locks on the file early.
    pub fn lock_single_server(url: &str) -> Result<Option<ServerLock>> {
        if url.contains(":memory:") {
            return Ok(None);
        }
        let opts = SqliteConnectOptions::from_str(url)?;
        let path = opts.get_filename();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| EngineError::Invalid(format!("cannot open the database file {}: {e}", path.display())))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(ServerLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Err(EngineError::Conflict(format!(
                "another runlens server is already serving the database file {}; SQLite serves one server \
                 (stop the other one, or use PostgreSQL, DATABASE_URL=postgres://…, for several servers)",
                path.display()
            ))),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(EngineError::Invalid(format!("cannot lock the database file {}: {e}", path.display())))
            }
        }
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// SQLite's query plan for the runs list with `filter` (see `list`).
    pub async fn explain_list_runs(&self, filter: &RunFilter) -> Result<Vec<String>> {
        self::list::explain_list_runs(&self.pool, filter).await
    }
}

impl Store for SqliteStore {
    fn directory(&self) -> &dyn Directory {
        self
    }

    fn agents(&self) -> &dyn AgentStore {
        self
    }

    fn webhooks(&self) -> &dyn WebhookStore {
        self
    }

    fn http_tools(&self) -> &dyn HttpToolStore {
        self
    }

    fn spans(&self) -> &dyn crate::store::SpanStore {
        self
    }
}

#[async_trait]
impl RunStore for SqliteStore {
    async fn insert_run(&self, run: &Run, first: &Message) -> Result<bool> {
        self.insert_run_with_history(run, std::slice::from_ref(first), &[]).await
    }

    async fn insert_run_with_history(&self, run: &Run, messages: &[Message], steps: &[Step]) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        if !insert_run_row(&mut tx, run).await? {
            return Ok(false);
        }
        for m in messages {
            insert_message(&mut tx, m).await?;
        }
        for step in steps {
            upsert_step(&mut tx, step).await?;
            for (pos, c) in step.tool_calls.iter().enumerate() {
                upsert_tool_call(&mut tx, c, pos).await?;
            }
        }
        tx.commit().await?;
        Ok(true)
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
        let mut conn = self.pool.acquire().await?;
        match transition_row(&mut conn, id, from, to, patch).await? {
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
        sqlx::query("INSERT INTO outbox (id, run_id, recipient, subject, body, created_at) VALUES (?, ?, ?, ?, ?, ?)")
            .bind(&e.id)
            .bind(&e.run_id)
            .bind(&e.to)
            .bind(&e.subject)
            .bind(&e.body)
            .bind(to_ms(e.created_at))
            .execute(&self.pool)
            .await?;
        Ok(())
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

#[async_trait]
impl StepStore for SqliteStore {
    async fn save_step(&self, w: StepWrite<'_>) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        write_step(&mut tx, &w).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn finish_step(&self, w: StepWrite<'_>, from: RunStatus, to: RunStatus, patch: RunPatch) -> Result<Run> {
        from.check(to)?;
        let id = w.step.run_id.clone();
        let mut tx = self.pool.begin().await?;
        write_step(&mut tx, &w).await?;
        match transition_row(&mut tx, &id, from, to, patch).await? {
            Some(row) => {
                tx.commit().await?;
                Ok(row.into())
            }
            None => {
                tx.rollback().await?;
                Err(self.transition_refused(&id, from, to).await)
            }
        }
    }

    async fn save_tool_call(&self, call: &ToolCall, pos: usize) -> Result<()> {
        let mut conn = self.pool.acquire().await?;
        upsert_tool_call(&mut conn, call, pos).await
    }

    async fn steps(&self, run_id: &str) -> Result<Vec<Step>> {
        self.steps_page(run_id, 0, u32::MAX).await
    }

    async fn steps_page(&self, run_id: &str, from: u32, limit: u32) -> Result<Vec<Step>> {
        match &self.reader {
            Some(reader) => reader.steps_page(run_id, from, limit).await,
            None => self::list::steps_page(&self.pool, run_id, from, limit).await,
        }
    }

    async fn step_outline(&self, run_id: &str) -> Result<Vec<StepOutline>> {
        match &self.reader {
            Some(reader) => reader.outline(run_id).await,
            None => Ok(self.steps(run_id).await?.iter().map(StepOutline::from).collect()),
        }
    }

    async fn last_step_index(&self, run_id: &str) -> Result<Option<u32>> {
        let idx: Option<i64> = sqlx::query_scalar("SELECT max(idx) FROM steps WHERE run_id = ?")
            .bind(run_id)
            .fetch_one(&self.pool)
            .await?;
        Ok(idx.and_then(|i| u32::try_from(i).ok()))
    }

    async fn tool_call(&self, run_id: &str, call_id: &str) -> Result<Option<ToolCall>> {
        self::list::tool_call(&self.pool, run_id, call_id).await
    }

    async fn messages(&self, run_id: &str) -> Result<Vec<Message>> {
        let rows = sqlx::query_as::<_, MessageRow>("SELECT * FROM messages WHERE run_id = ? ORDER BY seq")
            .bind(run_id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().filter_map(MessageRow::into_message).collect())
    }

    async fn messages_page(&self, run_id: &str, from: u64, limit: u32) -> Result<Vec<Message>> {
        self::list::messages_page(&self.pool, run_id, from, limit).await
    }

    async fn messages_tail(&self, run_id: &str, n: u32) -> Result<(Vec<Message>, u64)> {
        self::list::messages_tail(&self.pool, run_id, n).await
    }

    async fn last_message_seq(&self, run_id: &str) -> Result<Option<u64>> {
        let seq: Option<i64> = sqlx::query_scalar("SELECT max(seq) FROM messages WHERE run_id = ?")
            .bind(run_id)
            .fetch_one(&self.pool)
            .await?;
        Ok(seq.map(|s| u64::try_from(s).unwrap_or(0)))
    }

    async fn count_messages(&self, run_id: &str, kind: &str) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM messages WHERE run_id = ? AND type = ?")
            .bind(run_id)
            .bind(kind)
            .fetch_one(&self.pool)
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}

#[async_trait]
impl ApprovalStore for SqliteStore {
    async fn decide(&self, write: DecisionWrite<'_>) -> Result<DecideOutcome> {
        self::approvals::decide(&self.pool, write).await
    }

    async fn interruptions(&self, run_id: Option<&str>, project: Option<&str>) -> Result<Vec<Interruption>> {
        self::approvals::interruptions(&self.pool, run_id, project).await
    }

    async fn decisions(
        &self,
        project: &str,
        before: Option<&DecisionCursor>,
        offset: u32,
        limit: u32,
    ) -> Result<Vec<DecidedCall>> {
        self::approvals::decisions(&self.pool, project, before, offset, limit).await
    }

    async fn cancel_awaiting(&self, run_id: &str) -> Result<u64> {
        self::approvals::cancel_awaiting(&self.pool, run_id).await
    }
}

#[async_trait]
impl EventStore for SqliteStore {
    async fn append_events(&self, events: &[Arc<Event>]) -> Result<()> {
        self::events::append_events(&self.pool, events).await
    }

    async fn events_after(&self, run_id: &str, after: u64, limit: u32) -> Result<Vec<Event>> {
        self::events::events_after(&self.pool, run_id, after, limit).await
    }

    async fn last_event(&self, run_id: &str) -> Result<Option<(u64, String)>> {
        self::events::last_event(&self.pool, run_id).await
    }
}

#[async_trait]
impl PriceStore for SqliteStore {
    async fn prices(&self, project: &str) -> Result<Vec<ModelPrice>> {
        self::events::prices(&self.pool, project).await
    }

    async fn put_price(&self, project: &str, price: &ModelPrice) -> Result<()> {
        self::events::put_price(&self.pool, project, price).await
    }

    async fn delete_price(&self, project: &str, model: &str) -> Result<bool> {
        self::events::delete_price(&self.pool, project, model).await
    }
}

impl SqliteStore {
    /// Why a compare-and-set on a run's status changed nothing.
    async fn transition_refused(&self, id: &str, from: RunStatus, to: RunStatus) -> EngineError {
        match self.get_run(id).await {
            Err(e) => e,
            Ok(None) => EngineError::NotFound(format!("run `{id}`")),
            Ok(Some(run)) => match run.status.check(to) {
                Err(e) => e.into(),
                Ok(()) => EngineError::Conflict(format!("run `{id}` is {}, not {from} as expected", run.status)),
            },
        }
    }
}
