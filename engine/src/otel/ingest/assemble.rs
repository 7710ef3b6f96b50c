//! A trace's run, derived from all of its stored spans at once (see the
//! module docs of `otel::ingest`): a pure function of the set of spans, so
//! batching and arrival order never change the result.
//!
//! - agent spans (`openinference.span.kind = AGENT`, or `gen_ai.operation.name`
//!   `invoke_agent` / `create_agent`): the top-most one is the run (its
//!   name, times and status); without one, the trace's root span is;
//! - model spans (`LLM`, or `chat` / `text_completion` / `generate_content`):
//!   one step each, in start order, with model, usage, timings and answer;
//! - tool spans (`TOOL`, or `execute_tool`): tool calls on the step of the
//!   model turn that asked for them (the latest model span that ended when
//!   the tool started), else a step of their own;
//! - every other span (and the agent spans): a generic [`SpanNode`].
//!
//! The run is `running` until the trace's root span (the one without a
//! parent) has arrived, then `done`, or `failed` when the run's span or the
//! root ended with an error. The transcript comes from the message contents
//! the instrumentation captured (OpenInference `llm.input_messages.*` /
//! `llm.output_messages.*`, GenAI `gen_ai.input.messages` /
//! `gen_ai.output.messages` or `gen_ai.*.message` events, `input.value` /
//! `output.value`), else it says they were not captured.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::captured::{
    error_of, failed, first_text, input_messages, model_of, output_messages, payload, settings_of, text, usage_of,
};
use crate::model::{
    Invocation, Message, MessageBody, ModelAnswer, ResultType, Run, RunSource, RunStatus, SpanEventNode, SpanNode,
    Step, StepRequest, StepResponse, StepStatus, ToolCall, ToolCallStatus, Usage, SOURCE_OTLP,
};
use crate::otel::attrs as a;
use crate::store::{DerivedRun, StoredSpan};

/// What a transcript says where the instrumentation recorded no contents.
pub const PROMPT_NOT_CAPTURED: &str = "(the prompt was not captured: the instrumentation recorded no message contents)";
pub const ANSWER_NOT_CAPTURED: &str = "(the answer was not captured: the instrumentation recorded no message contents)";

/// The id of the run assembled from trace `trace_id` (32 hex digits) in
/// `project`: scoped to the project, so a trace id sent to another project
/// is another run there (see `model::limits::scoped_run_id`).
pub fn run_id_for(project: &str, trace_id: &str) -> String {
    crate::model::limits::scoped_run_id(project, "trace", trace_id)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Agent,
    Model,
    Tool,
    Other,
}

fn role(s: &StoredSpan) -> Role {
    let oi = text(s, a::OPENINFERENCE_SPAN_KIND).map(str::to_ascii_uppercase);
    let op = text(s, a::GEN_AI_OPERATION_NAME);
    match (oi.as_deref(), op) {
        (Some("AGENT"), _) | (_, Some("invoke_agent" | "create_agent")) => Role::Agent,
        (Some("LLM"), _) | (_, Some("chat" | "text_completion" | "generate_content")) => Role::Model,
        (Some("TOOL"), _) | (_, Some("execute_tool")) => Role::Tool,
        _ => Role::Other,
    }
}

/// Unix nanoseconds as the millisecond times the store keeps.
fn time(ns: i64) -> DateTime<Utc> {
    crate::store::from_ms(ns.div_euclid(1_000_000))
}

/// One step to be: a model span with the tool spans it asked for, or
/// tool spans no model span asked for.
struct Unit<'s> {
    start_ns: i64,
    span_id: &'s str,
    model: Option<&'s StoredSpan>,
    tools: Vec<&'s StoredSpan>,
}

/// The steps to be, in start order: each model span with the tool spans it
/// asked for (those that started after it ended, before the next one did),
/// and tool spans no model span asked for on their own.
fn units<'s>(spans: &[&'s StoredSpan], roles: &HashMap<&str, Role>) -> Vec<Unit<'s>> {
    let models: Vec<&StoredSpan> =
        spans.iter().copied().filter(|s| roles.get(s.span_id.as_str()) == Some(&Role::Model)).collect();
    let mut units: Vec<Unit> = models
        .iter()
        .map(|m| Unit { start_ns: m.start_ns, span_id: &m.span_id, model: Some(m), tools: Vec::new() })
        .collect();
    for t in spans.iter().copied().filter(|s| roles.get(s.span_id.as_str()) == Some(&Role::Tool)) {
        let asked = (0..models.len())
            .filter(|i| models[*i].end_ns <= t.start_ns)
            .max_by_key(|i| (models[*i].end_ns, models[*i].start_ns, &models[*i].span_id));
        match asked {
            Some(i) => units[i].tools.push(t),
            None => units.push(Unit { start_ns: t.start_ns, span_id: &t.span_id, model: None, tools: vec![t] }),
        }
    }
    units.sort_by(|x, y| (x.start_ns, x.span_id).cmp(&(y.start_ns, y.span_id)));
    units
}

/// The run of a trace, from every stored span of it (`None` when no span
/// is an agent, model or tool span: the trace is kept, but is no run).
pub fn derive(project: &str, spans: &[StoredSpan]) -> Option<DerivedRun> {
    let mut spans: Vec<&StoredSpan> = spans.iter().collect();
    spans.sort_by(|x, y| (x.start_ns, &x.span_id).cmp(&(y.start_ns, &y.span_id)));
    let first = *spans.first()?;
    let roles: HashMap<&str, Role> = spans.iter().map(|s| (s.span_id.as_str(), role(s))).collect();
    if roles.values().all(|r| *r == Role::Other) {
        return None;
    }
    let trace_id = first.trace_id.clone();
    let run_id = run_id_for(project, &trace_id);
    let by_id: HashMap<&str, &StoredSpan> = spans.iter().map(|s| (s.span_id.as_str(), *s)).collect();
    let has_agent_above = |s: &StoredSpan| {
        let mut parent = s.parent_span_id.as_deref();
        for _ in 0..spans.len() {
            let Some(p) = parent.and_then(|p| by_id.get(p)) else { return false };
            if roles.get(p.span_id.as_str()) == Some(&Role::Agent) {
                return true;
            }
            parent = p.parent_span_id.as_deref();
        }
        false
    };
    let top_agent =
        spans.iter().copied().find(|s| roles.get(s.span_id.as_str()) == Some(&Role::Agent) && !has_agent_above(s));
    let root = spans.iter().copied().find(|s| s.parent_span_id.is_none());
    let anchor = top_agent.or(root);

    let units = units(&spans, &roles);

    let mut steps = Vec::new();
    let mut bodies: Vec<(DateTime<Utc>, Option<u32>, MessageBody)> = Vec::new();
    let mut call_ids = HashSet::new();
    let mut tool_names: Vec<String> = Vec::new();
    let mut system_prompt = None;
    let mut run_usage = Usage::default();
    let mut last_model = None;
    let mut first_model_seen = false;
    for (index, unit) in units.iter().enumerate() {
        let index = index as u32;
        let mut calls = Vec::new();
        // The calls the model asked for, to name the tool spans that
        // recorded no call id (matched by tool name, in order).
        let mut asked: Vec<(Option<String>, Option<String>)> =
            unit.model.map(|m| output_messages(m).into_iter().flat_map(|c| c.tool_calls).collect()).unwrap_or_default();
        for t in &unit.tools {
            let name = first_text(t, &[a::GEN_AI_TOOL_NAME, a::TOOL_NAME]).unwrap_or(&t.name).to_owned();
            let recorded = first_text(t, &[a::GEN_AI_TOOL_CALL_ID, a::TOOL_CALL_ID]).map(str::to_owned);
            let matched = match &recorded {
                Some(_) => None,
                None => asked
                    .iter()
                    .position(|(id, n)| id.is_some() && n.as_deref() == Some(name.as_str()))
                    .map(|i| asked.remove(i).0),
            };
            let mut id = recorded.or(matched.flatten()).unwrap_or_else(|| t.span_id.clone());
            if !call_ids.insert(id.clone()) {
                id = format!("{id}-{}", t.span_id);
                call_ids.insert(id.clone());
            }
            if !tool_names.contains(&name) {
                tool_names.push(name.clone());
            }
            let error = failed(t).then(|| error_of(t, "tool call"));
            calls.push(ToolCall {
                id,
                run_id: run_id.clone(),
                step_index: index,
                tool_name: name,
                arguments: payload(t, &[a::GEN_AI_TOOL_CALL_ARGUMENTS, a::INPUT_VALUE]).unwrap_or(Value::Null),
                result: if error.is_some() { None } else { payload(t, &[a::GEN_AI_TOOL_CALL_RESULT, a::OUTPUT_VALUE]) },
                status: if error.is_some() { ToolCallStatus::Failed } else { ToolCallStatus::Succeeded },
                error,
                reasoning: None,
                requested_at: None,
                approval: None,
                started_at: Some(time(t.start_ns)),
                completed_at: Some(time(t.end_ns)),
                child_run_id: None,
            });
        }
        let invocations: Vec<Invocation> = calls
            .iter()
            .map(|c| Invocation {
                id: c.id.clone(),
                tool_name: c.tool_name.clone(),
                reasoning: None,
                input: c.arguments.clone(),
            })
            .collect();
        let tools_end = unit.tools.iter().map(|t| t.end_ns).max();
        let step = match unit.model {
            Some(m) => {
                let input = input_messages(m);
                let output = output_messages(m);
                if system_prompt.is_none() {
                    system_prompt = input.iter().find(|c| c.role == "system").and_then(|c| c.text.clone());
                }
                // The human turns this call added: all on the first call,
                // then those after the last answer the input repeats.
                let after = if first_model_seen {
                    input.iter().rposition(|c| c.role != "user" && c.role != "system").map_or(input.len(), |i| i + 1)
                } else {
                    0
                };
                for c in input[after.min(input.len())..].iter().filter(|c| c.role == "user" || c.role == "human") {
                    if let Some(t) = &c.text {
                        bodies.push((time(m.start_ns), None, MessageBody::Human { message: t.clone() }));
                    }
                }
                if !first_model_seen && input.is_empty() {
                    bodies.push((time(m.start_ns), None, MessageBody::Human { message: PROMPT_NOT_CAPTURED.into() }));
                }
                first_model_seen = true;
                let texts: Vec<&str> = output.iter().filter_map(|c| c.text.as_deref()).collect();
                let answer = (!texts.is_empty()).then(|| texts.join("\n"));
                let asked = output.iter().map(|c| c.tool_calls.len()).sum::<usize>();
                let finish_reason = m
                    .attributes
                    .get(a::GEN_AI_RESPONSE_FINISH_REASONS)
                    .and_then(|v| match v {
                        Value::Array(l) => l.first().and_then(Value::as_str).map(str::to_owned),
                        Value::String(t) => Some(t.clone()),
                        _ => None,
                    })
                    .or_else(|| output.iter().find_map(|c| c.finish_reason.clone()))
                    .or_else(|| text(m, "llm.finish_reason").map(str::to_owned));
                let message = match (&answer, invocations.is_empty(), output.is_empty()) {
                    (None, true, true) => Some(ANSWER_NOT_CAPTURED.to_owned()),
                    _ => answer.clone(),
                };
                bodies.push((
                    time(m.end_ns),
                    Some(index),
                    MessageBody::Agent { message, result: None, invocations: invocations.clone() },
                ));
                let model = model_of(m).map(str::to_owned);
                if model.is_some() {
                    last_model.clone_from(&model);
                }
                let usage = usage_of(m);
                run_usage.add(&usage);
                let response = if failed(m) {
                    StepResponse::Failed { error: error_of(m, "model call") }
                } else {
                    StepResponse::Answer(ModelAnswer {
                        finish_reason,
                        result: None,
                        schema_error: None,
                        text: answer,
                        tool_calls: calls.len().max(asked) as u64,
                    })
                };
                Step {
                    id: Step::id_for(&run_id, index),
                    run_id: run_id.clone(),
                    index,
                    kind: "model_turn".into(),
                    status: StepStatus::Completed,
                    request: StepRequest {
                        messages: input.len() as u64,
                        model,
                        settings: settings_of(m),
                        ..StepRequest::default()
                    },
                    response,
                    usage,
                    started_at: time(m.start_ns),
                    model_completed_at: Some(time(m.end_ns)),
                    completed_at: Some(time(tools_end.unwrap_or(m.end_ns).max(m.end_ns))),
                    tool_calls: Vec::new(),
                }
            }
            None => {
                let start = unit.tools.iter().map(|t| t.start_ns).min().unwrap_or(unit.start_ns);
                bodies.push((
                    time(start),
                    Some(index),
                    MessageBody::Agent { message: None, result: None, invocations },
                ));
                Step {
                    id: Step::id_for(&run_id, index),
                    run_id: run_id.clone(),
                    index,
                    kind: "tool_calls".into(),
                    status: StepStatus::Completed,
                    request: StepRequest::default(),
                    response: StepResponse::Answer(ModelAnswer {
                        tool_calls: calls.len() as u64,
                        ..ModelAnswer::default()
                    }),
                    usage: Usage::default(),
                    started_at: time(start),
                    model_completed_at: None,
                    completed_at: Some(time(tools_end.unwrap_or(start))),
                    tool_calls: Vec::new(),
                }
            }
        };
        for c in &calls {
            let (result_type, result) = match &c.error {
                Some(e) => (ResultType::Rejection, Value::String(e.clone())),
                None => (ResultType::Resolution, c.result.clone().unwrap_or(Value::Null)),
            };
            let at = c.completed_at.unwrap_or(step.started_at);
            bodies.push((
                at,
                Some(index),
                MessageBody::InvocationResult { id: c.id.clone(), tool_name: c.tool_name.clone(), result_type, result },
            ));
        }
        steps.push(Step { tool_calls: calls, ..step });
    }

    // The run's own span: its prompt and answer when no model span had them.
    let anchor_input = anchor.and_then(|s| text(s, a::INPUT_VALUE)).map(str::to_owned);
    let anchor_output = anchor.and_then(|s| text(s, a::OUTPUT_VALUE)).map(str::to_owned);
    if !bodies.iter().any(|(_, _, b)| matches!(b, MessageBody::Human { .. })) {
        let prompt = anchor_input.clone().unwrap_or_else(|| PROMPT_NOT_CAPTURED.to_owned());
        bodies.insert(0, (time(first.start_ns), None, MessageBody::Human { message: prompt }));
    } else if let Some((_, _, MessageBody::Human { message })) = bodies.first_mut() {
        if message == PROMPT_NOT_CAPTURED {
            if let Some(input) = &anchor_input {
                message.clone_from(input);
            }
        }
    }
    let messages: Vec<Message> = bodies
        .into_iter()
        .enumerate()
        .map(|(seq, (created_at, step_index, body))| Message {
            id: format!("{run_id}-m{seq}"),
            run_id: run_id.clone(),
            seq: seq as u64,
            step_index,
            created_at,
            body,
        })
        .collect();
    let initial_prompt = messages
        .iter()
        .find_map(|m| match &m.body {
            MessageBody::Human { message } => Some(message.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let summary = messages
        .iter()
        .rev()
        .find_map(|m| match &m.body {
            MessageBody::Agent { message: Some(t), .. } if t != ANSWER_NOT_CAPTURED => Some(t.clone()),
            _ => None,
        })
        .or(anchor_output);

    let created = spans.iter().map(|s| s.start_ns).min().unwrap_or(first.start_ns);
    let ended = spans.iter().map(|s| s.end_ns).max().unwrap_or(first.end_ns);
    let failure = anchor.filter(|s| failed(s)).or(root.filter(|s| failed(s))).map(|s| error_of(s, "span"));
    let status = match (root, &failure) {
        (None, _) => RunStatus::Running,
        (Some(_), Some(_)) => RunStatus::Failed,
        (Some(_), None) => RunStatus::Done,
    };
    let name = anchor
        .map(|s| first_text(s, &[a::GEN_AI_AGENT_NAME, "agent.name"]).unwrap_or(&s.name).to_owned())
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| format!("trace {}", &trace_id[..8.min(trace_id.len())]));
    let service =
        anchor.and_then(|s| s.service_name.clone()).or_else(|| spans.iter().find_map(|s| s.service_name.clone()));
    let model =
        last_model.or_else(|| anchor.and_then(model_of).map(str::to_owned)).unwrap_or_else(|| "unknown".to_owned());
    // What a placeholder of this trace holds, with what the spans say.
    let shown_before = super::placeholder(project, &trace_id, &name, time(created));
    let mut run = Run {
        status,
        model,
        system_prompt,
        initial_prompt,
        tools: tool_names,
        max_turns: (steps.len() as u32).max(1),
        source: Some(RunSource { kind: SOURCE_OTLP.into(), service, trace_id }),
        summary: if status == RunStatus::Running { None } else { summary },
        failure_reason: if status == RunStatus::Failed { failure } else { None },
        usage: run_usage,
        step_count: steps.len() as u32,
        updated_at: time(ended),
        started_at: Some(time(anchor.map_or(created, |s| s.start_ns))),
        finished_at: status.is_terminal().then(|| time(anchor.map_or(ended, |s| s.end_ns))),
        ..shown_before
    };
    run.output = run.output_union();
    Some(DerivedRun { run, steps, messages })
}

/// The spans of a trace that are not model or tool spans (the agent spans
/// and everything else), with their events, by start time.
pub fn other_spans(spans: &[StoredSpan]) -> Vec<SpanNode> {
    let mut nodes: Vec<SpanNode> = spans
        .iter()
        .filter(|s| matches!(role(s), Role::Agent | Role::Other))
        .map(|s| SpanNode {
            span_id: s.span_id.clone(),
            parent_span_id: s.parent_span_id.clone(),
            name: s.name.clone(),
            kind: match s.kind {
                1 => "internal",
                2 => "server",
                3 => "client",
                4 => "producer",
                5 => "consumer",
                _ => "unspecified",
            }
            .into(),
            started_at: time(s.start_ns),
            ended_at: Some(time(s.end_ns)),
            status: match s.status_code {
                1 => "ok",
                2 => "error",
                _ => "unset",
            }
            .into(),
            status_message: s.status_message.clone(),
            attributes: s.attributes.clone(),
            events: s
                .events
                .iter()
                .map(|e| SpanEventNode { name: e.name.clone(), at: time(e.time_ns), attributes: e.attributes.clone() })
                .collect(),
        })
        .collect();
    nodes.sort_by(|x, y| (x.started_at, &x.span_id).cmp(&(y.started_at, &y.span_id)));
    nodes
}
