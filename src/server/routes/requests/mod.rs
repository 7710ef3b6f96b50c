//! Approvals and questions for agents runlens does not run: an agent's key
//! asks (`POST /api/approval-requests`, `POST /api/questions`, operator
//! role), a person decides in the inbox or here (approver role), and the
//! agent learns the outcome by long-polling (`GET …/{id}?wait=30`), by an
//! SSE stream (`GET …/{id}/events`) or by a signed callback. Long-polls and
//! streams go through `server::live` (bounded per caller, ended when the
//! caller loses access or the server shuts down).
//!
//! Requests are created in the caller's current project; one is read and
//! decided like a run: a request of a project the caller has no role in is
//! "not found", like one that does not exist.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::Event as SseEvent;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::stream;
use runlens_engine::model::{
    AgentRequest, Decision, NewApprovalRequest, NewQuestion, RequestDecision, RequestKind, RequestPage, RequestStatus,
    RequestVerdict, Role, MAX_WAIT_S,
};
use runlens_engine::store::RequestFilter;
use runlens_engine::Engine;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::{AppJson, AppQuery, Bounded};
use super::super::live::{Live, Opened};
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::approvals::{RejectRequest, DEFAULT_APPROVALS_PAGE};
use super::ProjectHeader;

mod types;
pub use types::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_approval_request, list_approval_requests))
        .routes(routes!(get_approval_request))
        .routes(routes!(approval_request_events))
        .routes(routes!(approve_request))
        .routes(routes!(reject_request))
        .routes(routes!(create_question, list_questions))
        .routes(routes!(get_question))
        .routes(routes!(question_events))
        .routes(routes!(answer_question))
}

/// Creates an approval request (`Ok`) or a question (`Err`).
async fn create(
    engine: &Engine,
    caller: &Caller,
    body: Result<NewApprovalRequest, NewQuestion>,
) -> Result<Response, AppError> {
    let project = caller.require_current(Role::Operator)?;
    let created = match body {
        Ok(req) => engine.requests().create_approval_request(project, req, &caller.actor).await?,
        Err(q) => engine.requests().create_question(project, q, &caller.actor).await?,
    };
    let status = if created.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(created.request)).into_response())
}

/// Request `id` of `kind` when the caller has at least `need` in its project.
async fn visible(
    engine: &Engine,
    caller: &Caller,
    kind: RequestKind,
    id: &str,
    need: Role,
) -> Result<AgentRequest, AppError> {
    let request = engine.requests().agent_request(Some(kind), id).await?;
    let hidden = || {
        let shown: String = id.chars().take(128).collect();
        AppError::NotFound(format!("{} `{shown}` not found", kind.noun()))
    };
    match caller.role_in(&request.project) {
        None => Err(hidden()),
        Some(_) => {
            caller.require(&request.project, need)?;
            Ok(request)
        }
    }
}

/// Request `id`; with a `wait`, once decided or when the wait runs out
/// (or the server shuts down meanwhile).
async fn read(
    engine: &Engine,
    caller: &Caller,
    live: Live,
    (kind, id): (RequestKind, &str),
    wait: Option<Bounded<0, MAX_WAIT_S>>,
) -> Result<Json<AgentRequest>, AppError> {
    let request = visible(engine, caller, kind, id, Role::Viewer).await?;
    let wait = Duration::from_secs(wait.map_or(0, |w| w.0));
    if request.status != RequestStatus::Pending || wait.is_zero() {
        return Ok(Json(request));
    }
    let live = live.open(&request.project, Role::Viewer)?;
    match live.wait(engine.requests().wait_request(Some(kind), id, wait)).await? {
        Some(waited) => Ok(Json(waited?)),
        None => Ok(Json(engine.requests().agent_request(Some(kind), id).await?)),
    }
}

async fn list(
    engine: &Engine,
    caller: &Caller,
    kind: RequestKind,
    q: RequestsQuery,
) -> Result<Json<RequestPage>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    let filter = RequestFilter {
        project: project.to_owned(),
        kind: Some(kind),
        pending: q.status.is_none_or(|s| s.0),
        after: q.cursor.map(|c| (c.0, c.1)),
        limit: q.limit.map_or(DEFAULT_APPROVALS_PAGE, Bounded::as_u32),
    };
    Ok(Json(engine.requests().agent_requests(filter).await?))
}

/// The request as SSE messages (`event: request`, `data:` the request): at once, then on each change, ending
/// after the decision.
fn events(engine: Engine, kind: RequestKind, first: AgentRequest, live: Opened) -> Response {
    let message = |r: &AgentRequest| {
        Ok::<_, Infallible>(SseEvent::default().event("request").data(serde_json::to_string(r).unwrap_or_default()))
    };
    let start = message(&first);
    let done = first.status != RequestStatus::Pending;
    let id = first.id.clone();
    let later = stream::unfold((engine, id, done), move |(engine, id, done)| async move {
        if done {
            return None;
        }
        loop {
            match engine.requests().wait_request(Some(kind), &id, Duration::from_secs(MAX_WAIT_S)).await {
                Ok(r) if r.status != RequestStatus::Pending => return Some((message(&r), (engine, id, true))),
                Ok(_) => continue,
                Err(e) => {
                    tracing::info!(error = %e, "request event stream ended");
                    return None;
                }
            }
        }
    });
    live.sse(futures::StreamExt::chain(stream::iter([start]), later))
}

/// Ask a person to approve a tool call an agent wants to make.
///
/// Needs the operator role in the current project (an agent's API key). The request appears in the approvals
/// inbox beside runlens's own calls. A retry with the same `idempotency_key` answers 200 with the request the
/// first one made (409 when its body differs). With `run.trace_id`, the request is shown in the run OTLP ingest
/// builds from that trace (a placeholder run until its spans arrive). With `callback_url` (which needs the
/// project's run webhook secret), the decision is also POSTed there, signed. An "always" decision on an
/// earlier request of the same tool and `run.external_id` decides this one at once.
#[utoipa::path(
    post,
    path = "/api/approval-requests",
    tag = "agent requests",
    params(ProjectHeader),
    request_body(content = NewApprovalRequest, examples(
        ("send an email" = (summary = "An email the agent wants to send", value = json!({
            "tool": "send_email", "arguments": {"to": "ada@example.com", "subject": "Refund", "body": "Done."},
            "context": "Customer asked for a refund of order 1042",
            "run": {"external_id": "conv-7", "name": "Support agent"},
            "timeout_s": 3600, "idempotency_key": "conv-7-call-1"
        }))),
    )),
    responses(
        (status = 201, description = "Created, pending (or decided at once by an \"always\" rule)", body = AgentRequest),
        (status = 200, description = "The request an earlier create with this idempotency_key made", body = AgentRequest),
        ChangeErrors,
    )
)]
async fn create_approval_request(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(req): AppJson<NewApprovalRequest>,
) -> Result<Response, AppError> {
    create(&engine, &caller, Ok(req)).await
}

/// The current project's approval requests: pending ones oldest first, or decided ones newest first.
#[utoipa::path(
    get,
    path = "/api/approval-requests",
    tag = "agent requests",
    params(ProjectHeader, RequestsQuery),
    responses(
        (status = 200, description = "A page", body = RequestPage),
        QueryErrors,
    )
)]
async fn list_approval_requests(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<RequestsQuery>,
) -> Result<Json<RequestPage>, AppError> {
    list(&engine, &caller, RequestKind::Approval, q).await
}

/// An approval request; with `wait`, long-polls until it is decided.
///
/// The decision carries the arguments to call the tool with (possibly edited), the reason of a rejection ("timed
/// out" when its timeout rejected it) and who decided.
#[utoipa::path(
    get,
    path = "/api/approval-requests/{id}",
    tag = "agent requests",
    params(RequestPath, WaitQuery),
    responses(
        (status = 200, description = "The request (still pending when the wait ran out)", body = AgentRequest),
        QueryErrors,
        (status = 429, response = TooManyStreams),
    )
)]
async fn get_approval_request(
    State(engine): State<Engine>,
    caller: Caller,
    live: Live,
    Path(RequestPath { id }): Path<RequestPath>,
    AppQuery(q): AppQuery<WaitQuery>,
) -> Result<Json<AgentRequest>, AppError> {
    read(&engine, &caller, live, (RequestKind::Approval, &id), q.wait).await
}

/// An approval request as Server-Sent Events: `event: request` with the request now, then once decided (the
/// stream then ends).
#[utoipa::path(
    get,
    path = "/api/approval-requests/{id}/events",
    tag = "agent requests",
    params(RequestPath),
    responses(
        (status = 200, description = "The stream; each message's data is the request", body = RequestStreamMessage,
            content_type = "text/event-stream"),
        ReadErrors,
        (status = 429, response = TooManyStreams),
    )
)]
async fn approval_request_events(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RequestPath { id }): Path<RequestPath>,
    live: Live,
) -> Result<Response, AppError> {
    let first = visible(&engine, &caller, RequestKind::Approval, &id, Role::Viewer).await?;
    let live = live.open(&first.project, Role::Viewer)?;
    Ok(events(engine, RequestKind::Approval, first, live))
}

/// Approve an approval request, optionally with edited arguments (a JSON object), a comment, or `always` (this
/// tool's later requests from the same agent run are approved at once).
#[utoipa::path(
    post,
    path = "/api/approval-requests/{id}/approve",
    tag = "agent requests",
    params(RequestPath),
    request_body(content = Option<ApproveAgentRequest>, description = "Optional"),
    responses(
        (status = 200, description = "The decided request", body = AgentRequest),
        ChangeErrors,
    )
)]
async fn approve_request(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RequestPath { id }): Path<RequestPath>,
    body: Option<AppJson<ApproveAgentRequest>>,
) -> Result<Json<AgentRequest>, AppError> {
    let req = body.map(|AppJson(r)| r).unwrap_or_default();
    let d =
        RequestDecision { always: req.always, arguments: req.arguments, comment: req.comment, ..Default::default() };
    decide(&engine, &caller, RequestKind::Approval, &id, RequestVerdict::Decide(Decision::Approved), d).await
}

/// Reject an approval request; the agent receives the reason.
#[utoipa::path(
    post,
    path = "/api/approval-requests/{id}/reject",
    tag = "agent requests",
    params(RequestPath),
    request_body(content = Option<RejectRequest>, description = "Optional"),
    responses(
        (status = 200, description = "The decided request", body = AgentRequest),
        ChangeErrors,
    )
)]
async fn reject_request(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RequestPath { id }): Path<RequestPath>,
    body: Option<AppJson<RejectRequest>>,
) -> Result<Json<AgentRequest>, AppError> {
    let req = body.map(|AppJson(r)| r).unwrap_or_default();
    let d = RequestDecision { always: req.always, reason: req.reason, ..Default::default() };
    decide(&engine, &caller, RequestKind::Approval, &id, RequestVerdict::Decide(Decision::Rejected), d).await
}

async fn decide(
    engine: &Engine,
    caller: &Caller,
    kind: RequestKind,
    id: &str,
    verdict: RequestVerdict,
    d: RequestDecision,
) -> Result<Json<AgentRequest>, AppError> {
    visible(engine, caller, kind, id, Role::Approver).await?;
    Ok(Json(engine.requests().decide_request(kind, id, verdict, d, &caller.actor).await?))
}

/// Ask a person a question ("human as tool"): answered in free text, or by choosing one of `choices`.
///
/// Needs the operator role in the current project. The question appears in the approvals inbox; the agent
/// learns the answer like an approval request's decision (`?wait=`, `/events`, `callback_url`). An unanswered
/// question expires after `timeout_s`.
#[utoipa::path(
    post,
    path = "/api/questions",
    tag = "agent requests",
    params(ProjectHeader),
    request_body(content = NewQuestion, examples(
        ("choose a plan" = (summary = "A question with choices", value = json!({
            "question": "Which plan should the customer move to?", "choices": ["Team", "Enterprise"],
            "run": {"external_id": "conv-7", "name": "Support agent"}, "idempotency_key": "conv-7-q-1"
        }))),
    )),
    responses(
        (status = 201, description = "Created, pending", body = AgentRequest),
        (status = 200, description = "The question an earlier create with this idempotency_key made", body = AgentRequest),
        ChangeErrors,
    )
)]
async fn create_question(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(q): AppJson<NewQuestion>,
) -> Result<Response, AppError> {
    create(&engine, &caller, Err(q)).await
}

/// The current project's questions: pending ones oldest first, or answered (and expired) ones newest first.
#[utoipa::path(
    get,
    path = "/api/questions",
    tag = "agent requests",
    params(ProjectHeader, RequestsQuery),
    responses(
        (status = 200, description = "A page", body = RequestPage),
        QueryErrors,
    )
)]
async fn list_questions(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<RequestsQuery>,
) -> Result<Json<RequestPage>, AppError> {
    list(&engine, &caller, RequestKind::Question, q).await
}

/// A question; with `wait`, long-polls until it is answered (or expires).
#[utoipa::path(
    get,
    path = "/api/questions/{id}",
    tag = "agent requests",
    params(RequestPath, WaitQuery),
    responses(
        (status = 200, description = "The question (still pending when the wait ran out)", body = AgentRequest),
        QueryErrors,
        (status = 429, response = TooManyStreams),
    )
)]
async fn get_question(
    State(engine): State<Engine>,
    caller: Caller,
    live: Live,
    Path(RequestPath { id }): Path<RequestPath>,
    AppQuery(q): AppQuery<WaitQuery>,
) -> Result<Json<AgentRequest>, AppError> {
    read(&engine, &caller, live, (RequestKind::Question, &id), q.wait).await
}

/// A question as Server-Sent Events: `event: request` with the question now, then once answered (the stream
/// then ends).
#[utoipa::path(
    get,
    path = "/api/questions/{id}/events",
    tag = "agent requests",
    params(RequestPath),
    responses(
        (status = 200, description = "The stream; each message's data is the question", body = RequestStreamMessage,
            content_type = "text/event-stream"),
        ReadErrors,
        (status = 429, response = TooManyStreams),
    )
)]
async fn question_events(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RequestPath { id }): Path<RequestPath>,
    live: Live,
) -> Result<Response, AppError> {
    let first = visible(&engine, &caller, RequestKind::Question, &id, Role::Viewer).await?;
    let live = live.open(&first.project, Role::Viewer)?;
    Ok(events(engine, RequestKind::Question, first, live))
}

/// Answer a question (approver role); with choices, the answer is one of them.
#[utoipa::path(
    post,
    path = "/api/questions/{id}/answer",
    tag = "agent requests",
    params(RequestPath),
    request_body = AnswerRequest,
    responses(
        (status = 200, description = "The answered question", body = AgentRequest),
        ChangeErrors,
    )
)]
async fn answer_question(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RequestPath { id }): Path<RequestPath>,
    AppJson(a): AppJson<AnswerRequest>,
) -> Result<Json<AgentRequest>, AppError> {
    let d = RequestDecision { answer: Some(a.answer), ..Default::default() };
    decide(&engine, &caller, RequestKind::Question, &id, RequestVerdict::Answer, d).await
}
