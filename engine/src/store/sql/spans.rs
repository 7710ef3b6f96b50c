//! [`SpanStore`] for every backend: OTLP spans and the runs assembled from
//! them (see `store::spans`).
//!
//! Ingests of one trace take turns ([`Dialect::serialize`], then the
//! trace's version row; on SQLite the first statement writes, so the
//! transaction holds the write lock from there on): each folds its spans
//! into the run as the spans stored before it left it, and writes only
//! what changed, so the lock is held about as long whatever the trace's
//! length. On SQLite an ingest first tries the write thread (see
//! `sqlite::spans`), which folds before it takes the lock and comes here
//! when the trace moved on.

use async_trait::async_trait;

use super::{bind_columns, sql, with_db, Db, Dialect, RowWrites, SqlStore};
use crate::error::Result;
use crate::model::{Run, RunStatus};
use crate::store::rows::params::Column;
use crate::store::rows::spans::{span_payloads, SpanRow};
use crate::store::spans::{IngestedRun, RunChange, SpanStore, StoredSpan, TraceFold, TraceIngest};
use crate::store::{json_text, to_ms};

/// The columns of `otlp_spans` as [`SpanRow`] reads them (JSON as text).
const SPAN_COLUMNS: &str = "trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns, \
    attributes::text AS attributes, events::text AS events, status_code, status_message, service_name, scope_name, \
    received_at";

/// The upsert of one span, bound with [`span_columns`] (a span stored
/// already is replaced).
pub(crate) const UPSERT_SPAN: &str = "INSERT INTO otlp_spans (project, trace_id, span_id, parent_span_id, name, kind,
        start_ns, end_ns, attributes, events, status_code, status_message, service_name, scope_name, received_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?::jsonb, ?, ?, ?, ?, ?)
     ON CONFLICT (project, trace_id, span_id) DO UPDATE SET parent_span_id = excluded.parent_span_id,
        name = excluded.name, kind = excluded.kind, start_ns = excluded.start_ns, end_ns = excluded.end_ns,
        attributes = excluded.attributes, events = excluded.events, status_code = excluded.status_code,
        status_message = excluded.status_message, service_name = excluded.service_name,
        scope_name = excluded.scope_name, received_at = excluded.received_at";

/// The derived fields of an assembled run over its row, bound with
/// [`derived_run_columns`].
pub(crate) const UPDATE_RUN_ROW: &str = "UPDATE runs SET name = ?, status = ?, model = ?, system_prompt = ?,
        initial_prompt = ?, result = ?::jsonb, summary = ?, failure_reason = ?, input_tokens = ?, output_tokens = ?,
        cache_read_tokens = ?, reasoning_tokens = ?, total_tokens = ?, requests = ?, step_count = ?,
        created_at = ?, updated_at = ?, started_at = ?, finished_at = ?, metadata = ?::jsonb,
        source = ?::jsonb, tools = ?::jsonb, max_turns = ?, session_id = ?, end_user = ?
     WHERE id = ?";

/// Who holds run id `?`: its project, its source (none: runlens ran it)
/// and its status.
pub(crate) const RUN_OWNER: &str = "SELECT project, source::text, status FROM runs WHERE id = ? FOR UPDATE";

/// What a [`RunChange`] replaces, each bound with the run id and where it
/// starts (`from_step`, `from_step`, `from_seq`).
pub(crate) const REPLACED: [&str; 3] = [
    "DELETE FROM tool_calls WHERE run_id = ? AND step_idx >= ?",
    "DELETE FROM steps WHERE run_id = ? AND idx >= ?",
    "DELETE FROM messages WHERE run_id = ? AND seq >= ?",
];

/// Transcript entry 0 of run `?`, replaced when a change carries a new head.
pub(crate) const DELETE_HEAD: &str = "DELETE FROM messages WHERE run_id = ? AND seq = 0";

/// Span `s` of `project` as [`UPSERT_SPAN`] binds it.
pub(crate) fn span_columns(project: &str, s: &StoredSpan) -> Vec<Column> {
    let (attributes, events) = span_payloads(s);
    vec![
        project.to_owned().into(),
        s.trace_id.clone().into(),
        s.span_id.clone().into(),
        s.parent_span_id.clone().into(),
        s.name.clone().into(),
        i64::from(s.kind).into(),
        s.start_ns.into(),
        s.end_ns.into(),
        attributes.into(),
        events.into(),
        i64::from(s.status_code).into(),
        s.status_message.clone().into(),
        s.service_name.clone().into(),
        s.scope_name.clone().into(),
        to_ms(s.received_at).into(),
    ]
}

/// Run `run`'s derived fields, then its id, as [`UPDATE_RUN_ROW`] binds them.
pub(crate) fn derived_run_columns(run: &Run) -> Vec<Column> {
    let u = &run.usage;
    vec![
        run.name.clone().into(),
        run.status.as_str().to_owned().into(),
        run.model.clone().into(),
        run.system_prompt.clone().into(),
        run.initial_prompt.clone().into(),
        run.result.as_ref().filter(|v| !v.is_null()).map(json_text).into(),
        run.summary.clone().into(),
        run.failure_reason.clone().into(),
        (u.input_tokens as i64).into(),
        (u.output_tokens as i64).into(),
        (u.cache_read_tokens as i64).into(),
        (u.reasoning_tokens as i64).into(),
        (u.total_tokens as i64).into(),
        (u.requests as i64).into(),
        i64::from(run.step_count).into(),
        to_ms(run.created_at).into(),
        to_ms(run.updated_at).into(),
        run.started_at.map(to_ms).into(),
        run.finished_at.map(to_ms).into(),
        (!run.metadata.is_empty()).then(|| json_text(&run.metadata)).into(),
        run.source.as_ref().map(json_text).into(),
        json_text(&run.tools).into(),
        i64::from(run.max_turns).into(),
        run.session_id.clone().into(),
        run.end_user.clone().into(),
        run.id.clone().into(),
    ]
}

/// Where each of [`REPLACED`] starts for change `c`.
pub(crate) fn replaced_from(c: &RunChange) -> [i64; 3] {
    [i64::from(c.from_step), i64::from(c.from_step), c.from_seq as i64]
}

/// Stores span `$s` of `$project` on `$tx` (a span stored already is replaced).
macro_rules! upsert_span {
    ($d:ident, $tx:expr, $project:expr, $s:expr) => {{
        let q = bind_columns!(sqlx::query(sql!($d, UPSERT_SPAN)), span_columns($project, $s));
        q.execute(&mut *$tx).await?;
    }};
}

/// Writes the derived fields over an assembled run's row `$run` on `$tx`.
macro_rules! update_run_row {
    ($d:ident, $tx:expr, $run:expr) => {{
        let q = bind_columns!(sqlx::query(sql!($d, UPDATE_RUN_ROW)), derived_run_columns($run));
        q.execute(&mut *$tx).await?;
    }};
}

/// Bumps trace `$trace_id`'s version on `$tx`: the new one.
macro_rules! bump_version {
    ($d:ident, $tx:expr, $project:expr, $trace_id:expr) => {{
        let version: i64 = sqlx::query_scalar(sql!(
            $d,
            "INSERT INTO otlp_traces (project, trace_id, version) VALUES (?, ?, 1)
             ON CONFLICT (project, trace_id) DO UPDATE SET version = otlp_traces.version + 1
             RETURNING version"
        ))
        .bind($project)
        .bind($trace_id)
        .fetch_one(&mut *$tx)
        .await?;
        version
    }};
}

/// Every stored span of trace `$trace_id` on `$tx`, by start time.
macro_rules! all_spans {
    ($d:ident, $tx:expr, $project:expr, $trace_id:expr) => {{
        let rows: Vec<SpanRow> = sqlx::query_as(sql!(
            $d,
            format!("SELECT {SPAN_COLUMNS} FROM otlp_spans WHERE project = ? AND trace_id = ? ORDER BY start_ns, span_id")
        ))
        .bind($project)
        .bind($trace_id)
        .fetch_all(&mut *$tx)
        .await?;
        rows.into_iter().map(StoredSpan::from).collect::<Vec<StoredSpan>>()
    }};
}

/// Replaces the steps, tool calls and transcript entries `$c` changed, on `$tx`.
macro_rules! write_change {
    ($d:ident, $tx:expr, $c:expr) => {{
        let c: &RunChange = $c;
        let run_id = &c.run.id;
        let deletes = [sql!($d, REPLACED[0]), sql!($d, REPLACED[1]), sql!($d, REPLACED[2])];
        for (delete, from) in deletes.into_iter().zip(replaced_from(c)) {
            sqlx::query(delete).bind(run_id).bind(from).execute(&mut *$tx).await?;
        }
        if let Some(head) = &c.head {
            sqlx::query(sql!($d, DELETE_HEAD)).bind(run_id).execute(&mut *$tx).await?;
            $d::insert_message(&mut $tx, head).await?;
        }
        for step in &c.steps {
            $d::upsert_step(&mut $tx, step).await?;
            for (pos, call) in step.tool_calls.iter().enumerate() {
                $d::upsert_tool_call(&mut $tx, call, pos).await?;
            }
        }
        for m in &c.messages {
            $d::insert_message(&mut $tx, m).await?;
        }
    }};
}

#[async_trait]
impl<S: SqlStore> SpanStore for S {
    async fn ingest_trace(
        &self,
        project: &str,
        trace_id: &str,
        spans: &[StoredSpan],
        max_spans: u64,
        fold: &mut dyn TraceFold,
    ) -> Result<TraceIngest> {
        if let Db::Sqlite(store) = self.db() {
            if let Some(done) = store.ingest_on_thread(project, trace_id, spans, max_spans, fold).await? {
                return Ok(done);
            }
        }
        with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            D::serialize(&mut tx, &format!("runlens.otlp:{project}:{trace_id}")).await?;
            let version = bump_version!(D, tx, project, trace_id);
            if fold.version() != Some(version - 1) {
                fold.reset(all_spans!(D, tx, project, trace_id), version - 1);
            }
            let held = fold.held_with(spans);
            if held > max_spans {
                tx.rollback().await?;
                return Ok(TraceIngest::Full { stored: held });
            }
            for s in spans {
                upsert_span!(D, tx, project, s);
            }
            let Some(mut change) = fold.fold(spans, version) else {
                tx.commit().await?;
                return Ok(TraceIngest::Stored(None));
            };
            let existing: Option<(String, Option<String>, String)> =
                sqlx::query_as(sql!(D, RUN_OWNER)).bind(&change.run.id).fetch_optional(&mut *tx).await?;
            let before = match existing {
                Some((p, source, _)) if p != project || source.is_none() => {
                    tx.rollback().await?;
                    return Ok(TraceIngest::RunTaken(change.run.id));
                }
                Some((_, _, status)) => {
                    update_run_row!(D, tx, &change.run);
                    RunStatus::parse(&status)
                }
                None => {
                    if change.from_step > 0 || change.from_seq > 0 {
                        // The run's rows are gone: all of them again.
                        change = fold.whole().unwrap_or(change);
                    }
                    D::insert_run_row(&mut tx, &change.run).await?;
                    None
                }
            };
            write_change!(D, tx, &change);
            tx.commit().await?;
            Ok(TraceIngest::Stored(Some(Box::new(IngestedRun { run: change.run, before }))))
        })
    }

    async fn trace_spans(&self, project: &str, trace_id: &str, limit: u32) -> Result<Vec<StoredSpan>> {
        let rows: Vec<SpanRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                format!(
                    "SELECT {SPAN_COLUMNS} FROM otlp_spans WHERE project = ? AND trace_id = ?
                     ORDER BY start_ns, span_id LIMIT ?"
                )
            ))
            .bind(project)
            .bind(trace_id)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(StoredSpan::from).collect())
    }
}
