//! The event log and the price table in SQLite.
//!
//! `run_events` is a WITHOUT ROWID table clustered on `(run_id, seq)`: a
//! batch is appended on the write thread (see `hot::append_events`), and a
//! replay is a range scan of one run. Events are never updated.

use chrono::Utc;
use sqlx::SqlitePool;

use crate::cost::ModelPrice;
use crate::error::Result;
use crate::model::{Event, EventKind};
use crate::store::{from_ms, to_ms};

#[derive(sqlx::FromRow)]
struct EventRow {
    run_id: String,
    seq: i64,
    #[sqlx(rename = "type")]
    kind: String,
    data: String,
    at: i64,
}

pub(super) async fn events_after(pool: &SqlitePool, run_id: &str, after: u64, limit: u32) -> Result<Vec<Event>> {
    let rows = sqlx::query_as::<_, EventRow>(
        "SELECT run_id, seq, type, data, at FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
    )
    .bind(run_id)
    .bind(after.min(i64::MAX as u64) as i64)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let kind = EventKind::from_parts(&r.kind, &r.data);
            if kind.is_none() {
                tracing::warn!(run_id = %r.run_id, seq = r.seq, kind = %r.kind, "unreadable stored event skipped");
            }
            Some(Event { kind: kind?, run_id: r.run_id, seq: r.seq as u64, at: from_ms(r.at) })
        })
        .collect())
}

pub(super) async fn last_event(pool: &SqlitePool, run_id: &str) -> Result<Option<(u64, String)>> {
    let row: Option<(i64, String)> =
        sqlx::query_as("SELECT seq, type FROM run_events WHERE run_id = ? ORDER BY seq DESC LIMIT 1")
            .bind(run_id)
            .fetch_optional(pool)
            .await?;
    Ok(row.map(|(seq, kind)| (seq as u64, kind)))
}

#[derive(sqlx::FromRow)]
struct PriceRow {
    model: String,
    input: f64,
    output: f64,
    cache_read: f64,
    cache_write: f64,
    reasoning: f64,
    updated_at: i64,
}

pub(super) async fn prices(pool: &SqlitePool, project: &str) -> Result<Vec<ModelPrice>> {
    let rows = sqlx::query_as::<_, PriceRow>(
        "SELECT model, input, output, cache_read, cache_write, reasoning, updated_at
         FROM project_prices WHERE project = ? ORDER BY model",
    )
    .bind(project)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| ModelPrice {
            model: r.model,
            input: r.input,
            output: r.output,
            cache_read: r.cache_read,
            cache_write: r.cache_write,
            reasoning: r.reasoning,
            updated_at: (r.updated_at > 0).then(|| from_ms(r.updated_at)),
        })
        .collect())
}

pub(super) async fn put_price(pool: &SqlitePool, project: &str, p: &ModelPrice) -> Result<()> {
    sqlx::query(
        "INSERT OR REPLACE INTO project_prices
            (project, model, input, output, cache_read, cache_write, reasoning, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(project)
    .bind(&p.model)
    .bind(p.input)
    .bind(p.output)
    .bind(p.cache_read)
    .bind(p.cache_write)
    .bind(p.reasoning)
    .bind(to_ms(p.updated_at.unwrap_or_else(Utc::now)))
    .execute(pool)
    .await?;
    Ok(())
}

pub(super) async fn delete_price(pool: &SqlitePool, project: &str, model: &str) -> Result<bool> {
    let n = sqlx::query("DELETE FROM project_prices WHERE project = ? AND model = ?")
        .bind(project)
        .bind(model)
        .execute(pool)
        .await?
        .rows_affected();
    Ok(n > 0)
}
