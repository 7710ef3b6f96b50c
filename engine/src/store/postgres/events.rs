//! The event log and the price table in PostgreSQL.
//!
//! `run_events` has the primary key `(run_id, seq)`: a batch append is one
//! multi-row insert per few hundred events, in the batch's order, and a
//! replay is an index range scan of one run. Events are never updated; an
//! event whose `(run_id, seq)` is already stored is skipped (as SQLite's
//! `INSERT OR IGNORE`), also when another server stores it at the same time.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::Utc;
use sqlx::{PgPool, Postgres, QueryBuilder};

use super::PgStore;
use crate::cost::ModelPrice;
use crate::error::Result;
use crate::model::{Event, EventKind};
use crate::store::{from_ms, to_ms, EventStore, PriceStore};

/// Rows per INSERT statement (5 parameters each, well under PostgreSQL's
/// limit of 65535).
const ROWS_PER_INSERT: usize = 500;

pub(super) async fn append_events(pool: &PgPool, events: &[Arc<Event>]) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let mut tx = pool.begin().await?;
    insert_events(&mut tx, events, &events.iter().map(|e| e.seq).collect::<Vec<_>>()).await?;
    tx.commit().await?;
    Ok(())
}

/// Stores a batch with each run's events numbered after the last one stored,
/// by whichever server stored it, and tells the other servers on `channel`
/// (as store instance `instance`) which `seq` of which run were committed.
/// Each run's numbering holds a transaction-scoped advisory lock on the run,
/// taken in run-id order, so two servers appending to one run take turns and
/// two batches never wait on each other in a cycle.
pub(super) async fn append_events_numbered(
    pool: &PgPool,
    events: &[Arc<Event>],
    channel: &str,
    instance: &str,
) -> Result<Vec<u64>> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let mut runs: Vec<&str> = events.iter().map(|e| e.run_id.as_str()).collect();
    runs.sort_unstable();
    runs.dedup();
    let mut tx = pool.begin().await?;
    let mut next = std::collections::HashMap::new();
    for run in &runs {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('runlens.events:' || $1))")
            .bind(run)
            .execute(&mut *tx)
            .await?;
        let last: i64 = sqlx::query_scalar("SELECT coalesce(max(seq), 0) FROM run_events WHERE run_id = $1")
            .bind(run)
            .fetch_one(&mut *tx)
            .await?;
        next.insert(*run, last.max(0) as u64);
    }
    let mut ranges: std::collections::BTreeMap<&str, (u64, u64)> = std::collections::BTreeMap::new();
    let seqs: Vec<u64> = events
        .iter()
        .map(|e| {
            let n = next.get_mut(e.run_id.as_str()).expect("every run of the batch is counted");
            *n += 1;
            let range = ranges.entry(e.run_id.as_str()).or_insert((*n, *n));
            range.1 = *n;
            *n
        })
        .collect();
    insert_events(&mut tx, events, &seqs).await?;
    for (run_id, (first, last)) in ranges {
        let notice =
            crate::store::cluster::Notice::Events { from: instance.to_owned(), run_id: run_id.to_owned(), first, last };
        super::cluster::notify_in(&mut tx, channel, &notice).await?;
    }
    tx.commit().await?;
    Ok(seqs)
}

/// Inserts `events` numbered `seqs` (an event already stored is skipped)
/// and marks the runs whose `run.finished` this stores as announced.
async fn insert_events(tx: &mut sqlx::PgConnection, events: &[Arc<Event>], seqs: &[u64]) -> Result<()> {
    let rows: Vec<(&Event, u64, String)> =
        events.iter().zip(seqs).map(|(e, &seq)| (e.as_ref(), seq, e.kind.data_json())).collect();
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let mut q = QueryBuilder::<Postgres>::new("INSERT INTO run_events (run_id, seq, type, data, at) ");
        q.push_values(chunk, |mut b, (e, seq, data)| {
            b.push_bind(&e.run_id)
                .push_bind(*seq as i64)
                .push_bind(e.kind.name())
                .push_bind(data.as_str())
                .push_unseparated("::jsonb")
                .push_bind(to_ms(e.at));
        });
        q.push(" ON CONFLICT (run_id, seq) DO NOTHING");
        q.build().execute(&mut *tx).await?;
    }
    // A stored `run.finished` announces its run's end.
    for e in events.iter().filter(|e| matches!(e.kind, EventKind::RunFinished { .. })) {
        sqlx::query("UPDATE runs SET finish_unannounced = FALSE WHERE id = $1 AND finish_unannounced")
            .bind(&e.run_id)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

#[derive(sqlx::FromRow)]
struct EventRow {
    run_id: String,
    seq: i64,
    #[sqlx(rename = "type")]
    kind: String,
    data: String,
    at: i64,
}

pub(super) async fn events_after(pool: &PgPool, run_id: &str, after: u64, limit: u32) -> Result<Vec<Event>> {
    let rows = sqlx::query_as::<_, EventRow>(
        "SELECT run_id, seq, type, data::text AS data, at FROM run_events
         WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
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

pub(super) async fn last_event(pool: &PgPool, run_id: &str) -> Result<Option<(u64, String)>> {
    let row: Option<(i64, String)> =
        sqlx::query_as("SELECT seq, type FROM run_events WHERE run_id = $1 ORDER BY seq DESC LIMIT 1")
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

pub(super) async fn prices(pool: &PgPool, project: &str) -> Result<Vec<ModelPrice>> {
    let rows = sqlx::query_as::<_, PriceRow>(
        "SELECT model, input, output, cache_read, cache_write, reasoning, updated_at
         FROM project_prices WHERE project = $1 ORDER BY model COLLATE \"C\"",
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

pub(super) async fn put_price(pool: &PgPool, project: &str, p: &ModelPrice) -> Result<()> {
    sqlx::query(
        "INSERT INTO project_prices (project, model, input, output, cache_read, cache_write, reasoning, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (project, model) DO UPDATE SET input = EXCLUDED.input, output = EXCLUDED.output,
            cache_read = EXCLUDED.cache_read, cache_write = EXCLUDED.cache_write, reasoning = EXCLUDED.reasoning,
            updated_at = EXCLUDED.updated_at",
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

pub(super) async fn delete_price(pool: &PgPool, project: &str, model: &str) -> Result<bool> {
    let n = sqlx::query("DELETE FROM project_prices WHERE project = $1 AND model = $2")
        .bind(project)
        .bind(model)
        .execute(pool)
        .await?
        .rows_affected();
    Ok(n > 0)
}

#[async_trait]
impl EventStore for PgStore {
    async fn append_events(&self, events: &[Arc<Event>]) -> Result<()> {
        append_events(&self.pool, events).await
    }

    async fn append_events_numbered(&self, events: &[Arc<Event>]) -> Result<Vec<u64>> {
        append_events_numbered(&self.pool, events, &self.channel, &self.instance).await
    }

    async fn events_after(&self, run_id: &str, after: u64, limit: u32) -> Result<Vec<Event>> {
        events_after(&self.pool, run_id, after, limit).await
    }

    async fn last_event(&self, run_id: &str) -> Result<Option<(u64, String)>> {
        last_event(&self.pool, run_id).await
    }
}

#[async_trait]
impl PriceStore for PgStore {
    async fn prices(&self, project: &str) -> Result<Vec<ModelPrice>> {
        prices(&self.pool, project).await
    }

    async fn put_price(&self, project: &str, price: &ModelPrice) -> Result<()> {
        put_price(&self.pool, project, price).await
    }

    async fn delete_price(&self, project: &str, model: &str) -> Result<bool> {
        delete_price(&self.pool, project, model).await
    }
}
