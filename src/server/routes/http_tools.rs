//! A project's own HTTP tools: list, register, read, edit, delete, and
//! rotate the signing secret.
//!
//! Viewers read; admins register, edit, delete and rotate: a tool receives
//! the arguments and the `context` of every run of the project that calls
//! it, and any run of the project may attach it, so choosing where calls go
//! is the project admin's (like its price table and keys). The tools are
//! the current project's (`X-Runlens-Project`): another project's tool is a
//! 404, like one that does not exist. Reads never show a header value or
//! the secret; the secret is shown once, in the answer that made it.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use runlens_engine::model::limits::{MAX_LIST_LIMIT, MAX_LIST_OFFSET};
use runlens_engine::model::{HttpTool, HttpToolPage, HttpToolSecret, HttpToolSpec, NewHttpTool, Role};
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
use super::listing::{offset_or_cursor, page_offset, page_size, ListOffset, PageSize};
use super::ProjectHeader;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_http_tools, create_http_tool))
        .routes(routes!(get_http_tool, update_http_tool, delete_http_tool))
        .routes(routes!(rotate_secret))
}

/// An HTTP tool's name, in a path or as a paging cursor.
pub struct HttpToolName;

impl PartialSchema for HttpToolName {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(runlens_engine::model::http_tool_schemas::name_value()))
    }
}

/// A tool name as a paging cursor: what `next_cursor` said.
#[derive(Clone, Debug)]
pub struct ToolCursor(pub String);

impl std::str::FromStr for ToolCursor {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        use runlens_engine::model::limits::MAX_HTTP_TOOL_NAME_CHARS;
        if text.chars().count() > MAX_HTTP_TOOL_NAME_CHARS {
            return Err(format!("must be a tool name (the `next_cursor` of a previous page), not `{text}`"));
        }
        Ok(ToolCursor(text.to_owned()))
    }
}

/// A cursor in a query: a tool name, or empty (absent).
struct CursorSchema;

impl PartialSchema for CursorSchema {
    fn schema() -> RefOr<Schema> {
        use runlens_engine::model::limits::MAX_HTTP_TOOL_NAME_CHARS;
        RefOr::T(raw(json!({ "type": "string", "maxLength": MAX_HTTP_TOOL_NAME_CHARS })))
    }
}

/// A page of the HTTP tools: by `cursor` (the previous page's
/// `next_cursor`) or by `offset`, not both.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct HttpToolsQuery {
    /// Tools in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// The `next_cursor` of the previous page: tools named after it.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<CursorSchema>, inline)]
    pub cursor: Option<ToolCursor>,
    /// Tools to skip before the page (not with `cursor`).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ListOffset>, inline)]
    pub offset: Option<Bounded<0, { MAX_LIST_OFFSET as u64 }>>,
}

/// The current project's HTTP tools by name, in pages (header names only: their values and the signing secret
/// are never shown).
#[utoipa::path(
    get,
    path = "/api/tools/http",
    tag = "catalog",
    params(ProjectHeader, HttpToolsQuery),
    responses(
        (status = 200, description = "OK", body = HttpToolPage),
        (status = 400, response = BadRequest),
        (status = 500, response = Internal),
    )
)]
async fn list_http_tools(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<HttpToolsQuery>,
) -> Result<Json<HttpToolPage>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    offset_or_cursor(&q.cursor, &q.offset)?;
    let after = q.cursor.map(|c| c.0);
    Ok(Json(engine.http_tools().list(project, after.as_deref(), page_offset(q.offset), page_size(q.limit)).await?))
}

/// Register an HTTP tool in the current project (admins).
///
/// Runs of the project can then attach and call it: each call is a `POST` of `{"run_id", "call_id", "tool",
/// "arguments", "context"}` to `url`, signed with `runlens-signature: t=…,v1=…` (HMAC-SHA256 of `"<t>.<body>"`
/// under the tool's secret, as Stripe signs webhooks), with `runlens-idempotency-key: <run id>:<call id>`. A 2xx
/// JSON answer is the result; a non-2xx answer or a timeout is a tool error for the model. Idempotent tools are
/// retried on 5xx answers and connection errors (3 attempts), others never. The answer shows the signing
/// `secret` this once. A name taken by another HTTP tool of the project, or a project with 500 of them, is a 409.
#[utoipa::path(
    post,
    path = "/api/tools/http",
    tag = "catalog",
    params(ProjectHeader),
    request_body(content = NewHttpTool, example = json!({
        "name": "lookup_order",
        "description": "Looks an order up by its id",
        "schema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        "url": "https://tools.example.com/lookup-order",
        "headers": {"Authorization": "Bearer …"},
        "timeout_ms": 5000,
        "idempotent": true,
        "requires_approval": false
    })),
    responses(
        (status = 201, description = "Registered; `secret` is shown this once", body = HttpToolSecret),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 409, response = Conflict),
        BodyErrors,
    )
)]
async fn create_http_tool(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(body): AppJson<NewHttpTool>,
) -> Result<(StatusCode, Json<HttpToolSecret>), AppError> {
    let project = caller.require_current(Role::Admin)?;
    Ok((StatusCode::CREATED, Json(engine.http_tools().create_http_tool(project, body, &caller.actor).await?)))
}

/// The path of an HTTP tool.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct HttpToolPath {
    /// The tool's name.
    #[param(value_type = HttpToolName, inline)]
    pub name: String,
}

/// An HTTP tool of the current project (header names only).
#[utoipa::path(
    get,
    path = "/api/tools/http/{name}",
    tag = "catalog",
    params(ProjectHeader, HttpToolPath),
    responses(
        (status = 200, description = "OK", body = HttpTool),
        ReadErrors,
    )
)]
async fn get_http_tool(
    State(engine): State<Engine>,
    caller: Caller,
    Path(HttpToolPath { name }): Path<HttpToolPath>,
) -> Result<Json<HttpTool>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    Ok(Json(engine.http_tools().http_tool(project, &name).await?))
}

/// Edit an HTTP tool (admins): everything but its name and secret, checked as on registration.
///
/// `headers` absent or null keeps the stored headers (whose values cannot be read back); an object replaces them
/// all. Runs see the change at their next call.
#[utoipa::path(
    put,
    path = "/api/tools/http/{name}",
    tag = "catalog",
    params(ProjectHeader, HttpToolPath),
    request_body(content = HttpToolSpec, example = json!({
        "description": "Looks an order up by its id",
        "schema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        "url": "https://tools.example.com/v2/lookup-order",
        "idempotent": true
    })),
    responses(
        (status = 200, description = "The tool as saved", body = HttpTool),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        BodyErrors,
    )
)]
async fn update_http_tool(
    State(engine): State<Engine>,
    caller: Caller,
    Path(HttpToolPath { name }): Path<HttpToolPath>,
    AppJson(spec): AppJson<HttpToolSpec>,
) -> Result<Json<HttpTool>, AppError> {
    let project = caller.require_current(Role::Admin)?;
    // An unknown tool is a 404 before its new spec is judged.
    engine.http_tools().http_tool(project, &name).await?;
    Ok(Json(engine.http_tools().update_http_tool(project, &name, spec, &caller.actor).await?))
}

/// Delete an HTTP tool (admins). Runs that attached it get "unknown tool" for later calls.
#[utoipa::path(
    delete,
    path = "/api/tools/http/{name}",
    tag = "catalog",
    params(ProjectHeader, HttpToolPath),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        BodyErrors,
    )
)]
async fn delete_http_tool(
    State(engine): State<Engine>,
    caller: Caller,
    Path(HttpToolPath { name }): Path<HttpToolPath>,
) -> Result<StatusCode, AppError> {
    let project = caller.require_current(Role::Admin)?;
    engine.http_tools().delete_http_tool(project, &name, &caller.actor).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Give an HTTP tool a new signing secret (admins), shown this once; calls are signed with it from now on.
#[utoipa::path(
    post,
    path = "/api/tools/http/{name}/secret",
    tag = "catalog",
    params(ProjectHeader, HttpToolPath),
    responses(
        (status = 200, description = "The new `secret`, shown this once", body = HttpToolSecret),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        BodyErrors,
    )
)]
async fn rotate_secret(
    State(engine): State<Engine>,
    caller: Caller,
    Path(HttpToolPath { name }): Path<HttpToolPath>,
) -> Result<Json<HttpToolSecret>, AppError> {
    let project = caller.require_current(Role::Admin)?;
    Ok(Json(engine.http_tools().rotate_http_tool_secret(project, &name, &caller.actor).await?))
}
