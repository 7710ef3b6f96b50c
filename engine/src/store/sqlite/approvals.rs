//! A decision on SQLite, on the write thread: the statements are
//! `store::sql::decide`, the reads `store::sql::approvals`.

use chrono::Utc;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;
use sqlx::SqlitePool;

use crate::error::Result;
use crate::model::{Decision, GrantScope, RunStatus, ToolCallStatus};
use crate::store::json_text;
use crate::store::sql::decide::{
    always_column, with_edited_input, AGENT_MESSAGE, COUNT_WAITING, INSERT_DECISION, RESUME_RUN, UPDATE_CALL,
    UPDATE_MESSAGE,
};
use crate::store::sql::{inbox_query, sql, Dialect, Lite};
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
            always: d.always.then_some(always_column(d.decision == Decision::Approved)),
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
    let arguments = json_text(&d.final_arguments);
    let updated = c.prepare_cached(sql!(Lite, UPDATE_CALL))?.execute(params![
        d.status,
        d.approval,
        arguments,
        d.error,
        d.completed_at,
        d.run_id,
        d.call_id
    ])?;
    if updated == 0 {
        return Ok(Some(DecideOutcome::NotAwaiting));
    }
    c.prepare_cached(sql!(Lite, INSERT_DECISION))?.execute(params![
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
        c.prepare_cached(sql!(Lite, crate::store::grants::INSERT_GRANT))?.execute(params![
            d.run_id,
            d.call_id,
            d.tool_name,
            scope,
            arguments,
            d.decided_by_id.as_deref().unwrap_or_default(),
            d.decided_by,
            role,
            d.decided_at
        ])?;
    }
    if let Some(column) = d.always {
        c.prepare_cached(&Lite::add_to_json_list(column))?.execute(params![d.tool_name, d.run_id])?;
    }
    if d.edited_arguments.is_some() {
        edit_invocation(c, d)?;
    }
    let waiting: i64 =
        c.prepare_cached(sql!(Lite, COUNT_WAITING))?.query_row(params![d.run_id, d.step_idx], |r| r.get(0))?;
    let resumed =
        waiting == 0 && c.prepare_cached(sql!(Lite, RESUME_RUN))?.execute(params![to_ms(Utc::now()), d.run_id])? == 1;
    Ok(Some(DecideOutcome::Applied { resumed }))
}

/// Replaces the call's input in the step's agent message (see
/// `sql::decide::with_edited_input`).
fn edit_invocation(c: &Connection, d: &DecisionRows) -> rusqlite::Result<()> {
    let row: Option<(i64, String)> = c
        .prepare_cached(sql!(Lite, AGENT_MESSAGE))?
        .query_row(params![d.run_id, d.step_idx], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((seq, data)) = row else { return Ok(()) };
    let data = with_edited_input(&data, &d.call_id, &d.final_arguments);
    c.prepare_cached(sql!(Lite, UPDATE_MESSAGE))?.execute(params![data, d.run_id, seq])?;
    Ok(())
}

/// SQLite's plan for the inbox page `f` asks for (one line per step), so
/// tests can check that every filter reads one index range in order.
pub(super) async fn explain_pending_inbox(pool: &SqlitePool, f: &InboxFilter) -> Result<Vec<String>> {
    let rows: Vec<(i64, i64, i64, String)> =
        inbox_query::<Lite>(f, f.page_size(), "EXPLAIN QUERY PLAN ").build_query_as().fetch_all(pool).await?;
    Ok(rows.into_iter().map(|r| r.3).collect())
}
