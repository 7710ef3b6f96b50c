//! Each project's retention policy and the deletes that enforce it: a part
//! of every store, written once for both databases (`sql/retention.rs`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::model::Retention;

#[async_trait]
pub trait RetentionStore: Send + Sync {
    /// The project's policy (all `None` for a project that has none, or none at all).
    async fn retention(&self, project: &str) -> Result<Retention>;
    /// Sets the project's policy; `false` when there is no such project.
    async fn set_retention(&self, project: &str, policy: &Retention) -> Result<bool>;
    /// Every project with a policy that deletes something.
    async fn retained_projects(&self) -> Result<Vec<(String, Retention)>>;
    /// Deletes up to `batch` of `project`'s finished root runs that `policy`
    /// no longer keeps at `now`, oldest first, each with its child runs and
    /// every row recorded of them (steps, calls, messages, events, decisions,
    /// grants, blobs, tags, the spans of an ingested trace), in one
    /// transaction; the ids of the runs deleted. A run changed within the
    /// last minute before `now` waits (its last events may still be on their
    /// way); one that is no longer finished when the batch is written is kept.
    async fn prune_runs(
        &self,
        project: &str,
        policy: &Retention,
        now: DateTime<Utc>,
        batch: u32,
    ) -> Result<Vec<String>>;
}
