//! AG-UI (the Agent–User Interaction protocol, 1.0): the wire types of
//! `POST /api/agui` and what they become in runlens.
//!
//! A [`RunAgentInput`] names a *thread* (`threadId`): in runlens the thread
//! is one run, whose id is the thread id (it must be a valid run id). The
//! first request of a thread creates the run from its messages
//! ([`Conversation`]); a later one continues it: a follow-up message on a
//! `done` run, or the decisions of [`ResumeEntry`]s on a `paused` one. What
//! the run does streams back as AG-UI events ([`events`]).
//!
//! These are web-protocol types, so they live in the server, not the engine.
//! The objects are open, as AG-UI's are: unknown properties are ignored.

pub mod events;
pub mod schema;
mod transcript;

pub use transcript::{conversation, last_user_text, run_context, Conversation};

use runlens_engine::model::limits::{self, MAX_CONTEXT_BYTES, MAX_ID_CHARS, MAX_TOOL_NAMES};
use runlens_engine::model::DecisionRequest;
use serde::Deserialize;
use serde_json::Value;

/// Messages one request may carry (the whole thread, as AG-UI clients send it).
pub const MAX_MESSAGES: usize = 10_000;
/// Resume entries one request may carry.
pub const MAX_RESUME_ENTRIES: usize = MAX_TOOL_NAMES;
/// Context entries one request may carry.
pub const MAX_CONTEXT_ENTRIES: usize = 100;

/// The body of `POST /api/agui`: AG-UI's `RunAgentInput`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    /// The thread: the id of the run it continues, or of the run it creates.
    pub thread_id: String,
    /// The client's id of this request's run, echoed on `RUN_STARTED` and `RUN_FINISHED`.
    pub run_id: String,
    pub messages: Vec<InputMessage>,
    #[serde(default)]
    pub tools: Vec<InputTool>,
    #[serde(default)]
    pub context: Vec<ContextEntry>,
    /// Any JSON: kept in the run's `context` as `ag_ui.state`.
    #[serde(default)]
    pub state: Option<Value>,
    #[serde(default)]
    pub resume: Option<Vec<ResumeEntry>>,
}

/// One message of the thread, by `role`.
#[derive(Debug, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum InputMessage {
    Developer {
        id: String,
        content: String,
    },
    System {
        id: String,
        content: String,
    },
    Assistant {
        id: String,
        #[serde(default)]
        content: Option<String>,
        #[serde(default, rename = "toolCalls")]
        tool_calls: Option<Vec<InputToolCall>>,
    },
    User {
        id: String,
        content: Content,
    },
    Tool {
        id: String,
        content: Content,
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        #[serde(default)]
        error: Option<String>,
    },
    Activity {
        id: String,
    },
    Reasoning {
        id: String,
    },
}

/// A message's content: a text, or parts of which the text ones are read.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// One part of a message's content (`text`, `image`, `audio`, `video`, `document`).
#[derive(Debug, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

impl Content {
    /// The text parts, joined by blank lines (other parts are not read).
    pub fn text(&self) -> String {
        match self {
            Content::Text(t) => t.clone(),
            Content::Parts(parts) => parts
                .iter()
                .filter(|p| p.kind == "text")
                .filter_map(|p| p.text.as_deref())
                .collect::<Vec<_>>()
                .join("\n\n"),
        }
    }
}

/// A call an assistant message made.
#[derive(Debug, Deserialize)]
pub struct InputToolCall {
    pub id: String,
    pub function: FunctionCall,
}

/// The name and arguments (JSON text) of a tool call.
#[derive(Debug, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    pub arguments: String,
}

/// A tool the client offers. Those named like a runlens tool the project can
/// call are attached to a new run; the others (front-end tools) are not
/// supported and left out.
#[derive(Debug, Deserialize)]
pub struct InputTool {
    pub name: String,
}

/// Ambient information for the agent.
#[derive(Debug, Deserialize, serde::Serialize)]
pub struct ContextEntry {
    pub description: String,
    pub value: String,
}

/// The answer to one interrupt: a decision on a call awaiting approval.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeEntry {
    /// The interrupt's id: the id of the tool call it asked about.
    pub interrupt_id: String,
    /// `resolved` (the payload is the decision) or `cancelled` (a rejection).
    pub status: ResumeStatus,
    #[serde(default)]
    pub payload: Option<Value>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResumeStatus {
    Resolved,
    Cancelled,
}

/// A decision a resume entry carries.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionPayload {
    approved: bool,
    #[serde(default)]
    always: bool,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default)]
    comment: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

/// What a resume entry decides.
#[derive(Debug)]
pub struct Decision {
    pub call_id: String,
    pub approve: bool,
    pub request: DecisionRequest,
}

/// What the reason of a rejection says when a client abandoned an interrupt.
pub const CANCELLED_REASON: &str = "the person cancelled the approval request";

impl ResumeEntry {
    /// The decision this entry carries, checked (see the module docs of
    /// `routes::agui` for the payload's shape).
    fn decision(&self, i: usize) -> Result<Decision, String> {
        let call_id = self.interrupt_id.clone();
        if self.status == ResumeStatus::Cancelled {
            let request = DecisionRequest { reason: Some(CANCELLED_REASON.into()), ..DecisionRequest::default() };
            return Ok(Decision { call_id, approve: false, request });
        }
        let payload = match &self.payload {
            Some(Value::Bool(approved)) => {
                DecisionPayload { approved: *approved, always: false, arguments: None, comment: None, reason: None }
            }
            Some(v @ Value::Object(_)) => serde_json::from_value(v.clone())
                .map_err(|e| format!("resume[{i}].payload: {e} (expected {{\"approved\": true|false, …}})"))?,
            _ => {
                return Err(format!(
                    "resume[{i}].payload: a resolved entry carries the decision: true, false or {{\"approved\": …}}"
                ))
            }
        };
        if payload.arguments.as_ref().is_some_and(|a| !a.is_object()) {
            return Err(format!("resume[{i}].payload.arguments must be a JSON object"));
        }
        if payload.approved && payload.reason.is_some() {
            return Err(format!("resume[{i}].payload: `reason` is for rejections; an approval takes `comment`"));
        }
        if !payload.approved && (payload.arguments.is_some() || payload.comment.is_some()) {
            return Err(format!("resume[{i}].payload: `arguments` and `comment` are for approvals"));
        }
        let request = DecisionRequest {
            always: payload.always,
            arguments: payload.arguments,
            comment: payload.comment,
            reason: payload.reason,
        };
        request.check_bounds().map_err(|e| format!("resume[{i}].payload.{e}"))?;
        Ok(Decision { call_id, approve: payload.approved, request })
    }
}

/// A request's checked parts.
#[derive(Debug)]
pub struct Checked {
    pub input: RunAgentInput,
    /// The decisions of `resume` (empty without one).
    pub decisions: Vec<Decision>,
}

/// Checks the bounds and shapes no type says (400 naming the field).
pub fn check(input: RunAgentInput) -> Result<Checked, String> {
    if let Some(problem) = limits::run_id_problem(&input.thread_id) {
        return Err(format!("threadId (the run's id) {problem}"));
    }
    if input.run_id.is_empty() || input.run_id.chars().nth(MAX_ID_CHARS).is_some() {
        return Err(format!("runId must be 1-{MAX_ID_CHARS} characters"));
    }
    if input.messages.len() > MAX_MESSAGES {
        return Err(format!("messages: {} messages; the limit is {MAX_MESSAGES}", input.messages.len()));
    }
    if input.tools.len() > MAX_TOOL_NAMES {
        return Err(format!("tools: {} tools; the limit is {MAX_TOOL_NAMES}", input.tools.len()));
    }
    if input.context.len() > MAX_CONTEXT_ENTRIES {
        return Err(format!("context: {} entries; the limit is {MAX_CONTEXT_ENTRIES}", input.context.len()));
    }
    let resume = input.resume.as_deref().unwrap_or_default();
    if resume.len() > MAX_RESUME_ENTRIES {
        return Err(format!("resume: {} entries; the limit is {MAX_RESUME_ENTRIES}", resume.len()));
    }
    let mut decisions = Vec::with_capacity(resume.len());
    for (i, entry) in resume.iter().enumerate() {
        if entry.interrupt_id.is_empty() || entry.interrupt_id.chars().nth(MAX_ID_CHARS).is_some() {
            return Err(format!("resume[{i}].interruptId must be 1-{MAX_ID_CHARS} characters"));
        }
        if decisions.iter().any(|d: &Decision| d.call_id == entry.interrupt_id) {
            return Err(format!("resume[{i}].interruptId: `{}` is answered twice", entry.interrupt_id));
        }
        decisions.push(entry.decision(i)?);
    }
    if run_context(&input).is_some_and(|c| limits::json_size(&c) > MAX_CONTEXT_BYTES) {
        return Err(format!("context and state together are over {MAX_CONTEXT_BYTES} bytes of JSON"));
    }
    Ok(Checked { input, decisions })
}

#[cfg(test)]
mod tests {
    use super::*;
    use runlens_engine::model::MessageBody;
    use serde_json::json;

    fn input(body: Value) -> RunAgentInput {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn a_thread_becomes_a_transcript_with_only_answered_calls() {
        let body = json!({
            "threadId": "t-1", "runId": "r-1",
            "messages": [
                {"id": "s", "role": "system", "content": "Be brief."},
                {"id": "1", "role": "user", "content": "What is 2+2?"},
                {"id": "2", "role": "assistant", "content": "", "toolCalls": [
                    {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": "{\"expression\":\"2+2\"}"}},
                    {"id": "c2", "type": "function", "function": {"name": "ui_only", "arguments": "{}"}}
                ]},
                {"id": "3", "role": "tool", "toolCallId": "c1", "content": "4"},
                {"id": "4", "role": "assistant", "content": "4"},
                {"id": "5", "role": "user", "content": [{"type": "text", "text": "And times 3?"}, {"type": "image", "source": {"type": "url", "value": "x"}}]}
            ],
            "context": [{"description": "city", "value": "Oslo"}]
        });
        let c = conversation(&input(body)).unwrap();
        assert_eq!(c.prompt, "And times 3?");
        assert_eq!(c.system_prompt.as_deref(), Some("Be brief.\n\nContext:\n- city: Oslo"));
        let kinds: Vec<&str> = c.items.iter().map(MessageBody::kind).collect();
        assert_eq!(kinds, ["human", "agent", "invocation-result", "agent"]);
        let MessageBody::Agent { invocations, .. } = &c.items[1] else { panic!() };
        assert_eq!(invocations.len(), 1);
        assert_eq!(invocations[0].input, json!({"expression": "2+2"}));
    }

    #[test]
    fn the_last_message_must_be_the_users() {
        let body =
            json!({"threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "assistant", "content": "hi"}]});
        assert!(conversation(&input(body)).unwrap_err().starts_with("messages[0]: the last message"));
        let body = json!({"threadId": "t", "runId": "r", "messages": []});
        assert!(conversation(&input(body)).unwrap_err().starts_with("messages: "));
    }

    #[test]
    fn resume_entries_carry_decisions() {
        let body = json!({"threadId": "t", "runId": "r", "messages": [], "resume": [
            {"interruptId": "a", "status": "resolved", "payload": true},
            {"interruptId": "b", "status": "resolved", "payload": {"approved": false, "reason": "no"}},
            {"interruptId": "c", "status": "cancelled"},
        ]});
        let checked = check(input(body)).unwrap();
        let got: Vec<(&str, bool)> = checked.decisions.iter().map(|d| (d.call_id.as_str(), d.approve)).collect();
        assert_eq!(got, [("a", true), ("b", false), ("c", false)]);
        assert_eq!(checked.decisions[1].request.reason.as_deref(), Some("no"));
        assert_eq!(checked.decisions[2].request.reason.as_deref(), Some(CANCELLED_REASON));
        for bad in [json!(null), json!("yes"), json!({"approved": true, "reason": "x"}), json!({"approve": true})] {
            let body = json!({"threadId": "t", "runId": "r", "messages": [],
                "resume": [{"interruptId": "a", "status": "resolved", "payload": bad}]});
            assert!(check(input(body)).unwrap_err().starts_with("resume[0].payload"));
        }
        let body = json!({"threadId": "import", "runId": "r", "messages": []});
        assert!(check(input(body)).unwrap_err().starts_with("threadId"));
    }
}
