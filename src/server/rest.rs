//! The JSON REST API under `/api`.
//!
//! Bodies are parsed here (not by axum's `Json` extractor) so every malformed
//! body, wrong type or unknown field is a 400 with serde's own explanation.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use runlens_engine::model::{CreateRun, DecisionRequest, RunFilter, RunStatus};
use runlens_engine::paging::MAX_STEP_PAGE;
use runlens_engine::Engine;
use serde_json::json;

use super::error::AppError;
use super::state::AppState;
use super::traces::optional_number;

type ApiResult = Result<Response, AppError>;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/runs", post(create_run).get(list_runs))
        .route("/api/runs/{id}", get(get_run))
        .route("/api/runs/{id}/messages", get(messages))
        .route("/api/runs/{id}/cancel", post(cancel))
        .route("/api/runs/{id}/tool-calls/{call_id}/approve", post(approve))
        .route("/api/runs/{id}/tool-calls/{call_id}/reject", post(reject))
        .route("/api/approvals", get(approvals))
        .route("/api/tools", get(tools))
        .route("/api/models", get(models))
        .route("/api/outbox", get(outbox))
        .route("/api/openapi.json", get(openapi))
}

/// 200 once the server runs; it only listens after migrations succeeded.
/// 503 while the event log cannot be written (events then wait in memory,
/// and runs publishing more wait for them: see `runlens_engine::events`).
pub async fn health(State(engine): State<Engine>) -> ApiResult {
    engine.list_runs(&RunFilter { limit: Some(1), ..RunFilter::default() }).await?;
    if let Err(why) = engine.events_health() {
        let body = json!({ "status": "degraded", "error": format!("the event log cannot be written: {why}") });
        return Ok((StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response());
    }
    Ok(Json(json!({ "status": "ok" })).into_response())
}

async fn create_run(State(engine): State<Engine>, body: Bytes) -> ApiResult {
    let req: CreateRun =
        serde_json::from_slice(&body).map_err(|e| AppError::BadRequest(format!("invalid request body: {e}")))?;
    let (run, created) = engine.create_run(req).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(run)).into_response())
}

async fn list_runs(State(engine): State<Engine>, Query(q): Query<HashMap<String, String>>) -> ApiResult {
    let text = |k: &str| q.get(k).filter(|v| !v.is_empty()).cloned();
    let status = match text("status") {
        None => None,
        Some(s) => Some(RunStatus::parse(&s).ok_or_else(|| {
            let all: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
            AppError::BadRequest(format!("unknown status `{s}`; one of {}", all.join(", ")))
        })?),
    };
    let limit = match text("limit") {
        None => None,
        Some(l) => Some(
            l.parse::<u32>()
                .ok()
                .filter(|n| (1..=200).contains(n))
                .ok_or_else(|| AppError::BadRequest(format!("limit must be a number from 1 to 200, not `{l}`")))?,
        ),
    };
    let filter =
        RunFilter { status, agent_id: text("agent_id"), tag: text("tag"), q: text("q"), limit, cursor: text("cursor") };
    let (page, pricing) = tokio::try_join!(engine.list_runs(&filter), engine.pricing())?;
    Ok(Json(super::traces::priced_page(&page, &pricing)).into_response())
}

async fn get_run(State(engine): State<Engine>, Path(id): Path<String>) -> ApiResult {
    let (run, pricing) = tokio::try_join!(engine.get_run(&id), engine.pricing())?;
    Ok(Json(super::traces::priced_run(&run, &pricing)).into_response())
}

/// The transcript: whole by default (`{"messages"}`); `?tail=N` the last N
/// with `total`; `?from=SEQ&limit=N` a page with `next_from` while more follow.
async fn messages(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let page_max = u64::from(MAX_STEP_PAGE);
    let (tail, from, limit) = (
        optional_number(&q, "tail", 1..=page_max)?,
        optional_number(&q, "from", 0..=u64::MAX)?,
        optional_number(&q, "limit", 1..=page_max)?,
    );
    let body = match (tail, from, limit) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(AppError::BadRequest("`tail` cannot be combined with `from` or `limit`".into()))
        }
        (Some(n), None, None) => {
            let (messages, total) = engine.messages_tail(&id, n as u32).await?;
            json!({ "messages": messages, "total": total })
        }
        (None, None, None) => json!({ "messages": engine.messages(&id).await? }),
        (None, from, limit) => {
            let (messages, next_from) =
                engine.messages_page(&id, from.unwrap_or(0), limit.map_or(MAX_STEP_PAGE, |n| n as u32)).await?;
            let mut body = json!({ "messages": messages });
            if let Some(next) = next_from {
                body["next_from"] = json!(next);
            }
            body
        }
    };
    Ok(Json(body).into_response())
}

async fn cancel(State(engine): State<Engine>, Path(id): Path<String>) -> ApiResult {
    Ok(Json(engine.cancel(&id).await?).into_response())
}

/// Who decided, as recorded in the audit trail. There are no API keys yet,
/// so every REST decision is recorded as `api` (the web UI records `web`).
const API_DECIDER: &str = "api";

fn decision_body(body: &Bytes) -> Result<DecisionRequest, AppError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(DecisionRequest::default());
    }
    serde_json::from_slice(body).map_err(|e| AppError::BadRequest(format!("invalid request body: {e}")))
}

async fn approve(State(engine): State<Engine>, Path((id, call)): Path<(String, String)>, body: Bytes) -> ApiResult {
    let req = decision_body(&body)?;
    Ok(Json(engine.approve(&id, &call, req, API_DECIDER).await?).into_response())
}

async fn reject(State(engine): State<Engine>, Path((id, call)): Path<(String, String)>, body: Bytes) -> ApiResult {
    let req = decision_body(&body)?;
    Ok(Json(engine.reject(&id, &call, req, API_DECIDER).await?).into_response())
}

async fn approvals(State(engine): State<Engine>, Query(q): Query<HashMap<String, String>>) -> ApiResult {
    match q.get("status").map(String::as_str) {
        None | Some("") | Some("pending") => {}
        Some(other) => return Err(AppError::BadRequest(format!("status `{other}` is not supported; use `pending`"))),
    }
    let now = chrono::Utc::now();
    let pending: Vec<serde_json::Value> = engine
        .pending_approvals()
        .await?
        .into_iter()
        .map(|i| {
            let age_s = (now - i.requested_at).num_seconds().max(0);
            let mut v = serde_json::to_value(i).unwrap_or_default();
            v["age_s"] = json!(age_s);
            v
        })
        .collect();
    Ok(Json(json!({ "approvals": pending })).into_response())
}

async fn tools(State(engine): State<Engine>) -> ApiResult {
    Ok(Json(json!({ "tools": engine.tools() })).into_response())
}

async fn models(State(engine): State<Engine>) -> ApiResult {
    Ok(Json(json!({ "models": engine.models(), "default": "builtin" })).into_response())
}

async fn outbox(State(engine): State<Engine>) -> ApiResult {
    Ok(Json(json!({ "emails": engine.outbox(100).await? })).into_response())
}

async fn openapi() -> Response {
    ([(axum::http::header::CONTENT_TYPE, "application/json")], include_str!("openapi.json")).into_response()
}
