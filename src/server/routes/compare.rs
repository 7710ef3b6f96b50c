//! Two runs compared (issue 18):
//!
//! - `GET /api/compare?a=RUN&b=RUN` → their configurations side by side,
//!   totals and deltas, the first point of divergence, how they share
//!   history by forking, and one page each of their steps and messages
//!   aligned (`steps_from`/`steps_limit`, `messages_from`/`messages_limit`;
//!   without a `…_from`, the page around the first difference; `next_from`
//!   while more follow). See `runlens_engine::compare`.
//!
//! Both runs must be visible to the caller (one that is not answers 404, as
//! if it did not exist), and in one project (two runs of different
//! projects are a 404 too, even for an instance admin).

use axum::extract::State;
use axum::Json;
use runlens_engine::model::limits::MAX_ID_CHARS;
use runlens_engine::model::{CompareQuery, Comparison, Role, MAX_COMPARE_ROWS};
use runlens_engine::openapi::raw;
use runlens_engine::Engine;
use serde::Deserialize;
use serde_json::json;
use utoipa::openapi::{RefOr, Schema};
use utoipa::{IntoParams, PartialSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::{optional, AppQuery, Bounded};
use super::super::openapi::responses::*;
use super::super::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(compare))
}

/// A run id in the query: 1 to `MAX_ID_CHARS` characters.
#[derive(Debug)]
pub struct RunId(String);

impl TryFrom<String> for RunId {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        if text.is_empty() || text.chars().nth(MAX_ID_CHARS).is_some() {
            return Err(format!("must name a run (1 to {MAX_ID_CHARS} characters)"));
        }
        Ok(RunId(text))
    }
}

impl<'de> Deserialize<'de> for RunId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RunId::try_from(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl PartialSchema for RunId {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS, "description": "A run id" })))
    }
}

crate::bounded_param!(
    /// A row of an aligned list.
    CompareRow = 0, u32::MAX.into()
);
crate::bounded_param!(
    /// Aligned rows in a page.
    CompareRows = 1, MAX_COMPARE_ROWS.into()
);

/// Which runs, and which rows of each list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct CompareParams {
    /// The run on the left.
    #[param(value_type = RunId, inline)]
    pub a: RunId,
    /// The run on the right, in the same project.
    #[param(value_type = RunId, inline)]
    pub b: RunId,
    /// The first step row to send; absent: two rows before the first difference (never inside the folded
    /// fork prefix).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<CompareRow>, inline)]
    pub steps_from: Option<Bounded<0, { u32::MAX as u64 }>>,
    /// Step rows to send (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<CompareRows>, inline)]
    pub steps_limit: Option<Bounded<1, { MAX_COMPARE_ROWS as u64 }>>,
    /// The first message row to send; absent: as for steps.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<CompareRow>, inline)]
    pub messages_from: Option<Bounded<0, { u32::MAX as u64 }>>,
    /// Message rows to send (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<CompareRows>, inline)]
    pub messages_limit: Option<Bounded<1, { MAX_COMPARE_ROWS as u64 }>>,
}

impl From<CompareParams> for CompareQuery {
    fn from(p: CompareParams) -> Self {
        CompareQuery {
            a: p.a.0,
            b: p.b.0,
            steps_from: p.steps_from.map(Bounded::as_u32),
            steps_limit: p.steps_limit.map(Bounded::as_u32),
            messages_from: p.messages_from.map(Bounded::as_u32),
            messages_limit: p.messages_limit.map(Bounded::as_u32),
        }
    }
}

/// Two runs of one project compared: configuration, totals, divergence, aligned steps and messages.
///
/// Steps align by position and tool-call sequence (an inserted step is one `inserted` row), messages one by
/// one; each aligned pair lists what differs (word-level text diff, arguments by JSON pointer, result, status,
/// tokens, cost, duration). Forks compare from their common ancestor: the shared prefix is folded (counted in
/// `total` and `folded`, never listed). Each list comes one page at a time (`next_from` while more follow).
/// A run the caller cannot see, or two runs of different projects, answer 404.
#[utoipa::path(
    get,
    path = "/api/compare",
    tag = "compare",
    params(CompareParams),
    responses(
        (status = 200, description = "OK", body = Comparison),
        QueryErrors,
    )
)]
async fn compare(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(params): AppQuery<CompareParams>,
) -> Result<Json<Comparison>, AppError> {
    let query = CompareQuery::from(params);
    caller.run(&engine, &query.a, Role::Viewer).await?;
    caller.run(&engine, &query.b, Role::Viewer).await?;
    Ok(Json(engine.comparisons().compare(&query).await?))
}
