//! A decision on PostgreSQL (the reads are `store::sql::approvals`).
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

use chrono::Utc;
use serde_json::Value;
use sqlx::PgPool;

use super::PgStore;
use crate::error::Result;
use crate::model::{Decision, GrantScope, RunStatus, ToolCallStatus};
use crate::store::json_text;
use crate::store::sql::{inbox_query, Pg};
use crate::store::{to_ms, DecideOutcome, DecisionWrite, InboxFilter};

async fn decide(pool: &PgPool, w: DecisionWrite<'_>) -> Result<DecideOutcome> {
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
        sqlx::query(crate::store::sql::sql!(Pg, crate::store::grants::INSERT_GRANT))
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

/// PostgreSQL's plan for the inbox page `f` asks for, with sequential scans
/// and sorts priced out (`enable_seqscan`, `enable_sort` off for the one
/// statement): a test's tables are too small for the planner to prefer an
/// index, so this shows whether one serves the page in order at all.
pub(super) async fn explain_pending_inbox(pool: &PgPool, f: &InboxFilter) -> Result<Vec<String>> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET LOCAL enable_seqscan = off").execute(&mut *tx).await?;
    sqlx::query("SET LOCAL enable_sort = off").execute(&mut *tx).await?;
    let lines: Vec<String> =
        inbox_query::<Pg>(f, f.page_size(), "EXPLAIN ").build_query_scalar().fetch_all(&mut *tx).await?;
    tx.rollback().await?;
    Ok(lines)
}

impl PgStore {
    /// Stores a decision under a lock on its run's row (see the module docs).
    pub(crate) async fn decide_locked(&self, write: DecisionWrite<'_>) -> Result<DecideOutcome> {
        decide(&self.pool, write).await
    }

    /// PostgreSQL's plan for the pending-inbox page `filter` asks for (see
    /// `explain_pending_inbox`), so tests can check that an index serves it
    /// in order.
    pub async fn explain_pending_inbox(&self, filter: &InboxFilter) -> Result<Vec<String>> {
        explain_pending_inbox(&self.pool, filter).await
    }
}
