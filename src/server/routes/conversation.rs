//! Conversation control: follow-ups, edit-and-fork, the family tree, state
//! export and import, and large-result blobs.
//!
//! Imports are bounded: a body of at most [`MAX_IMPORT_BYTES`], and at most
//! [`MAX_CONCURRENT_IMPORTS`] imports (REST and the runs page's form
//! together) read and stored at once; one more is answered 503 with
//! `Retry-After` before its body is read.

use std::sync::{Arc, LazyLock};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Json;
use runlens_engine::model::limits::MAX_TURNS;
use runlens_engine::model::{FollowUp, ForkFromStep, ReplayRequest, Run, RunFamily};
use runlens_engine::{Engine, ImportOptions};
use serde::Deserialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::{optional, AppJson, AppQuery, Bounded};
use super::super::openapi::responses::*;
use super::super::openapi::StateDocument;
use super::super::state::AppState;
use super::ProjectHeader;
use super::RunPath;
use runlens_engine::model::Role;

/// State documents carry their blobs, so imports may be much larger than
/// other request bodies.
pub const MAX_IMPORT_BYTES: usize = 64 * 1024 * 1024;

/// Imports read and stored at the same time, at most. Each holds its body
/// (up to 64 MiB) and what is read from it: measured at most about four
/// times a 60 MB body's size over the body itself (the engine refuses
/// documents with more than 2,000,000 values outside blob data), so two
/// imports hold well under a gigabyte together.
pub const MAX_CONCURRENT_IMPORTS: usize = 2;

/// Seconds a refused import is told to wait (`Retry-After`).
pub const IMPORT_RETRY_AFTER_S: u64 = 1;

static IMPORTS: LazyLock<Arc<Semaphore>> = LazyLock::new(|| Arc::new(Semaphore::new(MAX_CONCURRENT_IMPORTS)));

/// A place among the imports running now; `None` when all are taken.
pub fn import_permit() -> Option<OwnedSemaphorePermit> {
    IMPORTS.clone().try_acquire_owned().ok()
}

/// Takes an import place before the body is read, or answers 503.
async fn import_gate(request: Request, next: Next) -> Response {
    let Some(permit) = import_permit() else {
        let message =
            format!("the server is importing {MAX_CONCURRENT_IMPORTS} runs already; retry in {IMPORT_RETRY_AFTER_S} s");
        return AppError::Busy { message, retry_after_s: IMPORT_RETRY_AFTER_S }.into_response();
    };
    let response = next.run(request).await;
    drop(permit);
    response
}

pub fn routes() -> OpenApiRouter<AppState> {
    let import = OpenApiRouter::new()
        .routes(routes!(import))
        .layer(DefaultBodyLimit::max(MAX_IMPORT_BYTES))
        .layer(middleware::from_fn(import_gate));
    OpenApiRouter::new()
        .routes(routes!(follow_up))
        .routes(routes!(edit))
        .routes(routes!(fork))
        .routes(routes!(replay))
        .routes(routes!(family))
        .routes(routes!(export))
        .routes(routes!(blob))
        .merge(import)
}

/// Follow up on a done, interactive run: appends a human message and runs again (done → running).
///
/// Optional overrides apply to this continuation. 409 while the run is running or paused, or for a run created
/// with `interactive: false`.
#[utoipa::path(
    post,
    path = "/api/runs/{id}/messages",
    tag = "conversation",
    params(RunPath),
    request_body = FollowUp,
    responses(
        (status = 200, description = "The run, running again", body = Run),
        ChangeErrors,
    )
)]
async fn follow_up(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
    AppJson(req): AppJson<FollowUp>,
) -> Result<Json<Run>, AppError> {
    caller.run(&engine, &id, Role::Operator).await?;
    Ok(Json(engine.conversation().follow_up(&id, req).await?))
}

/// The path of one message of a run.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct MessagePath {
    /// A run id.
    pub id: String,
    /// A human message of the run.
    pub message_id: String,
}

/// The edited text of a human message.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    #[schema(schema_with = runlens_engine::openapi::human_message)]
    pub message: String,
}

/// Edit an earlier human message: forks a new run and runs it.
///
/// The fork has the history up to that message and the edited message in its place; the original is untouched.
#[utoipa::path(
    post,
    path = "/api/runs/{id}/messages/{message_id}/edit",
    tag = "conversation",
    params(MessagePath),
    request_body = Edit,
    responses(
        (status = 201, description = "The fork", body = Run),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        BodyErrors,
    )
)]
async fn edit(
    State(engine): State<Engine>,
    caller: Caller,
    Path(MessagePath { id, message_id }): Path<MessagePath>,
    AppJson(req): AppJson<Edit>,
) -> Result<(StatusCode, Json<Run>), AppError> {
    caller.run(&engine, &id, Role::Operator).await?;
    let fork = engine.conversation().edit_message_by(&id, &message_id, &req.message, Some(&caller.actor)).await?;
    Ok((StatusCode::CREATED, Json(fork)))
}

/// Fork a run from any of its steps, optionally changing what a tool or the model said there, and the
/// configuration from the next turn; the fork runs at once.
///
/// The fork holds the history up to the end of step `from_step` (which must be completed). `tool_results`
/// replaces results of that step's calls by call id (`{"error": "…"}` makes one a failure); `model_output`
/// replaces the model's answer there: its tool calls run anew, with approvals as the run's policy says (a call
/// written here needs its approval even where the parent's approvers said "always"); an answer without tool
/// calls ends the fork `done` with it. `model`, `model_settings`, `system_prompt` and `tools` apply from the
/// next turn. The fork records `parent_run_id` and `forked_from_step`; the original is untouched.
#[utoipa::path(
    post,
    path = "/api/runs/{id}/fork",
    tag = "conversation",
    params(RunPath),
    request_body(content = ForkFromStep, examples(
        ("replace a result" = (summary = "What if the tool had returned this?", value = json!({
            "from_step": 3, "tool_results": {"call_1": {"temperature_c": 31}}
        }))),
        ("replace the answer" = (summary = "What if the model had called another tool?", value = json!({
            "from_step": 0, "model_output": {"text": "Let me check the weather.",
                "tool_calls": [{"name": "current_time", "arguments": {}}]}
        }))),
    )),
    responses(
        (status = 201, description = "The fork", body = Run),
        ChangeErrors,
    )
)]
async fn fork(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
    AppJson(req): AppJson<ForkFromStep>,
) -> Result<(StatusCode, Json<Run>), AppError> {
    caller.run(&engine, &id, Role::Operator).await?;
    let fork = engine.conversation().fork_from_step(&id, req, Some(&caller.actor)).await?;
    Ok((StatusCode::CREATED, Json(fork)))
}

/// Replay a finished run from its first message, as a new run: `recorded` plays the original's recorded model
/// answers (no provider call) while the tools run for real, and stops at the first step that differs; `live`
/// calls the model again and records the first step that differs.
///
/// The replay's `replay` says what it replays and, once known, `diverged_at` (a step index) and `divergence`
/// (how). It starts with no "always" decisions: every call that needs approval waits for one. A run that has
/// not finished is a 409; a recorded replay of a run that changed agents (a handoff) is a 400.
#[utoipa::path(
    post,
    path = "/api/runs/{id}/replay",
    tag = "conversation",
    params(RunPath),
    request_body(content = ReplayRequest, examples(
        ("recorded" = (summary = "The same answers, today's tools", value = json!({"mode": "recorded"}))),
        ("live" = (summary = "Ask the model again", value = json!({"mode": "live"}))),
    )),
    responses(
        (status = 201, description = "The replay", body = Run),
        ChangeErrors,
    )
)]
async fn replay(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
    AppJson(req): AppJson<ReplayRequest>,
) -> Result<(StatusCode, Json<Run>), AppError> {
    caller.run(&engine, &id, Role::Operator).await?;
    let replay = engine.runs().replay_run(&id, req, Some(&caller.actor)).await?;
    Ok((StatusCode::CREATED, Json(replay)))
}

/// The run's family: its ancestors and forks, oldest first.
#[utoipa::path(
    get,
    path = "/api/runs/{id}/family",
    tag = "conversation",
    params(RunPath),
    responses(
        (status = 200, description = "OK", body = RunFamily),
        ReadErrors,
    )
)]
async fn family(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
) -> Result<Json<RunFamily>, AppError> {
    caller.run(&engine, &id, Role::Viewer).await?;
    Ok(Json(engine.conversation().family(&id).await?))
}

/// How to send a state document.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ExportQuery {
    /// Present (any value): send it as a file to save.
    pub download: Option<String>,
}

/// The run's state document (no secrets).
///
/// `download` (any value) sends it as an attachment.
#[utoipa::path(
    get,
    path = "/api/runs/{id}/state",
    tag = "conversation",
    params(RunPath, ExportQuery),
    responses(
        (status = 200, description = "OK", body = StateDocument),
        ReadErrors,
    )
)]
async fn export(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
    AppQuery(q): AppQuery<ExportQuery>,
) -> Result<Response, AppError> {
    caller.run(&engine, &id, Role::Viewer).await?;
    let state = engine.snapshots().export_document(&id).await?;
    let mut response = Json(state).into_response();
    if q.download.is_some() {
        let disposition = format!("attachment; filename=\"run-{}.json\"", sanitize(&id));
        if let Ok(v) = disposition.parse() {
            response.headers_mut().insert(header::CONTENT_DISPOSITION, v);
        }
    }
    Ok(response)
}

crate::bounded_param!(
    /// A run's turn limit.
    Turns = 1, MAX_TURNS.into()
);

/// What an import may change from the document.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ImportQuery {
    /// `true` (or `1`) keeps the document's run id (409 if it exists); anything else makes a new one.
    #[serde(default, deserialize_with = "optional")]
    pub keep_id: Option<String>,
    /// Override: the run's turn limit.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<Turns>, inline)]
    pub max_turns: Option<Bounded<0, { u32::MAX as u64 }>>,
    /// Override: comma-separated tool names.
    #[serde(default, deserialize_with = "optional")]
    pub tools: Option<String>,
    /// Override: a configured model.
    #[serde(default, deserialize_with = "optional")]
    pub model: Option<String>,
}

/// Create a run from a state document (as exported); anything wrong is a 400 naming it and nothing is stored.
///
/// The body may be up to 64 MiB (and 2,000,000 JSON values outside blob data); at most 2 imports run at once,
/// another is refused with 503 and `Retry-After`.
#[utoipa::path(
    post,
    path = "/api/runs/import",
    tag = "conversation",
    params(ProjectHeader, ImportQuery),
    request_body = StateDocument,
    responses(
        (status = 201, description = "Created", body = Run),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 409, response = Conflict),
        BodyErrors,
        (status = 503, response = Busy),
    )
)]
async fn import(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<ImportQuery>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Run>), AppError> {
    let project = caller.require_current(Role::Operator)?.to_owned();
    let body = match body {
        Ok(body) => body,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            let error = format!("the document is over the import limit of {MAX_IMPORT_BYTES} bytes (64 MiB)");
            return Err(AppError::PayloadTooLarge(error));
        }
        Err(e) => return Err(AppError::BadRequest(format!("the request body could not be read: {}", e.body_text()))),
    };
    let opts = ImportOptions {
        keep_id: matches!(q.keep_id.as_deref(), Some("true" | "1")),
        max_turns: q.max_turns.map(Bounded::as_u32),
        tools: q.tools.map(|t| t.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect()),
        model: q.model,
        project: Some(project.clone()),
        by: Some(caller.actor.clone()),
    };
    let run = engine.snapshots().import_bytes(&body, opts).await?;
    Ok((StatusCode::CREATED, Json(run)))
}

/// The path of a blob.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct BlobPath {
    /// A blob id.
    pub id: String,
}

/// A tool result too large for the transcript (over 500 kB), as a download.
#[utoipa::path(
    get,
    path = "/api/blobs/{id}",
    tag = "conversation",
    params(BlobPath),
    responses(
        (status = 200, description = "The stored result (JSON)", body = Value, content_type = "application/json"),
        ReadErrors,
    )
)]
async fn blob(
    State(engine): State<Engine>,
    caller: Caller,
    Path(BlobPath { id }): Path<BlobPath>,
) -> Result<Response, AppError> {
    let blob = engine.conversation().blob(&id).await?;
    // Another project's blob is "not found", like a missing one.
    caller.run(&engine, &blob.run_id, Role::Viewer).await.map_err(|e| match e {
        AppError::Forbidden(m) => AppError::Forbidden(m),
        _ => AppError::NotFound(format!("blob `{id}` not found")),
    })?;
    let disposition = format!("attachment; filename=\"{}.json\"", sanitize(&blob.id));
    // Every blob is a tool result's JSON; a type stored from an older
    // import's document is not trusted.
    let json = "application/json".to_owned();
    Ok(([(header::CONTENT_TYPE, json), (header::CONTENT_DISPOSITION, disposition)], blob.data).into_response())
}

/// Keeps a file name to safe characters.
fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}
