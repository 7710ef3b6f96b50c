//! The PostgreSQL store's own writes: a run's status compare-and-set and a
//! step's fenced write (the rows themselves are written by the shared
//! writers of `sql::writes`). Each takes the open connection of a
//! transaction; committing is the caller's.
//!
//! JSON columns are JSONB: bound as text and cast with `$n::jsonb` (text
//! holding `\u0000` is refused by PostgreSQL; the SQLite store accepts it).

use chrono::Utc;

use crate::error::Result;
use crate::model::RunStatus;
use crate::store::json_text;
use crate::store::rows::RunRow;
use crate::store::sql::writes::{transition_run_sql, SWITCH_AGENT};
use crate::store::sql::{sql, Pg};
use crate::store::{to_ms, RunPatch, StepWrite};

/// Moves a run from `from` to `to` (a compare-and-set on its status);
/// `None` when it was not in `from`.
///
/// One conditional UPDATE: a concurrent transition of the same run waits on
/// the row lock and then re-checks `status`, so only one of them applies.
pub(super) async fn transition_row(
    conn: &mut sqlx::PgConnection,
    id: &str,
    from: RunStatus,
    to: RunStatus,
    patch: RunPatch,
) -> Result<Option<RunRow>> {
    let now = to_ms(Utc::now());
    let row = sqlx::query_as::<_, RunRow>(sql!(Pg, transition_run_sql()))
        .bind(to.as_str())
        .bind(now)
        .bind(to.is_terminal())
        .bind(patch.result.is_some())
        .bind(patch.result.as_ref().filter(|v| !v.is_null()).map(json_text))
        .bind(patch.summary)
        .bind(patch.failure_reason)
        .bind(id)
        .bind(from.as_str())
        .bind(patch.replay.as_ref().map(json_text))
        .fetch_optional(conn)
        .await?;
    Ok(row)
}

/// A step, its tool calls, its new messages and the run's usage (see
/// [`StepWrite`]), fenced by this server's lease on the run: one statement
/// (see [`fenced`](super::fenced)), then the handoff's change of agent, if
/// any (the caller then holds a transaction around both).
pub(super) async fn write_step(tx: &mut sqlx::PgConnection, w: &StepWrite<'_>) -> Result<()> {
    let s = w.step;
    let writes = super::fenced::Writes {
        run_id: &s.run_id,
        step: Some(s),
        calls: s.tool_calls.iter().enumerate().collect(),
        messages: w.messages,
        usage: Some((w.run_usage, w.step_count)),
    };
    super::fenced::write(&mut *tx, writes).await?;
    if let Some(switch) = w.switch {
        sqlx::query(sql!(Pg, SWITCH_AGENT))
            .bind(&switch.agent_id)
            .bind(i64::from(switch.version))
            .bind(&switch.system_prompt)
            .bind(&switch.model)
            .bind(json_text(&switch.model_settings))
            .bind(json_text(&switch.tools))
            .bind(json_text(&switch.approval))
            .bind(json_text(&switch.sub_agents))
            .bind(json_text(&switch.handoffs))
            .bind(switch.reasoning_traces)
            .bind(i64::from(switch.turns_before))
            .bind(&s.run_id)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}
