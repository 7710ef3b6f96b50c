//! A decision on SQLite, on the write thread (the reads are
//! `store::sql::approvals`).
//!
//! A decision is one transaction: a compare-and-set on the call's status
//! (so exactly one concurrent decision wins), the audit row (whose primary
//! key also refuses a second decision), the "always" list, the edited
//! arguments in the transcript, and — when it was the step's last pending
//! call — the `paused → running` move. A crash can never separate them.

use chrono::Utc;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;
use sqlx::SqlitePool;

use crate::error::Result;
use crate::model::{Decision, GrantScope, RunStatus, ToolCallStatus};
use crate::store::json_text;
use crate::store::sql::{inbox_query, Lite};
use crate::store::{to_ms, DecideOutcome, DecisionWrite, InboxFilter};

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

/// SQLite's plan for the inbox page `f` asks for (one line per step), so
/// tests can check that every filter reads one index range in order.
pub(super) async fn explain_pending_inbox(pool: &SqlitePool, f: &InboxFilter) -> Result<Vec<String>> {
    let rows: Vec<(i64, i64, i64, String)> =
        inbox_query::<Lite>(f, f.page_size(), "EXPLAIN QUERY PLAN ").build_query_as().fetch_all(pool).await?;
    Ok(rows.into_iter().map(|r| r.3).collect())
}
