//! API keys: listed with their last use (never their secrets), created with
//! the secret shown once, revoked.
//!
//! An admin of a project manages its keys; an instance admin also
//! instance-admin keys (`project: null`) and, with `?scope=instance`, every
//! key of the instance. A key the caller may not see is a 404.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use runlens_engine::model::limits::{MAX_LIST_LIMIT, MAX_LIST_OFFSET};
use runlens_engine::model::{ApiKey, Role};
use runlens_engine::openapi::raw;
use runlens_engine::Engine;
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::openapi::Schema;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::{optional, AppJson, AppQuery, Bounded};
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::listing::*;
use super::ProjectHeader;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(keys, create_key)).routes(routes!(revoke_key))
}

/// The key list's scope and page: by `cursor` or by `offset`, not both.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct KeysQuery {
    /// `instance` (instance admins): every key of the instance, the
    /// instance-admin keys (`project` null) included; otherwise the current
    /// project's keys.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<InstanceScope>, inline)]
    pub scope: Option<InstanceScope>,
    /// Keys in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// The `next_cursor` of the previous page.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<Cursor>, inline)]
    pub cursor: Option<Cursor>,
    /// Keys to skip before the page, newest first (not with `cursor`).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ListOffset>, inline)]
    pub offset: Option<Bounded<0, { MAX_LIST_OFFSET as u64 }>>,
}

/// One page of keys, newest first. Never their secrets.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyList {
    pub keys: Vec<ApiKey>,
    /// The `cursor` of the next page; null on the last one.
    pub next_cursor: Option<String>,
}

/// API keys, newest first, revoked ones included, with their last use; never their secrets.
///
/// The current project's keys (admins of the project); with `scope=instance`, every key of the instance
/// (instance admins).
#[utoipa::path(
    get,
    path = "/api/keys",
    tag = "identity",
    params(ProjectHeader, KeysQuery),
    responses(
        (status = 200, description = "OK", body = KeyList),
        QueryErrors,
    )
)]
async fn keys(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<KeysQuery>,
) -> Result<Json<KeyList>, AppError> {
    let project = scope_project(&caller, q.scope)?;
    offset_or_cursor(&q.cursor, &q.offset)?;
    let limit = page_size(q.limit);
    let before = q.cursor.map(|c| c.0);
    let found = engine.directory().keys(project, before.as_deref(), page_offset(q.offset), limit + 1).await?;
    let (keys, next_cursor) = page(found, limit, |k| k.id.clone());
    Ok(Json(KeyList { keys, next_cursor }))
}

/// Reads `"project": null` as `Some(None)` and a missing field as `None`.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(deserializer).map(Some)
}

/// A key name's schema: 1 to 100 characters, none a control character, not
/// all white space (what the engine checks).
fn key_name() -> Schema {
    let mut schema = runlens_engine::openapi::printable_name(100);
    schema["description"] = "What the key is for: 1 to 100 characters, no control characters, not blank.".into();
    raw(schema)
}

/// A new API key.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewKey {
    /// What the key is for: 1 to 100 characters, no control characters, not blank.
    #[schema(schema_with = key_name)]
    pub name: String,
    /// The key's role in its project (an instance-admin key: `admin`).
    pub role: Role,
    /// The key's project; null for an instance-admin key (instance admins
    /// only); absent for the current project.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>, max_length = 40)]
    pub project: Option<Option<String>>,
}

/// A new key, with its secret: shown only this once.
#[derive(Serialize, ToSchema)]
pub struct CreatedKey {
    #[serde(flatten)]
    pub key: ApiKey,
    /// `rl_` and 64 hex digits; send it as `Authorization: Bearer …`. It
    /// cannot be shown again.
    pub secret: String,
}

impl std::fmt::Debug for CreatedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreatedKey").field("key", &self.key).finish_non_exhaustive()
    }
}

/// Create an API key; its secret is in this answer only.
///
/// A key of a project needs its `admin` role; an instance-admin key (`project` null, `role` admin) needs an
/// instance admin.
#[utoipa::path(
    post,
    path = "/api/keys",
    tag = "identity",
    params(ProjectHeader),
    request_body(content = NewKey, example = json!({"name": "ci", "role": "operator", "project": "default"})),
    responses(
        (status = 201, description = "Created; `secret` is shown only now", body = CreatedKey),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        BodyErrors,
    )
)]
async fn create_key(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(req): AppJson<NewKey>,
) -> Result<(StatusCode, Json<CreatedKey>), AppError> {
    let project = match req.project {
        None => Some(caller.project.clone()),
        Some(p) => p,
    };
    match &project {
        Some(p) => caller.require(p, Role::Admin)?,
        None => {
            caller.require_instance_admin()?;
            if req.role != Role::Admin {
                return Err(AppError::BadRequest(
                    "role must be `admin` for an instance-admin key (project null)".into(),
                ));
            }
        }
    }
    let (key, secret) = engine.identity().create_key(&req.name, project.as_deref(), req.role, &caller.actor).await?;
    Ok((StatusCode::CREATED, Json(CreatedKey { key, secret })))
}

/// The path of a key.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct KeyPath {
    /// A key id (`key_…`).
    pub id: String,
}

/// Revoke a key: it stops working at once (admins of its project; an instance-admin key: instance admins).
#[utoipa::path(
    delete,
    path = "/api/keys/{id}",
    tag = "identity",
    params(KeyPath),
    responses(
        (status = 200, description = "The revoked key", body = ApiKey),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        BodyErrors,
    )
)]
async fn revoke_key(
    State(engine): State<Engine>,
    caller: Caller,
    Path(KeyPath { id }): Path<KeyPath>,
) -> Result<Json<ApiKey>, AppError> {
    caller.key(&engine, &id, Role::Admin).await?;
    Ok(Json(engine.identity().revoke_key(&id, &caller.actor).await?))
}
