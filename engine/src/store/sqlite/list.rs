//! The runs list's plan on SQLite, for the scale tests (the list itself is
//! `store::sql::list`), and the plain sqlx read of a page of steps the
//! trace reader (`read`) is checked against.

use sqlx::SqlitePool;

use crate::error::Result;
use crate::model::RunFilter;
use crate::store::sql::{list_query, Lite};

/// SQLite's plan for the runs-list query of `f` (one line per step), so
/// tests can check that every filter reads an index in order.
pub(super) async fn explain_list_runs(pool: &SqlitePool, f: &RunFilter) -> Result<Vec<String>> {
    let mut q = list_query::<Lite>(f, 51, "EXPLAIN QUERY PLAN ")?;
    let rows: Vec<(i64, i64, i64, String)> = q.build_query_as().fetch_all(pool).await?;
    Ok(rows.into_iter().map(|r| r.3).collect())
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
