//! Row writers the PostgreSQL store's transactions share: a run's status
//! compare-and-set, a run row, steps, tool calls and messages. Each takes
//! the open connection of a transaction; committing is the caller's.
//!
//! JSON columns are JSONB: bound as text and cast with `$n::jsonb` (text
//! holding `\u0000` is refused by PostgreSQL; the SQLite store accepts it).

use chrono::Utc;

use super::RUN_COLUMNS;
use crate::error::Result;
use crate::model::{Message, Run, RunStatus, Step, ToolCall, Usage};
use crate::store::json_text;
use crate::store::rows::{message_data, step_status_str, RunRow};
use crate::store::{to_ms, RunPatch, StepWrite};

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
pub(super) use step_conflict;

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
pub(super) use call_conflict;

/// Binds the six usage columns, in the order every table stores them:
/// input, output, cache-read, reasoning, total tokens, requests.
trait BindUsage {
    fn bind_usage(self, u: &Usage) -> Self;
}

impl<'q> BindUsage for sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    fn bind_usage(self, u: &Usage) -> Self {
        self.bind(u.input_tokens as i64)
            .bind(u.output_tokens as i64)
            .bind(u.cache_read_tokens as i64)
            .bind(u.reasoning_tokens as i64)
            .bind(u.total_tokens as i64)
            .bind(u.requests as i64)
    }
}

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
    let row = sqlx::query_as::<_, RunRow>(&format!(
        "UPDATE runs SET status = $1::text, updated_at = $2::bigint,
            started_at = CASE WHEN $1::text = 'running' THEN COALESCE(started_at, $2::bigint) ELSE started_at END,
            finished_at = CASE WHEN $1::text IN ('done', 'failed', 'cancelled') THEN $2::bigint ELSE NULL END,
            finish_unannounced = ($1::text IN ('done', 'failed', 'cancelled')),
            result = CASE WHEN $3::boolean THEN $4::jsonb ELSE result END,
            summary = COALESCE($5::text, summary),
            failure_reason = COALESCE($6::text, failure_reason),
            replay = COALESCE($9::text, replay)
         WHERE id = $7 AND status = $8 RETURNING {RUN_COLUMNS}"
    ))
    .bind(to.as_str())
    .bind(now)
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
        sqlx::query(
            "UPDATE runs SET current_agent = $1, current_agent_version = $2, system_prompt = $3, model = $4,
                model_settings = $5::jsonb, tools = $6::jsonb, approval = $7::jsonb, sub_agents = $8::jsonb,
                handoffs = $9::jsonb, reasoning_traces = $10, handoff_turns = $11
             WHERE id = $12",
        )
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

/// Writes a step row (insert or replace).
pub(super) async fn upsert_step(tx: &mut sqlx::PgConnection, s: &Step) -> Result<()> {
    let u = &s.usage;
    sqlx::query(concat!(
        "INSERT INTO steps (run_id, idx, kind, status, request, response, input_tokens,
            output_tokens, cache_read_tokens, reasoning_tokens, total_tokens, requests, started_at,
            model_completed_at, completed_at, model)
         VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) ",
        step_conflict!()
    ))
    .bind(&s.run_id)
    .bind(s.index as i64)
    .bind(&s.kind)
    .bind(step_status_str(s.status))
    .bind(json_text(&s.request))
    .bind(json_text(&s.response))
    .bind_usage(u)
    .bind(to_ms(s.started_at))
    .bind(s.model_completed_at.map(to_ms))
    .bind(s.completed_at.map(to_ms))
    .bind(s.recorded_model())
    .execute(tx)
    .await?;
    Ok(())
}

/// Inserts the full run row (and its tags); `false` when the id exists.
///
/// A concurrent insert of the same id waits for the first to commit and
/// then does nothing, so exactly one of them returns `true`.
pub(super) async fn insert_run_row(tx: &mut sqlx::PgConnection, run: &Run) -> Result<bool> {
    let u = &run.usage;
    let inserted = sqlx::query(
        "INSERT INTO runs (id, name, status, model, model_settings, system_prompt, initial_prompt, input, tools,
            tags, context, max_turns, agent_id, project, created_by_id, created_by, approval, always_approve,
            always_reject, interactive, result_schema, call_summarization, parent_run_id, forked_from_message_id,
            result, summary, failure_reason, input_tokens, output_tokens, cache_read_tokens, reasoning_tokens,
            total_tokens, requests, step_count, created_at, updated_at, started_at, finished_at, agent_version,
            agent_overrides, current_agent, current_agent_version, sub_agents, handoffs, parent_call_id,
            root_run_id, depth, metadata, reasoning_traces, handoff_turns, on_status_change, source, group_id,
            forked_from_step, replay)
         VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8::jsonb, $9::jsonb, $10::jsonb, $11::jsonb, $12, $13, $14,
                 $15, $16, $17::jsonb, $18::jsonb, $19::jsonb, $20, $21::jsonb, $22, $23, $24, $25::jsonb, $26,
                 $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40::jsonb, $41, $42,
                 $43::jsonb, $44::jsonb, $45, $46, $47, $48::jsonb, $49, $50, $51::jsonb, $52::jsonb, $53, $54, $55)
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(&run.id)
    .bind(&run.name)
    .bind(run.status.as_str())
    .bind(&run.model)
    .bind(json_text(&run.model_settings))
    .bind(&run.system_prompt)
    .bind(&run.initial_prompt)
    .bind(run.input.as_ref().map(json_text))
    .bind(json_text(&run.tools))
    .bind(json_text(&run.tags))
    .bind(json_text(&run.context))
    .bind(run.max_turns as i64)
    .bind(&run.agent_id)
    .bind(&run.project)
    .bind(run.created_by.as_ref().map(|a| &a.id))
    .bind(run.created_by.as_ref().map(|a| &a.name))
    .bind(json_text(&run.approval))
    .bind(json_text(&run.always_approve))
    .bind(json_text(&run.always_reject))
    .bind(run.interactive)
    .bind(run.result_schema.as_ref().map(json_text))
    .bind(run.call_summarization)
    .bind(&run.parent_run_id)
    .bind(&run.forked_from_message_id)
    .bind(run.result.as_ref().filter(|v| !v.is_null()).map(json_text))
    .bind(&run.summary)
    .bind(&run.failure_reason)
    .bind_usage(u)
    .bind(run.step_count as i64)
    .bind(to_ms(run.created_at))
    .bind(to_ms(run.updated_at))
    .bind(run.started_at.map(to_ms))
    .bind(run.finished_at.map(to_ms))
    .bind(run.agent_version.map(i64::from))
    .bind(json_text(&run.agent_overrides))
    .bind(&run.current_agent)
    .bind(run.current_agent_version.map(i64::from))
    .bind(json_text(&run.sub_agents))
    .bind(json_text(&run.handoffs))
    .bind(&run.parent_call_id)
    .bind(if run.root_run_id.is_empty() { &run.id } else { &run.root_run_id })
    .bind(i64::from(run.depth))
    .bind((!run.metadata.is_empty()).then(|| json_text(&run.metadata)))
    .bind(run.reasoning_traces)
    .bind(i64::from(run.handoff_turns))
    .bind(run.on_status_change.as_ref().map(json_text))
    .bind(run.source.as_ref().map(json_text))
    .bind(&run.group_id)
    .bind(run.forked_from_step.map(i64::from))
    .bind(run.replay.as_ref().map(json_text))
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if inserted {
        if let (Some(parent), Some(_)) = (&run.parent_run_id, &run.parent_call_id) {
            sqlx::query("UPDATE runs SET child_count = child_count + 1 WHERE id = $1")
                .bind(parent)
                .execute(&mut *tx)
                .await?;
        }
        for (k, v) in &run.tags {
            sqlx::query("INSERT INTO run_tags (key, value, run_id, created_at) VALUES ($1, $2, $3, $4)")
                .bind(k)
                .bind(v)
                .bind(&run.id)
                .bind(to_ms(run.created_at))
                .execute(&mut *tx)
                .await?;
        }
    }
    Ok(inserted)
}

/// Writes a tool call row (insert or replace), at `pos` in its step.
pub(super) async fn upsert_tool_call(tx: &mut sqlx::PgConnection, c: &ToolCall, pos: usize) -> Result<()> {
    sqlx::query(concat!(
        "INSERT INTO tool_calls (run_id, step_idx, pos, id, tool_name, arguments, result, error,
            status, reasoning, requested_at, approval, started_at, completed_at, child_run_id)
         VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9, $10, $11, $12::jsonb, $13, $14, $15) ",
        call_conflict!()
    ))
    .bind(&c.run_id)
    .bind(c.step_index as i64)
    .bind(pos as i64)
    .bind(&c.id)
    .bind(&c.tool_name)
    .bind(json_text(&c.arguments))
    .bind(c.result.as_ref().map(json_text))
    .bind(&c.error)
    .bind(c.status.as_str())
    .bind(&c.reasoning)
    .bind(c.requested_at.map(to_ms))
    .bind(c.approval.as_ref().map(json_text))
    .bind(c.started_at.map(to_ms))
    .bind(c.completed_at.map(to_ms))
    .bind(&c.child_run_id)
    .execute(tx)
    .await?;
    Ok(())
}

/// Appends a message; a `seq` the run already has is an error (the caller
/// numbered wrongly), never a silently dropped message.
pub(super) async fn insert_message(tx: &mut sqlx::PgConnection, m: &Message) -> Result<()> {
    sqlx::query(
        "INSERT INTO messages (run_id, seq, id, type, step_idx, data, created_at)
         VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7)",
    )
    .bind(&m.run_id)
    .bind(m.seq as i64)
    .bind(&m.id)
    .bind(m.body.kind())
    .bind(m.step_index.map(|i| i as i64))
    .bind(message_data(&m.body))
    .bind(to_ms(m.created_at))
    .execute(tx)
    .await?;
    Ok(())
}

impl crate::store::sql::RowWrites for crate::store::sql::Pg {
    fn insert_run_row<'a>(
        conn: &'a mut sqlx::PgConnection,
        run: &'a Run,
    ) -> impl std::future::Future<Output = Result<bool>> + Send + 'a {
        insert_run_row(conn, run)
    }

    fn insert_message<'a>(
        conn: &'a mut sqlx::PgConnection,
        m: &'a Message,
    ) -> impl std::future::Future<Output = Result<()>> + Send + 'a {
        insert_message(conn, m)
    }

    fn upsert_step<'a>(
        conn: &'a mut sqlx::PgConnection,
        s: &'a Step,
    ) -> impl std::future::Future<Output = Result<()>> + Send + 'a {
        upsert_step(conn, s)
    }

    fn upsert_tool_call<'a>(
        conn: &'a mut sqlx::PgConnection,
        c: &'a ToolCall,
        pos: usize,
    ) -> impl std::future::Future<Output = Result<()>> + Send + 'a {
        upsert_tool_call(conn, c, pos)
    }
}
