//! Sessions: the runs of one conversation or thread, with their totals
//! (`GET /api/sessions/{id}`). A run joins a session by `session_id` at
//! create, or by what an ingested trace's spans name (`session.id`,
//! `gen_ai.conversation.id`…). A session is the current project's: the same
//! id in another project is that project's session, and one no run has is
//! empty, never a 404 that would say whether another project uses it.

use axum::extract::{Path, State};
use axum::Json;
use runlens_engine::model::{limits::MAX_SESSION_ID_CHARS, Role, Session};
use runlens_engine::openapi::raw;
use runlens_engine::Engine;
use serde::Deserialize;
use serde_json::json;
use utoipa::openapi::{RefOr, Schema};
use utoipa::{IntoParams, PartialSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::ProjectHeader;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_session))
}

/// A session id's schema: 1 to 128 characters.
pub struct SessionIdText;

impl PartialSchema for SessionIdText {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "string", "minLength": 1, "maxLength": MAX_SESSION_ID_CHARS })))
    }
}

/// The path of a session.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SessionPath {
    /// A session id: the `session_id` of its runs (1 to 128 characters, no control characters).
    #[param(value_type = SessionIdText, inline)]
    pub id: String,
}

/// A session: its runs, oldest first, and what they add up to.
///
/// The session's root runs in the current project, oldest first: its latest 200 at most (`truncated` is true
/// when it has more), each with its cost at today's prices in `costs_usd` (null where the model has no price).
/// `totals` sums their tokens, cost and active time, counts them by status and with issues (a call rejected
/// or failed, stopped by `max_turns`, failed or cancelled), and lists the end users they served. A session no
/// run of the project has is empty (200).
#[utoipa::path(
    get,
    path = "/api/sessions/{id}",
    tag = "runs",
    params(ProjectHeader, SessionPath),
    responses(
        (status = 200, description = "OK", body = Session),
        (status = 400, response = BadRequest),
        (status = 500, response = Internal),
    )
)]
async fn get_session(
    State(engine): State<Engine>,
    caller: Caller,
    Path(SessionPath { id }): Path<SessionPath>,
) -> Result<Json<Session>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    Ok(Json(engine.runs().session(project, &id).await?))
}
