//! The writes a turn makes, as the write thread runs them (see `commit`):
//! a step with its calls, messages and the run's totals; a run's status
//! compare-and-set; one tool call; a batch of events. Each is made from
//! owned, already encoded values on the caller's task and runs on the write
//! connection with cached statements.

use std::sync::Arc;

use chrono::Utc;
use rusqlite::{params, Connection};

use crate::model::{Event, EventKind};
use crate::model::{Message, Run, RunStatus, Step};
use crate::store::rows::params::{usage_columns, CallParams, Column, MessageParams, RunParams, StepParams};
use crate::store::rows::RunRow;
use crate::store::sql::writes::{
    transition_run_sql, upsert_call_sql, upsert_step_sql, COUNT_CHILD, INSERT_MESSAGE, INSERT_RUN, INSERT_TAG,
    SWITCH_AGENT,
};
use crate::store::sql::{sql, Lite};
use crate::store::{json_text, to_ms, AgentSwitch, RunPatch, StepWrite};

/// A step, its tool calls, its new messages and the run's totals (see [`StepWrite`]).
pub(super) struct StepRows {
    step: StepParams,
    calls: Vec<CallParams>,
    messages: Vec<MessageParams>,
    run_usage: [i64; 6],
    step_count: i64,
    switch: Option<SwitchParams>,
}

impl From<&StepWrite<'_>> for StepRows {
    fn from(w: &StepWrite<'_>) -> Self {
        Self {
            step: StepParams::from(w.step),
            calls: w.step.tool_calls.iter().enumerate().map(|(pos, c)| CallParams::new(c, pos)).collect(),
            messages: w.messages.iter().map(MessageParams::from).collect(),
            run_usage: usage_columns(w.run_usage),
            step_count: i64::from(w.step_count),
            switch: w.switch.map(SwitchParams::from),
        }
    }
}

/// What a handoff writes on the run (see [`AgentSwitch`]).
struct SwitchParams {
    agent_id: String,
    version: i64,
    system_prompt: Option<String>,
    model: String,
    model_settings: String,
    tools: String,
    approval: String,
    sub_agents: String,
    handoffs: String,
    reasoning_traces: bool,
    turns_before: i64,
}

impl From<&AgentSwitch> for SwitchParams {
    fn from(s: &AgentSwitch) -> Self {
        Self {
            agent_id: s.agent_id.clone(),
            version: i64::from(s.version),
            system_prompt: s.system_prompt.clone(),
            model: s.model.clone(),
            model_settings: json_text(&s.model_settings),
            tools: json_text(&s.tools),
            approval: json_text(&s.approval),
            sub_agents: json_text(&s.sub_agents),
            handoffs: json_text(&s.handoffs),
            reasoning_traces: s.reasoning_traces,
            turns_before: i64::from(s.turns_before),
        }
    }
}

pub(super) fn write_step(conn: &Connection, w: &StepRows) -> rusqlite::Result<()> {
    upsert_step(conn, &w.step)?;
    for c in &w.calls {
        upsert_call(conn, c)?;
    }
    for m in &w.messages {
        insert_message(conn, m)?;
    }
    let u = &w.run_usage;
    let mut stmt = conn.prepare_cached(
        "UPDATE runs SET input_tokens = ?, output_tokens = ?, cache_read_tokens = ?, reasoning_tokens = ?,
            total_tokens = ?, requests = ?, step_count = ?, updated_at = ? WHERE id = ?",
    )?;
    stmt.execute(params![u[0], u[1], u[2], u[3], u[4], u[5], w.step_count, to_ms(Utc::now()), w.step.run_id])?;
    if let Some(s) = &w.switch {
        let mut stmt = conn.prepare_cached(sql!(Lite, SWITCH_AGENT))?;
        stmt.execute(params![
            s.agent_id,
            s.version,
            s.system_prompt,
            s.model,
            s.model_settings,
            s.tools,
            s.approval,
            s.sub_agents,
            s.handoffs,
            s.reasoning_traces,
            s.turns_before,
            w.step.run_id
        ])?;
    }
    Ok(())
}

pub(super) fn upsert_step(conn: &Connection, p: &StepParams) -> rusqlite::Result<()> {
    let u = &p.usage;
    let mut stmt = conn.prepare_cached(upsert_step_sql::<Lite>())?;
    stmt.execute(params![
        p.run_id,
        p.idx,
        p.kind,
        p.status,
        p.request,
        p.response,
        u[0],
        u[1],
        u[2],
        u[3],
        u[4],
        u[5],
        p.started_at,
        p.model_completed_at,
        p.completed_at,
        p.model
    ])?;
    Ok(())
}

pub(super) fn upsert_call(conn: &Connection, p: &CallParams) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(upsert_call_sql::<Lite>())?;
    stmt.execute(params![
        p.run_id,
        p.step_idx,
        p.pos,
        p.id,
        p.tool_name,
        p.arguments,
        p.result,
        p.error,
        p.status,
        p.reasoning,
        p.requested_at,
        p.approval,
        p.started_at,
        p.completed_at,
        p.child_run_id
    ])?;
    Ok(())
}

/// A compare-and-set of a run's status from `from` to `to`, with the fields
/// written with it; encoded and owned like the other rows here.
pub(super) struct Transition {
    id: String,
    from: &'static str,
    to: &'static str,
    terminal: bool,
    set_result: bool,
    result: Option<String>,
    summary: Option<String>,
    failure_reason: Option<String>,
    replay: Option<String>,
}

impl Transition {
    pub(super) fn new(id: &str, from: RunStatus, to: RunStatus, patch: RunPatch) -> Self {
        Self {
            id: id.to_owned(),
            from: from.as_str(),
            to: to.as_str(),
            terminal: to.is_terminal(),
            set_result: patch.result.is_some(),
            result: patch.result.as_ref().filter(|v| !v.is_null()).map(json_text),
            summary: patch.summary,
            failure_reason: patch.failure_reason,
            replay: patch.replay.as_ref().map(json_text),
        }
    }
}

/// Moves a run from `from` to `to`; `None` when it was not in `from`.
pub(super) fn transition(conn: &Connection, t: &Transition) -> rusqlite::Result<Option<RunRow>> {
    let now = to_ms(Utc::now());
    let mut stmt = conn.prepare_cached(sql!(Lite, transition_run_sql()))?;
    let mut rows = stmt.query(params![
        t.to,
        now,
        t.terminal,
        t.set_result,
        t.result,
        t.summary,
        t.failure_reason,
        t.id,
        t.from,
        t.replay
    ])?;
    match rows.next()? {
        Some(row) => RunRow::from_lite(row).map(Some),
        None => Ok(None),
    }
}

/// A batch of numbered events, encoded.
pub(super) struct EventRows {
    rows: Vec<(String, i64, &'static str, String, i64)>,
    /// Runs whose `run.finished` is in the batch.
    finished: Vec<String>,
}

impl EventRows {
    pub(super) fn new(events: &[Arc<Event>]) -> Self {
        Self {
            rows: events
                .iter()
                .map(|e| (e.run_id.clone(), e.seq as i64, e.kind.name(), e.kind.data_json(), to_ms(e.at)))
                .collect(),
            finished: (events.iter())
                .filter(|e| matches!(e.kind, EventKind::RunFinished { .. }))
                .map(|e| e.run_id.clone())
                .collect(),
        }
    }
}

pub(super) fn append_events(conn: &Connection, batch: &EventRows) -> rusqlite::Result<()> {
    let mut stmt =
        conn.prepare_cached("INSERT OR IGNORE INTO run_events (run_id, seq, type, data, at) VALUES (?, ?, ?, ?, ?)")?;
    for (run_id, seq, kind, data, at) in &batch.rows {
        stmt.execute(params![run_id, seq, kind, data, at])?;
    }
    // A stored `run.finished` announces its run's end (see migration 0008).
    let mut stmt =
        conn.prepare_cached("UPDATE runs SET finish_unannounced = 0 WHERE id = ? AND finish_unannounced = 1")?;
    for id in &batch.finished {
        stmt.execute([id])?;
    }
    Ok(())
}

/// A new run with its first messages (and, for an imported history, its
/// steps), encoded.
pub(super) struct NewRun {
    run: RunParams,
    messages: Vec<MessageParams>,
    steps: Vec<(StepParams, Vec<CallParams>)>,
}

impl NewRun {
    pub(super) fn new(run: &Run, messages: &[Message], steps: &[Step]) -> Self {
        Self {
            run: RunParams::from(run),
            messages: messages.iter().map(MessageParams::from).collect(),
            steps: (steps.iter())
                .map(|s| {
                    (StepParams::from(s), s.tool_calls.iter().enumerate().map(|(p, c)| CallParams::new(c, p)).collect())
                })
                .collect(),
        }
    }
}

/// Inserts the run and what comes with it; `None` (nothing written) when
/// the id exists.
pub(super) fn insert_run(conn: &Connection, new: &NewRun) -> rusqlite::Result<Option<()>> {
    let r = &new.run;
    let mut stmt = conn.prepare_cached(sql!(Lite, INSERT_RUN))?;
    if stmt.execute(rusqlite::params_from_iter(r.columns.iter().map(lite_value)))? == 0 {
        return Ok(None);
    }
    if let Some(parent) = &r.child_of {
        conn.prepare_cached(sql!(Lite, COUNT_CHILD))?.execute([parent])?;
    }
    for (k, v) in &r.tags {
        conn.prepare_cached(sql!(Lite, INSERT_TAG))?.execute(params![k, v, r.id, r.created_at])?;
    }
    for m in &new.messages {
        insert_message(conn, m)?;
    }
    for (step, calls) in &new.steps {
        upsert_step(conn, step)?;
        for c in calls {
            upsert_call(conn, c)?;
        }
    }
    Ok(Some(()))
}

/// Inserts every run with what comes with it; `None` when any id exists
/// (or repeats), and the write thread then rolls back all of them.
pub(super) fn insert_runs(conn: &Connection, runs: &[NewRun]) -> rusqlite::Result<Option<()>> {
    for new in runs {
        if insert_run(conn, new)?.is_none() {
            return Ok(None);
        }
    }
    Ok(Some(()))
}

/// An encoded column as SQLite takes it.
pub(super) fn lite_value(c: &Column) -> rusqlite::types::Value {
    use rusqlite::types::Value;
    match c {
        Column::Int(i) => Value::Integer(*i),
        Column::Bool(b) => Value::Integer(i64::from(*b)),
        Column::Text(t) => Value::Text(t.clone()),
        Column::NullInt | Column::NullText => Value::Null,
    }
}

pub(super) fn insert_message(conn: &Connection, m: &MessageParams) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(sql!(Lite, INSERT_MESSAGE))?;
    stmt.execute(params![m.run_id, m.seq, m.id, m.kind, m.step_idx, m.data, m.created_at])?;
    Ok(())
}
