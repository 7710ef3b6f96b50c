//! The SQLite store: the embedded default, one file created and migrated on open.
//!
//! WAL mode with `synchronous = NORMAL`: a committed step survives a process
//! crash (only an OS crash can lose the last transactions), and readers never
//! block the writer. Every write transaction starts with a write, so SQLite
//! never has to upgrade a read lock (the classic source of `SQLITE_BUSY`).

mod agents;
mod approvals;
mod commit;
mod conversation;
mod directory;
mod events;
mod hot;
mod http_tools;
mod list;
mod read;
mod recovery;
mod runs;
mod spans;
mod webhook_reads;
mod webhooks;
mod writes;

use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;

use self::commit::Committer;
use self::hot::{EventRows, StepRows, Transition};
use self::read::TraceReader;
use self::writes::CallParams;
use crate::cost::ModelPrice;
use crate::error::{EngineError, Result};
use crate::model::Event;
use crate::model::{Interruption, Message, Run, RunFilter, RunStatus, Step, StepOutline, ToolCall};
use crate::store::rows::MessageRow;
use crate::store::{
    AgentStore, ApprovalStore, DecideOutcome, DecidedCall, DecisionCursor, DecisionWrite, Directory, EventStore,
    HttpToolStore, InboxFilter, PendingCalls, PriceStore, RunPatch, RunStore, StepStore, StepWrite, Store,
    WebhookStore,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

/// This process's claim to be the one server on a SQLite file (see
/// [`SqliteStore::lock_single_server`]); dropping it gives the claim up.
pub struct ServerLock {
    _file: std::fs::File,
}

/// A pool of connections to one SQLite database, and its write thread.
#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// Trace reads off the file (see `read`).
    reader: TraceReader,
    /// The hot writes: steps, calls, status changes, events (see `commit`).
    committer: Committer,
    /// The file behind `sqlite::memory:`, removed with the last handle.
    _scratch: Option<Arc<Scratch>>,
}

/// The private file an in-memory store lives in: the write thread and the
/// trace readers need a file all connections see.
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}

impl SqliteStore {
    /// Opens (creating if needed) and migrates the database at `url`,
    /// e.g. `sqlite://runlens.db` or `sqlite::memory:` (a private file in
    /// the temporary directory, removed when the store is dropped).
    pub async fn open(url: &str) -> Result<Self> {
        let scratch = url.contains(":memory:").then(|| {
            let name = format!("runlens-memory-{}.db", uuid::Uuid::now_v7());
            Arc::new(Scratch(std::env::temp_dir().join(name)))
        });
        let url = match &scratch {
            Some(s) => format!("sqlite://{}", s.0.display()),
            None => url.to_owned(),
        };
        let opts = SqliteConnectOptions::from_str(&url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .after_connect(|conn, _| Box::pin(async move { commit::install_busy_wait(conn).await }))
            .connect_with(opts.clone())
            .await?;
        MIGRATOR.run(&pool).await?;
        let path = opts.get_filename().to_owned();
        let committer = Committer::start(&path)?;
        Ok(Self { pool, reader: TraceReader::new(path), committer, _scratch: scratch })
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

    /// SQLite's plan for the pending-inbox page `filter` asks for (one line
    /// per step), so tests can check that it reads one index range in order.
    pub async fn explain_pending_inbox(&self, filter: &InboxFilter) -> Result<Vec<String>> {
        self::approvals::explain_pending_inbox(&self.pool, filter).await
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

    fn requests(&self) -> &dyn crate::store::RequestStore {
        self
    }
}

#[async_trait]
impl StepStore for SqliteStore {
    async fn save_step(&self, w: StepWrite<'_>) -> Result<()> {
        let rows = StepRows::from(&w);
        self.committer.write(move |c| hot::write_step(c, &rows).map(Some)).await?;
        Ok(())
    }

    async fn finish_step(&self, w: StepWrite<'_>, from: RunStatus, to: RunStatus, patch: RunPatch) -> Result<Run> {
        from.check(to)?;
        let id = w.step.run_id.clone();
        let (rows, t) = (StepRows::from(&w), Transition::new(&id, from, to, patch));
        // Refused (the run was not in `from`): the step is rolled back with it.
        let written = self.committer.write(move |c| {
            hot::write_step(c, &rows)?;
            hot::transition(c, &t)
        });
        match written.await? {
            Some(row) => Ok(row.into()),
            None => Err(self.transition_refused(&id, from, to).await),
        }
    }

    async fn save_tool_call(&self, call: &ToolCall, pos: usize) -> Result<()> {
        let row = CallParams::new(call, pos);
        self.committer.write(move |c| hot::upsert_call(c, &row).map(Some)).await?;
        Ok(())
    }

    async fn steps(&self, run_id: &str) -> Result<Vec<Step>> {
        self.steps_page(run_id, 0, u32::MAX).await
    }

    async fn steps_page(&self, run_id: &str, from: u32, limit: u32) -> Result<Vec<Step>> {
        self.reader.steps_page(run_id, from, limit).await
    }

    async fn step_outline(&self, run_id: &str) -> Result<Vec<StepOutline>> {
        self.reader.outline(run_id).await
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

    async fn position(&self, run_id: &str) -> Result<crate::store::RunPosition> {
        let (step, seq, agents): (Option<i64>, Option<i64>, i64) = sqlx::query_as(
            "SELECT (SELECT max(idx) FROM steps WHERE run_id = ?1), (SELECT max(seq) FROM messages WHERE run_id = ?1),
                (SELECT count(*) FROM messages WHERE run_id = ?1 AND type = 'agent')",
        )
        .bind(run_id)
        .fetch_one(&self.pool)
        .await?;
        Ok(crate::store::RunPosition {
            last_step: step.and_then(|i| u32::try_from(i).ok()),
            last_seq: seq.map(|s| u64::try_from(s).unwrap_or(0)),
            agent_messages: u64::try_from(agents).unwrap_or(0),
        })
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
        let rows = self::approvals::DecisionRows::new(&write)?;
        let decided = self.committer.write(move |c| self::approvals::decide(c, &rows)).await?;
        decided.ok_or_else(|| EngineError::Internal("a decision was not written".into()))
    }

    async fn interruptions(&self, run_id: Option<&str>, project: Option<&str>) -> Result<Vec<Interruption>> {
        self::approvals::interruptions(&self.pool, run_id, project).await
    }

    async fn pending_inbox(&self, filter: &InboxFilter) -> Result<PendingCalls> {
        self::approvals::pending_inbox(&self.pool, filter).await
    }

    async fn pending_count(&self, project: &str) -> Result<u64> {
        self::approvals::pending_count(&self.pool, project).await
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
        if events.is_empty() {
            return Ok(());
        }
        let rows = EventRows::new(events);
        self.committer.write(move |c| hot::append_events(c, &rows).map(Some)).await?;
        Ok(())
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

crate::store::requests_sql::request_store!(SqliteStore, crate::store::requests_sql::question_marks);
crate::store::grants::grant_store!(SqliteStore, crate::store::requests_sql::question_marks);
crate::store::sign_ins::sign_in_store!(SqliteStore, crate::store::requests_sql::question_marks);
