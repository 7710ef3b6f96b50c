//! Online evaluators of the current project (`/api/evaluators…`): scorers
//! that score a sample of the runs that end from now on — of an agent, a
//! tag, an ingested service, or all. Their scores land on the runs, so the
//! runs list shows and filters them (`score=NAME…`).
//!
//! Making, changing and deleting one is an operator's (audited); reading is
//! a viewer's. Another project's evaluator is a 404, like one that does not exist.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use runlens_engine::model::{Evaluator, EvaluatorList, NewEvaluator, Role};
use runlens_engine::Engine;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::AppJson;
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::ProjectHeader;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_evaluators, create_evaluator)).routes(routes!(
        get_evaluator,
        update_evaluator,
        delete_evaluator
    ))
}

/// The path of an evaluator.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct EvaluatorPath {
    /// An evaluator's id.
    pub id: String,
}

/// The project's evaluators, by name (at most 50), with the runs each has looked at and scored.
#[utoipa::path(
    get,
    path = "/api/evaluators",
    tag = "evaluators",
    params(ProjectHeader),
    responses(
        (status = 200, description = "OK", body = EvaluatorList),
        (status = 500, response = Internal),
    )
)]
async fn list_evaluators(State(engine): State<Engine>, caller: Caller) -> Result<Json<EvaluatorList>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    Ok(Json(EvaluatorList { evaluators: engine.evaluators().list(project).await? }))
}

/// Score a sample of the runs that end from now on (operators and above).
///
/// `target` picks the runs (an agent, a tag `key:value`, an ingested service; none: all of the project's, never
/// a judge's own); `sample_percent` the share scored, the same runs whatever happens (chosen by run id). The
/// scorers are a run's evaluation (`POST /api/runs/{id}/evaluate`), without a dataset's expected value: one
/// that needs it gives its own. A judge scores from a run of its own.
#[utoipa::path(
    post,
    path = "/api/evaluators",
    tag = "evaluators",
    params(ProjectHeader),
    request_body(content = NewEvaluator, example = json!({
        "name": "helpfulness in production",
        "target": {"tag": "env:prod"},
        "sample_percent": 10,
        "scorers": [{"name": "helpful", "scorer": {"kind": "judge", "rubric": "Answers the question asked."}}]
    })),
    responses(
        (status = 201, description = "Made", body = Evaluator),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 409, response = Conflict),
        BodyErrors,
    )
)]
async fn create_evaluator(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(body): AppJson<NewEvaluator>,
) -> Result<(StatusCode, Json<Evaluator>), AppError> {
    let project = caller.require_current(Role::Operator)?;
    Ok((StatusCode::CREATED, Json(engine.evaluators().create(project, body, &caller.actor).await?)))
}

/// An evaluator.
#[utoipa::path(
    get,
    path = "/api/evaluators/{id}",
    tag = "evaluators",
    params(ProjectHeader, EvaluatorPath),
    responses(
        (status = 200, description = "OK", body = Evaluator),
        ReadErrors,
    )
)]
async fn get_evaluator(
    State(engine): State<Engine>,
    caller: Caller,
    Path(EvaluatorPath { id }): Path<EvaluatorPath>,
) -> Result<Json<Evaluator>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    Ok(Json(engine.evaluators().get(project, &id).await?))
}

/// Change an evaluator's settings, or turn it off or on (operators and above).
///
/// Turned on again, it watches the runs that end from then on, not those that ended while it was off.
#[utoipa::path(
    put,
    path = "/api/evaluators/{id}",
    tag = "evaluators",
    params(ProjectHeader, EvaluatorPath),
    request_body = NewEvaluator,
    responses(
        (status = 200, description = "Changed", body = Evaluator),
        ChangeErrors,
    )
)]
async fn update_evaluator(
    State(engine): State<Engine>,
    caller: Caller,
    Path(EvaluatorPath { id }): Path<EvaluatorPath>,
    AppJson(body): AppJson<NewEvaluator>,
) -> Result<Json<Evaluator>, AppError> {
    let project = caller.require_current(Role::Operator)?;
    Ok(Json(engine.evaluators().update(project, &id, body, &caller.actor).await?))
}

/// Delete an evaluator (operators and above); the scores it gave stay.
#[utoipa::path(
    delete,
    path = "/api/evaluators/{id}",
    tag = "evaluators",
    params(ProjectHeader, EvaluatorPath),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        BodyErrors,
    )
)]
async fn delete_evaluator(
    State(engine): State<Engine>,
    caller: Caller,
    Path(EvaluatorPath { id }): Path<EvaluatorPath>,
) -> Result<StatusCode, AppError> {
    let project = caller.require_current(Role::Operator)?;
    engine.evaluators().delete(project, &id, &caller.actor).await?;
    Ok(StatusCode::NO_CONTENT)
}
