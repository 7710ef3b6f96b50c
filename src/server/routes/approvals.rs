//! Human approvals: approve or reject a call awaiting a decision, the inbox
//! of the calls awaiting one (keyset pages, oldest first, filtered by tool,
//! run and age) and their count, and the decisions made, with who made them.
//!
//! A decision is recorded with who made it: the user or API key, by id and
//! name; deciding needs the `approver` role in the run's project. A decision on a call that is not awaiting
//! one is a 409 whose body also carries the decision that won.

use axum::extract::{Path, State};
use axum::Json;
use runlens_engine::model::limits::{MAX_INBOX_AGE_S, MAX_LIST_LIMIT, MAX_LIST_OFFSET, MAX_QUERY_TEXT_CHARS};
use runlens_engine::model::{DecisionRequest, Interruption, ToolCall};
use runlens_engine::store::{DecidedCall, DecisionCursor, InboxCursor, InboxFilter};
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
    OpenApiRouter::new()
        .routes(routes!(approve))
        .routes(routes!(reject))
        .routes(routes!(approvals))
        .routes(routes!(approvals_count))
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
        ChangeErrors,
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
    Ok(Json(engine.approvals().approve(&id, &call_id, req.into(), &caller.actor).await?))
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
        ChangeErrors,
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
    Ok(Json(engine.approvals().reject(&id, &call_id, req.into(), &caller.actor).await?))
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

/// A page's cursor: the `next_cursor` of the previous page of the same list
/// (pending calls or decisions).
#[derive(Clone, Debug)]
pub struct ApprovalsCursor(pub String);

impl std::str::FromStr for ApprovalsCursor {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text.len() > MAX_QUERY_TEXT_CHARS {
            return Err(format!("must be at most {MAX_QUERY_TEXT_CHARS} characters"));
        }
        if InboxCursor::parse(text).is_none() && DecisionCursor::parse(text).is_none() {
            return Err("must be the `next_cursor` of a previous page".to_owned());
        }
        Ok(ApprovalsCursor(text.to_owned()))
    }
}

impl utoipa::PartialSchema for ApprovalsCursor {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        // A pending page's (`<ms>_<step>_<pos>_<run id>`) or a decided page's (`<ms>_<run id>/<call id>`).
        let cursor = serde_json::json!({
            "type": "string", "maxLength": MAX_QUERY_TEXT_CHARS,
            "pattern": "^$|^[-+]?[0-9]{1,18}_[^/]+/.+$|^[-+]?[0-9]{1,18}_[0-9]{1,9}_[0-9]{1,9}_.+$"
        });
        utoipa::openapi::RefOr::T(runlens_engine::openapi::raw(cursor))
    }
}

/// An exact name to filter by (`tool`, `run`): at most
/// [`MAX_QUERY_TEXT_CHARS`] characters.
#[derive(Clone, Debug)]
pub struct ExactName(pub String);

impl std::str::FromStr for ExactName {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text.chars().count() > MAX_QUERY_TEXT_CHARS {
            return Err(format!("must be at most {MAX_QUERY_TEXT_CHARS} characters"));
        }
        Ok(ExactName(text.to_owned()))
    }
}

impl utoipa::PartialSchema for ExactName {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        let name = serde_json::json!({ "type": "string", "maxLength": MAX_QUERY_TEXT_CHARS });
        utoipa::openapi::RefOr::T(runlens_engine::openapi::raw(name))
    }
}

crate::bounded_param!(
    /// Calls or decisions in a page.
    ApprovalsPageSize = 1, MAX_LIST_LIMIT.into()
);

crate::bounded_param!(
    /// An age in seconds (up to ten years).
    AgeSeconds = 0, MAX_INBOX_AGE_S
);

/// The inbox's filter and page: `status`, `limit` and `cursor` for both
/// lists; `tool`, `run`, `older_than_s` and `newer_than_s` filter the
/// pending calls, `offset` pages the decisions (not with `cursor`). An
/// empty value is no value; anything else out of place is a 400.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsQuery {
    /// `pending` (the default): calls awaiting a decision, oldest first;
    /// `decided`: the decisions made, newest first. Both in pages.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ApprovalStatus>, inline)]
    pub status: Option<ApprovalStatus>,
    /// Calls or decisions in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ApprovalsPageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// The `next_cursor` of the previous page of the same list (a pending
    /// page's cursor does not page the decisions, nor the other way round).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ApprovalsCursor>, inline)]
    pub cursor: Option<ApprovalsCursor>,
    /// Decisions to skip before the page, newest first (`decided` only; not with `cursor`).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ListOffset>, inline)]
    pub offset: Option<Bounded<0, { MAX_LIST_OFFSET as u64 }>>,
    /// Only calls of this tool, by its exact name (`pending` only).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ExactName>, inline)]
    pub tool: Option<ExactName>,
    /// Only calls of this run, by its id (`pending` only).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<ExactName>, inline)]
    pub run: Option<ExactName>,
    /// Only calls that have waited at least this many seconds (`pending` only).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<AgeSeconds>, inline)]
    pub older_than_s: Option<Bounded<0, MAX_INBOX_AGE_S>>,
    /// Only calls that have waited at most this many seconds (`pending` only).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<AgeSeconds>, inline)]
    pub newer_than_s: Option<Bounded<0, MAX_INBOX_AGE_S>>,
}

impl ApprovalsQuery {
    /// The first parameter given that only pages the other list.
    fn misplaced(&self, status: ApprovalStatus) -> Option<&'static str> {
        match status {
            ApprovalStatus::Pending => self.offset.is_some().then_some("offset"),
            ApprovalStatus::Decided => [
                ("tool", self.tool.is_some()),
                ("run", self.run.is_some()),
                ("older_than_s", self.older_than_s.is_some()),
                ("newer_than_s", self.newer_than_s.is_some()),
            ]
            .into_iter()
            .find_map(|(name, given)| given.then_some(name)),
        }
    }
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

/// One page of the calls awaiting a decision, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApprovalList {
    pub approvals: Vec<Approval>,
    /// The `cursor` of the next page; null on the last one.
    pub next_cursor: Option<String>,
    /// Every call awaiting a decision in the project, whatever the filters
    /// (kept up to date by the store: reading it costs one row).
    #[schema(minimum = 0)]
    pub total: u64,
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

/// The current project's tool calls awaiting a decision, oldest first, in keyset pages, each with `age_s`;
/// or, with `status=decided`, its decisions, newest first, with who decided.
///
/// Pending calls can be filtered by `tool`, `run` and age (`older_than_s`, `newer_than_s`); `total` counts
/// them all, unfiltered. Each page is read from an index in order, so every page costs the same at any backlog.
#[utoipa::path(
    get,
    path = "/api/approvals",
    tag = "approvals",
    params(ProjectHeader, ApprovalsQuery),
    responses(
        (status = 200, description = "`approvals` (pending) or `decisions` (decided)", body = Approvals),
        QueryErrors,
    )
)]
async fn approvals(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<ApprovalsQuery>,
) -> Result<Json<Approvals>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    offset_or_cursor(&q.cursor, &q.offset)?;
    let status = q.status.unwrap_or(ApprovalStatus::Pending);
    if let Some(name) = q.misplaced(status) {
        let (only, list) = match status {
            ApprovalStatus::Pending => ("decided", "pending calls page by `cursor`"),
            ApprovalStatus::Decided => ("pending", "decisions are not filtered"),
        };
        return Err(AppError::BadRequest(format!("`{name}` is for status={only} only ({list})")));
    }
    let limit = q.limit.map_or(DEFAULT_APPROVALS_PAGE, Bounded::as_u32);
    let wrong_cursor =
        || AppError::BadRequest("cursor must be the `next_cursor` of a previous page of this list".into());
    if status == ApprovalStatus::Decided {
        let before = q.cursor.map(|c| DecisionCursor::parse(&c.0).ok_or_else(wrong_cursor)).transpose()?;
        let mut decisions =
            engine.store().decisions(project, before.as_ref(), page_offset(q.offset), limit + 1).await?;
        let more = decisions.len() > limit as usize;
        decisions.truncate(limit as usize);
        let next_cursor = if more { decisions.last().map(DecidedCall::cursor) } else { None };
        return Ok(Json(Approvals::Decided(DecisionList { decisions, next_cursor })));
    }
    let now = chrono::Utc::now();
    let ago = |secs: Option<Bounded<0, MAX_INBOX_AGE_S>>| secs.map(|s| now.timestamp_millis() - s.0 as i64 * 1000);
    let filter = InboxFilter {
        project: project.to_owned(),
        after: q.cursor.map(|c| InboxCursor::parse(&c.0).ok_or_else(wrong_cursor)).transpose()?,
        tool: q.tool.map(|t| t.0),
        run_id: q.run.map(|r| r.0),
        requested_from_ms: ago(q.newer_than_s),
        requested_until_ms: ago(q.older_than_s),
        limit,
    };
    let (page, total) =
        tokio::try_join!(engine.approvals().pending_inbox(&filter), engine.approvals().pending_count(project))?;
    let approvals = page
        .items
        .into_iter()
        .map(|call| Approval { age_s: (now - call.requested_at).num_seconds().max(0), call })
        .collect();
    let next_cursor = page.next.as_ref().map(InboxCursor::encode);
    Ok(Json(Approvals::Pending(ApprovalList { approvals, next_cursor, total })))
}

/// How many calls await a decision.
#[derive(Debug, Serialize, ToSchema)]
pub struct PendingCount {
    /// Calls awaiting a decision on the project's paused runs.
    #[schema(minimum = 0)]
    pub pending: u64,
    /// Approval requests and questions from agents runlens does not run awaiting a person.
    #[schema(minimum = 0)]
    pub requests: u64,
}

/// How many of the current project's tool calls, and requests from other agents, await a decision (the
/// navigation badge).
///
/// The store keeps both numbers up to date as calls pause, requests come and both are decided, so this reads two
/// rows at any backlog.
#[utoipa::path(
    get,
    path = "/api/approvals/count",
    tag = "approvals",
    params(ProjectHeader),
    responses(
        (status = 200, description = "OK", body = PendingCount),
        QueryErrors,
    )
)]
async fn approvals_count(State(engine): State<Engine>, caller: Caller) -> Result<Json<PendingCount>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    let (pending, requests) =
        tokio::try_join!(engine.approvals().pending_count(project), engine.requests().pending_request_count(project))?;
    Ok(Json(PendingCount { pending, requests }))
}

/// Calls or decisions in a page when `limit` is not given.
pub const DEFAULT_APPROVALS_PAGE: u32 = 50;
