//! REST endpoints for conversation control: follow-ups, edit-and-fork, the
//! family tree, state export/import, and large-result blobs.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use runlens_engine::model::FollowUp;
use runlens_engine::{Engine, ImportOptions};
use serde::Deserialize;
use serde_json::Value;

use super::error::AppError;
use super::state::AppState;

type ApiResult = Result<Response, AppError>;

/// State documents carry their blobs, so imports may be much larger than
/// other request bodies.
pub const MAX_IMPORT_BYTES: usize = 64 * 1024 * 1024;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/runs/{id}/messages", post(follow_up))
        .route("/api/runs/{id}/messages/{message_id}/edit", post(edit))
        .route("/api/runs/{id}/family", get(family))
        .route("/api/runs/{id}/state", get(export))
        .route("/api/runs/import", post(import).layer(DefaultBodyLimit::max(MAX_IMPORT_BYTES)))
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

async fn import(State(engine): State<Engine>, Query(q): Query<HashMap<String, String>>, body: Bytes) -> ApiResult {
    let doc: Value = parse(&body)?;
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
    let run = engine.import_state(&doc, opts).await?;
    Ok((StatusCode::CREATED, Json(run)).into_response())
}

async fn blob(State(engine): State<Engine>, Path(id): Path<String>) -> ApiResult {
    let blob = engine.blob(&id).await?;
    let disposition = format!("attachment; filename=\"{}.json\"", sanitize(&blob.id));
    Ok(([(header::CONTENT_TYPE, blob.content_type), (header::CONTENT_DISPOSITION, disposition)], blob.data)
        .into_response())
}

/// Keeps a file name to safe characters.
fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}
