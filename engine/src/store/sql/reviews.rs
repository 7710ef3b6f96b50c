//! [`ReviewStore`] for every backend: `review_queues` and `review_items`.
//! A project's queue inserts take turns, and so do one queue's item
//! inserts ([`Dialect::serialize`]), so the caps hold under a race; the
//! unique index keeps a run (at a step) in a queue once.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{capped_named_room, sql, with_db, Dialect, SqlStore};
use crate::error::Result;
use crate::model::{Actor, ReviewItem, ReviewStatus};
use crate::store::reviews::{ItemsAdded, QueueRow, ReviewStore};
use crate::store::{from_ms, to_ms, CappedInsert, QueueCount};

const QUEUE_COLUMNS: &str = "id, name, spec, created_by_id, created_by, created_at";
/// `step_index` of an item that reviews a whole session.
const SESSION_STEP: i64 = -2;
const ITEM_COLUMNS: &str =
    "id, queue_id, run_id, step_index, status, reviewer_id, reviewer, reviewed_at, correction, added_at, session_id";

#[derive(sqlx::FromRow)]
struct Queue {
    id: String,
    name: String,
    spec: String,
    created_by_id: String,
    created_by: String,
    created_at: i64,
}

impl From<Queue> for QueueRow {
    fn from(r: Queue) -> QueueRow {
        QueueRow {
            id: r.id,
            name: r.name,
            spec: r.spec,
            created_by: Actor { id: r.created_by_id, name: r.created_by },
            created_at: from_ms(r.created_at),
        }
    }
}

#[derive(sqlx::FromRow)]
struct Item {
    id: String,
    queue_id: String,
    run_id: String,
    step_index: i64,
    status: String,
    reviewer_id: Option<String>,
    reviewer: Option<String>,
    reviewed_at: Option<i64>,
    correction: Option<String>,
    added_at: i64,
    session_id: Option<String>,
}

impl From<Item> for ReviewItem {
    fn from(r: Item) -> ReviewItem {
        ReviewItem {
            id: r.id,
            queue_id: r.queue_id,
            run_id: r.run_id,
            step_index: u32::try_from(r.step_index).ok(),
            // A row this store wrote always decodes; a damaged one reads as skipped.
            status: ReviewStatus::parse(&r.status).unwrap_or(ReviewStatus::Skipped),
            reviewed_by: r.reviewer_id.zip(r.reviewer).map(|(id, name)| Actor { id, name }),
            reviewed_at: r.reviewed_at.map(from_ms),
            correction: r.correction,
            added_at: from_ms(r.added_at),
            session_id: r.session_id,
        }
    }
}

#[async_trait]
impl<S: SqlStore> ReviewStore for S {
    async fn insert_queue(&self, project: &str, q: &QueueRow, max: u32) -> Result<CappedInsert> {
        with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            D::serialize(&mut tx, &format!("runlens.review_queues:{project}")).await?;
            if let Some(why) = capped_named_room!(tx, D, "review_queues", project, &q.name, max) {
                return Ok(why);
            }
            sqlx::query(sql!(
                D,
                "INSERT INTO review_queues (id, project, name, spec, created_by_id, created_by, created_at)
                 VALUES (?, ?, ?, ?, ?, ?, ?)"
            ))
            .bind(&q.id)
            .bind(project)
            .bind(&q.name)
            .bind(&q.spec)
            .bind(&q.created_by.id)
            .bind(&q.created_by.name)
            .bind(to_ms(q.created_at))
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(CappedInsert::Kept)
        })
    }

    async fn queue(&self, project: &str, id: &str) -> Result<Option<QueueRow>> {
        with_db!(self.db(), |pool, D| {
            let row = sqlx::query_as::<_, Queue>(sql!(
                D,
                format!("SELECT {QUEUE_COLUMNS} FROM review_queues WHERE id = ? AND project = ?")
            ))
            .bind(id)
            .bind(project)
            .fetch_optional(pool)
            .await?;
            Ok(row.map(QueueRow::from))
        })
    }

    async fn queues(&self, project: &str, limit: u32) -> Result<Vec<QueueRow>> {
        with_db!(self.db(), |pool, D| {
            let rows = sqlx::query_as::<_, Queue>(sql!(
                D,
                format!("SELECT {QUEUE_COLUMNS} FROM review_queues WHERE project = ? ORDER BY name, id LIMIT ?")
            ))
            .bind(project)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?;
            Ok(rows.into_iter().map(QueueRow::from).collect())
        })
    }

    async fn delete_queue(&self, project: &str, id: &str) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            let done = sqlx::query(sql!(D, "DELETE FROM review_queues WHERE id = ? AND project = ?"))
                .bind(id)
                .bind(project)
                .execute(&mut *tx)
                .await?;
            sqlx::query(sql!(D, "DELETE FROM review_items WHERE queue_id = ? AND project = ?"))
                .bind(id)
                .bind(project)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(done.rows_affected() > 0)
        })
    }

    async fn queue_counts(&self, ids: &[String]) -> Result<Vec<QueueCount>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        type Row = (String, String, Option<String>, Option<String>, i64);
        let rows: Vec<Row> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                format!(
                    "SELECT queue_id, status, reviewer_id, max(reviewer), count(*) FROM review_items
                     WHERE queue_id {} GROUP BY queue_id, status, reviewer_id",
                    D::IN_LIST
                )
            ))
            .bind(D::list(ids))
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .filter_map(|(queue_id, status, rid, name, n)| {
                let reviewer = rid.map(|id| Actor { name: name.unwrap_or_else(|| id.clone()), id });
                Some(QueueCount { queue_id, status: ReviewStatus::parse(&status)?, reviewer, count: n.max(0) as u64 })
            })
            .collect())
    }

    async fn insert_items(&self, project: &str, id: &str, items: &[ReviewItem], max: u32) -> Result<ItemsAdded> {
        with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            D::serialize(&mut tx, &format!("runlens.review_items:{id}")).await?;
            let (mut added, mut already) = (0u32, 0u32);
            for item in items {
                // A whole run is step -1, a whole session -2; a session is in a queue once.
                let step = match (&item.session_id, item.step_index) {
                    (Some(_), _) => SESSION_STEP,
                    (None, step) => step.map_or(-1, i64::from),
                };
                let have: Option<String> = sqlx::query_scalar(sql!(
                    D,
                    "SELECT id FROM review_items WHERE queue_id = ?
                     AND ((?::text IS NULL AND run_id = ? AND step_index = ?) OR session_id = ?)"
                ))
                .bind(id)
                .bind(&item.session_id)
                .bind(&item.run_id)
                .bind(step)
                .bind(&item.session_id)
                .fetch_optional(&mut *tx)
                .await?;
                if have.is_some() {
                    already += 1;
                    continue;
                }
                sqlx::query(sql!(
                    D,
                    "INSERT INTO review_items (id, queue_id, project, run_id, step_index, status, added_at, session_id)
                     VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)"
                ))
                .bind(&item.id)
                .bind(id)
                .bind(project)
                .bind(&item.run_id)
                .bind(step)
                .bind(to_ms(item.added_at))
                .bind(&item.session_id)
                .execute(&mut *tx)
                .await?;
                added += 1;
            }
            let count: i64 = sqlx::query_scalar(sql!(D, "SELECT count(*) FROM review_items WHERE queue_id = ?"))
                .bind(id)
                .fetch_one(&mut *tx)
                .await?;
            if count > i64::from(max) {
                tx.rollback().await?;
                return Ok(ItemsAdded::Full);
            }
            tx.commit().await?;
            Ok(ItemsAdded::Added(added, already))
        })
    }

    async fn items(
        &self,
        id: &str,
        status: Option<ReviewStatus>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<ReviewItem>> {
        let status = status.map(ReviewStatus::as_str);
        let rows: Vec<Item> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                format!(
                    "SELECT {ITEM_COLUMNS} FROM review_items
                     WHERE queue_id = ? AND (?::text IS NULL OR status = ?) AND (?::text IS NULL OR id > ?)
                     ORDER BY id LIMIT ?"
                )
            ))
            .bind(id)
            .bind(status)
            .bind(status)
            .bind(after)
            .bind(after)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(ReviewItem::from).collect())
    }

    async fn item(&self, id: &str, item_id: &str) -> Result<Option<ReviewItem>> {
        let row: Option<Item> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(D, format!("SELECT {ITEM_COLUMNS} FROM review_items WHERE queue_id = ? AND id = ?")))
                .bind(id)
                .bind(item_id)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.map(ReviewItem::from))
    }

    async fn finish_item(
        &self,
        id: &str,
        item_id: &str,
        status: ReviewStatus,
        by: &Actor,
        at: DateTime<Utc>,
        correction: Option<&str>,
    ) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let done = sqlx::query(sql!(
                D,
                "UPDATE review_items SET status = ?, reviewer_id = ?, reviewer = ?, reviewed_at = ?, correction = ?
                 WHERE queue_id = ? AND id = ? AND status = 'pending'"
            ))
            .bind(status.as_str())
            .bind(&by.id)
            .bind(&by.name)
            .bind(to_ms(at))
            .bind(correction)
            .bind(id)
            .bind(item_id)
            .execute(pool)
            .await?;
            Ok(done.rows_affected() > 0)
        })
    }
}
