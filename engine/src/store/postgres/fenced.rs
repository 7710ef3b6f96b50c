//! A step's writes in one statement: the lease check (the fence), the step
//! row, its tool calls, its new messages and the run's usage, as one
//! `WITH … INSERT … UPDATE` sent in one round trip.
//!
//! Row by row, a step cost seven round trips (`BEGIN`, the fence's
//! `SELECT … FOR UPDATE`, four writes, `COMMIT`), and on PostgreSQL a turn's
//! time is its round trips (see the README's Performance section). Here
//! every write reads its rows `FROM fence`: when the lease is lost the fence
//! is empty and nothing is written. Outside a transaction the statement is
//! one of its own; inside one (a step that also moves the run's status) it
//! takes part in it. An email, the side effect of `send_email`, is written
//! under the same fence.

use chrono::Utc;

use crate::error::{EngineError, Result};
use crate::model::{Email, Message, Step, ToolCall};
use crate::store::cluster::fence_for;
use crate::store::json_text;
use crate::store::rows::{message_data, step_status_str};
use crate::store::to_ms;

use crate::store::sql::writes::{call_conflict, step_conflict};

/// What one fenced write carries; any part may be absent.
pub(super) struct Writes<'a> {
    pub run_id: &'a str,
    pub step: Option<&'a Step>,
    /// Tool calls with their position in their step.
    pub calls: Vec<(usize, &'a ToolCall)>,
    pub messages: &'a [Message],
    /// The run's usage total and step count after this write.
    pub usage: Option<(&'a crate::model::Usage, u32)>,
}

/// The run's row, locked, when this server's lease on it holds (`$1` the
/// run, `$2` the owner, `$3` the attempt; `$2` null: no lease to check).
macro_rules! fence {
    () => {
        "WITH fence AS (
    SELECT id FROM runs WHERE id = $1 AND ($2::text IS NULL OR (lease_owner = $2 AND attempt = $3)) FOR UPDATE
)"
    };
}

const SQL: &str = concat!(
    fence!(),
    ", new_step AS (
    INSERT INTO steps (run_id, idx, kind, status, request, response, input_tokens, output_tokens,
        cache_read_tokens, reasoning_tokens, total_tokens, requests, started_at, model_completed_at,
        completed_at, model)
    SELECT $1, $5, $6, $7, $8::jsonb, $9::jsonb, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19
    FROM fence WHERE $4
    ",
    step_conflict!(),
    "
), new_calls AS (
    INSERT INTO tool_calls (run_id, step_idx, pos, id, tool_name, arguments, result, error, status,
        reasoning, requested_at, approval, started_at, completed_at, child_run_id)
    SELECT $1, c.step_idx, c.pos, c.id, c.tool_name, c.arguments::jsonb, c.result::jsonb, c.error, c.status,
        c.reasoning, c.requested_at, c.approval::jsonb, c.started_at, c.completed_at, c.child_run_id
    FROM fence, UNNEST($20::bigint[], $21::bigint[], $22::text[], $23::text[], $24::text[], $25::text[],
        $26::text[], $27::text[], $28::text[], $29::bigint[], $30::text[], $31::bigint[], $32::bigint[],
        $33::text[])
        AS c(step_idx, pos, id, tool_name, arguments, result, error, status, reasoning, requested_at,
             approval, started_at, completed_at, child_run_id)
    ",
    call_conflict!(),
    "
), new_messages AS (
    INSERT INTO messages (run_id, seq, id, type, step_idx, data, created_at)
    SELECT $1, m.seq, m.id, m.type, m.step_idx, m.data::jsonb, m.created_at
    FROM fence, UNNEST($34::bigint[], $35::text[], $36::text[], $37::bigint[], $38::text[], $39::bigint[])
        AS m(seq, id, type, step_idx, data, created_at)
), new_usage AS (
    UPDATE runs SET input_tokens = $41, output_tokens = $42, cache_read_tokens = $43, reasoning_tokens = $44,
        total_tokens = $45, requests = $46, step_count = $47, updated_at = $48
    FROM fence WHERE $40 AND runs.id = fence.id
)
SELECT count(*) FROM fence"
);

/// Runs `w` as one statement on `conn`: `LeaseLost` when this server's
/// lease on the run is gone, `NotFound` when the run is, and nothing written
/// either way.
pub(super) async fn write(conn: &mut sqlx::PgConnection, w: Writes<'_>) -> Result<()> {
    let fence = fence_for(w.run_id);
    let step = w.step;
    let s = |f: fn(&Step) -> Option<i64>| step.and_then(f);
    let su = |f: fn(&crate::model::Usage) -> u64| step.map(|s| f(&s.usage) as i64);
    let calls = &w.calls;
    let col = |f: fn(usize, &ToolCall) -> Option<String>| calls.iter().map(|(p, c)| f(*p, c)).collect::<Vec<_>>();
    let num = |f: fn(usize, &ToolCall) -> Option<i64>| calls.iter().map(|(p, c)| f(*p, c)).collect::<Vec<_>>();
    let ms = w.messages;
    let (usage, step_count) = match w.usage {
        Some((u, n)) => (Some(u), n),
        None => (None, 0),
    };
    let u = |f: fn(&crate::model::Usage) -> u64| usage.map_or(0, |u| f(u) as i64);
    let found: i64 = sqlx::query_scalar(SQL)
        .bind(w.run_id)
        .bind(fence.as_ref().map(|f| f.owner.as_str()))
        .bind(fence.as_ref().map_or(0, |f| f.attempt as i64))
        .bind(step.is_some())
        .bind(s(|s| Some(s.index as i64)))
        .bind(step.map(|s| s.kind.clone()))
        .bind(step.map(|s| step_status_str(s.status)))
        .bind(step.map(|s| json_text(&s.request)))
        .bind(step.map(|s| json_text(&s.response)))
        .bind(su(|u| u.input_tokens))
        .bind(su(|u| u.output_tokens))
        .bind(su(|u| u.cache_read_tokens))
        .bind(su(|u| u.reasoning_tokens))
        .bind(su(|u| u.total_tokens))
        .bind(su(|u| u.requests))
        .bind(s(|s| Some(to_ms(s.started_at))))
        .bind(s(|s| s.model_completed_at.map(to_ms)))
        .bind(s(|s| s.completed_at.map(to_ms)))
        .bind(step.and_then(|s| s.recorded_model()))
        .bind(num(|_, c| Some(c.step_index as i64)))
        .bind(num(|p, _| Some(p as i64)))
        .bind(col(|_, c| Some(c.id.clone())))
        .bind(col(|_, c| Some(c.tool_name.clone())))
        .bind(col(|_, c| Some(json_text(&c.arguments))))
        .bind(col(|_, c| c.result.as_ref().map(json_text)))
        .bind(col(|_, c| c.error.clone()))
        .bind(col(|_, c| Some(c.status.as_str().to_owned())))
        .bind(col(|_, c| c.reasoning.clone()))
        .bind(num(|_, c| c.requested_at.map(to_ms)))
        .bind(col(|_, c| c.approval.as_ref().map(json_text)))
        .bind(num(|_, c| c.started_at.map(to_ms)))
        .bind(num(|_, c| c.completed_at.map(to_ms)))
        .bind(col(|_, c| c.child_run_id.clone()))
        .bind(ms.iter().map(|m| m.seq as i64).collect::<Vec<_>>())
        .bind(ms.iter().map(|m| m.id.clone()).collect::<Vec<_>>())
        .bind(ms.iter().map(|m| m.body.kind().to_owned()).collect::<Vec<_>>())
        .bind(ms.iter().map(|m| m.step_index.map(i64::from)).collect::<Vec<_>>())
        .bind(ms.iter().map(|m| message_data(&m.body)).collect::<Vec<_>>())
        .bind(ms.iter().map(|m| to_ms(m.created_at)).collect::<Vec<_>>())
        .bind(usage.is_some())
        .bind(u(|u| u.input_tokens))
        .bind(u(|u| u.output_tokens))
        .bind(u(|u| u.cache_read_tokens))
        .bind(u(|u| u.reasoning_tokens))
        .bind(u(|u| u.total_tokens))
        .bind(u(|u| u.requests))
        .bind(step_count as i64)
        .bind(to_ms(Utc::now()))
        .fetch_one(&mut *conn)
        .await?;
    match (found, fence) {
        (0, Some(_)) => Err(EngineError::LeaseLost(w.run_id.to_owned())),
        (0, None) => Err(EngineError::NotFound(format!("run {}", w.run_id))),
        _ => Ok(()),
    }
}

/// Writes an email to the outbox when this server's lease on its run holds
/// (the side effect is the row: a driver that lost its lease sends nothing).
pub(super) async fn insert_email(pool: &sqlx::PgPool, e: &Email) -> Result<()> {
    let fence = fence_for(&e.run_id);
    let written = sqlx::query(concat!(
        fence!(),
        " INSERT INTO outbox (id, run_id, recipient, subject, body, created_at)
         SELECT $4, $1, $5, $6, $7, $8 FROM (VALUES (1)) AS one
         WHERE $2::text IS NULL OR EXISTS (SELECT 1 FROM fence)"
    ))
    .bind(&e.run_id)
    .bind(fence.as_ref().map(|f| f.owner.as_str()))
    .bind(fence.as_ref().map_or(0, |f| f.attempt as i64))
    .bind(&e.id)
    .bind(&e.to)
    .bind(&e.subject)
    .bind(&e.body)
    .bind(to_ms(e.created_at))
    .execute(pool)
    .await?;
    match written.rows_affected() {
        0 => Err(EngineError::LeaseLost(e.run_id.clone())),
        _ => Ok(()),
    }
}
