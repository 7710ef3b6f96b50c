//! Approval writes and reads for the SQLite store.
//!
//! A decision is one transaction: a compare-and-set on the call's status
//! (so exactly one concurrent decision wins), the audit row (whose primary
//! key also refuses a second decision), the "always" list, the edited
//! arguments in the transcript, and — when it was the step's last pending
//! call — the `paused → running` move. A crash can never separate them.
//!
//! The calls awaiting a decision are read from `pending_calls`, which
//! triggers keep in step with the calls and runs, with each project's count
//! beside it (see `0015_pending_inbox.sql`): a page of a project's inbox is
//! one index range whatever the backlog, and its count one row.

use chrono::Utc;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;
use sqlx::{QueryBuilder, Sqlite, SqlitePool};

use crate::error::Result;
use crate::model::{Decision, GrantScope, Interruption, RunStatus, ToolCallStatus};
use crate::store::json_text;
use crate::store::rows::{DecidedCallRow, PendingCallRow};
use crate::store::{
    to_ms, DecideOutcome, DecidedCall, DecisionCursor, DecisionWrite, InboxFilter, InboxStart, PendingCall,
    PendingCalls,
};

/// A decision, encoded and owned, for the write thread (see `commit`).
pub(super) struct DecisionRows {
    run_id: String,
    call_id: String,
    step_idx: i64,
    tool_name: String,
    status: &'static str,
    approval: String,
    final_arguments: Value,
    error: Option<String>,
    completed_at: Option<i64>,
    decision: &'static str,
    decided_by: String,
    decided_at: i64,
    always: Option<&'static str>,
    original_arguments: String,
    edited_arguments: Option<String>,
    comment: Option<String>,
    decided_by_id: Option<String>,
    /// For an approval: the grant's scope and the decider's role.
    grant: Option<(&'static str, &'static str)>,
}

impl DecisionRows {
    pub(super) fn new(w: &DecisionWrite<'_>) -> Result<Self> {
        RunStatus::Paused.check(RunStatus::Running)?;
        let (c, d) = (w.call, w.decision);
        let (status, completed_at) = match d.decision {
            Decision::Approved => (ToolCallStatus::Pending, None),
            Decision::Rejected => (ToolCallStatus::Rejected, Some(to_ms(d.decided_at))),
        };
        Ok(Self {
            run_id: c.run_id.clone(),
            call_id: c.id.clone(),
            step_idx: i64::from(c.step_index),
            tool_name: c.tool_name.clone(),
            status: status.as_str(),
            approval: json_text(d),
            final_arguments: w.final_arguments.clone(),
            error: w.error.clone(),
            completed_at,
            decision: d.decision.as_str(),
            decided_by: d.decided_by.clone(),
            decided_at: to_ms(d.decided_at),
            always: d.always.then_some(match d.decision {
                Decision::Approved => "always_approve",
                Decision::Rejected => "always_reject",
            }),
            original_arguments: json_text(&d.original_arguments),
            edited_arguments: d.edited_arguments.as_ref().map(json_text),
            comment: d.comment.clone(),
            decided_by_id: d.decided_by_id.clone(),
            grant: match (d.decision, w.role) {
                (Decision::Approved, Some(role)) => {
                    Some((if d.always { GrantScope::Run } else { GrantScope::Call }.as_str(), role.as_str()))
                }
                _ => None,
            },
        })
    }
}

/// Runs a decision on the write thread's transaction (see the module docs).
pub(super) fn decide(c: &Connection, d: &DecisionRows) -> rusqlite::Result<Option<DecideOutcome>> {
    let updated = c
        .prepare_cached(
            "UPDATE tool_calls SET status = ?, approval = ?, arguments = ?, error = ?, completed_at = ?
             WHERE run_id = ?6 AND id = ? AND status = 'awaiting_approval'
               AND run_id IN (SELECT id FROM runs WHERE id = ?6 AND status = 'paused')",
        )?
        .execute(params![
            d.status,
            d.approval,
            json_text(&d.final_arguments),
            d.error,
            d.completed_at,
            d.run_id,
            d.call_id
        ])?;
    if updated == 0 {
        return Ok(Some(DecideOutcome::NotAwaiting));
    }
    c.prepare_cached(
        "INSERT INTO approval_decisions (run_id, call_id, step_idx, tool_name, decision, decided_by, decided_at,
            always, original_arguments, edited_arguments, comment, decided_by_id)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )?
    .execute(params![
        d.run_id,
        d.call_id,
        d.step_idx,
        d.tool_name,
        d.decision,
        d.decided_by,
        d.decided_at,
        d.always.is_some(),
        d.original_arguments,
        d.edited_arguments,
        d.comment,
        d.decided_by_id
    ])?;
    if let Some((scope, role)) = d.grant {
        c.prepare_cached(crate::store::grants::INSERT_GRANT)?.execute(params![
            d.run_id,
            d.call_id,
            d.tool_name,
            scope,
            json_text(&d.final_arguments),
            d.decided_by_id.as_deref().unwrap_or_default(),
            d.decided_by,
            role,
            d.decided_at
        ])?;
    }
    if let Some(column) = d.always {
        let sql = format!(
            "UPDATE runs SET {column} = json_insert({column}, '$[#]', ?1)
             WHERE id = ?2 AND NOT EXISTS (SELECT 1 FROM json_each({column}) WHERE value = ?1)"
        );
        c.prepare_cached(&sql)?.execute(params![d.tool_name, d.run_id])?;
    }
    if d.edited_arguments.is_some() {
        edit_invocation(c, d)?;
    }
    let waiting: i64 = c
        .prepare_cached(
            "SELECT COUNT(*) FROM tool_calls WHERE run_id = ? AND step_idx = ? AND status = 'awaiting_approval'",
        )?
        .query_row(params![d.run_id, d.step_idx], |r| r.get(0))?;
    let mut resumed = false;
    if waiting == 0 {
        resumed = c
            .prepare_cached("UPDATE runs SET status = 'running', updated_at = ? WHERE id = ? AND status = 'paused'")?
            .execute(params![to_ms(Utc::now()), d.run_id])?
            == 1;
    }
    Ok(Some(DecideOutcome::Applied { resumed }))
}

/// Replaces the call's input in the step's agent message, so the model's
/// history shows the arguments that actually ran.
fn edit_invocation(c: &Connection, d: &DecisionRows) -> rusqlite::Result<()> {
    let row: Option<(i64, String)> = c
        .prepare_cached("SELECT seq, data FROM messages WHERE run_id = ? AND step_idx = ? AND type = 'agent'")?
        .query_row(params![d.run_id, d.step_idx], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((seq, data)) = row else { return Ok(()) };
    let mut data: Value = serde_json::from_str(&data).unwrap_or_default();
    if let Some(invocations) = data.get_mut("invocations").and_then(Value::as_array_mut) {
        for inv in invocations.iter_mut().filter(|i| i["id"] == d.call_id.as_str()) {
            inv["input"] = d.final_arguments.clone();
        }
    }
    c.prepare_cached("UPDATE messages SET data = ? WHERE run_id = ? AND seq = ?")?.execute(params![
        data.to_string(),
        d.run_id,
        seq
    ])?;
    Ok(())
}

/// The columns of a pending call, from `pending_calls p` joined by key to
/// its call `tc` and run `r`.
const PENDING_COLUMNS: &str = "p.run_id, r.name AS run_name, r.approval AS run_approval, tc.id, p.step_idx,
    p.pos, p.tool_name, tc.arguments, tc.reasoning, p.requested_at,
    CASE WHEN r.parent_call_id IS NOT NULL THEN r.parent_run_id END AS parent_run_id";

/// `pending_calls` (through `index`, when given) leads the join: every
/// query reads its rows in their index's order and looks up each one's call
/// and run by key.
fn pending_from(index: Option<&str>) -> String {
    let indexed = index.map(|i| format!(" INDEXED BY {i}")).unwrap_or_default();
    format!(
        " FROM pending_calls p{indexed}
         CROSS JOIN tool_calls tc ON tc.run_id = p.run_id AND tc.step_idx = p.step_idx AND tc.pos = p.pos
         CROSS JOIN runs r ON r.id = p.run_id"
    )
}

const PENDING_ORDER: &str = " ORDER BY p.requested_at, p.run_id, p.step_idx, p.pos";

pub(super) async fn interruptions(
    pool: &SqlitePool,
    run_id: Option<&str>,
    project: Option<&str>,
) -> Result<Vec<Interruption>> {
    // One run's few rows come through `pending_calls_by_call` (and are
    // sorted); a project's are read in order from the primary key.
    let index = run_id.map(|_| "pending_calls_by_call");
    let mut q = QueryBuilder::<Sqlite>::new("SELECT ");
    q.push(PENDING_COLUMNS).push(pending_from(index)).push(" WHERE 1 = 1");
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

pub(super) async fn pending_inbox(pool: &SqlitePool, f: &InboxFilter) -> Result<PendingCalls> {
    let limit = f.page_size();
    let rows = inbox_query(f, limit, "").build_query_as::<PendingCallRow>().fetch_all(pool).await?;
    Ok(PendingCalls::from_rows(rows.into_iter().map(PendingCall::from).collect(), limit))
}

/// SQLite's plan for the inbox page `f` asks for (one line per step), so
/// tests can check that every filter reads one index range in order.
pub(super) async fn explain_pending_inbox(pool: &SqlitePool, f: &InboxFilter) -> Result<Vec<String>> {
    let rows: Vec<(i64, i64, i64, String)> =
        inbox_query(f, f.page_size(), "EXPLAIN QUERY PLAN ").build_query_as().fetch_all(pool).await?;
    Ok(rows.into_iter().map(|r| r.3).collect())
}

/// A page of the inbox: one range of `pending_calls`' primary key
/// (`project`, then the order), of `pending_calls_by_tool` for one tool
/// (`project, tool_name`, then the order), or of `pending_calls_by_call`
/// for one run (named: without statistics SQLite would rather walk the
/// project's range in order than sort one run's few rows).
fn inbox_query(f: &InboxFilter, limit: u32, prefix: &str) -> QueryBuilder<'static, Sqlite> {
    let mut q = QueryBuilder::<Sqlite>::new(prefix);
    let index = f.run_id.as_ref().map(|_| "pending_calls_by_call");
    q.push("SELECT ").push(PENDING_COLUMNS).push(pending_from(index));
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

pub(super) async fn pending_count(pool: &SqlitePool, project: &str) -> Result<u64> {
    let n: Option<i64> =
        sqlx::query_scalar("SELECT n FROM pending_counts WHERE project = ?").bind(project).fetch_optional(pool).await?;
    Ok(n.unwrap_or(0).max(0) as u64)
}

pub(super) async fn cancel_awaiting(pool: &SqlitePool, run_id: &str) -> Result<u64> {
    let n = sqlx::query(
        "UPDATE tool_calls SET status = 'cancelled', error = 'cancelled: the run was cancelled', completed_at = ?
         WHERE run_id = ? AND (status = 'awaiting_approval' OR (status = 'running' AND child_run_id IS NOT NULL))",
    )
    .bind(to_ms(Utc::now()))
    .bind(run_id)
    .execute(pool)
    .await?
    .rows_affected();
    Ok(n)
}

pub(super) async fn decisions(
    pool: &SqlitePool,
    project: &str,
    before: Option<&DecisionCursor>,
    offset: u32,
    limit: u32,
) -> Result<Vec<DecidedCall>> {
    let rows = sqlx::query_as::<_, DecidedCallRow>(
        "SELECT d.run_id, r.name AS run_name, d.call_id, d.step_idx, d.tool_name, d.decision, d.decided_by,
                d.decided_by_id, d.decided_at, d.always, d.original_arguments, d.edited_arguments, d.comment
         FROM approval_decisions d JOIN runs r ON r.id = d.run_id
         WHERE r.project = ?1
           AND (?2 IS NULL OR (d.decided_at, d.run_id, d.call_id) < (?2, ?3, ?4))
         ORDER BY d.decided_at DESC, d.run_id DESC, d.call_id DESC
         LIMIT ?5 OFFSET ?6",
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
