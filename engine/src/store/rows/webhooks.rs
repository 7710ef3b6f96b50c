//! Rows of the webhook tables (subscriptions, secrets, captured status
//! changes) and their model types.

use crate::model::{Actor, RunStatus, Webhook};
use crate::store::from_ms;
use crate::store::webhooks::{Secrets, StatusChange};

pub(crate) fn status(text: &str) -> RunStatus {
    RunStatus::parse(text).unwrap_or(RunStatus::Failed)
}

pub(crate) fn clamp_u32(v: i64) -> u32 {
    v.clamp(0, u32::MAX.into()) as u32
}

#[derive(sqlx::FromRow)]
pub(crate) struct WebhookRow {
    pub(crate) id: String,
    pub(crate) project: String,
    pub(crate) url: String,
    pub(crate) statuses: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) created_at: i64,
    pub(crate) created_by_id: Option<String>,
    pub(crate) created_by: Option<String>,
    pub(crate) rotated_at: Option<i64>,
}

impl From<WebhookRow> for Webhook {
    fn from(r: WebhookRow) -> Webhook {
        Webhook {
            id: r.id,
            project: r.project,
            url: r.url,
            statuses: r.statuses.and_then(|s| serde_json::from_str(&s).ok()),
            description: r.description,
            created_at: from_ms(r.created_at),
            created_by: r.created_by_id.map(|id| Actor { id, name: r.created_by.unwrap_or_default() }),
            secret_rotated_at: r.rotated_at.map(from_ms),
        }
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct SecretRow {
    pub(crate) secret: String,
    pub(crate) previous_secret: Option<String>,
    pub(crate) previous_until: Option<i64>,
}

impl From<SecretRow> for Secrets {
    fn from(r: SecretRow) -> Secrets {
        Secrets { current: r.secret, previous: r.previous_secret, previous_until: r.previous_until.map(from_ms) }
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct ChangeRow {
    pub(crate) seq: i64,
    pub(crate) run_id: String,
    pub(crate) project: String,
    pub(crate) old_status: String,
    pub(crate) new_status: String,
    pub(crate) at: i64,
    pub(crate) result: Option<String>,
    pub(crate) result_omitted: bool,
    pub(crate) summary: Option<String>,
    pub(crate) failure_reason: Option<String>,
    pub(crate) interruptions: Option<String>,
    pub(crate) run_name: Option<String>,
    pub(crate) run_tags: Option<String>,
    pub(crate) on_status_change: Option<String>,
}

impl From<ChangeRow> for StatusChange {
    fn from(r: ChangeRow) -> StatusChange {
        StatusChange {
            seq: r.seq.max(0) as u64,
            run_id: r.run_id,
            project: r.project,
            old_status: status(&r.old_status),
            new_status: status(&r.new_status),
            at: from_ms(r.at),
            result: r.result,
            result_omitted: r.result_omitted,
            summary: r.summary,
            failure_reason: r.failure_reason,
            interruptions: r.interruptions,
            run_name: r.run_name.unwrap_or_default(),
            run_tags: r.run_tags.unwrap_or_else(|| "{}".into()),
            on_status_change: r.on_status_change,
        }
    }
}
