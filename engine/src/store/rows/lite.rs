//! [`RunRow`] read off a `rusqlite` row, for the SQLite store's write
//! thread (see `store::sqlite::commit`), whose status changes return the run.
//! Same columns and same conversion to the model as the sqlx row.
//!
//! Values are read as leniently as sqlx reads them (SQLite's own
//! conversions: text in an integer column reads as its number or 0), so a
//! damaged row still reads, and `RunRow::decode` is what refuses it, with
//! the reason.

use rusqlite::types::ValueRef;
use rusqlite::Row;

use super::RunRow;

impl RunRow {
    /// The row of a `SELECT` / `RETURNING` of `RUN_COLUMNS` on `runs`, by column name.
    pub(crate) fn from_lite(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: text(row, "id")?,
            name: text(row, "name")?,
            status: text(row, "status")?,
            model: text(row, "model")?,
            model_settings: text(row, "model_settings")?,
            system_prompt: opt_text(row, "system_prompt")?,
            initial_prompt: text(row, "initial_prompt")?,
            input: opt_text(row, "input")?,
            tools: text(row, "tools")?,
            tags: text(row, "tags")?,
            context: text(row, "context")?,
            max_turns: int(row, "max_turns")?,
            agent_id: opt_text(row, "agent_id")?,
            project: text(row, "project")?,
            created_by_id: opt_text(row, "created_by_id")?,
            created_by: opt_text(row, "created_by")?,
            approval: text(row, "approval")?,
            always_approve: text(row, "always_approve")?,
            always_reject: text(row, "always_reject")?,
            interactive: flag(row, "interactive")?,
            result_schema: opt_text(row, "result_schema")?,
            call_summarization: flag(row, "call_summarization")?,
            parent_run_id: opt_text(row, "parent_run_id")?,
            forked_from_message_id: opt_text(row, "forked_from_message_id")?,
            result: opt_text(row, "result")?,
            summary: opt_text(row, "summary")?,
            failure_reason: opt_text(row, "failure_reason")?,
            input_tokens: int(row, "input_tokens")?,
            output_tokens: int(row, "output_tokens")?,
            cache_read_tokens: int(row, "cache_read_tokens")?,
            reasoning_tokens: int(row, "reasoning_tokens")?,
            total_tokens: int(row, "total_tokens")?,
            requests: int(row, "requests")?,
            step_count: int(row, "step_count")?,
            created_at: int(row, "created_at")?,
            updated_at: int(row, "updated_at")?,
            started_at: opt_int(row, "started_at")?,
            finished_at: opt_int(row, "finished_at")?,
            agent_version: opt_int(row, "agent_version")?,
            agent_overrides: text(row, "agent_overrides")?,
            current_agent: opt_text(row, "current_agent")?,
            current_agent_version: opt_int(row, "current_agent_version")?,
            sub_agents: text(row, "sub_agents")?,
            handoffs: text(row, "handoffs")?,
            handoff_turns: int(row, "handoff_turns")?,
            parent_call_id: opt_text(row, "parent_call_id")?,
            root_run_id: opt_text(row, "root_run_id")?,
            depth: int(row, "depth")?,
            child_count: int(row, "child_count")?,
            metadata: opt_text(row, "metadata")?,
            reasoning_traces: flag(row, "reasoning_traces")?,
            on_status_change: opt_text(row, "on_status_change")?,
            source: opt_text(row, "source")?,
            group_id: opt_text(row, "group_id")?,
            forked_from_step: opt_int(row, "forked_from_step")?,
            replay: opt_text(row, "replay")?,
            idle_ms: int(row, "idle_ms")?,
            session_id: opt_text(row, "session_id")?,
            end_user: opt_text(row, "end_user")?,
            tool_answers: opt_text(row, "tool_answers")?,
            experiment_id: opt_text(row, "experiment_id")?,
            experiment_item_id: opt_text(row, "experiment_item_id")?,
            rejected_calls: int(row, "rejected_calls")?,
            failed_calls: int(row, "failed_calls")?,
        })
    }
}

fn opt_int(row: &Row<'_>, column: &str) -> rusqlite::Result<Option<i64>> {
    Ok(match row.get_ref(column)? {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i),
        ValueRef::Real(f) => Some(f as i64),
        ValueRef::Text(t) | ValueRef::Blob(t) => {
            Some(std::str::from_utf8(t).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0))
        }
    })
}

fn int(row: &Row<'_>, column: &str) -> rusqlite::Result<i64> {
    Ok(opt_int(row, column)?.unwrap_or(0))
}

fn flag(row: &Row<'_>, column: &str) -> rusqlite::Result<bool> {
    Ok(int(row, column)? != 0)
}

fn opt_text(row: &Row<'_>, column: &str) -> rusqlite::Result<Option<String>> {
    Ok(match row.get_ref(column)? {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(String::from_utf8_lossy(t).into_owned()),
    })
}

fn text(row: &Row<'_>, column: &str) -> rusqlite::Result<String> {
    Ok(opt_text(row, column)?.unwrap_or_default())
}
