//! Who is asking, and what they may do.
//!
//! [`authenticate`] runs before every route. It finds the caller from an
//! `Authorization: Bearer rl_…` key or the session cookie (see [`sessions`]),
//! puts a [`Caller`] into the request, and refuses what may not go on:
//! - no credentials: pages redirect to `/login`, the API answers 401 with
//!   `WWW-Authenticate: Bearer` (a bad or revoked key is 401 everywhere);
//! - an unsafe request (POST, PUT, PATCH, DELETE) made with the session
//!   cookie must show that it comes from this app's own pages: an `Origin`
//!   of this server, else `Sec-Fetch-Site: same-origin`, else a `Referer`
//!   of this server; otherwise 403 (cross-site request forgery). Requests
//!   with a key are exempt: a browser never adds one by itself.
//!
//! Handlers then ask the [`Caller`] for a role in a project
//! ([`Caller::require`], [`Caller::run`]): anything of a project the caller
//! has no role in is a 404, exactly as if it did not exist; a role too low
//! is a 403 naming the role needed.
//!
//! Public: `/healthz`, the sign-in and setup pages and their posts, the
//! theme switch (`POST /theme`: it only sets the `runlens_theme` cookie), the
//! OpenAPI document and its page, and the static site (wasm, CSS).

pub mod login;
mod next;
pub mod sessions;

pub use next::{local_target, urlencode};

use std::collections::BTreeMap;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use runlens_engine::model::{Actor, Agent, ApiKey, Role, User, DEFAULT_PROJECT};
use runlens_engine::store::RunHead;
use runlens_engine::{key_actor, user_actor, Engine};
use tower_sessions::Session;

use super::error::AppError;
use super::guard::{normalize_origin, own_origin, Origins};
use super::state::AppState;

/// The header a client names the project of a collection request with
/// (`GET /api/runs`, `POST /api/runs`…); without it, the session's current
/// project, the key's project, or `default`.
pub const PROJECT_HEADER: &str = "x-runlens-project";

/// Session keys.
pub const SESSION_USER: &str = "user_id";
pub const SESSION_PROJECT: &str = "project";

/// How the caller proved who they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Via {
    /// The session cookie of a signed-in user.
    Session,
    /// An API key.
    Key,
}

/// What a caller proved who they are with, kept to check again while a
/// long-lived response is open (see `server::live`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Credential {
    /// An API key, by id.
    Key(String),
    /// A session, by id.
    Session(String),
}

/// The authenticated caller of one request.
#[derive(Clone, Debug)]
pub struct Caller {
    pub actor: Actor,
    pub via: Via,
    /// The key or session behind `via`.
    pub credential: Credential,
    /// Admin of every project; may create projects and users.
    pub instance_admin: bool,
    /// The caller's role per project (besides `instance_admin`).
    pub roles: BTreeMap<String, Role>,
    /// The project collection requests are about (see [`PROJECT_HEADER`]).
    pub project: String,
    /// The signed-in user, for a session.
    pub user: Option<User>,
    /// The key, for a key.
    pub key: Option<ApiKey>,
}

impl Caller {
    /// The caller's role in `project`, if any.
    pub fn role_in(&self, project: &str) -> Option<Role> {
        if self.instance_admin {
            return Some(Role::Admin);
        }
        self.roles.get(project).copied()
    }

    /// Whether the caller has at least `need` in `project`.
    pub fn can(&self, project: &str, need: Role) -> bool {
        self.role_in(project).is_some_and(|r| r >= need)
    }

    /// Checks the caller has at least `need` in `project`: 404 when they have
    /// no role there at all (the project is not theirs to know of), 403
    /// naming the role needed when theirs is lower.
    pub fn require(&self, project: &str, need: Role) -> Result<(), AppError> {
        match self.role_in(project) {
            None => Err(AppError::NotFound(format!("project `{project}` not found"))),
            Some(role) if role < need => Err(forbidden(need, role, project)),
            Some(_) => Ok(()),
        }
    }

    /// [`Caller::require`] in the current project; returns its name.
    pub fn require_current(&self, need: Role) -> Result<&str, AppError> {
        self.require(&self.project, need)?;
        Ok(&self.project)
    }

    /// Run `id`'s head when the caller has at least `need` in its project;
    /// a run of a project the caller has no role in is "not found", like a
    /// run that does not exist.
    pub async fn run(&self, engine: &Engine, id: &str, need: Role) -> Result<RunHead, AppError> {
        let head = engine.runs().run_head(id).await?;
        match self.role_in(&head.project) {
            None => Err(AppError::NotFound(format!("run `{id}` not found"))),
            Some(role) if role < need => Err(forbidden(need, role, &head.project)),
            Some(_) => Ok(head),
        }
    }

    /// Agent `id` (at its current version) when the caller has at least
    /// `need` in its project; an agent of a project the caller has no role in
    /// is "not found", like an agent that does not exist.
    pub async fn agent(&self, engine: &Engine, id: &str, need: Role) -> Result<Agent, AppError> {
        use runlens_engine::model::limits::MAX_ID_CHARS;
        let hidden =
            || AppError::NotFound(format!("agent `{}` not found", id.chars().take(MAX_ID_CHARS).collect::<String>()));
        let agent = if id.chars().count() <= MAX_ID_CHARS { engine.store().agents().agent(id).await? } else { None };
        let agent = agent.ok_or_else(hidden)?;
        match self.role_in(&agent.project) {
            None => Err(hidden()),
            Some(role) if role < need => Err(forbidden(need, role, &agent.project)),
            Some(_) => Ok(agent),
        }
    }

    /// API key `id` when the caller has at least `need` in its project (an
    /// instance-admin key: when the caller is an instance admin); a key the
    /// caller may not see is "not found", like one that does not exist.
    pub async fn key(&self, engine: &Engine, id: &str, need: Role) -> Result<ApiKey, AppError> {
        let hidden = || AppError::NotFound(format!("key `{}` not found", id.chars().take(100).collect::<String>()));
        let key = if id.len() <= 100 { engine.directory().key(id).await? } else { None };
        let key = key.ok_or_else(hidden)?;
        match &key.project {
            Some(p) if self.role_in(p).is_none() => return Err(hidden()),
            Some(p) => self.require(p, need)?,
            None if !self.instance_admin => return Err(hidden()),
            None => {}
        }
        Ok(key)
    }

    /// Must be an instance admin (creating projects and users).
    pub fn require_instance_admin(&self) -> Result<(), AppError> {
        if self.instance_admin {
            Ok(())
        } else {
            Err(AppError::Forbidden("this needs an instance admin".into()))
        }
    }

    /// Projects the caller has a role in (every project for an instance
    /// admin is not listed here: see `projects`).
    pub fn member_projects(&self) -> impl Iterator<Item = (&str, Role)> {
        self.roles.iter().map(|(p, r)| (p.as_str(), *r))
    }
}

fn forbidden(need: Role, have: Role, project: &str) -> AppError {
    AppError::Forbidden(format!("this needs the `{need}` role in project `{project}`; yours is `{have}`"))
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| AppError::Unauthorized("sign in, or send an API key as `Authorization: Bearer rl_…`".into()))
    }
}

/// Paths served without credentials.
fn is_public(path: &str, pkg_prefix: &str) -> bool {
    matches!(path, "/login" | "/logout" | "/setup" | "/theme") || is_asset(path, pkg_prefix)
}

/// Public paths that never act on who is asking: served without reading
/// the session (the bundle's files come with the cookie on every page load).
fn is_asset(path: &str, pkg_prefix: &str) -> bool {
    matches!(path, "/healthz" | "/api/openapi.json" | "/api/docs" | "/favicon.ico")
        || path.starts_with(pkg_prefix)
        || path.starts_with("/style/")
}

fn is_unsafe(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE)
}

fn is_api(path: &str) -> bool {
    path == "/api" || path.starts_with("/api/") || path == crate::server::routes::otlp::PATH
}

/// The bearer token of the request, when it sends one.
fn bearer(req: &Request) -> Option<Result<String, ()>> {
    let value = req.headers().get(header::AUTHORIZATION)?;
    let text = value.to_str().map_err(|_| ());
    Some(text.and_then(|t| {
        let (scheme, token) = t.trim().split_once(' ').ok_or(())?;
        if scheme.eq_ignore_ascii_case("bearer") {
            Ok(token.trim().to_owned())
        } else {
            Err(())
        }
    }))
}

/// Resolves the caller (see the module docs) and refuses what may not go on.
pub async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    let pkg_prefix = format!("/{}/", state.leptos_options.site_pkg_dir);
    let requested_project = req
        .headers()
        .get(PROJECT_HEADER)
        .map(|v| v.to_str().map(|s| s.trim().to_owned()).unwrap_or_else(|_| "\u{fffd}".into()));
    let caller = match bearer(&req) {
        Some(Ok(token)) => match state.engine.identity().authenticate_key(&token).await {
            Ok(Some(key)) => Some(key_caller(key)),
            Ok(None) => return AppError::Unauthorized("the API key is unknown or revoked".into()).into_response(),
            Err(e) => return AppError::from(e).into_response(),
        },
        Some(Err(())) => {
            return AppError::Unauthorized("the Authorization header must be `Bearer rl_…`".into()).into_response()
        }
        None if is_asset(&path, &pkg_prefix) => return next.run(req).await,
        None => match req.extensions().get::<Session>().cloned() {
            Some(session) => match session_caller(&state.engine, &session).await {
                Ok(caller) => caller,
                Err(e) => return e.into_response(),
            },
            None => None,
        },
    };
    let Some(mut caller) = caller else {
        if is_public(&path, &pkg_prefix) {
            return next.run(req).await;
        }
        if is_api(&path) || req.method() != Method::GET {
            return AppError::Unauthorized("sign in, or send an API key as `Authorization: Bearer rl_…`".into())
                .into_response();
        }
        let target = req.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/");
        return Redirect::to(&format!("/login?next={}", urlencode(target))).into_response();
    };
    if caller.via == Via::Session && is_unsafe(req.method()) {
        if let Err(reason) = same_origin_evidence(&req, &Origins::new(state.public_origin.as_deref())) {
            tracing::warn!(method = %req.method(), %path, %reason, "refused a cross-site request");
            return AppError::Forbidden(reason).into_response();
        }
    }
    if let Some(project) = requested_project {
        // An instance admin has a role in every project, but only in those that exist.
        let exists = match caller.instance_admin {
            true => match state.engine.directory().project(&project).await {
                Ok(found) => found.is_some(),
                Err(e) => return AppError::from(e).into_response(),
            },
            false => true,
        };
        if caller.role_in(&project).is_none() || !exists {
            return AppError::NotFound(format!("project `{project}` not found")).into_response();
        }
        caller.project = project;
    }
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// `Ok` when the request shows it comes from this server's own pages.
fn same_origin_evidence(req: &Request, origins: &Origins) -> Result<(), String> {
    let headers = req.headers();
    let text = |name: header::HeaderName| {
        headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty())
    };
    let own = own_origin(req);
    let ours = |claimed: &str| {
        normalize_origin(claimed).is_some_and(|c| own.as_deref() == Some(c.as_str()) || origins.is_public(&c))
    };
    if let Some(origin) = text(header::ORIGIN) {
        return if ours(origin) {
            Ok(())
        } else {
            Err(format!("cross-origin request refused: Origin `{origin}` is not this server's origin"))
        };
    }
    if let Some(site) = text(header::HeaderName::from_static("sec-fetch-site")) {
        return if site.eq_ignore_ascii_case("same-origin") {
            Ok(())
        } else {
            Err(format!("cross-site request refused (Sec-Fetch-Site: {site})"))
        };
    }
    match text(header::REFERER) {
        Some(referer) if ours(referer) => Ok(()),
        Some(_) => Err("cross-origin request refused: the Referer is not this server's origin".into()),
        None => Err("a signed-in browser request that changes something must carry an Origin or Referer \
             header of this server (or use an API key)"
            .into()),
    }
}

fn key_caller(key: ApiKey) -> Caller {
    let mut roles = BTreeMap::new();
    if let Some(p) = &key.project {
        roles.insert(p.clone(), key.role);
    }
    Caller {
        actor: key_actor(&key),
        via: Via::Key,
        credential: Credential::Key(key.id.clone()),
        instance_admin: key.project.is_none(),
        project: key.project.clone().unwrap_or_else(|| DEFAULT_PROJECT.to_owned()),
        roles,
        user: None,
        key: Some(key),
    }
}

/// The signed-in user of `session`, or `None` when it has none (or the user
/// is gone).
async fn session_caller(engine: &Engine, session: &Session) -> Result<Option<Caller>, AppError> {
    let user_id: Option<String> = session.get(SESSION_USER).await.map_err(session_error)?;
    let Some(user_id) = user_id else { return Ok(None) };
    let chosen: Option<String> = session.get(SESSION_PROJECT).await.map_err(session_error)?;
    let credential = Credential::Session(session.id().map(|id| id.to_string()).unwrap_or_default());
    let caller = user_caller(engine, &user_id, chosen, credential).await?;
    if caller.is_none() {
        session.flush().await.map_err(session_error)?;
    }
    Ok(caller)
}

/// User `user_id` as a caller with their roles, in project `chosen` when
/// they may use it; `None` when the user is gone.
async fn user_caller(
    engine: &Engine,
    user_id: &str,
    chosen: Option<String>,
    credential: Credential,
) -> Result<Option<Caller>, AppError> {
    let Some(user) = engine.directory().user_by_id(user_id).await? else { return Ok(None) };
    let roles: BTreeMap<String, Role> = engine.directory().roles_of(&user.id).await?.into_iter().collect();
    let usable = |p: &str| user.instance_admin || roles.contains_key(p);
    let project = chosen
        .filter(|p| usable(p))
        .or_else(|| usable(DEFAULT_PROJECT).then(|| DEFAULT_PROJECT.to_owned()))
        .or_else(|| roles.keys().next().cloned())
        .unwrap_or_else(|| DEFAULT_PROJECT.to_owned());
    Ok(Some(Caller {
        actor: user_actor(&user),
        via: Via::Session,
        credential,
        instance_admin: user.instance_admin,
        roles,
        project,
        user: Some(user),
        key: None,
    }))
}

/// The caller `credential` stands for now, as [`authenticate`] would find
/// it: `None` once the key is revoked, the session has ended (signed out,
/// expired, its password reset) or its user is gone.
pub async fn current_caller(engine: &Engine, credential: &Credential) -> Result<Option<Caller>, AppError> {
    use tower_sessions::SessionStore;
    match credential {
        Credential::Key(id) => {
            let key = engine.directory().key(id).await?;
            Ok(key.filter(|k| k.revoked_at.is_none()).map(key_caller))
        }
        Credential::Session(id) => {
            let Ok(session_id) = id.parse::<tower_sessions::session::Id>() else { return Ok(None) };
            let record =
                sessions::DbSessions::new(engine.clone()).load(&session_id).await.map_err(session_store_failed)?;
            let Some(data) = record.map(|r| r.data) else { return Ok(None) };
            let text = |key: &str| data.get(key).and_then(|v| v.as_str()).map(str::to_owned);
            let Some(user_id) = text(SESSION_USER) else { return Ok(None) };
            user_caller(engine, &user_id, text(SESSION_PROJECT), credential.clone()).await
        }
    }
}

pub fn session_error(e: tower_sessions::session::Error) -> AppError {
    session_store_failed(e)
}

fn session_store_failed(e: impl std::fmt::Display) -> AppError {
    tracing::error!(error = %e, "session store failed");
    AppError::Engine(super::error::ClientError {
        kind: super::error::ErrorKind::Internal,
        message: super::error::INTERNAL_MESSAGE.to_owned(),
        decision: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn post(headers: &[(&str, &str)]) -> Request {
        let mut req = Request::builder().method(Method::POST).uri("/api/runs").header(header::HOST, "127.0.0.1:3000");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.body(Body::empty()).unwrap()
    }

    #[test]
    fn a_cookie_request_must_show_it_comes_from_this_server() {
        let none = Origins::new(None);
        let ok = |h: &[(&str, &str)]| same_origin_evidence(&post(h), &none).is_ok();
        assert!(ok(&[("origin", "http://127.0.0.1:3000")]));
        assert!(!ok(&[("origin", "http://evil.example")]));
        assert!(!ok(&[("origin", "null")]));
        // An Origin decides even when a Referer or Sec-Fetch-Site would say otherwise.
        assert!(!ok(&[("origin", "http://evil.example"), ("sec-fetch-site", "same-origin")]));
        assert!(ok(&[("sec-fetch-site", "same-origin")]));
        assert!(!ok(&[("sec-fetch-site", "cross-site")]));
        assert!(!ok(&[("sec-fetch-site", "same-site")]));
        assert!(ok(&[("referer", "http://127.0.0.1:3000/runs/x")]));
        assert!(!ok(&[("referer", "http://127.0.0.1:3001/")]));
        assert!(!ok(&[]), "no evidence at all is refused");
        let proxied = Origins::new(Some("https://runlens.example.com"));
        assert!(same_origin_evidence(&post(&[("origin", "https://runlens.example.com")]), &proxied).is_ok());
    }

    #[test]
    fn bearer_headers_parse() {
        let with = |v: &str| {
            let req = Request::builder().header(header::AUTHORIZATION, v).body(Body::empty()).unwrap();
            bearer(&req)
        };
        assert_eq!(with("Bearer rl_x"), Some(Ok("rl_x".into())));
        assert_eq!(with("bearer   rl_x "), Some(Ok("rl_x".into())));
        assert_eq!(with("Basic abc"), Some(Err(())));
        assert_eq!(with("Bearer"), Some(Err(())));
        let none = Request::builder().body(Body::empty()).unwrap();
        assert_eq!(bearer(&none), None);
    }
}
