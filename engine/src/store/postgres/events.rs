//! Appending to the event log in PostgreSQL (the reads are `store::sql::events`).
//!
//! `run_events` has the primary key `(run_id, seq)`: a batch append is one
//! multi-row insert per few hundred events, in the batch's order, and a
//! replay is an index range scan of one run. Events are never updated; an
//! event whose `(run_id, seq)` is already stored is skipped (as SQLite's
//! `INSERT OR IGNORE`), also when another server stores it at the same time.

use std::sync::Arc;

use sqlx::{PgPool, Postgres, QueryBuilder};

use super::PgStore;
use crate::error::Result;
use crate::model::{Event, EventKind};
use crate::store::to_ms;

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

impl PgStore {
    /// Appends `events` as numbered (see [`append_events`]).
    pub(crate) async fn append_events_batched(&self, events: &[Arc<Event>]) -> Result<()> {
        append_events(&self.pool, events).await
    }

    /// Appends `events` numbered after each run's last stored event (see
    /// [`append_events_numbered`]).
    pub(crate) async fn append_events_renumbered(&self, events: &[Arc<Event>]) -> Result<Vec<u64>> {
        append_events_numbered(&self.pool, events, &self.channel, &self.instance).await
    }
}
