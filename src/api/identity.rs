//! Server functions of the identity pages: who is signed in (the
//! navigation), the first-start setup link, projects and their members,
//! API keys, and the audit log.
//!
//! Each one checks the caller's role in the current project (members, keys
//! and the audit log need `admin`; creating a project needs an instance
//! admin). [`whoami`] and [`setup_link_valid`] also answer without a caller:
//! the sign-in and setup pages render before anyone has signed in.

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::model::{ApiKey, AuditEntry, Member, Role};
use serde::{Deserialize, Serialize};

/// How many entries one page of the audit log shows.
pub const AUDIT_PAGE: u32 = 50;
/// Projects, members and keys listed at most.
pub const LIST_LIMIT: u32 = 200;

/// The caller as the navigation shows them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Me {
    /// The user's name, or the key's.
    pub name: String,
    /// Signed in with a password (the project switcher and sign-out work
    /// with a session only).
    pub session: bool,
    /// Admin of every project; may create projects and users.
    pub instance_admin: bool,
    /// The project the pages show.
    pub project: String,
    /// The caller's role there.
    pub role: Option<Role>,
    /// Projects the caller can switch to (the current one included), by name.
    pub projects: Vec<String>,
}

impl Me {
    /// Whether the caller has at least `need` in the current project.
    pub fn may(&self, need: Role) -> bool {
        self.role.is_some_and(|r| r >= need)
    }
}

/// The signed-in caller; `None` when nobody is (the sign-in and setup pages).
#[server]
pub async fn whoami() -> Result<Option<Me>, ServerFnError> {
    use axum::http::request::Parts;

    // Not `ssr::caller()`: no caller is no error here.
    let caller = use_context::<Parts>().and_then(|p| p.extensions.get::<super::ssr::Caller>().cloned());
    let Some(caller) = caller else { return Ok(None) };
    let engine = super::ssr::engine()?;
    let projects = match caller.instance_admin {
        true => engine
            .directory()
            .projects(None, 0, LIST_LIMIT)
            .await
            .map_err(super::ssr::to_server_error)?
            .into_iter()
            .map(|p| p.name)
            .collect(),
        false => caller.member_projects().map(|(p, _)| p.to_owned()).collect(),
    };
    Ok(Some(Me {
        name: caller.actor.name.clone(),
        session: caller.via == crate::server::auth::Via::Session,
        instance_admin: caller.instance_admin,
        role: caller.role_in(&caller.project),
        project: caller.project,
        projects,
    }))
}

/// Whether the first-start setup link with this token would be accepted.
#[server]
pub async fn setup_link_valid(token: String) -> Result<bool, ServerFnError> {
    let engine = super::ssr::engine()?;
    engine.identity().setup_token_valid(token.trim()).await.map_err(super::ssr::to_server_error)
}

/// What `/settings/projects` shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProjectsView {
    /// Projects the caller has a role in (every one for an instance admin).
    pub projects: Vec<ProjectRow>,
    pub instance_admin: bool,
    /// The current project.
    pub current: String,
    /// Its members, when the caller is its admin (`None` otherwise).
    pub members: Option<Vec<Member>>,
}

/// One project and the caller's role in it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProjectRow {
    pub name: String,
    pub created_at: DateTime<Utc>,
    pub role: Option<Role>,
}

/// Projects, and the current project's members for its admins.
#[server]
pub async fn project_settings() -> Result<ProjectsView, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(Role::Viewer)?;
    let all: Vec<runlens_engine::model::Project> =
        engine.directory().projects(None, 0, LIST_LIMIT).await.map_err(super::ssr::to_server_error)?;
    let projects = all
        .into_iter()
        .filter_map(|p| {
            let role = caller.role_in(&p.name)?;
            Some(ProjectRow { name: p.name, created_at: p.created_at, role: Some(role) })
        })
        .collect();
    let members = match caller.can(&caller.project, Role::Admin) {
        true => Some(
            engine
                .directory()
                .members(&caller.project, None, 0, LIST_LIMIT)
                .await
                .map_err(super::ssr::to_server_error)?,
        ),
        false => None,
    };
    Ok(ProjectsView { projects, instance_admin: caller.instance_admin, current: caller.project, members })
}

/// Creates a project (instance admins only).
#[server]
pub async fn create_project(name: String) -> Result<String, ServerFnError> {
    let engine = super::ssr::engine()?;
    let caller = super::ssr::caller()?;
    caller.require_instance_admin().map_err(super::ssr::refused)?;
    let project = engine.identity().create_project(name.trim(), &caller.actor).await.map_err(ssr::engine_error)?;
    Ok(project.name)
}

/// Gives user `user` (by name) `role` in the current project (its admins only).
#[server]
pub async fn set_member(user: String, role: String) -> Result<String, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(Role::Admin)?;
    let role = Role::parse(role.trim()).ok_or_else(|| ssr::invalid(format!("unknown role `{}`", role.trim())))?;
    let member = engine
        .identity()
        .set_member(&caller.project, user.trim(), role, &caller.actor)
        .await
        .map_err(ssr::engine_error)?;
    Ok(format!("{} is now {role} of {}.", member.user_name, caller.project))
}

/// Removes user `user` (by name) from the current project (its admins only).
#[server]
pub async fn remove_member(user: String) -> Result<String, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(Role::Admin)?;
    let user = user.trim();
    engine.identity().remove_member(&caller.project, user, &caller.actor).await.map_err(ssr::engine_error)?;
    Ok(format!("{user} was removed from {}.", caller.project))
}

/// The current project's API keys (its admins only), newest first.
#[server]
pub async fn list_keys() -> Result<Vec<ApiKey>, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(Role::Admin)?;
    engine.directory().keys(Some(&caller.project), None, 0, LIST_LIMIT).await.map_err(super::ssr::to_server_error)
}

/// A key just created, with its secret: shown this once, never again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewKey {
    pub key: ApiKey,
    pub secret: String,
}

/// Creates an API key of the current project (its admins only).
#[server]
pub async fn create_key(name: String, role: String) -> Result<NewKey, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(Role::Admin)?;
    let role = Role::parse(role.trim()).ok_or_else(|| ssr::invalid(format!("unknown role `{}`", role.trim())))?;
    let (key, secret) = engine
        .identity()
        .create_key(name.trim(), Some(&caller.project), role, &caller.actor)
        .await
        .map_err(ssr::engine_error)?;
    Ok(NewKey { key, secret })
}

/// Revokes a key of the current project (its admins only); another
/// project's key is not found.
#[server]
pub async fn revoke_key(id: String) -> Result<String, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(Role::Admin)?;
    caller.key(&engine, &id, Role::Admin).await.map_err(super::ssr::refused)?;
    let key = engine.identity().revoke_key(&id, &caller.actor).await.map_err(ssr::engine_error)?;
    Ok(format!("Revoked the key {} ({}).", key.name, key.prefix))
}

/// One page of an audit log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditPage {
    /// The project, or `None` for the instance-wide log (sign-ins, users, projects).
    pub project: Option<String>,
    pub entries: Vec<AuditEntry>,
    /// The cursor of the next (older) page.
    pub next_before: Option<i64>,
    /// The caller may read the instance-wide log too.
    pub instance_admin: bool,
}

/// The current project's audit log (its admins only), newest first, older
/// than `before`; with `instance`, the instance-wide log (instance admins).
#[server]
pub async fn audit_log(before: Option<i64>, instance: Option<bool>) -> Result<AuditPage, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(Role::Admin)?;
    let project = match instance.unwrap_or(false) {
        true => {
            caller.require_instance_admin().map_err(super::ssr::refused)?;
            None
        }
        false => Some(caller.project.clone()),
    };
    let mut entries = engine
        .directory()
        .audit(project.as_deref(), before, 0, AUDIT_PAGE + 1)
        .await
        .map_err(super::ssr::to_server_error)?;
    let more = entries.len() > AUDIT_PAGE as usize;
    entries.truncate(AUDIT_PAGE as usize);
    let next_before = more.then(|| entries.last().map(|e| e.seq)).flatten();
    Ok(AuditPage { project, entries, next_before, instance_admin: caller.instance_admin })
}

#[cfg(feature = "ssr")]
mod ssr {
    use leptos::prelude::ServerFnError;
    use runlens_engine::EngineError;

    use super::super::ssr::{classify, set_status};

    /// An engine error with its status (400, 404, 409…).
    pub fn engine_error(err: EngineError) -> ServerFnError {
        let error = classify(err, "an identity server function");
        set_status(error.status());
        ServerFnError::new(error.message)
    }

    /// A 400 with `message`.
    pub fn invalid(message: String) -> ServerFnError {
        set_status(axum::http::StatusCode::BAD_REQUEST);
        ServerFnError::new(message)
    }
}
