//! [`WebhookStore`] for every backend: signing secrets, subscriptions, the
//! outbox of status changes (filled by the database itself: the
//! `runs_status_changes` trigger of each backend's migrations) and the
//! deliveries with their attempts. A delivery's payload is TEXT on every
//! database, kept byte for byte: it is signed.
//!
//! Several servers may run the webhook worker against one database at once
//! (PostgreSQL); on SQLite the one writer serializes them all the more:
//! - a change is taken by deleting it (`fan_out`), skipping one another
//!   worker is fanning out right now, so it is fanned out once;
//! - deliveries are claimed with `FOR UPDATE SKIP LOCKED`, and the claim
//!   re-checks each row's lease and state on its newest version, so no two
//!   workers hold one delivery; a run's deliveries to one target go out in
//!   change order (an earlier one still pending, or an earlier change not
//!   fanned out yet, holds the later ones back: both are seen atomically,
//!   as a fan-out deletes the change and inserts its deliveries in one
//!   transaction, and changes of one run commit in order since each locks
//!   the run's row);
//! - the cap on a project's subscriptions is counted while the project's
//!   inserts take turns ([`Dialect::serialize`](super::Dialect::serialize)).
//!
//! Every transaction's first statement writes (see `store::sqlite`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{sql, with_db, Dialect, SqlStore};
use crate::error::Result;
use crate::model::{Delivery, DeliveryState, Webhook};
use crate::store::rows::webhooks::{clamp_u32, ChangeRow, SecretRow, WebhookRow};
use crate::store::webhooks::{AttemptWrite, Claimed, NewDelivery, Secrets, Settle, StatusChange, WebhookStore};
use crate::store::{from_ms, json_text, to_ms};

const WEBHOOK_COLUMNS: &str =
    "id, project, url, statuses::text AS statuses, description, created_at, created_by_id, created_by, rotated_at";

type ClaimRow = (String, String, String, Option<String>, String, String, i64, i64);

#[async_trait]
impl<S: SqlStore> WebhookStore for S {
    async fn run_secret(&self, project: &str) -> Result<Option<Secrets>> {
        let row: Option<SecretRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                "SELECT secret, previous_secret, previous_until FROM webhook_secrets WHERE project = ?"
            ))
            .bind(project)
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(Secrets::from))
    }

    async fn put_run_secret(
        &self,
        project: &str,
        secret: &str,
        now: DateTime<Utc>,
        previous_until: DateTime<Utc>,
    ) -> Result<bool> {
        // One statement: the upsert reads the old secret as it replaces it
        // (concurrent ones wait on the row, each rotating the one before).
        let rotated: Option<Option<i64>> = with_db!(self.db(), |pool, D| {
            sqlx::query_scalar(sql!(
                D,
                "INSERT INTO webhook_secrets (project, secret, created_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (project) DO UPDATE SET previous_secret = webhook_secrets.secret, previous_until = ?4,
                    secret = excluded.secret, rotated_at = ?3
                 RETURNING rotated_at"
            ))
            .bind(project)
            .bind(secret)
            .bind(to_ms(now))
            .bind(to_ms(previous_until))
            .fetch_optional(pool)
            .await?
        });
        Ok(rotated.flatten().is_some())
    }

    async fn insert_webhook(&self, w: &Webhook, secret: &str, max: u32) -> Result<bool> {
        let inserted = with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            // Concurrent inserts into one project would each count without
            // the other's row: they take turns.
            D::serialize(&mut tx, &format!("runlens.webhook_subscriptions:{}", w.project)).await?;
            let n = sqlx::query(sql!(
                D,
                "INSERT INTO webhook_subscriptions (id, project, url, statuses, description, secret, created_at,
                    created_by_id, created_by)
                 SELECT ?1, ?2, ?3, ?4::jsonb, ?5, ?6, ?7, ?8, ?9
                 WHERE (SELECT count(*) FROM webhook_subscriptions WHERE project = ?2) < ?10"
            ))
            .bind(&w.id)
            .bind(&w.project)
            .bind(&w.url)
            .bind(w.statuses.as_ref().map(json_text))
            .bind(&w.description)
            .bind(secret)
            .bind(to_ms(w.created_at))
            .bind(w.created_by.as_ref().map(|a| &a.id))
            .bind(w.created_by.as_ref().map(|a| &a.name))
            .bind(i64::from(max))
            .execute(&mut *tx)
            .await?
            .rows_affected();
            tx.commit().await?;
            n
        });
        Ok(inserted == 1)
    }

    async fn webhooks(&self, project: &str, offset: u32, limit: u32) -> Result<Vec<Webhook>> {
        let rows: Vec<WebhookRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                format!(
                    "SELECT {WEBHOOK_COLUMNS} FROM webhook_subscriptions WHERE project = ?
                     ORDER BY created_at DESC, id COLLATE \"C\" DESC LIMIT ? OFFSET ?"
                )
            ))
            .bind(project)
            .bind(i64::from(limit))
            .bind(i64::from(offset))
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(Webhook::from).collect())
    }

    async fn webhook(&self, id: &str) -> Result<Option<Webhook>> {
        let row: Option<WebhookRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(D, format!("SELECT {WEBHOOK_COLUMNS} FROM webhook_subscriptions WHERE id = ?")))
                .bind(id)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.map(Webhook::from))
    }

    async fn project_webhooks(&self, project: &str) -> Result<Vec<Webhook>> {
        self.webhooks(project, 0, u32::MAX).await
    }

    async fn webhook_secrets(&self, id: &str) -> Result<Option<Secrets>> {
        let row: Option<SecretRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                "SELECT secret, previous_secret, previous_until FROM webhook_subscriptions WHERE id = ?"
            ))
            .bind(id)
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(Secrets::from))
    }

    async fn rotate_webhook_secret(
        &self,
        id: &str,
        secret: &str,
        now: DateTime<Utc>,
        previous_until: DateTime<Utc>,
    ) -> Result<bool> {
        let done = with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(
                D,
                "UPDATE webhook_subscriptions SET previous_secret = secret, previous_until = ?, secret = ?,
                    rotated_at = ?
                 WHERE id = ?"
            ))
            .bind(to_ms(previous_until))
            .bind(secret)
            .bind(to_ms(now))
            .bind(id)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(done == 1)
    }

    async fn delete_webhook(&self, id: &str, why: &str, now: DateTime<Utc>) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            let gone = sqlx::query(sql!(D, "DELETE FROM webhook_subscriptions WHERE id = ?"))
                .bind(id)
                .execute(&mut *tx)
                .await?;
            if gone.rows_affected() != 1 {
                return Ok(false);
            }
            sqlx::query(sql!(
                D,
                "UPDATE webhook_deliveries SET state = 'failed', failure = ?, finished_at = ?, next_attempt_at = NULL
                 WHERE subscription_id = ? AND state = 'pending'"
            ))
            .bind(why)
            .bind(to_ms(now))
            .bind(id)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
        });
        Ok(true)
    }

    async fn status_changes(&self, limit: u32) -> Result<Vec<StatusChange>> {
        let rows: Vec<ChangeRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                "SELECT c.seq, c.run_id, c.project, c.old_status, c.new_status, c.at, c.result::text AS result,
                    c.result_omitted, c.summary, c.failure_reason, c.interruptions::text AS interruptions,
                    r.name AS run_name, r.tags::text AS run_tags, r.on_status_change::text AS on_status_change
                 FROM status_changes c LEFT JOIN runs r ON r.id = c.run_id ORDER BY c.seq LIMIT ?"
            ))
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(StatusChange::from).collect())
    }

    async fn fan_out(&self, seq: u64, deliveries: &[NewDelivery], now: DateTime<Utc>) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            // Taking the change is deleting it; one another worker is
            // deleting right now is skipped (`false`) rather than waited
            // for: it is that worker's (and if it rolls back, the change is
            // read again later).
            let taken = sqlx::query(sql!(
                D,
                "DELETE FROM status_changes WHERE seq = (
                    SELECT seq FROM status_changes WHERE seq = ? FOR UPDATE SKIP LOCKED)"
            ))
            .bind(seq as i64)
            .execute(&mut *tx)
            .await?;
            if taken.rows_affected() != 1 {
                return Ok(false);
            }
            for d in deliveries {
                let (state, next, finished) = match &d.refused {
                    None => (DeliveryState::Pending, Some(to_ms(now)), None),
                    Some(_) => (DeliveryState::Failed, None, Some(to_ms(now))),
                };
                sqlx::query(sql!(
                    D,
                    "INSERT INTO webhook_deliveries (id, run_id, project, subscription_id, target, change_seq, url,
                        old_status, new_status, changed_at, payload, state, next_attempt_at, created_at, finished_at,
                        failure)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                ))
                .bind(&d.id)
                .bind(&d.run_id)
                .bind(&d.project)
                .bind(&d.subscription_id)
                .bind(d.subscription_id.as_deref().unwrap_or("run"))
                .bind(d.change_seq as i64)
                .bind(&d.url)
                .bind(d.old_status.as_str())
                .bind(d.new_status.as_str())
                .bind(to_ms(d.changed_at))
                .bind(&d.payload)
                .bind(state.as_str())
                .bind(next)
                .bind(to_ms(now))
                .bind(finished)
                .bind(&d.refused)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
        });
        Ok(true)
    }

    async fn pending_deliveries(&self, project: &str) -> Result<u64> {
        let n: i64 = with_db!(self.db(), |pool, D| {
            sqlx::query_scalar(sql!(
                D,
                "SELECT count(*) FROM webhook_deliveries WHERE project = ? AND state = 'pending'"
            ))
            .bind(project)
            .fetch_one(pool)
            .await?
        });
        Ok(n.max(0) as u64)
    }

    async fn claim_deliveries(
        &self,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        claim: &str,
        limit: u32,
    ) -> Result<Vec<Claimed>> {
        // One statement: the choice and the lease are one write. Rows another
        // worker is claiming (or settling) are skipped; a row settled or
        // claimed since this statement's snapshot is re-checked on its newest
        // version (state, due time, lease) before it is locked, so two
        // workers never hold the same delivery.
        let rows: Vec<ClaimRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                "UPDATE webhook_deliveries SET claim = ?1, claimed_until = ?2
                 WHERE id IN (
                    SELECT d.id FROM webhook_deliveries d
                    WHERE d.state = 'pending' AND d.next_attempt_at <= ?3 AND d.claimed_until <= ?3
                      AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e
                          WHERE e.state = 'pending' AND e.run_id = d.run_id AND e.target = d.target
                            AND e.change_seq < d.change_seq)
                      AND NOT EXISTS (SELECT 1 FROM status_changes s WHERE s.run_id = d.run_id AND s.seq < d.change_seq)
                    ORDER BY d.next_attempt_at, d.change_seq LIMIT ?4
                    FOR UPDATE OF d SKIP LOCKED)
                 RETURNING id, run_id, project, subscription_id, url, payload, attempts, created_at"
            ))
            .bind(claim)
            .bind(to_ms(until))
            .bind(to_ms(now))
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|(id, run_id, project, subscription_id, url, payload, attempts, created_at)| Claimed {
                id,
                run_id,
                project,
                subscription_id,
                url,
                payload,
                attempts: clamp_u32(attempts),
                created_at: from_ms(created_at),
                claim: claim.to_owned(),
            })
            .collect())
    }

    async fn record_attempt(&self, id: &str, claim: &str, a: &AttemptWrite, settle: &Settle) -> Result<()> {
        with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            // The row stays locked to the end: a claim by another worker waits.
            let holder: Option<Option<String>> = sqlx::query_scalar(sql!(
                D,
                "UPDATE webhook_deliveries SET attempts = attempts + 1 WHERE id = ? RETURNING claim"
            ))
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
            sqlx::query(sql!(
                D,
                "INSERT INTO webhook_attempts (delivery_id, at, status_code, latency_ms, error) VALUES (?, ?, ?, ?, ?)"
            ))
            .bind(id)
            .bind(to_ms(a.at))
            .bind(a.status_code.map(i64::from))
            .bind(a.latency_ms.min(i64::MAX as u64) as i64)
            .bind(&a.error)
            .execute(&mut *tx)
            .await?;
            // A worker whose lease ran out (and was taken over) only records
            // what it saw; the holder settles the delivery.
            if holder.flatten().as_deref() == Some(claim) {
                let (state, next, finished, failure) = match settle {
                    Settle::Delivered => (DeliveryState::Delivered, None, Some(to_ms(a.at)), None),
                    Settle::Retry(at) => (DeliveryState::Pending, Some(to_ms(*at)), None, None),
                    Settle::Failed(why) => (DeliveryState::Failed, None, Some(to_ms(a.at)), Some(why.as_str())),
                };
                sqlx::query(sql!(
                    D,
                    "UPDATE webhook_deliveries SET state = ?, next_attempt_at = ?, finished_at = ?, failure = ?,
                        claim = NULL, claimed_until = 0
                     WHERE id = ? AND state = 'pending'"
                ))
                .bind(state.as_str())
                .bind(next)
                .bind(finished)
                .bind(failure)
                .bind(id)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
        });
        Ok(())
    }

    async fn next_delivery_due(&self) -> Result<Option<DateTime<Utc>>> {
        // Deliveries waiting for an earlier one of their run are not due by
        // themselves: the earlier one's time counts. (Both times are set
        // on every row counted: see `Dialect::GREATEST`.)
        let at: Option<i64> = with_db!(self.db(), |pool, D| {
            sqlx::query_scalar(sql!(
                D,
                format!(
                    "SELECT min({}(d.next_attempt_at, d.claimed_until)) FROM webhook_deliveries d
                     WHERE d.state = 'pending' AND d.next_attempt_at IS NOT NULL
                       AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e
                           WHERE e.state = 'pending' AND e.run_id = d.run_id AND e.target = d.target
                             AND e.change_seq < d.change_seq)",
                    D::GREATEST
                )
            ))
            .fetch_one(pool)
            .await?
        });
        Ok(at.map(from_ms))
    }

    async fn run_deliveries(&self, run_id: &str, offset: u32, limit: u32, attempts: u32) -> Result<Vec<Delivery>> {
        super::webhook_reads::run_deliveries(self.db(), run_id, offset, limit, attempts).await
    }

    async fn prune_deliveries(&self, before: DateTime<Utc>) -> Result<u64> {
        with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            // One server prunes at a time (two deleting the same rows could
            // deadlock); the others find the lock taken and leave it to it.
            if !D::try_serialize(&mut tx, "runlens.prune_deliveries").await? {
                return Ok(0);
            }
            // The deliveries first (waiting for an attempt being recorded on
            // one of them), then their attempts, in a snapshot that sees
            // that attempt.
            let ids: Vec<String> = sqlx::query_scalar(sql!(
                D,
                "DELETE FROM webhook_deliveries WHERE state <> 'pending' AND finished_at < ? RETURNING id"
            ))
            .bind(to_ms(before))
            .fetch_all(&mut *tx)
            .await?;
            if !ids.is_empty() {
                sqlx::query(sql!(D, format!("DELETE FROM webhook_attempts WHERE delivery_id {}", D::IN_LIST)))
                    .bind(D::list(&ids))
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(ids.len() as u64)
        })
    }
}
