//! The audit log: who did what and when, for the admins of a project, and
//! with `?scope=instance` the whole instance's for instance admins.

use axum::extract::State;
use axum::Json;
use runlens_engine::model::limits::{MAX_LIST_LIMIT, MAX_LIST_OFFSET};
use runlens_engine::model::AuditEntry;
use runlens_engine::Engine;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::{optional, AppQuery, Bounded};
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::listing::*;
use super::ProjectHeader;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(audit))
}

crate::bounded_param!(
    /// An audit entry's `seq`.
    AuditSeq = 1, i64::MAX as u64
);

/// The audit log's scope and page: by `before` or by `offset`, not both.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
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
    /// Entries to skip before the page, newest first (not with `before`).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ListOffset>, inline)]
    pub offset: Option<Bounded<0, { MAX_LIST_OFFSET as u64 }>>,
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
        QueryErrors,
    )
)]
async fn audit(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<AuditQuery>,
) -> Result<Json<AuditList>, AppError> {
    let project = scope_project(&caller, q.scope)?;
    offset_or("before", &q.before, &q.offset)?;
    let limit = page_size(q.limit);
    let before = q.before.map(|b| i64::try_from(b.0).unwrap_or(i64::MAX));
    let found = engine.directory().audit(project, before, page_offset(q.offset), limit + 1).await?;
    let (entries, next) = page(found, limit, |e| e.seq.to_string());
    Ok(Json(AuditList { entries, next_before: next.and_then(|s| s.parse().ok()) }))
}
