//! `AppError`: what an API handler can fail with, as a JSON response.
//!
//! Client errors carry their message (`{"error": "..."}`); internal errors
//! are logged with their details and answered with a generic message, so
//! database paths or SQL never leak to clients.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use runlens_engine::EngineError;
use serde_json::json;

#[derive(Debug)]
pub enum AppError {
    BadRequest(String),
    NotFound(String),
    Conflict(String),
    /// A 409 that also carries the decision that won.
    AlreadyDecided(String, serde_json::Value),
    Internal(String),
}

impl From<EngineError> for AppError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Invalid(m) => AppError::BadRequest(m),
            EngineError::NotFound(what) => AppError::NotFound(format!("{what} not found")),
            EngineError::Conflict(m) => AppError::Conflict(m),
            EngineError::AlreadyDecided { message, decision } => {
                AppError::AlreadyDecided(message, serde_json::to_value(decision).unwrap_or_default())
            }
            EngineError::Transition(t) => AppError::Conflict(t.to_string()),
            other => AppError::Internal(other.to_string()),
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        if let AppError::AlreadyDecided(message, decision) = self {
            let body = json!({ "error": message, "decision": decision });
            return (StatusCode::CONFLICT, Json(body)).into_response();
        }
        let (status, message) = match self {
            AppError::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            AppError::NotFound(m) => (StatusCode::NOT_FOUND, m),
            AppError::Conflict(m) | AppError::AlreadyDecided(m, _) => (StatusCode::CONFLICT, m),
            AppError::Internal(details) => {
                tracing::error!(%details, "internal error");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal error; see the server log".to_owned())
            }
        };
        (status, Json(json!({ "error": message }))).into_response()
    }
}
