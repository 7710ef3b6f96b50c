//! Status webhooks: a project's subscriptions (created with their secret
//! shown once, listed, read, deleted, their secret rotated), the project's
//! run webhook secret (signing runs' own `on_status_change`), and a run's
//! deliveries with their attempts.
//!
//! Subscriptions and secrets are for admins of the project; a run's
//! deliveries for anyone who may see the run. A subscription of a project
//! the caller has no role in is a 404, like one that does not exist.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use runlens_engine::model::limits::{MAX_ID_CHARS, MAX_LIST_LIMIT, MAX_LIST_OFFSET};
use runlens_engine::model::{CreatedWebhook, DeliveryPage, NewWebhook, Role, ShownSecret, Webhook, WebhookPage};
use runlens_engine::Engine;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::{optional, AppJson, AppQuery, Bounded};
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::listing::{page_offset, page_size, ListOffset, PageSize};
use super::{ProjectHeader, RunPath};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_webhooks, create_webhook))
        .routes(routes!(run_secret))
        .routes(routes!(get_webhook, delete_webhook))
        .routes(routes!(rotate_secret))
        .routes(routes!(deliveries))
}

/// A page by `offset`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct OffsetQuery {
    /// Items in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// Items to skip before the page (the previous page's `next_offset`).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ListOffset>, inline)]
    pub offset: Option<Bounded<0, { MAX_LIST_OFFSET as u64 }>>,
}

/// The path of a subscription.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct WebhookPath {
    /// A webhook id (`wh_…`).
    #[param(max_length = 128)]
    pub id: String,
}

/// How a rotation treats the secret it replaces.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RotateSecret {
    /// Seconds the previous secret keeps signing (a second `v1=`), so receivers can switch over without missing
    /// a delivery: default 86400 (a day), 0 to revoke it at once (a leaked secret), at most 604800 (7 days).
    #[schema(minimum = 0, maximum = 604_800)]
    pub keep_previous_s: Option<u64>,
}

/// The current project's webhooks, newest first; never their secrets (admins of the project).
#[utoipa::path(
    get,
    path = "/api/webhooks",
    tag = "webhooks",
    params(ProjectHeader, OffsetQuery),
    responses(
        (status = 200, description = "OK", body = WebhookPage),
        QueryErrors,
    )
)]
async fn list_webhooks(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<OffsetQuery>,
) -> Result<Json<WebhookPage>, AppError> {
    let project = caller.require_current(Role::Admin)?;
    Ok(Json(engine.webhooks().list(project, page_offset(q.offset), page_size(q.limit)).await?))
}

/// Subscribe a URL to every status change of every run of the current project (admins); its signing secret is
/// in this answer only.
///
/// Each change whose new status is in `statuses` (absent: every change) is POSTed as a signed
/// `StatusChangePayload` (`runlens-signature: t=…,v1=…`, HMAC-SHA256 of `t.body` with the secret;
/// `runlens-idempotency-key`: the delivery id), retried with exponential backoff for up to 24 hours until a 2xx
/// answer. A project has at most 20 webhooks (409 beyond).
#[utoipa::path(
    post,
    path = "/api/webhooks",
    tag = "webhooks",
    params(ProjectHeader),
    request_body(content = NewWebhook, example = json!({
        "url": "https://example.com/runlens", "statuses": ["paused", "done", "failed"], "description": "ops"})),
    responses(
        (status = 201, description = "Created; `secret.secret` is shown only now", body = CreatedWebhook),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        BodyErrors,
    )
)]
async fn create_webhook(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(req): AppJson<NewWebhook>,
) -> Result<(StatusCode, Json<CreatedWebhook>), AppError> {
    let project = caller.require_current(Role::Admin)?;
    Ok((StatusCode::CREATED, Json(engine.webhooks().create_webhook(project, req, &caller.actor).await?)))
}

/// Create or rotate the current project's run webhook secret (admins); the secret is in this answer only.
///
/// Runs' own `on_status_change` hooks are signed with it (a run with a hook is refused until the project has
/// one). A rotation keeps the previous secret signing for `keep_previous_s` (default a day). 201 when it was
/// created, 200 when rotated. The body is optional.
#[utoipa::path(
    post,
    path = "/api/webhooks/secret",
    tag = "webhooks",
    params(ProjectHeader),
    request_body(content = Option<RotateSecret>, description = "Optional"),
    responses(
        (status = 200, description = "Rotated; `secret` is shown only now", body = ShownSecret),
        (status = 201, description = "Created; `secret` is shown only now", body = ShownSecret),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        BodyErrors,
    )
)]
async fn run_secret(
    State(engine): State<Engine>,
    caller: Caller,
    body: Option<AppJson<RotateSecret>>,
) -> Result<(StatusCode, Json<ShownSecret>), AppError> {
    let req = body.map(|AppJson(r)| r).unwrap_or_default();
    let project = caller.require_current(Role::Admin)?;
    let (shown, rotated) =
        engine.webhooks().rotate_run_webhook_secret(project, req.keep_previous_s, &caller.actor).await?;
    Ok((if rotated { StatusCode::OK } else { StatusCode::CREATED }, Json(shown)))
}

/// Webhook `id` when the caller is an admin of its project; one of a project
/// the caller has no role in is "not found", like one that does not exist.
async fn visible(engine: &Engine, caller: &Caller, id: &str) -> Result<Webhook, AppError> {
    let hidden =
        || AppError::NotFound(format!("webhook `{}` not found", id.chars().take(MAX_ID_CHARS).collect::<String>()));
    let webhook = match engine.webhooks().webhook(id).await {
        Ok(w) => w,
        Err(runlens_engine::EngineError::NotFound(_)) => return Err(hidden()),
        Err(e) => return Err(e.into()),
    };
    if caller.role_in(&webhook.project).is_none() {
        return Err(hidden());
    }
    caller.require(&webhook.project, Role::Admin)?;
    Ok(webhook)
}

/// One webhook, without its secret (admins of its project).
#[utoipa::path(
    get,
    path = "/api/webhooks/{id}",
    tag = "webhooks",
    params(WebhookPath),
    responses(
        (status = 200, description = "OK", body = Webhook),
        ReadErrors,
    )
)]
async fn get_webhook(
    State(engine): State<Engine>,
    caller: Caller,
    Path(WebhookPath { id }): Path<WebhookPath>,
) -> Result<Json<Webhook>, AppError> {
    Ok(Json(visible(&engine, &caller, &id).await?))
}

/// Delete a webhook (admins of its project); its deliveries not sent yet are given up (failed, saying why).
#[utoipa::path(
    delete,
    path = "/api/webhooks/{id}",
    tag = "webhooks",
    params(WebhookPath),
    responses(
        (status = 200, description = "The deleted webhook", body = Webhook),
        (status = 404, response = NotFound),
        BodyErrors,
    )
)]
async fn delete_webhook(
    State(engine): State<Engine>,
    caller: Caller,
    Path(WebhookPath { id }): Path<WebhookPath>,
) -> Result<Json<Webhook>, AppError> {
    visible(&engine, &caller, &id).await?;
    Ok(Json(engine.webhooks().delete_webhook(&id, &caller.actor).await?))
}

/// Rotate a webhook's secret (admins of its project); the new secret is in this answer only.
///
/// The previous secret keeps signing for `keep_previous_s` (default a day; 0 revokes it now). The body is
/// optional.
#[utoipa::path(
    post,
    path = "/api/webhooks/{id}/rotate",
    tag = "webhooks",
    params(WebhookPath),
    request_body(content = Option<RotateSecret>, description = "Optional"),
    responses(
        (status = 200, description = "Rotated; `secret` is shown only now", body = ShownSecret),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        BodyErrors,
    )
)]
async fn rotate_secret(
    State(engine): State<Engine>,
    caller: Caller,
    Path(WebhookPath { id }): Path<WebhookPath>,
    body: Option<AppJson<RotateSecret>>,
) -> Result<Json<ShownSecret>, AppError> {
    let req = body.map(|AppJson(r)| r).unwrap_or_default();
    visible(&engine, &caller, &id).await?;
    Ok(Json(engine.webhooks().rotate_webhook_secret(&id, req.keep_previous_s, &caller.actor).await?))
}

/// A run's webhook deliveries, newest change first, each with its newest attempts (at most 10, newest first):
/// status code, latency, error, and when a pending one is tried next.
#[utoipa::path(
    get,
    path = "/api/runs/{id}/deliveries",
    tag = "webhooks",
    params(RunPath, OffsetQuery),
    responses(
        (status = 200, description = "OK", body = DeliveryPage),
        QueryErrors,
    )
)]
async fn deliveries(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
    AppQuery(q): AppQuery<OffsetQuery>,
) -> Result<Json<DeliveryPage>, AppError> {
    caller.run(&engine, &id, Role::Viewer).await?;
    Ok(Json(engine.webhooks().run_deliveries(&id, page_offset(q.offset), page_size(q.limit)).await?))
}
