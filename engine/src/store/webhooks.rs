//! The webhooks half of the store: secrets, subscriptions, the outbox of
//! status changes (filled by the database itself, see `0013_webhooks.sql`)
//! and the deliveries with their attempts.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::model::{Delivery, RunStatus, Webhook};

/// A signing secret and, for a while after a rotation, the one before it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secrets {
    pub current: String,
    /// The previous secret while it still signs (see `previous_until`).
    pub previous: Option<String>,
    pub previous_until: Option<DateTime<Utc>>,
}

impl Secrets {
    /// The secrets a request sent at `now` is signed with.
    pub fn signing(&self, now: DateTime<Utc>) -> Vec<&str> {
        let previous = self.previous.as_deref().filter(|_| self.previous_until.is_some_and(|until| now < until));
        std::iter::once(self.current.as_str()).chain(previous).collect()
    }
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets").field("previous_until", &self.previous_until).finish_non_exhaustive()
    }
}

/// A captured status change, with what fan-out needs of its run.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusChange {
    pub seq: u64,
    pub run_id: String,
    pub project: String,
    pub old_status: RunStatus,
    pub new_status: RunStatus,
    pub at: DateTime<Utc>,
    /// The result's JSON text (none when it was too large: `result_omitted`).
    pub result: Option<String>,
    pub result_omitted: bool,
    pub summary: Option<String>,
    pub failure_reason: Option<String>,
    /// The calls awaiting a decision, as JSON (paused only).
    pub interruptions: Option<String>,
    /// The run's name, tags (JSON) and own hook (JSON), read with the change.
    pub run_name: String,
    pub run_tags: String,
    pub on_status_change: Option<String>,
}

/// A delivery to write when a change is fanned out.
#[derive(Clone, Debug, PartialEq)]
pub struct NewDelivery {
    pub id: String,
    pub run_id: String,
    pub project: String,
    pub subscription_id: Option<String>,
    pub change_seq: u64,
    pub url: String,
    pub old_status: RunStatus,
    pub new_status: RunStatus,
    pub changed_at: DateTime<Utc>,
    pub payload: String,
    /// `Some(why)`: written as failed, never sent (the project's pending cap).
    pub refused: Option<String>,
}

/// A delivery a worker claimed: it holds the lease until `claimed_until`.
#[derive(Clone, Debug, PartialEq)]
pub struct Claimed {
    pub id: String,
    pub run_id: String,
    pub project: String,
    pub subscription_id: Option<String>,
    pub url: String,
    pub payload: String,
    /// Attempts made before this one.
    pub attempts: u32,
    pub created_at: DateTime<Utc>,
    /// The claim's token: only its holder settles the delivery.
    pub claim: String,
}

/// How an attempt ended, for the delivery.
#[derive(Clone, Debug, PartialEq)]
pub enum Settle {
    Delivered,
    /// Try again at this time.
    Retry(DateTime<Utc>),
    /// Give up, with the reason.
    Failed(String),
}

/// One attempt to record.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptWrite {
    pub at: DateTime<Utc>,
    pub status_code: Option<u16>,
    pub latency_ms: u64,
    pub error: Option<String>,
}

#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// The project's run webhook secret (signing runs' own hooks).
    async fn run_secret(&self, project: &str) -> Result<Option<Secrets>>;
    /// Sets the project's run webhook secret; the one it replaces (if any)
    /// keeps signing until `previous_until`. `true` when one existed.
    async fn put_run_secret(
        &self,
        project: &str,
        secret: &str,
        now: DateTime<Utc>,
        previous_until: DateTime<Utc>,
    ) -> Result<bool>;
    /// Inserts a subscription if the project has fewer than `max`; `false` otherwise.
    async fn insert_webhook(&self, webhook: &Webhook, secret: &str, max: u32) -> Result<bool>;
    /// A project's subscriptions, newest first.
    async fn webhooks(&self, project: &str, offset: u32, limit: u32) -> Result<Vec<Webhook>>;
    async fn webhook(&self, id: &str) -> Result<Option<Webhook>>;
    /// Every subscription of a project (fan-out reads them all; they are few).
    async fn project_webhooks(&self, project: &str) -> Result<Vec<Webhook>>;
    async fn webhook_secrets(&self, id: &str) -> Result<Option<Secrets>>;
    /// Replaces a subscription's secret (see [`WebhookStore::put_run_secret`]); `false` when it is gone.
    async fn rotate_webhook_secret(
        &self,
        id: &str,
        secret: &str,
        now: DateTime<Utc>,
        previous_until: DateTime<Utc>,
    ) -> Result<bool>;
    /// Deletes a subscription; its pending deliveries fail with `why`. `false` when it was gone.
    async fn delete_webhook(&self, id: &str, why: &str, now: DateTime<Utc>) -> Result<bool>;

    /// The oldest captured changes not fanned out yet, with their runs.
    async fn status_changes(&self, limit: u32) -> Result<Vec<StatusChange>>;
    /// Fans change `seq` out into `deliveries` and removes it, in one
    /// transaction; `false` when another worker did it first.
    async fn fan_out(&self, seq: u64, deliveries: &[NewDelivery], now: DateTime<Utc>) -> Result<bool>;
    /// Deliveries of `project` waiting to be sent.
    async fn pending_deliveries(&self, project: &str) -> Result<u64>;
    /// Claims up to `limit` deliveries due at `now` whose run has no earlier
    /// pending delivery (or change not fanned out) to the same target,
    /// leasing them until `until` under the token `claim`.
    async fn claim_deliveries(
        &self,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        claim: &str,
        limit: u32,
    ) -> Result<Vec<Claimed>>;
    /// Records an attempt, and settles the delivery if `claim` still holds it.
    async fn record_attempt(&self, id: &str, claim: &str, attempt: &AttemptWrite, settle: &Settle) -> Result<()>;
    /// When the next pending delivery is due (or a lease ends), if any.
    async fn next_delivery_due(&self) -> Result<Option<DateTime<Utc>>>;
    /// A run's deliveries, newest change first, each with its newest `attempts` attempts.
    async fn run_deliveries(&self, run_id: &str, offset: u32, limit: u32, attempts: u32) -> Result<Vec<Delivery>>;
    /// Deletes delivered and failed deliveries (and their attempts) finished before `before`; how many.
    async fn prune_deliveries(&self, before: DateTime<Utc>) -> Result<u64>;
}
