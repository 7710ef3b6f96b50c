//! The trace read path: one run's steps and tool calls, straight off SQLite.
//!
//! Why not sqlx here: sqlx runs each SQLite connection on its own worker
//! thread and hands every row across a channel, which costs ~5 µs a row —
//! 50 ms for a 10,000-step run before a single column is decoded. This path
//! keeps a few read-only connections of its own (a pool, never one per call)
//! and walks the `(run_id, idx)` / `(run_id, step_idx, pos)` keys on tokio's
//! blocking pool, so rows cost what SQLite costs. Writes all stay on sqlx;
//! WAL lets these readers see every committed write without blocking it.
//!
//! The row types and their conversion to the model are the sqlx ones
//! (`rows`), so both paths produce identical steps.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, Row};

use crate::error::{EngineError, Result};
use crate::model::{CallOutline, Step, StepOutline, ToolCall, ToolCallStatus, Usage};
use crate::store::from_ms;
use crate::store::rows::{parse_step_status, StepRow, ToolCallRow};

/// At most this many idle connections are kept (the machine has few cores;
/// more concurrent readers simply open and drop extra ones).
const MAX_IDLE: usize = 4;

const STEPS: &str = "SELECT run_id, idx, kind, status, request, response, input_tokens, output_tokens,
    cache_read_tokens, reasoning_tokens, total_tokens, requests, started_at, model_completed_at, completed_at
    FROM steps WHERE run_id = ?1 AND idx >= ?2 ORDER BY idx LIMIT ?3";

const CALLS: &str = "SELECT run_id, step_idx, id, tool_name, arguments, result, error, status, reasoning,
    requested_at, approval, started_at, completed_at, child_run_id
    FROM tool_calls WHERE run_id = ?1 AND step_idx BETWEEN ?2 AND ?3 ORDER BY step_idx, pos";

/// The outline reads the covering indexes of migration 0006 (named, so a
/// plan change can never send it back through the payload pages) and no
/// payload column: the step's model has its own column.
const STEP_OUTLINE: &str = "SELECT idx, kind, status, model,
    input_tokens, output_tokens, cache_read_tokens, reasoning_tokens, total_tokens, requests,
    started_at, model_completed_at, completed_at
    FROM steps INDEXED BY steps_outline WHERE run_id = ?1 ORDER BY idx";

const CALL_OUTLINE: &str = "SELECT step_idx, id, tool_name, status, requested_at, started_at, completed_at
    FROM tool_calls INDEXED BY tool_calls_outline WHERE run_id = ?1 ORDER BY step_idx, pos";

/// Read-only connections to the store's database file.
#[derive(Clone)]
pub(super) struct TraceReader {
    path: Arc<PathBuf>,
    idle: Arc<Mutex<Vec<Connection>>>,
}

impl TraceReader {
    pub(super) fn new(path: PathBuf) -> Self {
        Self { path: Arc::new(path), idle: Arc::default() }
    }

    /// Steps `from..from + limit` of a run with their tool calls, in order.
    pub(super) async fn steps_page(&self, run_id: &str, from: u32, limit: u32) -> Result<Vec<Step>> {
        let run_id = run_id.to_owned();
        self.with_conn(move |conn| in_snapshot(conn, |c| read_page(c, &run_id, from, limit))).await
    }

    /// Every step of a run without payloads (see [`StepOutline`]).
    ///
    /// The steps and the calls are read at once on two connections, so the
    /// two scans overlap on two cores. Each read is its own snapshot: on a
    /// run still writing, a call of a step newer than the steps read is left
    /// out, and the newest step may lack its latest call; the live event
    /// stream carries both.
    pub(super) async fn outline(&self, run_id: &str) -> Result<Vec<StepOutline>> {
        let (id, id2) = (run_id.to_owned(), run_id.to_owned());
        let steps = self.with_conn(move |conn| read_step_outline(conn, &id));
        let calls = self.with_conn(move |conn| read_call_outline(conn, &id2));
        let (mut steps, calls) = tokio::try_join!(steps, calls)?;
        attach(&mut steps, calls, |s| s.index, |s, c| s.tool_calls.push(c));
        Ok(steps)
    }

    /// Runs `f` with a pooled connection on the blocking pool.
    async fn with_conn<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let conn = this.checkout()?;
            let out = f(&conn);
            this.checkin(conn);
            out
        })
        .await
        .map_err(|e| read_error(format!("trace read task failed: {e}")))?
    }

    fn checkout(&self) -> Result<Connection> {
        if let Some(conn) = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Ok(conn);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(self.path.as_path(), flags).map_err(sqlite_error)?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(sqlite_error)?;
        Ok(conn)
    }

    fn checkin(&self, conn: Connection) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }
}

/// Runs both reads of `f` in one read transaction: the calls belong to
/// exactly the steps read, even while the run is writing new ones.
fn in_snapshot<T>(conn: &Connection, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    conn.execute_batch("BEGIN").map_err(sqlite_error)?;
    let out = f(conn);
    let _ = conn.execute_batch("COMMIT");
    out
}

fn read_page(conn: &Connection, run_id: &str, from: u32, limit: u32) -> Result<Vec<Step>> {
    let mut stmt = conn.prepare_cached(STEPS).map_err(sqlite_error)?;
    let mut steps: Vec<Step> = stmt
        .query_map((run_id, i64::from(from), i64::from(limit)), step_row)
        .map_err(sqlite_error)?
        .map(|r| r.map(Step::from))
        .collect::<rusqlite::Result<_>>()
        .map_err(sqlite_error)?;
    let (Some(first), Some(last)) = (steps.first(), steps.last()) else { return Ok(steps) };
    let (first, last) = (i64::from(first.index), i64::from(last.index));
    let mut stmt = conn.prepare_cached(CALLS).map_err(sqlite_error)?;
    let calls = stmt
        .query_map((run_id, first, last), |r| call_row(r).map(|c| (c.step_idx as u32, ToolCall::from(c))))
        .map_err(sqlite_error)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(sqlite_error)?;
    attach(&mut steps, calls, |s| s.index, |s, c| s.tool_calls.push(c));
    Ok(steps)
}

/// Gives each step its calls. Both lists are ordered by step index, so this
/// walks forward through the steps and never searches; a call whose step is
/// not in `steps` is skipped.
pub(super) fn attach<S, C>(
    steps: &mut [S],
    calls: impl IntoIterator<Item = (u32, C)>,
    index: impl Fn(&S) -> u32,
    mut push: impl FnMut(&mut S, C),
) {
    let mut at = 0;
    for (idx, call) in calls {
        while at < steps.len() && index(&steps[at]) < idx {
            at += 1;
        }
        match steps.get_mut(at) {
            Some(step) if index(step) == idx => push(step, call),
            _ => {}
        }
    }
}

fn read_step_outline(conn: &Connection, run_id: &str) -> Result<Vec<StepOutline>> {
    read_sized(conn, STEP_COUNT, STEP_OUTLINE, run_id, step_outline)
}

/// The run's calls with the index of their step, in step order.
fn read_call_outline(conn: &Connection, run_id: &str) -> Result<Vec<(u32, CallOutline)>> {
    read_sized(conn, CALL_STEPS, CALL_OUTLINE, run_id, |r| Ok((r.get(0)?, call_outline(r)?)))
}

/// Every row of `sql` for `run_id`, mapped by `f`, into a vector sized by
/// the `count_sql` seek.
fn read_sized<T>(
    conn: &Connection,
    count_sql: &str,
    sql: &str,
    run_id: &str,
    f: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    let mut out = Vec::with_capacity(size_hint(conn, count_sql, run_id)?);
    let mut stmt = conn.prepare_cached(sql).map_err(sqlite_error)?;
    let rows = stmt.query_map([run_id], f).map_err(sqlite_error)?;
    for row in rows {
        out.push(row.map_err(sqlite_error)?);
    }
    Ok(out)
}

/// One index seek that sizes an outline's vector up front: growing a
/// 10,000-entry vector by doubling copies it over and over, and touching the
/// fresh memory of each copy costs more than the seek.
const STEP_COUNT: &str = "SELECT coalesce(max(idx) + 1, 0) FROM steps INDEXED BY steps_outline WHERE run_id = ?1";
const CALL_STEPS: &str =
    "SELECT coalesce(max(step_idx) + 1, 0) FROM tool_calls INDEXED BY tool_calls_outline WHERE run_id = ?1";

fn size_hint(conn: &Connection, sql: &str, run_id: &str) -> Result<usize> {
    let mut stmt = conn.prepare_cached(sql).map_err(sqlite_error)?;
    let n: i64 = stmt.query_row([run_id], |r| r.get(0)).map_err(sqlite_error)?;
    Ok(usize::try_from(n).unwrap_or(0).min(1 << 20))
}

fn step_outline(r: &Row<'_>) -> rusqlite::Result<StepOutline> {
    Ok(StepOutline {
        index: r.get(0)?,
        kind: r.get(1)?,
        status: parse_step_status(r.get_ref(2)?.as_str()?),
        model: r.get(3)?,
        usage: Usage {
            input_tokens: r.get(4)?,
            output_tokens: r.get(5)?,
            cache_read_tokens: r.get(6)?,
            reasoning_tokens: r.get(7)?,
            total_tokens: r.get(8)?,
            requests: r.get(9)?,
        },
        started_at: from_ms(r.get(10)?),
        model_completed_at: r.get::<_, Option<i64>>(11)?.map(from_ms),
        completed_at: r.get::<_, Option<i64>>(12)?.map(from_ms),
        tool_calls: Vec::new(),
    })
}

fn call_outline(r: &Row<'_>) -> rusqlite::Result<CallOutline> {
    Ok(CallOutline {
        id: r.get(1)?,
        tool_name: r.get(2)?,
        status: ToolCallStatus::parse(r.get_ref(3)?.as_str()?).unwrap_or(ToolCallStatus::Failed),
        requested_at: r.get::<_, Option<i64>>(4)?.map(from_ms),
        started_at: r.get::<_, Option<i64>>(5)?.map(from_ms),
        completed_at: r.get::<_, Option<i64>>(6)?.map(from_ms),
    })
}

fn step_row(r: &Row<'_>) -> rusqlite::Result<StepRow> {
    Ok(StepRow {
        run_id: r.get(0)?,
        idx: r.get(1)?,
        kind: r.get(2)?,
        status: r.get(3)?,
        request: r.get(4)?,
        response: r.get(5)?,
        input_tokens: r.get(6)?,
        output_tokens: r.get(7)?,
        cache_read_tokens: r.get(8)?,
        reasoning_tokens: r.get(9)?,
        total_tokens: r.get(10)?,
        requests: r.get(11)?,
        started_at: r.get(12)?,
        model_completed_at: r.get(13)?,
        completed_at: r.get(14)?,
    })
}

fn call_row(r: &Row<'_>) -> rusqlite::Result<ToolCallRow> {
    Ok(ToolCallRow {
        run_id: r.get(0)?,
        step_idx: r.get(1)?,
        id: r.get(2)?,
        tool_name: r.get(3)?,
        arguments: r.get(4)?,
        result: r.get(5)?,
        error: r.get(6)?,
        status: r.get(7)?,
        reasoning: r.get(8)?,
        requested_at: r.get(9)?,
        approval: r.get(10)?,
        started_at: r.get(11)?,
        completed_at: r.get(12)?,
        child_run_id: r.get(13)?,
    })
}

fn sqlite_error(e: rusqlite::Error) -> EngineError {
    read_error(e.to_string())
}

/// Read failures surface as store errors, like every other database failure
/// (logged by the web layer, never shown).
fn read_error(message: String) -> EngineError {
    EngineError::Store(sqlx::Error::Protocol(message))
}

#[cfg(test)]
mod tests {
    use crate::model::StepOutline;
    use crate::store::{SqliteStore, StepStore};
    use crate::{Engine, EngineConfig};

    /// This path and the sqlx one must read exactly the same steps, calls
    /// included, for a whole run and for a page from its middle.
    #[tokio::test]
    async fn reads_what_the_sqlx_path_reads() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("read.db").display());
        let engine = Engine::open(&url, EngineConfig::default()).await.unwrap();
        let run = engine.runs().generate_trace(40).await.unwrap();
        let store = SqliteStore::open(&url).await.unwrap();
        for (from, limit) in [(0, u32::MAX), (7, 20), (39, 5), (40, 5)] {
            let fast = store.steps_page(&run.id, from, limit).await.unwrap();
            let sqlx = super::super::list::steps_page(store.pool(), &run.id, from, limit).await.unwrap();
            assert_eq!(fast, sqlx, "page {from}+{limit}");
        }
        let all = store.steps(&run.id).await.unwrap();
        let derived: Vec<StepOutline> = all.iter().map(StepOutline::from).collect();
        assert_eq!(store.step_outline(&run.id).await.unwrap(), derived, "the outline is the steps without payloads");
        assert_eq!(derived[0].model.as_deref(), Some("builtin"), "the first step records its model");
        assert_eq!(all.len(), 40);
        assert!(all.iter().all(|s| s.run_id == run.id));
        assert!(all.iter().filter(|s| !s.tool_calls.is_empty()).count() > 10, "the fixture calls tools");
        assert!(store.steps("no-such-run").await.unwrap().is_empty());
        assert!(store.step_outline("no-such-run").await.unwrap().is_empty());
    }
}
