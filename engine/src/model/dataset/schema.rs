//! The written-out OpenAPI schemas of the dataset types that utoipa cannot
//! derive as they are (a name's pattern, any-JSON values, at least one field).

use serde_json::{json, Value};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

use super::*;
use crate::model::openapi::{raw, NOT_BLANK};

fn as_json(schema: Schema) -> Value {
    serde_json::to_value(schema).expect("a schema is JSON")
}

pub fn name_value() -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_DATASET_NAME_CHARS,
        "pattern": "^[A-Za-z0-9_.:-]([A-Za-z0-9 _.:-]*[A-Za-z0-9_.:-])?$",
        "description": "ASCII letters, digits, `-`, `_`, `.`, `:` or spaces (not first or last); unique in the \
            project",
    })
}

pub fn name() -> Schema {
    raw(name_value())
}

pub fn description() -> Schema {
    raw(json!({ "type": "string", "maxLength": MAX_DATASET_DESCRIPTION_CHARS }))
}

pub fn expected() -> Schema {
    raw(json!({
        "description": format!(
            "What a run given the input should answer: text, JSON, or the tool calls expected \
             (`[{{\"name\", \"arguments\"?}}]`); at most {} KiB of compact JSON",
            MAX_EXPECTED_BYTES / 1024
        ),
    }))
}

pub fn metadata() -> Schema {
    raw(json!({
        "type": ["object", "null"],
        "description": format!("Free metadata (at most {} KiB of JSON)", MAX_ITEM_METADATA_BYTES / 1024),
    }))
}

pub fn edited_metadata() -> Schema {
    raw(json!({
        "type": "object",
        "description": format!(
            "The new metadata, replacing the old (at most {} KiB of JSON)",
            MAX_ITEM_METADATA_BYTES / 1024
        ),
    }))
}

pub fn tags() -> Schema {
    raw(json!({
        "type": "array",
        "maxItems": MAX_ITEM_TAGS,
        "items": { "type": "string", "minLength": 1, "maxLength": MAX_ITEM_TAG_CHARS, "pattern": NOT_BLANK },
    }))
}

pub fn recorded_results() -> Schema {
    let one = serde_json::to_value(<RecordedResult as PartialSchema>::schema()).expect("a schema is JSON");
    raw(json!({
        "type": "array",
        "maxItems": MAX_RECORDED_RESULTS,
        "items": one,
        "description": format!(
            "Tool results to replay, `{{tool, arguments, result}}` (at most {} KiB of JSON together)",
            MAX_RECORDED_RESULTS_BYTES / 1024
        ),
    }))
}

impl PartialSchema for DatasetInput {
    fn schema() -> RefOr<Schema> {
        let mut prompt = as_json(crate::model::openapi::initial_prompt());
        prompt["description"] = json!(format!(
            "The human message (a run's initial_prompt); not blank, at most {MAX_PROMPT_BYTES} bytes of UTF-8"
        ));
        let mut items = as_json(crate::model::openapi::input_items());
        items["type"] = json!("array");
        items["minItems"] = json!(1);
        items["description"] = json!(format!(
            "A conversation: transcript items as a run's input_items takes them, the last one the human \
             message to answer (at most {} KiB of JSON); every agent invocation must be answered by an \
             invocation-result item after it",
            MAX_INPUT_ITEMS_BYTES / 1024
        ));
        let input = json!({
            "type": ["object", "null"],
            "description": format!(
                "Structured input merged into the prompt, as a run's input (at most {} KiB of JSON)",
                MAX_INPUT_BYTES / 1024
            ),
        });
        RefOr::T(raw(json!({
            "description": "A prompt, or a conversation ending with the human message to answer",
            "oneOf": [
                {
                    "type": "object",
                    "required": ["prompt"],
                    "properties": { "prompt": prompt, "input": input },
                    "additionalProperties": false,
                },
                {
                    "type": "object",
                    "required": ["input_items"],
                    "properties": { "input_items": items, "input": input },
                    "additionalProperties": false,
                },
            ],
        })))
    }
}

impl ToSchema for DatasetInput {}

// Written out: the two bodies that name what changes need at least one
// property (`minProperties`), which the derive cannot state.

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

impl PartialSchema for DatasetChange {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({
            "type": "object",
            "description": "The body of `PUT /api/datasets/{id}`: a new name, a new description, or both (what \
                is absent is kept).",
            "minProperties": 1,
            "additionalProperties": false,
            "properties": {
                "name": name_value(),
                "description": as_json(description()),
            },
        })))
    }
}

impl ToSchema for DatasetChange {}

impl PartialSchema for DatasetItemEdit {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({
            "type": "object",
            "description": "The body of `PUT /api/datasets/{id}/items/{item_id}`: what changes (what is absent \
                is kept; `expected: null` removes it). The item keeps its id and comes in with a new version.",
            "minProperties": 1,
            "additionalProperties": false,
            "properties": {
                "input": reference("DatasetInput"),
                "expected": as_json(expected()),
                "metadata": as_json(edited_metadata()),
                "tags": as_json(tags()),
                "recorded_results": as_json(recorded_results()),
            },
        })))
    }
}

impl ToSchema for DatasetItemEdit {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push(("DatasetInput".into(), <DatasetInput as PartialSchema>::schema()));
    }
}
