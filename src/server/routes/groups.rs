//! Comparison groups: one run configuration started on several models at
//! once (`POST /api/runs/batch`), and a group read back as the compare
//! page's columns (`GET /api/compare/groups/{id}`).
//!
//! A batch is created in the caller's current project and needs the
//! operator role there, like `POST /api/runs`; it is checked whole first, so
//! a 400 creates nothing (see `runlens_engine::Engine::create_batch`). A
//! group is read like a run: a group of a project the caller has no role in
//! is "not found", like one that does not exist.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use runlens_engine::model::{BatchCreated, BatchRuns, CompareGroup, Role, MAX_BATCH_MODELS};
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
    OpenApiRouter::new().routes(routes!(create_batch)).routes(routes!(get_group))
}

/// The path of a comparison group.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct GroupPath {
    /// A comparison group id: the `group_id` of `POST /api/runs/batch`'s answer (and of each of its runs).
    pub id: String,
}

/// Start one run configuration on several models at once, as a comparison group.
///
/// The body is `POST /api/runs`' body without `id` and `model`, plus `models`: 1 to 8 distinct configured models
/// (`builtin` or a provider's, see `GET /api/models`). One run is created on each, in the order of `models`, named
/// `"{name} · {model}"` (the name defaulting to the prompt's first line) and carrying the new `group_id`; each
/// starts at once. The whole batch is checked first (the settings against every model, every run as
/// `POST /api/runs` checks it): a 400 names the problem and creates nothing. `GET /api/compare/groups/{id}`
/// reads the group back.
#[utoipa::path(
    post,
    path = "/api/runs/batch",
    tag = "compare",
    params(ProjectHeader),
    request_body(content = BatchRuns, examples(
        ("three models" = (summary = "One prompt on three models", value = json!({
            "initial_prompt": "What is 17 * 23?", "tools": ["calculator"], "max_turns": 5,
            "models": ["builtin", "openai/gpt-4.1-mini", "ollama/llama3.1"]
        }))),
    )),
    responses(
        (status = 201, description = "Created: the group's id and its runs, in the order of `models`", body = BatchCreated),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        BodyErrors,
    )
)]
async fn create_batch(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(req): AppJson<BatchRuns>,
) -> Result<Response, AppError> {
    let project = caller.require_current(Role::Operator)?;
    let created = engine.comparisons().create_batch(project, req, Some(&caller.actor)).await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

/// A comparison group: its runs side by side, with each one's result, status, tokens, cost and duration.
///
/// The members come in the order of the batch's `models` (at most 8), each with `cost_usd` at today's prices
/// (absent when the model has no price) and `duration_ms`, its active time from its start to its end (to now while
/// it runs; idle gaps before follow-ups left out; absent before it starts). A group of another project is a 404.
#[utoipa::path(
    get,
    path = "/api/compare/groups/{id}",
    tag = "compare",
    params(GroupPath),
    responses(
        (status = 200, description = "OK", body = CompareGroup),
        ReadErrors,
    )
)]
async fn get_group(
    State(engine): State<Engine>,
    caller: Caller,
    Path(GroupPath { id }): Path<GroupPath>,
) -> Result<Json<CompareGroup>, AppError> {
    let group = engine.comparisons().compare_group(&id).await?;
    if caller.role_in(&group.project).is_none_or(|role| role < Role::Viewer) {
        return Err(AppError::NotFound(format!("comparison group `{id}` not found")));
    }
    Ok(Json(group))
}

// The engine's bound is the one the document states.
const _: () = assert!(MAX_BATCH_MODELS == 8);
