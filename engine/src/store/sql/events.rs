//! [`EventStore`] and [`PriceStore`] for every backend.
//!
//! `run_events` is keyed `(run_id, seq)` (a WITHOUT ROWID table clustered on
//! it in SQLite): a replay is a range scan of one run, and events are never
//! updated. Appending is each backend's own path: SQLite's goes through its
//! write thread (group commit, see `sqlite::hot`), PostgreSQL's is one
//! multi-row insert per few hundred events and, where several servers
//! share the database, numbers each run's events under a lock on the run
//! and tells the other servers (see `postgres::events`).

use std::sync::Arc;

use async_trait::async_trait;
use chrono::Utc;

use super::{sql, with_db, Db, SqlStore};
use crate::cost::ModelPrice;
use crate::error::Result;
use crate::model::{Event, EventKind};
use crate::store::{from_ms, to_ms, EventStore, PriceStore};

#[derive(sqlx::FromRow)]
struct EventRow {
    run_id: String,
    seq: i64,
    #[sqlx(rename = "type")]
    kind: String,
    data: String,
    at: i64,
}

impl EventRow {
    /// The event, or `None` (logged) when its kind or data cannot be read.
    fn into_event(self) -> Option<Event> {
        let kind = EventKind::from_parts(&self.kind, &self.data);
        if kind.is_none() {
            tracing::warn!(run_id = %self.run_id, seq = self.seq, kind = %self.kind, "unreadable stored event skipped");
        }
        Some(Event { kind: kind?, run_id: self.run_id, seq: self.seq as u64, at: from_ms(self.at) })
    }
}

#[async_trait]
impl<S: SqlStore> EventStore for S {
    async fn append_events(&self, events: &[Arc<Event>]) -> Result<()> {
        match self.db() {
            Db::Sqlite(store) => store.append_events_on_thread(events).await,
            #[cfg(feature = "postgres")]
            Db::Postgres(store) => store.append_events_batched(events).await,
        }
    }

    async fn append_events_numbered(&self, events: &[Arc<Event>]) -> Result<Vec<u64>> {
        match self.db() {
            // One server: the numbers given are the numbers kept.
            Db::Sqlite(store) => {
                store.append_events_on_thread(events).await?;
                Ok(events.iter().map(|e| e.seq).collect())
            }
            #[cfg(feature = "postgres")]
            Db::Postgres(store) => store.append_events_renumbered(events).await,
        }
    }

    async fn events_after(&self, run_id: &str, after: u64, limit: u32) -> Result<Vec<Event>> {
        let rows: Vec<EventRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                "SELECT run_id, seq, type, data::text AS data, at FROM run_events
                 WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"
            ))
            .bind(run_id)
            .bind(after.min(i64::MAX as u64) as i64)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().filter_map(EventRow::into_event).collect())
    }

    async fn last_event(&self, run_id: &str) -> Result<Option<(u64, String)>> {
        let row: Option<(i64, String)> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(D, "SELECT seq, type FROM run_events WHERE run_id = ? ORDER BY seq DESC LIMIT 1"))
                .bind(run_id)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.map(|(seq, kind)| (seq as u64, kind)))
    }
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

impl From<PriceRow> for ModelPrice {
    fn from(r: PriceRow) -> ModelPrice {
        ModelPrice {
            model: r.model,
            input: r.input,
            output: r.output,
            cache_read: r.cache_read,
            cache_write: r.cache_write,
            reasoning: r.reasoning,
            updated_at: (r.updated_at > 0).then(|| from_ms(r.updated_at)),
        }
    }
}

#[async_trait]
impl<S: SqlStore> PriceStore for S {
    async fn prices(&self, project: &str) -> Result<Vec<ModelPrice>> {
        let rows: Vec<PriceRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                "SELECT model, input, output, cache_read, cache_write, reasoning, updated_at
                 FROM project_prices WHERE project = ? ORDER BY model COLLATE \"C\""
            ))
            .bind(project)
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(ModelPrice::from).collect())
    }

    async fn put_price(&self, project: &str, p: &ModelPrice) -> Result<()> {
        with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(
                D,
                "INSERT INTO project_prices (project, model, input, output, cache_read, cache_write, reasoning,
                    updated_at)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                 ON CONFLICT (project, model) DO UPDATE SET input = excluded.input, output = excluded.output,
                    cache_read = excluded.cache_read, cache_write = excluded.cache_write,
                    reasoning = excluded.reasoning, updated_at = excluded.updated_at"
            ))
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
        });
        Ok(())
    }

    async fn delete_price(&self, project: &str, model: &str) -> Result<bool> {
        let done = with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(D, "DELETE FROM project_prices WHERE project = ? AND model = ?"))
                .bind(project)
                .bind(model)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(done > 0)
    }
}
