//! The review half of the store: review queues and their items (see
//! [`crate::model::review`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::CappedInsert;
use crate::error::Result;
use crate::model::{Actor, ReviewItem, ReviewStatus};

/// A queue as kept (its counts are read apart).
#[derive(Clone, Debug, PartialEq)]
pub struct QueueRow {
    pub id: String,
    pub name: String,
    /// The JSON of its description, fields, dataset and assignees.
    pub spec: String,
    pub created_by: Actor,
    pub created_at: DateTime<Utc>,
}

/// What adding items to a queue did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemsAdded {
    /// Items made, and those the queue had already.
    Added(u32, u32),
    /// The queue would pass its cap: nothing was added.
    Full,
}

/// How many items of a queue have a status (and a reviewer).
#[derive(Clone, Debug, PartialEq)]
pub struct QueueCount {
    pub queue_id: String,
    pub status: ReviewStatus,
    pub reviewer: Option<Actor>,
    pub count: u64,
}

#[async_trait]
pub trait ReviewStore: Send + Sync {
    /// Keeps a new queue of `project` unless one has its name or `project` has `max`.
    async fn insert_queue(&self, project: &str, q: &QueueRow, max: u32) -> Result<CappedInsert>;
    async fn queue(&self, project: &str, id: &str) -> Result<Option<QueueRow>>;
    /// `project`'s queues by name, at most `limit`.
    async fn queues(&self, project: &str, limit: u32) -> Result<Vec<QueueRow>>;
    /// Deletes queue `id` of `project` and its items; whether it existed.
    async fn delete_queue(&self, project: &str, id: &str) -> Result<bool>;
    /// The items of queues `ids` by queue, status and reviewer: (queue id,
    /// status, reviewer, how many), in one read.
    async fn queue_counts(&self, ids: &[String]) -> Result<Vec<QueueCount>>;
    /// Adds `items` to queue `id` (of `project`), passing over a run (at a
    /// step) it has, all or none when the queue would hold more than `max`.
    async fn insert_items(&self, project: &str, id: &str, items: &[ReviewItem], max: u32) -> Result<ItemsAdded>;
    /// Queue `id`'s items (of `status`, when given) after the id `after`, at most `limit`.
    async fn items(
        &self,
        id: &str,
        status: Option<ReviewStatus>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<ReviewItem>>;
    async fn item(&self, id: &str, item_id: &str) -> Result<Option<ReviewItem>>;
    /// Ends pending item `item_id` of queue `id` as `status` by `by`; whether it was pending.
    async fn finish_item(
        &self,
        id: &str,
        item_id: &str,
        status: ReviewStatus,
        by: &Actor,
        at: DateTime<Utc>,
        correction: Option<&str>,
    ) -> Result<bool>;
}
