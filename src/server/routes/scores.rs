//! Scores on runs: attach one (`POST /api/scores`), read a run's, delete one.
//!
//! Any program with a key can score any run of its project, ingested runs
//! included; scoring is an operator's (a viewer reads scores, never gives
//! them). A score is the caller's: its author deletes it, and so does an
//! admin of the project. Another project's run or score is a 404, like one
//! that does not exist. Every score added or deleted is audited.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use runlens_engine::model::{EvaluateRun, NewScore, Role, Score, ScoreSource, ScoreSummary};
use runlens_engine::Engine;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::{Caller, Via};
use super::super::error::AppError;
use super::super::extract::AppJson;
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::{ProjectHeader, RunPath};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(add_score))
        .routes(routes!(run_scores))
        .routes(routes!(delete_score))
        .routes(routes!(evaluate_run))
}

/// Where a score comes from, as the caller is: a program's key, or a person.
pub fn source_of(caller: &Caller) -> ScoreSource {
    match caller.via {
        Via::Key => ScoreSource::Api,
        _ => ScoreSource::Human,
    }
}

/// Score a run, or one of its steps (`step_index`) or tool calls (`call_id`): operators and above.
///
/// `value` is a number (`0.8`), a yes/no (`true`) or a label (`"relevant"`). Any run of the caller's project
/// can be scored, ingested ones too; the score records who gave it (`source` `api` for a key, `human` for a
/// signed-in person). A run holds at most 1,000 scores (409 past it).
#[utoipa::path(
    post,
    path = "/api/scores",
    tag = "scores",
    request_body(content = NewScore, example = json!({
        "run_id": "0190c0de-0000-7000-8000-000000000001",
        "name": "correct",
        "value": true,
        "comment": "matches the reference answer"
    })),
    responses(
        (status = 201, description = "Kept", body = Score),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        BodyErrors,
    )
)]
async fn add_score(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(body): AppJson<NewScore>,
) -> Result<(StatusCode, Json<Score>), AppError> {
    let head = caller.run(&engine, &body.run_id, Role::Operator).await?;
    let score = engine.scores().add(&head.project, body, source_of(&caller), None, &caller.actor).await?;
    Ok((StatusCode::CREATED, Json(score)))
}

/// A run's scores, oldest first, with a summary per score name.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunScores {
    pub scores: Vec<Score>,
    /// Per name: how many, the mean of numbers and yes/no (yes = 1), and the labels given.
    pub summary: Vec<ScoreSummary>,
}

/// A run's scores (at most 1,000), oldest first, with a summary per score name.
#[utoipa::path(
    get,
    path = "/api/runs/{id}/scores",
    tag = "scores",
    params(RunPath),
    responses(
        (status = 200, description = "OK", body = RunScores),
        ReadErrors,
    )
)]
async fn run_scores(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
) -> Result<Json<RunScores>, AppError> {
    let head = caller.run(&engine, &id, Role::Viewer).await?;
    let scores = engine.scores().of_run(&head.project, &id).await?;
    let summary = ScoreSummary::of(&scores);
    Ok(Json(RunScores { scores, summary }))
}

/// The path of a score.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ScorePath {
    /// A score's id.
    pub id: String,
}

/// Delete a score of the current project: its author (an operator or above), or an admin.
#[utoipa::path(
    delete,
    path = "/api/scores/{id}",
    tag = "scores",
    params(ProjectHeader, ScorePath),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        BodyErrors,
    )
)]
async fn delete_score(
    State(engine): State<Engine>,
    caller: Caller,
    Path(ScorePath { id }): Path<ScorePath>,
) -> Result<StatusCode, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    let score = engine.scores().get(project, &id).await?;
    // Its author while still an operator; anyone else needs the admin role.
    if score.author.id != caller.actor.id || !caller.can(project, Role::Operator) {
        caller.require(project, Role::Admin)?;
    }
    engine.scores().delete(project, &id, &caller.actor).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The scores an evaluation kept, in the order of its scorers.
#[derive(Debug, Serialize, ToSchema)]
pub struct Evaluated {
    pub scores: Vec<Score>,
}

/// Score an ended run with built-in scorers (operators and above): each verdict is kept as a score.
///
/// Scorers: `exact`, `contains`, `not_contains`, `regex`, `json_schema`, `json_equal` (with `ignore_paths`),
/// `numeric` (within `tolerance`), `tool_calls` (names, order, arguments subset; the fraction matched) and
/// `bounds` (duration, cost, turns). A scorer without its own `expected` uses the body's. Each score is named
/// `name` (or the scorer's kind), with `source` `scorer` and the verdict's reason as its `comment`. All or
/// nothing: a scorer that cannot be applied is a 400 naming it (`scorers[1]: …`) and keeps nothing; a run that
/// has not ended is a 409.
#[utoipa::path(
    post,
    path = "/api/runs/{id}/evaluate",
    tag = "scores",
    params(RunPath),
    request_body(content = EvaluateRun, example = json!({
        "scorers": [
            {"name": "correct", "scorer": {"kind": "exact", "ignore_case": true}},
            {"scorer": {"kind": "tool_calls", "expected": [{"name": "calculator"}]}},
            {"scorer": {"kind": "bounds", "max_turns": 4, "max_cost_usd": 0.05}}
        ],
        "expected": "3"
    })),
    responses(
        (status = 201, description = "The scores kept", body = Evaluated),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        BodyErrors,
    )
)]
async fn evaluate_run(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
    AppJson(body): AppJson<EvaluateRun>,
) -> Result<(StatusCode, Json<Evaluated>), AppError> {
    let head = caller.run(&engine, &id, Role::Operator).await?;
    let scores = engine.scores().evaluate(&head.project, &id, body, &caller.actor).await?;
    Ok((StatusCode::CREATED, Json(Evaluated { scores })))
}
