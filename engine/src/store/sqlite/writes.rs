//! Row writers the SQLite store's sqlx transactions share: a run row,
//! steps, tool calls and messages. Each takes the open connection of a
//! transaction; committing is the caller's. The rows are encoded once into
//! owned parameters ([`StepParams`] and the like) that the write thread
//! (`hot`) binds as well, with the same statements.

use crate::error::Result;
use crate::model::{Message, Run, Step, ToolCall, Usage};
use crate::store::json_text;
use crate::store::rows::{message_data, step_status_str};
use crate::store::to_ms;

/// Writes a step row (insert or replace).
pub(super) async fn upsert_step(tx: &mut sqlx::SqliteConnection, s: &Step) -> Result<()> {
    let p = StepParams::from(s);
    sqlx::query(UPSERT_STEP)
        .bind(p.run_id)
        .bind(p.idx)
        .bind(p.kind)
        .bind(p.status)
        .bind(p.request)
        .bind(p.response)
        .bind(p.usage[0])
        .bind(p.usage[1])
        .bind(p.usage[2])
        .bind(p.usage[3])
        .bind(p.usage[4])
        .bind(p.usage[5])
        .bind(p.started_at)
        .bind(p.model_completed_at)
        .bind(p.completed_at)
        .bind(p.model)
        .execute(tx)
        .await?;
    Ok(())
}

/// Inserts the full run row (and its tags); `false` when the id exists.
pub(super) async fn insert_run_row(tx: &mut sqlx::SqliteConnection, run: &Run) -> Result<bool> {
    let p = RunParams::from(run);
    let mut q = sqlx::query(INSERT_RUN);
    for v in p.columns {
        q = match v {
            Column::Int(i) => q.bind(i),
            Column::Text(t) => q.bind(t),
            Column::Null => q.bind(None::<i64>),
        };
    }
    let inserted = q.execute(&mut *tx).await?.rows_affected() == 1;
    if inserted {
        if let Some(parent) = &p.child_of {
            sqlx::query(COUNT_CHILD).bind(parent).execute(&mut *tx).await?;
        }
        for (k, v) in &p.tags {
            sqlx::query(INSERT_TAG).bind(k).bind(v).bind(&p.id).bind(p.created_at).execute(&mut *tx).await?;
        }
    }
    Ok(inserted)
}

pub(super) const INSERT_RUN: &str = "INSERT INTO runs (id, name, status, model, model_settings, system_prompt,
    initial_prompt, input, tools, tags, context, max_turns, agent_id, project, created_by_id, created_by, approval,
    always_approve, always_reject, interactive, result_schema, call_summarization, parent_run_id,
    forked_from_message_id, result, summary, failure_reason, input_tokens, output_tokens, cache_read_tokens,
    reasoning_tokens, total_tokens, requests, step_count, created_at, updated_at, started_at, finished_at,
    agent_version, agent_overrides, current_agent, current_agent_version, sub_agents, handoffs, parent_call_id,
    root_run_id, depth, metadata, reasoning_traces, handoff_turns, on_status_change, source, group_id,
    forked_from_step, replay)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
            ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (id) DO NOTHING";

pub(super) const COUNT_CHILD: &str = "UPDATE runs SET child_count = child_count + 1 WHERE id = ?";

pub(super) const INSERT_TAG: &str = "INSERT INTO run_tags (key, value, run_id, created_at) VALUES (?, ?, ?, ?)";

/// One column value of a row, encoded.
pub(super) enum Column {
    Int(i64),
    Text(String),
    Null,
}

impl From<i64> for Column {
    fn from(v: i64) -> Self {
        Column::Int(v)
    }
}

impl From<bool> for Column {
    fn from(v: bool) -> Self {
        Column::Int(i64::from(v))
    }
}

impl From<String> for Column {
    fn from(v: String) -> Self {
        Column::Text(v)
    }
}

impl<T: Into<Column>> From<Option<T>> for Column {
    fn from(v: Option<T>) -> Self {
        v.map_or(Column::Null, Into::into)
    }
}

/// A run row for [`INSERT_RUN`], encoded and owned (see [`StepParams`]),
/// with what is written beside it when it is new.
pub(super) struct RunParams {
    pub(super) id: String,
    pub(super) created_at: i64,
    /// The columns of [`INSERT_RUN`], in order.
    pub(super) columns: Vec<Column>,
    /// The parent whose child count grows: a child run of an agent call.
    pub(super) child_of: Option<String>,
    pub(super) tags: Vec<(String, String)>,
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

pub(super) async fn upsert_tool_call(tx: &mut sqlx::SqliteConnection, c: &ToolCall, pos: usize) -> Result<()> {
    let p = CallParams::new(c, pos);
    sqlx::query(UPSERT_CALL)
        .bind(p.run_id)
        .bind(p.step_idx)
        .bind(p.pos)
        .bind(p.id)
        .bind(p.tool_name)
        .bind(p.arguments)
        .bind(p.result)
        .bind(p.error)
        .bind(p.status)
        .bind(p.reasoning)
        .bind(p.requested_at)
        .bind(p.approval)
        .bind(p.started_at)
        .bind(p.completed_at)
        .bind(p.child_run_id)
        .execute(tx)
        .await?;
    Ok(())
}

/// Appends a message; a `seq` the run already has is an error (the caller
/// numbered wrongly), never a silently dropped message.
pub(super) async fn insert_message(tx: &mut sqlx::SqliteConnection, m: &Message) -> Result<()> {
    let p = MessageParams::from(m);
    sqlx::query(INSERT_MESSAGE)
        .bind(p.run_id)
        .bind(p.seq)
        .bind(p.id)
        .bind(p.kind)
        .bind(p.step_idx)
        .bind(p.data)
        .bind(p.created_at)
        .execute(tx)
        .await?;
    Ok(())
}

/// The statements the sqlx writers here and the write thread (`hot`) share.
pub(super) const UPSERT_STEP: &str = "INSERT OR REPLACE INTO steps (run_id, idx, kind, status, request, response,
    input_tokens, output_tokens, cache_read_tokens, reasoning_tokens, total_tokens, requests, started_at,
    model_completed_at, completed_at, model) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

pub(super) const UPSERT_CALL: &str = "INSERT OR REPLACE INTO tool_calls (run_id, step_idx, pos, id, tool_name,
    arguments, result, error, status, reasoning, requested_at, approval, started_at, completed_at, child_run_id)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";

pub(super) const INSERT_MESSAGE: &str =
    "INSERT INTO messages (run_id, seq, id, type, step_idx, data, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)";

/// A step row, encoded (JSON as text, times in ms) and owned, so it can be
/// made on the caller's task and written on another thread.
pub(super) struct StepParams {
    pub(super) run_id: String,
    pub(super) idx: i64,
    pub(super) kind: String,
    pub(super) status: &'static str,
    pub(super) request: String,
    pub(super) response: String,
    /// See [`usage_columns`].
    pub(super) usage: [i64; 6],
    pub(super) started_at: i64,
    pub(super) model_completed_at: Option<i64>,
    pub(super) completed_at: Option<i64>,
    pub(super) model: Option<String>,
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
pub(super) struct CallParams {
    pub(super) run_id: String,
    pub(super) step_idx: i64,
    pub(super) pos: i64,
    pub(super) id: String,
    pub(super) tool_name: String,
    pub(super) arguments: String,
    pub(super) result: Option<String>,
    pub(super) error: Option<String>,
    pub(super) status: &'static str,
    pub(super) reasoning: Option<String>,
    pub(super) requested_at: Option<i64>,
    pub(super) approval: Option<String>,
    pub(super) started_at: Option<i64>,
    pub(super) completed_at: Option<i64>,
    pub(super) child_run_id: Option<String>,
}

impl CallParams {
    pub(super) fn new(c: &ToolCall, pos: usize) -> Self {
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
pub(super) struct MessageParams {
    pub(super) run_id: String,
    pub(super) seq: i64,
    pub(super) id: String,
    pub(super) kind: &'static str,
    pub(super) step_idx: Option<i64>,
    pub(super) data: String,
    pub(super) created_at: i64,
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
pub(super) fn usage_columns(u: &Usage) -> [i64; 6] {
    [u.input_tokens, u.output_tokens, u.cache_read_tokens, u.reasoning_tokens, u.total_tokens, u.requests]
        .map(|n| n as i64)
}

impl crate::store::sql::RowWrites for crate::store::sql::Lite {
    fn insert_run_row<'a>(
        conn: &'a mut sqlx::SqliteConnection,
        run: &'a Run,
    ) -> impl std::future::Future<Output = Result<bool>> + Send + 'a {
        insert_run_row(conn, run)
    }

    fn insert_message<'a>(
        conn: &'a mut sqlx::SqliteConnection,
        m: &'a Message,
    ) -> impl std::future::Future<Output = Result<()>> + Send + 'a {
        insert_message(conn, m)
    }

    fn upsert_step<'a>(
        conn: &'a mut sqlx::SqliteConnection,
        s: &'a Step,
    ) -> impl std::future::Future<Output = Result<()>> + Send + 'a {
        upsert_step(conn, s)
    }

    fn upsert_tool_call<'a>(
        conn: &'a mut sqlx::SqliteConnection,
        c: &'a ToolCall,
        pos: usize,
    ) -> impl std::future::Future<Output = Result<()>> + Send + 'a {
        upsert_tool_call(conn, c, pos)
    }
}
