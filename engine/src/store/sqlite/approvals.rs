//! Approval writes and reads for the SQLite store.
//!
//! A decision is one transaction: a compare-and-set on the call's status
//! (so exactly one concurrent decision wins), the audit row (whose primary
//! key also refuses a second decision), the "always" list, the edited
//! arguments in the transcript, and — when it was the step's last pending
//! call — the `paused → running` move. A crash can never separate them.

use chrono::Utc;
use serde_json::Value;
use sqlx::SqlitePool;

use crate::error::Result;
use crate::model::{Decision, Interruption, RunStatus, ToolCallStatus};
use crate::store::json_text;
use crate::store::rows::{DecidedCallRow, InterruptionRow};
use crate::store::{to_ms, DecideOutcome, DecidedCall, DecisionCursor, DecisionWrite};

pub(super) async fn decide(pool: &SqlitePool, w: DecisionWrite<'_>) -> Result<DecideOutcome> {
    RunStatus::Paused.check(RunStatus::Running)?;
    let c = w.call;
    let d = w.decision;
    let (status, completed_at) = match d.decision {
        Decision::Approved => (ToolCallStatus::Pending, None),
        Decision::Rejected => (ToolCallStatus::Rejected, Some(to_ms(d.decided_at))),
    };
    let mut tx = pool.begin().await?;
    let updated = sqlx::query(
        "UPDATE tool_calls SET status = ?, approval = ?, arguments = ?, error = ?, completed_at = ?
         WHERE run_id = ? AND id = ? AND status = 'awaiting_approval'
           AND run_id IN (SELECT id FROM runs WHERE id = ? AND status = 'paused')",
    )
    .bind(status.as_str())
    .bind(json_text(d))
    .bind(json_text(w.final_arguments))
    .bind(&w.error)
    .bind(completed_at)
    .bind(&c.run_id)
    .bind(&c.id)
    .bind(&c.run_id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if updated == 0 {
        return Ok(DecideOutcome::NotAwaiting);
    }
    sqlx::query(
        "INSERT INTO approval_decisions (run_id, call_id, step_idx, tool_name, decision, decided_by, decided_at,
            always, original_arguments, edited_arguments, comment, decided_by_id)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
    if d.always {
        let column = match d.decision {
            Decision::Approved => "always_approve",
            Decision::Rejected => "always_reject",
        };
        let sql = format!(
            "UPDATE runs SET {column} = json_insert({column}, '$[#]', ?)
             WHERE id = ? AND NOT EXISTS (SELECT 1 FROM json_each({column}) WHERE value = ?)"
        );
        sqlx::query(&sql).bind(&c.tool_name).bind(&c.run_id).bind(&c.tool_name).execute(&mut *tx).await?;
    }
    if d.edited_arguments.is_some() {
        edit_invocation(&mut tx, &c.run_id, c.step_index, &c.id, w.final_arguments).await?;
    }
    let waiting: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM tool_calls WHERE run_id = ? AND step_idx = ? AND status = 'awaiting_approval'",
    )
    .bind(&c.run_id)
    .bind(c.step_index as i64)
    .fetch_one(&mut *tx)
    .await?;
    let mut resumed = false;
    if waiting == 0 {
        resumed = sqlx::query("UPDATE runs SET status = 'running', updated_at = ? WHERE id = ? AND status = 'paused'")
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
    tx: &mut sqlx::SqliteConnection,
    run_id: &str,
    step: u32,
    call_id: &str,
    args: &Value,
) -> Result<()> {
    let row: Option<(i64, String)> =
        sqlx::query_as("SELECT seq, data FROM messages WHERE run_id = ? AND step_idx = ? AND type = 'agent'")
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
    sqlx::query("UPDATE messages SET data = ? WHERE run_id = ? AND seq = ?")
        .bind(data.to_string())
        .bind(run_id)
        .bind(seq)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

pub(super) async fn interruptions(
    pool: &SqlitePool,
    run_id: Option<&str>,
    project: Option<&str>,
) -> Result<Vec<Interruption>> {
    let mut sql = String::from(
        "SELECT tc.run_id, r.name AS run_name, r.approval AS run_approval, tc.id, tc.step_idx, tc.tool_name,
                tc.arguments, tc.reasoning, tc.requested_at
         FROM tool_calls tc JOIN runs r ON r.id = tc.run_id
         WHERE tc.status = 'awaiting_approval' AND r.status = 'paused'",
    );
    if run_id.is_some() {
        sql.push_str(" AND tc.run_id = ?");
    }
    if project.is_some() {
        sql.push_str(" AND r.project = ?");
    }
    sql.push_str(" ORDER BY tc.requested_at, tc.run_id, tc.step_idx, tc.pos");
    let mut q = sqlx::query_as::<_, InterruptionRow>(&sql);
    if let Some(id) = run_id {
        q = q.bind(id);
    }
    if let Some(project) = project {
        q = q.bind(project);
    }
    Ok(q.fetch_all(pool).await?.into_iter().map(Interruption::from).collect())
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
