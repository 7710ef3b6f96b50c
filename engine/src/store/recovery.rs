//! What recovery reads at start-up, in bulk: the calls awaiting a decision
//! whose run has an approval timeout (one keyset-paged walk, for the
//! deadline scheduler), the paused runs nothing awaits any more (to
//! resume), pages of paused runs checked for records that cannot be
//! decoded, and (for a store several servers share) the calls whose
//! deadline has passed. None of it reads a run's transcript or steps, and
//! none of it costs a query per run.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::Result;

/// Where a walk over calls awaiting a decision continues: after this call
/// (in `(run_id, step_idx, pos)` order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallCursor {
    pub run_id: String,
    pub step_idx: i64,
    pub pos: i64,
}

/// A call awaiting a decision on a paused run whose approval policy has a
/// timeout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallDeadline {
    pub run_id: String,
    pub call_id: String,
    /// When the call is rejected for want of a decision; `None` when that
    /// lies beyond the calendar (never).
    pub deadline: Option<DateTime<Utc>>,
}

/// Where a walk over paused runs continues: after this run (in
/// `(created_at, id)` order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunCursor {
    pub created_at_ms: i64,
    pub id: String,
}

/// A paused run whose stored record cannot be decoded, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Undecodable {
    pub run_id: String,
    pub problem: String,
}

#[async_trait]
pub trait RecoveryStore: Send + Sync {
    /// Reads the next `limit` calls awaiting a decision after `after` (in
    /// key order) and returns those on paused runs whose approval policy
    /// sets a timeout, with their deadlines (a page may hold fewer, even
    /// none, before the end), and the cursor after the last call read
    /// (`None` at the end).
    async fn call_deadlines(
        &self,
        after: Option<&CallCursor>,
        limit: u32,
    ) -> Result<(Vec<CallDeadline>, Option<CallCursor>)>;
    /// Paused runs (runlens's own, not recorded from spans) with no call
    /// awaiting a decision: every decision was made, or the run waits on
    /// child runs only.
    async fn paused_runs_awaiting_nothing(&self) -> Result<Vec<String>>;
    /// Up to `limit` paused runs after `after`, each checked for a stored
    /// field that cannot be decoded: those that cannot, with the reason, and
    /// the cursor of the next page (`None` at the end).
    async fn undecodable_paused_runs(
        &self,
        after: Option<&RunCursor>,
        limit: u32,
    ) -> Result<(Vec<Undecodable>, Option<RunCursor>)>;
    /// Up to `limit` calls awaiting a decision on paused runs whose deadline
    /// is at or before `now`: `(run id, call id)`.
    async fn overdue_calls(&self, now: DateTime<Utc>, limit: u32) -> Result<Vec<(String, String)>>;
}

/// One row of a page of awaiting calls: `(run_id, step_idx, pos, call_id,
/// requested_at_ms, run status, run approval policy)`; both stores read it
/// with the same query shape.
pub(crate) type DeadlineRow = (String, i64, i64, String, Option<i64>, Option<String>, Option<String>);

/// A page of [`DeadlineRow`]s as [`RecoveryStore::call_deadlines`] answers:
/// the deadlines of the calls of paused runs whose policy sets a timeout, and
/// the cursor after the page when it was full (`limit` rows).
pub(crate) fn deadline_page(rows: Vec<DeadlineRow>, limit: u32) -> (Vec<CallDeadline>, Option<CallCursor>) {
    let next = match rows.last() {
        Some((run_id, step_idx, pos, ..)) if rows.len() as u64 == u64::from(limit) => {
            Some(CallCursor { run_id: run_id.clone(), step_idx: *step_idx, pos: *pos })
        }
        _ => None,
    };
    let calls = rows
        .into_iter()
        .filter(|(.., status, _)| status.as_deref() == Some("paused"))
        .filter_map(|(run_id, _, _, call_id, requested_at, _, approval)| {
            let approval = approval?;
            has_timeout(&approval).then(|| CallDeadline {
                deadline: deadline_of(&approval, requested_at.unwrap_or_default()),
                run_id,
                call_id,
            })
        })
        .collect();
    (calls, next)
}

/// Whether a run's approval policy (stored JSON text) sets a timeout.
pub(crate) fn has_timeout(approval: &str) -> bool {
    serde_json::from_str::<crate::model::ApprovalPolicy>(approval).is_ok_and(|p| p.timeout_s.is_some())
}

/// A call's deadline from its run's approval policy (stored JSON text)
/// and the time it was requested; `None` without a timeout, or beyond the
/// calendar. The policy is read leniently, as the inbox reads it.
pub(crate) fn deadline_of(approval: &str, requested_at_ms: i64) -> Option<DateTime<Utc>> {
    let policy: crate::model::ApprovalPolicy = serde_json::from_str(approval).unwrap_or_default();
    super::rows::deadline(super::from_ms(requested_at_ms), policy.timeout_s?)
}
