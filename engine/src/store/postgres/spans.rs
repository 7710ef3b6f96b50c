//! OTLP spans and the runs assembled from them, in PostgreSQL (see `store::spans`).

use async_trait::async_trait;
use sqlx::PgPool;

use super::writes::{insert_message, insert_run_row, upsert_step, upsert_tool_call};
use super::PgStore;
use crate::error::Result;
use crate::model::Run;
use crate::store::rows::spans::{span_payloads, SpanRow};
use crate::store::spans::{Derive, DerivedRun, SpanStore, StoredSpan, TraceIngest};
use crate::store::{json_text, to_ms};

/// The columns of `otlp_spans` as [`SpanRow`] reads them (JSONB as text).
const SPAN_COLUMNS: &str = "trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns, \
    attributes::text AS attributes, events::text AS events, status_code, status_message, service_name, scope_name, \
    received_at";

#[async_trait]
impl SpanStore for PgStore {
    async fn ingest_trace(
        &self,
        project: &str,
        trace_id: &str,
        spans: &[StoredSpan],
        max_spans: u64,
        derive: Derive<'_>,
    ) -> Result<TraceIngest> {
        ingest_trace(&self.pool, project, trace_id, spans, max_spans, derive).await
    }

    async fn trace_spans(&self, project: &str, trace_id: &str, limit: u32) -> Result<Vec<StoredSpan>> {
        trace_spans(&self.pool, project, trace_id, limit).await
    }
}

async fn ingest_trace(
    pool: &PgPool,
    project: &str,
    trace_id: &str,
    spans: &[StoredSpan],
    max_spans: u64,
    derive: Derive<'_>,
) -> Result<TraceIngest> {
    let mut tx = pool.begin().await?;
    // Ingests of one trace take turns (PostgreSQL runs transactions
    // concurrently): each derives the run from every span stored before it.
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('runlens.otlp:' || $1 || ':' || $2))")
        .bind(project)
        .bind(trace_id)
        .execute(&mut *tx)
        .await?;
    for s in spans {
        upsert_span(&mut tx, project, s).await?;
    }
    let held: i64 = sqlx::query_scalar("SELECT count(*) FROM otlp_spans WHERE project = $1 AND trace_id = $2")
        .bind(project)
        .bind(trace_id)
        .fetch_one(&mut *tx)
        .await?;
    if held as u64 > max_spans {
        tx.rollback().await?;
        return Ok(TraceIngest::Full { stored: held as u64 });
    }
    let rows = sqlx::query_as::<_, SpanRow>(&format!(
        "SELECT {SPAN_COLUMNS} FROM otlp_spans WHERE project = $1 AND trace_id = $2 ORDER BY start_ns, span_id"
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
        sqlx::query_as("SELECT project, source::text FROM runs WHERE id = $1 FOR UPDATE")
            .bind(&derived.run.id)
            .fetch_optional(&mut *tx)
            .await?;
    match existing {
        Some((p, source)) if p != project || source.is_none() => {
            tx.rollback().await?;
            return Ok(TraceIngest::RunTaken(derived.run.id));
        }
        Some(_) => {
            update_run_row(&mut tx, &derived.run).await?;
            for table in ["tool_calls", "steps", "messages"] {
                sqlx::query(&format!("DELETE FROM {table} WHERE run_id = $1"))
                    .bind(&derived.run.id)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        None => {
            insert_run_row(&mut tx, &derived.run).await?;
        }
    }
    write_history(&mut tx, &derived).await?;
    tx.commit().await?;
    Ok(TraceIngest::Stored(Some(Box::new(derived.run))))
}

async fn trace_spans(pool: &PgPool, project: &str, trace_id: &str, limit: u32) -> Result<Vec<StoredSpan>> {
    let rows = sqlx::query_as::<_, SpanRow>(&format!(
        "SELECT {SPAN_COLUMNS} FROM otlp_spans WHERE project = $1 AND trace_id = $2
             ORDER BY start_ns, span_id LIMIT $3"
    ))
    .bind(project)
    .bind(trace_id)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(StoredSpan::from).collect())
}

async fn upsert_span(tx: &mut sqlx::PgConnection, project: &str, s: &StoredSpan) -> Result<()> {
    let (attributes, events) = span_payloads(s);
    sqlx::query(
        "INSERT INTO otlp_spans (project, trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns,
            attributes, events, status_code, status_message, service_name, scope_name, received_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10::jsonb, $11, $12, $13, $14, $15)
         ON CONFLICT (project, trace_id, span_id) DO UPDATE SET parent_span_id = EXCLUDED.parent_span_id,
            name = EXCLUDED.name, kind = EXCLUDED.kind, start_ns = EXCLUDED.start_ns, end_ns = EXCLUDED.end_ns,
            attributes = EXCLUDED.attributes, events = EXCLUDED.events, status_code = EXCLUDED.status_code,
            status_message = EXCLUDED.status_message, service_name = EXCLUDED.service_name,
            scope_name = EXCLUDED.scope_name, received_at = EXCLUDED.received_at",
    )
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
    .execute(tx)
    .await?;
    Ok(())
}

/// Writes the derived fields over an assembled run's row.
async fn update_run_row(tx: &mut sqlx::PgConnection, run: &Run) -> Result<()> {
    let u = &run.usage;
    sqlx::query(
        "UPDATE runs SET name = $1, status = $2, model = $3, system_prompt = $4, initial_prompt = $5,
            result = $6::jsonb, summary = $7, failure_reason = $8, input_tokens = $9, output_tokens = $10,
            cache_read_tokens = $11, reasoning_tokens = $12, total_tokens = $13, requests = $14, step_count = $15,
            created_at = $16, updated_at = $17, started_at = $18, finished_at = $19, metadata = $20::jsonb,
            source = $21::jsonb, tools = $22::jsonb, max_turns = $23
         WHERE id = $24",
    )
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
    .execute(tx)
    .await?;
    Ok(())
}

async fn write_history(tx: &mut sqlx::PgConnection, d: &DerivedRun) -> Result<()> {
    for step in &d.steps {
        upsert_step(&mut *tx, step).await?;
        for (pos, c) in step.tool_calls.iter().enumerate() {
            upsert_tool_call(&mut *tx, c, pos).await?;
        }
    }
    for m in &d.messages {
        insert_message(&mut *tx, m).await?;
    }
    Ok(())
}
