//! [`ApprovalStore`]'s reads and the cancel for every backend, and where a
//! decision goes: each backend's own transaction (SQLite's on its write
//! thread, beside the turn's writes; PostgreSQL's under a lock on the run's
//! row, see `postgres::approvals`).
//!
//! The calls awaiting a decision are read from `pending_calls`, which
//! triggers keep in step with the calls and runs, with each project's count
//! beside it (see the `pending_inbox` migration of each backend): a page of
//! a project's inbox is one index range whatever the backlog, and its
//! count one row. SQLite plans without statistics, so its queries name the
//! index and the join order ([`Dialect::indexed_by`], [`Dialect::JOIN_IN_ORDER`]);
//! PostgreSQL's planner picks them itself.

use async_trait::async_trait;
use chrono::Utc;
use sqlx::{Database, Encode, QueryBuilder, Type};

use super::{sql, with_db, Db, Dialect, SqlStore};
use crate::error::Result;
use crate::model::Interruption;
use crate::store::rows::{DecidedCallRow, PendingCallRow};
use crate::store::{
    to_ms, ApprovalStore, DecideOutcome, DecidedCall, DecisionCursor, DecisionWrite, InboxFilter, InboxStart,
    PendingCall, PendingCalls,
};

/// The columns of a pending call, from `pending_calls p` joined by key to
/// its call `tc` and run `r`.
const PENDING_COLUMNS: &str = "p.run_id, r.name AS run_name, r.approval::text AS run_approval, tc.id, p.step_idx,
    p.pos, p.tool_name, tc.arguments::text AS arguments, tc.reasoning, p.requested_at,
    CASE WHEN r.parent_call_id IS NOT NULL THEN r.parent_run_id END AS parent_run_id";

/// One run's few rows come through `pending_calls_by_call` (and are
/// sorted): named, for without statistics SQLite would rather walk the
/// project's range in order than sort one run's few rows.
const BY_CALL: &str = "pending_calls_by_call";

/// `pending_calls` (through `index`, when named) leads the join: every
/// query reads its rows in their index's order and looks up each one's
/// call and run by key.
fn pending_from<D: Dialect>(index: Option<&str>) -> String {
    let indexed = index.map(D::indexed_by).unwrap_or_default();
    let join = D::JOIN_IN_ORDER;
    format!(
        " FROM pending_calls p{indexed}
         {join} tool_calls tc ON tc.run_id = p.run_id AND tc.step_idx = p.step_idx AND tc.pos = p.pos
         {join} runs r ON r.id = p.run_id"
    )
}

const PENDING_ORDER: &str = " ORDER BY p.requested_at, p.run_id, p.step_idx, p.pos";

/// A page of the inbox, after `prefix` (an `EXPLAIN`, or nothing): one
/// range of `pending_calls`' primary key (`project`, then the order), of
/// `pending_calls_by_tool` for one tool (`project, tool_name`, then the
/// order), or of `pending_calls_by_call` for one run.
pub(crate) fn inbox_query<D: Dialect>(f: &InboxFilter, limit: u32, prefix: &str) -> QueryBuilder<'static, D::DB>
where
    <D::DB as Database>::Arguments<'static>: Default,
    String: Encode<'static, D::DB> + Type<D::DB>,
    i64: Encode<'static, D::DB> + Type<D::DB>,
{
    let mut q = QueryBuilder::<D::DB>::new(prefix);
    let index = f.run_id.as_ref().map(|_| BY_CALL);
    q.push("SELECT ").push(D::rewrite(PENDING_COLUMNS)).push(pending_from::<D>(index));
    q.push(" WHERE p.project = ").push_bind(f.project.clone());
    if let Some(run_id) = &f.run_id {
        q.push(" AND p.run_id = ").push_bind(run_id.clone());
    }
    if let Some(tool) = &f.tool {
        q.push(" AND p.tool_name = ").push_bind(tool.clone());
    }
    match f.lower_bound() {
        InboxStart::Beginning => {}
        InboxStart::After(c) => {
            q.push(" AND (p.requested_at, p.run_id, p.step_idx, p.pos) > (")
                .push_bind(c.requested_at_ms)
                .push(", ")
                .push_bind(c.run_id.clone())
                .push(", ")
                .push_bind(i64::from(c.step_idx))
                .push(", ")
                .push_bind(i64::from(c.pos))
                .push(")");
        }
        InboxStart::From(ms) => {
            q.push(" AND p.requested_at >= ").push_bind(ms);
        }
    }
    if let Some(until) = f.requested_until_ms {
        q.push(" AND p.requested_at <= ").push_bind(until);
    }
    q.push(PENDING_ORDER).push(" LIMIT ").push_bind(i64::from(limit) + 1);
    q
}

#[async_trait]
impl<S: SqlStore> ApprovalStore for S {
    async fn decide(&self, write: DecisionWrite<'_>) -> Result<DecideOutcome> {
        match self.db() {
            Db::Sqlite(store) => store.decide_on_thread(write).await,
            #[cfg(feature = "postgres")]
            Db::Postgres(store) => store.decide_locked(write).await,
        }
    }

    async fn interruptions(&self, run_id: Option<&str>, project: Option<&str>) -> Result<Vec<Interruption>> {
        let rows: Vec<PendingCallRow> = with_db!(self.db(), |pool, D| {
            let index = run_id.map(|_| BY_CALL);
            let mut q = QueryBuilder::<<D as Dialect>::DB>::new("SELECT ");
            q.push(D::rewrite(PENDING_COLUMNS)).push(pending_from::<D>(index)).push(" WHERE 1 = 1");
            if let Some(id) = run_id {
                q.push(" AND p.run_id = ").push_bind(id.to_owned());
            }
            if let Some(project) = project {
                q.push(" AND p.project = ").push_bind(project.to_owned());
            }
            q.push(PENDING_ORDER);
            q.build_query_as().fetch_all(pool).await?
        });
        Ok(rows.into_iter().map(|r| PendingCall::from(r).call).collect())
    }

    async fn pending_inbox(&self, f: &InboxFilter) -> Result<PendingCalls> {
        let limit = f.page_size();
        let rows: Vec<PendingCallRow> =
            with_db!(self.db(), |pool, D| inbox_query::<D>(f, limit, "").build_query_as().fetch_all(pool).await?);
        Ok(PendingCalls::from_rows(rows.into_iter().map(PendingCall::from).collect(), limit))
    }

    async fn pending_count(&self, project: &str) -> Result<u64> {
        let n: Option<i64> = with_db!(self.db(), |pool, D| {
            sqlx::query_scalar(sql!(D, "SELECT n FROM pending_counts WHERE project = ?"))
                .bind(project)
                .fetch_optional(pool)
                .await?
        });
        Ok(n.unwrap_or(0).max(0) as u64)
    }

    async fn decisions(
        &self,
        project: &str,
        before: Option<&DecisionCursor>,
        offset: u32,
        limit: u32,
    ) -> Result<Vec<DecidedCall>> {
        let rows: Vec<DecidedCallRow> = with_db!(self.db(), |pool, D| {
            sqlx::query_as(sql!(
                D,
                "SELECT d.run_id, r.name AS run_name, d.call_id, d.step_idx, d.tool_name, d.decision, d.decided_by,
                    d.decided_by_id, d.decided_at, d.always, d.original_arguments::text AS original_arguments,
                    d.edited_arguments::text AS edited_arguments, d.comment
                 FROM approval_decisions d JOIN runs r ON r.id = d.run_id
                 WHERE r.project = ?1
                   AND (?2::bigint IS NULL OR (d.decided_at, d.run_id, d.call_id) < (?2::bigint, ?3::text, ?4::text))
                 ORDER BY d.decided_at DESC, d.run_id DESC, d.call_id DESC
                 LIMIT ?5 OFFSET ?6"
            ))
            .bind(project)
            .bind(before.map(|c| c.decided_at_ms))
            .bind(before.map(|c| c.run_id.as_str()))
            .bind(before.map(|c| c.call_id.as_str()))
            .bind(i64::from(limit))
            .bind(i64::from(offset))
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(DecidedCall::from).collect())
    }

    async fn cancel_awaiting(&self, run_id: &str) -> Result<u64> {
        let n = with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(
                D,
                "UPDATE tool_calls SET status = 'cancelled', error = 'cancelled: the run was cancelled', completed_at = ?
                 WHERE run_id = ? AND (status = 'awaiting_approval' OR (status = 'running' AND child_run_id IS NOT NULL))"
            ))
            .bind(to_ms(Utc::now()))
            .bind(run_id)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(n)
    }
}
