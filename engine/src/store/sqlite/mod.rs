//! The SQLite store: the embedded default, one file created and migrated on open.
//!
//! WAL mode with `synchronous = NORMAL`: a committed step survives a process
//! crash (only an OS crash can lose the last transactions), and readers never
//! block the writer. Every write transaction starts with a write, so SQLite
//! never has to upgrade a read lock (the classic source of `SQLITE_BUSY`).

mod approvals;
mod commit;
mod hot;
mod list;
mod read;
mod runs;
mod spans;

use std::str::FromStr;
use std::sync::Arc;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;

use self::commit::Committer;
use self::hot::{EventRows, StepRows, Transition};
use self::read::TraceReader;
use crate::error::{EngineError, Result};
use crate::model::Event;
use crate::model::{Run, RunFilter, RunStatus, Step, StepOutline, ToolCall};
use crate::store::rows::params::CallParams;
use crate::store::{DecideOutcome, DecisionWrite, InboxFilter, RunPatch, StepWrite};
use crate::store::{IngestedRun, StoredSpan, TraceFold, TraceIngest};

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

impl SqliteStore {
    /// A step's writes on the write thread (see `hot::write_step`).
    pub(crate) async fn save_step_on_thread(&self, w: StepWrite<'_>) -> Result<()> {
        let rows = StepRows::from(&w);
        self.committer.write(move |c| hot::write_step(c, &rows).map(Some)).await?;
        Ok(())
    }

    /// A step's writes and its run's status change in one transaction of
    /// the write thread; `None` (the step rolled back with it) when the run
    /// was not in `from`.
    pub(crate) async fn finish_step_on_thread(
        &self,
        w: StepWrite<'_>,
        from: RunStatus,
        to: RunStatus,
        patch: RunPatch,
    ) -> Result<Option<Run>> {
        let id = w.step.run_id.clone();
        let (rows, t) = (StepRows::from(&w), Transition::new(&id, from, to, patch));
        let written = self.committer.write(move |c| {
            hot::write_step(c, &rows)?;
            hot::transition(c, &t)
        });
        Ok(written.await?.map(Run::from))
    }

    /// One tool call's row on the write thread.
    pub(crate) async fn save_tool_call_on_thread(&self, call: &ToolCall, pos: usize) -> Result<()> {
        let row = CallParams::new(call, pos);
        self.committer.write(move |c| hot::upsert_call(c, &row).map(Some)).await?;
        Ok(())
    }

    /// A page of a run's steps with their calls, read off the file (see `read`).
    pub(crate) async fn steps_page_read(&self, run_id: &str, from: u32, limit: u32) -> Result<Vec<Step>> {
        self.reader.steps_page(run_id, from, limit).await
    }

    /// A run's step outline, read off the file (see `read`).
    pub(crate) async fn step_outline_read(&self, run_id: &str) -> Result<Vec<StepOutline>> {
        self.reader.outline(run_id).await
    }
}

impl SqliteStore {
    /// Stores a decision on the write thread (see `approvals`).
    pub(crate) async fn decide_on_thread(&self, write: DecisionWrite<'_>) -> Result<DecideOutcome> {
        let rows = self::approvals::DecisionRows::new(&write)?;
        let decided = self.committer.write(move |c| self::approvals::decide(c, &rows)).await?;
        decided.ok_or_else(|| EngineError::Internal("a decision was not written".into()))
    }

    /// Runs `sql` (one statement with `?` placeholders, as the store writes
    /// it for every backend) with `params` on the write thread.
    pub(crate) async fn execute_on_thread(&self, sql: &'static str, params: Vec<rusqlite::types::Value>) -> Result<()> {
        let write = move |c: &rusqlite::Connection| {
            c.prepare_cached(sql)?.execute(rusqlite::params_from_iter(params.iter())).map(|_| Some(()))
        };
        self.committer.write(write).await?;
        Ok(())
    }

    /// Stores an OTLP ingest on the write thread (see `spans`): `None`
    /// when the full path must do it, with `fold` forgotten.
    pub(crate) async fn ingest_on_thread(
        &self,
        project: &str,
        trace_id: &str,
        spans: &[StoredSpan],
        max_spans: u64,
        fold: &mut dyn TraceFold,
    ) -> Result<Option<TraceIngest>> {
        let after = match fold.version() {
            Some(v) => v,
            None => {
                // New to this process: a new trace, unless the job finds it stored.
                fold.reset(Vec::new(), 0);
                0
            }
        };
        let held = fold.held_with(spans);
        if held > max_spans {
            // The trace holds at least what the fold knows of.
            return Ok(Some(TraceIngest::Full { stored: held }));
        }
        let change = fold.fold(spans, after + 1);
        let rows = self::spans::IngestRows::new(project, trace_id, after, spans, change.as_ref());
        match self.committer.write(move |c| self::spans::ingest(c, &rows)).await {
            Ok(Some(before)) => {
                let before = before.as_deref().and_then(RunStatus::parse);
                Ok(Some(TraceIngest::Stored(change.map(|c| Box::new(IngestedRun { run: c.run, before })))))
            }
            Ok(None) => {
                fold.forget();
                Ok(None)
            }
            Err(e) => {
                fold.forget();
                Err(e)
            }
        }
    }

    /// Appends `events` on the write thread (group commit with the turn's
    /// own writes).
    pub(crate) async fn append_events_on_thread(&self, events: &[Arc<Event>]) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let rows = EventRows::new(events);
        self.committer.write(move |c| hot::append_events(c, &rows).map(Some)).await?;
        Ok(())
    }
}
