//! The schema of a run's state document (`GET /api/runs/{id}/state`, `POST
//! /api/runs/import`).
//!
//! No one Rust type is this document: it is written compact (times as Unix
//! milliseconds, fields that follow from position left out) and read compact
//! or full (see `runlens_engine`'s snapshot module), so its schema is written
//! out here, with the bounds of a new run read from `limits`.

use runlens_engine::model::limits::{
    MAX_APPROVAL_TIMEOUT_S, MAX_TAGS, MAX_TAG_KEY_CHARS, MAX_TAG_VALUE_CHARS, MAX_TOOL_NAMES, MAX_TURNS,
};
use runlens_engine::model::{ApprovalDecision, MessageBody, Run};
use runlens_engine::openapi::{raw, ToolName};
use runlens_engine::STATE_SCHEMA_VERSION;
use serde_json::{json, Value};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

use super::add;

/// The latest time a document may hold: 9999-12-31T23:59:59.999Z.
const MAX_TIME_MS: u64 = 253_402_300_799_999;

/// A run's state document.
pub struct StateDocument;

impl ToSchema for StateDocument {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        add::<Run>(schemas);
        add::<MessageBody>(schemas);
        add::<ApprovalDecision>(schemas);
        add::<ToolName>(schemas);
    }
}

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// A time: Unix milliseconds (compact documents) or RFC 3339 text.
fn time() -> Value {
    json!({
        "anyOf": [
            { "type": "integer", "minimum": 0, "maximum": MAX_TIME_MS, "description": "Unix milliseconds (compact documents)" },
            { "type": "string", "format": "date-time" },
        ],
    })
}

fn optional_time() -> Value {
    json!({ "anyOf": [time(), { "type": "null" }] })
}

fn count(max: u64) -> Value {
    json!({ "type": "integer", "minimum": 0, "maximum": max })
}

impl PartialSchema for StateDocument {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({
            "type": "object",
            "required": ["$schemaVersion", "run", "messages", "steps", "blobs"],
            "additionalProperties": false,
            "description": "A run's state document: the run, its transcript, steps with tool calls and approval \
                decisions, and blobs; every time lies between 1970-01-01 and 9999-12-31. Exported compact: fields \
                that follow from position and the run id (nested run ids, message ids and seq, step indexes) are \
                left out, and message, step and call times are Unix milliseconds; import reads compact and full \
                documents",
            "properties": {
                "$schemaVersion": { "type": "string", "enum": [STATE_SCHEMA_VERSION] },
                "run": run_schema(),
                "messages": { "type": "array", "items": message_schema() },
                "steps": { "type": "array", "items": step_schema() },
                "blobs": { "type": "array", "items": blob_schema() },
            },
        })))
    }
}

/// The document's run: every field of a run is present, but its comparison
/// group (not part of its state: an export leaves it out), what a run
/// has only as a fork from a step or as a replay, its session and end user
/// (only when it has them), its outcome (written, but recounted from
/// the steps on import), how its tools answer and its experiment (only
/// when it has them; an export leaves the experiment out); with the bounds
/// of a new run.
fn run_schema() -> Value {
    let run_schema = serde_json::to_value(Run::schema()).unwrap_or_default();
    let optional =
        ["group_id", "forked_from_step", "replay", "session_id", "end_user", "outcome", "tool_answers", "experiment"];
    let run_keys: Vec<&String> = (run_schema["properties"].as_object())
        .map(|p| p.keys().filter(|k| !optional.contains(&k.as_str())).collect())
        .unwrap_or_default();
    let tools = json!({
        "anyOf": [
            { "type": "string", "enum": ["all"] },
            { "type": "array", "maxItems": MAX_TOOL_NAMES, "items": reference(ToolName::name().as_ref()) },
        ],
    });
    json!({
        "allOf": [
            reference(Run::name().as_ref()),
            {
                "required": run_keys,
                "properties": {
                    "max_turns": { "type": "integer", "minimum": 1, "maximum": MAX_TURNS },
                    "context": { "type": ["object", "null"] },
                    "tags": {
                        "type": "object",
                        "maxProperties": MAX_TAGS,
                        "propertyNames": { "minLength": 1, "maxLength": MAX_TAG_KEY_CHARS, "pattern": "^[^:]*$" },
                        "additionalProperties": { "type": "string", "maxLength": MAX_TAG_VALUE_CHARS },
                    },
                    "approval": {
                        "properties": {
                            "timeout_s": {
                                "type": ["integer", "null"],
                                "minimum": 1,
                                "maximum": MAX_APPROVAL_TIMEOUT_S,
                            },
                            "tools": tools,
                        },
                    },
                },
            },
        ],
        "description": "The run as in GET /api/runs/{id}, every field present, with the bounds of POST /api/runs",
    })
}

/// A transcript message, in the AG-UI message shape.
fn message_schema() -> Value {
    json!({
        "allOf": [reference(MessageBody::name().as_ref())],
        "type": "object",
        "required": ["type", "data", "createdAt"],
        "properties": {
            "id": { "type": "string" },
            "runId": { "type": "string" },
            "seq": count(u64::MAX),
            "stepIndex": { "type": ["integer", "null"], "minimum": 0, "maximum": u32::MAX },
            "createdAt": time(),
            "type": { "type": "string", "enum": ["human", "agent", "invocation-result"] },
            "data": { "type": "object" },
        },
    })
}

/// A tool call of a step, with its approval decision.
fn call_schema() -> Value {
    let call_statuses = ["pending", "awaiting_approval", "running", "succeeded", "failed", "rejected", "cancelled"];
    json!({
        "type": "object",
        "required": ["id", "tool_name", "arguments", "status"],
        "properties": {
            "id": { "type": "string" },
            "run_id": { "type": "string" },
            "step_index": count(u32::MAX.into()),
            "tool_name": { "type": "string" },
            "arguments": {},
            "result": {},
            "error": { "type": "string" },
            "status": { "type": "string", "enum": call_statuses },
            "reasoning": { "type": "string" },
            "requested_at": time(),
            "approval": reference(ApprovalDecision::name().as_ref()),
            "started_at": time(),
            "completed_at": time(),
        },
    })
}

/// A step with its usage and tool calls.
fn step_schema() -> Value {
    let usage_counts: Value =
        ["input_tokens", "output_tokens", "cache_read_tokens", "reasoning_tokens", "total_tokens", "requests"]
            .iter()
            .map(|k| (k.to_string(), count(u64::MAX)))
            .collect::<serde_json::Map<_, _>>()
            .into();
    json!({
        "type": "object",
        "required": ["status", "request", "response", "usage", "started_at", "tool_calls"],
        "properties": {
            "run_id": { "type": "string" },
            "index": count(u32::MAX.into()),
            "kind": { "type": "string" },
            "status": { "type": "string", "enum": ["running", "completed", "interrupted"] },
            "request": {},
            "response": {},
            "started_at": time(),
            "usage": { "type": "object", "properties": usage_counts, "description": "Zero counts are left out" },
            "model_completed_at": optional_time(),
            "completed_at": optional_time(),
            "tool_calls": { "type": "array", "items": call_schema() },
        },
    })
}

/// A stored payload the run's steps and messages refer to.
fn blob_schema() -> Value {
    json!({
        "type": "object",
        "required": ["id", "data"],
        "additionalProperties": false,
        "properties": {
            "id": { "type": "string" },
            "call_id": { "type": ["string", "null"] },
            "data": {},
            "content_type": { "description": "application/json on export; not read on import (blobs are JSON)" },
        },
    })
}
