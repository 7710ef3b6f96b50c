//! A run's events as AG-UI events.
//!
//! [`Translator`] reads the run's own events in order ([`EventKind`]) and
//! writes the AG-UI events they mean, keeping what AG-UI requires balanced:
//! every text message, tool call and step it opens is closed before the run
//! ends, and nothing is closed that it did not open (a stream that joins a
//! step half-way, after a resume, finishes only what it started).
//!
//! | runlens | AG-UI |
//! |---|---|
//! | (the request) | `RUN_STARTED` |
//! | `step.started` | `STEP_STARTED` (`stepName` `turn N`, N the step index) |
//! | `message.delta` | `TEXT_MESSAGE_START` (first), `TEXT_MESSAGE_CONTENT` |
//! | `item` of the model's message | `TEXT_MESSAGE_END` (or the whole text, when it did not stream), then `TOOL_CALL_START`/`ARGS`/`END` per call |
//! | `item` of a tool's result | `TOOL_CALL_RESULT` (an error's text when the call failed or was rejected) |
//! | `step.completed` of a finished step | `STEP_FINISHED` |
//! | `run.status` → `paused` | `RUN_FINISHED` with the interrupt outcome: one interrupt per call awaiting a decision |
//! | `run.finished` `done` | `RUN_FINISHED` (success, `result` the run's result) |
//! | `run.finished` `cancelled` | `RUN_FINISHED` with the cancelled outcome |
//! | `run.finished` `failed` | `RUN_ERROR` (`message` the failure reason) |
//!
//! The assistant message of step N has the id `<run id>:s<N>` (the step's
//! id), so its text and its tool calls are one message to the client.

use std::collections::{BTreeSet, HashSet};

use runlens_engine::model::{EventKind, Interruption, Message, MessageBody, ResultType, RunStatus, StepStatus};
use serde_json::{json, Value};

/// The `reason` of an interrupt asking for a tool call's approval.
pub const APPROVAL_REASON: &str = "tool_approval";

/// What an event leads to.
#[derive(Debug, PartialEq)]
pub enum Next {
    /// Go on reading the run's events.
    Continue,
    /// The run paused: end with [`Translator::interrupted`] if it still
    /// awaits decisions.
    Paused,
    /// The run failed: end with [`Translator::failed`] and its reason.
    Failed,
    /// The stream is over (the events include the closing one).
    End,
}

/// Translates one run's events for one AG-UI run (see the module docs).
pub struct Translator {
    thread_id: String,
    run_id: String,
    /// The step whose text message is open.
    open_text: Option<u32>,
    /// Steps whose text streamed (their message item does not repeat it).
    streamed: HashSet<u32>,
    open_steps: BTreeSet<u32>,
    /// Calls whose `TOOL_CALL_START` was sent.
    started_calls: HashSet<String>,
}

impl Translator {
    /// `thread_id`: the run's id; `run_id`: the client's id of this AG-UI run.
    pub fn new(thread_id: &str, run_id: &str) -> Self {
        Translator {
            thread_id: thread_id.to_owned(),
            run_id: run_id.to_owned(),
            open_text: None,
            streamed: HashSet::new(),
            open_steps: BTreeSet::new(),
            started_calls: HashSet::new(),
        }
    }

    /// The id of step `index`'s assistant message.
    pub fn message_id(&self, index: u32) -> String {
        format!("{}:s{index}", self.thread_id)
    }

    /// `RUN_STARTED`, the stream's first event.
    pub fn started(&self) -> Value {
        json!({ "type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id })
    }

    /// The AG-UI events `kind` means, appended to `out`, and what follows.
    pub fn event(&mut self, kind: &EventKind, out: &mut Vec<Value>) -> Next {
        match kind {
            EventKind::StepStarted { index } => {
                self.close_text(out);
                if self.open_steps.insert(*index) {
                    out.push(json!({ "type": "STEP_STARTED", "stepName": step_name(*index) }));
                }
            }
            EventKind::MessageDelta { step_index, text } => self.delta(*step_index, text, out),
            EventKind::Item { message } => self.item(message, out),
            EventKind::StepCompleted { step } if step.status != StepStatus::Running => {
                if self.open_text == Some(step.index) {
                    self.close_text(out);
                }
                if self.open_steps.remove(&step.index) {
                    out.push(json!({ "type": "STEP_FINISHED", "stepName": step_name(step.index) }));
                }
            }
            EventKind::RunStatus { new: RunStatus::Paused, .. } => return Next::Paused,
            EventKind::RunFinished { status: RunStatus::Done, result, .. } => {
                self.close_all(out);
                let mut finished = self.finished(json!({ "type": "success" }));
                if let Some(result) = result.as_ref().filter(|r| !r.is_null()) {
                    finished["result"] = result.clone();
                }
                out.push(finished);
                return Next::End;
            }
            EventKind::RunFinished { status: RunStatus::Cancelled, .. } => {
                self.close_all(out);
                out.push(self.finished(json!({ "type": "cancelled" })));
                return Next::End;
            }
            EventKind::RunFinished { .. } => return Next::Failed,
            _ => {}
        }
        Next::Continue
    }

    /// Streamed text of step `index`'s answer.
    fn delta(&mut self, index: u32, text: &str, out: &mut Vec<Value>) {
        if text.is_empty() {
            return;
        }
        if self.open_text != Some(index) {
            self.close_text(out);
            out.push(json!({
                "type": "TEXT_MESSAGE_START", "messageId": self.message_id(index), "role": "assistant",
            }));
            self.open_text = Some(index);
            self.streamed.insert(index);
        }
        out.push(json!({
            "type": "TEXT_MESSAGE_CONTENT", "messageId": self.message_id(index), "delta": text,
        }));
    }

    /// A transcript item: the model's answer (its text when it was not
    /// streamed, and its tool calls) or a tool's result. Human messages are
    /// the client's own (a follow-up), or the engine's note asking the model
    /// to repair its answer: nothing to send.
    fn item(&mut self, message: &Message, out: &mut Vec<Value>) {
        match (&message.body, message.step_index) {
            (MessageBody::Agent { message: text, invocations, .. }, Some(index)) => {
                let id = self.message_id(index);
                if self.open_text == Some(index) {
                    self.close_text(out);
                } else if let Some(text) = text.as_deref().filter(|t| !t.is_empty() && !self.streamed.contains(&index))
                {
                    self.close_text(out);
                    out.push(json!({ "type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant" }));
                    out.push(json!({ "type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": text }));
                    out.push(json!({ "type": "TEXT_MESSAGE_END", "messageId": id }));
                }
                for call in invocations {
                    if !self.started_calls.insert(call.id.clone()) {
                        continue;
                    }
                    out.push(json!({
                        "type": "TOOL_CALL_START", "toolCallId": call.id, "toolCallName": call.tool_name,
                        "parentMessageId": id,
                    }));
                    out.push(
                        json!({ "type": "TOOL_CALL_ARGS", "toolCallId": call.id, "delta": call.input.to_string() }),
                    );
                    out.push(json!({ "type": "TOOL_CALL_END", "toolCallId": call.id }));
                }
            }
            (MessageBody::InvocationResult { id, result_type, result, .. }, _) => {
                out.push(json!({
                    "type": "TOOL_CALL_RESULT", "messageId": message.id, "toolCallId": id,
                    "content": result_text(*result_type, result), "role": "tool",
                }));
            }
            _ => {}
        }
    }

    /// The end of a paused run: `RUN_FINISHED` with one interrupt per call in
    /// `pending` (none: the run went on, and so does the stream).
    pub fn interrupted(&mut self, pending: &[Interruption], out: &mut Vec<Value>) -> bool {
        if pending.is_empty() {
            return false;
        }
        self.close_all(out);
        let interrupts: Vec<Value> = pending.iter().map(interrupt).collect();
        out.push(self.finished(json!({ "type": "interrupt", "interrupts": interrupts })));
        true
    }

    /// The end of a failed run: `RUN_ERROR` with its reason.
    pub fn failed(&mut self, reason: &str, out: &mut Vec<Value>) {
        self.close_all(out);
        out.push(run_error(reason, "run_failed"));
    }

    fn finished(&self, outcome: Value) -> Value {
        json!({ "type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id, "outcome": outcome })
    }

    fn close_text(&mut self, out: &mut Vec<Value>) {
        if let Some(index) = self.open_text.take() {
            out.push(json!({ "type": "TEXT_MESSAGE_END", "messageId": self.message_id(index) }));
        }
    }

    /// Closes what is open, before the run's last event.
    fn close_all(&mut self, out: &mut Vec<Value>) {
        self.close_text(out);
        for index in std::mem::take(&mut self.open_steps) {
            out.push(json!({ "type": "STEP_FINISHED", "stepName": step_name(index) }));
        }
    }
}

/// `RUN_ERROR`: the run (or the stream) failed.
pub fn run_error(message: &str, code: &str) -> Value {
    json!({ "type": "RUN_ERROR", "message": message, "code": code })
}

fn step_name(index: u32) -> String {
    format!("turn {index}")
}

/// A tool result as the text of `TOOL_CALL_RESULT`: a string as it is, other
/// JSON as its text; for a failed or rejected call, its error.
fn result_text(kind: ResultType, result: &Value) -> String {
    match (kind, result) {
        (ResultType::Rejection, Value::Object(o)) if o.get("error").is_some_and(Value::is_string) => {
            o["error"].as_str().unwrap_or_default().to_owned()
        }
        (_, Value::String(s)) => s.clone(),
        (_, other) => other.to_string(),
    }
}

/// The interrupt asking for a decision on one call: its `id` and
/// `toolCallId` are the call's id; `metadata` names the tool and its
/// arguments.
fn interrupt(call: &Interruption) -> Value {
    let mut interrupt = json!({
        "id": call.call_id,
        "reason": APPROVAL_REASON,
        "message": format!("`{}` needs a person's approval", call.tool_name),
        "toolCallId": call.call_id,
        "responseSchema": response_schema(),
        "metadata": { "runId": call.run_id, "toolName": call.tool_name, "arguments": call.arguments },
    });
    if let Some(deadline) = call.deadline {
        interrupt["expiresAt"] = json!(deadline.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    }
    interrupt
}

/// What a resume entry's `payload` may be: the decision.
pub fn response_schema() -> Value {
    json!({
        "oneOf": [
            { "type": "boolean", "description": "true approves, false rejects" },
            {
                "type": "object",
                "required": ["approved"],
                "additionalProperties": false,
                "properties": {
                    "approved": { "type": "boolean" },
                    "always": { "type": "boolean", "description": "Decide the same for this tool for the rest of the run" },
                    "arguments": { "type": "object", "description": "Approve only: edited arguments" },
                    "comment": { "type": "string", "description": "Approve only: kept in the audit record" },
                    "reason": { "type": "string", "description": "Reject only: what the model is told" },
                },
            },
        ],
    })
}
