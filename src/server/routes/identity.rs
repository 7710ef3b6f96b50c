//! Who may do what: the caller (`/api/me`), projects and their members,
//! users, API keys and the audit log.
//!
//! Who may call what:
//! - anyone signed in or holding a key: `GET /api/me`, `GET /api/projects`
//!   (the projects they have a role in; an instance admin sees all);
//! - an admin of a project: its members, its keys, its audit log;
//! - an instance admin: creating projects, listing and creating users,
//!   instance-admin keys (`project: null`), and with `?scope=instance` every
//!   key of the instance and the whole audit log.
//!
//! A project, member or key the caller has no role in is a 404, as if it
//! did not exist. A key's secret is shown once, in the answer that creates
//! it; passwords are never shown.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use runlens_engine::model::limits::{MAX_LIST_LIMIT, MAX_QUERY_TEXT_CHARS};
use runlens_engine::model::{Actor, ApiKey, AuditEntry, Member, Project, Role, User};
use runlens_engine::openapi::raw;
use runlens_engine::Engine;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::json;
use utoipa::openapi::{RefOr, Schema};
use utoipa::{IntoParams, PartialSchema, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::{Caller, Via};
use super::super::error::AppError;
use super::super::extract::{optional, AppJson, AppQuery, Bounded};
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::ProjectHeader;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(me))
        .routes(routes!(projects, create_project))
        .routes(routes!(members))
        .routes(routes!(set_member, remove_member))
        .routes(routes!(users, create_user))
        .routes(routes!(keys, create_key))
        .routes(routes!(revoke_key))
        .routes(routes!(audit))
}

/// Items in a page when `limit` is not given.
pub const DEFAULT_PAGE: u32 = 50;

crate::bounded_param!(
    /// Items in a page.
    PageSize = 1, MAX_LIST_LIMIT.into()
);

/// A page's `limit` (default [`DEFAULT_PAGE`]).
fn page_size(limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>) -> u32 {
    limit.map_or(DEFAULT_PAGE, Bounded::as_u32)
}

/// An opaque paging cursor: at most [`MAX_QUERY_TEXT_CHARS`] characters.
#[derive(Clone, Debug)]
pub struct Cursor(pub String);

impl std::str::FromStr for Cursor {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text.chars().count() > MAX_QUERY_TEXT_CHARS {
            return Err(format!("must be at most {MAX_QUERY_TEXT_CHARS} characters"));
        }
        Ok(Cursor(text.to_owned()))
    }
}

impl PartialSchema for Cursor {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "string", "maxLength": MAX_QUERY_TEXT_CHARS })))
    }
}

/// A page of a list by name (or id): `limit` and the previous page's `next_cursor`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Items in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// The `next_cursor` of the previous page.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<Cursor>, inline)]
    pub cursor: Option<Cursor>,
}

/// `items` fetched with one more than `limit`: the page, and the cursor of
/// the next one (`key` of the page's last item) when there is more.
fn page<T>(mut items: Vec<T>, limit: u32, key: impl Fn(&T) -> String) -> (Vec<T>, Option<String>) {
    let more = items.len() > limit as usize;
    items.truncate(limit as usize);
    let next = if more { items.last().map(key) } else { None };
    (items, next)
}

fn not_found(what: &str) -> AppError {
    AppError::NotFound(format!("{what} not found"))
}

// --- The caller ---

/// How the caller proved who they are.
#[derive(Clone, Copy, Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AuthVia {
    /// A signed-in browser session.
    Session,
    /// An API key (`Authorization: Bearer rl_…`).
    Key,
}

/// A project and the caller's role in it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ProjectRole {
    pub project: String,
    pub role: Role,
}

/// The caller.
#[derive(Debug, Serialize, ToSchema)]
pub struct Me {
    /// Who the caller is: a user (`user:<id>`) or a key (`key:<id>`), and its name.
    pub actor: Actor,
    pub via: AuthVia,
    /// Admin of every project; may create projects and users.
    pub instance_admin: bool,
    /// The project collection requests are about (`X-Runlens-Project`, else
    /// the session's choice, else the key's project, else `default`).
    pub project: String,
    /// The caller's role in `project` (null when none).
    pub role: Option<Role>,
    /// The projects the caller has a role in, by name, with the role; for an
    /// instance admin every project (the first 200: `GET /api/projects`
    /// pages them all).
    pub projects: Vec<ProjectRole>,
}

/// Who is calling: the user or key, how, the current project and role, and
/// the caller's projects.
#[utoipa::path(
    get,
    path = "/api/me",
    tag = "identity",
    params(ProjectHeader),
    responses(
        (status = 200, description = "OK", body = Me),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn me(State(engine): State<Engine>, caller: Caller) -> Result<Json<Me>, AppError> {
    let projects = if caller.instance_admin {
        let all = engine.directory().projects(None, MAX_LIST_LIMIT).await?;
        all.into_iter().map(|p| ProjectRole { project: p.name, role: Role::Admin }).collect()
    } else {
        caller.member_projects().map(|(project, role)| ProjectRole { project: project.to_owned(), role }).collect()
    };
    Ok(Json(Me {
        actor: caller.actor.clone(),
        via: match caller.via {
            Via::Session => AuthVia::Session,
            Via::Key => AuthVia::Key,
        },
        instance_admin: caller.instance_admin,
        role: caller.role_in(&caller.project),
        project: caller.project.clone(),
        projects,
    }))
}

// --- Projects ---

/// A project, with the caller's role in it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProjectItem {
    #[serde(flatten)]
    pub project: Project,
    pub role: Role,
}

/// One page of projects, by name.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProjectList {
    pub projects: Vec<ProjectItem>,
    /// The `cursor` of the next page; null on the last one.
    pub next_cursor: Option<String>,
}

/// The projects the caller has a role in (an instance admin: every project), by name.
#[utoipa::path(
    get,
    path = "/api/projects",
    tag = "identity",
    params(PageQuery),
    responses(
        (status = 200, description = "OK", body = ProjectList),
        (status = 400, response = BadRequest),
        (status = 500, response = Internal),
    )
)]
async fn projects(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<PageQuery>,
) -> Result<Json<ProjectList>, AppError> {
    let limit = page_size(q.limit);
    let after = q.cursor.map(|c| c.0);
    let found: Vec<Project> = if caller.instance_admin {
        engine.directory().projects(after.as_deref(), limit + 1).await?
    } else {
        let mut found = Vec::new();
        let names = caller.member_projects().map(|(p, _)| p).filter(|p| after.as_deref().is_none_or(|a| *p > a));
        for name in names.take(limit as usize + 1) {
            if let Some(project) = engine.directory().project(name).await? {
                found.push(project);
            }
        }
        found
    };
    let (found, next_cursor) = page(found, limit, |p| p.name.clone());
    let projects = found
        .into_iter()
        .filter_map(|project| caller.role_in(&project.name).map(|role| ProjectItem { project, role }))
        .collect();
    Ok(Json(ProjectList { projects, next_cursor }))
}

/// A new project.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewProject {
    /// 1 to 40 lower-case letters, digits and `-`, not starting with `-`.
    #[schema(min_length = 1, max_length = 40, pattern = "^[a-z0-9][a-z0-9-]*$")]
    pub name: String,
}

/// Create a project (instance admins); it starts with the built-in model's price and no members.
#[utoipa::path(
    post,
    path = "/api/projects",
    tag = "identity",
    request_body(content = NewProject, example = json!({"name": "support-bot"})),
    responses(
        (status = 201, description = "Created", body = Project),
        (status = 400, response = BadRequest),
        (status = 409, response = Conflict),
        (status = 413, response = TooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 500, response = Internal),
    )
)]
async fn create_project(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(req): AppJson<NewProject>,
) -> Result<(StatusCode, Json<Project>), AppError> {
    caller.require_instance_admin()?;
    let project = engine.create_project(&req.name, &caller.actor).await?;
    Ok((StatusCode::CREATED, Json(project)))
}

// --- Members ---

/// The path of a project.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ProjectPath {
    /// A project name.
    pub project: String,
}

/// The path of one member of a project.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct MemberPath {
    /// A project name.
    pub project: String,
    /// A user name.
    pub user: String,
}

/// Checks the caller is an admin of `project`, which exists.
async fn project_admin(engine: &Engine, caller: &Caller, project: &str) -> Result<(), AppError> {
    caller.require(project, Role::Admin)?;
    if engine.directory().project(project).await?.is_none() {
        return Err(not_found(&format!("project `{project}`")));
    }
    Ok(())
}

/// One page of a project's members, by user name.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemberList {
    pub members: Vec<Member>,
    /// The `cursor` of the next page; null on the last one.
    pub next_cursor: Option<String>,
}

/// A project's members and their roles, by user name (admins of the project).
#[utoipa::path(
    get,
    path = "/api/projects/{project}/members",
    tag = "identity",
    params(ProjectPath, PageQuery),
    responses(
        (status = 200, description = "OK", body = MemberList),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn members(
    State(engine): State<Engine>,
    caller: Caller,
    Path(ProjectPath { project }): Path<ProjectPath>,
    AppQuery(q): AppQuery<PageQuery>,
) -> Result<Json<MemberList>, AppError> {
    project_admin(&engine, &caller, &project).await?;
    let limit = page_size(q.limit);
    let after = q.cursor.map(|c| c.0);
    let found = engine.directory().members(&project, after.as_deref(), limit + 1).await?;
    let (members, next_cursor) = page(found, limit, |m| m.user_name.clone());
    Ok(Json(MemberList { members, next_cursor }))
}

/// A member's role.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemberRole {
    pub role: Role,
}

/// Give a user a role in a project, or change it (admins of the project).
#[utoipa::path(
    put,
    path = "/api/projects/{project}/members/{user}",
    tag = "identity",
    params(MemberPath),
    request_body(content = MemberRole, example = json!({"role": "approver"})),
    responses(
        (status = 200, description = "The member", body = Member),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 413, response = TooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 500, response = Internal),
    )
)]
async fn set_member(
    State(engine): State<Engine>,
    caller: Caller,
    Path(MemberPath { project, user }): Path<MemberPath>,
    AppJson(req): AppJson<MemberRole>,
) -> Result<Json<Member>, AppError> {
    caller.require(&project, Role::Admin)?;
    Ok(Json(engine.set_member(&project, &user, req.role, &caller.actor).await?))
}

/// Take a user's role in a project away (admins of the project).
#[utoipa::path(
    delete,
    path = "/api/projects/{project}/members/{user}",
    tag = "identity",
    params(MemberPath),
    responses(
        (status = 204, description = "Removed"),
        (status = 404, response = NotFound),
        (status = 413, response = TooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 500, response = Internal),
    )
)]
async fn remove_member(
    State(engine): State<Engine>,
    caller: Caller,
    Path(MemberPath { project, user }): Path<MemberPath>,
) -> Result<StatusCode, AppError> {
    caller.require(&project, Role::Admin)?;
    engine.remove_member(&project, &user, &caller.actor).await?;
    Ok(StatusCode::NO_CONTENT)
}

// --- Users ---

/// One page of users, by name.
#[derive(Debug, Serialize, ToSchema)]
pub struct UserList {
    pub users: Vec<User>,
    /// The `cursor` of the next page; null on the last one.
    pub next_cursor: Option<String>,
}

/// Every user, by name (instance admins).
#[utoipa::path(
    get,
    path = "/api/users",
    tag = "identity",
    params(PageQuery),
    responses(
        (status = 200, description = "OK", body = UserList),
        (status = 400, response = BadRequest),
        (status = 500, response = Internal),
    )
)]
async fn users(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<PageQuery>,
) -> Result<Json<UserList>, AppError> {
    caller.require_instance_admin()?;
    let limit = page_size(q.limit);
    let after = q.cursor.map(|c| c.0);
    let found = engine.directory().users(after.as_deref(), limit + 1).await?;
    let (users, next_cursor) = page(found, limit, |u| u.name.clone());
    Ok(Json(UserList { users, next_cursor }))
}

/// A new user. The password is never shown again, nor stored (only its
/// argon2id hash).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewUser {
    /// 1 to 64 letters, digits, `.`, `_`, `-` or `@`.
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._@-]+$")]
    pub name: String,
    /// 8 to 1,024 characters.
    #[schema(min_length = 8, max_length = 1024)]
    pub password: String,
    /// Admin of every project; may create projects and users.
    #[serde(default)]
    pub instance_admin: bool,
}

impl std::fmt::Debug for NewUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewUser").field("name", &self.name).field("instance_admin", &self.instance_admin).finish()
    }
}

/// Create a user (instance admins); give them roles with `PUT /api/projects/{project}/members/{user}`.
#[utoipa::path(
    post,
    path = "/api/users",
    tag = "identity",
    request_body(content = NewUser, example = json!({"name": "ada", "password": "a long passphrase", "instance_admin": false})),
    responses(
        (status = 201, description = "Created", body = User),
        (status = 400, response = BadRequest),
        (status = 409, response = Conflict),
        (status = 413, response = TooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 500, response = Internal),
    )
)]
async fn create_user(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(req): AppJson<NewUser>,
) -> Result<(StatusCode, Json<User>), AppError> {
    caller.require_instance_admin()?;
    let user = engine.create_user(&req.name, &req.password, req.instance_admin, &caller.actor).await?;
    Ok((StatusCode::CREATED, Json(user)))
}

// --- Keys ---

/// `instance`: the whole instance rather than the current project.
#[derive(Clone, Copy, Debug)]
pub struct InstanceScope;

impl std::str::FromStr for InstanceScope {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "instance" => Ok(InstanceScope),
            other => Err(format!("must be `instance`, not `{other}`")),
        }
    }
}

impl PartialSchema for InstanceScope {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "string", "enum": ["instance", ""] })))
    }
}

/// The key list's scope and page.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
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
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn keys(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<KeysQuery>,
) -> Result<Json<KeyList>, AppError> {
    let project = scope_project(&caller, q.scope)?;
    let limit = page_size(q.limit);
    let before = q.cursor.map(|c| c.0);
    let found = engine.directory().keys(project, before.as_deref(), limit + 1).await?;
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
    const PRINTABLE: &str = "[^\\u0000-\\u001f\\u007f-\\u009f]";
    const VISIBLE: &str = "[^\\u0000-\\u0020\\u007f-\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
    raw(json!({
        "type": "string",
        "minLength": 1,
        "maxLength": 100,
        "pattern": format!("^{PRINTABLE}*{VISIBLE}{PRINTABLE}*$"),
        "description": "What the key is for: 1 to 100 characters, no control characters, not blank.",
    }))
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
        (status = 413, response = TooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 500, response = Internal),
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
    let (key, secret) = engine.create_key(&req.name, project.as_deref(), req.role, &caller.actor).await?;
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
        (status = 413, response = TooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 500, response = Internal),
    )
)]
async fn revoke_key(
    State(engine): State<Engine>,
    caller: Caller,
    Path(KeyPath { id }): Path<KeyPath>,
) -> Result<Json<ApiKey>, AppError> {
    caller.key(&engine, &id, Role::Admin).await?;
    Ok(Json(engine.revoke_key(&id, &caller.actor).await?))
}

/// The project a list with an optional `scope=instance` is about: the
/// current one (its admins), or with the scope every one (`None`; instance
/// admins).
fn scope_project(caller: &Caller, scope: Option<InstanceScope>) -> Result<Option<&str>, AppError> {
    match scope {
        Some(InstanceScope) => caller.require_instance_admin().map(|()| None),
        None => caller.require_current(Role::Admin).map(Some),
    }
}

// --- Audit ---

crate::bounded_param!(
    /// An audit entry's `seq`.
    AuditSeq = 1, i64::MAX as u64
);

/// The audit log's scope and page.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// `instance` (instance admins): every entry of the instance; otherwise
    /// the current project's, with its members' sign-ins and sign-outs.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<InstanceScope>, inline)]
    pub scope: Option<InstanceScope>,
    /// Entries in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// Only entries older than this `seq`: the `next_before` of the previous page.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<AuditSeq>, inline)]
    pub before: Option<Bounded<1, { i64::MAX as u64 }>>,
}

/// One page of the audit log, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditList {
    pub entries: Vec<AuditEntry>,
    /// The `before` of the next page; null on the last one.
    pub next_before: Option<i64>,
}

/// The audit log, newest first: who did what and when (admins of the current project).
///
/// Key changes, members, decisions, cancels, imports and prices of the project, and its members' sign-ins and
/// sign-outs; with `scope=instance` (instance admins), every entry: failed sign-ins, users, every project.
#[utoipa::path(
    get,
    path = "/api/audit",
    tag = "identity",
    params(ProjectHeader, AuditQuery),
    responses(
        (status = 200, description = "OK", body = AuditList),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn audit(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<AuditQuery>,
) -> Result<Json<AuditList>, AppError> {
    let project = scope_project(&caller, q.scope)?;
    let limit = page_size(q.limit);
    let before = q.before.map(|b| i64::try_from(b.0).unwrap_or(i64::MAX));
    let found = engine.directory().audit(project, before, limit + 1).await?;
    let (entries, next) = page(found, limit, |e| e.seq.to_string());
    Ok(Json(AuditList { entries, next_before: next.and_then(|s| s.parse().ok()) }))
}
