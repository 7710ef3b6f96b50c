//! A decision on PostgreSQL (the statements are `store::sql::decide`, the
//! reads `store::sql::approvals`).
//!
//! Unlike SQLite, PostgreSQL runs decisions concurrently, so a decision
//! first locks its run's row (`FOR UPDATE`): decisions on calls of the same
//! run take turns, and the last one to decide always sees every other
//! decision committed when it counts the calls still waiting (two
//! concurrent decisions on a step's last two calls would otherwise each see
//! the other's call waiting, and the run would never resume).

use chrono::Utc;
use sqlx::{PgConnection, PgPool};

use super::PgStore;
use crate::error::Result;
use crate::model::{Decision, GrantScope, RunStatus, ToolCallStatus};
use crate::store::json_text;
use crate::store::sql::decide::{
    always_column, with_edited_input, AGENT_MESSAGE, COUNT_WAITING, INSERT_DECISION, LOCK_PAUSED_RUN, RESUME_RUN,
    UPDATE_CALL, UPDATE_MESSAGE,
};
use crate::store::sql::{inbox_query, sql, Dialect, Pg};
use crate::store::{to_ms, DecideOutcome, DecisionWrite, InboxFilter};

async fn decide(pool: &PgPool, w: DecisionWrite<'_>) -> Result<DecideOutcome> {
    RunStatus::Paused.check(RunStatus::Running)?;
    let mut tx = pool.begin().await?;
    // Serializes the decisions of one run (see the module doc). A run that
    // is not paused (any more) has no call to decide.
    let paused: Option<String> =
        sqlx::query_scalar(sql!(Pg, LOCK_PAUSED_RUN)).bind(&w.call.run_id).fetch_optional(&mut *tx).await?;
    if paused.is_none() || !update_call(&mut tx, &w).await? {
        return Ok(DecideOutcome::NotAwaiting);
    }
    record(&mut tx, &w).await?;
    let resumed = resume_if_last(&mut tx, &w).await?;
    tx.commit().await?;
    Ok(DecideOutcome::Applied { resumed })
}

/// The compare-and-set on the call: false when it no longer awaits approval.
async fn update_call(tx: &mut PgConnection, w: &DecisionWrite<'_>) -> Result<bool> {
    let (c, d) = (w.call, w.decision);
    let (status, completed_at) = match d.decision {
        Decision::Approved => (ToolCallStatus::Pending, None),
        Decision::Rejected => (ToolCallStatus::Rejected, Some(to_ms(d.decided_at))),
    };
    let updated = sqlx::query(sql!(Pg, UPDATE_CALL))
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
    Ok(updated == 1)
}

/// The audit row, the grant of an approval, the "always" list and the
/// edited arguments in the transcript.
async fn record(tx: &mut PgConnection, w: &DecisionWrite<'_>) -> Result<()> {
    let (c, d) = (w.call, w.decision);
    sqlx::query(sql!(Pg, INSERT_DECISION))
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
        sqlx::query(sql!(Pg, crate::store::grants::INSERT_GRANT))
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
        let add = Pg::add_to_json_list(always_column(d.decision == Decision::Approved));
        sqlx::query(&add).bind(&c.tool_name).bind(&c.run_id).execute(&mut *tx).await?;
    }
    if d.edited_arguments.is_some() {
        let row: Option<(i64, String)> = sqlx::query_as(sql!(Pg, AGENT_MESSAGE))
            .bind(&c.run_id)
            .bind(c.step_index as i64)
            .fetch_optional(&mut *tx)
            .await?;
        if let Some((seq, data)) = row {
            sqlx::query(sql!(Pg, UPDATE_MESSAGE))
                .bind(with_edited_input(&data, &c.id, w.final_arguments))
                .bind(&c.run_id)
                .bind(seq)
                .execute(&mut *tx)
                .await?;
        }
    }
    Ok(())
}

/// `paused → running` when no call of the step waits any more.
async fn resume_if_last(tx: &mut PgConnection, w: &DecisionWrite<'_>) -> Result<bool> {
    let waiting: i64 = sqlx::query_scalar(sql!(Pg, COUNT_WAITING))
        .bind(&w.call.run_id)
        .bind(w.call.step_index as i64)
        .fetch_one(&mut *tx)
        .await?;
    if waiting > 0 {
        return Ok(false);
    }
    let resumed =
        sqlx::query(sql!(Pg, RESUME_RUN)).bind(to_ms(Utc::now())).bind(&w.call.run_id).execute(&mut *tx).await?;
    Ok(resumed.rows_affected() == 1)
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
