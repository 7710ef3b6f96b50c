//! The reads of a run's webhook deliveries (`WebhookStore::run_deliveries`,
//! every backend): each delivery with its newest attempts, numbered from its
//! first.

use super::{sql, with_db, Db, Dialect};
use crate::error::Result;
use crate::model::{Delivery, DeliveryAttempt, DeliveryState};
use crate::store::from_ms;
use crate::store::rows::webhooks::{clamp_u32, status};

#[derive(sqlx::FromRow)]
struct DeliveryRow {
    id: String,
    run_id: String,
    subscription_id: Option<String>,
    url: String,
    old_status: String,
    new_status: String,
    changed_at: i64,
    state: String,
    attempts: i64,
    next_attempt_at: Option<i64>,
    finished_at: Option<i64>,
    failure: Option<String>,
}

#[derive(sqlx::FromRow)]
struct AttemptRow {
    delivery_id: String,
    number: i64,
    at: i64,
    status_code: Option<i64>,
    latency_ms: i64,
    error: Option<String>,
}

/// Run `run_id`'s deliveries, newest change first, each with its newest `attempts` attempts.
pub(super) async fn run_deliveries(
    db: Db<'_>,
    run_id: &str,
    offset: u32,
    limit: u32,
    attempts: u32,
) -> Result<Vec<Delivery>> {
    let (rows, tried): (Vec<DeliveryRow>, Vec<AttemptRow>) = with_db!(db, |pool, D| {
        let rows: Vec<DeliveryRow> = sqlx::query_as(sql!(
            D,
            "SELECT id, run_id, subscription_id, url, old_status, new_status, changed_at, state, attempts,
                next_attempt_at, finished_at, failure
             FROM webhook_deliveries WHERE run_id = ? ORDER BY change_seq DESC, id COLLATE \"C\" LIMIT ? OFFSET ?"
        ))
        .bind(run_id)
        .bind(i64::from(limit))
        .bind(i64::from(offset))
        .fetch_all(pool)
        .await?;
        let ids: Vec<String> = rows.iter().map(|r| r.id.clone()).collect();
        if ids.is_empty() {
            (rows, Vec::new())
        } else {
            // The newest attempts of each delivery, numbered from its first.
            let tried = sqlx::query_as(sql!(
                D,
                format!(
                    "SELECT delivery_id, number, at, status_code, latency_ms, error FROM (
                        SELECT delivery_id, at, status_code, latency_ms, error,
                            row_number() OVER (PARTITION BY delivery_id ORDER BY id) AS number,
                            row_number() OVER (PARTITION BY delivery_id ORDER BY id DESC) AS newest
                        FROM webhook_attempts WHERE delivery_id {}) numbered
                     WHERE newest <= ? ORDER BY delivery_id COLLATE \"C\", number DESC",
                    D::IN_LIST
                )
            ))
            .bind(D::list(&ids))
            .bind(i64::from(attempts))
            .fetch_all(pool)
            .await?;
            (rows, tried)
        }
    });
    Ok(rows
        .into_iter()
        .map(|r| {
            let attempts = (tried.iter())
                .filter(|a| a.delivery_id == r.id)
                .map(|a| DeliveryAttempt {
                    number: clamp_u32(a.number),
                    at: from_ms(a.at),
                    status_code: a.status_code.and_then(|c| u16::try_from(c).ok()),
                    latency_ms: a.latency_ms.max(0) as u64,
                    error: a.error.clone(),
                })
                .collect();
            let state = DeliveryState::parse(&r.state).unwrap_or(DeliveryState::Failed);
            Delivery {
                id: r.id,
                run_id: r.run_id,
                webhook_id: r.subscription_id,
                url: r.url,
                old_status: status(&r.old_status),
                new_status: status(&r.new_status),
                changed_at: from_ms(r.changed_at),
                state,
                attempt_count: clamp_u32(r.attempts),
                next_attempt_at: r.next_attempt_at.filter(|_| state == DeliveryState::Pending).map(from_ms),
                finished_at: r.finished_at.map(from_ms),
                failure: r.failure,
                attempts,
            }
        })
        .collect())
}
