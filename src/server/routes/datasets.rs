//! Datasets of the current project: list, make, read, rename, delete; their
//! items at any version, added (as a JSON list, from a JSONL or CSV file, or
//! from a run's turn), edited and deleted.
//!
//! Every change of the items is one new version of the dataset (0 while it
//! is empty), so a version names an exact set of items that later changes
//! do not touch. Viewers read; operators make datasets and change their
//! items; only admins delete a dataset. A dataset is the current project's
//! (`X-Runlens-Project`): another project's dataset is a 404, like one that
//! does not exist, and so is another project's run. Every change is audited.
//!
//! An upload's body is JSON (`{"content": "<the file's text>"}`), as every
//! body of the API is: a browser cannot send one from another site's form.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::Json;
use runlens_engine::model::limits::MAX_LIST_LIMIT;
use runlens_engine::model::{
    Dataset, DatasetChange, DatasetItem, DatasetItemEdit, DatasetItemPage, DatasetItemsAdded, DatasetPage,
    DatasetUpload, NewDataset, NewDatasetItems, Role, RunToDataset, UploadFormat, MAX_UPLOAD_BYTES,
};
use runlens_engine::Engine;
use serde::Deserialize;
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response, ResponseBuilder};
use utoipa::{IntoParams, OpenApi, ToResponse};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::{optional, AppJson, AppQuery, Bounded};
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::listing::{offset_or_cursor, page_offset, page_size, Cursor, PageQuery, PageSize};
use super::{ProjectHeader, RunPath};

pub fn routes() -> OpenApiRouter<AppState> {
    let upload = OpenApiRouter::new().routes(routes!(upload_items)).layer(DefaultBodyLimit::max(MAX_UPLOAD_BYTES));
    OpenApiRouter::with_openapi(Answers::openapi())
        .routes(routes!(list_datasets, create_dataset))
        .routes(routes!(get_dataset, update_dataset, delete_dataset))
        .routes(routes!(list_items, add_items))
        .routes(routes!(edit_item, delete_item))
        .routes(routes!(add_run_item))
        .merge(upload)
}

/// The error answers of these operations, beside the shared ones (see
/// `super::super::openapi::responses`): added to the document's components.
#[derive(OpenApi)]
#[openapi(components(responses(DatasetConflict, UploadTooLarge)))]
struct Answers;

/// A JSON error answer described by `description`.
fn error(description: &str) -> RefOr<Response> {
    let content = ContentBuilder::new().schema(Some(Ref::from_schema_name("Error"))).build();
    RefOr::T(ResponseBuilder::new().description(description).content("application/json", content).build())
}

/// 409 of the datasets' operations.
pub struct DatasetConflict;

impl<'s> ToResponse<'s> for DatasetConflict {
    fn response() -> (&'s str, RefOr<Response>) {
        let text = "The project has a dataset of that name or 100 datasets already, the dataset would hold more than \
            10,000 items, or the item kept changing during an edit; for a run: it has not ended, recorded no human \
            message, or its turn is more than an item holds";
        ("DatasetConflict", error(text))
    }
}

/// 413 of `POST /api/datasets/{id}/upload`.
pub struct UploadTooLarge;

impl<'s> ToResponse<'s> for UploadTooLarge {
    fn response() -> (&'s str, RefOr<Response>) {
        ("UploadTooLarge", error("The body is over 8 MiB"))
    }
}

/// The path of a dataset.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct DatasetPath {
    /// A dataset's id.
    pub id: String,
}

/// The path of an item of a dataset.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct DatasetItemPath {
    /// A dataset's id.
    pub id: String,
    /// An item's id (kept across edits).
    pub item_id: String,
}

/// The datasets of the current project by name, in pages (the previous page's `next_cursor`, or an `offset`).
#[utoipa::path(
    get,
    path = "/api/datasets",
    tag = "datasets",
    params(ProjectHeader, PageQuery),
    responses(
        (status = 200, description = "OK", body = DatasetPage),
        (status = 400, response = BadRequest),
        (status = 500, response = Internal),
    )
)]
async fn list_datasets(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<PageQuery>,
) -> Result<Json<DatasetPage>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    offset_or_cursor(&q.cursor, &q.offset)?;
    let after = q.cursor.map(|c| c.0);
    Ok(Json(engine.datasets().list(project, after.as_deref(), page_offset(q.offset), page_size(q.limit)).await?))
}

/// Make a dataset in the current project (operators and above), empty at version 0.
///
/// A name another dataset of the project has, or a project with 100 datasets, is a 409.
#[utoipa::path(
    post,
    path = "/api/datasets",
    tag = "datasets",
    params(ProjectHeader),
    request_body(content = NewDataset, example = json!({
        "name": "support: refunds",
        "description": "Refund questions from the support inbox, with the answers we want"
    })),
    responses(
        (status = 201, description = "Made", body = Dataset),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 409, response = DatasetConflict),
        BodyErrors,
    )
)]
async fn create_dataset(
    State(engine): State<Engine>,
    caller: Caller,
    AppJson(body): AppJson<NewDataset>,
) -> Result<(StatusCode, Json<Dataset>), AppError> {
    let project = caller.require_current(Role::Operator)?;
    Ok((StatusCode::CREATED, Json(engine.datasets().create(project, body, &caller.actor).await?)))
}

/// A dataset of the current project: its version and how many items it holds at it.
#[utoipa::path(
    get,
    path = "/api/datasets/{id}",
    tag = "datasets",
    params(ProjectHeader, DatasetPath),
    responses(
        (status = 200, description = "OK", body = Dataset),
        ReadErrors,
    )
)]
async fn get_dataset(
    State(engine): State<Engine>,
    caller: Caller,
    Path(DatasetPath { id }): Path<DatasetPath>,
) -> Result<Json<Dataset>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    Ok(Json(engine.datasets().get(project, &id).await?))
}

/// Rename a dataset or change its description (operators and above); its version, which counts changes of its
/// items, stays.
#[utoipa::path(
    put,
    path = "/api/datasets/{id}",
    tag = "datasets",
    params(ProjectHeader, DatasetPath),
    request_body(content = DatasetChange, example = json!({"name": "support: refunds v2"})),
    responses(
        (status = 200, description = "The dataset as saved", body = Dataset),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 409, response = DatasetConflict),
        BodyErrors,
    )
)]
async fn update_dataset(
    State(engine): State<Engine>,
    caller: Caller,
    Path(DatasetPath { id }): Path<DatasetPath>,
    AppJson(body): AppJson<DatasetChange>,
) -> Result<Json<Dataset>, AppError> {
    let project = caller.require_current(Role::Operator)?;
    Ok(Json(engine.datasets().update(project, &id, body, &caller.actor).await?))
}

/// Delete a dataset with its items at every version (admins).
#[utoipa::path(
    delete,
    path = "/api/datasets/{id}",
    tag = "datasets",
    params(ProjectHeader, DatasetPath),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        BodyErrors,
    )
)]
async fn delete_dataset(
    State(engine): State<Engine>,
    caller: Caller,
    Path(DatasetPath { id }): Path<DatasetPath>,
) -> Result<StatusCode, AppError> {
    let project = caller.require_current(Role::Admin)?;
    engine.datasets().delete(project, &id, &caller.actor).await?;
    Ok(StatusCode::NO_CONTENT)
}

crate::bounded_param!(
    /// A dataset's version.
    Version = 0, u32::MAX.into()
);

/// A page of a dataset's items at a version.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ItemsQuery {
    /// The version to read (default: the current one); one the dataset has not reached is a 400.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<Version>, inline)]
    pub version: Option<Bounded<0, { u32::MAX as u64 }>>,
    /// Items in a page (default 50).
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<PageSize>, inline)]
    pub limit: Option<Bounded<1, { MAX_LIST_LIMIT as u64 }>>,
    /// The `next_cursor` of the previous page: items after that one.
    #[serde(default, deserialize_with = "optional")]
    #[param(value_type = Option<Cursor>, inline)]
    pub cursor: Option<Cursor>,
}

/// A dataset's items at a version (default: the current one), oldest item first, in pages by `next_cursor`.
///
/// Each item is shown as it was at that version: its content then, with `version_added` the version that content
/// came in with.
#[utoipa::path(
    get,
    path = "/api/datasets/{id}/items",
    tag = "datasets",
    params(ProjectHeader, DatasetPath, ItemsQuery),
    responses(
        (status = 200, description = "OK", body = DatasetItemPage),
        QueryErrors,
    )
)]
async fn list_items(
    State(engine): State<Engine>,
    caller: Caller,
    Path(DatasetPath { id }): Path<DatasetPath>,
    AppQuery(q): AppQuery<ItemsQuery>,
) -> Result<Json<DatasetItemPage>, AppError> {
    let project = caller.require_current(Role::Viewer)?;
    let version = q.version.map(Bounded::as_u32);
    let after = q.cursor.map(|c| c.0);
    Ok(Json(engine.datasets().items(project, &id, version, after.as_deref(), page_size(q.limit)).await?))
}

/// Add 1 to 1,000 items to a dataset (operators and above), all in one new version.
///
/// An item's `input` is a prompt (`{"prompt"}`) or a conversation (`{"input_items"}`: transcript items as a run's
/// `input_items` takes them, ending with the human message to answer), either with optional structured `input`.
/// All or nothing: a bad item is a 400 naming it (`items[2].expected: at most 64 KiB of JSON`); a dataset that
/// would hold more than 10,000 items is a 409.
#[utoipa::path(
    post,
    path = "/api/datasets/{id}/items",
    tag = "datasets",
    params(ProjectHeader, DatasetPath),
    request_body(content = NewDatasetItems, example = json!({"items": [
        {"input": {"prompt": "What is 2 + 2?"}, "expected": "4", "tags": ["math"]},
        {"input": {"input_items": [
            {"type": "human", "data": {"message": "Book a table for two"}},
            {"type": "agent", "data": {"message": "For which evening?"}},
            {"type": "human", "data": {"message": "Friday at 8"}}
        ]}, "expected": [{"name": "book_table", "arguments": {"people": 2}}]}
    ]})),
    responses(
        (status = 201, description = "Added: the dataset at its new version and the new items' ids",
            body = DatasetItemsAdded),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 409, response = DatasetConflict),
        BodyErrors,
    )
)]
async fn add_items(
    State(engine): State<Engine>,
    caller: Caller,
    Path(DatasetPath { id }): Path<DatasetPath>,
    AppJson(body): AppJson<NewDatasetItems>,
) -> Result<(StatusCode, Json<DatasetItemsAdded>), AppError> {
    let project = caller.require_current(Role::Operator)?;
    let added = engine.datasets().add_items(project, &id, body.items, &caller.actor).await?;
    Ok((StatusCode::CREATED, Json(added)))
}

/// Edit an item (operators and above): what the body names changes (`expected: null` removes it), the rest is
/// kept. The item keeps its id and comes in with a new version of the dataset; earlier versions keep what it was.
#[utoipa::path(
    put,
    path = "/api/datasets/{id}/items/{item_id}",
    tag = "datasets",
    params(ProjectHeader, DatasetItemPath),
    request_body(content = DatasetItemEdit, example = json!({"expected": "four", "tags": ["math", "words"]})),
    responses(
        (status = 200, description = "The item as it is at the new version", body = DatasetItem),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 409, response = DatasetConflict),
        BodyErrors,
    )
)]
async fn edit_item(
    State(engine): State<Engine>,
    caller: Caller,
    Path(DatasetItemPath { id, item_id }): Path<DatasetItemPath>,
    AppJson(body): AppJson<DatasetItemEdit>,
) -> Result<Json<DatasetItem>, AppError> {
    let project = caller.require_current(Role::Operator)?;
    Ok(Json(engine.datasets().edit_item(project, &id, &item_id, body, &caller.actor).await?))
}

/// Delete an item (operators and above) as a new version of the dataset; earlier versions keep it. The answer is
/// the dataset at its new version.
#[utoipa::path(
    delete,
    path = "/api/datasets/{id}/items/{item_id}",
    tag = "datasets",
    params(ProjectHeader, DatasetItemPath),
    responses(
        (status = 200, description = "Deleted: the dataset at its new version", body = Dataset),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        BodyErrors,
    )
)]
async fn delete_item(
    State(engine): State<Engine>,
    caller: Caller,
    Path(DatasetItemPath { id, item_id }): Path<DatasetItemPath>,
) -> Result<Json<Dataset>, AppError> {
    let project = caller.require_current(Role::Operator)?;
    Ok(Json(engine.datasets().delete_item(project, &id, &item_id, &caller.actor).await?))
}

/// The file format of an upload.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct UploadQuery {
    /// `jsonl` or `csv`.
    #[param(inline)]
    pub format: UploadFormat,
}

/// Add the items of a JSONL or CSV file to a dataset (operators and above), all in one new version.
///
/// The body is JSON: `{"content": "<the file's text>"}`, at most 8 MiB. `format=jsonl`: one JSON object per line,
/// each an item as `POST /api/datasets/{id}/items` takes it (blank lines are skipped). `format=csv` (RFC 4180:
/// quoted fields may hold commas, line breaks and doubled quotes): a header row naming the columns — `prompt`
/// (required), `expected` (JSON when it parses, else text), `tags` (`;`-separated); any other column becomes a
/// metadata key — then one row per item. All or nothing: any bad row refuses the whole upload with a 400 naming
/// every bad row by its line (the first 20), and nothing is kept; a dataset that would hold more than 10,000 items
/// is a 409.
#[utoipa::path(
    post,
    path = "/api/datasets/{id}/upload",
    tag = "datasets",
    params(ProjectHeader, DatasetPath, UploadQuery),
    request_body(content = DatasetUpload, example = json!({
        "content": "prompt,expected,tags,topic\n\"What is 2 + 2?\",4,math,arithmetic\nSay hi,hello,,greetings\n"
    })),
    responses(
        (status = 201, description = "Added: the dataset at its new version and the new items' ids",
            body = DatasetItemsAdded),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 409, response = DatasetConflict),
        (status = 413, response = UploadTooLarge),
        (status = 415, response = UnsupportedMediaType),
        (status = 500, response = Internal),
    )
)]
async fn upload_items(
    State(engine): State<Engine>,
    caller: Caller,
    Path(DatasetPath { id }): Path<DatasetPath>,
    AppQuery(q): AppQuery<UploadQuery>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<DatasetItemsAdded>), AppError> {
    let project = caller.require_current(Role::Operator)?;
    let body = match body {
        Ok(body) => body,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            let mib = MAX_UPLOAD_BYTES / (1024 * 1024);
            return Err(AppError::PayloadTooLarge(format!("the upload is over its limit of {mib} MiB")));
        }
        Err(e) => return Err(AppError::BadRequest(format!("the request body could not be read: {}", e.body_text()))),
    };
    let upload: DatasetUpload =
        serde_json::from_slice(&body).map_err(|e| AppError::BadRequest(format!("invalid request body: {e}")))?;
    let added = engine.datasets().upload(project, &id, q.format, &upload.content, &caller.actor).await?;
    Ok((StatusCode::CREATED, Json(added)))
}

/// Add a turn of a run to a dataset of its project (operators and above); ingested runs too.
///
/// The item's input is the run's conversation up to the human message that started step `up_to_step` (default:
/// the last step): the prompt (and structured input) of a one-message run, else the conversation (`input_items`).
/// `expected` defaults to what the run answered that turn (its output — text, or the structured result — for its
/// last turn). `recorded_results` are the tool results of the steps up to that one, and `source_run_id` the run.
/// A run that has not ended, or one that recorded no human message (an ingested run whose spans carry no message
/// contents), is a 409.
#[utoipa::path(
    post,
    path = "/api/runs/{id}/dataset-items",
    tag = "datasets",
    params(RunPath),
    request_body(content = RunToDataset, example = json!({
        "dataset_id": "0190c0de-0000-7000-8000-000000000002",
        "up_to_step": 1
    })),
    responses(
        (status = 201, description = "Added, as a new version of the dataset", body = DatasetItem),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFound),
        (status = 409, response = DatasetConflict),
        BodyErrors,
    )
)]
async fn add_run_item(
    State(engine): State<Engine>,
    caller: Caller,
    Path(RunPath { id }): Path<RunPath>,
    AppJson(body): AppJson<RunToDataset>,
) -> Result<(StatusCode, Json<DatasetItem>), AppError> {
    let head = caller.run(&engine, &id, Role::Operator).await?;
    let item = engine.datasets().add_run(&head.project, &id, body, &caller.actor).await?;
    Ok((StatusCode::CREATED, Json(item)))
}
