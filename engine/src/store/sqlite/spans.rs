//! OTLP ingest on the write thread (see `commit`).
//!
//! Through sqlx, one ingest held SQLite's one write lock for about a
//! millisecond: the trace's version, each span, the run's owner and row,
//! its steps, calls and messages, each a round trip to a connection's
//! worker thread, and the fold between them. A run's writes waiting behind
//! that lock made ordinary runs about twice as slow while a trace streamed
//! in. Here the fold runs first, on the caller's task, from the trace as
//! this process last stored it; the write thread then checks that the trace
//! is still at that version and writes the rows in one job with cached
//! statements, in the same transaction as the runs' own writes.
//!
//! When the check fails (another ingest moved the trace on: a second engine
//! on the file), or the change needs what only the full path knows (the
//! run's rows are gone, or the id is another run's), the job writes
//! nothing and the caller takes the full path of `sql::spans`, which reads
//! the trace again under the lock. Both paths write the same statements.

use rusqlite::{params, Connection, OptionalExtension};

use super::hot::{insert_message, insert_run, lite_value, upsert_call, upsert_step, NewRun};
use crate::store::rows::params::{CallParams, Column, MessageParams, StepParams};
use crate::store::spans::RunChange;
use crate::store::sql::spans::{
    derived_run_columns, replaced_from, span_columns, DELETE_HEAD, REPLACED, RUN_OWNER, UPDATE_RUN_ROW, UPSERT_SPAN,
};
use crate::store::sql::{sql, Lite};

/// One ingest's rows, encoded on the caller's task.
pub(super) struct IngestRows {
    project: String,
    trace_id: String,
    /// The trace's version the fold started from (0: a new trace).
    after: i64,
    spans: Vec<Vec<Column>>,
    change: Option<ChangeRows>,
}

/// What a [`RunChange`] writes.
struct ChangeRows {
    run_id: String,
    derived: Vec<Column>,
    /// The whole run, when the change holds all of it: inserted if its row is new.
    new_run: Option<NewRun>,
    replaced_from: [i64; 3],
    head: Option<MessageParams>,
    steps: Vec<(StepParams, Vec<CallParams>)>,
    messages: Vec<MessageParams>,
}

impl IngestRows {
    pub(super) fn new(
        project: &str,
        trace_id: &str,
        after: i64,
        spans: &[crate::store::StoredSpan],
        change: Option<&RunChange>,
    ) -> Self {
        Self {
            project: project.to_owned(),
            trace_id: trace_id.to_owned(),
            after,
            spans: spans.iter().map(|s| span_columns(project, s)).collect(),
            change: change.map(|c| ChangeRows {
                run_id: c.run.id.clone(),
                derived: derived_run_columns(&c.run),
                new_run: (c.from_step == 0 && c.from_seq == 0).then(|| NewRun::new(&c.run, &[], &[])),
                replaced_from: replaced_from(c),
                head: c.head.as_ref().map(MessageParams::from),
                steps: (c.steps.iter())
                    .map(|s| {
                        let calls = s.tool_calls.iter().enumerate().map(|(p, c)| CallParams::new(c, p));
                        (StepParams::from(s), calls.collect())
                    })
                    .collect(),
                messages: c.messages.iter().map(MessageParams::from).collect(),
            }),
        }
    }
}

/// What a kept ingest found: the run's status before it (`None`: no run
/// changed, or the run is new).
pub(super) type Before = Option<String>;

/// Writes an ingest; `None` (nothing kept) when the trace is no longer at
/// the version the fold started from, or the change is for the full path.
pub(super) fn ingest(conn: &Connection, rows: &IngestRows) -> rusqlite::Result<Option<Before>> {
    let moved_on = if rows.after == 0 {
        let mut new = conn.prepare_cached(
            "INSERT INTO otlp_traces (project, trace_id, version) VALUES (?, ?, 1)
             ON CONFLICT (project, trace_id) DO NOTHING",
        )?;
        new.execute(params![rows.project, rows.trace_id])? == 0
    } else {
        let mut next = conn.prepare_cached(
            "UPDATE otlp_traces SET version = version + 1 WHERE project = ? AND trace_id = ? AND version = ?",
        )?;
        next.execute(params![rows.project, rows.trace_id, rows.after])? == 0
    };
    if moved_on {
        return Ok(None);
    }
    let mut upsert = conn.prepare_cached(sql!(Lite, UPSERT_SPAN))?;
    for span in &rows.spans {
        upsert.execute(rusqlite::params_from_iter(span.iter().map(lite_value)))?;
    }
    match &rows.change {
        None => Ok(Some(None)),
        Some(c) => write_change(conn, &rows.project, c),
    }
}

fn write_change(conn: &Connection, project: &str, c: &ChangeRows) -> rusqlite::Result<Option<Before>> {
    let mut owner = conn.prepare_cached(sql!(Lite, RUN_OWNER))?;
    let owner: Option<(String, Option<String>, String)> =
        owner.query_row([&c.run_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional()?;
    let before = match (owner, &c.new_run) {
        (Some((p, Some(_), status)), _) if p == project => {
            let derived = c.derived.iter().map(lite_value);
            conn.prepare_cached(sql!(Lite, UPDATE_RUN_ROW))?.execute(rusqlite::params_from_iter(derived))?;
            Some(status)
        }
        (None, Some(new_run)) => {
            if insert_run(conn, new_run)?.is_none() {
                return Ok(None);
            }
            None
        }
        // Another project's or runlens's run, or rows gone that only part
        // of the run would replace: the full path decides.
        _ => return Ok(None),
    };
    let deletes = [sql!(Lite, REPLACED[0]), sql!(Lite, REPLACED[1]), sql!(Lite, REPLACED[2])];
    for (delete, from) in deletes.into_iter().zip(c.replaced_from) {
        conn.prepare_cached(delete)?.execute(params![c.run_id, from])?;
    }
    if let Some(head) = &c.head {
        conn.prepare_cached(sql!(Lite, DELETE_HEAD))?.execute([&c.run_id])?;
        insert_message(conn, head)?;
    }
    for (step, calls) in &c.steps {
        upsert_step(conn, step)?;
        for call in calls {
            upsert_call(conn, call)?;
        }
    }
    for m in &c.messages {
        insert_message(conn, m)?;
    }
    Ok(Some(before))
}
