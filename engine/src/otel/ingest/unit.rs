//! One step of an assembled run: a model span with the tool spans it asked
//! for, or tool spans no model span asked for (see `assemble`). A step
//! depends on its spans, its index, the call ids the steps before it took
//! and whether a model step came before it; nothing after it.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::assemble::{time, ANSWER_NOT_CAPTURED, PROMPT_NOT_CAPTURED};
use super::captured::{
    error_of, failed, first_text, input_messages, model_of, output_messages, payload, settings_of, text, usage_of,
    Asked, Captured,
};
use crate::model::{
    Invocation, MessageBody, ModelAnswer, ResultType, Step, StepRequest, StepResponse, StepStatus, ToolCall,
    ToolCallStatus, Usage,
};
use crate::otel::attrs as a;
use crate::store::StoredSpan;

/// A transcript entry before it has its sequence number.
pub(super) type Body = (DateTime<Utc>, Option<u32>, MessageBody);

/// A step to be: a model span with the tool spans it asked for (in start
/// order), or tool spans no model span asked for.
pub(super) struct Unit<'s> {
    pub start_ns: i64,
    pub model: Option<&'s StoredSpan>,
    pub tools: Vec<&'s StoredSpan>,
}

/// A step as derived, with what the run takes from it.
#[derive(Clone, Debug)]
pub(super) struct UnitOut {
    pub step: Step,
    pub bodies: Vec<Body>,
    /// The tool names of its calls, in order.
    pub tool_names: Vec<String>,
    /// The system prompt its model span was sent (when it had one).
    pub system_prompt: Option<String>,
    /// The model its model span called.
    pub model: Option<String>,
    /// Its answer, when it is one the run's summary may take.
    pub summary: Option<String>,
    pub has_human: bool,
}

/// Derives step `index` of run `run_id` from `unit`: `call_ids` holds the
/// call ids the steps before it took (its own are added), `model_seen`
/// says whether one of them was a model step.
pub(super) fn derive_unit(
    run_id: &str,
    index: u32,
    unit: &Unit,
    model_seen: bool,
    call_ids: &mut HashSet<String>,
) -> UnitOut {
    let asked: Vec<Asked> =
        unit.model.map(|m| output_messages(m).into_iter().flat_map(|c| c.tool_calls).collect()).unwrap_or_default();
    let calls = calls_of(run_id, index, &unit.tools, asked, call_ids);
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
    let mut bodies = Vec::new();
    let (step, system_prompt) = match unit.model {
        Some(m) => model_step(run_id, index, m, model_seen, invocations, calls.len(), tools_end, &mut bodies),
        None => (tools_step(run_id, index, unit, invocations, calls.len(), tools_end, &mut bodies), None),
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
    let summary = bodies.iter().rev().find_map(|(_, _, b)| match b {
        MessageBody::Agent { message: Some(t), .. } if t != ANSWER_NOT_CAPTURED => Some(t.clone()),
        _ => None,
    });
    UnitOut {
        tool_names: calls.iter().map(|c| c.tool_name.clone()).collect(),
        model: step.request.model.clone(),
        has_human: bodies.iter().any(|(_, _, b)| matches!(b, MessageBody::Human { .. })),
        step: Step { tool_calls: calls, ..step },
        bodies,
        system_prompt,
        summary,
    }
}

/// The tool calls of step `index`, one per tool span. A call's id is the
/// one its span recorded, else that of a call the model asked for by that
/// tool name (in order), else its span id; an id taken already gets the
/// span id added. Its arguments are the ones the span recorded as such,
/// else the ones the model wrote for it (a framework's tool span may hold
/// only what the function was passed, such as `"Paris"`), else the span's
/// input.
fn calls_of(
    run_id: &str,
    index: u32,
    tools: &[&StoredSpan],
    mut asked: Vec<Asked>,
    call_ids: &mut HashSet<String>,
) -> Vec<ToolCall> {
    let mut calls = Vec::new();
    for t in tools {
        let name =
            first_text(t, &[a::GEN_AI_TOOL_NAME, a::TOOL_NAME, a::AI_TOOL_CALL_NAME]).unwrap_or(&t.name).to_owned();
        let recorded = first_text(t, &[a::GEN_AI_TOOL_CALL_ID, a::TOOL_CALL_ID, a::AI_TOOL_CALL_ID])
            .map(str::to_owned)
            .or_else(|| output_call_id(t));
        let position = match &recorded {
            Some(id) => asked.iter().position(|c| c.id.as_ref() == Some(id)),
            None => asked.iter().position(|c| c.id.is_some() && c.name.as_deref() == Some(name.as_str())),
        };
        let matched = position.map(|i| asked.remove(i)).unwrap_or_default();
        let mut id = recorded.or(matched.id).unwrap_or_else(|| t.span_id.clone());
        if !call_ids.insert(id.clone()) {
            id = format!("{id}-{}", t.span_id);
            call_ids.insert(id.clone());
        }
        let arguments = payload(t, &[a::GEN_AI_TOOL_CALL_ARGUMENTS, a::AI_TOOL_CALL_ARGS, "gen_ai.tool.input"])
            .or(matched.arguments)
            .or_else(|| payload(t, &[a::INPUT_VALUE]));
        let error = failed(t).then(|| error_of(t, "tool call"));
        calls.push(ToolCall {
            id,
            run_id: run_id.to_owned(),
            step_index: index,
            tool_name: name,
            arguments: arguments.unwrap_or(Value::Null),
            result: if error.is_some() { None } else { tool_result(t) },
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
    calls
}

/// What a tool span returned. LlamaIndex records a `ToolOutput`
/// (`{"raw_output": …, "tool_name": …, "blocks": …}`): the result is its
/// raw output. LangChain records the `ToolMessage` a tool made (`{"type": "tool", "data": {"content": …, "tool_call_id": …}}`, or
/// the same fields flat) as its output: the result is its content.
fn tool_result(t: &StoredSpan) -> Option<Value> {
    let out = payload(t, &[a::GEN_AI_TOOL_CALL_RESULT, a::AI_TOOL_CALL_RESULT, "gen_ai.tool.output", a::OUTPUT_VALUE])?;
    // LlamaIndex records its `ToolOutput`: the tool's own value is `raw_output`.
    if let Some(raw) = out.get("raw_output").filter(|_| out.get("tool_name").is_some()) {
        return Some(raw.clone());
    }
    let message = tool_message(&out);
    match message.and_then(|m| m.get("content")) {
        Some(Value::String(t)) => Some(serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.clone()))),
        Some(content) => Some(content.clone()),
        None => Some(out),
    }
}

/// The fields of a LangChain `ToolMessage` recorded as `v`, if it is one.
fn tool_message(v: &Value) -> Option<&serde_json::Map<String, Value>> {
    if v.get("type").and_then(Value::as_str) != Some("tool") {
        return None;
    }
    let fields = v.get("data").unwrap_or(v).as_object()?;
    fields.contains_key("tool_call_id").then_some(fields)
}

/// The call id a tool span's output names (a LangChain `ToolMessage`'s).
fn output_call_id(t: &StoredSpan) -> Option<String> {
    let out = payload(t, &[a::OUTPUT_VALUE])?;
    tool_message(&out)?.get("tool_call_id")?.as_str().map(str::to_owned)
}

/// The human turns a model call added: all on the first call, then those
/// after the last answer its input repeats.
fn human_bodies(m: &StoredSpan, input: &[Captured], model_seen: bool, bodies: &mut Vec<Body>) {
    let after = if model_seen {
        input.iter().rposition(|c| c.role != "user" && c.role != "system").map_or(input.len(), |i| i + 1)
    } else {
        0
    };
    for c in input[after.min(input.len())..].iter().filter(|c| c.role == "user" || c.role == "human") {
        if let Some(t) = &c.text {
            bodies.push((time(m.start_ns), None, MessageBody::Human { message: t.clone() }));
        }
    }
    if !model_seen && input.is_empty() {
        bodies.push((time(m.start_ns), None, MessageBody::Human { message: PROMPT_NOT_CAPTURED.into() }));
    }
}

fn finish_reason(m: &StoredSpan, output: &[Captured]) -> Option<String> {
    m.attributes
        .get(a::GEN_AI_RESPONSE_FINISH_REASONS)
        .and_then(|v| match v {
            Value::Array(l) => l.first().and_then(Value::as_str).map(str::to_owned),
            Value::String(t) => Some(t.clone()),
            _ => None,
        })
        .or_else(|| output.iter().find_map(|c| c.finish_reason.clone()))
        .or_else(|| text(m, "llm.finish_reason").map(str::to_owned))
}

/// The step of model span `m` (and the system prompt it was sent).
#[allow(clippy::too_many_arguments)]
fn model_step(
    run_id: &str,
    index: u32,
    m: &StoredSpan,
    model_seen: bool,
    invocations: Vec<Invocation>,
    calls: usize,
    tools_end: Option<i64>,
    bodies: &mut Vec<Body>,
) -> (Step, Option<String>) {
    let input = input_messages(m);
    let output = output_messages(m);
    let system_prompt = input.iter().find(|c| c.role == "system").and_then(|c| c.text.clone());
    human_bodies(m, &input, model_seen, bodies);
    let texts: Vec<&str> = output.iter().filter_map(|c| c.text.as_deref()).collect();
    let answer = (!texts.is_empty()).then(|| texts.join("\n"));
    let asked = output.iter().map(|c| c.tool_calls.len()).sum::<usize>();
    let message = match (&answer, invocations.is_empty(), output.is_empty()) {
        (None, true, true) => Some(ANSWER_NOT_CAPTURED.to_owned()),
        _ => answer.clone(),
    };
    bodies.push((time(m.end_ns), Some(index), MessageBody::Agent { message, result: None, invocations }));
    let response = if failed(m) {
        StepResponse::Failed { error: error_of(m, "model call") }
    } else {
        StepResponse::Answer(ModelAnswer {
            finish_reason: finish_reason(m, &output),
            result: None,
            schema_error: None,
            text: answer,
            tool_calls: calls.max(asked) as u64,
        })
    };
    let step = Step {
        id: Step::id_for(run_id, index),
        run_id: run_id.to_owned(),
        index,
        kind: "model_turn".into(),
        status: StepStatus::Completed,
        request: StepRequest {
            messages: input.len() as u64,
            model: model_of(m).map(str::to_owned),
            settings: settings_of(m),
            ..StepRequest::default()
        },
        response,
        usage: usage_of(m),
        started_at: time(m.start_ns),
        model_completed_at: Some(time(m.end_ns)),
        completed_at: Some(time(tools_end.unwrap_or(m.end_ns).max(m.end_ns))),
        tool_calls: Vec::new(),
    };
    (step, system_prompt)
}

/// The step of tool spans no model span asked for.
fn tools_step(
    run_id: &str,
    index: u32,
    unit: &Unit,
    invocations: Vec<Invocation>,
    calls: usize,
    tools_end: Option<i64>,
    bodies: &mut Vec<Body>,
) -> Step {
    let start = unit.tools.iter().map(|t| t.start_ns).min().unwrap_or(unit.start_ns);
    bodies.push((time(start), Some(index), MessageBody::Agent { message: None, result: None, invocations }));
    Step {
        id: Step::id_for(run_id, index),
        run_id: run_id.to_owned(),
        index,
        kind: "tool_calls".into(),
        status: StepStatus::Completed,
        request: StepRequest::default(),
        response: StepResponse::Answer(ModelAnswer { tool_calls: calls as u64, ..ModelAnswer::default() }),
        usage: Usage::default(),
        started_at: time(start),
        model_completed_at: None,
        completed_at: Some(time(tools_end.unwrap_or(start))),
        tool_calls: Vec::new(),
    }
}
