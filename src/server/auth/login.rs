//! Signing in and out, the first-start setup link, and switching project:
//! plain form posts from the `/login`, `/setup` and navigation forms, each
//! answered with a redirect (303) so a reload never posts twice.
//!
//! Sign-in attempts are limited per account and per client address, in the
//! database (see `Engine::take_sign_in_attempt`): each attempt takes one
//! from both budgets before the password is checked, so of any number of
//! concurrent attempts, on this server or on others sharing the database,
//! at most the limit are checked; past it, an attempt is refused without
//! checking the password until the window has passed. A successful sign-in
//! clears the account's budget and gives the address its attempt back.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use runlens_engine::user_actor;
use serde::Deserialize;
use tower_sessions::Session;

use super::{local_target, session_error, urlencode, Caller, SESSION_PROJECT, SESSION_USER};
use crate::server::error::{AppError, ClientError};
use crate::server::state::AppState;

/// Sign-in attempts checked per account in one window (a success starts afresh).
pub const MAX_FAILURES_PER_ACCOUNT: u32 = 5;
/// Failed sign-ins allowed per client address in one window.
pub const MAX_FAILURES_PER_ADDRESS: u32 = 20;
/// The window attempts are counted in, from the first one.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(15 * 60);
/// The longest account name a budget is kept under (longer names are cut:
/// no user has one, see `identity::check_user_name`).
const MAX_SUBJECT_NAME: usize = 100;

/// The sign-in form.
#[derive(Debug, Deserialize)]
pub struct LoginForm {
    pub username: String,
    pub password: String,
    #[serde(default)]
    pub next: Option<String>,
}

fn client_address(connect: Option<&ConnectInfo<SocketAddr>>) -> String {
    connect.map_or_else(|| "unknown".to_owned(), |c| c.0.ip().to_string())
}

fn login_again(error: &str, next: &str) -> Response {
    Redirect::to(&format!("/login?error={error}&next={}", urlencode(next))).into_response()
}

/// `POST /login`: signs in and goes to `next` (a path of this site).
pub async fn login(
    State(state): State<AppState>,
    connect: Option<Extension<ConnectInfo<SocketAddr>>>,
    session: Session,
    Form(form): Form<LoginForm>,
) -> Result<Response, AppError> {
    let next = local_target(form.next.as_deref());
    let address = client_address(connect.as_ref().map(|c| &c.0));
    let name = form.username.trim().to_owned();
    let account = format!("account:{}", name.to_lowercase().chars().take(MAX_SUBJECT_NAME).collect::<String>());
    let from = format!("address:{address}");
    let budgets = [(account.as_str(), MAX_FAILURES_PER_ACCOUNT), (from.as_str(), MAX_FAILURES_PER_ADDRESS)];
    let window = chrono::Duration::from_std(FAILURE_WINDOW).unwrap_or(chrono::Duration::MAX);
    if !state.engine.identity().take_sign_in_attempt(&budgets, window).await? {
        tracing::warn!(user = %name, %address, "sign-in refused: too many failed attempts");
        return Ok(login_again("throttled", &next));
    }
    let Some(user) = state.engine.identity().check_password(&name, &form.password).await? else {
        let who = runlens_engine::model::Actor { id: format!("address:{address}"), name: address.clone() };
        // An unknown name is not recorded: it may be a password typed into the wrong field.
        let known = matches!(state.engine.directory().user_by_name(&name).await, Ok(Some(_)));
        let shown = if known { name.clone() } else { "(an unknown name)".to_owned() };
        state.engine.identity().audit(None, &who, "sign_in_failed", Some(&shown), None).await;
        return Ok(login_again("invalid", &next));
    };
    state.engine.identity().sign_in_succeeded(&account, &from).await?;
    // A new session id on sign-in: a planted cookie never becomes a signed-in one.
    session.cycle_id().await.map_err(session_error)?;
    session.insert(SESSION_USER, &user.id).await.map_err(session_error)?;
    state
        .engine
        .identity()
        .audit(None, &user_actor(&user), "sign_in", Some(&user.name), Some(format!("from {address}")))
        .await;
    Ok(Redirect::to(&next).into_response())
}

/// `POST /logout`: ends the session.
pub async fn logout(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    session: Session,
) -> Result<Response, AppError> {
    if let Some(Extension(caller)) = caller {
        if caller.via == super::Via::Session {
            state.engine.identity().audit(None, &caller.actor, "sign_out", Some(&caller.actor.name), None).await;
        }
    }
    session.flush().await.map_err(session_error)?;
    Ok(Redirect::to("/login").into_response())
}

/// The setup form: the link's token, and the first admin's name and password.
#[derive(Debug, Deserialize)]
pub struct SetupForm {
    pub token: String,
    pub username: String,
    pub password: String,
}

/// `POST /setup`: creates the first admin with the one-time link and signs
/// them in.
pub async fn setup(State(state): State<AppState>, session: Session, Form(form): Form<SetupForm>) -> Response {
    match state.engine.identity().complete_setup(&form.token, form.username.trim(), &form.password).await {
        Ok(user) => {
            let signed_in = async {
                session.cycle_id().await?;
                session.insert(SESSION_USER, &user.id).await
            };
            if let Err(e) = signed_in.await {
                return session_error(e).into_response();
            }
            Redirect::to("/").into_response()
        }
        Err(e) => {
            let e = ClientError::from_engine(e, "the first-start setup");
            if e.status() == StatusCode::INTERNAL_SERVER_ERROR {
                return AppError::Engine(e).into_response();
            }
            Redirect::to(&format!("/setup?token={}&error={}", urlencode(&form.token), urlencode(&e.message)))
                .into_response()
        }
    }
}

/// The project switcher's form.
#[derive(Debug, Deserialize)]
pub struct ProjectForm {
    pub project: String,
    #[serde(default)]
    pub next: Option<String>,
}

/// `POST /session/project`: makes `project` the session's current project.
pub async fn switch_project(
    State(state): State<AppState>,
    caller: Caller,
    session: Session,
    headers: HeaderMap,
    Form(form): Form<ProjectForm>,
) -> Result<Response, AppError> {
    caller.require(&form.project, runlens_engine::model::Role::Viewer)?;
    // An instance admin has a role in every project, but only in those that exist.
    state.engine.identity().project(&form.project).await?;
    session.insert(SESSION_PROJECT, &form.project).await.map_err(session_error)?;
    let back = form.next.or_else(|| {
        headers.get(axum::http::header::REFERER).and_then(|r| r.to_str().ok()).and_then(|r| {
            let rest = r.split_once("://")?.1;
            rest.find('/').map(|i| rest[i..].to_owned())
        })
    });
    Ok(Redirect::to(&local_target(back.as_deref())).into_response())
}
