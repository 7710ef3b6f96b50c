//! Runs: create, list, read and cancel them; what a run can use (tools and
//! models) and what runs sent (the outbox).
//!
//! Reads answer each run with its `cost_usd` at today's prices ([`PricedRun`]).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use runlens_engine::cost::Pricing;
use runlens_engine::model::limits::{MAX_LIST_LIMIT, MAX_QUERY_TEXT_CHARS};
use runlens_engine::model::{CreateRun, Email, Run, RunFilter, RunPage, RunStatus, ToolInfo};
use runlens_engine::openapi::raw;
use runlens_engine::Engine;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::openapi::{RefOr, Schema};
use utoipa::{IntoParams, PartialSchema, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::{optional, AppJson, AppQuery, Bounded};
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::ProjectHeader;
use super::RunPath;
use runlens_engine::model::Role;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_run, list_runs))
        .routes(routes!(get_run))
        .routes(routes!(cancel))
        .routes(routes!(tools))
        .routes(routes!(models))
        .routes(routes!(outbox))
}

/// A run with what it cost at today's prices.
#[derive(Debug, Serialize, ToSchema)]
pub struct PricedRun {
    #[serde(flatten)]
    pub run: Run,
    /// The cost at today's prices (USD); null when the model has no price.
    pub cost_usd: Option<f64>,
}

impl PricedRun {
    pub fn new(run: Run, pricing: &Pricing) -> Self {
        let cost_usd = pricing.run_cost_usd(&run);
        PricedRun { run, cost_usd }
    }
}

/// One page of runs, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunList {
    pub runs: Vec<PricedRun>,
    /// The `cursor` of the next page; null on the last one.
    pub next_cursor: Option<String>,
}

impl RunList {
    pub fn new(page: RunPage, pricing: &Pricing) -> Self {
        let runs = page.runs.into_iter().map(|run| PricedRun::new(run, pricing)).collect();
        RunList { runs, next_cursor: page.next_cursor }
    }
}

/// Create a run; it starts at once.
///
/// A client-supplied `id` that exists already returns that run (200) instead of creating one (201); the id of
/// a run of another project is a 409.
#[utoipa::path(
    post,
    path = "/api/runs",
    tag = "runs",
    params(ProjectHeader),
    request_body(content = CreateRun, example = json!({"initial_prompt": "What is 2+2?", "tools": ["calculator"], "max_turns": 5})),
    responses(
        (status = 200, description = "A run with this id existed already: that run", body = Run),
        (status = 201, description = "Created", body = Run),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 409, response = Conflict),
        (status = 413, response = TooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 500, response = Internal),
    )
)]
async fn create_run(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(req): AppJson<CreateRun>,
) -> Result<Response, AppError> {
    let project = caller.require_current(Role::Operator)?;
    let (run, created) = engine.create_run_in(req, project, Some(&caller.actor)).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(run)).into_response())
}

/// A run status to filter by.
#[derive(Clone, Copy, Debug)]
pub struct StatusFilter(pub RunStatus);

impl std::str::FromStr for StatusFilter {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        RunStatus::parse(text).map(StatusFilter).ok_or_else(|| {
            let all: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
            format!("must be one of {}, not `{text}`", all.join(", "))
        })
    }
}

/// The run list's filters; an empty value is no filter.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListRunsQuery {
    /// Only runs in this status.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<StatusFilter>, inline)]
    pub status: Option<StatusFilter>,
    /// Only runs of this agent.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<TextFilter>, inline)]
    pub agent_id: Option<String>,
    /// Only runs with this tag, as `key:value`.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<TagFilter>, inline)]
    pub tag: Option<String>,
    /// A substring of the name or prompt.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<TextFilter>, inline)]
    pub q: Option<String>,
    /// Runs in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<RunsPageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// The `next_cursor` of the previous page.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<CursorText>, inline)]
    pub cursor: Option<String>,
}

crate::bounded_param!(
    /// Runs in a page.
    RunsPageSize = 1, MAX_LIST_LIMIT.into()
);

impl PartialSchema for StatusFilter {
    fn schema() -> RefOr<Schema> {
        let mut names: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
        names.push("");
        RefOr::T(raw(json!({ "type": "string", "enum": names })))
    }
}

/// A text filter's schema.
struct TextFilter;

impl PartialSchema for TextFilter {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "string", "maxLength": MAX_QUERY_TEXT_CHARS })))
    }
}

/// The tag filter's schema: `key:value`, or empty.
struct TagFilter;

impl PartialSchema for TagFilter {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "string", "maxLength": MAX_QUERY_TEXT_CHARS, "pattern": "^$|:" })))
    }
}

/// The cursor's schema: what the store's cursors look like (`<created_at ms>_<id>`), or empty.
struct CursorText;

impl PartialSchema for CursorText {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(
            json!({ "type": "string", "maxLength": MAX_QUERY_TEXT_CHARS, "pattern": "^$|^[-+]?[0-9]{1,18}_" }),
        ))
    }
}

/// List runs, newest first, in keyset pages.
#[utoipa::path(
    get,
    path = "/api/runs",
    tag = "runs",
    params(ProjectHeader, ListRunsQuery),
    responses(
        (status = 200, description = "OK", body = RunList),
        (status = 400, response = BadRequest),
        (status = 500, response = Internal),
    )
)]
async fn list_runs(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<ListRunsQuery>,
) -> Result<Json<RunList>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    let filter = RunFilter {
        status: q.status.map(|s| s.0),
        agent_id: q.agent_id,
        tag: q.tag,
        q: q.q,
        limit: q.limit.map(Bounded::as_u32),
        cursor: q.cursor,
        project: Some(project.to_owned()),
        all: None,
        metadata: None,
        offset: None,
    };
    let (page, pricing) = tokio::try_join!(engine.list_runs(&filter), engine.pricing(project))?;
    Ok(Json(RunList::new(page, &pricing)))
}

/// One run, with `cost_usd` and, while paused, its `interruptions`.
#[utoipa::path(
    get,
    path = "/api/runs/{id}",
    tag = "runs",
    params(RunPath),
    responses(
        (status = 200, description = "OK", body = PricedRun),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn get_run(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
) -> Result<Json<PricedRun>, AppError> {
    let head = caller.run(&engine, &id, Role::Viewer).await?;
    let (run, pricing) = tokio::try_join!(engine.get_run(&id), engine.pricing(&head.project))?;
    Ok(Json(PricedRun::new(run, &pricing)))
}

/// Cancel a run (a wait in flight is interrupted); 409 once it has finished.
#[utoipa::path(
    post,
    path = "/api/runs/{id}/cancel",
    tag = "runs",
    params(RunPath),
    responses(
        (status = 200, description = "The cancelled run", body = Run),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        (status = 413, response = TooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 500, response = Internal),
    )
)]
async fn cancel(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
) -> Result<Json<Run>, AppError> {
    caller.run(&engine, &id, Role::Operator).await?;
    Ok(Json(engine.cancel_by(&id, Some(&caller.actor)).await?))
}

/// The registered tools.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolList {
    pub tools: Vec<ToolInfo>,
}

/// The registered tools with their argument schemas.
#[utoipa::path(
    get,
    path = "/api/tools",
    tag = "catalog",
    responses((status = 200, description = "OK", body = ToolList), (status = 500, response = Internal))
)]
async fn tools(State(engine): State<Engine>, _caller: Caller) -> Json<ToolList> {
    Json(ToolList { tools: engine.tools() })
}

/// The configured models.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelList {
    pub models: Vec<String>,
    /// The model a run gets when it names none.
    pub default: String,
}

/// The model a run gets when it names none.
pub const DEFAULT_MODEL: &str = "builtin";

/// The configured models.
#[utoipa::path(
    get,
    path = "/api/models",
    tag = "catalog",
    responses((status = 200, description = "OK", body = ModelList), (status = 500, response = Internal))
)]
async fn models(State(engine): State<Engine>, _caller: Caller) -> Json<ModelList> {
    Json(ModelList { models: engine.models(), default: DEFAULT_MODEL.to_owned() })
}

/// Emails written by the `send_email` tool.
#[derive(Debug, Serialize, ToSchema)]
pub struct EmailList {
    pub emails: Vec<Email>,
}

/// Emails in the outbox listing, at most.
const OUTBOX_LIMIT: u32 = 100;

/// Emails sent by `send_email`, newest first (the latest 100).
#[utoipa::path(
    get,
    path = "/api/outbox",
    tag = "catalog",
    params(ProjectHeader),
    responses((status = 200, description = "OK", body = EmailList), (status = 500, response = Internal))
)]
async fn outbox(State(engine): State<Engine>, caller: Caller) -> Result<Json<EmailList>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    Ok(Json(EmailList { emails: engine.project_outbox(project, OUTBOX_LIMIT).await? }))
}
