//! Human approvals: approve or reject a call awaiting a decision, and the
//! inbox of every call awaiting one.
//!
//! A decision is recorded with who made it: the user or API key, by id and
//! name; deciding needs the `approver` role in the run's project. A decision on a call that is not awaiting
//! one is a 409 whose body also carries the decision that won.

use axum::extract::{Path, State};
use axum::Json;
use runlens_engine::model::{DecisionRequest, Interruption, ToolCall};
use runlens_engine::Engine;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::{optional, AppJson, AppQuery};
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::CallPath;
use runlens_engine::model::Role;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(approve)).routes(routes!(reject)).routes(routes!(approvals))
}

/// An approval: optionally for the rest of the run, with edited arguments or a comment.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ApproveRequest {
    /// Also approve this tool for the rest of the run.
    pub always: bool,
    /// Replaces the call's arguments (checked against the tool's schema).
    #[schema(schema_with = runlens_engine::openapi::decision_arguments)]
    pub arguments: Option<serde_json::Value>,
    /// Kept in the audit record.
    #[schema(schema_with = runlens_engine::openapi::decision_text)]
    pub comment: Option<String>,
}

impl From<ApproveRequest> for DecisionRequest {
    fn from(r: ApproveRequest) -> Self {
        DecisionRequest { always: r.always, arguments: r.arguments, comment: r.comment, reason: None }
    }
}

/// A rejection: optionally for the rest of the run, with the reason the model is told.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RejectRequest {
    /// Also reject this tool for the rest of the run.
    pub always: bool,
    /// What the model is told.
    #[schema(schema_with = runlens_engine::openapi::decision_text)]
    pub reason: Option<String>,
}

impl From<RejectRequest> for DecisionRequest {
    fn from(r: RejectRequest) -> Self {
        DecisionRequest { always: r.always, reason: r.reason, ..DecisionRequest::default() }
    }
}

/// Approve a call awaiting approval; the run resumes when its step's last pending call is decided.
///
/// `arguments` replaces the arguments (checked against the tool's schema: 400 when they do not fit). The body
/// is optional.
#[utoipa::path(
    post,
    path = "/api/runs/{id}/tool-calls/{call_id}/approve",
    tag = "approvals",
    params(CallPath),
    request_body(content = Option<ApproveRequest>, description = "Optional"),
    responses(
        (status = 200, description = "The decided call", body = ToolCall),
        (status = 400, response = BadRequest),
        (status = 403, response = CrossOrigin),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        (status = 413, response = TooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 500, response = Internal),
    )
)]
async fn approve(
    State(engine): State<Engine>,
    caller: Caller,
    Path(CallPath { id, call_id }): Path<CallPath>,
    body: Option<AppJson<ApproveRequest>>,
) -> Result<Json<ToolCall>, AppError> {
    let req = body.map(|AppJson(req)| req).unwrap_or_default();
    let head = caller.run(&engine, &id, Role::Approver).await?;
    let call = engine.approve(&id, &call_id, req.into(), &caller.actor).await?;
    engine.audit(Some(&head.project), &caller.actor, "approved", Some(&format!("{id}/{call_id}")), None).await;
    Ok(Json(call))
}

/// Reject a call awaiting approval; the model receives the reason and the run goes on.
///
/// The body is optional.
#[utoipa::path(
    post,
    path = "/api/runs/{id}/tool-calls/{call_id}/reject",
    tag = "approvals",
    params(CallPath),
    request_body(content = Option<RejectRequest>, description = "Optional"),
    responses(
        (status = 200, description = "The decided call", body = ToolCall),
        (status = 400, response = BadRequest),
        (status = 403, response = CrossOrigin),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        (status = 413, response = TooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 500, response = Internal),
    )
)]
async fn reject(
    State(engine): State<Engine>,
    caller: Caller,
    Path(CallPath { id, call_id }): Path<CallPath>,
    body: Option<AppJson<RejectRequest>>,
) -> Result<Json<ToolCall>, AppError> {
    let req = body.map(|AppJson(req)| req).unwrap_or_default();
    let head = caller.run(&engine, &id, Role::Approver).await?;
    let call = engine.reject(&id, &call_id, req.into(), &caller.actor).await?;
    engine.audit(Some(&head.project), &caller.actor, "rejected", Some(&format!("{id}/{call_id}")), None).await;
    Ok(Json(call))
}

/// Only `pending` (or nothing) is supported.
#[derive(Clone, Copy, Debug)]
pub struct Pending;

impl std::str::FromStr for Pending {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "pending" => Ok(Pending),
            other => Err(format!("must be `pending`, not `{other}`")),
        }
    }
}

impl utoipa::PartialSchema for Pending {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        let pending = serde_json::json!({ "type": "string", "enum": ["pending", ""] });
        utoipa::openapi::RefOr::T(runlens_engine::openapi::raw(pending))
    }
}

/// The inbox's filter.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ApprovalsQuery {
    /// Only `pending` is supported.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<Pending>, inline)]
    pub status: Option<Pending>,
}

/// A call awaiting a decision, with how long it has waited.
#[derive(Debug, Serialize, ToSchema)]
pub struct Approval {
    #[serde(flatten)]
    pub call: Interruption,
    /// Seconds since the decision was requested.
    #[schema(minimum = 0)]
    pub age_s: i64,
}

/// Every call awaiting a decision.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApprovalList {
    pub approvals: Vec<Approval>,
}

/// Tool calls awaiting a decision across all runs, oldest first, each with `age_s`.
#[utoipa::path(
    get,
    path = "/api/approvals",
    tag = "approvals",
    params(ApprovalsQuery),
    responses(
        (status = 200, description = "OK", body = ApprovalList),
        (status = 400, response = BadRequest),
        (status = 500, response = Internal),
    )
)]
async fn approvals(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(_status): AppQuery<ApprovalsQuery>,
) -> Result<Json<ApprovalList>, AppError> {
    let now = chrono::Utc::now();
    let approvals = engine
        .pending_approvals(Some(caller.require_current(Role::Viewer)?))
        .await?
        .into_iter()
        .map(|call| Approval { age_s: (now - call.requested_at).num_seconds().max(0), call })
        .collect();
    Ok(Json(ApprovalList { approvals }))
}
