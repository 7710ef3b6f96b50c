//! The column lists the row codec (`store::rows`) reads, written once:
//! JSON columns are selected `column::text AS column` (PostgreSQL's JSONB
//! as text; SQLite drops the cast, its JSON already is text). A run's
//! rejected and failed calls are counted by every read of it, each from a
//! partial index holding only such calls (`tool_calls_rejected`,
//! `tool_calls_failed`), so the count costs one probe however long the run.

/// The columns of `runs` as [`RunRow`](crate::store::rows::RunRow) reads them.
pub(crate) const RUN_COLUMNS: &str = "id, name, status, model, model_settings::text AS model_settings, system_prompt, \
    initial_prompt, input::text AS input, tools::text AS tools, tags::text AS tags, context::text AS context, \
    max_turns, agent_id, project, created_by_id, created_by, approval::text AS approval, \
    always_approve::text AS always_approve, always_reject::text AS always_reject, interactive, \
    result_schema::text AS result_schema, call_summarization, parent_run_id, forked_from_message_id, \
    result::text AS result, summary, failure_reason, input_tokens, output_tokens, cache_read_tokens, \
    reasoning_tokens, total_tokens, requests, step_count, created_at, updated_at, started_at, finished_at, \
    agent_version, agent_overrides::text AS agent_overrides, current_agent, current_agent_version, \
    sub_agents::text AS sub_agents, handoffs::text AS handoffs, handoff_turns, parent_call_id, root_run_id, depth, \
    child_count, metadata::text AS metadata, reasoning_traces, on_status_change::text AS on_status_change, \
    source::text AS source, group_id, forked_from_step, replay, idle_ms, session_id, end_user, \
    tool_answers, experiment_id, experiment_item_id, \
    (SELECT count(*) FROM tool_calls oc WHERE oc.run_id = runs.id AND oc.status = 'rejected') AS rejected_calls, \
    (SELECT count(*) FROM tool_calls oc WHERE oc.run_id = runs.id AND oc.status = 'failed') AS failed_calls";

/// [`RUN_COLUMNS`] qualified as `runs.…` (for joins with tables that have
/// columns of the same names).
pub(crate) fn qualified_run_columns() -> String {
    RUN_COLUMNS
        .split(", ")
        .map(|c| if c.starts_with('(') { c.to_owned() } else { format!("runs.{c}") })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The columns of `steps` as `StepRow` reads them.
pub(crate) const STEP_COLUMNS: &str = "run_id, idx, kind, status, request::text AS request, \
    response::text AS response, input_tokens, output_tokens, cache_read_tokens, reasoning_tokens, total_tokens, \
    requests, started_at, model_completed_at, completed_at, model";

/// The columns of `tool_calls` as `ToolCallRow` reads them.
pub(crate) const CALL_COLUMNS: &str = "run_id, step_idx, pos, id, tool_name, arguments::text AS arguments, \
    result::text AS result, error, status, reasoning, requested_at, approval::text AS approval, started_at, \
    completed_at, child_run_id";

/// The columns of `messages` as `MessageRow` reads them.
pub(crate) const MESSAGE_COLUMNS: &str = "run_id, seq, id, type, step_idx, data::text AS data, created_at";
