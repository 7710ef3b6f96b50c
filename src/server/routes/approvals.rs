//! Human approvals: approve or reject a call awaiting a decision, the inbox
//! of every call awaiting one, and the decisions made, with who made them.
//!
//! A decision is recorded with who made it: the user or API key, by id and
//! name; deciding needs the `approver` role in the run's project. A decision on a call that is not awaiting
//! one is a 409 whose body also carries the decision that won.

use axum::extract::{Path, State};
use axum::Json;
use runlens_engine::model::limits::{MAX_LIST_LIMIT, MAX_LIST_OFFSET, MAX_QUERY_TEXT_CHARS};
use runlens_engine::model::{DecisionRequest, Interruption, ToolCall};
use runlens_engine::store::{DecidedCall, DecisionCursor};
use runlens_engine::Engine;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::{optional, AppJson, AppQuery, Bounded};
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::listing::{offset_or_cursor, page_offset, ListOffset};
use super::CallPath;
use super::ProjectHeader;
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
        (status = 403, response = Forbidden),
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
    caller.run(&engine, &id, Role::Approver).await?;
    Ok(Json(engine.approve(&id, &call_id, req.into(), &caller.actor).await?))
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
        (status = 403, response = Forbidden),
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
    caller.run(&engine, &id, Role::Approver).await?;
    Ok(Json(engine.reject(&id, &call_id, req.into(), &caller.actor).await?))
}

/// Which approvals: `pending` (the default) or `decided`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalStatus {
    Pending,
    Decided,
}

impl std::str::FromStr for ApprovalStatus {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "pending" => Ok(ApprovalStatus::Pending),
            "decided" => Ok(ApprovalStatus::Decided),
            other => Err(format!("must be `pending` or `decided`, not `{other}`")),
        }
    }
}

impl utoipa::PartialSchema for ApprovalStatus {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        let status = serde_json::json!({ "type": "string", "enum": ["pending", "decided", ""] });
        utoipa::openapi::RefOr::T(runlens_engine::openapi::raw(status))
    }
}

/// A decided-approvals cursor: what `next_cursor` said.
#[derive(Clone, Debug)]
pub struct DecisionCursorParam(pub DecisionCursor);

impl std::str::FromStr for DecisionCursorParam {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text.len() > MAX_QUERY_TEXT_CHARS {
            return Err(format!("must be at most {MAX_QUERY_TEXT_CHARS} characters"));
        }
        DecisionCursor::parse(text)
            .map(DecisionCursorParam)
            .ok_or_else(|| "must be the `next_cursor` of a previous page".to_owned())
    }
}

impl utoipa::PartialSchema for DecisionCursorParam {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        let cursor = serde_json::json!({
            "type": "string", "maxLength": MAX_QUERY_TEXT_CHARS, "pattern": "^$|^[-+]?[0-9]{1,18}_[^/]+/.+$"
        });
        utoipa::openapi::RefOr::T(runlens_engine::openapi::raw(cursor))
    }
}

crate::bounded_param!(
    /// Decisions in a page.
    DecisionsPageSize = 1, MAX_LIST_LIMIT.into()
);

/// The inbox's filter; `limit` and `cursor` or `offset` (not both) page the
/// decided ones.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsQuery {
    /// `pending` (the default): calls awaiting a decision, oldest first, all
    /// at once; `decided`: the decisions made, newest first, in pages.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ApprovalStatus>, inline)]
    pub status: Option<ApprovalStatus>,
    /// Decisions in a page (default 50; `decided` only).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<DecisionsPageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// The `next_cursor` of the previous page (`decided` only).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<DecisionCursorParam>, inline)]
    pub cursor: Option<DecisionCursorParam>,
    /// Decisions to skip before the page, newest first (`decided` only; not with `cursor`).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ListOffset>, inline)]
    pub offset: Option<Bounded<0, { MAX_LIST_OFFSET as u64 }>>,
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

/// One page of decisions, newest first, each with who decided (`decided_by`, `decided_by_id`).
#[derive(Debug, Serialize, ToSchema)]
pub struct DecisionList {
    pub decisions: Vec<DecidedCall>,
    /// The `cursor` of the next page; null on the last one.
    pub next_cursor: Option<String>,
}

/// The inbox (`status=pending`) or the decisions made (`status=decided`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum Approvals {
    Pending(ApprovalList),
    Decided(DecisionList),
}

/// The current project's tool calls awaiting a decision, oldest first, each with `age_s`; or, with
/// `status=decided`, its decisions, newest first, with who decided.
#[utoipa::path(
    get,
    path = "/api/approvals",
    tag = "approvals",
    params(ProjectHeader, ApprovalsQuery),
    responses(
        (status = 200, description = "`approvals` (pending) or `decisions` (decided)", body = Approvals),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn approvals(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<ApprovalsQuery>,
) -> Result<Json<Approvals>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    offset_or_cursor(&q.cursor, &q.offset)?;
    if q.status == Some(ApprovalStatus::Decided) {
        let limit = q.limit.map_or(DEFAULT_DECISIONS_PAGE, Bounded::as_u32);
        let before = q.cursor.map(|c| c.0);
        let mut decisions =
            engine.store().decisions(project, before.as_ref(), page_offset(q.offset), limit + 1).await?;
        let more = decisions.len() > limit as usize;
        decisions.truncate(limit as usize);
        let next_cursor = if more { decisions.last().map(DecidedCall::cursor) } else { None };
        return Ok(Json(Approvals::Decided(DecisionList { decisions, next_cursor })));
    }
    let now = chrono::Utc::now();
    let approvals = engine
        .pending_approvals(Some(project))
        .await?
        .into_iter()
        .map(|call| Approval { age_s: (now - call.requested_at).num_seconds().max(0), call })
        .collect();
    Ok(Json(Approvals::Pending(ApprovalList { approvals })))
}

/// Decisions in a page when `limit` is not given.
pub const DEFAULT_DECISIONS_PAGE: u32 = 50;
