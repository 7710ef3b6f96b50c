//! Requests from agents runlens does not run: an approval of a tool call
//! (`POST /api/approval-requests`) or a question for a person
//! (`POST /api/questions`, "human as tool").
//!
//! A request waits in the approvals inbox beside runlens's own calls until a
//! person decides it (approve, with edited arguments or a comment; reject,
//! with a reason) or answers it, or until its timeout rejects it. The agent
//! that asked learns the outcome by long-polling, by an SSE stream or by a
//! signed callback. Both kinds are one [`AgentRequest`]: the fields of the
//! other kind are absent.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::limits::{self, check_chars, check_json, MAX_APPROVAL_TIMEOUT_S, MAX_DECISION_ARGUMENTS_BYTES};
use super::Decision;

/// Characters of a tool name in a request.
pub const MAX_REQUEST_TOOL_CHARS: usize = 200;
/// Characters of an idempotency key.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 200;
/// Characters of a question.
pub const MAX_QUESTION_CHARS: usize = 4000;
/// Choices of a question, and characters of each.
pub const MAX_CHOICES: usize = 20;
pub const MAX_CHOICE_CHARS: usize = 200;
/// Characters of an answer.
pub const MAX_ANSWER_CHARS: usize = 4000;
/// Bytes of a request's context (text or JSON).
pub const MAX_REQUEST_CONTEXT_BYTES: usize = 16 * 1024;
/// Characters of an external run id or name.
pub const MAX_EXTERNAL_RUN_CHARS: usize = 200;
/// The longest a long-poll waits (`?wait=`), in seconds.
pub const MAX_WAIT_S: u64 = 30;
/// What the reason of a request rejected by its timeout says.
pub const TIMED_OUT: &str = "timed out";
/// Prefixes of request ids.
pub const APPROVAL_REQUEST_PREFIX: &str = "apr_";
pub const QUESTION_PREFIX: &str = "q_";

/// An approval of a tool call, or a question.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum RequestKind {
    Approval,
    Question,
}

impl RequestKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestKind::Approval => "approval",
            RequestKind::Question => "question",
        }
    }

    pub fn parse(text: &str) -> Option<RequestKind> {
        match text {
            "approval" => Some(RequestKind::Approval),
            "question" => Some(RequestKind::Question),
            _ => None,
        }
    }

    /// The prefix of this kind's ids.
    pub fn prefix(self) -> &'static str {
        match self {
            RequestKind::Approval => APPROVAL_REQUEST_PREFIX,
            RequestKind::Question => QUESTION_PREFIX,
        }
    }

    /// The kind an id names by its prefix.
    pub fn of_id(id: &str) -> Option<RequestKind> {
        if id.starts_with(APPROVAL_REQUEST_PREFIX) {
            Some(RequestKind::Approval)
        } else if id.starts_with(QUESTION_PREFIX) {
            Some(RequestKind::Question)
        } else {
            None
        }
    }

    /// `approval request` or `question`, for messages.
    pub fn noun(self) -> &'static str {
        match self {
            RequestKind::Approval => "approval request",
            RequestKind::Question => "question",
        }
    }
}

/// Where a request stands: `pending` until decided; an approval ends
/// `approved` or `rejected` (a timeout rejects it with reason "timed out"),
/// a question `answered` or `expired`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum RequestStatus {
    Pending,
    Approved,
    Rejected,
    Answered,
    Expired,
}

impl RequestStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestStatus::Pending => "pending",
            RequestStatus::Approved => "approved",
            RequestStatus::Rejected => "rejected",
            RequestStatus::Answered => "answered",
            RequestStatus::Expired => "expired",
        }
    }

    pub fn parse(text: &str) -> Option<RequestStatus> {
        match text {
            "pending" => Some(RequestStatus::Pending),
            "approved" => Some(RequestStatus::Approved),
            "rejected" => Some(RequestStatus::Rejected),
            "answered" => Some(RequestStatus::Answered),
            "expired" => Some(RequestStatus::Expired),
            _ => None,
        }
    }
}

impl std::fmt::Display for RequestStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The agent's run a request comes from, as the agent names it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExternalRun {
    /// The agent's own id of its run (a conversation, a job), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(max_length = 200))]
    pub external_id: Option<String>,
    /// What the inbox calls it.
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 200, pattern = "\\S"))]
    pub name: String,
    /// The OpenTelemetry trace of the run (32 hex digits): the request is
    /// shown in the run that OTLP ingest builds from that trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::trace_id))]
    pub trace_id: Option<String>,
}

impl ExternalRun {
    fn check(&self) -> Result<(), String> {
        if self.name.trim().is_empty() {
            return Err("run.name must not be empty".into());
        }
        check_chars("run.name", &self.name, MAX_EXTERNAL_RUN_CHARS)?;
        if let Some(id) = &self.external_id {
            check_chars("run.external_id", id, MAX_EXTERNAL_RUN_CHARS)?;
        }
        if let Some(t) = &self.trace_id {
            let hex = t.len() == 32 && t.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
            if !hex || t.bytes().all(|b| b == b'0') {
                return Err("run.trace_id must be 32 lowercase hex digits, not all zero (an OTLP trace id)".into());
            }
        }
        Ok(())
    }
}

/// `POST /api/approval-requests`: an agent asks a person to approve a tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewApprovalRequest {
    /// The tool the agent wants to call.
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 200, pattern = "\\S"))]
    pub tool: String,
    /// Its arguments (a JSON object, at most 64 KiB); the person may edit them.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub arguments: Value,
    /// What the person should know: text or a JSON value (at most 16 KiB).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::request_context))]
    pub context: Option<Value>,
    pub run: ExternalRun,
    /// Rejected with reason "timed out" after this many seconds undecided.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 2592000))]
    pub timeout_s: Option<u64>,
    /// A retry with the same key returns the same request instead of a new one.
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 200))]
    pub idempotency_key: String,
    /// Told of the decision by a signed POST (the project's run webhook secret).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::callback_url))]
    pub callback_url: Option<String>,
}

impl NewApprovalRequest {
    /// Checks every field's size and shape (the callback URL's address is
    /// checked by the engine, with the operator's network settings).
    pub fn check_bounds(&self) -> Result<(), String> {
        if self.tool.trim().is_empty() {
            return Err("tool must not be empty".into());
        }
        check_chars("tool", &self.tool, MAX_REQUEST_TOOL_CHARS)?;
        if !self.arguments.is_object() {
            return Err("arguments must be a JSON object".into());
        }
        check_json("arguments", &self.arguments, MAX_DECISION_ARGUMENTS_BYTES)?;
        check_common(&self.context, &self.run, self.timeout_s, Some(&self.idempotency_key), &self.callback_url)
    }
}

/// `POST /api/questions`: an agent asks a person a question ("human as
/// tool"), answered in free text or by choosing one of `choices`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewQuestion {
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 4000, pattern = "\\S"))]
    pub question: String,
    /// When given, the answer is one of them (2 to 20, distinct).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::choices))]
    pub choices: Option<Vec<String>>,
    /// What the person should know: text or a JSON value (at most 16 KiB).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::request_context))]
    pub context: Option<Value>,
    /// The agent's run that asks; absent: the inbox shows the asking key.
    #[serde(default)]
    pub run: Option<ExternalRun>,
    /// Expires after this many seconds unanswered.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 2592000))]
    pub timeout_s: Option<u64>,
    /// A retry with the same key returns the same question instead of a new one.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 200))]
    pub idempotency_key: Option<String>,
    /// Told of the answer by a signed POST (the project's run webhook secret).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::callback_url))]
    pub callback_url: Option<String>,
}

impl NewQuestion {
    pub fn check_bounds(&self) -> Result<(), String> {
        if self.question.trim().is_empty() {
            return Err("question must not be empty".into());
        }
        check_chars("question", &self.question, MAX_QUESTION_CHARS)?;
        if let Some(choices) = &self.choices {
            if !(2..=MAX_CHOICES).contains(&choices.len()) {
                return Err(format!("choices: give 2 to {MAX_CHOICES}, or none for a free answer"));
            }
            for (i, c) in choices.iter().enumerate() {
                if c.trim().is_empty() {
                    return Err(format!("choices[{i}] must not be empty"));
                }
                check_chars(&format!("choices[{i}]"), c, MAX_CHOICE_CHARS)?;
                if choices[..i].contains(c) {
                    return Err(format!("choices[{i}]: `{c}` is listed twice"));
                }
            }
        }
        let run = self.run.clone().unwrap_or_else(|| ExternalRun { name: "question".into(), ..ExternalRun::default() });
        check_common(&self.context, &run, self.timeout_s, self.idempotency_key.as_ref(), &self.callback_url)
    }
}

fn check_common(
    context: &Option<Value>,
    run: &ExternalRun,
    timeout_s: Option<u64>,
    key: Option<&String>,
    callback_url: &Option<String>,
) -> Result<(), String> {
    if let Some(c) = context {
        check_json("context", c, MAX_REQUEST_CONTEXT_BYTES)?;
    }
    run.check()?;
    if let Some(t) = timeout_s {
        if !(1..=MAX_APPROVAL_TIMEOUT_S).contains(&t) {
            return Err(format!("timeout_s must be between 1 and {MAX_APPROVAL_TIMEOUT_S} seconds (30 days), not {t}"));
        }
    }
    if let Some(k) = key {
        if k.is_empty() {
            return Err("idempotency_key must not be empty".into());
        }
        check_chars("idempotency_key", k, MAX_IDEMPOTENCY_KEY_CHARS)?;
    }
    if let Some(url) = callback_url {
        check_chars("callback_url", url, limits::MAX_WEBHOOK_URL_CHARS)?;
    }
    Ok(())
}

/// How a request ended, who ended it, and what the agent is to do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RequestOutcome {
    /// `approved`, `rejected`, `answered` or `expired`.
    pub outcome: RequestStatus,
    /// Approved: the arguments to call the tool with (the person's edit, if any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub arguments: Option<Value>,
    /// Approved: whether the person edited the arguments.
    #[serde(default)]
    pub edited: bool,
    /// Answered: the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// Rejected or expired: why ("timed out" for a timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// An approval's comment, kept in the audit record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Also decides this tool's later requests from the same agent run (`run.external_id`).
    #[serde(default)]
    pub always: bool,
    /// The name of who decided (`runlens` for a timeout).
    pub decided_by: String,
    /// `user:<id>`, `key:<id>` or `system`.
    pub decided_by_id: String,
    pub decided_at: DateTime<Utc>,
}

/// An approval request or a question, as the agent and the inbox see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentRequest {
    /// `apr_…` (an approval) or `q_…` (a question).
    pub id: String,
    /// The project it was asked in.
    pub project: String,
    pub kind: RequestKind,
    pub status: RequestStatus,
    /// Approval: the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Approval: the arguments as the agent asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub arguments: Option<Value>,
    /// Question: the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// Question: the choices, if the answer is one of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<String>>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::request_context))]
    pub context: Option<Value>,
    pub run: ExternalRun,
    /// The runlens run the request is shown in: the run OTLP ingest builds
    /// from `run.trace_id` (a placeholder until its spans arrive).
    #[serde(default)]
    pub run_id: Option<String>,
    /// The API key (or user) that asked, by name and id.
    pub requested_by: String,
    pub requested_by_id: String,
    pub created_at: DateTime<Utc>,
    /// When it is rejected (or expires) undecided.
    #[serde(default)]
    pub deadline: Option<DateTime<Utc>>,
    #[serde(default)]
    pub callback_url: Option<String>,
    /// Set once decided.
    #[serde(default)]
    pub decision: Option<RequestOutcome>,
}

impl AgentRequest {
    /// The cursor of the page after this one: `<ms>_<id>` by creation time
    /// (pending, oldest first) or decision time (decided, newest first).
    pub fn cursor(&self) -> String {
        let at = match &self.decision {
            Some(d) if self.status != RequestStatus::Pending => d.decided_at,
            _ => self.created_at,
        };
        format!("{}_{}", at.timestamp_millis(), self.id)
    }
}

/// A person's decision on an approval request or answer to a question.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RequestDecision {
    /// Approve: also approve (reject: also reject) this tool's later
    /// requests from the same agent run.
    pub always: bool,
    /// Approve: replaces the arguments (a JSON object).
    pub arguments: Option<Value>,
    /// Approve: a note kept in the audit record.
    pub comment: Option<String>,
    /// Reject: why; the agent receives it.
    pub reason: Option<String>,
    /// Answer: the answer.
    pub answer: Option<String>,
}

impl RequestDecision {
    pub fn check_bounds(&self) -> Result<(), String> {
        for (field, text) in [("comment", &self.comment), ("reason", &self.reason)] {
            if let Some(text) = text {
                check_chars(field, text, limits::MAX_DECISION_TEXT_CHARS)?;
            }
        }
        if let Some(a) = &self.answer {
            check_chars("answer", a, MAX_ANSWER_CHARS)?;
        }
        if let Some(args) = &self.arguments {
            if !args.is_object() {
                return Err("arguments must be a JSON object".into());
            }
            check_json("arguments", args, MAX_DECISION_ARGUMENTS_BYTES)?;
        }
        Ok(())
    }
}

/// What a decision is: to approve, to reject, or to answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestVerdict {
    Decide(Decision),
    Answer,
}

/// One page of requests: pending ones oldest first, decided ones newest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RequestPage {
    pub requests: Vec<AgentRequest>,
    /// The `cursor` of the next page; null on the last one.
    pub next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn approval(v: Value) -> Result<NewApprovalRequest, String> {
        let req: NewApprovalRequest = serde_json::from_value(v).map_err(|e| e.to_string())?;
        req.check_bounds().map(|()| req)
    }

    #[test]
    fn approval_requests_are_checked_field_by_field() {
        let ok = json!({"tool": "send_email", "arguments": {"to": "a@b.c"}, "run": {"name": "support"},
                        "idempotency_key": "k1"});
        assert!(approval(ok.clone()).is_ok());
        let with = |k: &str, v: Value| {
            let mut o = ok.clone();
            o[k] = v;
            approval(o).unwrap_err()
        };
        assert!(with("arguments", json!([1])).contains("object"));
        assert!(with("tool", json!(" ")).contains("tool"));
        assert!(with("idempotency_key", json!("")).contains("idempotency_key"));
        assert!(with("timeout_s", json!(0)).contains("timeout_s"));
        assert!(with("run", json!({"name": "x", "trace_id": "ABC"})).contains("trace_id"));
        assert!(with("run", json!({"name": ""})).contains("run.name"));
        assert!(with("surprise", json!(1)).contains("unknown field"));
        let mut no_key = ok.clone();
        no_key.as_object_mut().unwrap().remove("idempotency_key");
        assert!(approval(no_key).unwrap_err().contains("idempotency_key"));
    }

    #[test]
    fn questions_take_distinct_choices_or_none() {
        let q = |v: Value| serde_json::from_value::<NewQuestion>(v).unwrap().check_bounds();
        assert!(q(json!({"question": "Which plan?"})).is_ok());
        assert!(q(json!({"question": "Which?", "choices": ["a", "b"]})).is_ok());
        assert!(q(json!({"question": "Which?", "choices": ["a"]})).is_err());
        assert!(q(json!({"question": "Which?", "choices": ["a", "a"]})).unwrap_err().contains("twice"));
        assert!(q(json!({"question": "  "})).is_err());
    }

    #[test]
    fn kinds_are_told_by_their_id() {
        assert_eq!(RequestKind::of_id("apr_1"), Some(RequestKind::Approval));
        assert_eq!(RequestKind::of_id("q_1"), Some(RequestKind::Question));
        assert_eq!(RequestKind::of_id("run_1"), None);
    }
}
