//! Datasets for the pages: the project's datasets, one dataset's items at
//! a version, making a dataset, and adding a run to one from its trace page
//! (see `GET /api/datasets` and `POST /api/runs/{id}/dataset-items`).

use leptos::prelude::*;
use runlens_engine::model::{Dataset, DatasetItemPage, Role};
use serde::{Deserialize, Serialize};

use super::action_error::ActionError;

/// A failed dataset form (about nothing in particular: each form is one).
pub type DatasetError = ActionError<String>;

/// Datasets a page lists at most (a project has at most 100).
pub const DATASETS_SHOWN: u32 = 100;
/// Items the dataset page shows per page.
pub const ITEMS_SHOWN: u32 = 50;

/// What `/datasets` shows, and the caller's role (the form is for operators).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DatasetsView {
    pub datasets: Vec<Dataset>,
    pub role: Option<Role>,
}

/// What `/datasets/:id` shows: the dataset, a page of its items at a version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DatasetView {
    pub dataset: Dataset,
    pub items: DatasetItemPage,
    /// The caller's role (the upload form is for operators).
    pub role: Option<Role>,
}

/// The current project's datasets, by name.
#[server]
pub async fn get_datasets() -> Result<DatasetsView, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(Role::Viewer)?;
    let page =
        engine.datasets().list(&caller.project, None, 0, DATASETS_SHOWN).await.map_err(super::ssr::to_server_error)?;
    Ok(DatasetsView { datasets: page.datasets, role: caller.role_in(&caller.project) })
}

/// Dataset `id` of the current project with a page of its items at
/// `version` (its current one when absent) after item `cursor`; `None` when
/// there is no such dataset.
#[server]
pub async fn get_dataset(
    id: String,
    version: Option<u32>,
    cursor: Option<String>,
) -> Result<Option<DatasetView>, ServerFnError> {
    use runlens_engine::EngineError;

    let (engine, caller) = super::ssr::for_project(Role::Viewer)?;
    let datasets = engine.datasets();
    let dataset = match datasets.get(&caller.project, &id).await {
        Ok(d) => d,
        Err(EngineError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(super::ssr::to_server_error(e)),
    };
    let cursor = super::ssr::non_empty(cursor);
    let items = datasets
        .items(&caller.project, &id, version, cursor.as_deref(), ITEMS_SHOWN)
        .await
        .map_err(super::ssr::to_server_error)?;
    Ok(Some(DatasetView { dataset, items, role: caller.role_in(&caller.project) }))
}

/// Makes a dataset in the current project (operators), then goes to it.
#[server]
pub async fn create_dataset(name: String, description: Option<String>) -> Result<String, DatasetError> {
    use super::ssr::form_failed;
    use runlens_engine::model::NewDataset;

    let (engine, caller) = super::ssr::form_caller(Role::Operator)?;
    let new = NewDataset { name: name.trim().to_owned(), description: super::ssr::non_empty(description) };
    let dataset = engine
        .datasets()
        .create(&caller.project, new, &caller.actor)
        .await
        .map_err(|e| form_failed(e, "making a dataset"))?;
    leptos_axum::redirect(&format!("/datasets/{}", crate::format::url_encode(&dataset.id)));
    Ok(dataset.id)
}

/// Adds run `run_id` (its conversation, answer and recorded tool results)
/// to dataset `dataset_id` of its project (operators); the dataset's new version.
#[server]
pub async fn add_run_to_dataset(run_id: String, dataset_id: String) -> Result<u32, DatasetError> {
    use super::ssr::{form_error, form_failed, form_refused};
    use super::ErrorKind;
    use runlens_engine::model::RunToDataset;

    let engine = super::ssr::engine().map_err(|e| form_error(ErrorKind::Internal, e))?;
    let caller = super::ssr::caller().map_err(|e| form_error(ErrorKind::Forbidden, e))?;
    let head = caller.run(&engine, &run_id, Role::Operator).await.map_err(form_refused)?;
    if dataset_id.trim().is_empty() {
        super::ssr::set_status(axum::http::StatusCode::BAD_REQUEST);
        return Err(form_error(ErrorKind::Invalid, "dataset: choose one"));
    }
    let req = RunToDataset { dataset_id, ..RunToDataset::default() };
    let item = engine
        .datasets()
        .add_run(&head.project, &run_id, req, &caller.actor)
        .await
        .map_err(|e| form_failed(e, "adding a run to a dataset"))?;
    Ok(item.version_added)
}

/// Adds the items of pasted JSONL or CSV (`format`) to dataset `dataset_id`
/// as one new version (operators): how many were added and the version.
/// Any bad row keeps nothing, and the error names the rows by line.
#[server]
pub async fn upload_items(dataset_id: String, format: String, content: String) -> Result<(usize, u32), DatasetError> {
    use super::ssr::{form_error, form_failed};
    use super::ErrorKind;
    use runlens_engine::model::UploadFormat;

    let (engine, caller) = super::ssr::form_caller(Role::Operator)?;
    let format: UploadFormat = format.parse().map_err(|why: String| {
        super::ssr::set_status(axum::http::StatusCode::BAD_REQUEST);
        form_error(ErrorKind::Invalid, format!("format: {why}"))
    })?;
    if content.trim().is_empty() {
        super::ssr::set_status(axum::http::StatusCode::BAD_REQUEST);
        return Err(form_error(ErrorKind::Invalid, "content: paste the rows to add"));
    }
    let added = engine
        .datasets()
        .upload(&caller.project, &dataset_id, format, &content, &caller.actor)
        .await
        .map_err(|e| form_failed(e, "adding items to a dataset"))?;
    Ok((added.item_ids.len(), added.dataset.version))
}

/// Edits item `item_id` of dataset `dataset_id` (operators) as one new
/// version: its prompt (when it has one; blank keeps it), its expected
/// value (JSON when it reads as JSON other than text, else the text; blank
/// removes it) and its tags (comma-separated). The new version.
#[server]
pub async fn edit_dataset_item(
    dataset_id: String,
    item_id: String,
    prompt: Option<String>,
    expected: Option<String>,
    tags: Option<String>,
) -> Result<u32, DatasetError> {
    use super::ssr::{form_failed, non_empty};
    use runlens_engine::model::DatasetItemEdit;
    use serde_json::Value;

    let (engine, caller) = super::ssr::form_caller(Role::Operator)?;
    let datasets = engine.datasets();
    let item = datasets
        .item(&caller.project, &dataset_id, &item_id)
        .await
        .map_err(|e| form_failed(e, "reading a dataset item"))?;
    let mut edit = DatasetItemEdit::default();
    if let (Some(prompt), Some(_)) = (non_empty(prompt), item.input.prompt.as_ref()) {
        let mut input = item.input.clone();
        input.prompt = Some(prompt);
        edit.input = Some(input);
    }
    edit.expected = Some(non_empty(expected).map(|text| match serde_json::from_str::<Value>(&text) {
        Ok(Value::String(_)) | Err(_) => Value::String(text),
        Ok(json) => json,
    }));
    let tags: Vec<String> =
        (tags.unwrap_or_default().split(',')).map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()).collect();
    edit.tags = Some(tags);
    let edited = datasets
        .edit_item(&caller.project, &dataset_id, &item_id, edit, &caller.actor)
        .await
        .map_err(|e| form_failed(e, "editing a dataset item"))?;
    Ok(edited.version_added)
}

/// Deletes item `item_id` from dataset `dataset_id` (operators) as one new
/// version; earlier versions keep it. The new version.
#[server]
pub async fn delete_dataset_item(dataset_id: String, item_id: String) -> Result<u32, DatasetError> {
    use super::ssr::form_failed;

    let (engine, caller) = super::ssr::form_caller(Role::Operator)?;
    let dataset = engine
        .datasets()
        .delete_item(&caller.project, &dataset_id, &item_id, &caller.actor)
        .await
        .map_err(|e| form_failed(e, "deleting a dataset item"))?;
    Ok(dataset.version)
}
