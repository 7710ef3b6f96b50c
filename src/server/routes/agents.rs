//! Saved agents: list, create, read with how each version's runs went, save
//! a new version, and read older versions.
//!
//! Viewers read; operators (who may create runs) create and edit. An agent
//! of a project the caller has no role in is a 404, like one that does not
//! exist. Every save is a new version; the versions are numbered from 1
//! without gaps and never change.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use runlens_engine::model::limits::{
    MAX_AGENT_NAME_CHARS, MAX_ID_CHARS, MAX_LIST_LIMIT, MAX_LIST_OFFSET, RESERVED_RUN_IDS,
};
use runlens_engine::model::{Agent, AgentDetail, AgentInput, AgentPage, AgentSpec, AgentVersion, Role};
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
use super::listing::{offset_or_cursor, page_size, ListOffset, PageSize};
use super::ProjectHeader;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_agents, create_agent))
        .routes(routes!(get_agent, update_agent))
        .routes(routes!(versions))
        .routes(routes!(version))
}

/// An agent name as a paging cursor: what `next_cursor` said.
#[derive(Clone, Debug)]
pub struct NameCursor(pub String);

impl std::str::FromStr for NameCursor {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text.chars().count() > MAX_AGENT_NAME_CHARS {
            return Err(format!("must be an agent name (the `next_cursor` of a previous page), not `{text}`"));
        }
        Ok(NameCursor(text.to_owned()))
    }
}

impl PartialSchema for NameCursor {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "string", "maxLength": MAX_AGENT_NAME_CHARS })))
    }
}

/// A page of the agent list: by `cursor` (the previous page's
/// `next_cursor`) or by `offset`, not both.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AgentsQuery {
    /// Agents in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// The `next_cursor` of the previous page: agents named after it.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<NameCursor>, inline)]
    pub cursor: Option<NameCursor>,
    /// Agents to skip before the page (not with `cursor`).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ListOffset>, inline)]
    pub offset: Option<Bounded<0, { MAX_LIST_OFFSET as u64 }>>,
}

/// The current project's agents by name, in pages, each at its current version.
#[utoipa::path(
    get,
    path = "/api/agents",
    tag = "agents",
    params(ProjectHeader, AgentsQuery),
    responses(
        (status = 200, description = "OK", body = AgentPage),
        (status = 400, response = BadRequest),
        (status = 500, response = Internal),
    )
)]
async fn list_agents(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<AgentsQuery>,
) -> Result<Json<AgentPage>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    offset_or_cursor(&q.cursor, &q.offset)?;
    let after = q.cursor.map(|c| c.0);
    let offset = q.offset.map_or(0, Bounded::as_u32);
    Ok(Json(engine.agents().list(project, after.as_deref(), offset, page_size(q.limit)).await?))
}

/// The body of `POST /api/agents`: an [`AgentSpec`] and an optional id.
///
/// Not [`AgentInput`] itself: a flattened struct does not refuse unknown
/// fields, and its document would be an `allOf` whose spec part (closed to
/// other properties) refuses the `id`. This one refuses unknown fields and is
/// documented as one closed object.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewAgent {
    #[serde(default)]
    id: Option<String>,
    #[serde(flatten)]
    spec: AgentSpec,
}

impl PartialSchema for NewAgent {
    fn schema() -> RefOr<Schema> {
        let mut schema = serde_json::to_value(AgentSpec::schema()).unwrap_or_default();
        schema["description"] = "A new agent: its spec, and optionally its id.".into();
        schema["properties"]["id"] = json!({
            "type": ["string", "null"],
            "minLength": 1,
            "maxLength": MAX_ID_CHARS,
            "pattern": "^[A-Za-z0-9._:-]+$",
            "not": { "enum": RESERVED_RUN_IDS },
            "description": "Client-chosen id; generated (`agent-…`) when absent. An id taken in any project is a 409.",
        });
        RefOr::T(raw(schema))
    }
}

impl ToSchema for NewAgent {
    fn name() -> std::borrow::Cow<'static, str> {
        "NewAgent".into()
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        <AgentSpec as ToSchema>::schemas(schemas);
    }
}

/// Save a new agent at version 1 in the current project.
///
/// Everything a run would start from is checked: the name (unique in the project, not a tool's), the model and
/// its settings, the tools, the approval policy, the schemas, and the linked agents (`agents`, `handoffs`: ids
/// of agents of the project). A taken name or id is a 409.
#[utoipa::path(
    post,
    path = "/api/agents",
    tag = "agents",
    params(ProjectHeader),
    request_body(content = NewAgent, example = json!({
        "name": "math_helper", "description": "Does arithmetic", "tools": ["calculator"], "max_turns": 4
    })),
    responses(
        (status = 201, description = "Created", body = Agent),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 409, response = Conflict),
        BodyErrors,
    )
)]
async fn create_agent(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(body): AppJson<NewAgent>,
) -> Result<(StatusCode, Json<Agent>), AppError> {
    let project = caller.require_current(Role::Operator)?;
    let input = AgentInput { id: body.id, spec: body.spec };
    Ok((StatusCode::CREATED, Json(engine.agents().create_agent(project, input, &caller.actor).await?)))
}

/// The path of an agent.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct AgentPath {
    /// An agent id.
    pub id: String,
}

/// An agent at its current version, with how its runs went per version (newest first): runs by status, success
/// rate, tokens and cost.
#[utoipa::path(
    get,
    path = "/api/agents/{id}",
    tag = "agents",
    params(AgentPath),
    responses(
        (status = 200, description = "OK", body = AgentDetail),
        ReadErrors,
    )
)]
async fn get_agent(
    State(engine): State<Engine>,
    caller: Caller,
    Path(AgentPath { id }): Path<AgentPath>,
) -> Result<Json<AgentDetail>, AppError> {
    let agent = caller.agent(&engine, &id, Role::Viewer).await?;
    Ok(Json(engine.agents().agent_detail(&agent.project, &id).await?))
}

/// Save a new version of an agent: the whole spec, checked as on create.
///
/// Older versions stay readable, and runs keep the version they started from. The body is the spec alone: `id`
/// is refused. A name taken by another agent, or a save that lost a race with another, is a 409.
#[utoipa::path(
    put,
    path = "/api/agents/{id}",
    tag = "agents",
    params(AgentPath),
    request_body(content = AgentSpec, example = json!({
        "name": "math_helper", "description": "Does arithmetic, carefully", "tools": ["calculator"]
    })),
    responses(
        (status = 200, description = "The agent at its new version", body = Agent),
        ChangeErrors,
    )
)]
async fn update_agent(
    State(engine): State<Engine>,
    caller: Caller,
    Path(AgentPath { id }): Path<AgentPath>,
    AppJson(spec): AppJson<AgentSpec>,
) -> Result<Json<Agent>, AppError> {
    let agent = caller.agent(&engine, &id, Role::Operator).await?;
    Ok(Json(engine.agents().update_agent(&agent.project, &id, spec, &caller.actor).await?))
}

/// An agent version number.
#[derive(Clone, Copy, Debug)]
pub struct VersionNumber(pub u32);

impl std::str::FromStr for VersionNumber {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.parse() {
            Ok(n) if n >= 1 => Ok(VersionNumber(n)),
            _ => Err(format!("must be a version number from 1 to {}, not `{text}`", u32::MAX)),
        }
    }
}

impl PartialSchema for VersionNumber {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "integer", "minimum": 1, "maximum": u32::MAX })))
    }
}

/// A version cursor in a query: a version number, or empty (absent).
struct VersionCursor;

impl PartialSchema for VersionCursor {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({
            "type": ["integer", "string"],
            "minimum": 1,
            "maximum": u32::MAX,
            "maxLength": 0,
            "description": "a version number; empty means absent",
        })))
    }
}

/// A page of an agent's versions, newest first: by `cursor` (the previous
/// page's `next_cursor`) or by `offset`, not both.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct VersionsQuery {
    /// Versions in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// The `next_cursor` of the previous page: versions older than this one.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<VersionCursor>, inline)]
    pub cursor: Option<VersionNumber>,
    /// Versions to skip before the page, newest first (not with `cursor`).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ListOffset>, inline)]
    pub offset: Option<Bounded<0, { MAX_LIST_OFFSET as u64 }>>,
}

/// One page of an agent's versions, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionList {
    pub versions: Vec<AgentVersion>,
    /// The `cursor` of the next page (a version number); null on the last one.
    pub next_cursor: Option<String>,
}

/// An agent's saved versions, newest first, in pages.
#[utoipa::path(
    get,
    path = "/api/agents/{id}/versions",
    tag = "agents",
    params(AgentPath, VersionsQuery),
    responses(
        (status = 200, description = "OK", body = VersionList),
        QueryErrors,
    )
)]
async fn versions(
    State(engine): State<Engine>,
    caller: Caller,
    Path(AgentPath { id }): Path<AgentPath>,
    AppQuery(q): AppQuery<VersionsQuery>,
) -> Result<Json<VersionList>, AppError> {
    let agent = caller.agent(&engine, &id, Role::Viewer).await?;
    offset_or_cursor(&q.cursor, &q.offset)?;
    let limit = page_size(q.limit);
    // Versions run from 1 to the current one without gaps: skipping the
    // newest `offset` is listing those below `current + 1 - offset`.
    let before = match (q.cursor, q.offset) {
        (Some(VersionNumber(v)), _) => Some(v),
        (None, Some(offset)) => Some((agent.version + 1).saturating_sub(offset.as_u32())),
        (None, None) => None,
    };
    let versions = match before {
        Some(0) => Vec::new(),
        before => engine.agents().agent_versions(&agent.project, &id, before, limit).await?,
    };
    let full = versions.len() == limit as usize;
    let next_cursor = versions.last().filter(|v| full && v.version > 1).map(|v| v.version.to_string());
    Ok(Json(VersionList { versions, next_cursor }))
}

/// The path of one version of an agent.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct VersionPath {
    /// An agent id.
    pub id: String,
    /// A version number, from 1.
    #[param(value_type = VersionNumber, inline)]
    pub version: String,
}

/// One saved version of an agent.
#[utoipa::path(
    get,
    path = "/api/agents/{id}/versions/{version}",
    tag = "agents",
    params(VersionPath),
    responses(
        (status = 200, description = "OK", body = AgentVersion),
        QueryErrors,
    )
)]
async fn version(
    State(engine): State<Engine>,
    caller: Caller,
    Path(VersionPath { id, version }): Path<VersionPath>,
) -> Result<Json<AgentVersion>, AppError> {
    let agent = caller.agent(&engine, &id, Role::Viewer).await?;
    let VersionNumber(version) = version.parse().map_err(|why| AppError::BadRequest(format!("version {why}")))?;
    Ok(Json(engine.agents().agent_version(&agent.project, &id, version).await?))
}
