//! OpenAPI schemas of the fields the `ToSchema` derives cannot describe on
//! their own (the `openapi` feature; the server's generated API document).
//!
//! The model types derive their schemas (`#[cfg_attr(feature = "openapi",
//! derive(utoipa::ToSchema))]`); a field points here with `schema_with` when
//! its Rust type says less than the API accepts: a bound from
//! [`limits`](crate::model::limits) (every bound below is read from there, so
//! the document and the checks cannot drift apart), a `Value` that only some
//! shapes are valid for (`model_settings`, `approval`, `result_schema`), or
//! the names of the registered tools. Where a field's schema is a JSON Schema
//! literal it is written as one ([`raw`]): for these untyped fields that is
//! the clearest form, and the server's document carries it unchanged.

use serde_json::{json, Value};
use utoipa::openapi::schema::{Object, Schema, SchemaType};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

use crate::model::limits::*;
use crate::model::BUILTIN_TOOLS;

/// A JSON Schema given as JSON, carried into the document as written.
///
/// # Panics
/// When `schema` is not a JSON object (a bug in a literal below).
pub fn raw(schema: Value) -> Schema {
    let Value::Object(keywords) = schema else { panic!("a JSON Schema literal must be an object: {schema}") };
    let mut object = Object::new();
    object.schema_type = SchemaType::AnyValue;
    object.extensions = Some(keywords.into_iter().collect());
    Schema::Object(object)
}

/// `$ref` to a component schema.
fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// Any JSON value at most `max` bytes as compact JSON.
fn json_value(what: &str, max: usize) -> Schema {
    raw(json!({ "description": format!("{what} (at most {} of compact JSON)", size(max)) }))
}

fn size(bytes: usize) -> String {
    if bytes >= 1024 * 1024 {
        format!("{} MiB", bytes / (1024 * 1024))
    } else {
        format!("{} KiB", bytes / 1024)
    }
}

/// Not blank: at least one character that is not white space (the engine
/// trims with Rust's `char::is_whitespace`, whose set this is).
pub(crate) const NOT_BLANK: &str =
    "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";

/// A name of 1 to `max_chars` characters, none a control character, not
/// all white space (a priced model's name, an API key's name).
pub fn printable_name(max_chars: usize) -> Value {
    const PRINTABLE: &str = "[^\\u0000-\\u001f\\u007f-\\u009f]";
    const VISIBLE: &str = "[^\\u0000-\\u0020\\u007f-\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": max_chars,
        "pattern": format!("^{PRINTABLE}*{VISIBLE}{PRINTABLE}*$"),
    })
}

/// A registered tool (`GET /api/tools`): a built-in tool, or the name of
/// an MCP server's tool (`server__tool`) or of one of the project's HTTP
/// tools, which only the server knows.
pub struct ToolName;

impl PartialSchema for ToolName {
    fn schema() -> RefOr<Schema> {
        let names = BUILTIN_TOOLS;
        RefOr::T(raw(json!({
            "description": "A registered tool (GET /api/tools): a built-in one, an MCP server's \
                (`server__tool`) or one of the project's HTTP tools",
            "anyOf": [
                { "type": "string", "enum": names },
                { "type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$" },
            ],
        })))
    }
}

impl ToSchema for ToolName {}

/// An entry of a `tools` list: a registered tool, a source (`builtin`,
/// `http`, `mcp:NAME`: its tools) or `all`, expanded when a run is created.
pub struct ToolRef;

impl PartialSchema for ToolRef {
    fn schema() -> RefOr<Schema> {
        let server = format!("^mcp:[^\\s]{{1,{MAX_ID_CHARS}}}$");
        RefOr::T(raw(json!({
            "description": "A registered tool (GET /api/tools), a source's tools (builtin, http, mcp:NAME) or all",
            "anyOf": [
                reference("ToolName"),
                { "type": "string", "enum": ["all", "builtin", "http"] },
                { "type": "string", "pattern": server },
            ],
        })))
    }
}

impl ToSchema for ToolRef {}

/// `CreateRun.id`: a client-chosen run id.
pub fn run_id() -> Schema {
    raw(json!({
        "type": ["string", "null"],
        "minLength": 1,
        "maxLength": MAX_ID_CHARS,
        "pattern": "^[A-Za-z0-9._:-]+$",
        "not": { "enum": RESERVED_RUN_IDS },
        "description": format!(
            "Client-supplied id ({} are reserved); an existing id returns the existing run (200)",
            RESERVED_RUN_IDS.map(|id| format!("`{id}`")).join(", ")
        ),
    }))
}

/// `CreateRun.name`.
pub fn run_name() -> Schema {
    raw(json!({ "type": ["string", "null"], "maxLength": MAX_NAME_CHARS }))
}

/// `CreateRun.session_id` and `user_id`: 1 to 128 characters, none a
/// control character, not all white space (what `limits::check_session_id` checks).
pub fn session_id() -> Schema {
    let mut schema = printable_name(crate::model::limits::MAX_SESSION_ID_CHARS);
    schema["type"] = json!(["string", "null"]);
    raw(schema)
}

/// `ReviewSubmit.scores`: a value (yes/no, a number or a label) for some of the queue's fields, by name.
pub fn review_scores() -> Schema {
    raw(json!({
        "type": "object",
        "description": "A value for some of the queue's fields, by name: true/false, a number, or a label",
        "additionalProperties": {"type": ["boolean", "number", "string"]}
    }))
}

/// `CreateRun.initial_prompt`.
pub fn initial_prompt() -> Schema {
    prompt("The first human message")
}

/// A follow-up's or an edit's `message`.
pub fn human_message() -> Schema {
    prompt("The human message")
}

fn prompt(what: &str) -> Schema {
    raw(json!({
        "type": "string",
        "pattern": NOT_BLANK,
        "maxLength": MAX_PROMPT_BYTES,
        "description": format!("{what}; not blank, at most {MAX_PROMPT_BYTES} bytes of UTF-8"),
    }))
}

/// `CreateRun.system_prompt`.
pub fn system_prompt() -> Schema {
    raw(json!({
        "type": ["string", "null"],
        "maxLength": MAX_SYSTEM_PROMPT_BYTES,
        "description": format!("At most {} of UTF-8", size(MAX_SYSTEM_PROMPT_BYTES)),
    }))
}

/// `CreateRun.agent_id`.
pub fn agent_id() -> Schema {
    raw(json!({ "type": ["string", "null"], "maxLength": MAX_ID_CHARS }))
}

/// A model name in a request (`CreateRun.model`, `FollowUp.model`).
pub fn model_name() -> Schema {
    raw(json!({
        "type": ["string", "null"],
        "maxLength": MAX_ID_CHARS,
        "description": "A configured model (GET /api/models); default builtin",
    }))
}

/// A list of tools to attach (`CreateRun.tools`, `FollowUp.tools`).
pub fn tool_list() -> Schema {
    raw(json!({
        "type": ["array", "null"],
        "maxItems": MAX_TOOL_NAMES,
        "items": reference("ToolRef"),
        "description": "Attached tools, by name, by source (builtin, http, mcp:NAME) or all; absent means all. \
            Expanded to names when the run is created (at most the same bound in all).",
    }))
}

/// `max_turns` of a new run or a follow-up.
pub fn max_turns() -> Schema {
    raw(json!({ "type": ["integer", "null"], "minimum": 1, "maximum": MAX_TURNS }))
}

/// The bounds of a run's `tags`.
fn tags_bounds() -> Value {
    json!({
        "type": "object",
        "maxProperties": MAX_TAGS,
        "propertyNames": { "minLength": 1, "maxLength": MAX_TAG_KEY_CHARS, "pattern": "^[^:]*$" },
        "additionalProperties": { "type": "string", "maxLength": MAX_TAG_VALUE_CHARS },
    })
}

/// `CreateRun.tags`.
pub fn tags() -> Schema {
    raw(tags_bounds())
}

/// `CreateRun.input`.
pub fn input() -> Schema {
    json_value("Structured input merged into the prompt", MAX_INPUT_BYTES)
}

/// `CreateRun.context`.
pub fn context() -> Schema {
    raw(json!({
        "type": ["object", "null"],
        "description": format!("Passed to tools, never to the model (at most {} of JSON)", size(MAX_CONTEXT_BYTES)),
    }))
}

/// The `context` of an agent's approval request or question: text or any JSON.
pub fn request_context() -> Schema {
    json_value("What the person should know: text or any JSON value", crate::model::MAX_REQUEST_CONTEXT_BYTES)
}

/// An agent run's OpenTelemetry trace id: 32 lowercase hex digits, not all zero.
pub fn trace_id() -> Schema {
    raw(json!({
        "type": ["string", "null"], "minLength": 32, "maxLength": 32, "pattern": "^[0-9a-f]*[1-9a-f][0-9a-f]*$",
        "description": "The OpenTelemetry trace of the agent's run (32 lowercase hex digits, not all zero)",
    }))
}

/// A question's choices: 2 to 20 distinct, none blank.
pub fn choices() -> Schema {
    raw(json!({
        "type": ["array", "null"], "minItems": 2, "maxItems": crate::model::MAX_CHOICES, "uniqueItems": true,
        "items": {"type": "string", "minLength": 1, "maxLength": crate::model::MAX_CHOICE_CHARS, "pattern": "\\S"},
        "description": "When given, the answer is one of them",
    }))
}

/// Where a decision is POSTed: an http(s) URL with a host.
pub fn callback_url() -> Schema {
    raw(json!({
        "type": ["string", "null"], "minLength": 1, "maxLength": crate::model::limits::MAX_WEBHOOK_URL_CHARS,
        "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#@]+",
        "description": "Told of the decision by a signed POST (the project's run webhook secret, which the project \
            must have): an http(s) URL with a host and no user name or password. Loopback, private and link-local \
            addresses are refused unless the operator allows them ([http] allow_private_networks).",
    }))
}

/// `CreateRun.result_schema` and `Run.result_schema`.
pub fn result_schema() -> Schema {
    raw(json!({
        "anyOf": [{ "type": "null" }, { "type": "boolean" }, { "type": "object" }],
        "description": format!(
            "A JSON Schema the final result must match (at most {} of JSON)",
            size(MAX_RESULT_SCHEMA_BYTES)
        ),
    }))
}

/// `CreateRun.approval`: `"all"`, or which tools and after how long.
pub fn approval_request() -> Schema {
    raw(json!({
        "description": "`all`, or which tools need approval and after how many seconds an undecided call is rejected",
        "anyOf": [
            { "type": "null" },
            { "type": "string", "enum": ["all"] },
            {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "tools": {
                        "anyOf": [
                            { "type": "null" },
                            { "type": "string", "enum": ["all"] },
                            { "type": "array", "maxItems": MAX_TOOL_NAMES, "items": reference("ToolName") },
                        ],
                    },
                    "timeout_s": { "type": ["integer", "null"], "minimum": 1, "maximum": MAX_APPROVAL_TIMEOUT_S },
                },
            },
        ],
    }))
}

/// `ApprovalPolicy.timeout_s`.
pub fn approval_timeout() -> Schema {
    raw(json!({
        "type": ["integer", "null"],
        "minimum": 1,
        "maximum": MAX_APPROVAL_TIMEOUT_S,
        "description": "Undecided calls are rejected this many seconds after they were requested",
    }))
}

/// `CreateRun.model_settings`: the built-in model's settings (a
/// provider's models take their own; see the README).
pub fn model_settings() -> Schema {
    let turn = json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "text": { "type": ["string", "null"] },
            "tool_calls": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "properties": { "name": { "type": "string" }, "arguments": {} },
                },
            },
            "error": { "type": "string", "description": "A provider failure" },
        },
        "anyOf": [
            { "required": ["text"], "properties": { "text": { "type": "string" } } },
            { "required": ["tool_calls"], "properties": { "tool_calls": { "minItems": 1 } } },
            { "required": ["error"] },
        ],
    });
    raw(json!({
        "anyOf": [
            {
                "type": "object",
                "additionalProperties": false,
                "description": format!(
                    "Settings of the built-in model (at most {} of JSON); a provider's models take their own \
                     (see the README)",
                    size(MAX_MODEL_SETTINGS_BYTES)
                ),
                "properties": {
                    "script": {
                        "type": "array",
                        "maxItems": MAX_SCRIPT_TURNS,
                        "items": turn,
                        "description": "Turns played in order",
                    },
                    "latency_ms": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": MAX_LATENCY_MS,
                        "description": "Delay of each turn",
                    },
                    "context_window": {
                        "type": "integer",
                        "minimum": MIN_CONTEXT_WINDOW,
                        "maximum": MAX_CONTEXT_WINDOW,
                    },
                    "temperature": { "type": ["number", "null"], "minimum": 0, "maximum": MAX_TEMPERATURE },
                    "top_p": { "type": ["number", "null"], "minimum": 0, "maximum": MAX_TOP_P },
                    "max_tokens": {
                        "type": ["integer", "null"],
                        "minimum": 1,
                        "maximum": MAX_CONTEXT_WINDOW,
                        "description": "At most the context window",
                    },
                    "seed": { "type": ["integer", "null"], "minimum": i64::MIN, "maximum": i64::MAX },
                },
            },
            { "type": "null" },
        ],
    }))
}

/// A decision's `comment` or `reason` (the server's approve and reject bodies).
/// The expected value of `POST /api/runs/{id}/evaluate`: any JSON.
pub fn scorer_expected() -> Schema {
    json_value("What the run should have answered: text, JSON, or the tool calls expected", 64 * 1024)
}

pub fn decision_text() -> Schema {
    raw(json!({ "type": ["string", "null"], "maxLength": MAX_DECISION_TEXT_CHARS }))
}

/// A decision's edited `arguments` (the server's approve body).
pub fn decision_arguments() -> Schema {
    json_value("Approve only: edited arguments, checked against the tool's schema", MAX_DECISION_ARGUMENTS_BYTES)
}

/// A price, USD per million tokens.
pub fn price() -> Schema {
    raw(json!({ "type": "number", "minimum": 0, "maximum": MAX_PRICE, "description": "USD per million tokens" }))
}

/// An optional price, USD per million tokens.
pub fn optional_price() -> Schema {
    raw(json!({
        "type": ["number", "null"],
        "minimum": 0,
        "maximum": MAX_PRICE,
        "description": "USD per million tokens",
    }))
}

/// A step's response: an answer, or `{"error"}` when the model call failed.
/// `anyOf`, not the `oneOf` an untagged enum derives: every field of an
/// answer is optional, so a failure's object is a valid answer too.
impl PartialSchema for crate::model::StepResponse {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({
            "description": "What came back from the step's model call: the answer, or the error that failed the run.",
            "anyOf": [
                reference("ModelAnswer"),
                {
                    "type": "object",
                    "required": ["error"],
                    "properties": { "error": { "type": "string", "description": "Why the model call failed." } },
                },
            ],
        })))
    }
}

impl ToSchema for crate::model::StepResponse {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((crate::model::ModelAnswer::name().into_owned(), crate::model::ModelAnswer::schema()));
        <crate::model::ModelAnswer as ToSchema>::schemas(schemas);
    }
}

/// `AgentSpec.name`: a tool name.
pub fn agent_name() -> Schema {
    raw(json!({
        "type": "string",
        "pattern": format!("^[a-z][a-z0-9_]{{0,{}}}$", MAX_AGENT_NAME_CHARS - 1),
        "description": "Unique in the project; the tool other agents call it by",
    }))
}

/// `AgentSpec.description`.
pub fn agent_description() -> Schema {
    raw(json!({ "type": "string", "maxLength": MAX_AGENT_DESCRIPTION_CHARS }))
}

/// `AgentSpec.tools`: registered tools, sources or `all`, kept as written
/// and expanded at each run.
pub fn agent_tools() -> Schema {
    raw(json!({ "type": "array", "maxItems": MAX_TOOL_NAMES, "items": reference("ToolRef") }))
}

/// `AgentSpec.agents` and `AgentSpec.handoffs`: ids of agents in the same project.
pub fn agent_links() -> Schema {
    raw(json!({
        "type": "array",
        "maxItems": MAX_AGENT_LINKS,
        "items": { "type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS },
        "description": "Ids of agents of the same project",
    }))
}

/// `AgentSpec.tree_budget`.
pub fn tree_budget() -> Schema {
    // null, like a missing bound, leaves the server's.
    let bound = |max: u64, what: &str| json!({ "type": ["integer", "null"], "minimum": 1, "maximum": max, "description": what });
    raw(json!({
        "type": ["object", "null"],
        "additionalProperties": false,
        "properties": {
            "runs": bound(MAX_TREE_RUNS, "Runs in the tree, its root included"),
            "depth": bound(MAX_TREE_DEPTH, "Levels below the root"),
            "turns": bound(MAX_TREE_TURNS, "Model turns of all the tree's runs together"),
            "tokens": bound(MAX_TREE_TOKENS, "Tokens of all the tree's runs together"),
        },
        "description": "Bounds on the tree of runs under a run of this agent; each lowers the server's",
    }))
}

/// `AgentSpec.input_schema`.
pub fn input_schema() -> Schema {
    raw(json!({
        "anyOf": [{ "type": "null" }, { "type": "boolean" }, { "type": "object" }],
        "description": format!(
            "A JSON Schema a run's input must match (at most {} of JSON)",
            size(MAX_RESULT_SCHEMA_BYTES)
        ),
    }))
}

/// `CreateRun.input_items`: transcript messages before the prompt.
pub fn input_items() -> Schema {
    // `MessageBody` closed: an item's unknown key is refused (see
    // `message::kept_items`), so the schema allows none.
    let as_json = |schema: RefOr<Schema>| serde_json::to_value(schema).expect("a schema is JSON");
    let mut item = as_json(crate::model::MessageBody::schema());
    let invocation = as_json(crate::model::Invocation::schema());
    closed(&mut item, &invocation);
    raw(json!({
        "type": ["array", "null"],
        "maxItems": MAX_INPUT_ITEMS,
        "items": item,
        "description": format!(
            "Messages that seed the transcript before the prompt (at most {} of JSON); every agent \
             invocation must be answered by an invocation-result item after it",
            size(MAX_INPUT_ITEMS_BYTES)
        ),
    }))
}

/// `schema` with `additionalProperties: false` on each object schema that
/// lists its properties, and `invocation` in place of its reference.
fn closed(schema: &mut Value, invocation: &Value) {
    match schema {
        Value::Object(map) => {
            if map.get("$ref").and_then(Value::as_str) == Some("#/components/schemas/Invocation") {
                *schema = invocation.clone();
                return closed(schema, invocation);
            }
            if map.contains_key("properties") {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            map.values_mut().for_each(|v| closed(v, invocation));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| closed(v, invocation)),
        _ => {}
    }
}

/// `CreateRun.metadata`.
pub fn metadata() -> Schema {
    raw(json!({
        "type": ["object", "null"],
        "description": format!("Free metadata, shown and searchable (at most {} of JSON)", size(MAX_METADATA_BYTES)),
    }))
}
