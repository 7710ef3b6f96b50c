//! Experiments: an agent or a run configuration run over a dataset version,
//! scored (`/api/experiments…`).
//!
//! Starting and cancelling one is an operator's; reading is a viewer's.
//! Another project's experiment is a 404, like one that does not exist.
//! Each item runs as an ordinary run of the project (trace, compare, fork),
//! with tools answered as the experiment's `tool_mode` says: `recorded`
//! runs no tool, `live` runs them under the approval rules.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use runlens_engine::model::limits::{MAX_LIST_LIMIT, MAX_QUERY_TEXT_CHARS};
use runlens_engine::model::{
    Experiment, ExperimentComparison, ExperimentPage, ExperimentReport, ExperimentRows, ExperimentSet,
    ExperimentSetReport, ItemChange, NewExperiment, NewExperimentSet, Role,
};
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
use super::super::extract::{optional, AppJson, AppQuery, Bounded};
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::listing::{page_size, Cursor, PageSize};
use super::ProjectHeader;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_experiments, start_experiment))
        .routes(routes!(get_experiment))
        .routes(routes!(experiment_rows))
        .routes(routes!(compare_experiments))
        .routes(routes!(cancel_experiment))
        .routes(routes!(start_experiment_set))
        .routes(routes!(get_experiment_set))
}

/// The path of an experiment.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ExperimentPath {
    /// An experiment's id.
    pub id: String,
}

/// The experiments list: newest first, of one dataset when `dataset_id` is given.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ExperimentsQuery {
    /// Only the experiments of this dataset.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<Cursor>, inline)]
    pub dataset_id: Option<Cursor>,
    /// Items in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// The `next_cursor` of the previous page.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<Cursor>, inline)]
    pub cursor: Option<Cursor>,
}

/// A page of an experiment's items.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RowsQuery {
    /// Items in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// The `next_cursor` of the previous page: items after that one.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<Cursor>, inline)]
    pub cursor: Option<Cursor>,
}

/// Which items of a comparison to list.
#[derive(Clone, Copy, Debug)]
pub struct ChangeFilter(pub ItemChange);

impl std::str::FromStr for ChangeFilter {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        ItemChange::parse(text)
            .map(ChangeFilter)
            .ok_or_else(|| "must be `improved`, `regressed`, `unchanged` or `missing`".to_owned())
    }
}

impl PartialSchema for ChangeFilter {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "string", "enum": ["improved", "regressed", "unchanged", "missing"] })))
    }
}

/// The experiment to compare with, which items, and the page.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct CompareQuery {
    /// The other experiment (of the same dataset): its id.
    #[param(value_type = String, min_length = 1, max_length = 1000)]
    pub with: OtherId,
    /// Only the items that changed this way (the counts still cover every item).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ChangeFilter>, inline)]
    pub change: Option<ChangeFilter>,
    /// Items in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// The `next_cursor` of the previous page: items after that one.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<Cursor>, inline)]
    pub cursor: Option<Cursor>,
}

/// The other experiment's id: 1 to 1,000 characters.
#[derive(Clone, Debug)]
pub struct OtherId(pub String);

impl<'de> Deserialize<'de> for OtherId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text.is_empty() || text.chars().count() > MAX_QUERY_TEXT_CHARS {
            return Err(serde::de::Error::custom(format!("with: 1 to {MAX_QUERY_TEXT_CHARS} characters")));
        }
        Ok(OtherId(text))
    }
}

/// The current project's experiments, newest first, in pages (the previous page's `next_cursor`).
#[utoipa::path(
    get,
    path = "/api/experiments",
    tag = "experiments",
    params(ProjectHeader, ExperimentsQuery),
    responses(
        (status = 200, description = "OK", body = ExperimentPage),
        (status = 400, response = BadRequest),
        (status = 500, response = Internal),
    )
)]
async fn list_experiments(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<ExperimentsQuery>,
) -> Result<Json<ExperimentPage>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    let dataset = q.dataset_id.map(|c| c.0);
    let before = q.cursor.map(|c| c.0);
    let page = engine.experiments().list(project, dataset.as_deref(), before.as_deref(), page_size(q.limit)).await?;
    Ok(Json(page))
}

/// Run an agent (or a model with a system prompt and tools) over a dataset version (operators and above).
///
/// Each item becomes a run of the experiment, `concurrency` at a time; each finished run is scored by
/// `scorers` against the item's `expected`. `tool_mode` says how tools answer: `recorded` (the default) runs
/// none — a call answers with the item's recorded result of the same tool and arguments, or fails saying none
/// was recorded; `live` runs them under the approval rules (a call that needs approval waits for a person);
/// `mock` answers the tools in `mocks` with their result and runs the others live. Every item's run is checked
/// first: one that cannot run refuses the whole experiment (400, naming the item).
#[utoipa::path(
    post,
    path = "/api/experiments",
    tag = "experiments",
    params(ProjectHeader),
    request_body(content = NewExperiment, example = json!({
        "dataset_id": "0190c0de-0000-7000-8000-0000000000d1",
        "agent_id": "support",
        "tool_mode": "recorded",
        "scorers": [{"name": "correct", "scorer": {"kind": "contains", "ignore_case": true}}],
        "concurrency": 8
    })),
    responses(
        (status = 201, description = "Started", body = Experiment),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        BodyErrors,
    )
)]
async fn start_experiment(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(body): AppJson<NewExperiment>,
) -> Result<(StatusCode, Json<Experiment>), AppError> {
    let project = caller.require_current(Role::Operator)?;
    Ok((StatusCode::CREATED, Json(engine.experiments().start(project, body, &caller.actor).await?)))
}

/// An experiment with its progress, tokens and cost so far, and each scorer's mean and distribution.
#[utoipa::path(
    get,
    path = "/api/experiments/{id}",
    tag = "experiments",
    params(ProjectHeader, ExperimentPath),
    responses(
        (status = 200, description = "OK", body = ExperimentReport),
        ReadErrors,
    )
)]
async fn get_experiment(
    State(engine): State<Engine>,
    caller: Caller,
    Path(ExperimentPath { id }): Path<ExperimentPath>,
) -> Result<Json<ExperimentReport>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    Ok(Json(engine.experiments().report(project, &id).await?))
}

/// An experiment's items in the dataset's order: input, expected, the run's status, output, scores, cost and
/// duration.
#[utoipa::path(
    get,
    path = "/api/experiments/{id}/rows",
    tag = "experiments",
    params(ProjectHeader, ExperimentPath, RowsQuery),
    responses(
        (status = 200, description = "OK", body = ExperimentRows),
        ReadErrors,
    )
)]
async fn experiment_rows(
    State(engine): State<Engine>,
    caller: Caller,
    Path(ExperimentPath { id }): Path<ExperimentPath>,
    AppQuery(q): AppQuery<RowsQuery>,
) -> Result<Json<ExperimentRows>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    let after = q.cursor.map(|c| c.0);
    Ok(Json(engine.experiments().rows(project, &id, after.as_deref(), page_size(q.limit)).await?))
}

/// Two experiments of one dataset item by item: each item improved, regressed or unchanged by the mean of its
/// run's scores (yes = 1), or missing from one.
#[utoipa::path(
    get,
    path = "/api/experiments/{id}/compare",
    tag = "experiments",
    params(ProjectHeader, ExperimentPath, CompareQuery),
    responses(
        (status = 200, description = "OK", body = ExperimentComparison),
        ReadErrors,
    )
)]
async fn compare_experiments(
    State(engine): State<Engine>,
    caller: Caller,
    Path(ExperimentPath { id }): Path<ExperimentPath>,
    AppQuery(q): AppQuery<CompareQuery>,
) -> Result<Json<ExperimentComparison>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    let after = q.cursor.map(|c| c.0);
    let change = q.change.map(|c| c.0);
    let cmp =
        engine.experiments().compare(project, &id, &q.with.0, change, after.as_deref(), page_size(q.limit)).await?;
    Ok(Json(cmp))
}

/// Cancel a running experiment (operators and above): items not started never will be, and its active runs are
/// cancelled. One that has ended is a 409.
#[utoipa::path(
    post,
    path = "/api/experiments/{id}/cancel",
    tag = "experiments",
    params(ProjectHeader, ExperimentPath),
    responses(
        (status = 200, description = "Cancelled", body = Experiment),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        BodyErrors,
    )
)]
async fn cancel_experiment(
    State(engine): State<Engine>,
    caller: Caller,
    Path(ExperimentPath { id }): Path<ExperimentPath>,
) -> Result<Json<Experiment>, AppError> {
    let project = caller.require_current(Role::Operator)?;
    Ok(Json(engine.experiments().cancel(project, &id, &caller.actor).await?))
}

/// Run several models over one dataset version (operators and above): one experiment per model, with the same
/// settings, tools and scorers, kept together as a set.
///
/// Every model's experiment is checked, items and all, before any starts: one that cannot run refuses the whole
/// set (400, naming the model or the item), and nothing is started then.
#[utoipa::path(
    post,
    path = "/api/experiment-sets",
    tag = "experiments",
    params(ProjectHeader),
    request_body(content = NewExperimentSet, example = json!({
        "models": ["builtin", "gpt-4o-mini"],
        "experiment": {
            "dataset_id": "0190c0de-0000-7000-8000-0000000000d1",
            "system_prompt": "Answer in one sentence.",
            "scorers": [{"name": "correct", "scorer": {"kind": "contains", "ignore_case": true}}]
        }
    })),
    responses(
        (status = 201, description = "Started", body = ExperimentSet),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        BodyErrors,
    )
)]
async fn start_experiment_set(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(body): AppJson<NewExperimentSet>,
) -> Result<(StatusCode, Json<ExperimentSet>), AppError> {
    let project = caller.require_current(Role::Operator)?;
    Ok((StatusCode::CREATED, Json(engine.experiments().start_set(project, body, &caller.actor).await?)))
}

/// A set of experiments of several models: each one's progress, tokens, cost and scorers, oldest first.
#[utoipa::path(
    get,
    path = "/api/experiment-sets/{id}",
    tag = "experiments",
    params(ProjectHeader, ExperimentPath),
    responses(
        (status = 200, description = "OK", body = ExperimentSetReport),
        ReadErrors,
    )
)]
async fn get_experiment_set(
    State(engine): State<Engine>,
    caller: Caller,
    Path(ExperimentPath { id }): Path<ExperimentPath>,
) -> Result<Json<ExperimentSetReport>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    Ok(Json(engine.experiments().set_report(project, &id).await?))
}
