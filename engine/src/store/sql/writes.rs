//! The row writers both databases share: a run row (with its tags and its
//! parent's child count), a message, a step and a tool call, one statement
//! text each, written against the rows of `rows::params`, so the sqlx
//! writers here and SQLite's write thread bind the same columns in the same
//! order.
//!
//! The one place the two databases need other SQL is how a step or call
//! row written again replaces the old one ([`Dialect::replace_row`]):
//! SQLite replaces the row (`INSERT OR REPLACE`: its pending-inbox triggers
//! count on a replace being a delete and an insert), PostgreSQL updates it
//! in place (`ON CONFLICT … DO UPDATE`, which its fenced step write uses
//! too).

#[cfg(feature = "postgres")]
use super::Pg;
use super::{bind_columns, sql, Dialect, Lite, RowWrites};
use crate::error::Result;
use crate::model::{Message, Run, Step, ToolCall};
use crate::store::rows::params::{CallParams, MessageParams, RunParams, StepParams};

pub(crate) const INSERT_RUN: &str = "INSERT INTO runs (id, name, status, model, model_settings, system_prompt, initial_prompt, input, tools, tags, context,
        max_turns, agent_id, project, created_by_id, created_by, approval, always_approve,
        always_reject, interactive, result_schema, call_summarization, parent_run_id,
        forked_from_message_id, result, summary, failure_reason, input_tokens, output_tokens,
        cache_read_tokens, reasoning_tokens, total_tokens, requests, step_count, created_at,
        updated_at, started_at, finished_at, agent_version, agent_overrides, current_agent,
        current_agent_version, sub_agents, handoffs, parent_call_id, root_run_id, depth, metadata,
        reasoning_traces, handoff_turns, on_status_change, source, group_id, forked_from_step,
        replay, idle_ms, session_id, end_user, tool_answers, experiment_id, experiment_item_id)
    VALUES (?, ?, ?, ?, ?::jsonb, ?, ?, ?::jsonb, ?::jsonb, ?::jsonb, ?::jsonb, ?, ?, ?, ?, ?, ?::jsonb,
            ?::jsonb, ?::jsonb, ?, ?::jsonb, ?, ?, ?, ?::jsonb, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
            ?, ?, ?::jsonb, ?, ?, ?::jsonb, ?::jsonb, ?, ?, ?, ?::jsonb, ?, ?, ?::jsonb, ?::jsonb,
            ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO NOTHING";

pub(crate) const COUNT_CHILD: &str = "UPDATE runs SET child_count = child_count + 1 WHERE id = ?";

pub(crate) const INSERT_TAG: &str = "INSERT INTO run_tags (key, value, run_id, created_at) VALUES (?, ?, ?, ?)";

pub(crate) const INSERT_MESSAGE: &str = "INSERT INTO messages (run_id, seq, id, type, step_idx, data, created_at)
    VALUES (?, ?, ?, ?, ?, ?::jsonb, ?)";

/// A step row, for [`Dialect::replace_row`].
pub(crate) const STEP_ROW: &str = "INTO steps (run_id, idx, kind, status, request, response, input_tokens,
    output_tokens, cache_read_tokens, reasoning_tokens, total_tokens, requests, started_at, model_completed_at,
    completed_at, model)
    VALUES (?, ?, ?, ?, ?::jsonb, ?::jsonb, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

/// A tool call row, for [`Dialect::replace_row`].
pub(crate) const CALL_ROW: &str = "INTO tool_calls (run_id, step_idx, pos, id, tool_name, arguments, result, error,
    status, reasoning, requested_at, approval, started_at, completed_at, child_run_id)
    VALUES (?, ?, ?, ?, ?, ?::jsonb, ?::jsonb, ?, ?, ?, ?, ?::jsonb, ?, ?, ?)";

/// What a step row written again replaces (steps are upserted by run and index).
macro_rules! step_conflict {
    () => {
        "ON CONFLICT (run_id, idx) DO UPDATE SET kind = EXCLUDED.kind, status = EXCLUDED.status,
            request = EXCLUDED.request, response = EXCLUDED.response, input_tokens = EXCLUDED.input_tokens,
            output_tokens = EXCLUDED.output_tokens, cache_read_tokens = EXCLUDED.cache_read_tokens,
            reasoning_tokens = EXCLUDED.reasoning_tokens, total_tokens = EXCLUDED.total_tokens,
            requests = EXCLUDED.requests, started_at = EXCLUDED.started_at,
            model_completed_at = EXCLUDED.model_completed_at, completed_at = EXCLUDED.completed_at,
            model = EXCLUDED.model"
    };
}
pub(crate) use step_conflict;

/// What a tool call row written again replaces (calls are upserted by step and position).
macro_rules! call_conflict {
    () => {
        "ON CONFLICT (run_id, step_idx, pos) DO UPDATE SET id = EXCLUDED.id, tool_name = EXCLUDED.tool_name,
            arguments = EXCLUDED.arguments, result = EXCLUDED.result, error = EXCLUDED.error,
            status = EXCLUDED.status, reasoning = EXCLUDED.reasoning, requested_at = EXCLUDED.requested_at,
            approval = EXCLUDED.approval, started_at = EXCLUDED.started_at, completed_at = EXCLUDED.completed_at,
            child_run_id = EXCLUDED.child_run_id"
    };
}
pub(crate) use call_conflict;

/// The upsert of a step row in dialect `D` (see the module docs).
/// A run moved from status `?9` to `?1` (a compare-and-set; `?3` whether `?1`
/// is terminal), with the patch's result (`?4` whether to set it), summary,
/// failure reason and replay; the row as it is after.
pub(crate) fn transition_run_sql() -> String {
    format!(
        "UPDATE runs SET status = ?1::text, updated_at = ?2::bigint,
            started_at = CASE WHEN ?1::text = 'running' THEN COALESCE(started_at, ?2::bigint) ELSE started_at END,
            finished_at = CASE WHEN ?3::boolean THEN ?2::bigint ELSE NULL END,
            finish_unannounced = ?3::boolean,
            result = CASE WHEN ?4::boolean THEN ?5::jsonb ELSE result END,
            summary = COALESCE(?6::text, summary),
            failure_reason = COALESCE(?7::text, failure_reason),
            replay = COALESCE(?10::text, replay)
         WHERE id = ?8 AND status = ?9 RETURNING {}",
        super::columns::RUN_COLUMNS
    )
}

/// A handoff's change of agent on run `?12`.
pub(crate) const SWITCH_AGENT: &str =
    "UPDATE runs SET current_agent = ?1, current_agent_version = ?2, system_prompt = ?3, model = ?4,
        model_settings = ?5::jsonb, tools = ?6::jsonb, approval = ?7::jsonb, sub_agents = ?8::jsonb,
        handoffs = ?9::jsonb, reasoning_traces = ?10, handoff_turns = ?11
     WHERE id = ?12";

pub(crate) fn upsert_step_sql<D: Dialect>() -> &'static str {
    sql!(D, D::replace_row(STEP_ROW, step_conflict!()))
}

/// The upsert of a tool call row in dialect `D` (see the module docs).
pub(crate) fn upsert_call_sql<D: Dialect>() -> &'static str {
    sql!(D, D::replace_row(CALL_ROW, call_conflict!()))
}

/// Implements [`RowWrites`] for dialect `$d`: one body, compiled for each
/// backend's own sqlx driver.
macro_rules! row_writes {
    ($d:ty, $conn:ty) => {
        impl RowWrites for $d {
            async fn insert_run_row(tx: &mut $conn, run: &Run) -> Result<bool> {
                let p = RunParams::from(run);
                let q = bind_columns!(sqlx::query(sql!($d, INSERT_RUN)), p.columns);
                let inserted = q.execute(&mut *tx).await?.rows_affected() == 1;
                if inserted {
                    if let Some(parent) = &p.child_of {
                        sqlx::query(sql!($d, COUNT_CHILD)).bind(parent).execute(&mut *tx).await?;
                    }
                    for (k, v) in &p.tags {
                        let q = sqlx::query(sql!($d, INSERT_TAG)).bind(k).bind(v).bind(&p.id).bind(p.created_at);
                        q.execute(&mut *tx).await?;
                    }
                }
                Ok(inserted)
            }

            async fn insert_message(tx: &mut $conn, m: &Message) -> Result<()> {
                let p = MessageParams::from(m);
                sqlx::query(sql!($d, INSERT_MESSAGE))
                    .bind(p.run_id)
                    .bind(p.seq)
                    .bind(p.id)
                    .bind(p.kind)
                    .bind(p.step_idx)
                    .bind(p.data)
                    .bind(p.created_at)
                    .execute(tx)
                    .await?;
                Ok(())
            }

            async fn upsert_step(tx: &mut $conn, s: &Step) -> Result<()> {
                let p = StepParams::from(s);
                let mut q = sqlx::query(upsert_step_sql::<$d>()).bind(p.run_id).bind(p.idx).bind(p.kind);
                q = q.bind(p.status).bind(p.request).bind(p.response);
                for n in p.usage {
                    q = q.bind(n);
                }
                q.bind(p.started_at).bind(p.model_completed_at).bind(p.completed_at).bind(p.model).execute(tx).await?;
                Ok(())
            }

            async fn upsert_tool_call(tx: &mut $conn, c: &ToolCall, pos: usize) -> Result<()> {
                let p = CallParams::new(c, pos);
                sqlx::query(upsert_call_sql::<$d>())
                    .bind(p.run_id)
                    .bind(p.step_idx)
                    .bind(p.pos)
                    .bind(p.id)
                    .bind(p.tool_name)
                    .bind(p.arguments)
                    .bind(p.result)
                    .bind(p.error)
                    .bind(p.status)
                    .bind(p.reasoning)
                    .bind(p.requested_at)
                    .bind(p.approval)
                    .bind(p.started_at)
                    .bind(p.completed_at)
                    .bind(p.child_run_id)
                    .execute(tx)
                    .await?;
                Ok(())
            }
        }
    };
}

row_writes!(Lite, sqlx::SqliteConnection);
#[cfg(feature = "postgres")]
row_writes!(Pg, sqlx::PgConnection);
