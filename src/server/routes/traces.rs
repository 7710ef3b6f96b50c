//! Reading huge traces: paged steps with a light mode, the outline, the
//! transcript (whole, its tail, or a page), and one tool call in full.
//!
//! - `GET /api/runs/{id}/steps?from=0&limit=1000&payloads=true`
//!   → `{"steps": [...], "next_from": 1000}` (`next_from` only when more follow;
//!   without `limit` a run of up to 1,000 steps comes whole). `from` is a
//!   step index or a step id (`<run id>:s<index>`).
//! - `GET /api/runs/{id}/steps/{step}` → one step, by index or id.
//!   `payloads=false` cuts long payloads to a preview and flags each cut
//!   field with `<field>_truncated: true` (see `runlens_engine::paging`).
//! - `GET /api/runs/{id}/steps/{step}/model-call?messages=200` → the step's
//!   model call in full: the messages as sent (at most the latest `messages`
//!   of them, `omitted_messages` counting the rest), the tools offered, and
//!   the provider's request and response bodies (see `ModelCall`).
//! - `GET /api/runs/{id}/outline` → `{"steps": [...]}`: every step without
//!   payloads (id, index, kind, status, model, usage, timings, `cost_usd`, and
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
use runlens_engine::model::limits::MAX_ID_CHARS;
use runlens_engine::model::Role;
use runlens_engine::openapi::raw;
use serde_json::json;
use utoipa::openapi::{RefOr, Schema};
use utoipa::PartialSchema;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(steps))
        .routes(routes!(step))
        .routes(routes!(model_call))
        .routes(routes!(outline))
        .routes(routes!(messages))
        .routes(routes!(tool_call))
}

const PAGE_MAX: u64 = MAX_STEP_PAGE as u64;

/// A step of a run, as a query or path value: its index, or its id
/// (`<run id>:s<index>`, see `Step::parse_ref`).
pub struct StepRef;

impl PartialSchema for StepRef {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({
            "anyOf": [
                { "type": "integer", "minimum": 0, "maximum": u32::MAX },
                { "type": "string", "maxLength": MAX_ID_CHARS + 12, "pattern": "^[A-Za-z0-9._:-]+:s(0|[1-9][0-9]{0,9})$" },
            ],
            "description": "A step index, or a step id of the run (`<run id>:s<index>`)",
        })))
    }
}

/// A [`StepRef`] in a query, where an empty value is absent.
struct StepRefQuery;

impl PartialSchema for StepRefQuery {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({
            "anyOf": [
                { "type": "integer", "minimum": 0, "maximum": u32::MAX },
                { "type": "string", "maxLength": 0 },
                { "type": "string", "maxLength": MAX_ID_CHARS + 12, "pattern": "^[A-Za-z0-9._:-]+:s(0|[1-9][0-9]{0,9})$" },
            ],
            "description": "A step index, or a step id of the run (`<run id>:s<index>`); empty means absent",
        })))
    }
}

/// The index step `text` (an index or a step id) names in run `run_id`;
/// a 400 naming `param` when it names none.
fn step_index(run_id: &str, param: &str, text: &str) -> Result<u32, AppError> {
    Step::parse_ref(run_id, text).ok_or_else(|| {
        let text: String = text.chars().take(MAX_ID_CHARS + 12).collect();
        AppError::BadRequest(format!(
            "{param} must be a step index or an id of a step of this run (`{run_id}:s<index>`), not `{text}`"
        ))
    })
}
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
#[serde(deny_unknown_fields)]
pub struct StepsQuery {
    /// The first step: its index, or its id.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<StepRefQuery>, inline)]
    pub from: Option<String>,
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
        QueryErrors,
    )
)]
async fn steps(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
    AppQuery(q): AppQuery<StepsQuery>,
) -> Result<Json<StepPage>, AppError> {
    let from = match &q.from {
        Some(text) => step_index(&id, "from", text)?,
        None => 0,
    };
    let limit = q.limit.map_or(DEFAULT_STEP_PAGE, Bounded::as_u32);
    let payloads = q.payloads.is_none_or(|f| f.0);
    let run = caller.run(&engine, &id, Role::Viewer).await?;
    let (page, pricing) =
        tokio::try_join!(engine.traces().steps_page(&id, from, limit), engine.traces().pricing(&run.project))?;
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

/// The path of one step of a run.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct StepPath {
    /// A run id.
    pub id: String,
    /// The step: its index, or its id (`<run id>:s<index>`).
    #[param(value_type = StepRef, inline)]
    pub step: String,
}

/// The 404 of a step path naming no step of run `id` (the reference cut
/// to the longest a step id can be).
fn step_not_found(id: &str, step: &str) -> AppError {
    let step: String = step.chars().take(MAX_ID_CHARS + 12).collect();
    AppError::NotFound(format!("step `{step}` not found in run `{id}`"))
}

/// One step, by index or id, with its tool calls and full payloads, and `cost_usd`.
#[utoipa::path(
    get,
    path = "/api/runs/{id}/steps/{step}",
    tag = "traces",
    params(StepPath),
    responses(
        (status = 200, description = "OK", body = PricedStep),
        ReadErrors,
    )
)]
async fn step(
    State(engine): State<Engine>,
    caller: Caller,
    Path(StepPath { id, step }): Path<StepPath>,
) -> Result<Json<PricedStep>, AppError> {
    let run = caller.run(&engine, &id, Role::Viewer).await?;
    let missing = || step_not_found(&id, &step);
    let index = Step::parse_ref(&id, &step).ok_or_else(missing)?;
    let (page, pricing) =
        tokio::try_join!(engine.traces().steps_page(&id, index, 1), engine.traces().pricing(&run.project))?;
    let found = page.steps.into_iter().next().filter(|s| s.index == index).ok_or_else(missing)?;
    let cost_usd = pricing.step_cost_usd(&run.model, &found);
    Ok(Json(PricedStep { step: StepBody::Whole(Box::new(found)), cost_usd }))
}

/// How many of the messages sent a model call includes.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ModelCallQuery {
    /// The most of the latest messages sent to include (default 200); `omitted_messages` counts the rest.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub messages: Option<Bounded<1, PAGE_MAX>>,
}

/// The messages a model call includes unless `messages` says otherwise.
const DEFAULT_MODEL_CALL_MESSAGES: u32 = 200;

/// One step's model call in full: the messages exactly as sent (system prompt, then the transcript messages the
/// context window kept), the tools offered, the settings, and the provider's request and response bodies as its
/// adapter builds them. Credentials travel in headers and appear nowhere. A 400 for a step that called no model (a
/// handoff).
#[utoipa::path(
    get,
    path = "/api/runs/{id}/steps/{step}/model-call",
    tag = "traces",
    params(StepPath, ModelCallQuery),
    responses(
        (status = 200, description = "OK", body = runlens_engine::model::ModelCall),
        QueryErrors,
    )
)]
async fn model_call(
    State(engine): State<Engine>,
    caller: Caller,
    Path(StepPath { id, step }): Path<StepPath>,
    AppQuery(q): AppQuery<ModelCallQuery>,
) -> Result<Json<runlens_engine::model::ModelCall>, AppError> {
    caller.run(&engine, &id, Role::Viewer).await?;
    let index = Step::parse_ref(&id, &step).ok_or_else(|| step_not_found(&id, &step))?;
    let messages = q.messages.map_or(DEFAULT_MODEL_CALL_MESSAGES, Bounded::as_u32);
    Ok(Json(engine.traces().model_call(&id, index, messages).await?))
}

/// A step of the outline with its id and what it cost at today's prices.
#[derive(Debug, Serialize, ToSchema)]
pub struct PricedOutline {
    /// `<run id>:s<index>`: what the API takes beside the index.
    pub id: String,
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
/// Id, index, kind, status, model (when the step recorded one), usage, timings, `cost_usd`, and each tool call's
/// id, tool_name, status and timings.
#[utoipa::path(
    get,
    path = "/api/runs/{id}/outline",
    tag = "traces",
    params(RunPath),
    responses(
        (status = 200, description = "OK", body = Outline),
        ReadErrors,
    )
)]
async fn outline(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
) -> Result<Json<Outline>, AppError> {
    let head = caller.run(&engine, &id, Role::Viewer).await?;
    let ((run, outline), pricing) =
        tokio::try_join!(engine.traces().step_outline(&id), engine.traces().pricing(&head.project))?;
    let steps = outline
        .into_iter()
        .map(|step| PricedOutline {
            id: Step::id_for(&id, step.index),
            cost_usd: pricing.outline_cost_usd(&run.model, &step),
            step,
        })
        .collect();
    Ok(Json(Outline { steps }))
}

/// Which part of the transcript.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
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
        QueryErrors,
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
            let (messages, total) = engine.traces().messages_tail(&id, n.as_u32()).await?;
            Transcript { messages, total: Some(total), next_from: None }
        }
        (None, None, None) => Transcript { messages: engine.runs().messages(&id).await?, total: None, next_from: None },
        (None, from, limit) => {
            let from = from.map_or(0, |n| n.0);
            let (messages, next_from) =
                engine.traces().messages_page(&id, from, limit.map_or(MAX_STEP_PAGE, Bounded::as_u32)).await?;
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
        ReadErrors,
    )
)]
async fn tool_call(
    State(engine): State<Engine>,
    caller: Caller,
    Path(CallPath { id, call_id }): Path<CallPath>,
) -> Result<Json<ToolCall>, AppError> {
    caller.run(&engine, &id, Role::Viewer).await?;
    Ok(Json(engine.traces().tool_call(&id, &call_id).await?))
}
