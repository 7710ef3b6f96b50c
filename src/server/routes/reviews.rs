//! Review queues of the current project (`/api/review-queues…`): runs (or
//! a step of each) put in front of people to score, worked through item
//! by item. Reading is a viewer's; making, filling, deleting and reviewing
//! an operator's (a queue with assignees takes verdicts from them and the
//! project's admins). Every verdict's scores are audited like any score.
//! Another project's queue is a 404, like one that does not exist.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use runlens_engine::model::limits::MAX_LIST_LIMIT;
use runlens_engine::model::{
    AddedReviewItems, NewReviewItems, NewReviewQueue, ReviewItem, ReviewItemPage, ReviewQueue, ReviewQueueList,
    ReviewStatus, ReviewSubmit, Role,
};
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
use super::super::extract::{optional, AppJson, AppQuery, Bounded};
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::listing::{page_size, Cursor, PageSize};
use super::ProjectHeader;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_queues, create_queue))
        .routes(routes!(get_queue, delete_queue))
        .routes(routes!(queue_items, add_items))
        .routes(routes!(review_item))
}

/// The path of a queue.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct QueuePath {
    /// A review queue's id.
    pub id: String,
}

/// The path of a queue's item.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ItemPath {
    /// A review queue's id.
    pub id: String,
    /// One of its items' id.
    pub item_id: String,
}

/// Which items to list.
#[derive(Clone, Copy, Debug)]
pub struct StatusParam(pub ReviewStatus);

impl std::str::FromStr for StatusParam {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        ReviewStatus::parse(text).map(StatusParam).ok_or_else(|| "must be `pending`, `done` or `skipped`".to_owned())
    }
}

impl PartialSchema for StatusParam {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "string", "enum": ["pending", "done", "skipped"] })))
    }
}

/// A page of a queue's items, in the order they were added.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ItemsQuery {
    /// Only the items in this state.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<StatusParam>, inline)]
    pub status: Option<StatusParam>,
    /// Items in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// The `next_cursor` of the previous page.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<Cursor>, inline)]
    pub cursor: Option<Cursor>,
}

/// The project's review queues by name (at most 50), each with its items pending, done and skipped and its
/// reviewers' progress.
#[utoipa::path(
    get,
    path = "/api/review-queues",
    tag = "reviews",
    params(ProjectHeader),
    responses(
        (status = 200, description = "OK", body = ReviewQueueList),
        (status = 500, response = Internal),
    )
)]
async fn list_queues(State(engine): State<Engine>, caller: Caller) -> Result<Json<ReviewQueueList>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    Ok(Json(ReviewQueueList { queues: engine.reviews().list(project).await? }))
}

/// Make a review queue (operators and above): the scores its reviewers fill, who reviews, and the dataset
/// corrections go to.
#[utoipa::path(
    post,
    path = "/api/review-queues",
    tag = "reviews",
    params(ProjectHeader),
    request_body(content = NewReviewQueue, example = json!({
        "name": "support answers",
        "fields": [{"name": "correct", "kind": "yes_no"},
                   {"name": "tone", "kind": "label", "labels": ["kind", "neutral", "rude"]}],
        "dataset_id": "0190c0de-0000-7000-8000-0000000000d1"
    })),
    responses(
        (status = 201, description = "Made", body = ReviewQueue),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 409, response = Conflict),
        BodyErrors,
    )
)]
async fn create_queue(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(body): AppJson<NewReviewQueue>,
) -> Result<(StatusCode, Json<ReviewQueue>), AppError> {
    let project = caller.require_current(Role::Operator)?;
    Ok((StatusCode::CREATED, Json(engine.reviews().create(project, body, &caller.actor).await?)))
}

/// A review queue with its counts and its reviewers' progress.
#[utoipa::path(
    get,
    path = "/api/review-queues/{id}",
    tag = "reviews",
    params(ProjectHeader, QueuePath),
    responses(
        (status = 200, description = "OK", body = ReviewQueue),
        ReadErrors,
    )
)]
async fn get_queue(
    State(engine): State<Engine>,
    caller: Caller,
    Path(QueuePath { id }): Path<QueuePath>,
) -> Result<Json<ReviewQueue>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    Ok(Json(engine.reviews().get(project, &id).await?))
}

/// Delete a review queue and its items (operators and above); the scores given stay.
#[utoipa::path(
    delete,
    path = "/api/review-queues/{id}",
    tag = "reviews",
    params(ProjectHeader, QueuePath),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        BodyErrors,
    )
)]
async fn delete_queue(
    State(engine): State<Engine>,
    caller: Caller,
    Path(QueuePath { id }): Path<QueuePath>,
) -> Result<StatusCode, AppError> {
    let project = caller.require_current(Role::Operator)?;
    engine.reviews().delete(project, &id, &caller.actor).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A queue's items in the order they were added (of one state, when asked).
#[utoipa::path(
    get,
    path = "/api/review-queues/{id}/items",
    tag = "reviews",
    params(ProjectHeader, QueuePath, ItemsQuery),
    responses(
        (status = 200, description = "OK", body = ReviewItemPage),
        QueryErrors,
    )
)]
async fn queue_items(
    State(engine): State<Engine>,
    caller: Caller,
    Path(QueuePath { id }): Path<QueuePath>,
    AppQuery(q): AppQuery<ItemsQuery>,
) -> Result<Json<ReviewItemPage>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    let after = q.cursor.map(|c| c.0);
    let status = q.status.map(|s| s.0);
    Ok(Json(engine.reviews().items(project, &id, status, after.as_deref(), page_size(q.limit)).await?))
}

/// Put runs of the project in a queue, the whole run or one step of each (operators and above); a run already
/// in it (at that step) is passed over. All or none.
#[utoipa::path(
    post,
    path = "/api/review-queues/{id}/items",
    tag = "reviews",
    params(ProjectHeader, QueuePath),
    request_body = NewReviewItems,
    responses(
        (status = 201, description = "Added", body = AddedReviewItems),
        ChangeErrors,
    )
)]
async fn add_items(
    State(engine): State<Engine>,
    caller: Caller,
    Path(QueuePath { id }): Path<QueuePath>,
    AppJson(body): AppJson<NewReviewItems>,
) -> Result<(StatusCode, Json<AddedReviewItems>), AppError> {
    let project = caller.require_current(Role::Operator)?;
    Ok((StatusCode::CREATED, Json(engine.reviews().add_items(project, &id, body, &caller.actor).await?)))
}

/// Review an item (operators and above; of a queue with assignees, they and the project's admins): skip it, or
/// fill some of the queue's fields (each kept as a score of the run, or its step) and optionally give the output
/// it should have been (a new item of the queue's dataset, with it as `expected`). An item is reviewed once.
#[utoipa::path(
    post,
    path = "/api/review-queues/{id}/items/{item_id}/review",
    tag = "reviews",
    params(ProjectHeader, ItemPath),
    request_body(content = ReviewSubmit, example = json!({
        "scores": {"correct": false, "tone": "kind"},
        "comment": "Right tone, wrong order number",
        "correction": "Your refund for order 1042 is on its way."
    })),
    responses(
        (status = 200, description = "Reviewed", body = ReviewItem),
        ChangeErrors,
    )
)]
async fn review_item(
    State(engine): State<Engine>,
    caller: Caller,
    Path(ItemPath { id, item_id }): Path<ItemPath>,
    AppJson(body): AppJson<ReviewSubmit>,
) -> Result<Json<ReviewItem>, AppError> {
    let project = caller.require_current(Role::Operator)?;
    let admin = caller.role_in(project).is_some_and(|r| r >= Role::Admin);
    Ok(Json(engine.reviews().submit(project, &id, &item_id, body, &caller.actor, admin).await?))
}
