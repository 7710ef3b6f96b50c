//! The server describing itself: `GET /healthz`, the OpenAPI document
//! (`GET /api/openapi.json`) and the API reference page built from it
//! (`GET /api/docs`).

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use runlens_engine::model::RunFilter;
use runlens_engine::Engine;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::error::AppError;
use super::super::openapi::responses::*;
use super::super::openapi::{self, OpenApiDocument};
use super::super::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(health)).routes(routes!(openapi_json)).routes(routes!(docs))
}

/// How the server is.
#[derive(Clone, Copy, Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HealthStatus {
    Ok,
    /// The event log cannot be written: events wait in memory.
    Degraded,
}

/// The answer of `/healthz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    pub status: HealthStatus,
    /// Why it is degraded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// 200 once the database is open and migrated; 503 while the event log cannot be written.
///
/// The server only listens after migrations succeeded. While the event log cannot be written, events wait in
/// memory and runs publishing more wait for them (see `runlens_engine::events`).
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "server",
    responses(
        (status = 200, description = "OK", body = Health, example = json!({"status": "ok"})),
        (status = 503, description = "Degraded: the event log cannot be written", body = Health),
        (status = 500, response = Internal),
    )
)]
pub async fn health(State(engine): State<Engine>) -> Result<Response, AppError> {
    engine.runs().list_runs(&RunFilter { limit: Some(1), ..RunFilter::default() }).await?;
    if let Err(why) = engine.traces().events_health() {
        let error = Some(format!("the event log cannot be written: {why}"));
        return Ok(
            (StatusCode::SERVICE_UNAVAILABLE, Json(Health { status: HealthStatus::Degraded, error })).into_response()
        );
    }
    Ok(Json(Health { status: HealthStatus::Ok, error: None }).into_response())
}

/// This document: the API in OpenAPI 3.1, generated from the server's own types and handlers.
#[utoipa::path(
    get,
    path = "/api/openapi.json",
    tag = "server",
    responses(
        (status = 200, description = "OK", body = OpenApiDocument),
        (status = 500, response = Internal),
    )
)]
async fn openapi_json() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], openapi::document().json.as_str()).into_response()
}

/// The API reference: this document as a page (operations by resource, parameters, bodies, answers, schemas).
///
/// Served whole by the server; it loads nothing from anywhere.
#[utoipa::path(
    get,
    path = "/api/docs",
    tag = "server",
    responses(
        (status = 200, description = "The page", content_type = "text/html", body = String),
        (status = 500, response = Internal),
    )
)]
async fn docs() -> Html<&'static str> {
    Html(openapi::document().html.as_str())
}
