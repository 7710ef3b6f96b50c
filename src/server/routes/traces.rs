//! Reading huge traces: paged steps with a light mode, the outline, the
//! transcript (whole, its tail, or a page), and one tool call in full.
//!
//! - `GET /api/runs/{id}/steps?from=0&limit=1000&payloads=true`
//!   → `{"steps": [...], "next_from": 1000}` (`next_from` only when more follow;
//!   without `limit` a run of up to 1,000 steps comes whole).
//!   `payloads=false` cuts long payloads to a preview and flags each cut
//!   field with `<field>_truncated: true` (see `runlens_engine::paging`).
//! - `GET /api/runs/{id}/outline` → `{"steps": [...]}`: every step without
//!   payloads (index, kind, status, model, usage, timings, `cost_usd`, and
//!   each call's id, tool, status and timings) — one read for a whole tree,
//!   timeline or token chart of a long run.
//! - `GET /api/runs/{id}/messages`: whole by default; `?tail=N` the last N
//!   with `total`; `?from=SEQ&limit=N` a page with `next_from` while more follow.
//! - `GET /api/runs/{id}/tool-calls/{call_id}` → the call with full payloads.
//!
//! Steps and outline steps carry `cost_usd` at today's prices.

use axum::extract::{Path, State};
use axum::Json;
use runlens_engine::model::{Message, Step, StepOutline, ToolCall};
use runlens_engine::paging::{light_step, DEFAULT_STEP_PAGE, MAX_STEP_PAGE};
use runlens_engine::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::{optional, AppQuery, Bounded, Flag};
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::{CallPath, RunPath};
use runlens_engine::model::Role;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(steps))
        .routes(routes!(outline))
        .routes(routes!(messages))
        .routes(routes!(tool_call))
}

const PAGE_MAX: u64 = MAX_STEP_PAGE as u64;

crate::bounded_param!(
    /// A step index.
    StepIndex = 0, u32::MAX.into()
);
crate::bounded_param!(
    /// Steps or messages in a page.
    PageSize = 1, PAGE_MAX
);
crate::bounded_param!(
    /// A message seq.
    Seq = 0, u64::MAX
);

/// A step as sent: whole, or with long payloads cut to previews.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum StepBody {
    Whole(Box<Step>),
    /// `payloads=false`: see `runlens_engine::paging::light_step`.
    Light(Value),
}

/// A step with what it cost at today's prices.
#[derive(Debug, Serialize, ToSchema)]
pub struct PricedStep {
    #[serde(flatten)]
    #[schema(value_type = Step)]
    pub step: StepBody,
    /// The cost at today's prices (USD); null when the model has no price.
    pub cost_usd: Option<f64>,
}

/// A page of steps.
#[derive(Debug, Serialize, ToSchema)]
pub struct StepPage {
    pub steps: Vec<PricedStep>,
    /// The `from` of the next page, while more follow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_from: Option<u32>,
}

/// Which steps, and whether whole.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StepsQuery {
    /// The index of the first step.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<StepIndex>, inline)]
    pub from: Option<Bounded<0, { u32::MAX as u64 }>>,
    /// Steps in the page (default 1000).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub limit: Option<Bounded<1, PAGE_MAX>>,
    /// `false`: long payloads cut to a 200-character preview.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<Flag>, inline)]
    pub payloads: Option<Flag>,
}

/// Steps in order with their tool calls, each with `cost_usd`.
///
/// A page with `next_from` while more follow; `payloads=false` cuts long payloads to a 200-character preview
/// and sets `<field>_truncated`.
#[utoipa::path(
    get,
    path = "/api/runs/{id}/steps",
    tag = "traces",
    params(RunPath, StepsQuery),
    responses(
        (status = 200, description = "OK", body = StepPage),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn steps(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
    AppQuery(q): AppQuery<StepsQuery>,
) -> Result<Json<StepPage>, AppError> {
    let from = q.from.map_or(0, Bounded::as_u32);
    let limit = q.limit.map_or(DEFAULT_STEP_PAGE, Bounded::as_u32);
    let payloads = q.payloads.is_none_or(|f| f.0);
    let run = caller.run(&engine, &id, Role::Viewer).await?;
    let (page, pricing) = tokio::try_join!(engine.steps_page(&id, from, limit), engine.pricing(&run.project))?;
    let steps = page
        .steps
        .into_iter()
        .map(|s| {
            let cost_usd = pricing.step_cost_usd(&run.model, &s);
            let step = if payloads { StepBody::Whole(Box::new(s)) } else { StepBody::Light(light_step(&s)) };
            PricedStep { step, cost_usd }
        })
        .collect();
    Ok(Json(StepPage { steps, next_from: page.next_from }))
}

/// A step of the outline with what it cost at today's prices.
#[derive(Debug, Serialize, ToSchema)]
pub struct PricedOutline {
    #[serde(flatten)]
    pub step: StepOutline,
    /// The cost at today's prices (USD); null when the model has no price.
    pub cost_usd: Option<f64>,
}

/// Every step of a run, without payloads.
#[derive(Debug, Serialize, ToSchema)]
pub struct Outline {
    pub steps: Vec<PricedOutline>,
}

/// Every step without payloads, in order.
///
/// Index, kind, status, model (when the step recorded one), usage, timings, `cost_usd`, and each tool call's
/// id, tool_name, status and timings.
#[utoipa::path(
    get,
    path = "/api/runs/{id}/outline",
    tag = "traces",
    params(RunPath),
    responses(
        (status = 200, description = "OK", body = Outline),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn outline(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
) -> Result<Json<Outline>, AppError> {
    let head = caller.run(&engine, &id, Role::Viewer).await?;
    let ((run, outline), pricing) = tokio::try_join!(engine.step_outline(&id), engine.pricing(&head.project))?;
    let steps = outline
        .into_iter()
        .map(|step| PricedOutline { cost_usd: pricing.outline_cost_usd(&run.model, &step), step })
        .collect();
    Ok(Json(Outline { steps }))
}

/// Which part of the transcript.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MessagesQuery {
    /// The last N messages, with `total`.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub tail: Option<Bounded<1, PAGE_MAX>>,
    /// The seq of the first message of a page.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<Seq>, inline)]
    pub from: Option<Bounded<0, { u64::MAX }>>,
    /// Messages in a page.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub limit: Option<Bounded<1, PAGE_MAX>>,
}

/// The transcript, or part of it.
#[derive(Debug, Serialize, ToSchema)]
pub struct Transcript {
    pub messages: Vec<Message>,
    /// With `tail`: how many messages the transcript has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// With `from`/`limit`: the `from` of the next page, while more follow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_from: Option<u64>,
}

/// The transcript in order.
///
/// Whole by default; `tail=N` the last N with `total`; `from=SEQ&limit=N` a page with `next_from` while more
/// follow (`tail` cannot be combined with `from` or `limit`: 400).
#[utoipa::path(
    get,
    path = "/api/runs/{id}/messages",
    tag = "traces",
    params(RunPath, MessagesQuery),
    responses(
        (status = 200, description = "OK", body = Transcript),
        (status = 400, response = BadRequest),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn messages(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
    AppQuery(q): AppQuery<MessagesQuery>,
) -> Result<Json<Transcript>, AppError> {
    caller.run(&engine, &id, Role::Viewer).await?;
    let transcript = match (q.tail, q.from, q.limit) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(AppError::BadRequest("`tail` cannot be combined with `from` or `limit`".into()))
        }
        (Some(n), None, None) => {
            let (messages, total) = engine.messages_tail(&id, n.as_u32()).await?;
            Transcript { messages, total: Some(total), next_from: None }
        }
        (None, None, None) => Transcript { messages: engine.messages(&id).await?, total: None, next_from: None },
        (None, from, limit) => {
            let from = from.map_or(0, |n| n.0);
            let (messages, next_from) =
                engine.messages_page(&id, from, limit.map_or(MAX_STEP_PAGE, Bounded::as_u32)).await?;
            Transcript { messages, total: None, next_from }
        }
    };
    Ok(Json(transcript))
}

/// One tool call with its full arguments and result.
#[utoipa::path(
    get,
    path = "/api/runs/{id}/tool-calls/{call_id}",
    tag = "traces",
    params(CallPath),
    responses(
        (status = 200, description = "OK", body = ToolCall),
        (status = 404, response = NotFound),
        (status = 500, response = Internal),
    )
)]
async fn tool_call(
    State(engine): State<Engine>,
    caller: Caller,
    Path(CallPath { id, call_id }): Path<CallPath>,
) -> Result<Json<ToolCall>, AppError> {
    caller.run(&engine, &id, Role::Viewer).await?;
    Ok(Json(engine.tool_call(&id, &call_id).await?))
}
