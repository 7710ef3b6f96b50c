//! Approval writes and reads for the PostgreSQL store.
//!
//! A decision is one transaction: a compare-and-set on the call's status
//! (so exactly one concurrent decision wins), the audit row (whose primary
//! key also refuses a second decision), the "always" list, the edited
//! arguments in the transcript, and — when it was the step's last pending
//! call — the `paused → running` move. A crash can never separate them.
//!
//! Unlike SQLite, PostgreSQL runs decisions concurrently, so a decision
//! first locks its run's row (`FOR UPDATE`): decisions on calls of the same
//! run take turns, and the last one to decide always sees every other
//! decision committed when it counts the calls still waiting (two
//! concurrent decisions on a step's last two calls would otherwise each see
//! the other's call waiting, and the run would never resume).
//!
//! The calls awaiting a decision are read from `pending_calls`, which
//! triggers keep in step with the calls and runs, with each project's count
//! beside it (see `0004_pending_inbox.sql`): a page of a project's inbox is
//! one index range whatever the backlog, and its count one row.

use async_trait::async_trait;
use chrono::Utc;
use serde_json::Value;
use sqlx::{PgPool, Postgres, QueryBuilder};

use super::PgStore;
use crate::error::Result;
use crate::model::{Decision, GrantScope, Interruption, RunStatus, ToolCallStatus};
use crate::store::json_text;
use crate::store::rows::{DecidedCallRow, PendingCallRow};
use crate::store::ApprovalStore;
use crate::store::{
    to_ms, DecideOutcome, DecidedCall, DecisionCursor, DecisionWrite, InboxFilter, InboxStart, PendingCall,
    PendingCalls,
};

pub(super) async fn decide(pool: &PgPool, w: DecisionWrite<'_>) -> Result<DecideOutcome> {
    RunStatus::Paused.check(RunStatus::Running)?;
    let c = w.call;
    let d = w.decision;
    let (status, completed_at) = match d.decision {
        Decision::Approved => (ToolCallStatus::Pending, None),
        Decision::Rejected => (ToolCallStatus::Rejected, Some(to_ms(d.decided_at))),
    };
    let mut tx = pool.begin().await?;
    // Serializes the decisions of one run (see the module doc). A run that
    // is not paused (any more) has no call to decide.
    let paused: Option<String> =
        sqlx::query_scalar("SELECT id FROM runs WHERE id = $1 AND status = 'paused' FOR UPDATE")
            .bind(&c.run_id)
            .fetch_optional(&mut *tx)
            .await?;
    if paused.is_none() {
        return Ok(DecideOutcome::NotAwaiting);
    }
    let updated = sqlx::query(
        "UPDATE tool_calls SET status = $1, approval = $2::jsonb, arguments = $3::jsonb, error = $4,
            completed_at = $5
         WHERE run_id = $6 AND id = $7 AND status = 'awaiting_approval'
           AND run_id IN (SELECT id FROM runs WHERE id = $6 AND status = 'paused')",
    )
    .bind(status.as_str())
    .bind(json_text(d))
    .bind(json_text(w.final_arguments))
    .bind(&w.error)
    .bind(completed_at)
    .bind(&c.run_id)
    .bind(&c.id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if updated == 0 {
        return Ok(DecideOutcome::NotAwaiting);
    }
    sqlx::query(
        "INSERT INTO approval_decisions (run_id, call_id, step_idx, tool_name, decision, decided_by, decided_at,
            always, original_arguments, edited_arguments, comment, decided_by_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10::jsonb, $11, $12)",
    )
    .bind(&c.run_id)
    .bind(&c.id)
    .bind(c.step_index as i64)
    .bind(&c.tool_name)
    .bind(d.decision.as_str())
    .bind(&d.decided_by)
    .bind(to_ms(d.decided_at))
    .bind(d.always)
    .bind(json_text(&d.original_arguments))
    .bind(d.edited_arguments.as_ref().map(json_text))
    .bind(&d.comment)
    .bind(&d.decided_by_id)
    .execute(&mut *tx)
    .await?;
    if let (Decision::Approved, Some(role)) = (d.decision, w.role) {
        let scope = if d.always { GrantScope::Run } else { GrantScope::Call };
        sqlx::query(&crate::store::requests_sql::numbered(crate::store::grants::INSERT_GRANT))
            .bind(&c.run_id)
            .bind(&c.id)
            .bind(&c.tool_name)
            .bind(scope.as_str())
            .bind(json_text(w.final_arguments))
            .bind(d.decided_by_id.as_deref().unwrap_or_default())
            .bind(&d.decided_by)
            .bind(role.as_str())
            .bind(to_ms(d.decided_at))
            .execute(&mut *tx)
            .await?;
    }
    if d.always {
        let column = match d.decision {
            Decision::Approved => "always_approve",
            Decision::Rejected => "always_reject",
        };
        let sql = format!(
            "UPDATE runs SET {column} = {column} || jsonb_build_array($1::text)
             WHERE id = $2 AND NOT ({column} @> jsonb_build_array($1::text))"
        );
        sqlx::query(&sql).bind(&c.tool_name).bind(&c.run_id).execute(&mut *tx).await?;
    }
    if d.edited_arguments.is_some() {
        edit_invocation(&mut tx, &c.run_id, c.step_index, &c.id, w.final_arguments).await?;
    }
    let waiting: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM tool_calls WHERE run_id = $1 AND step_idx = $2 AND status = 'awaiting_approval'",
    )
    .bind(&c.run_id)
    .bind(c.step_index as i64)
    .fetch_one(&mut *tx)
    .await?;
    let mut resumed = false;
    if waiting == 0 {
        resumed =
            sqlx::query("UPDATE runs SET status = 'running', updated_at = $1 WHERE id = $2 AND status = 'paused'")
                .bind(to_ms(Utc::now()))
                .bind(&c.run_id)
                .execute(&mut *tx)
                .await?
                .rows_affected()
                == 1;
    }
    tx.commit().await?;
    Ok(DecideOutcome::Applied { resumed })
}

/// Replaces the call's input in the step's agent message, so the model's
/// history shows the arguments that actually ran.
async fn edit_invocation(
    tx: &mut sqlx::PgConnection,
    run_id: &str,
    step: u32,
    call_id: &str,
    args: &Value,
) -> Result<()> {
    let row: Option<(i64, String)> = sqlx::query_as(
        "SELECT seq, data::text FROM messages WHERE run_id = $1 AND step_idx = $2 AND type = 'agent'
         ORDER BY seq LIMIT 1",
    )
    .bind(run_id)
    .bind(step as i64)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((seq, data)) = row else { return Ok(()) };
    let mut data: Value = serde_json::from_str(&data).unwrap_or_default();
    if let Some(invocations) = data.get_mut("invocations").and_then(Value::as_array_mut) {
        for inv in invocations.iter_mut().filter(|i| i["id"] == call_id) {
            inv["input"] = args.clone();
        }
    }
    sqlx::query("UPDATE messages SET data = $1::jsonb WHERE run_id = $2 AND seq = $3")
        .bind(data.to_string())
        .bind(run_id)
        .bind(seq)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// The columns of a pending call, from `pending_calls p` joined by key to
/// its call `tc` and run `r`.
const PENDING_COLUMNS: &str = "p.run_id, r.name AS run_name, r.approval::text AS run_approval, tc.id, p.step_idx,
    p.pos, p.tool_name, tc.arguments::text AS arguments, tc.reasoning, p.requested_at,
    CASE WHEN r.parent_call_id IS NOT NULL THEN r.parent_run_id END AS parent_run_id";

const PENDING_FROM: &str = " FROM pending_calls p
    JOIN tool_calls tc ON tc.run_id = p.run_id AND tc.step_idx = p.step_idx AND tc.pos = p.pos
    JOIN runs r ON r.id = p.run_id";

const PENDING_ORDER: &str = " ORDER BY p.requested_at, p.run_id, p.step_idx, p.pos";

pub(super) async fn interruptions(
    pool: &PgPool,
    run_id: Option<&str>,
    project: Option<&str>,
) -> Result<Vec<Interruption>> {
    let mut q = QueryBuilder::<Postgres>::new("SELECT ");
    q.push(PENDING_COLUMNS).push(PENDING_FROM).push(" WHERE TRUE");
    if let Some(id) = run_id {
        q.push(" AND p.run_id = ").push_bind(id.to_owned());
    }
    if let Some(project) = project {
        q.push(" AND p.project = ").push_bind(project.to_owned());
    }
    q.push(PENDING_ORDER);
    let rows = q.build_query_as::<PendingCallRow>().fetch_all(pool).await?;
    Ok(rows.into_iter().map(|r| PendingCall::from(r).call).collect())
}

pub(super) async fn pending_inbox(pool: &PgPool, f: &InboxFilter) -> Result<PendingCalls> {
    let limit = f.page_size();
    let rows = inbox_query(f, limit, "").build_query_as::<PendingCallRow>().fetch_all(pool).await?;
    Ok(PendingCalls::from_rows(rows.into_iter().map(PendingCall::from).collect(), limit))
}

/// PostgreSQL's plan for the inbox page `f` asks for, with sequential scans
/// and sorts priced out (`enable_seqscan`, `enable_sort` off for the one
/// statement): a test's tables are too small for the planner to prefer an
/// index, so this shows whether one serves the page in order at all.
pub(super) async fn explain_pending_inbox(pool: &PgPool, f: &InboxFilter) -> Result<Vec<String>> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET LOCAL enable_seqscan = off").execute(&mut *tx).await?;
    sqlx::query("SET LOCAL enable_sort = off").execute(&mut *tx).await?;
    let lines: Vec<String> = inbox_query(f, f.page_size(), "EXPLAIN ").build_query_scalar().fetch_all(&mut *tx).await?;
    tx.rollback().await?;
    Ok(lines)
}

/// A page of the inbox: one range of `pending_calls`' primary key
/// (`project`, then the order), of `pending_calls_by_tool` for one tool, or
/// of `pending_calls_by_call` for one run (whose few rows are sorted).
fn inbox_query(f: &InboxFilter, limit: u32, prefix: &str) -> QueryBuilder<'static, Postgres> {
    let mut q = QueryBuilder::<Postgres>::new(prefix);
    q.push("SELECT ").push(PENDING_COLUMNS).push(PENDING_FROM);
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

pub(super) async fn pending_count(pool: &PgPool, project: &str) -> Result<u64> {
    let n: Option<i64> = sqlx::query_scalar("SELECT n FROM pending_counts WHERE project = $1")
        .bind(project)
        .fetch_optional(pool)
        .await?;
    Ok(n.unwrap_or(0).max(0) as u64)
}

pub(super) async fn cancel_awaiting(pool: &PgPool, run_id: &str) -> Result<u64> {
    let n = sqlx::query(
        "UPDATE tool_calls SET status = 'cancelled', error = 'cancelled: the run was cancelled', completed_at = $1
         WHERE run_id = $2 AND (status = 'awaiting_approval' OR (status = 'running' AND child_run_id IS NOT NULL))",
    )
    .bind(to_ms(Utc::now()))
    .bind(run_id)
    .execute(pool)
    .await?
    .rows_affected();
    Ok(n)
}

pub(super) async fn decisions(
    pool: &PgPool,
    project: &str,
    before: Option<&DecisionCursor>,
    offset: u32,
    limit: u32,
) -> Result<Vec<DecidedCall>> {
    let rows = sqlx::query_as::<_, DecidedCallRow>(
        "SELECT d.run_id, r.name AS run_name, d.call_id, d.step_idx, d.tool_name, d.decision, d.decided_by,
                d.decided_by_id, d.decided_at, d.always, d.original_arguments::text AS original_arguments,
                d.edited_arguments::text AS edited_arguments, d.comment
         FROM approval_decisions d JOIN runs r ON r.id = d.run_id
         WHERE r.project = $1
           AND ($2::bigint IS NULL OR (d.decided_at, d.run_id, d.call_id) < ($2::bigint, $3::text, $4::text))
         ORDER BY d.decided_at DESC, d.run_id DESC, d.call_id DESC
         LIMIT $5 OFFSET $6",
    )
    .bind(project)
    .bind(before.map(|c| c.decided_at_ms))
    .bind(before.map(|c| c.run_id.as_str()))
    .bind(before.map(|c| c.call_id.as_str()))
    .bind(i64::from(limit))
    .bind(i64::from(offset))
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(DecidedCall::from).collect())
}

#[async_trait]
impl ApprovalStore for PgStore {
    async fn decide(&self, write: DecisionWrite<'_>) -> Result<DecideOutcome> {
        decide(&self.pool, write).await
    }

    async fn interruptions(&self, run_id: Option<&str>, project: Option<&str>) -> Result<Vec<Interruption>> {
        interruptions(&self.pool, run_id, project).await
    }

    async fn pending_inbox(&self, filter: &InboxFilter) -> Result<PendingCalls> {
        pending_inbox(&self.pool, filter).await
    }

    async fn pending_count(&self, project: &str) -> Result<u64> {
        pending_count(&self.pool, project).await
    }

    async fn decisions(
        &self,
        project: &str,
        before: Option<&DecisionCursor>,
        offset: u32,
        limit: u32,
    ) -> Result<Vec<DecidedCall>> {
        decisions(&self.pool, project, before, offset, limit).await
    }

    async fn cancel_awaiting(&self, run_id: &str) -> Result<u64> {
        cancel_awaiting(&self.pool, run_id).await
    }
}

impl PgStore {
    /// PostgreSQL's plan for the pending-inbox page `filter` asks for (see
    /// `explain_pending_inbox`), so tests can check that an index serves it
    /// in order.
    pub async fn explain_pending_inbox(&self, filter: &InboxFilter) -> Result<Vec<String>> {
        explain_pending_inbox(&self.pool, filter).await
    }
}
