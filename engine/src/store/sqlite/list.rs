//! Reads that must stay fast at scale: the runs list over a million runs
//! and one run's steps over ten thousand.
//!
//! The runs list is keyset-paginated newest first on `(created_at, id)`,
//! compared as a row value so SQLite seeks straight into the index for every
//! page, not only the first. Each filter has an index that yields rows
//! already in that order (see `0001_runs.sql`, `0004_events.sql`): by status,
//! by agent, and — through `run_tags`, which carries `created_at` — by tag.
//! A page therefore reads `limit + 1` index entries, whatever the table size.
//! A list of one project (what the server always asks for) reads the same
//! indexes led by `project` (see `0009_identity.sql`); a tag filter reads the
//! tag's runs of every project and skips the others'. A comparison group's
//! runs are one range of `runs_by_group` (see `0016_compare_groups.sql`).

use sqlx::{QueryBuilder, Sqlite, SqlitePool};

use crate::error::{EngineError, Result};
use crate::model::{Run, RunFilter, RunPage};
use crate::store::rows::RunRow;
use crate::store::{decode_cursor, encode_cursor};

pub(super) async fn list_runs(pool: &SqlitePool, f: &RunFilter) -> Result<RunPage> {
    let limit = f.limit.unwrap_or(50).clamp(1, 200) as i64;
    let mut q = list_query(f, limit, "")?;
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

/// SQLite's plan for the runs-list query of `f` (one line per step), so
/// tests can check that every filter reads an index in order.
pub(super) async fn explain_list_runs(pool: &SqlitePool, f: &RunFilter) -> Result<Vec<String>> {
    let mut q = list_query(f, 51, "EXPLAIN QUERY PLAN ")?;
    let rows: Vec<(i64, i64, i64, String)> = q.build_query_as().fetch_all(pool).await?;
    Ok(rows.into_iter().map(|r| r.3).collect())
}

fn list_query(f: &RunFilter, limit: i64, prefix: &str) -> Result<QueryBuilder<'static, Sqlite>> {
    let mut q = QueryBuilder::<Sqlite>::new(prefix);
    // `created_at, id` of the ordering index in use.
    let order = match &f.tag {
        Some(tag) => {
            let (k, v) =
                tag.split_once(':').ok_or_else(|| EngineError::Invalid("tag filter must be key:value".into()))?;
            q.push("SELECT runs.* FROM run_tags t JOIN runs ON runs.id = t.run_id WHERE t.key = ")
                .push_bind(k.to_owned())
                .push(" AND t.value = ")
                .push_bind(v.to_owned());
            ("t.created_at", "t.run_id")
        }
        None => {
            q.push("SELECT * FROM runs WHERE 1 = 1");
            ("created_at", "id")
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
        let pattern = format!("%{}%", text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"));
        q.push(" AND (runs.name LIKE ").push_bind(pattern.clone()).push(" ESCAPE '\\'");
        q.push(" OR runs.metadata LIKE ").push_bind(pattern.clone()).push(" ESCAPE '\\'");
        q.push(" OR runs.initial_prompt LIKE ").push_bind(pattern).push(" ESCAPE '\\')");
    }
    if let Some(meta) = &f.metadata {
        let (key, value) =
            meta.split_once(':').ok_or_else(|| EngineError::Invalid("metadata filter must be key:value".into()))?;
        // A string value, the JSON text of a number, or `true`/`false`.
        let path = format!("$.\"{}\"", key.replace('"', ""));
        q.push(" AND runs.metadata IS NOT NULL AND (CAST(json_extract(runs.metadata, ")
            .push_bind(path.clone())
            .push(") AS TEXT) = ")
            .push_bind(value.to_owned())
            .push(" AND json_type(runs.metadata, ")
            .push_bind(path.clone())
            .push(") IN ('text', 'integer', 'real') OR json_type(runs.metadata, ")
            .push_bind(path)
            .push(") = ")
            .push_bind(value.to_owned())
            .push(" AND ")
            .push_bind(value.to_owned())
            .push(" IN ('true', 'false'))");
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
/// `(run_id, idx)` and `(run_id, step_idx, pos)` keys, then a merge; the
/// trace reader's result is checked against it (`read`'s tests).
#[cfg(test)]
pub(super) async fn steps_page(
    pool: &SqlitePool,
    run_id: &str,
    from: u32,
    limit: u32,
) -> Result<Vec<crate::model::Step>> {
    use crate::model::{Step, ToolCall};
    use crate::store::rows::{StepRow, ToolCallRow};
    let mut steps: Vec<Step> =
        sqlx::query_as::<_, StepRow>("SELECT * FROM steps WHERE run_id = ? AND idx >= ? ORDER BY idx LIMIT ?")
            .bind(run_id)
            .bind(i64::from(from))
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
            .into_iter()
            .map(Step::from)
            .collect();
    let (Some(first), Some(last)) = (steps.first(), steps.last()) else { return Ok(steps) };
    let calls = sqlx::query_as::<_, ToolCallRow>(
        "SELECT * FROM tool_calls WHERE run_id = ? AND step_idx BETWEEN ? AND ? ORDER BY step_idx, pos",
    )
    .bind(run_id)
    .bind(i64::from(first.index))
    .bind(i64::from(last.index))
    .fetch_all(pool)
    .await?;
    let calls = calls.into_iter().map(|row| (row.step_idx as u32, ToolCall::from(row)));
    super::read::attach(&mut steps, calls, |s| s.index, |s, c| s.tool_calls.push(c));
    Ok(steps)
}
