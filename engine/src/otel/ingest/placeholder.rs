//! The run a trace is shown in before any of its spans arrived (an agent's
//! approval request naming the trace, see `engine::requests`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::assemble::run_id_for;
use crate::model::{Run, RunSource, RunStatus, Usage, SOURCE_OTLP};

/// The run an approval request with `trace_id` is shown in before any span
/// of the trace arrived: `running`, named after the agent's run, with no
/// steps. Ingest replaces it with the assembled run when spans come, which
/// is this run with what the spans say (it is recorded, so the same rules
/// hold: read-only, never driven).
pub fn placeholder(project: &str, trace_id: &str, name: &str, at: DateTime<Utc>) -> Run {
    let run_id = run_id_for(project, trace_id);
    Run {
        id: run_id.clone(),
        name: name.to_owned(),
        status: RunStatus::Running,
        model: "unknown".to_owned(),
        model_settings: Value::Null,
        system_prompt: None,
        initial_prompt: String::new(),
        input: None,
        tools: Vec::new(),
        tags: BTreeMap::new(),
        context: Value::Null,
        max_turns: 1,
        agent_id: None,
        project: project.to_owned(),
        created_by: None,
        approval: Default::default(),
        always_approve: Vec::new(),
        always_reject: Vec::new(),
        interruptions: Vec::new(),
        interactive: false,
        result_schema: None,
        call_summarization: false,
        parent_run_id: None,
        forked_from_message_id: None,
        parent_call_id: None,
        root_run_id: run_id,
        depth: 0,
        child_count: 0,
        agent_version: None,
        agent_overrides: Vec::new(),
        current_agent: None,
        current_agent_version: None,
        sub_agents: Vec::new(),
        handoffs: Vec::new(),
        handoff_turns: 0,
        reasoning_traces: false,
        on_status_change: None,
        metadata: Map::new(),
        source: Some(RunSource { kind: SOURCE_OTLP.into(), service: None, trace_id: trace_id.to_owned() }),
        group_id: None,
        forked_from_step: None,
        replay: None,
        output: None,
        // Counted by the store's read of the run (see `RunOutcome`).
        outcome: Default::default(),
        result: None,
        summary: None,
        failure_reason: None,
        usage: Usage::default(),
        step_count: 0,
        created_at: at,
        updated_at: at,
        started_at: Some(at),
        finished_at: None,
        idle_ms: 0,
        session_id: None,
        end_user: None,
        tool_answers: None,
        experiment: None,
    }
}
