//! The write thread: group commit for the SQLite store's hot writes.
//!
//! A turn writes a step, its tool calls, its messages and the run's totals,
//! and the event bus writes the events the turn announced. Through sqlx each
//! statement crossed to a connection's worker thread and back (two thread
//! wake-ups a statement), and writers on different connections met in
//! SQLite's busy handler, which sleeps whole milliseconds; a profile of the
//! engine bench spent most of its time there, in hand-offs and sleeps, and
//! under 2% in SQLite itself (see README, "Performance").
//!
//! Here one thread owns one write connection. A caller turns its write into
//! a closure over owned, already encoded values (the JSON is encoded on the
//! caller's task, in parallel with everything else), queues it, and awaits
//! its answer. The thread takes whatever has queued, runs it all in one
//! `BEGIN IMMEDIATE` transaction with cached prepared statements — each
//! caller's part in a savepoint of its own when there are several, so one
//! failing write never takes another's rows with it — commits once, and
//! only then answers each caller. Durability is unchanged: "ok" means the
//! rows are committed (WAL, `synchronous = NORMAL`, as every connection of
//! this store); the busier the engine, the more writes share one commit.
//!
//! Other writes still go through sqlx; they and this thread take turns on
//! SQLite's write lock through [`busy_wait`], which waits in microseconds.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::{mpsc, oneshot};

use crate::error::{EngineError, Result};

/// Writes committed in one transaction at most.
const MAX_BATCH: usize = 256;

/// Writes waiting for the thread at most; a caller past it waits for room.
const QUEUE: usize = 4096;

/// Prepared statements kept per connection (every hot statement, with room).
const STATEMENT_CACHE: usize = 64;

/// The handle callers queue writes through; cloning shares the one thread,
/// which ends once every handle is gone and the queue is drained.
#[derive(Clone)]
pub(super) struct Committer {
    queue: mpsc::Sender<Box<dyn Job>>,
}

impl Committer {
    /// Opens the write connection to the database file at `path` (already
    /// created and migrated) and starts the thread.
    pub(super) fn start(path: &Path) -> Result<Self> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(lite_error)?;
        conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;").map_err(lite_error)?;
        // Connects the run text index (FTS5) now: connected first while
        // re-preparing a write after another connection changed the schema,
        // it failed the write ("no such table: runs").
        conn.execute_batch("SELECT rowid FROM run_text WHERE rowid = 0;").map_err(lite_error)?;
        conn.busy_handler(Some(busy_wait)).map_err(lite_error)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let (queue, jobs) = mpsc::channel(QUEUE);
        std::thread::Builder::new()
            .name("runlens-sqlite-writer".into())
            .spawn(move || write_loop(&conn, jobs))
            .map_err(|e| EngineError::Internal(format!("cannot start the SQLite write thread: {e}")))?;
        Ok(Self { queue })
    }

    /// Runs `write` on the write thread inside its transaction and answers
    /// once that transaction is committed. `Ok(None)` from `write` means it
    /// changed its mind (a compare-and-set found another state): its rows
    /// are rolled back and the answer is `None`.
    pub(super) async fn write<T, F>(&self, write: F) -> Result<Option<T>>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<Option<T>> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Box::new(Call { write: Some(write), out: None, reply });
        self.queue.send(job).await.map_err(|_| store_error("the SQLite write thread has stopped".into()))?;
        answer.await.map_err(|_| store_error("the SQLite write thread has stopped".into()))?
    }
}

/// One caller's write, as the thread sees it.
trait Job: Send {
    /// Runs the write inside the open transaction; whether its rows stay.
    fn apply(&mut self, conn: &Connection) -> bool;
    /// Answers the caller once the transaction is over (`Err` when it was
    /// not committed).
    fn answer(self: Box<Self>, committed: std::result::Result<(), String>);
}

struct Call<T, F> {
    write: Option<F>,
    out: Option<rusqlite::Result<Option<T>>>,
    reply: oneshot::Sender<Result<Option<T>>>,
}

impl<T, F> Job for Call<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> rusqlite::Result<Option<T>> + Send + 'static,
{
    fn apply(&mut self, conn: &Connection) -> bool {
        let Some(write) = self.write.take() else { return false };
        let out = write(conn);
        let keep = matches!(out, Ok(Some(_)));
        self.out = Some(out);
        keep
    }

    fn answer(self: Box<Self>, committed: std::result::Result<(), String>) {
        let answer = match (self.out, committed) {
            (Some(Err(e)), _) => Err(lite_error(e)),
            // Nothing of it was to be kept: the commit does not matter.
            (Some(Ok(None)), _) => Ok(None),
            (Some(Ok(Some(v))), Ok(())) => Ok(Some(v)),
            (Some(Ok(Some(_))) | None, Err(e)) => Err(store_error(e)),
            (None, Ok(())) => Err(store_error("the write did not run".into())),
        };
        let _ = self.reply.send(answer);
    }
}

fn write_loop(conn: &Connection, mut jobs: mpsc::Receiver<Box<dyn Job>>) {
    while let Some(first) = jobs.blocking_recv() {
        let mut batch = Vec::with_capacity(16);
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let committed = commit(conn, &mut batch);
        for job in batch {
            job.answer(committed.clone());
        }
    }
}

/// Runs a batch in one transaction and commits it.
fn commit(conn: &Connection, batch: &mut [Box<dyn Job>]) -> std::result::Result<(), String> {
    conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| e.to_string())?;
    let outcome = apply_all(conn, batch).and_then(|()| conn.execute_batch("COMMIT"));
    if let Err(e) = outcome {
        let _ = conn.execute_batch("ROLLBACK");
        tracing::error!(error = %e, writes = batch.len(), "a SQLite write transaction failed; its writes are refused");
        return Err(e.to_string());
    }
    Ok(())
}

fn apply_all(conn: &Connection, batch: &mut [Box<dyn Job>]) -> rusqlite::Result<()> {
    if let [only] = batch {
        // Alone in its transaction: a write that changed its mind rolls it all back.
        if !only.apply(conn) {
            conn.execute_batch("ROLLBACK; BEGIN IMMEDIATE")?;
        }
        return Ok(());
    }
    for job in batch.iter_mut() {
        conn.execute_batch("SAVEPOINT w")?;
        if job.apply(conn) {
            conn.execute_batch("RELEASE w")?;
        } else {
            conn.execute_batch("ROLLBACK TO w; RELEASE w")?;
        }
    }
    Ok(())
}

/// SQLite's busy handler for every connection of the store: while another
/// connection holds the write lock, wait a few microseconds and try again
/// (SQLite's own handler sleeps 1 ms and more), for up to about 10 s.
pub(super) fn busy_wait(attempt: i32) -> bool {
    let pause = match attempt {
        0..100 => Duration::from_micros(20),
        100..1_000 => Duration::from_micros(200),
        1_000..6_000 => Duration::from_millis(2),
        _ => return false,
    };
    std::thread::sleep(pause);
    true
}

/// Write failures surface as store errors, like every other database
/// failure (logged by the web layer, never shown).
pub(super) fn lite_error(e: rusqlite::Error) -> EngineError {
    store_error(e.to_string())
}

fn store_error(message: String) -> EngineError {
    EngineError::Store(sqlx::Error::Protocol(message))
}

/// Gives a sqlx connection [`busy_wait`] as its busy handler (instead of
/// SQLite's, which sleeps 1 ms and more), so the store's sqlx writers and
/// the write thread hand the write lock over in microseconds.
pub(super) async fn install_busy_wait(conn: &mut sqlx::SqliteConnection) -> std::result::Result<(), sqlx::Error> {
    extern "C" fn handler(_: *mut std::ffi::c_void, attempt: std::ffi::c_int) -> std::ffi::c_int {
        std::ffi::c_int::from(busy_wait(attempt))
    }
    let mut handle = conn.lock_handle().await?;
    let db = handle.as_raw_handle().as_ptr();
    // SAFETY: `db` is the open connection the lock above holds exclusively
    // for this call; the handler is a plain function without state.
    let rc = unsafe { rusqlite::ffi::sqlite3_busy_handler(db, Some(handler), std::ptr::null_mut()) };
    if rc == rusqlite::ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(sqlx::Error::Protocol(format!("cannot set the busy handler (SQLite code {rc})")))
    }
}
