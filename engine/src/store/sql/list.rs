//! The runs list for every backend: one query over a million runs.
//!
//! The list is keyset-paginated newest first on `(created_at, id)`,
//! compared as a row value so the database seeks straight into the index
//! for every page, not only the first. Each filter has an index that yields
//! rows already in that order (see each backend's migrations): by status,
//! by agent, by project (led by `project`, what the server always asks
//! for), and — through `run_tags`, which carries `created_at` — by tag. A
//! page therefore reads `limit + 1` index entries, whatever the table size.
//! A tag filter reads the tag's runs of every project and skips the
//! others'. What differs: a metadata value is read with each database's
//! JSON functions ([`Dialect::push_json_scalar_eq`]). A search (`q`) is a
//! query of its own (see `search`).

use sqlx::{Database, Encode, QueryBuilder, Type};

use super::columns::qualified_run_columns;
use super::Dialect;
use crate::error::{EngineError, Result};
use crate::model::{OutcomeFilter, RunFilter, ScoreCheck, ScoreTest, MAX_TURNS_STOP};
use crate::store::decode_cursor;

/// The runs-list query of `f` reading `limit + 1` rows, after `prefix` (an
/// `EXPLAIN`, or nothing).
pub(crate) fn list_query<D: Dialect>(f: &RunFilter, limit: i64, prefix: &str) -> Result<QueryBuilder<'static, D::DB>>
where
    <D::DB as Database>::Arguments<'static>: Default,
    String: Encode<'static, D::DB> + Type<D::DB>,
    &'static str: Encode<'static, D::DB> + Type<D::DB>,
    i64: Encode<'static, D::DB> + Type<D::DB>,
{
    let mut q = QueryBuilder::<D::DB>::new(prefix);
    // Qualified columns: `run_tags` has a `created_at` of its own.
    let columns = D::rewrite(&qualified_run_columns());
    // `created_at, id` of the ordering index in use.
    let order = match &f.tag {
        Some(tag) => {
            let (k, v) =
                tag.split_once(':').ok_or_else(|| EngineError::Invalid("tag filter must be key:value".into()))?;
            q.push(format_args!("SELECT {columns} FROM run_tags t JOIN runs ON runs.id = t.run_id WHERE t.key = "))
                .push_bind(k.to_owned())
                .push(" AND t.value = ")
                .push_bind(v.to_owned());
            ("t.created_at", "t.run_id")
        }
        None => {
            q.push(format_args!("SELECT {columns} FROM runs WHERE TRUE"));
            ("runs.created_at", "runs.id")
        }
    };
    push_conditions::<D>(&mut q, f)?;
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

/// Pushes onto `q` (a query over `runs`, its `WHERE` begun) the conditions
/// of `f` on the run: project, status, agent, session, end user, root runs
/// only, outcome, a score, and metadata.
pub(crate) fn push_conditions<D: Dialect>(q: &mut QueryBuilder<'static, D::DB>, f: &RunFilter) -> Result<()>
where
    String: Encode<'static, D::DB> + Type<D::DB>,
    &'static str: Encode<'static, D::DB> + Type<D::DB>,
{
    if let Some(project) = &f.project {
        q.push(" AND runs.project = ").push_bind(project.clone());
    }
    if let Some(st) = f.status {
        q.push(" AND runs.status = ").push_bind(st.as_str());
    }
    if let Some(agent) = &f.agent_id {
        q.push(" AND runs.agent_id = ").push_bind(agent.clone());
    }
    if let Some(session) = &f.session_id {
        q.push(" AND runs.session_id = ").push_bind(session.clone());
    }
    if let Some(user) = &f.user {
        q.push(" AND runs.end_user = ").push_bind(user.clone());
    }
    if f.all != Some(true) {
        q.push(" AND runs.parent_call_id IS NULL");
    }
    if let Some(outcome) = f.outcome {
        q.push(" AND ").push(outcome_condition(outcome));
    }
    if let Some(score) = &f.score {
        push_score_test::<D>(q, &ScoreTest::parse(score).map_err(EngineError::Invalid)?);
    }
    if let Some(meta) = &f.metadata {
        let (key, value) =
            meta.split_once(':').ok_or_else(|| EngineError::Invalid("metadata filter must be key:value".into()))?;
        // A string value, the JSON text of a number, or `true`/`false`; a
        // `"` in the key is dropped.
        q.push(" AND ");
        D::push_json_scalar_eq(q, "runs.metadata", &key.replace('"', ""), value);
    }
    Ok(())
}

/// Pushes the condition of a runs-list `score` filter: a score of the run
/// with the name whose value passes the test (through `scores_by_run`).
/// A number is written into the text (it is a finite `f64`, formatted by
/// Rust), the name and a label are bound.
fn push_score_test<D: Dialect>(q: &mut QueryBuilder<'static, D::DB>, t: &ScoreTest)
where
    String: Encode<'static, D::DB> + Type<D::DB>,
    &'static str: Encode<'static, D::DB> + Type<D::DB>,
{
    q.push(" AND EXISTS (SELECT 1 FROM scores sc WHERE sc.run_id = runs.id AND sc.name = ").push_bind(t.name.clone());
    match &t.test {
        ScoreCheck::Any => {}
        ScoreCheck::Bool(true) => {
            q.push(" AND sc.value = 'true'");
        }
        ScoreCheck::Bool(false) => {
            q.push(" AND sc.value = 'false'");
        }
        ScoreCheck::Label(label) => {
            let as_json = serde_json::Value::String(label.clone()).to_string();
            q.push(" AND (sc.label = ").push_bind(label.clone()).push(" OR sc.value = ").push_bind(as_json).push(")");
        }
        ScoreCheck::Compare(op, n) => {
            q.push(format_args!(" AND sc.number {op} {n:?}"));
        }
    }
    q.push(")");
}

/// The condition a run of `outcome` meets (see [`OutcomeFilter`]), its
/// calls probed through the partial indexes of rejected and failed calls.
fn outcome_condition(outcome: OutcomeFilter) -> String {
    let calls = |status: &str| {
        format!("EXISTS (SELECT 1 FROM tool_calls oc WHERE oc.run_id = runs.id AND oc.status = '{status}')")
    };
    let max_turns = format!("(runs.summary IS NOT NULL AND runs.summary LIKE '{MAX_TURNS_STOP}%')");
    match outcome {
        OutcomeFilter::Rejected => calls("rejected"),
        OutcomeFilter::ToolError => calls("failed"),
        OutcomeFilter::Clean => format!(
            "runs.status = 'done' AND NOT {} AND NOT {} AND NOT {max_turns}",
            calls("rejected"),
            calls("failed")
        ),
        OutcomeFilter::Issues => format!(
            "(runs.status IN ('failed', 'cancelled') OR (runs.status = 'done' AND ({} OR {} OR {max_turns})))",
            calls("rejected"),
            calls("failed")
        ),
    }
}
