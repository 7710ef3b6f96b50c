//! A trace's run, derived from all of its stored spans (see the module docs
//! of `otel::ingest`): a pure function of the set of spans, so batching and
//! arrival order never change the result; `fold` gets the same run span by
//! span, `unit` derives one step, `finish` the run's row and transcript.
//!
//! - agent spans (`openinference.span.kind = AGENT`, `gen_ai.operation.name`
//!   `invoke_agent` / `create_agent`, or an AI SDK call such as
//!   `ai.generateText`): the top-most one is the run (its name, times and
//!   status); without one, the trace's root span is;
//! - model spans (`LLM`, `chat` / `text_completion` / `generate_content`, or
//!   the AI SDK's `….doGenerate` / `….doStream`): one step each, in start
//!   order, with model, usage, timings and answer;
//! - tool spans (`TOOL`, `execute_tool`, or `ai.toolCall`): tool calls on the step of the
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

use chrono::{DateTime, Utc};

use super::captured::text;
use crate::model::{SpanEventNode, SpanNode};
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
pub(super) enum Role {
    Agent,
    Model,
    Tool,
    Other,
}

pub(super) fn role(s: &StoredSpan) -> Role {
    if let Some(op) = text(s, a::AI_OPERATION_ID) {
        return ai_role(op);
    }
    let oi = text(s, a::OPENINFERENCE_SPAN_KIND).map(str::to_ascii_uppercase);
    let op = text(s, a::GEN_AI_OPERATION_NAME);
    match (oi.as_deref(), op) {
        (Some("AGENT"), _) | (_, Some("invoke_agent" | "create_agent" | "agent.run")) => Role::Agent,
        (Some("LLM"), _) if prepares_a_request(s) => Role::Other,
        (Some("LLM"), _) | (_, Some("chat" | "text_completion" | "generate_content")) => Role::Model,
        (Some("TOOL"), _) | (_, Some("execute_tool" | "tool.execute")) => Role::Tool,
        _ => Role::Other,
    }
}

/// An OpenInference `LLM` span that only built a request: no messages or
/// tokens recorded, and its output is the request (`{"messages": …}`).
/// LlamaIndex records one (`…_prepare_chat_with_tools`) before each model
/// call; it is no model call of its own.
fn prepares_a_request(s: &StoredSpan) -> bool {
    let recorded = |prefix: &str| s.attributes.keys().any(|k| k.starts_with(prefix));
    if recorded("llm.input_messages.") || recorded("llm.output_messages.") || recorded("llm.token_count.") {
        return false;
    }
    let output = text(s, a::OUTPUT_VALUE).and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok());
    output.is_some_and(|v| v.get("messages").is_some_and(serde_json::Value::is_array))
}

/// The role of an AI SDK span by its `ai.operationId`: a whole call
/// (`ai.generateText`, `ai.streamText`, `ai.generateObject`,
/// `ai.streamObject`) is the agent; each model request of it
/// (`….doGenerate`, `….doStream`) a model span; `ai.toolCall` a tool span;
/// embeddings and anything newer other spans.
fn ai_role(op: &str) -> Role {
    match op {
        "ai.toolCall" => Role::Tool,
        "ai.generateText" | "ai.streamText" | "ai.generateObject" | "ai.streamObject" => Role::Agent,
        op if op.ends_with(".doGenerate") || op.ends_with(".doStream") => Role::Model,
        _ => Role::Other,
    }
}

/// Unix nanoseconds as the millisecond times the store keeps.
pub(super) fn time(ns: i64) -> DateTime<Utc> {
    crate::store::from_ms(ns.div_euclid(1_000_000))
}

/// The run of a trace, from every stored span of it (`None` when no span
/// is an agent, model or tool span: the trace is kept, but is no run): the
/// spans folded at once into an empty [`Assembly`](super::Assembly), which
/// gives the same run however they are folded in.
pub fn derive(project: &str, spans: &[StoredSpan]) -> Option<DerivedRun> {
    let trace_id = spans.first()?.trace_id.clone();
    let mut assembly = super::Assembly::new(project, &trace_id);
    assembly.add(spans);
    assembly.derived()
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
