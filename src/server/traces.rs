//! REST for huge traces and costs: paged steps with a light mode, one tool
//! call in full, the price table, and `cost_usd` on runs and steps.
//!
//! - `GET /api/runs/{id}/steps?from=0&limit=1000&payloads=true`
//!   → `{"steps": [...], "next_from": 1000}` (`next_from` only when more follow;
//!   without `limit` a run of up to 1,000 steps comes whole, as before).
//!   `payloads=false` cuts long payloads to a preview and flags each cut
//!   field with `<field>_truncated: true` (see `runlens_engine::view`).
//! - `GET /api/runs/{id}/outline` → `{"steps": [...]}`: every step without
//!   payloads (index, kind, status, model, usage, timings, `cost_usd`, and
//!   each call's id, tool, status and timings) — one read for a whole tree,
//!   timeline or token chart of a long run.
//! - `GET /api/runs/{id}/tool-calls/{call_id}` → the call with full payloads.
//! - `GET /api/prices`, `PUT /api/prices/{model}`, `DELETE /api/prices/{model}`
//!   (a model name may contain `/`).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use runlens_engine::cost::{PriceInput, Pricing};
use runlens_engine::model::{Run, RunPage};
use runlens_engine::paging::{light_step, DEFAULT_STEP_PAGE, MAX_STEP_PAGE};
use runlens_engine::Engine;
use serde_json::{json, Value};

use super::error::AppError;
use super::state::AppState;

type ApiResult = Result<Response, AppError>;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/runs/{id}/steps", get(steps))
        .route("/api/runs/{id}/outline", get(outline))
        .route("/api/runs/{id}/tool-calls/{call_id}", get(tool_call))
        .route("/api/prices", get(prices))
        .route("/api/prices/{*model}", get(price).put(put_price).delete(delete_price))
}

/// A run as JSON with `cost_usd` (null when its model has no price).
pub fn priced_run(run: &Run, pricing: &Pricing) -> Value {
    let mut v = serde_json::to_value(run).unwrap_or_default();
    v["cost_usd"] = json!(pricing.run_cost_usd(run));
    v
}

/// A page of runs as JSON, each with `cost_usd`.
pub fn priced_page(page: &RunPage, pricing: &Pricing) -> Value {
    let runs: Vec<Value> = page.runs.iter().map(|r| priced_run(r, pricing)).collect();
    json!({ "runs": runs, "next_cursor": page.next_cursor })
}

/// `q[key]` as a number within `range`; `None` when absent or empty.
pub(super) fn optional_number(
    q: &HashMap<String, String>,
    key: &str,
    range: std::ops::RangeInclusive<u64>,
) -> Result<Option<u64>, AppError> {
    let Some(v) = q.get(key).filter(|v| !v.is_empty()) else { return Ok(None) };
    match v.parse() {
        Ok(n) if range.contains(&n) => Ok(Some(n)),
        _ => Err(AppError::BadRequest(format!(
            "{key} must be a number from {} to {}, not `{v}`",
            range.start(),
            range.end()
        ))),
    }
}

/// `q[key]` as a number within `range`, or `default` when absent or empty.
fn number(
    q: &HashMap<String, String>,
    key: &str,
    default: u32,
    range: std::ops::RangeInclusive<u32>,
) -> Result<u32, AppError> {
    let wide = u64::from(*range.start())..=u64::from(*range.end());
    Ok(optional_number(q, key, wide)?.map_or(default, |n| n as u32))
}

async fn steps(
    State(engine): State<Engine>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let from = number(&q, "from", 0, 0..=u32::MAX)?;
    let limit = number(&q, "limit", DEFAULT_STEP_PAGE, 1..=MAX_STEP_PAGE)?;
    let payloads = match q.get("payloads").map(String::as_str) {
        None | Some("") | Some("true") | Some("1") => true,
        Some("false") | Some("0") => false,
        Some(other) => return Err(AppError::BadRequest(format!("payloads must be true or false, not `{other}`"))),
    };
    let run = engine.run_head(&id).await?;
    let (page, pricing) = tokio::try_join!(engine.steps_page(&id, from, limit), engine.pricing())?;
    let steps: Vec<Value> = page
        .steps
        .iter()
        .map(|s| {
            let mut v = if payloads { serde_json::to_value(s).unwrap_or_default() } else { light_step(s) };
            v["cost_usd"] = json!(pricing.step_cost_usd(&run.model, s));
            v
        })
        .collect();
    let mut body = json!({ "steps": steps });
    if let Some(next) = page.next_from {
        body["next_from"] = json!(next);
    }
    Ok(Json(body).into_response())
}

async fn outline(State(engine): State<Engine>, Path(id): Path<String>) -> ApiResult {
    let ((run, outline), pricing) = tokio::try_join!(engine.step_outline(&id), engine.pricing())?;
    let steps: Vec<Value> = outline
        .iter()
        .map(|s| {
            let mut v = serde_json::to_value(s).unwrap_or_default();
            v["cost_usd"] = json!(pricing.outline_cost_usd(&run.model, s));
            v
        })
        .collect();
    Ok(Json(json!({ "steps": steps })).into_response())
}

async fn tool_call(State(engine): State<Engine>, Path((id, call_id)): Path<(String, String)>) -> ApiResult {
    Ok(Json(engine.tool_call(&id, &call_id).await?).into_response())
}

async fn prices(State(engine): State<Engine>) -> ApiResult {
    Ok(Json(json!({ "prices": engine.pricing().await?.prices })).into_response())
}

async fn price(State(engine): State<Engine>, Path(model): Path<String>) -> ApiResult {
    let pricing = engine.pricing().await?;
    let price = pricing.prices.into_iter().find(|p| p.model == model);
    let price = price.ok_or_else(|| AppError::NotFound(format!("price of model `{model}` not found")))?;
    Ok(Json(price).into_response())
}

async fn put_price(State(engine): State<Engine>, Path(model): Path<String>, body: Bytes) -> ApiResult {
    let input: PriceInput =
        serde_json::from_slice(&body).map_err(|e| AppError::BadRequest(format!("invalid request body: {e}")))?;
    Ok(Json(engine.set_price(&model, input).await?).into_response())
}

async fn delete_price(State(engine): State<Engine>, Path(model): Path<String>) -> ApiResult {
    engine.delete_price(&model).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
