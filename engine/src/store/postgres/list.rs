//! A run's steps over ten thousand, read fast on PostgreSQL.
//!
//! A run's steps and its tool calls are two tables: every read that joins
//! them (a page of steps, the outline) runs in one `REPEATABLE READ`
//! read-only transaction, so the calls belong to exactly the steps read even
//! while the run is writing new ones (READ COMMITTED would give each
//! statement its own snapshot).

use sqlx::PgPool;

use super::{CALL_COLUMNS, STEP_COLUMNS};
use crate::error::Result;
use crate::model::{CallOutline, Step, StepOutline, ToolCall, ToolCallStatus, Usage};
use crate::store::from_ms;
use crate::store::rows::{parse_step_status, StepRow, ToolCallRow};
use crate::store::sql::{Dialect, Pg};

/// Opens the one-snapshot transaction of a multi-statement read.
const SNAPSHOT: &str = <Pg as Dialect>::BEGIN_SNAPSHOT;

/// Steps `from..from + limit` of a run: two range scans on the
/// `(run_id, idx)` and `(run_id, step_idx, pos)` keys in one snapshot, then
/// a merge.
pub(super) async fn steps_page(pool: &PgPool, run_id: &str, from: u32, limit: u32) -> Result<Vec<Step>> {
    let mut tx = pool.begin_with(SNAPSHOT).await?;
    let mut steps: Vec<Step> = sqlx::query_as::<_, StepRow>(&format!(
        "SELECT {STEP_COLUMNS} FROM steps WHERE run_id = $1 AND idx >= $2 ORDER BY idx LIMIT $3"
    ))
    .bind(run_id)
    .bind(i64::from(from))
    .bind(i64::from(limit))
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(Step::from)
    .collect();
    if let (Some(first), Some(last)) = (steps.first(), steps.last()) {
        let (first, last) = (i64::from(first.index), i64::from(last.index));
        let calls = sqlx::query_as::<_, ToolCallRow>(&format!(
            "SELECT {CALL_COLUMNS} FROM tool_calls WHERE run_id = $1 AND step_idx BETWEEN $2 AND $3
             ORDER BY step_idx, pos"
        ))
        .bind(run_id)
        .bind(first)
        .bind(last)
        .fetch_all(&mut *tx)
        .await?;
        let calls = calls.into_iter().map(|row| (row.step_idx as u32, ToolCall::from(row)));
        attach(&mut steps, calls, |s| s.index, |s, c| s.tool_calls.push(c));
    }
    tx.commit().await?;
    Ok(steps)
}

/// One step of the outline as stored: no payload column (the step's model
/// has its own).
#[derive(sqlx::FromRow)]
struct StepOutlineRow {
    idx: i64,
    kind: String,
    status: String,
    model: Option<String>,
    input_tokens: i64,
    output_tokens: i64,
    cache_read_tokens: i64,
    reasoning_tokens: i64,
    total_tokens: i64,
    requests: i64,
    started_at: i64,
    model_completed_at: Option<i64>,
    completed_at: Option<i64>,
}

impl From<StepOutlineRow> for StepOutline {
    fn from(r: StepOutlineRow) -> StepOutline {
        StepOutline {
            index: r.idx as u32,
            kind: r.kind,
            status: parse_step_status(&r.status),
            model: r.model,
            usage: Usage {
                input_tokens: r.input_tokens as u64,
                output_tokens: r.output_tokens as u64,
                cache_read_tokens: r.cache_read_tokens as u64,
                reasoning_tokens: r.reasoning_tokens as u64,
                total_tokens: r.total_tokens as u64,
                requests: r.requests as u64,
            },
            started_at: from_ms(r.started_at),
            model_completed_at: r.model_completed_at.map(from_ms),
            completed_at: r.completed_at.map(from_ms),
            tool_calls: Vec::new(),
        }
    }
}

/// One tool call of the outline with the index of its step.
#[derive(sqlx::FromRow)]
struct CallOutlineRow {
    step_idx: i64,
    id: String,
    tool_name: String,
    status: String,
    requested_at: Option<i64>,
    started_at: Option<i64>,
    completed_at: Option<i64>,
}

impl From<CallOutlineRow> for (u32, CallOutline) {
    fn from(r: CallOutlineRow) -> (u32, CallOutline) {
        let call = CallOutline {
            id: r.id,
            tool_name: r.tool_name,
            status: ToolCallStatus::parse(&r.status).unwrap_or(ToolCallStatus::Failed),
            requested_at: r.requested_at.map(from_ms),
            started_at: r.started_at.map(from_ms),
            completed_at: r.completed_at.map(from_ms),
        };
        (r.step_idx as u32, call)
    }
}

/// Every step of a run without payloads (see [`StepOutline`]), the steps and
/// their calls read in one snapshot: a call always belongs to a step read,
/// and the newest step has every call committed with it.
pub(super) async fn step_outline(pool: &PgPool, run_id: &str) -> Result<Vec<StepOutline>> {
    let mut tx = pool.begin_with(SNAPSHOT).await?;
    let mut steps: Vec<StepOutline> = sqlx::query_as::<_, StepOutlineRow>(
        "SELECT idx, kind, status, model, input_tokens, output_tokens, cache_read_tokens, reasoning_tokens,
            total_tokens, requests, started_at, model_completed_at, completed_at
         FROM steps WHERE run_id = $1 ORDER BY idx",
    )
    .bind(run_id)
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(StepOutline::from)
    .collect();
    if !steps.is_empty() {
        let calls = sqlx::query_as::<_, CallOutlineRow>(
            "SELECT step_idx, id, tool_name, status, requested_at, started_at, completed_at
             FROM tool_calls WHERE run_id = $1 ORDER BY step_idx, pos",
        )
        .bind(run_id)
        .fetch_all(&mut *tx)
        .await?;
        attach(&mut steps, calls.into_iter().map(<(u32, CallOutline)>::from), |s| s.index, |s, c| s.tool_calls.push(c));
    }
    tx.commit().await?;
    Ok(steps)
}

/// Gives each step its calls. Both lists are ordered by step index, so this
/// walks forward through the steps and never searches; a call whose step is
/// not in `steps` is skipped.
fn attach<S, C>(
    steps: &mut [S],
    calls: impl IntoIterator<Item = (u32, C)>,
    index: impl Fn(&S) -> u32,
    mut push: impl FnMut(&mut S, C),
) {
    let mut at = 0;
    for (idx, call) in calls {
        while at < steps.len() && index(&steps[at]) < idx {
            at += 1;
        }
        if let Some(step) = steps.get_mut(at).filter(|s| index(s) == idx) {
            push(step, call);
        }
    }
}
