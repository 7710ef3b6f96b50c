//! Status webhooks (Inferable's `onStatusChange`): what a run or a project
//! asks to be told about, the signed POST each change becomes, and the
//! record of every delivery and its attempts.
//!
//! A run's own hook is [`OnStatusChange`] (signed with the project's run
//! webhook secret); a project's [`Webhook`] subscription hears every run of
//! the project (signed with its own secret). Each status change a hook
//! wants becomes one [`Delivery`] per hook, whose [`StatusChangePayload`]
//! (with `delivery_id` as its idempotency key) is POSTed until a 2xx answer,
//! with exponential backoff, for up to 24 hours.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{limits, Actor, RunStatus};

/// The header carrying a delivery's idempotency key (its id).
pub const IDEMPOTENCY_HEADER: &str = "runlens-idempotency-key";
/// The `type` of every status-change payload.
pub const STATUS_CHANGED: &str = "run.status_changed";

/// A run's own hook: `{"url": "…", "statuses": ["paused", "done", "failed"]}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OnStatusChange {
    /// Where each change is POSTed (`http(s)`, at most 2,048 characters; private addresses only when the operator
    /// allows them).
    #[cfg_attr(feature = "openapi", schema(schema_with = schemas::hook_url))]
    pub url: String,
    /// The new statuses to be told about; absent: every change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(schema_with = schemas::hook_statuses))]
    pub statuses: Option<Vec<RunStatus>>,
}

impl OnStatusChange {
    /// Whether a change to `status` is to be delivered.
    pub fn wants(&self, status: RunStatus) -> bool {
        wants(self.statuses.as_deref(), status)
    }
}

/// Whether a hook listening to `statuses` (none: all) hears a change to `status`.
pub fn wants(statuses: Option<&[RunStatus]>, status: RunStatus) -> bool {
    statuses.is_none_or(|list| list.contains(&status))
}

/// `statuses` names each status a run can change to at most once, and at
/// least one (leave the list out to hear every change). `pending` is
/// refused: a run starts pending and never becomes it again, so a hook on
/// it would never be called.
pub fn statuses_problem(statuses: Option<&[RunStatus]>) -> Option<String> {
    let list = statuses?;
    if list.is_empty() {
        return Some("statuses must name at least one status; leave it out to hear every change".into());
    }
    if list.contains(&RunStatus::Pending) {
        return Some(
            "statuses: a run is never changed to `pending` (it starts so); choose from running, paused, done, \
             failed, cancelled"
                .into(),
        );
    }
    if let Some((i, dup)) = list.iter().enumerate().find(|(i, s)| list[..*i].contains(s)) {
        return Some(format!("statuses[{i}]: `{dup}` is listed twice"));
    }
    None
}

/// A project's subscription: every status change of every run of the
/// project that it wants. Its signing secret is never read back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Webhook {
    /// `wh_…`
    pub id: String,
    pub project: String,
    pub url: String,
    /// The new statuses it hears; null: every change.
    pub statuses: Option<Vec<RunStatus>>,
    pub description: Option<String>,
    pub created_at: DateTime<Utc>,
    pub created_by: Option<Actor>,
    /// When its secret was last rotated.
    pub secret_rotated_at: Option<DateTime<Utc>>,
}

/// The body of `POST /api/webhooks`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewWebhook {
    /// Where each change is POSTed (`http(s)`, at most 2,048 characters; private addresses only when the operator
    /// allows them).
    #[cfg_attr(feature = "openapi", schema(schema_with = schemas::hook_url))]
    pub url: String,
    /// The new statuses to hear (each once, not `pending`); absent: every change.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = schemas::hook_statuses))]
    pub statuses: Option<Vec<RunStatus>>,
    /// What it is for (at most 500 characters).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = schemas::hook_description))]
    pub description: Option<String>,
}

/// A signing secret, in the one answer that shows it.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ShownSecret {
    /// `whsec_` and 64 hex digits: the HMAC-SHA256 key of `runlens-signature`. It cannot be shown again.
    pub secret: String,
    /// After a rotation: until when requests are also signed with the previous secret (a second `v1=`), so
    /// receivers can switch without missing a delivery.
    pub previous_valid_until: Option<DateTime<Utc>>,
}

impl std::fmt::Debug for ShownSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShownSecret").field("previous_valid_until", &self.previous_valid_until).finish_non_exhaustive()
    }
}

/// A new subscription with its secret (shown only in the answer that created it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreatedWebhook {
    pub webhook: Webhook,
    pub secret: ShownSecret,
}

/// One page of a project's subscriptions, newest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookPage {
    pub webhooks: Vec<Webhook>,
    /// The `offset` of the next page; null on the last one.
    pub next_offset: Option<u32>,
}

/// Where a delivery stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum DeliveryState {
    /// Not delivered yet: waiting for its next attempt (or for the run's earlier deliveries to the same hook).
    Pending,
    /// A 2xx answer was received.
    Delivered,
    /// Given up on (24 hours of failures, its subscription deleted, or too many pending in the project).
    Failed,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Pending, Self::Delivered, Self::Failed].into_iter().find(|d| d.as_str() == s)
    }
}

/// One attempt at a delivery.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryAttempt {
    /// 1 for the first attempt.
    pub number: u32,
    pub at: DateTime<Utc>,
    /// The receiver's HTTP status; null when none came (connection refused, timeout).
    pub status_code: Option<u16>,
    /// From sending the request to the answer's status (or the failure).
    pub latency_ms: u64,
    /// Why it did not count as delivered (a non-2xx status with the start of the answer, or the connection
    /// error); null for a 2xx.
    pub error: Option<String>,
}

/// One status change on its way to one hook.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Delivery {
    /// `whd_…`; also the payload's `delivery_id` and the `runlens-idempotency-key` header.
    pub id: String,
    pub run_id: String,
    /// The subscription it goes to; null: the run's own `on_status_change`.
    pub webhook_id: Option<String>,
    pub url: String,
    pub old_status: RunStatus,
    pub new_status: RunStatus,
    /// When the status changed.
    pub changed_at: DateTime<Utc>,
    pub state: DeliveryState,
    /// Attempts made so far.
    pub attempt_count: u32,
    /// When a pending delivery is tried next (it may also wait for the run's earlier deliveries to the same
    /// hook).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// When it was delivered or given up on.
    pub finished_at: Option<DateTime<Utc>>,
    /// Why it was given up on.
    pub failure: Option<String>,
    /// The newest attempts (at most 10), newest first.
    pub attempts: Vec<DeliveryAttempt>,
}

/// One page of a run's deliveries, newest change first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryPage {
    pub deliveries: Vec<Delivery>,
    /// The `offset` of the next page; null on the last one.
    pub next_offset: Option<u32>,
}

/// A call waiting for a person's decision, as a payload names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PendingCall {
    pub call_id: String,
    pub tool_name: String,
    pub step_index: u32,
    /// The call's arguments (null when the payload would be too large with them).
    pub arguments: Value,
    pub requested_at: Option<DateTime<Utc>>,
}

/// The JSON body of every webhook request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatusChangePayload {
    /// Always `run.status_changed`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The idempotency key: the same for every attempt of this delivery (also the `runlens-idempotency-key`
    /// header).
    pub delivery_id: String,
    /// Increases with every status change of the server; a receiver can drop a change older than one it has.
    pub sequence: u64,
    pub run_id: String,
    pub run_name: String,
    pub project: String,
    pub tags: BTreeMap<String, String>,
    pub old_status: RunStatus,
    pub new_status: RunStatus,
    /// When the status changed.
    pub at: DateTime<Utc>,
    /// The run's result once done (null when it has none, or when it was too large: see `truncated`).
    pub result: Option<Value>,
    pub summary: Option<String>,
    /// Why the run failed.
    pub failure_reason: Option<String>,
    /// The calls waiting for a decision, when the run is paused.
    pub interruptions: Vec<PendingCall>,
    /// Something was left out to keep the body under 64 KiB (the result, or the calls' arguments): read the run.
    pub truncated: bool,
}

/// The most a payload may weigh; larger parts are left out (`truncated`).
pub const MAX_PAYLOAD_BYTES: usize = limits::MAX_WEBHOOK_PAYLOAD_BYTES;

impl StatusChangePayload {
    /// The body as sent: the whole payload when it fits in
    /// [`MAX_PAYLOAD_BYTES`], else without the calls' arguments, then
    /// without the result, then with the texts cut (marked `truncated`).
    pub fn into_body(mut self) -> String {
        let fits = |p: &Self| serde_json::to_string(p).ok().filter(|t| t.len() <= MAX_PAYLOAD_BYTES);
        if let Some(text) = fits(&self) {
            return text;
        }
        self.truncated = true;
        self.interruptions.iter_mut().for_each(|c| c.arguments = Value::Null);
        if let Some(text) = fits(&self) {
            return text;
        }
        self.result = None;
        if let Some(text) = fits(&self) {
            return text;
        }
        let cut = |t: &mut Option<String>| {
            if let Some(t) = t {
                *t = t.chars().take(2000).collect();
            }
        };
        cut(&mut self.summary);
        cut(&mut self.failure_reason);
        self.interruptions.truncate(20);
        serde_json::to_string(&self).unwrap_or_default()
    }
}

/// The schemas of the fields whose Rust types say less than is checked.
#[cfg(feature = "openapi")]
mod schemas {
    use serde_json::json;
    use utoipa::openapi::Schema;

    use crate::model::limits::{MAX_WEBHOOK_DESCRIPTION_CHARS, MAX_WEBHOOK_URL_CHARS};
    use crate::model::openapi::raw;

    pub fn hook_url() -> Schema {
        raw(json!({
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_WEBHOOK_URL_CHARS,
            "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#@]+",
            "description": "Where each change is POSTed: an http(s) URL with a host and no user name or password. \
                Loopback, private and link-local addresses are refused unless the operator allows them \
                ([http] allow_private_networks).",
        }))
    }

    pub fn hook_statuses() -> Schema {
        raw(json!({
            "type": ["array", "null"],
            "items": { "type": "string", "enum": ["running", "paused", "done", "failed", "cancelled"] },
            "minItems": 1,
            "maxItems": 5,
            "uniqueItems": true,
            "description": "The new statuses to be told about (each once; a run never becomes `pending`); \
                absent or null: every change.",
        }))
    }

    pub fn hook_description() -> Schema {
        raw(json!({
            "type": ["string", "null"],
            "maxLength": MAX_WEBHOOK_DESCRIPTION_CHARS,
            "description": "What it is for.",
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_checked() {
        use RunStatus::*;
        assert_eq!(statuses_problem(None), None);
        assert_eq!(statuses_problem(Some(&[Paused, Done, Failed])), None);
        assert!(statuses_problem(Some(&[])).unwrap().contains("at least one"));
        assert!(statuses_problem(Some(&[Pending])).unwrap().contains("pending"));
        assert!(statuses_problem(Some(&[Done, Done])).unwrap().contains("twice"));
        assert!(wants(None, Running) && wants(Some(&[Done]), Done) && !wants(Some(&[Done]), Running));
        let bad: Result<OnStatusChange, _> = serde_json::from_str(r#"{"url": "https://x", "statuses": ["finished"]}"#);
        assert!(bad.unwrap_err().to_string().contains("unknown variant `finished`"));
    }

    #[test]
    fn a_large_payload_is_cut_to_fit() {
        let big = "x".repeat(MAX_PAYLOAD_BYTES);
        let payload = StatusChangePayload {
            kind: STATUS_CHANGED.into(),
            delivery_id: "whd_1".into(),
            sequence: 1,
            run_id: "r".into(),
            run_name: "n".into(),
            project: "default".into(),
            tags: BTreeMap::new(),
            old_status: RunStatus::Running,
            new_status: RunStatus::Done,
            at: DateTime::<Utc>::default(),
            result: Some(Value::String(big.clone())),
            summary: Some(big),
            failure_reason: None,
            interruptions: Vec::new(),
            truncated: false,
        };
        let small = payload.clone();
        let body = payload.into_body();
        assert!(body.len() <= MAX_PAYLOAD_BYTES, "{}", body.len());
        let back: StatusChangePayload = serde_json::from_str(&body).unwrap();
        assert!(back.truncated && back.result.is_none());
        let mut fine = small;
        fine.result = Some(Value::from(4));
        fine.summary = None;
        let back: StatusChangePayload = serde_json::from_str(&fine.clone().into_body()).unwrap();
        assert_eq!(back, fine);
    }
}
