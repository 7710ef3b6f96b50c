//! REST endpoints for conversation control: follow-ups, edit-and-fork, the
//! family tree, state export/import, and large-result blobs.
//!
//! Imports are bounded: a body of at most [`MAX_IMPORT_BYTES`], and at most
//! [`MAX_CONCURRENT_IMPORTS`] imports (REST and the runs page's form
//! together) read and stored at once; one more is answered 503 with
//! `Retry-After` before its body is read.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use runlens_engine::model::FollowUp;
use runlens_engine::{Engine, ImportOptions};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::AppError;
use super::state::AppState;

type ApiResult = Result<Response, AppError>;

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
        let body = json!({
            "error": format!(
                "the server is importing {MAX_CONCURRENT_IMPORTS} runs already; retry in {IMPORT_RETRY_AFTER_S} s"
            )
        });
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, IMPORT_RETRY_AFTER_S.to_string())],
            Json(body),
        )
            .into_response();
    };
    let response = next.run(request).await;
    drop(permit);
    response
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/runs/{id}/messages", post(follow_up))
        .route("/api/runs/{id}/messages/{message_id}/edit", post(edit))
        .route("/api/runs/{id}/family", get(family))
        .route("/api/runs/{id}/state", get(export))
        .route(
            "/api/runs/import",
            post(import).layer(DefaultBodyLimit::max(MAX_IMPORT_BYTES)).layer(middleware::from_fn(import_gate)),
        )
        .route("/api/blobs/{id}", get(blob))
}

fn parse<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<T, AppError> {
    serde_json::from_slice(body).map_err(|e| AppError::BadRequest(format!("invalid request body: {e}")))
}

async fn follow_up(State(engine): State<Engine>, Path(id): Path<String>, body: Bytes) -> ApiResult {
    let req: FollowUp = parse(&body)?;
    Ok(Json(engine.follow_up(&id, req).await?).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Edit {
    message: String,
}

async fn edit(State(engine): State<Engine>, Path((id, message_id)): Path<(String, String)>, body: Bytes) -> ApiResult {
    let req: Edit = parse(&body)?;
    let fork = engine.edit_message(&id, &message_id, &req.message).await?;
    Ok((StatusCode::CREATED, Json(fork)).into_response())
}

async fn family(State(engine): State<Engine>, Path(id): Path<String>) -> ApiResult {
    Ok(Json(engine.family(&id).await?).into_response())
}

async fn export(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let state = engine.export_document(&id).await?;
    let mut response = Json(state).into_response();
    if q.contains_key("download") {
        let disposition = format!("attachment; filename=\"run-{}.json\"", sanitize(&id));
        if let Ok(v) = disposition.parse() {
            response.headers_mut().insert(header::CONTENT_DISPOSITION, v);
        }
    }
    Ok(response)
}

async fn import(
    State(engine): State<Engine>,
    Query(q): Query<HashMap<String, String>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body = match body {
        Ok(body) => body,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            let error = format!("the document is over the import limit of {MAX_IMPORT_BYTES} bytes (64 MiB)");
            return Ok((StatusCode::PAYLOAD_TOO_LARGE, Json(json!({ "error": error }))).into_response());
        }
        Err(e) => return Err(AppError::BadRequest(format!("the request body could not be read: {}", e.body_text()))),
    };
    let text = |k: &str| q.get(k).filter(|v| !v.is_empty()).cloned();
    let max_turns = match text("max_turns") {
        None => None,
        Some(v) => Some(v.parse().map_err(|_| AppError::BadRequest(format!("max_turns `{v}` is not a number")))?),
    };
    let opts = ImportOptions {
        keep_id: matches!(text("keep_id").as_deref(), Some("true" | "1")),
        max_turns,
        tools: text("tools").map(|t| t.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect()),
        model: text("model"),
    };
    let run = engine.import_bytes(&body, opts).await?;
    Ok((StatusCode::CREATED, Json(run)).into_response())
}

async fn blob(State(engine): State<Engine>, Path(id): Path<String>) -> ApiResult {
    let blob = engine.blob(&id).await?;
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
