//! The requests part of the store: approval requests and questions from
//! agents runlens does not run (see `model::request`), their pending count
//! per project, the "always" rules decisions leave, and the signed callback
//! a decision sends (a row of the webhook outbox, written in the decision's
//! own transaction so a crash cannot lose it).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::model::{AgentRequest, RequestKind, RequestOutcome};

/// A request to store, with what makes a retry recognisable.
pub struct RequestInsert<'a> {
    pub request: &'a AgentRequest,
    pub project: &'a str,
    pub idempotency_key: Option<&'a str>,
    /// A digest of what was asked: a retry with the same key and another
    /// body is refused rather than answered with the first request.
    pub fingerprint: &'a str,
}

/// What [`RequestStore::insert_request`] did.
#[derive(Debug)]
pub enum Inserted {
    Created(AgentRequest),
    /// The idempotency key was used before: the request it made, and
    /// whether it was made from the same body.
    Existing {
        request: AgentRequest,
        same: bool,
    },
}

/// A signed POST to send once a request is decided.
pub struct CallbackWrite<'a> {
    pub delivery_id: &'a str,
    pub url: &'a str,
    pub payload: &'a str,
}

/// A decision to store if the request is still pending.
pub struct RequestDecisionWrite<'a> {
    pub project: &'a str,
    pub id: &'a str,
    pub outcome: &'a RequestOutcome,
    pub callback: Option<CallbackWrite<'a>>,
    /// An "always" decision: later requests of this tool from this agent
    /// run, by the same requester, are decided the same way.
    pub rule: Option<RuleKey<'a>>,
}

/// Whose "always" rule: the requester (the key that created the request),
/// the agent run it named (`external_id`) and the tool.
#[derive(Clone, Copy, Debug)]
pub struct RuleKey<'a> {
    pub requested_by_id: &'a str,
    pub external_id: &'a str,
    pub tool: &'a str,
}

/// Which page of a project's requests: pending ones oldest first (by
/// creation), decided ones newest first (by decision), after a cursor.
#[derive(Clone, Debug)]
pub struct RequestFilter {
    pub project: String,
    /// `None`: both kinds.
    pub kind: Option<RequestKind>,
    pub pending: bool,
    /// `(ms, id)` of the last request of the previous page.
    pub after: Option<(i64, String)>,
    pub limit: u32,
}

#[async_trait]
pub trait RequestStore: Send + Sync {
    /// Stores a new request (counted as pending), unless its idempotency
    /// key was used before in the project for its kind.
    async fn insert_request(&self, insert: RequestInsert<'_>) -> Result<Inserted>;
    /// A request of `project` (of any project when `None`).
    async fn request(&self, project: Option<&str>, id: &str) -> Result<Option<AgentRequest>>;
    /// Stores a decision if the request is still pending (compare-and-set),
    /// with its callback and rule; `None` when it was not pending.
    async fn decide_request(&self, write: RequestDecisionWrite<'_>) -> Result<Option<AgentRequest>>;
    /// One page of a project's requests (see [`RequestFilter`]), reading
    /// `limit` rows.
    async fn requests(&self, filter: &RequestFilter) -> Result<Vec<AgentRequest>>;
    /// The requests shown in run `run_id`, oldest first.
    async fn run_requests(&self, run_id: &str, limit: u32) -> Result<Vec<AgentRequest>>;
    /// How many requests await a person in `project`: one row.
    async fn pending_requests(&self, project: &str) -> Result<u64>;
    /// Pending requests whose deadline is at or before `now`: `(project, id)`.
    async fn due_requests(&self, now: DateTime<Utc>, limit: u32) -> Result<Vec<(String, String)>>;
    /// The earliest deadline of a pending request.
    async fn next_request_deadline(&self) -> Result<Option<DateTime<Utc>>>;
    /// The "always" rule `key` names in `project`: the decision later
    /// requests get.
    async fn request_rule(&self, project: &str, key: RuleKey<'_>) -> Result<Option<RequestOutcome>>;
}
