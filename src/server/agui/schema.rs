//! The OpenAPI description of `POST /api/agui`: the request
//! ([`AguiInput`], what `super::RunAgentInput` reads, no more and no less)
//! and each message of the answer's stream ([`AguiStreamMessage`], whose
//! `data` is one [`AguiEvent`]).

use runlens_engine::model::limits::{MAX_DECISION_TEXT_CHARS, MAX_ID_CHARS, MAX_TOOL_NAMES, RESERVED_RUN_IDS};
use runlens_engine::openapi::raw;
use serde_json::{json, Value};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

use super::events::response_schema;
use super::{MAX_CONTEXT_ENTRIES, MAX_MESSAGES, MAX_RESUME_ENTRIES};

/// AG-UI's `RunAgentInput`, as `POST /api/agui` reads it.
pub struct AguiInput;

/// One message of the AG-UI stream.
pub struct AguiStreamMessage;

/// One AG-UI event, as runlens sends them.
pub struct AguiEvent;

fn id() -> Value {
    json!({ "type": "string" })
}

fn message(role: &str, mut properties: Value, required: &[&str]) -> Value {
    properties["role"] = json!({ "const": role });
    properties["id"] = id();
    let mut all = vec!["role", "id"];
    all.extend_from_slice(required);
    json!({ "type": "object", "required": all, "properties": properties })
}

fn content() -> Value {
    json!({
        "anyOf": [
            { "type": "string" },
            { "type": "array", "items": {
                "type": "object", "required": ["type"],
                "properties": { "type": { "type": "string" }, "text": { "type": ["string", "null"] } },
            } },
        ],
        "description": "A text, or parts of which the text ones are read",
    })
}

impl PartialSchema for AguiInput {
    fn schema() -> RefOr<Schema> {
        let tool_call = json!({
            "type": "object", "required": ["id", "function"],
            "properties": {
                "id": id(),
                "function": { "type": "object", "required": ["name", "arguments"],
                    "properties": { "name": { "type": "string" }, "arguments": { "type": "string" } } },
            },
        });
        let text = json!({ "type": "string" });
        let messages = json!({
            "type": "array",
            "maxItems": MAX_MESSAGES,
            "description": "The thread's messages; the last one, the user's, is the prompt of a new thread or the \
                follow-up of a done one",
            "items": { "oneOf": [
                message("developer", json!({ "content": text }), &["content"]),
                message("system", json!({ "content": text }), &["content"]),
                message("assistant", json!({
                    "content": { "type": ["string", "null"] },
                    "toolCalls": { "type": ["array", "null"], "items": tool_call },
                }), &[]),
                message("user", json!({ "content": content() }), &["content"]),
                message("tool", json!({
                    "content": content(), "toolCallId": { "type": "string" }, "error": { "type": ["string", "null"] },
                }), &["content", "toolCallId"]),
                message("activity", json!({}), &[]),
                message("reasoning", json!({}), &[]),
            ] },
        });
        let resume_entry = json!({
            "type": "object",
            "required": ["interruptId", "status"],
            "properties": {
                "interruptId": { "type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS,
                    "description": "The interrupt's id: the id of the tool call awaiting a decision" },
                "status": { "enum": ["resolved", "cancelled"],
                    "description": "`resolved`: `payload` is the decision; `cancelled`: the call is rejected" },
                "payload": {},
            },
            "if": { "properties": { "status": { "const": "resolved" } } },
            "then": { "required": ["payload"], "properties": { "payload": decision_schema() } },
        });
        RefOr::T(raw(json!({
            "type": "object",
            "required": ["threadId", "runId", "messages"],
            "description": "AG-UI's RunAgentInput. Other properties (protocolVersion, parentRunId, forwardedProps…) \
                are read by no one.",
            "properties": {
                "threadId": {
                    "type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS, "pattern": "^[A-Za-z0-9_.:-]+$",
                    "not": { "enum": RESERVED_RUN_IDS },
                    "description": "The run's id: of the run this request continues, or creates",
                },
                "runId": { "type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS,
                    "description": "The client's id of this request's run, echoed on RUN_STARTED and RUN_FINISHED" },
                "messages": messages,
                "tools": { "type": "array", "maxItems": MAX_TOOL_NAMES,
                    "description": "Tools named like a tool the project can call are attached to a new run; \
                        front-end tools are not supported",
                    "items": { "type": "object", "required": ["name"], "properties": { "name": { "type": "string" } } } },
                "context": { "type": "array", "maxItems": MAX_CONTEXT_ENTRIES,
                    "description": "Added to a new run's system prompt, and kept in its context (`ag_ui.context`)",
                    "items": { "type": "object", "required": ["description", "value"], "properties": {
                        "description": { "type": "string" }, "value": { "type": "string" } } } },
                "state": { "description": "Kept in a new run's context (`ag_ui.state`)" },
                "resume": { "type": ["array", "null"], "maxItems": MAX_RESUME_ENTRIES, "items": resume_entry,
                    "description": "Decisions on the calls a paused run awaits" },
            },
        })))
    }
}

/// A resolved entry's decision; the reason and comment bounded as the
/// approvals API bounds them.
fn decision_schema() -> Value {
    let mut schema = response_schema();
    let object = &mut schema["oneOf"][1]["properties"];
    object["comment"] = json!({ "type": ["string", "null"], "maxLength": MAX_DECISION_TEXT_CHARS });
    object["reason"] = json!({ "type": ["string", "null"], "maxLength": MAX_DECISION_TEXT_CHARS });
    object["arguments"] = json!({ "type": ["object", "null"], "description": "Approve only: edited arguments" });
    schema
}

impl ToSchema for AguiInput {}

impl PartialSchema for AguiStreamMessage {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({
            "type": "object",
            "required": ["data"],
            "properties": {
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": { "$ref": format!("#/components/schemas/{}", AguiEvent::name()) },
                },
            },
            "description": "One Server-Sent Events message of an AG-UI stream: `data:` one AG-UI event as JSON (no \
                `event:` or `id:`). Comment lines (`:`) keep an idle stream open.",
        })))
    }
}

impl ToSchema for AguiStreamMessage {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((AguiEvent::name().into_owned(), AguiEvent::schema()));
    }
}

fn event(kind: &str, mut properties: Value, required: &[&str]) -> Value {
    properties["type"] = json!({ "const": kind });
    let mut all = vec!["type"];
    all.extend_from_slice(required);
    json!({ "type": "object", "required": all, "properties": properties })
}

impl PartialSchema for AguiEvent {
    fn schema() -> RefOr<Schema> {
        let s = || json!({ "type": "string" });
        let interrupt = json!({
            "type": "object",
            "required": ["id", "reason", "toolCallId"],
            "properties": {
                "id": s(), "reason": { "const": super::events::APPROVAL_REASON }, "message": s(), "toolCallId": s(),
                "responseSchema": { "type": "object" }, "expiresAt": s(),
                "metadata": { "type": "object", "required": ["runId", "toolName", "arguments"] },
            },
        });
        let outcome = json!({ "oneOf": [
            { "type": "object", "required": ["type"], "properties": { "type": { "const": "success" } } },
            { "type": "object", "required": ["type"], "properties": { "type": { "const": "cancelled" } } },
            { "type": "object", "required": ["type", "interrupts"], "properties": {
                "type": { "const": "interrupt" }, "interrupts": { "type": "array", "minItems": 1, "items": interrupt } } },
        ] });
        RefOr::T(raw(json!({
            "description": "An AG-UI event (protocol 1.0)",
            "oneOf": [
                event("RUN_STARTED", json!({ "threadId": s(), "runId": s() }), &["threadId", "runId"]),
                event("RUN_FINISHED", json!({ "threadId": s(), "runId": s(), "result": {}, "outcome": outcome }),
                    &["threadId", "runId", "outcome"]),
                event("RUN_ERROR", json!({ "message": s(), "code": s() }), &["message"]),
                event("STEP_STARTED", json!({ "stepName": s() }), &["stepName"]),
                event("STEP_FINISHED", json!({ "stepName": s() }), &["stepName"]),
                event("TEXT_MESSAGE_START", json!({ "messageId": s(), "role": { "const": "assistant" } }),
                    &["messageId", "role"]),
                event("TEXT_MESSAGE_CONTENT", json!({ "messageId": s(), "delta": s() }), &["messageId", "delta"]),
                event("TEXT_MESSAGE_END", json!({ "messageId": s() }), &["messageId"]),
                event("TOOL_CALL_START", json!({ "toolCallId": s(), "toolCallName": s(), "parentMessageId": s() }),
                    &["toolCallId", "toolCallName"]),
                event("TOOL_CALL_ARGS", json!({ "toolCallId": s(), "delta": s() }), &["toolCallId", "delta"]),
                event("TOOL_CALL_END", json!({ "toolCallId": s() }), &["toolCallId"]),
                event("TOOL_CALL_RESULT", json!({
                    "messageId": s(), "toolCallId": s(), "content": s(), "role": { "const": "tool" } }),
                    &["messageId", "toolCallId", "content"]),
            ],
        })))
    }
}

impl ToSchema for AguiEvent {}
