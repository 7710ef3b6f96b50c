//! The API's OpenAPI 3.1 document, generated from the server's own types and
//! handlers, and the reference page made from it.
//!
//! The operations come from the handlers' `#[utoipa::path]` attributes,
//! collected by the one route list (`super::routes::api`); the schemas from
//! the `ToSchema` derives of the request and response types (the engine's
//! model types derive theirs under its `openapi` feature). What no Rust type
//! says is described here: the shared error answers ([`responses`]), the
//! messages of the event streams ([`RunStreamMessage`]), and the state
//! document's two encodings ([`StateDocument`]).
//!
//! [`document`] is built once: the JSON served at `GET /api/openapi.json`,
//! with its keys sorted so the text is the same on every build, and the page
//! served at `GET /api/docs` ([`html`]). A copy is committed as
//! [`COMMITTED_COPY`]; a test fails when it differs from what the server
//! serves (`RUNLENS_BLESS=1 cargo test --no-default-features --features ssr
//! --test api openapi` rewrites it).

pub mod html;
pub mod responses;
mod state_document;

use std::sync::LazyLock;

use runlens_engine::model::Event;
use runlens_engine::model::RUN_EVENT_TYPES;
use runlens_engine::openapi::{raw, ToolName, ToolRef};
use serde_json::{json, Map, Value};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{OpenApi, PartialSchema, ToSchema};

pub use state_document::StateDocument;

/// The committed copy of the document, relative to the repository root.
pub const COMMITTED_COPY: &str = "docs/openapi.json";

const DESCRIPTION: &str = "\
Create, watch, steer and debug agent runs.

Every operation but `/healthz` and this document needs credentials: an API key as `Authorization: Bearer rl_…` \
(created at `/settings/keys` or with `POST /api/keys`), or the session cookie of a signed-in browser. Without \
them, or with an unknown or revoked key, the answer is 401 with `WWW-Authenticate: Bearer`. Everything belongs to a \
project; the caller's role there (`viewer` < `operator` < `approver` < `admin`) decides what it may do: a role too \
low is a 403 naming the role needed, and anything of a project the caller has no role in is a 404, as if it did \
not exist. Collection operations act on the current project: the `X-Runlens-Project` header, else the session's \
choice, else the key's project, else `default`. A request made with the session cookie that changes something \
must come from this app's own pages (Origin, Sec-Fetch-Site or Referer), else 403; key requests are exempt.
 JSON in and out: request bodies must be `application/json` \
(415 otherwise), at most 2 MiB (imports 64 MiB; 413 over it). Every error is `{\"error\": \"…\"}`, also for an \
unknown `/api/` path (404) and a method a path does not serve (405, with `Allow`). An unsafe request (POST, PUT, \
PATCH, DELETE) whose `Origin` — or, without one, `Referer` — names another origin than the server's, or that \
carries `Sec-Fetch-Site: cross-site`, is refused with 403, and no CORS header grants another origin.

Bounds of every input are stated on its schema (strings in characters unless said to be bytes). A query \
parameter an operation does not list is a 400 naming it. Lists come in pages: the next one by the previous \
page's `next_cursor` (the audit log's `next_before`) or by `offset` (the items to skip); not both. Server-Sent \
Events streams describe one message per event: the `schema` of `text/event-stream` is the schema of each \
message (`{event, data, id}`), `data` holding the event as JSON.

This document is generated from the server's types and handlers; the reference page at `/api/docs` shows it.";

/// What the routes add their operations to: the document's info, its tags
/// (one per resource, in the order the reference page shows them), and the
/// components no operation names by itself.
#[derive(OpenApi)]
#[openapi(
    info(title = "runlens API", description = DESCRIPTION),
    tags(
        (name = "runs", description = "Create, list, read and cancel runs; a run's child runs and its tree's usage"),
        (name = "agents", description = "Saved, versioned agents that runs start from and call"),
        (name = "traces", description = "What a run did: steps, outline, transcript, tool calls"),
        (name = "conversation", description = "Follow-ups, edits that fork, families, state export and import, blobs"),
        (name = "compare", description = "Runs side by side: two runs aligned, and comparison groups (one run on several models)"),
        (name = "approvals", description = "Tool calls awaiting a person's decision"),
        (name = "evaluators", description = "Online evaluation: scorers of a sample of new runs"),
        (name = "reviews", description = "Review queues: runs put in front of people to score, and corrections into datasets"),
        (name = "experiments", description = "An agent or a run configuration run over a dataset version, scored, and compared"),
        (name = "scores", description = "Judgements of runs, steps and tool calls, by people, programs and scorers"),
        (name = "datasets", description = "Versioned datasets: inputs with the answers expected, added, uploaded or made from runs"),
        (name = "events", description = "Server-Sent Event streams of runs' changes"),
        (name = "prices", description = "USD per million tokens per model, for cost_usd"),
        (name = "catalog", description = "What runs can use (tools, MCP servers, models) and what they sent (the outbox)"),
        (name = "identity", description = "The caller, projects and members, users, API keys, the audit log"),
        (name = "webhooks", description = "Signed POSTs of runs' status changes: subscriptions, secrets, deliveries"),
        (name = "agui", description = "AG-UI clients (HttpAgent, CopilotKit) run and steer agents over one event stream"),
        (name = "otlp", description = "OpenTelemetry spans of agents runlens does not run (OTLP/HTTP), as read-only runs"),
        (name = "server", description = "Health, the servers sharing the database, and this document"),
    ),
    components(
        schemas(super::error::ErrorBody, ToolName, ToolRef),
        responses(
            responses::BadRequest,
            responses::Unauthorized,
            responses::Forbidden,
            responses::NotFound,
            responses::Conflict,
            responses::TooLarge,
            responses::UnsupportedMediaType,
            responses::OtlpTooLarge,
            responses::OtlpUnsupported,
            responses::Internal,
            responses::Busy,
            responses::TooManyStreams,
        ),
    )
)]
struct ApiDoc;

/// The document before the routes add their operations.
pub fn base() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// The served document, in its two forms.
pub struct Document {
    /// The document as pretty JSON text, keys sorted, with a final newline
    /// (also the committed copy).
    pub json: String,
    /// The reference page.
    pub html: String,
}

/// The document of [`super::routes::api`], built on first use.
pub fn document() -> &'static Document {
    static DOCUMENT: LazyLock<Document> = LazyLock::new(|| {
        let (_, openapi) = super::routes::api().split_for_parts();
        let value = finish(serde_json::to_value(openapi).unwrap_or_default());
        let json = format!("{}\n", serde_json::to_string_pretty(&value).unwrap_or_default());
        let html = html::page(&value);
        Document { json, html }
    });
    &DOCUMENT
}

/// The operations served without credentials (see `super::auth`).
pub const PUBLIC_PATHS: [&str; 3] = ["/healthz", "/api/openapi.json", "/api/docs"];

/// The operations of a path item.
const METHODS: [&str; 8] = ["get", "put", "post", "delete", "patch", "head", "options", "trace"];

/// The name of the security scheme every other operation requires.
pub const BEARER: &str = "bearer";

/// The document as served: wildcard path segments spelled as parameters
/// (`/api/prices/{*model}` is `/api/prices/{model}`), credentials required
/// ([`secured`]), keys sorted.
fn finish(mut doc: Value) -> Value {
    if let Some(Value::Object(paths)) = doc.get_mut("paths") {
        let renamed: Map<String, Value> =
            std::mem::take(paths).into_iter().map(|(path, item)| (path.replace("{*", "{"), item)).collect();
        *paths = renamed;
    }
    merge_closed_parts(&mut doc);
    close_variants(&mut doc);
    secured(&mut doc);
    sorted(doc)
}

/// Internally tagged enums that refuse unknown fields (`{"kind": …}`):
/// utoipa leaves their variants open, so each is closed here.
const CLOSED_TAGGED: [&str; 1] = ["Scorer"];

fn close_variants(doc: &mut Value) {
    for name in CLOSED_TAGGED {
        if let Some(variants) = doc["components"]["schemas"][name]["oneOf"].as_array_mut() {
            for variant in variants.iter_mut().filter(|v| v["properties"].is_object()) {
                variant["additionalProperties"] = Value::Bool(false);
            }
        }
    }
}

/// Whether `schema` is an object schema closed to other properties.
fn is_closed(schema: &Value) -> bool {
    schema.get("additionalProperties") == Some(&Value::Bool(false)) && schema["properties"].is_object()
}

/// A response type that flattens a request type refusing unknown fields
/// (`Agent` flattens `AgentSpec`) is generated as an `allOf` of the closed
/// request schema and its own fields, which no value can match: each part is
/// checked alone, and the closed part refuses the others' fields. Such an
/// `allOf` is written out as one closed object with the fields of all its
/// parts (repeatedly, as a merged schema can be part of another: `AgentDetail`
/// flattens `Agent`).
fn merge_closed_parts(doc: &mut Value) {
    loop {
        let Some(schemas) = doc["components"]["schemas"].as_object().cloned() else { return };
        let mut merged_any = false;
        for (name, schema) in &schemas {
            let Some(parts) = schema["allOf"].as_array() else { continue };
            let mut has_closed_ref = false;
            let mut resolved = Vec::with_capacity(parts.len());
            for part in parts {
                match part.get("$ref").and_then(Value::as_str) {
                    Some(reference) => match schemas.get(reference.rsplit('/').next().unwrap_or(reference)) {
                        Some(target) if is_closed(target) => {
                            has_closed_ref = true;
                            resolved.push(target);
                        }
                        _ => break,
                    },
                    None if part["type"] == "object" && part.get("allOf").is_none() => resolved.push(part),
                    None => break,
                }
            }
            if !has_closed_ref || resolved.len() != parts.len() {
                continue;
            }
            let mut properties = Map::new();
            let mut required: Vec<Value> = Vec::new();
            for part in resolved {
                properties.extend(part["properties"].as_object().cloned().unwrap_or_default());
                for field in part["required"].as_array().into_iter().flatten() {
                    if !required.contains(field) {
                        required.push(field.clone());
                    }
                }
            }
            let mut one = json!({
                "type": "object", "properties": properties, "required": required, "additionalProperties": false,
            });
            if let Some(description) = schema.get("description") {
                one["description"] = description.clone();
            }
            doc["components"]["schemas"][name] = one;
            merged_any = true;
        }
        if !merged_any {
            return;
        }
    }
}

/// The bearer scheme, required by every operation but the [`PUBLIC_PATHS`],
/// each of which then also answers 401 and 403 (see [`responses`]), and 400
/// for a query parameter it does not list. A
/// browser's session cookie works as well; the document speaks of the key,
/// what a program sends.
fn secured(doc: &mut Value) {
    doc["components"]["securitySchemes"] = json!({
        BEARER: {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key, `rl_` and 64 hex digits (`POST /api/keys`, or RUNLENS_BOOTSTRAP_API_KEY at \
                start-up). Signed-in browsers send the session cookie instead.",
        }
    });
    let Some(Value::Object(paths)) = doc.get_mut("paths") else { return };
    for (path, item) in paths.iter_mut() {
        if PUBLIC_PATHS.contains(&path.as_str()) {
            continue;
        }
        let Some(item) = item.as_object_mut() else { continue };
        for (_, operation) in item.iter_mut().filter(|(method, _)| METHODS.contains(&method.as_str())) {
            operation["security"] = json!([{ BEARER: [] }]);
            // A project named in the header that the caller has no role in is "not found".
            let names_project = operation["parameters"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(|p| p["name"] == "X-Runlens-Project"));
            let responses = &mut operation["responses"];
            // A query parameter the operation does not list (see `super::guard::known_query`).
            if responses.get("400").is_none() {
                responses["400"] = json!({ "$ref": "#/components/responses/BadRequest" });
            }
            responses["401"] = json!({ "$ref": "#/components/responses/Unauthorized" });
            responses["403"] = json!({ "$ref": "#/components/responses/Forbidden" });
            if names_project && responses.get("404").is_none() {
                responses["404"] = json!({ "$ref": "#/components/responses/NotFound" });
            }
        }
    }
}

/// `v` with every object's keys in order (whatever map `serde_json` was
/// built with), so the text is the same on every build.
fn sorted(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// Adds `T` and the schemas it refers to, by name.
fn add<T: ToSchema>(schemas: &mut Vec<(String, RefOr<Schema>)>) {
    schemas.push((T::name().into_owned(), T::schema()));
    T::schemas(schemas);
}

/// One message of a run's event stream (`GET /api/runs/{id}/events`).
pub struct RunStreamMessage;

impl PartialSchema for RunStreamMessage {
    fn schema() -> RefOr<Schema> {
        stream_message(
            &RUN_EVENT_TYPES,
            true,
            "One Server-Sent Events message of a run's stream (text/event-stream): `id:` the event's seq, `event:` \
             its type, `data:` the event as JSON. Comment lines (`:`) keep an idle stream open.",
        )
    }
}

impl ToSchema for RunStreamMessage {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        add::<Event>(schemas);
    }
}

/// One message of the all-runs stream (`GET /api/events`).
pub struct AllRunsStreamMessage;

impl PartialSchema for AllRunsStreamMessage {
    fn schema() -> RefOr<Schema> {
        stream_message(
            &["run.status", "run.finished", "tool_call.updated"],
            false,
            "One Server-Sent Events message of the all-runs stream: `event:` the type, `data:` the event as JSON; \
             no `id:`. Comment lines (`:`) keep an idle stream open.",
        )
    }
}

impl ToSchema for AllRunsStreamMessage {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        add::<Event>(schemas);
    }
}

fn stream_message(events: &[&str], with_id: bool, description: &str) -> RefOr<Schema> {
    let mut properties = json!({
        "event": { "type": "string", "enum": events },
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": { "$ref": format!("#/components/schemas/{}", Event::name()) },
        },
    });
    let mut required = vec!["event", "data"];
    if with_id {
        properties["id"] = json!({ "type": "string", "pattern": "^[1-9][0-9]*$", "description": "The event's seq, for Last-Event-ID" });
        required.push("id");
    }
    RefOr::T(raw(json!({
        "type": "object",
        "required": required,
        "properties": properties,
        "description": description,
    })))
}

/// An OpenAPI document (the answer of `GET /api/openapi.json`).
pub struct OpenApiDocument;

impl PartialSchema for OpenApiDocument {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "object", "required": ["openapi", "paths"] })))
    }
}

impl ToSchema for OpenApiDocument {}
