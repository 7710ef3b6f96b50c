//! The price table: USD per million tokens per model, which runs and steps
//! are priced with (`cost_usd`).
//!
//! A model name may contain `/` (`openai/gpt-4o`): the routes take the rest
//! of the path (`{*model}`), which the document spells `{model}`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use runlens_engine::cost::{ModelPrice, PriceInput};
use runlens_engine::model::limits::MAX_PRICE_MODEL_CHARS;
use runlens_engine::Engine;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::AppJson;
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::ProjectHeader;
use runlens_engine::model::Role;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(prices)).routes(routes!(price, put_price, delete_price))
}

/// The price table.
#[derive(Debug, Serialize, ToSchema)]
pub struct PriceList {
    pub prices: Vec<ModelPrice>,
}

/// The price table: USD per million tokens per model.
#[utoipa::path(
    get,
    path = "/api/prices",
    tag = "prices",
    params(ProjectHeader),
    responses((status = 200, description = "OK", body = PriceList), (status = 500, response = Internal))
)]
async fn prices(State(engine): State<Engine>, caller: Caller) -> Result<Json<PriceList>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    Ok(Json(PriceList { prices: engine.traces().pricing(project).await?.prices }))
}

/// The path of one model's price.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ModelPath {
    /// A model name (may contain `/`).
    pub model: String,
}

/// The path of a price being set: the name it is stored under.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct NewModelPath {
    /// A model name: 1-200 printable characters, not blank (may contain `/`).
    #[param(value_type = PricedModelName, inline)]
    pub model: String,
}

/// A priced model's name: 1 to [`MAX_PRICE_MODEL_CHARS`] characters, none a
/// control character, not all white space.
struct PricedModelName;

impl utoipa::PartialSchema for PricedModelName {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        use runlens_engine::openapi::{printable_name, raw};
        utoipa::openapi::RefOr::T(raw(printable_name(MAX_PRICE_MODEL_CHARS)))
    }
}

/// One model's price.
#[utoipa::path(
    get,
    path = "/api/prices/{*model}",
    tag = "prices",
    params(ProjectHeader, ModelPath),
    responses(
        (status = 200, description = "OK", body = ModelPrice),
        ReadErrors,
    )
)]
async fn price(
    State(engine): State<Engine>,
    caller: Caller,
    Path(ModelPath { model }): Path<ModelPath>,
) -> Result<Json<ModelPrice>, AppError> {
    let pricing = engine.traces().pricing(caller.require_current(Role::Viewer)?).await?;
    let price = pricing.prices.into_iter().find(|p| p.model == model);
    Ok(Json(price.ok_or_else(|| AppError::NotFound(format!("price of model `{model}` not found")))?))
}

/// Create or replace a model's price.
///
/// `input` and `output` are required; `cache_read` and `cache_write` default to `input`, `reasoning` to `output`.
#[utoipa::path(
    put,
    path = "/api/prices/{*model}",
    tag = "prices",
    params(ProjectHeader, NewModelPath),
    request_body(content = PriceInput, example = json!({"input": 2.5, "output": 10})),
    responses(
        (status = 200, description = "The stored price", body = ModelPrice),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        BodyErrors,
    )
)]
async fn put_price(
    State(engine): State<Engine>,
    caller: Caller,
    Path(NewModelPath { model }): Path<NewModelPath>,
    AppJson(input): AppJson<PriceInput>,
) -> Result<Json<ModelPrice>, AppError> {
    let project = caller.require_current(Role::Admin)?;
    Ok(Json(engine.traces().set_price_by(project, &model, input, Some(&caller.actor)).await?))
}

/// Remove a model's price (its runs then have `cost_usd` null).
#[utoipa::path(
    delete,
    path = "/api/prices/{*model}",
    tag = "prices",
    params(ProjectHeader, ModelPath),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        BodyErrors,
    )
)]
async fn delete_price(
    State(engine): State<Engine>,
    caller: Caller,
    Path(ModelPath { model }): Path<ModelPath>,
) -> Result<StatusCode, AppError> {
    let project = caller.require_current(Role::Admin)?;
    engine.traces().delete_price_by(project, &model, Some(&caller.actor)).await?;
    Ok(StatusCode::NO_CONTENT)
}
