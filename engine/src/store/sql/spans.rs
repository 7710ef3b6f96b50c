//! [`SpanStore`] for every backend: OTLP spans and the runs assembled from
//! them (see `store::spans`).
//!
//! Ingests of one trace take turns ([`Dialect::serialize`]; on SQLite the
//! first statement writes, so the transaction holds the write lock from
//! there on): each derives the run from every span stored before it.

use async_trait::async_trait;

use super::{sql, with_db, Conn, Dialect, RowWrites, SqlStore};
use crate::error::Result;
use crate::store::rows::spans::{span_payloads, SpanRow};
use crate::store::spans::{Derive, DerivedRun, SpanStore, StoredSpan, TraceIngest};
use crate::store::{json_text, to_ms};

/// The columns of `otlp_spans` as [`SpanRow`] reads them (JSON as text).
const SPAN_COLUMNS: &str = "trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns, \
    attributes::text AS attributes, events::text AS events, status_code, status_message, service_name, scope_name, \
    received_at";

/// Stores span `$s` of `$project` on `$tx` (a span stored already is replaced).
macro_rules! upsert_span {
    ($d:ident, $tx:expr, $project:expr, $s:expr) => {{
        let (project, s): (&str, &StoredSpan) = ($project, $s);
        let (attributes, events) = span_payloads(s);
        sqlx::query(sql!(
            $d,
            "INSERT INTO otlp_spans (project, trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns,
                attributes, events, status_code, status_message, service_name, scope_name, received_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?::jsonb, ?, ?, ?, ?, ?)
             ON CONFLICT (project, trace_id, span_id) DO UPDATE SET parent_span_id = excluded.parent_span_id,
                name = excluded.name, kind = excluded.kind, start_ns = excluded.start_ns, end_ns = excluded.end_ns,
                attributes = excluded.attributes, events = excluded.events, status_code = excluded.status_code,
                status_message = excluded.status_message, service_name = excluded.service_name,
                scope_name = excluded.scope_name, received_at = excluded.received_at"
        ))
        .bind(project)
        .bind(&s.trace_id)
        .bind(&s.span_id)
        .bind(&s.parent_span_id)
        .bind(&s.name)
        .bind(i64::from(s.kind))
        .bind(s.start_ns)
        .bind(s.end_ns)
        .bind(attributes)
        .bind(events)
        .bind(i64::from(s.status_code))
        .bind(&s.status_message)
        .bind(&s.service_name)
        .bind(&s.scope_name)
        .bind(to_ms(s.received_at))
        .execute(&mut *$tx)
        .await?;
    }};
}

/// Writes the derived fields over an assembled run's row `$run` on `$tx`.
macro_rules! update_run_row {
    ($d:ident, $tx:expr, $run:expr) => {{
        let run: &crate::model::Run = $run;
        let u = &run.usage;
        sqlx::query(sql!(
            $d,
            "UPDATE runs SET name = ?, status = ?, model = ?, system_prompt = ?, initial_prompt = ?,
                result = ?::jsonb, summary = ?, failure_reason = ?, input_tokens = ?, output_tokens = ?,
                cache_read_tokens = ?, reasoning_tokens = ?, total_tokens = ?, requests = ?, step_count = ?,
                created_at = ?, updated_at = ?, started_at = ?, finished_at = ?, metadata = ?::jsonb,
                source = ?::jsonb, tools = ?::jsonb, max_turns = ?
             WHERE id = ?"
        ))
        .bind(&run.name)
        .bind(run.status.as_str())
        .bind(&run.model)
        .bind(&run.system_prompt)
        .bind(&run.initial_prompt)
        .bind(run.result.as_ref().filter(|v| !v.is_null()).map(json_text))
        .bind(&run.summary)
        .bind(&run.failure_reason)
        .bind(u.input_tokens as i64)
        .bind(u.output_tokens as i64)
        .bind(u.cache_read_tokens as i64)
        .bind(u.reasoning_tokens as i64)
        .bind(u.total_tokens as i64)
        .bind(u.requests as i64)
        .bind(i64::from(run.step_count))
        .bind(to_ms(run.created_at))
        .bind(to_ms(run.updated_at))
        .bind(run.started_at.map(to_ms))
        .bind(run.finished_at.map(to_ms))
        .bind((!run.metadata.is_empty()).then(|| json_text(&run.metadata)))
        .bind(run.source.as_ref().map(json_text))
        .bind(json_text(&run.tools))
        .bind(i64::from(run.max_turns))
        .bind(&run.id)
        .execute(&mut *$tx)
        .await?;
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
        derive: Derive<'_>,
    ) -> Result<TraceIngest> {
        with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin().await?;
            D::serialize(&mut tx, &format!("runlens.otlp:{project}:{trace_id}")).await?;
            for s in spans {
                upsert_span!(D, tx, project, s);
            }
            let held: i64 =
                sqlx::query_scalar(sql!(D, "SELECT count(*) FROM otlp_spans WHERE project = ? AND trace_id = ?"))
                    .bind(project)
                    .bind(trace_id)
                    .fetch_one(&mut *tx)
                    .await?;
            if held as u64 > max_spans {
                tx.rollback().await?;
                return Ok(TraceIngest::Full { stored: held as u64 });
            }
            let rows: Vec<SpanRow> = sqlx::query_as(sql!(
                D,
                format!("SELECT {SPAN_COLUMNS} FROM otlp_spans WHERE project = ? AND trace_id = ? ORDER BY start_ns, span_id")
            ))
            .bind(project)
            .bind(trace_id)
            .fetch_all(&mut *tx)
            .await?;
            let all: Vec<StoredSpan> = rows.into_iter().map(StoredSpan::from).collect();
            let Some(derived) = derive(&all) else {
                tx.commit().await?;
                return Ok(TraceIngest::Stored(None));
            };
            let existing: Option<(String, Option<String>)> =
                sqlx::query_as(sql!(D, "SELECT project, source::text FROM runs WHERE id = ? FOR UPDATE"))
                    .bind(&derived.run.id)
                    .fetch_optional(&mut *tx)
                    .await?;
            match existing {
                Some((p, source)) if p != project || source.is_none() => {
                    tx.rollback().await?;
                    return Ok(TraceIngest::RunTaken(derived.run.id));
                }
                Some(_) => {
                    update_run_row!(D, tx, &derived.run);
                    for delete in [
                        sql!(D, "DELETE FROM tool_calls WHERE run_id = ?"),
                        sql!(D, "DELETE FROM steps WHERE run_id = ?"),
                        sql!(D, "DELETE FROM messages WHERE run_id = ?"),
                    ] {
                        sqlx::query(delete).bind(&derived.run.id).execute(&mut *tx).await?;
                    }
                }
                None => {
                    D::insert_run_row(&mut tx, &derived.run).await?;
                }
            }
            write_history::<D>(&mut tx, &derived).await?;
            tx.commit().await?;
            Ok(TraceIngest::Stored(Some(Box::new(derived.run))))
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

async fn write_history<D: RowWrites>(tx: &mut Conn<D>, d: &DerivedRun) -> Result<()> {
    for step in &d.steps {
        D::upsert_step(&mut *tx, step).await?;
        for (pos, c) in step.tool_calls.iter().enumerate() {
            D::upsert_tool_call(&mut *tx, c, pos).await?;
        }
    }
    for m in &d.messages {
        D::insert_message(&mut *tx, m).await?;
    }
    Ok(())
}
