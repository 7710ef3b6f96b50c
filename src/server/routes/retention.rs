//! A project's retention policy: how old and how many of its runs are kept
//! (see `runlens_engine::model::Retention`); admins only. The server's
//! background job enforces it.

use axum::extract::State;
use axum::Json;
use runlens_engine::model::{Retention, Role};
use runlens_engine::Engine;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::AppJson;
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::ProjectHeader;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(retention, put_retention))
}

/// The project's retention policy (nulls: runs are kept however old and however many).
#[utoipa::path(
    get,
    path = "/api/retention",
    tag = "projects",
    params(ProjectHeader),
    responses(
        (status = 200, description = "OK", body = Retention),
        (status = 403, response = Forbidden),
        (status = 500, response = Internal),
    )
)]
async fn retention(State(engine): State<Engine>, caller: Caller) -> Result<Json<Retention>, AppError> {
    let project = caller.require_current(Role::Admin)?;
    Ok(Json(engine.retention(project).await?))
}

/// Set the project's retention policy (recorded in its audit log).
///
/// Finished runs (done, failed, cancelled) created more than `max_age_days` ago, or older than the newest
/// `max_runs` root runs, are deleted with their child runs and everything recorded of them (steps, calls,
/// messages, events, decisions, grants, blobs, an ingested trace's spans) by a background job, in small batches
/// every few minutes; paused and running runs are kept. Emails sent, webhook deliveries and the audit log are
/// kept. Both null: nothing is deleted.
#[utoipa::path(
    put,
    path = "/api/retention",
    tag = "projects",
    params(ProjectHeader),
    request_body(content = Retention, example = json!({"max_age_days": 30, "max_runs": 100000})),
    responses(
        (status = 200, description = "The policy stored", body = Retention),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        BodyErrors,
    )
)]
async fn put_retention(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(policy): AppJson<Retention>,
) -> Result<Json<Retention>, AppError> {
    let project = caller.require_current(Role::Admin)?;
    Ok(Json(engine.set_retention(project, policy, &caller.actor).await?))
}
