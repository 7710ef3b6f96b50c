//! The run of an [`Assembly`]: its row and transcript from the steps as
//! derived and the spans that are no steps (the run's own span, the root),
//! and what of them changed since the store last took them.

use super::assemble::{time, PROMPT_NOT_CAPTURED};
use super::captured::{error_of, failed, first_text, model_of, text};
use super::fold::Assembly;
use crate::model::{Message, MessageBody, Metadata, Run, RunSource, RunStatus, SOURCE_OTLP};
use crate::otel::attrs as a;
use crate::store::{DerivedRun, RunChange, StoredSpan};

/// What the store holds of the transcript's start: whether a prompt was
/// put before the steps' entries (no step had a human turn), and the
/// first entry.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Shown {
    offset: usize,
    head: Option<Message>,
}

impl Assembly {
    fn span(&self, key: Option<&(i64, String)>) -> Option<&StoredSpan> {
        key.and_then(|k| self.spans.get(&k.1)).map(|(s, _)| s)
    }

    /// The top-most agent span (one without an agent span above it), when
    /// there is one: several (LangGraph's `agent` node, a span each time the
    /// graph runs it) are parts of one run, the trace's.
    fn top_agent(&self) -> Option<&StoredSpan> {
        let has_agent_above = |s: &StoredSpan| {
            let mut parent = s.parent_span_id.as_deref();
            for _ in 0..self.spans.len() {
                let Some((p, r)) = parent.and_then(|p| self.spans.get(p)) else { return false };
                if *r == super::assemble::Role::Agent {
                    return true;
                }
                parent = p.parent_span_id.as_deref();
            }
            false
        };
        let mut tops = self.agents.iter().filter_map(|k| self.span(Some(k))).filter(|s| !has_agent_above(s));
        let top = tops.next();
        match tops.next() {
            None => top,
            Some(_) => None,
        }
    }

    /// Transcript entry 0.
    fn head(&self, offset: usize, anchor_input: Option<&str>) -> Option<Message> {
        let run_id = super::run_id_for(&self.project, &self.trace_id);
        let (created_at, step_index, body) = if offset == 1 {
            let first = self.span(self.order.first())?;
            let prompt = anchor_input.unwrap_or(PROMPT_NOT_CAPTURED).to_owned();
            (time(first.start_ns), None, MessageBody::Human { message: prompt })
        } else {
            let (at, step, body) = self.outs.first()?.unit.bodies.first()?.clone();
            let body = match (body, anchor_input) {
                (MessageBody::Human { message }, Some(input)) if message == PROMPT_NOT_CAPTURED => {
                    MessageBody::Human { message: input.to_owned() }
                }
                (body, _) => body,
            };
            (at, step, body)
        };
        Some(Message { id: format!("{run_id}-m0"), run_id, seq: 0, step_index, created_at, body })
    }

    /// The transcript entries from those of step `from` on (with the
    /// prompt put first when `from` is 0 and `offset` 1).
    fn messages(&self, from: usize, offset: usize, head: Option<&Message>) -> Vec<Message> {
        let run_id = super::run_id_for(&self.project, &self.trace_id);
        let mut out = Vec::new();
        if from == 0 && offset == 1 {
            out.extend(head.cloned());
        }
        let mut seq = offset + from.checked_sub(1).map_or(0, |i| self.outs[i].acc.messages);
        for o in &self.outs[from..] {
            for (created_at, step_index, body) in &o.unit.bodies {
                match head.filter(|_| seq == 0) {
                    Some(h) => out.push(h.clone()),
                    None => out.push(Message {
                        id: format!("{run_id}-m{seq}"),
                        run_id: run_id.clone(),
                        seq: seq as u64,
                        step_index: *step_index,
                        created_at: *created_at,
                        body: body.clone(),
                    }),
                }
                seq += 1;
            }
        }
        out
    }

    /// What changed in the run since the store last took it, the steps
    /// from `from` on derived again (`None`: the trace is no run).
    pub(super) fn change(&mut self, from: usize) -> Option<RunChange> {
        if self.runnable == 0 {
            self.shown = None;
            return None;
        }
        let anchor_input = self.anchor().and_then(|s| text(s, a::INPUT_VALUE)).map(str::to_owned);
        let offset = usize::from(self.outs.last().and_then(|o| o.acc.first_human).is_none());
        let head = self.head(offset, anchor_input.as_deref());
        let from = match &self.shown {
            Some(shown) if shown.offset == offset => from,
            _ => 0,
        };
        let from_seq = if from == 0 { 0 } else { offset + self.outs[from - 1].acc.messages };
        let head_changed = from_seq > 0 && self.shown.as_ref().map(|s| &s.head) != Some(&head);
        let messages = self.messages(from, offset, head.as_ref());
        let run = self.run(head.as_ref());
        self.shown = Some(Shown { offset, head: head.clone() });
        Some(RunChange {
            run,
            from_step: from as u32,
            steps: self.outs[from..].iter().map(|o| o.unit.step.clone()).collect(),
            from_seq: from_seq as u64,
            messages,
            head: if head_changed { head } else { None },
        })
    }

    /// The whole run as derived (`None`: the trace is no run).
    pub(super) fn derived(&mut self) -> Option<DerivedRun> {
        self.shown = None;
        let change = self.change(0)?;
        Some(DerivedRun { run: change.run, steps: change.steps, messages: change.messages })
    }

    /// The run's own span: the top-most agent span, else the trace's root.
    fn anchor(&self) -> Option<&StoredSpan> {
        self.top_agent().or_else(|| self.span(self.roots.first()))
    }

    /// The run's row.
    fn run(&self, head: Option<&Message>) -> Run {
        let anchor = self.anchor();
        let root = self.span(self.roots.first());
        let first = self.span(self.order.first());
        let created = first.map_or(0, |s| s.start_ns);
        let ended = self.ends.last().map_or(created, |k| k.0);
        let acc = self.outs.last().map(|o| o.acc.clone()).unwrap_or_default();
        let initial_prompt = match head.map(|h| &h.body) {
            Some(MessageBody::Human { message }) => Some(message.clone()),
            _ => acc.first_human.and_then(|i| {
                self.outs[i].unit.bodies.iter().find_map(|(_, _, b)| match b {
                    MessageBody::Human { message } => Some(message.clone()),
                    _ => None,
                })
            }),
        };
        let summary = acc
            .summary
            .and_then(|i| self.outs[i].unit.summary.clone())
            .or_else(|| anchor.and_then(|s| text(s, a::OUTPUT_VALUE)).map(str::to_owned));
        let failure = anchor.filter(|s| failed(s)).or(root.filter(|s| failed(s))).map(|s| error_of(s, "span"));
        let status = match (root, &failure) {
            (None, _) => RunStatus::Running,
            (Some(_), Some(_)) => RunStatus::Failed,
            (Some(_), None) => RunStatus::Done,
        };
        let trace_id = self.trace_id.clone();
        let name = anchor
            .map(|s| {
                first_text(
                    s,
                    &[a::GEN_AI_AGENT_NAME, "agent.name", a::AI_TELEMETRY_FUNCTION_ID, "graph.node.id", "agent.id"],
                )
                .unwrap_or(&s.name)
                .to_owned()
            })
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| format!("trace {}", &trace_id[..8.min(trace_id.len())]));
        let service = anchor
            .and_then(|s| s.service_name.clone())
            .or_else(|| self.span(self.serviced.first()).and_then(|s| s.service_name.clone()));
        let model = acc
            .last_model
            .and_then(|i| self.outs[i].unit.model.clone())
            .or_else(|| anchor.and_then(model_of).map(str::to_owned))
            .unwrap_or_else(|| "unknown".to_owned());
        let steps = self.outs.len() as u32;
        // What a placeholder of this trace holds, with what the spans say.
        let shown_before = super::placeholder(&self.project, &trace_id, &name, time(created));
        let mut run = Run {
            status,
            model,
            system_prompt: self.system.as_ref().map(|(_, p)| p.clone()),
            initial_prompt: initial_prompt.unwrap_or_default(),
            tools: self.tool_first.iter().map(|(n, _)| n.clone()).collect(),
            max_turns: steps.max(1),
            source: Some(RunSource { kind: SOURCE_OTLP.into(), service, trace_id }),
            summary: if status == RunStatus::Running { None } else { summary },
            failure_reason: if status == RunStatus::Failed { failure } else { None },
            usage: acc.usage,
            step_count: steps,
            updated_at: time(ended),
            metadata: trace_metadata([anchor, root].into_iter().flatten()),
            session_id: first_id([anchor, root].into_iter().flatten(), &SESSION_KEYS),
            end_user: first_id([anchor, root].into_iter().flatten(), &USER_KEYS),
            tool_answers: None,
            experiment: None,
            started_at: Some(time(anchor.map_or(created, |s| s.start_ns))),
            finished_at: status.is_terminal().then(|| time(anchor.map_or(ended, |s| s.end_ns))),
            ..shown_before
        };
        run.output = run.output_union();
        run
    }
}

/// Metadata keys a run takes from its spans at most.
const MAX_SPAN_METADATA: usize = 32;

/// A metadata key taken from a span at most (bytes).
const MAX_SPAN_METADATA_KEY: usize = 64;

/// A metadata value taken from a span at most (bytes of text): with the
/// bounds above, well under the 16 KiB a run's metadata may hold.
const MAX_SPAN_METADATA_VALUE: usize = 256;

/// What names a run's session: OpenInference's `session.id`, GenAI's
/// `gen_ai.conversation.id`, the AI SDK's `sessionId` metadata, Mastra's
/// `threadId`.
const SESSION_KEYS: [&str; 4] = [a::SESSION_ID, a::GEN_AI_CONVERSATION_ID, AI_SESSION, "threadId"];

/// What names a run's end user: `user.id`, `enduser.id`, the AI SDK's
/// `userId` metadata, Mastra's `resourceId`.
const USER_KEYS: [&str; 4] = ["user.id", "enduser.id", AI_USER, "resourceId"];

/// The AI SDK's metadata keys that name the conversation and the end user.
const AI_SESSION: &str = "ai.telemetry.metadata.sessionId";
const AI_USER: &str = "ai.telemetry.metadata.userId";

/// The first of `keys` the run's own span, then the trace's root, recorded
/// as a session id or an end user's id: text (or a number) of 1-128
/// characters without control characters.
fn first_id<'s>(mut spans: impl Iterator<Item = &'s StoredSpan>, keys: &[&str]) -> Option<String> {
    spans.find_map(|s| {
        keys.iter().find_map(|k| {
            let id = match s.attributes.get(*k)? {
                serde_json::Value::String(t) => t.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                _ => return None,
            };
            crate::model::limits::check_session_id(k, &id).is_ok().then_some(id)
        })
    })
}

/// The metadata the instrumentation attached to the run's own span and the
/// trace's root (in that order; the first to say wins): the AI SDK's
/// `ai.telemetry.metadata.*` (but its `sessionId` and `userId`, which are
/// the run's session and end user) and OpenInference's `metadata` object
/// (such as LangGraph's `thread_id`): text, number and boolean values, 32
/// keys at most.
fn trace_metadata<'s>(spans: impl Iterator<Item = &'s StoredSpan>) -> Metadata {
    let mut out = Metadata::new();
    for s in spans {
        for (k, v) in &s.attributes {
            if let Some(key) = k.strip_prefix("ai.telemetry.metadata.").filter(|_| k != AI_SESSION && k != AI_USER) {
                put_metadata(&mut out, key, v);
            }
        }
        let attached = s.attributes.get("metadata").and_then(|v| match v {
            serde_json::Value::String(t) => serde_json::from_str::<Metadata>(t).ok(),
            serde_json::Value::Object(o) => Some(o.clone()),
            _ => None,
        });
        for (k, v) in attached.iter().flatten() {
            put_metadata(&mut out, k, v);
        }
    }
    out
}

/// Puts `key` in `out` unless it is there already, or it or its value is
/// past the bounds above, or the value is no text, number or boolean.
fn put_metadata(out: &mut Metadata, key: &str, value: &serde_json::Value) {
    let fits = match value {
        serde_json::Value::String(t) => !t.is_empty() && t.len() <= MAX_SPAN_METADATA_VALUE,
        serde_json::Value::Number(_) | serde_json::Value::Bool(_) => true,
        _ => false,
    };
    if fits && key.len() <= MAX_SPAN_METADATA_KEY && out.len() < MAX_SPAN_METADATA && !out.contains_key(key) {
        out.insert(key.to_owned(), value.clone());
    }
}
