//! Errors of the HTTP layer, and the one classification of engine errors.
//!
//! [`ClientError::from_engine`] decides, for every [`EngineError`], the
//! status and what a client is told: the engine's own message for bad input
//! (400), a missing run or call (404), a wrong state (409, with the winning
//! decision when a decision lost a race); anything else (the store failed)
//! is logged here with its details and answered with [`INTERNAL_MESSAGE`],
//! so database paths or SQL never leak. The REST handlers ([`AppError`]),
//! the page forms (`routes::forms`) and the Leptos server functions
//! (`crate::api`) all go through it.
//!
//! [`AppError`] is what an API handler fails with, answered as
//! [`ErrorBody`] JSON (`{"error": "…"}`).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use runlens_engine::model::ApprovalDecision;
use runlens_engine::EngineError;
use serde::Serialize;

/// What a client is told about an internal error; the details go to the log.
pub const INTERNAL_MESSAGE: &str = "internal error; see the server log";

pub use crate::api::ErrorKind;

impl ErrorKind {
    pub fn status(self) -> StatusCode {
        match self {
            ErrorKind::Invalid => StatusCode::BAD_REQUEST,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Conflict | ErrorKind::AlreadyDecided => StatusCode::CONFLICT,
            ErrorKind::Forbidden => StatusCode::FORBIDDEN,
            ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The kind of an answer with `status` (a refusal by a guard).
    pub fn of_status(status: StatusCode) -> ErrorKind {
        match status {
            StatusCode::BAD_REQUEST => ErrorKind::Invalid,
            StatusCode::NOT_FOUND => ErrorKind::NotFound,
            StatusCode::CONFLICT => ErrorKind::Conflict,
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => ErrorKind::Forbidden,
            _ => ErrorKind::Internal,
        }
    }
}

/// An engine error as a client may see it.
#[derive(Debug)]
pub struct ClientError {
    pub kind: ErrorKind,
    pub message: String,
    /// For [`ErrorKind::AlreadyDecided`]: the decision that won (`None` when
    /// the call needed none).
    pub decision: Option<Box<ApprovalDecision>>,
}

impl ClientError {
    /// Classifies `err`. An internal error is logged here, with `doing` (what
    /// failed, like "deciding a tool call") and its details.
    pub fn from_engine(err: EngineError, doing: &str) -> ClientError {
        let client = |kind, message: String| ClientError { kind, message, decision: None };
        match err {
            EngineError::Invalid(message) => client(ErrorKind::Invalid, message),
            e @ EngineError::NotFound(_) => client(ErrorKind::NotFound, e.to_string()),
            EngineError::Conflict(message) => client(ErrorKind::Conflict, message),
            EngineError::Transition(t) => client(ErrorKind::Conflict, t.to_string()),
            EngineError::Forbidden(message) => client(ErrorKind::Forbidden, message),
            EngineError::AlreadyDecided { message, decision } => {
                ClientError { kind: ErrorKind::AlreadyDecided, message, decision }
            }
            internal @ (EngineError::Store(_)
            | EngineError::Migrate(_)
            | EngineError::Internal(_)
            | EngineError::LeaseLost(_)) => {
                tracing::error!(error = %internal, "{doing} failed");
                client(ErrorKind::Internal, INTERNAL_MESSAGE.to_owned())
            }
        }
    }

    pub fn status(&self) -> StatusCode {
        self.kind.status()
    }
}

/// Every error answer of the API: what was wrong, naming the field and its
/// bound. `decision` is there only on a 409 for a call that is not awaiting
/// a decision: the decision that won (null when the call needed none).
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody {
    /// What was wrong, naming the field and its bound.
    pub error: String,
    /// On a 409 for a call not awaiting approval: the decision that won
    /// (null when it needed none).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<ApprovalDecision>)]
    pub decision: Option<Option<Box<ApprovalDecision>>>,
}

impl ErrorBody {
    pub fn new(error: impl Into<String>) -> Self {
        ErrorBody { error: error.into(), decision: None }
    }

    /// The JSON answer with `status`.
    pub fn answer(self, status: StatusCode) -> Response {
        (status, Json(self)).into_response()
    }
}

/// What an API handler (or one of its extractors) can fail with.
#[derive(Debug)]
pub enum AppError {
    /// 400: bad input; the message names the field and its bound.
    BadRequest(String),
    /// 404.
    NotFound(String),
    /// 401 with `WWW-Authenticate: Bearer`: no (valid) credentials.
    Unauthorized(String),
    /// 403: signed in, but the role does not allow it (the message names
    /// the role needed), or a cross-origin request.
    Forbidden(String),
    /// 429 with `Retry-After` (seconds): too many failed sign-ins.
    TooManyRequests { message: String, retry_after_s: u64 },
    /// 413: the body is over the limit.
    PayloadTooLarge(String),
    /// 415: the body is not JSON.
    UnsupportedMediaType(String),
    /// 503 with `Retry-After` (seconds): too busy for this now.
    Busy { message: String, retry_after_s: u64 },
    /// An engine error, classified.
    Engine(ClientError),
}

impl From<EngineError> for AppError {
    fn from(e: EngineError) -> Self {
        AppError::Engine(ClientError::from_engine(e, "an API request"))
    }
}

impl AppError {
    /// The status and message this error answers with.
    pub fn status_and_message(&self) -> (StatusCode, String) {
        match self {
            AppError::BadRequest(m) => (StatusCode::BAD_REQUEST, m.clone()),
            AppError::NotFound(m) => (StatusCode::NOT_FOUND, m.clone()),
            AppError::Unauthorized(m) => (StatusCode::UNAUTHORIZED, m.clone()),
            AppError::Forbidden(m) => (StatusCode::FORBIDDEN, m.clone()),
            AppError::TooManyRequests { message, .. } => (StatusCode::TOO_MANY_REQUESTS, message.clone()),
            AppError::PayloadTooLarge(m) => (StatusCode::PAYLOAD_TOO_LARGE, m.clone()),
            AppError::UnsupportedMediaType(m) => (StatusCode::UNSUPPORTED_MEDIA_TYPE, m.clone()),
            AppError::Busy { message, .. } => (StatusCode::SERVICE_UNAVAILABLE, message.clone()),
            AppError::Engine(e) => (e.status(), e.message.clone()),
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            AppError::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            AppError::NotFound(m) => (StatusCode::NOT_FOUND, m),
            AppError::Forbidden(m) => (StatusCode::FORBIDDEN, m),
            AppError::Unauthorized(m) => {
                let mut response = ErrorBody::new(m).answer(StatusCode::UNAUTHORIZED);
                response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
                return response;
            }
            AppError::TooManyRequests { message, retry_after_s } => {
                let mut response = ErrorBody::new(message).answer(StatusCode::TOO_MANY_REQUESTS);
                response.headers_mut().insert(header::RETRY_AFTER, retry_after_s.into());
                return response;
            }
            AppError::PayloadTooLarge(m) => (StatusCode::PAYLOAD_TOO_LARGE, m),
            AppError::UnsupportedMediaType(m) => (StatusCode::UNSUPPORTED_MEDIA_TYPE, m),
            AppError::Busy { message, retry_after_s } => {
                let mut response = ErrorBody::new(message).answer(StatusCode::SERVICE_UNAVAILABLE);
                response.headers_mut().insert(header::RETRY_AFTER, retry_after_s.into());
                return response;
            }
            AppError::Engine(e) if e.kind == ErrorKind::AlreadyDecided => {
                let body = ErrorBody { error: e.message, decision: Some(e.decision) };
                return body.answer(StatusCode::CONFLICT);
            }
            AppError::Engine(e) => (e.status(), e.message),
        };
        ErrorBody::new(message).answer(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runlens_engine::model::RunStatus;
    use runlens_engine::status::IllegalTransition;

    #[test]
    fn engine_errors_are_classified_once() {
        let cases = [
            (EngineError::Invalid("bad".into()), StatusCode::BAD_REQUEST, "bad"),
            (EngineError::NotFound("run `x`".into()), StatusCode::NOT_FOUND, "run `x` not found"),
            (EngineError::Conflict("busy".into()), StatusCode::CONFLICT, "busy"),
            (
                EngineError::Transition(IllegalTransition { from: RunStatus::Done, to: RunStatus::Paused }),
                StatusCode::CONFLICT,
                "a done run cannot become paused",
            ),
            (
                EngineError::AlreadyDecided { message: "decided".into(), decision: None },
                StatusCode::CONFLICT,
                "decided",
            ),
            (EngineError::Store(sqlx_error()), StatusCode::INTERNAL_SERVER_ERROR, INTERNAL_MESSAGE),
        ];
        for (err, status, message) in cases {
            let client = ClientError::from_engine(err, "testing");
            assert_eq!((client.status(), client.message.as_str()), (status, message));
        }
    }

    #[test]
    fn an_internal_error_never_shows_its_details() {
        let client = ClientError::from_engine(EngineError::Store(sqlx_error()), "testing");
        assert_eq!(client.kind, ErrorKind::Internal);
        assert!(!client.message.contains("secret.db"), "{}", client.message);
    }

    fn sqlx_error() -> sqlx::Error {
        sqlx::Error::Configuration("cannot open /var/secret.db".into())
    }
}
