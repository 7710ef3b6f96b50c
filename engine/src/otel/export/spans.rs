//! A run as OTLP spans: the GenAI semantic conventions plus OpenInference's
//! span kinds, so Phoenix, Langfuse, Jaeger and Tempo all read it.
//!
//! - one `invoke_agent {name}` span for the run (OpenInference `AGENT`);
//! - a `chat {model}` span per model turn (`LLM`), with usage, model and
//!   finish reasons; with contents, the messages new to that turn and its
//!   answer (the earlier ones are on the turns before: a long run's spans
//!   grow with the run, not with its square);
//! - an `execute_tool {tool}` span per tool call (`TOOL`), from the approval
//!   request (an `approval.requested` event) through the decision (an
//!   `approval.decided` event) to the result.
//!
//! Ids are derived from the run's ids, so sending a run again sends the same
//! spans, and a child run's agent span sits under its parent's tool span in
//! the root run's trace even though each run is sent when it ends.

use chrono::{DateTime, Utc};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, ArrayValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{span, status, Span, Status};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::model::{Message, MessageBody, RunStatus, RunTrace, Step, ToolCall, ToolCallStatus};
use crate::otel::attrs::*;

/// A captured text is cut to this many bytes (a span is not a transcript store).
pub const MAX_CONTENT_BYTES: usize = 32 * 1024;

/// The trace id of every run in the tree under root run `root_run_id`.
pub fn trace_id(root_run_id: &str) -> Vec<u8> {
    digest(&["trace", root_run_id])[..16].to_vec()
}

/// The id of span `part` (`run`, `s{index}`, `call:{id}`) of run `run_id`.
pub fn span_id(run_id: &str, part: &str) -> Vec<u8> {
    digest(&["span", run_id, part])[..8].to_vec()
}

fn digest(parts: &[&str]) -> [u8; 32] {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part.as_bytes());
    }
    hash.finalize().into()
}

/// `openai/gpt-4o-mini` → (`openai`, `gpt-4o-mini`); the built-in model is runlens's own.
pub fn provider_and_model(model: &str) -> (&str, &str) {
    match model.split_once('/') {
        Some((provider, name)) => (provider, name),
        None if model == "builtin" => ("runlens", model),
        None => ("unknown", model),
    }
}

/// Every span of one run (its agent span, model turns and tool calls).
pub fn run_spans(trace: &RunTrace, capture_content: bool) -> Vec<Span> {
    let run = &trace.run;
    let trace_id = trace_id(if run.root_run_id.is_empty() { &run.id } else { &run.root_run_id });
    let root = span_id(&run.id, "run");
    let mut spans = vec![run_span(run, &trace_id, &root, capture_content)];
    let answers = answer_positions(&trace.messages);
    let mut model_now = run.model.clone();
    let mut turn_start = 0;
    for step in &trace.steps {
        if let Some(m) = step.recorded_model() {
            model_now = m.to_owned();
        }
        // The messages new to this turn: the ones before it are on the spans before it.
        let answer = answers.get(&step.index).copied();
        let end = answer.unwrap_or(trace.messages.len()).max(turn_start);
        let turn = Turn {
            input: &trace.messages[turn_start..end],
            earlier: turn_start,
            answer: answer.map(|at| &trace.messages[at]),
        };
        turn_start = answer.map_or(end, |at| at + 1);
        spans.push(chat_span(trace, step, &turn, &model_now, &trace_id, &root, capture_content));
        for call in &step.tool_calls {
            spans.push(tool_span(call, &trace_id, &root, capture_content));
        }
    }
    spans
}

/// The run's own span (`invoke_agent`), under the call that started it for a child run.
fn run_span(run: &crate::model::Run, trace_id: &[u8], root: &[u8], capture_content: bool) -> Span {
    let (provider, model) = provider_and_model(&run.model);
    let agent_name = run.current_agent.clone().or_else(|| run.agent_id.clone()).unwrap_or_else(|| run.name.clone());
    let start = run.started_at.unwrap_or(run.created_at);
    let end = run.finished_at.unwrap_or(run.updated_at).max(start);
    let mut attrs = vec![
        kv(GEN_AI_OPERATION_NAME, "invoke_agent"),
        kv(GEN_AI_PROVIDER_NAME, provider),
        kv(GEN_AI_REQUEST_MODEL, model),
        kv(GEN_AI_CONVERSATION_ID, &run.id),
        kv(GEN_AI_AGENT_NAME, &agent_name),
        kv(OPENINFERENCE_SPAN_KIND, "AGENT"),
        kv(SESSION_ID, &run.id),
        kv_int(GEN_AI_USAGE_INPUT_TOKENS, run.usage.input_tokens),
        kv_int(GEN_AI_USAGE_OUTPUT_TOKENS, run.usage.output_tokens),
        kv_int("llm.token_count.total", run.usage.input_tokens + run.usage.output_tokens),
        kv("runlens.run.id", &run.id),
        kv("runlens.run.status", run.status.as_str()),
        kv("runlens.project", &run.project),
        kv_int("runlens.run.steps", run.step_count as u64),
    ];
    if let Some(agent) = &run.agent_id {
        attrs.push(kv(GEN_AI_AGENT_ID, agent));
    }
    if let Some(parent) = &run.parent_run_id {
        attrs.push(kv("runlens.run.parent_id", parent));
    }
    if capture_content {
        attrs.push(kv(INPUT_VALUE, &cut(&run.initial_prompt)));
        if let Some(result) = &run.result {
            attrs.push(kv(OUTPUT_VALUE, &cut(&text_of(result))));
        }
    }
    let status = match run.status {
        RunStatus::Done => ok(),
        RunStatus::Failed => error(run.failure_reason.as_deref().unwrap_or("the run failed")),
        RunStatus::Cancelled => error("the run was cancelled"),
        _ => Status::default(),
    };
    let parent = match (&run.parent_run_id, &run.parent_call_id) {
        (Some(parent_run), Some(call)) => span_id(parent_run, &format!("call:{call}")),
        _ => Vec::new(),
    };
    Span {
        trace_id: trace_id.to_vec(),
        span_id: root.to_vec(),
        parent_span_id: parent,
        name: format!("invoke_agent {agent_name}"),
        kind: span::SpanKind::Internal as i32,
        start_time_unix_nano: nanos(start),
        end_time_unix_nano: nanos(end),
        attributes: attrs,
        status: Some(status),
        ..Default::default()
    }
}

/// A model turn's messages: those new to it, and its answer.
struct Turn<'a> {
    input: &'a [Message],
    /// Transcript messages before `input` (sent too, shown on earlier spans).
    earlier: usize,
    answer: Option<&'a Message>,
}

fn chat_span(
    trace: &RunTrace,
    step: &Step,
    turn: &Turn<'_>,
    model: &str,
    trace_id: &[u8],
    root: &[u8],
    capture: bool,
) -> Span {
    let run = &trace.run;
    let (provider, model_name) = provider_and_model(model);
    let end = step.model_completed_at.or(step.completed_at).unwrap_or(step.started_at).max(step.started_at);
    let mut attrs = vec![
        kv(GEN_AI_OPERATION_NAME, "chat"),
        kv(GEN_AI_PROVIDER_NAME, provider),
        kv(GEN_AI_REQUEST_MODEL, model_name),
        kv(GEN_AI_CONVERSATION_ID, &run.id),
        kv(OPENINFERENCE_SPAN_KIND, "LLM"),
        kv(LLM_MODEL_NAME, model_name),
        kv(LLM_PROVIDER, provider),
        kv_int(GEN_AI_USAGE_INPUT_TOKENS, step.usage.input_tokens),
        kv_int(GEN_AI_USAGE_OUTPUT_TOKENS, step.usage.output_tokens),
        kv_int(LLM_TOKEN_COUNT_PROMPT, step.usage.input_tokens),
        kv_int(LLM_TOKEN_COUNT_COMPLETION, step.usage.output_tokens),
        kv_int("llm.token_count.total", step.usage.input_tokens + step.usage.output_tokens),
        kv_int("runlens.step.index", step.index as u64),
    ];
    if step.usage.cache_read_tokens > 0 {
        attrs.push(kv_int("gen_ai.usage.cache_read.input_tokens", step.usage.cache_read_tokens));
    }
    if let Some(reason) = step.response.finish_reason() {
        let reasons =
            AnyValue { value: Some(any_value::Value::ArrayValue(ArrayValue { values: vec![string(reason)] })) };
        attrs.push(kv_value(GEN_AI_RESPONSE_FINISH_REASONS, reasons));
    }
    if capture {
        let input = Value::Array(turn.input.iter().map(genai_message).collect());
        let input = cut(&input.to_string());
        attrs.push(kv(GEN_AI_INPUT_MESSAGES, &input));
        attrs.push(kv(INPUT_VALUE, &input));
        attrs.push(kv("input.mime_type", "application/json"));
        attrs.push(kv_int("runlens.input.earlier_messages", turn.earlier as u64));
        let output_json = cut(&Value::Array(turn.answer.map(genai_message).into_iter().collect()).to_string());
        attrs.push(kv(GEN_AI_OUTPUT_MESSAGES, &output_json));
        attrs.push(kv(OUTPUT_VALUE, &cut(step.response.text().unwrap_or(&output_json))));
    }
    let status = match step.response.error() {
        Some(e) => error(e),
        None => Status::default(),
    };
    Span {
        trace_id: trace_id.to_vec(),
        span_id: span_id(&run.id, &format!("s{}", step.index)),
        parent_span_id: root.to_vec(),
        name: format!("chat {model_name}"),
        kind: span::SpanKind::Client as i32,
        start_time_unix_nano: nanos(step.started_at),
        end_time_unix_nano: nanos(end),
        attributes: attrs,
        status: Some(status),
        ..Default::default()
    }
}

fn tool_span(call: &ToolCall, trace_id: &[u8], root: &[u8], capture: bool) -> Span {
    let start = call.requested_at.or(call.started_at).or(call.completed_at).unwrap_or_default();
    let end = call.completed_at.unwrap_or(start).max(start);
    let mut attrs = vec![
        kv(GEN_AI_OPERATION_NAME, "execute_tool"),
        kv(GEN_AI_TOOL_NAME, &call.tool_name),
        kv(GEN_AI_TOOL_CALL_ID, &call.id),
        kv("gen_ai.tool.type", "function"),
        kv(GEN_AI_CONVERSATION_ID, &call.run_id),
        kv(OPENINFERENCE_SPAN_KIND, "TOOL"),
        kv(TOOL_NAME, &call.tool_name),
        kv(TOOL_CALL_ID, &call.id),
        kv("runlens.tool_call.status", call.status.as_str()),
    ];
    if let Some(child) = &call.child_run_id {
        attrs.push(kv("runlens.child_run.id", child));
    }
    if capture {
        let args = cut(&call.arguments.to_string());
        attrs.push(kv(GEN_AI_TOOL_CALL_ARGUMENTS, &args));
        attrs.push(kv(INPUT_VALUE, &args));
        if let Some(result) = &call.result {
            let result = cut(&text_of(result));
            attrs.push(kv(GEN_AI_TOOL_CALL_RESULT, &result));
            attrs.push(kv(OUTPUT_VALUE, &result));
        }
    }
    let mut events = Vec::new();
    if let Some(at) = call.requested_at {
        events.push(span::Event { time_unix_nano: nanos(at), name: "approval.requested".into(), ..Default::default() });
    }
    if let Some(decision) = &call.approval {
        let mut attributes = vec![
            kv("runlens.approval.decision", decision.decision.as_str()),
            kv("runlens.approval.decided_by", &decision.decided_by),
            kv_value("runlens.approval.always", bool_value(decision.always)),
            kv_value("runlens.approval.arguments_edited", bool_value(decision.edited_arguments.is_some())),
        ];
        if let Some(by) = &decision.decided_by_id {
            attributes.push(kv("runlens.approval.decided_by_id", by));
        }
        if capture {
            if let Some(comment) = &decision.comment {
                attributes.push(kv("runlens.approval.comment", &cut(comment)));
            }
        }
        events.push(span::Event {
            time_unix_nano: nanos(decision.decided_at),
            name: "approval.decided".into(),
            attributes,
            ..Default::default()
        });
    }
    let status = match call.status {
        ToolCallStatus::Succeeded => ok(),
        ToolCallStatus::Failed => error(call.error.as_deref().unwrap_or("the tool call failed")),
        ToolCallStatus::Rejected => error("the call was rejected"),
        ToolCallStatus::Cancelled => error("the call was cancelled"),
        _ => Status::default(),
    };
    Span {
        trace_id: trace_id.to_vec(),
        span_id: span_id(&call.run_id, &format!("call:{}", call.id)),
        parent_span_id: root.to_vec(),
        name: format!("execute_tool {}", call.tool_name),
        kind: span::SpanKind::Internal as i32,
        start_time_unix_nano: nanos(start),
        end_time_unix_nano: nanos(end),
        attributes: attrs,
        events,
        status: Some(status),
        ..Default::default()
    }
}

/// Where each step's answer (its agent message) sits in the transcript.
fn answer_positions(messages: &[Message]) -> std::collections::HashMap<u32, usize> {
    let answers = messages.iter().enumerate().filter_map(|(at, m)| match (&m.body, m.step_index) {
        (MessageBody::Agent { .. }, Some(step)) => Some((step, at)),
        _ => None,
    });
    let mut by_step = std::collections::HashMap::new();
    for (step, at) in answers {
        by_step.entry(step).or_insert(at);
    }
    by_step
}

/// A transcript message in the GenAI conventions' shape (`role` + `parts`).
fn genai_message(message: &Message) -> Value {
    match &message.body {
        MessageBody::Human { message } => json!({"role": "user", "parts": [{"type": "text", "content": message}]}),
        MessageBody::Agent { message, result, invocations } => {
            let mut parts = Vec::new();
            if let Some(text) = message {
                parts.push(json!({"type": "text", "content": text}));
            } else if let Some(result) = result {
                parts.push(json!({"type": "text", "content": text_of(result)}));
            }
            for call in invocations {
                parts
                    .push(json!({"type": "tool_call", "id": call.id, "name": call.tool_name, "arguments": call.input}));
            }
            json!({"role": "assistant", "parts": parts})
        }
        MessageBody::InvocationResult { id, result, .. } => {
            json!({"role": "tool", "parts": [{"type": "tool_call_response", "id": id, "response": result}]})
        }
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `text` cut to [`MAX_CONTENT_BYTES`] on a character boundary, marked when cut.
fn cut(text: &str) -> String {
    if text.len() <= MAX_CONTENT_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_CONTENT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [cut at {MAX_CONTENT_BYTES} bytes]", &text[..end])
}

fn nanos(at: DateTime<Utc>) -> u64 {
    at.timestamp_nanos_opt().unwrap_or(0).max(0) as u64
}

fn string(s: &str) -> AnyValue {
    AnyValue { value: Some(any_value::Value::StringValue(s.to_owned())) }
}

fn bool_value(b: bool) -> AnyValue {
    AnyValue { value: Some(any_value::Value::BoolValue(b)) }
}

pub(crate) fn kv(key: &str, value: &str) -> KeyValue {
    kv_value(key, string(value))
}

fn kv_value(key: &str, value: AnyValue) -> KeyValue {
    KeyValue { key: key.to_owned(), value: Some(value), ..Default::default() }
}

fn kv_int(key: &str, value: u64) -> KeyValue {
    kv_value(key, AnyValue { value: Some(any_value::Value::IntValue(value.min(i64::MAX as u64) as i64)) })
}

fn ok() -> Status {
    Status { code: status::StatusCode::Ok as i32, message: String::new() }
}

fn error(message: &str) -> Status {
    Status { code: status::StatusCode::Error as i32, message: cut(message) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_per_run_part_and_distinct_across_them() {
        assert_eq!(trace_id("r1"), trace_id("r1"));
        assert_eq!(trace_id("r1").len(), 16);
        assert_ne!(trace_id("r1"), trace_id("r2"));
        let parts = [span_id("r1", "run"), span_id("r1", "s0"), span_id("r1", "call:c1"), span_id("r2", "run")];
        assert!(parts.iter().all(|id| id.len() == 8));
        let distinct: std::collections::BTreeSet<_> = parts.iter().collect();
        assert_eq!(distinct.len(), parts.len());
        // Parts are length-prefixed: ("ab", "c") and ("a", "bc") differ.
        assert_ne!(span_id("ab", "c"), span_id("a", "bc"));
    }

    #[test]
    fn providers_come_from_model_names() {
        assert_eq!(provider_and_model("openai/gpt-4o-mini"), ("openai", "gpt-4o-mini"));
        assert_eq!(provider_and_model("builtin"), ("runlens", "builtin"));
        assert_eq!(provider_and_model("local/org/model"), ("local", "org/model"));
    }

    #[test]
    fn long_contents_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_CONTENT_BYTES);
        let out = cut(&long);
        assert!(out.len() < MAX_CONTENT_BYTES + 40 && out.ends_with("bytes]"));
        assert_eq!(cut("short"), "short");
    }
}
