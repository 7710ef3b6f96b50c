//! Reads that must stay fast at scale, on PostgreSQL: the runs list over a
//! million runs and one run's steps over ten thousand.
//!
//! The runs list is keyset-paginated newest first on `(created_at, id)`,
//! compared as a row value so PostgreSQL seeks straight into the index for
//! every page, not only the first. Each filter has an index that yields rows
//! already in that order (see `migrations/postgres/0001_schema.sql`): by
//! status, by agent, by project (and the partial index of root runs), and —
//! through `run_tags`, which carries `created_at` — by tag. A page therefore
//! reads `limit + 1` index entries, whatever the table size. A tag filter
//! reads the tag's runs of every project and skips the others'. A
//! comparison group's runs are one range of `runs_by_group` (see
//! `0005_compare_groups.sql`).
//!
//! A run's steps and its tool calls are two tables: every read that joins
//! them (a page of steps, the outline) runs in one `REPEATABLE READ`
//! read-only transaction, so the calls belong to exactly the steps read even
//! while the run is writing new ones (READ COMMITTED would give each
//! statement its own snapshot).

use sqlx::{PgPool, Postgres, QueryBuilder};

use super::{run_columns, CALL_COLUMNS, RUN_COLUMNS, STEP_COLUMNS};
use crate::error::{EngineError, Result};
use crate::model::{CallOutline, Run, RunFilter, RunPage, Step, StepOutline, ToolCall, ToolCallStatus, Usage};
use crate::store::rows::{parse_step_status, RunRow, StepRow, ToolCallRow};
use crate::store::{decode_cursor, encode_cursor, from_ms};

/// Opens the one-snapshot transaction of a multi-statement read.
const SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

pub(super) async fn list_runs(pool: &PgPool, f: &RunFilter) -> Result<RunPage> {
    let limit = f.limit.unwrap_or(50).clamp(1, 200) as i64;
    let mut q = list_query(f, limit)?;
    let rows = q.build_query_as::<RunRow>().fetch_all(pool).await?;
    let mut runs: Vec<Run> = rows.into_iter().map(Run::from).collect();
    let next_cursor = if runs.len() as i64 > limit {
        runs.truncate(limit as usize);
        runs.last().map(encode_cursor)
    } else {
        None
    };
    Ok(RunPage { runs, next_cursor })
}

fn list_query(f: &RunFilter, limit: i64) -> Result<QueryBuilder<'static, Postgres>> {
    let mut q = QueryBuilder::<Postgres>::new("");
    // `created_at, id` of the ordering index in use.
    let order = match &f.tag {
        Some(tag) => {
            let (k, v) =
                tag.split_once(':').ok_or_else(|| EngineError::Invalid("tag filter must be key:value".into()))?;
            // Qualified columns: `run_tags` has a `created_at` of its own.
            q.push(format_args!(
                "SELECT {} FROM run_tags t JOIN runs ON runs.id = t.run_id WHERE t.key = ",
                run_columns("runs")
            ))
            .push_bind(k.to_owned())
            .push(" AND t.value = ")
            .push_bind(v.to_owned());
            ("t.created_at", "t.run_id")
        }
        None => {
            q.push(format_args!("SELECT {RUN_COLUMNS} FROM runs WHERE TRUE"));
            ("runs.created_at", "runs.id")
        }
    };
    if let Some(project) = &f.project {
        q.push(" AND runs.project = ").push_bind(project.clone());
    }
    if let Some(st) = f.status {
        q.push(" AND runs.status = ").push_bind(st.as_str());
    }
    if let Some(agent) = &f.agent_id {
        q.push(" AND runs.agent_id = ").push_bind(agent.clone());
    }
    if f.all != Some(true) {
        q.push(" AND runs.parent_call_id IS NULL");
    }
    if let Some(text) = f.q.as_deref().filter(|s| !s.is_empty()) {
        // ILIKE: SQLite's LIKE ignores ASCII case, PostgreSQL's does not.
        let pattern = format!("%{}%", text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"));
        q.push(" AND (runs.name ILIKE ").push_bind(pattern.clone()).push(" ESCAPE '\\'");
        q.push(" OR runs.metadata::text ILIKE ").push_bind(pattern.clone()).push(" ESCAPE '\\'");
        q.push(" OR runs.initial_prompt ILIKE ").push_bind(pattern).push(" ESCAPE '\\')");
    }
    if let Some(meta) = &f.metadata {
        let (key, value) =
            meta.split_once(':').ok_or_else(|| EngineError::Invalid("metadata filter must be key:value".into()))?;
        // A string value, the JSON text of a number, or `true`/`false`: for
        // those three types `->>` yields exactly that text. (The SQLite store
        // drops `"` from the key of its JSON path; so does this.)
        let key = key.replace('"', "");
        q.push(" AND jsonb_typeof(runs.metadata -> ")
            .push_bind(key.clone())
            .push("::text) IN ('string', 'number', 'boolean') AND runs.metadata ->> ")
            .push_bind(key)
            .push("::text = ")
            .push_bind(value.to_owned());
    }
    if let Some(cursor) = &f.cursor {
        let (ms, id) =
            decode_cursor(cursor).ok_or_else(|| EngineError::Invalid(format!("invalid cursor `{cursor}`")))?;
        q.push(format_args!(" AND ({}, {}) < (", order.0, order.1)).push_bind(ms).push(", ").push_bind(id).push(")");
    }
    q.push(format_args!(" ORDER BY {} DESC, {} DESC LIMIT ", order.0, order.1)).push_bind(limit + 1);
    if let Some(offset) = f.offset.filter(|o| *o > 0) {
        q.push(" OFFSET ").push_bind(i64::from(offset));
    }
    Ok(q)
}

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
