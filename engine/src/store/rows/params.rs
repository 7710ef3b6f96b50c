//! Rows encoded for writing: a run, a step, a tool call, a message, each
//! as owned parameters (JSON as text, times in Unix ms) made once, on the
//! caller's task, and bound by whichever writer takes them — the shared
//! statements of `sql::writes` on either database, or SQLite's write thread
//! (`sqlite::hot`) — in the column order of those statements.

use super::{message_data, step_status_str};
use crate::model::{Message, Run, Step, ToolCall, Usage};
use crate::store::{json_text, to_ms};

/// One column value of a row, encoded. A NULL keeps its type: PostgreSQL
/// types every parameter, and a NULL bound as a number cannot fill a text
/// or JSON column.
pub(crate) enum Column {
    Int(i64),
    Bool(bool),
    Text(String),
    NullInt,
    NullText,
}

impl From<i64> for Column {
    fn from(v: i64) -> Self {
        Column::Int(v)
    }
}

impl From<bool> for Column {
    fn from(v: bool) -> Self {
        Column::Bool(v)
    }
}

impl From<String> for Column {
    fn from(v: String) -> Self {
        Column::Text(v)
    }
}

impl From<Option<i64>> for Column {
    fn from(v: Option<i64>) -> Self {
        v.map_or(Column::NullInt, Column::Int)
    }
}

impl From<Option<String>> for Column {
    fn from(v: Option<String>) -> Self {
        v.map_or(Column::NullText, Column::Text)
    }
}

/// A run row for `sql::writes::INSERT_RUN`, encoded and owned (see [`StepParams`]),
/// with what is written beside it when it is new.
pub(crate) struct RunParams {
    pub(crate) id: String,
    pub(crate) created_at: i64,
    /// The columns of `INSERT_RUN`, in order.
    pub(crate) columns: Vec<Column>,
    /// The parent whose child count grows: a child run of an agent call.
    pub(crate) child_of: Option<String>,
    pub(crate) tags: Vec<(String, String)>,
}

impl From<&Run> for RunParams {
    fn from(run: &Run) -> Self {
        let u = usage_columns(&run.usage);
        let root = if run.root_run_id.is_empty() { &run.id } else { &run.root_run_id };
        let columns: Vec<Column> = vec![
            run.id.clone().into(),
            run.name.clone().into(),
            run.status.as_str().to_owned().into(),
            run.model.clone().into(),
            json_text(&run.model_settings).into(),
            run.system_prompt.clone().into(),
            run.initial_prompt.clone().into(),
            run.input.as_ref().map(json_text).into(),
            json_text(&run.tools).into(),
            json_text(&run.tags).into(),
            json_text(&run.context).into(),
            (run.max_turns as i64).into(),
            run.agent_id.clone().into(),
            run.project.clone().into(),
            run.created_by.as_ref().map(|a| a.id.clone()).into(),
            run.created_by.as_ref().map(|a| a.name.clone()).into(),
            json_text(&run.approval).into(),
            json_text(&run.always_approve).into(),
            json_text(&run.always_reject).into(),
            run.interactive.into(),
            run.result_schema.as_ref().map(json_text).into(),
            run.call_summarization.into(),
            run.parent_run_id.clone().into(),
            run.forked_from_message_id.clone().into(),
            run.result.as_ref().filter(|v| !v.is_null()).map(json_text).into(),
            run.summary.clone().into(),
            run.failure_reason.clone().into(),
            u[0].into(),
            u[1].into(),
            u[2].into(),
            u[3].into(),
            u[4].into(),
            u[5].into(),
            (run.step_count as i64).into(),
            to_ms(run.created_at).into(),
            to_ms(run.updated_at).into(),
            run.started_at.map(to_ms).into(),
            run.finished_at.map(to_ms).into(),
            run.agent_version.map(i64::from).into(),
            json_text(&run.agent_overrides).into(),
            run.current_agent.clone().into(),
            run.current_agent_version.map(i64::from).into(),
            json_text(&run.sub_agents).into(),
            json_text(&run.handoffs).into(),
            run.parent_call_id.clone().into(),
            root.clone().into(),
            i64::from(run.depth).into(),
            (!run.metadata.is_empty()).then(|| json_text(&run.metadata)).into(),
            run.reasoning_traces.into(),
            i64::from(run.handoff_turns).into(),
            run.on_status_change.as_ref().map(json_text).into(),
            run.source.as_ref().map(json_text).into(),
            run.group_id.clone().into(),
            run.forked_from_step.map(i64::from).into(),
            run.replay.as_ref().map(json_text).into(),
            i64::try_from(run.idle_ms).unwrap_or(i64::MAX).into(),
            run.session_id.clone().into(),
            run.end_user.clone().into(),
            run.tool_answers.as_ref().map(json_text).into(),
            run.experiment.as_ref().map(|e| e.experiment_id.clone()).into(),
            run.experiment.as_ref().map(|e| e.item_id.clone()).into(),
        ];
        Self {
            id: run.id.clone(),
            created_at: to_ms(run.created_at),
            columns,
            child_of: run.parent_call_id.as_ref().and(run.parent_run_id.clone()),
            tags: run.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        }
    }
}
/// A step row, encoded (JSON as text, times in ms) and owned, so it can be
/// made on the caller's task and written on another thread.
pub(crate) struct StepParams {
    pub(crate) run_id: String,
    pub(crate) idx: i64,
    pub(crate) kind: String,
    pub(crate) status: &'static str,
    pub(crate) request: String,
    pub(crate) response: String,
    /// See [`usage_columns`].
    pub(crate) usage: [i64; 6],
    pub(crate) started_at: i64,
    pub(crate) model_completed_at: Option<i64>,
    pub(crate) completed_at: Option<i64>,
    pub(crate) model: Option<String>,
}

impl From<&Step> for StepParams {
    fn from(s: &Step) -> Self {
        Self {
            run_id: s.run_id.clone(),
            idx: i64::from(s.index),
            kind: s.kind.clone(),
            status: step_status_str(s.status),
            request: json_text(&s.request),
            response: json_text(&s.response),
            usage: usage_columns(&s.usage),
            started_at: to_ms(s.started_at),
            model_completed_at: s.model_completed_at.map(to_ms),
            completed_at: s.completed_at.map(to_ms),
            model: s.recorded_model().map(str::to_owned),
        }
    }
}

/// A tool call row, encoded and owned (see [`StepParams`]).
pub(crate) struct CallParams {
    pub(crate) run_id: String,
    pub(crate) step_idx: i64,
    pub(crate) pos: i64,
    pub(crate) id: String,
    pub(crate) tool_name: String,
    pub(crate) arguments: String,
    pub(crate) result: Option<String>,
    pub(crate) error: Option<String>,
    pub(crate) status: &'static str,
    pub(crate) reasoning: Option<String>,
    pub(crate) requested_at: Option<i64>,
    pub(crate) approval: Option<String>,
    pub(crate) started_at: Option<i64>,
    pub(crate) completed_at: Option<i64>,
    pub(crate) child_run_id: Option<String>,
}

impl CallParams {
    pub(crate) fn new(c: &ToolCall, pos: usize) -> Self {
        Self {
            run_id: c.run_id.clone(),
            step_idx: i64::from(c.step_index),
            pos: pos as i64,
            id: c.id.clone(),
            tool_name: c.tool_name.clone(),
            arguments: json_text(&c.arguments),
            result: c.result.as_ref().map(json_text),
            error: c.error.clone(),
            status: c.status.as_str(),
            reasoning: c.reasoning.clone(),
            requested_at: c.requested_at.map(to_ms),
            approval: c.approval.as_ref().map(json_text),
            started_at: c.started_at.map(to_ms),
            completed_at: c.completed_at.map(to_ms),
            child_run_id: c.child_run_id.clone(),
        }
    }
}

/// A message row, encoded and owned (see [`StepParams`]).
pub(crate) struct MessageParams {
    pub(crate) run_id: String,
    pub(crate) seq: i64,
    pub(crate) id: String,
    pub(crate) kind: &'static str,
    pub(crate) step_idx: Option<i64>,
    pub(crate) data: String,
    pub(crate) created_at: i64,
}

impl From<&Message> for MessageParams {
    fn from(m: &Message) -> Self {
        Self {
            run_id: m.run_id.clone(),
            seq: m.seq as i64,
            id: m.id.clone(),
            kind: m.body.kind(),
            step_idx: m.step_index.map(i64::from),
            data: message_data(&m.body),
            created_at: to_ms(m.created_at),
        }
    }
}

/// The six usage columns, in the order every table stores them: input,
/// output, cache-read, reasoning, total tokens, requests.
pub(crate) fn usage_columns(u: &Usage) -> [i64; 6] {
    [u.input_tokens, u.output_tokens, u.cache_read_tokens, u.reasoning_tokens, u.total_tokens, u.requests]
        .map(|n| n as i64)
}
