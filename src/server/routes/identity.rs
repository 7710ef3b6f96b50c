//! Who is asking and who may act: the caller (`/api/me`), projects and their
//! members, and users.
//!
//! Who may call what:
//! - anyone signed in or holding a key: `GET /api/me`, `GET /api/projects`
//!   (the projects they have a role in; an instance admin sees all);
//! - an admin of a project: its members;
//! - an instance admin: creating projects, listing and creating users.
//!
//! A project or member the caller has no role in is a 404, as if it did not
//! exist; passwords are never shown. API keys are in `keys`, the audit log
//! in `audit`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use runlens_engine::model::limits::MAX_LIST_LIMIT;
use runlens_engine::model::{Actor, Member, Project, Role, User};
use runlens_engine::Engine;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::{Caller, Via};
use super::super::error::AppError;
use super::super::extract::{AppJson, AppQuery};
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::listing::*;
use super::ProjectHeader;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(me))
        .routes(routes!(projects, create_project))
        .routes(routes!(members))
        .routes(routes!(set_member, remove_member))
        .routes(routes!(users, create_user))
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
        ReadErrors,
    )
)]
async fn me(State(engine): State<Engine>, caller: Caller) -> Result<Json<Me>, AppError> {
    let projects = if caller.instance_admin {
        let all = engine.directory().projects(None, 0, MAX_LIST_LIMIT).await?;
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
    offset_or_cursor(&q.cursor, &q.offset)?;
    let limit = page_size(q.limit);
    let offset = page_offset(q.offset);
    let after = q.cursor.map(|c| c.0);
    let found: Vec<Project> = if caller.instance_admin {
        engine.directory().projects(after.as_deref(), offset, limit + 1).await?
    } else {
        let mut found = Vec::new();
        let names = caller.member_projects().map(|(p, _)| p).filter(|p| after.as_deref().is_none_or(|a| *p > a));
        for name in names.skip(offset as usize).take(limit as usize + 1) {
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
        BodyErrors,
    )
)]
async fn create_project(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(req): AppJson<NewProject>,
) -> Result<(StatusCode, Json<Project>), AppError> {
    caller.require_instance_admin()?;
    let project = engine.identity().create_project(&req.name, &caller.actor).await?;
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
    engine.identity().project(project).await?;
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
        QueryErrors,
    )
)]
async fn members(
    State(engine): State<Engine>,
    caller: Caller,
    Path(ProjectPath { project }): Path<ProjectPath>,
    AppQuery(q): AppQuery<PageQuery>,
) -> Result<Json<MemberList>, AppError> {
    project_admin(&engine, &caller, &project).await?;
    offset_or_cursor(&q.cursor, &q.offset)?;
    let limit = page_size(q.limit);
    let after = q.cursor.map(|c| c.0);
    let found = engine.directory().members(&project, after.as_deref(), page_offset(q.offset), limit + 1).await?;
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
        BodyErrors,
    )
)]
async fn set_member(
    State(engine): State<Engine>,
    caller: Caller,
    Path(MemberPath { project, user }): Path<MemberPath>,
    AppJson(req): AppJson<MemberRole>,
) -> Result<Json<Member>, AppError> {
    caller.require(&project, Role::Admin)?;
    Ok(Json(engine.identity().set_member(&project, &user, req.role, &caller.actor).await?))
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
        BodyErrors,
    )
)]
async fn remove_member(
    State(engine): State<Engine>,
    caller: Caller,
    Path(MemberPath { project, user }): Path<MemberPath>,
) -> Result<StatusCode, AppError> {
    caller.require(&project, Role::Admin)?;
    engine.identity().remove_member(&project, &user, &caller.actor).await?;
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
    offset_or_cursor(&q.cursor, &q.offset)?;
    let limit = page_size(q.limit);
    let after = q.cursor.map(|c| c.0);
    let found = engine.directory().users(after.as_deref(), page_offset(q.offset), limit + 1).await?;
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
        BodyErrors,
    )
)]
async fn create_user(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(req): AppJson<NewUser>,
) -> Result<(StatusCode, Json<User>), AppError> {
    caller.require_instance_admin()?;
    let user = engine.identity().create_user(&req.name, &req.password, req.instance_admin, &caller.actor).await?;
    Ok((StatusCode::CREATED, Json(user)))
}
