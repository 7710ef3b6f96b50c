//! Datasets of a project: make, list, read, rename and delete them; add,
//! edit and delete their items (each change one new version); read the
//! items at any version; make an item from a run's turn; upload items from
//! a JSONL or CSV file.
//!
//! A dataset, and any run an item is made from, must be the caller's
//! project's: one of another project is "not found", like one that does not
//! exist. Who may change what is the server's decision (operators add and
//! edit, admins delete a dataset). Every change is audited.
//!
//! An item's conversation is checked as a new run's `input_items` is (the
//! same function: every invocation answered by a result after it), so an
//! experiment can always start a run from it ([`DatasetInput::run_request`]).

mod csv;
mod from_run;
mod upload;

use crate::error::{EngineError, Result};
use crate::model::limits::{self, MAX_ID_CHARS};
use crate::model::{
    Actor, Dataset, DatasetChange, DatasetInput, DatasetItem, DatasetItemEdit, DatasetItemPage, DatasetItemsAdded,
    DatasetPage, NewDataset, NewDatasetItem, UploadFormat, MAX_DATASETS, MAX_DATASET_ITEMS, MAX_ITEMS_PER_REQUEST,
};
use crate::runtime::now;
use crate::store::{DatasetWrite, ItemsWrite};

crate::engine::facade_group!(Datasets, datasets, "Datasets: versioned inputs and what runs given them should answer.");

/// Times an edit is tried again when another change of the item came first.
const EDIT_ATTEMPTS: usize = 5;

fn short(id: &str) -> String {
    id.chars().take(MAX_ID_CHARS).collect()
}

fn not_found(id: &str) -> EngineError {
    EngineError::NotFound(format!("dataset `{}`", short(id)))
}

fn item_not_found(dataset: &str, item: &str) -> EngineError {
    EngineError::NotFound(format!("item `{}` in dataset `{}`", short(item), short(dataset)))
}

fn too_many_items(d: &Dataset, adding: usize) -> EngineError {
    EngineError::Conflict(format!(
        "dataset `{}` holds {} items; {adding} more would pass the {MAX_DATASET_ITEMS} a dataset may hold",
        d.name, d.item_count
    ))
}

impl Datasets<'_> {
    /// Makes dataset `new` in `project`, empty at version 0. `Invalid` for a
    /// bad name or description, `Conflict` when another dataset of the
    /// project has the name or the project has as many as it may.
    pub async fn create(self, project: &str, new: NewDataset, by: &Actor) -> Result<Dataset> {
        if let Some(problem) = new.problem() {
            return Err(EngineError::Invalid(problem));
        }
        let at = now();
        let dataset = Dataset {
            id: uuid::Uuid::now_v7().to_string(),
            name: new.name,
            description: new.description.unwrap_or_default(),
            version: 0,
            item_count: 0,
            created_at: at,
            updated_at: at,
            created_by: by.clone(),
        };
        match self.rt.store.datasets().insert_dataset(project, &dataset, MAX_DATASETS).await? {
            DatasetWrite::Saved => {}
            DatasetWrite::NameTaken => {
                return Err(EngineError::Conflict(format!("the project has a dataset named `{}`", dataset.name)));
            }
            DatasetWrite::TooMany | DatasetWrite::NotFound => {
                return Err(EngineError::Conflict(format!(
                    "the project has {MAX_DATASETS} datasets, the most a project may have"
                )));
            }
        }
        let detail = Some(dataset.name.clone());
        self.identity().audit(Some(project), by, "dataset_created", Some(&dataset.id), detail).await;
        Ok(dataset)
    }

    /// The datasets of `project` by name, after the name `after` (or
    /// skipping `offset`), at most `limit`.
    pub async fn list(self, project: &str, after: Option<&str>, offset: u32, limit: u32) -> Result<DatasetPage> {
        let limit = limit.clamp(1, limits::MAX_LIST_LIMIT);
        let mut datasets = self.rt.store.datasets().datasets(project, after, offset, limit + 1).await?;
        let next_cursor = if datasets.len() > limit as usize {
            datasets.truncate(limit as usize);
            datasets.last().map(|d| d.name.clone())
        } else {
            None
        };
        Ok(DatasetPage { datasets, next_cursor })
    }

    /// Dataset `id` of `project`.
    pub async fn get(self, project: &str, id: &str) -> Result<Dataset> {
        self.rt.store.datasets().dataset(project, id).await?.ok_or_else(|| not_found(id))
    }

    /// Renames dataset `id` of `project` or changes its description (its
    /// version is about its items and stays). `Conflict` for a name another
    /// dataset of the project has.
    pub async fn update(self, project: &str, id: &str, change: DatasetChange, by: &Actor) -> Result<Dataset> {
        let old = self.get(project, id).await?;
        if let Some(problem) = change.problem() {
            return Err(EngineError::Invalid(problem));
        }
        let name = change.name.unwrap_or_else(|| old.name.clone());
        let description = change.description.unwrap_or_else(|| old.description.clone());
        let at = now();
        match self.rt.store.datasets().update_dataset(project, id, &name, &description, at).await? {
            DatasetWrite::Saved => {}
            DatasetWrite::NameTaken => {
                return Err(EngineError::Conflict(format!("the project has a dataset named `{name}`")));
            }
            DatasetWrite::NotFound | DatasetWrite::TooMany => return Err(not_found(id)),
        }
        let detail = (old.name != name).then(|| format!("renamed from `{}` to `{name}`", old.name));
        self.identity().audit(Some(project), by, "dataset_updated", Some(id), detail).await;
        self.get(project, id).await
    }

    /// Deletes dataset `id` of `project` with all its items, at every version.
    pub async fn delete(self, project: &str, id: &str, by: &Actor) -> Result<Dataset> {
        let dataset = self.get(project, id).await?;
        if !self.rt.store.datasets().delete_dataset(project, id).await? {
            return Err(not_found(id));
        }
        let detail = Some(format!("{} ({} items at version {})", dataset.name, dataset.item_count, dataset.version));
        self.identity().audit(Some(project), by, "dataset_deleted", Some(id), detail).await;
        Ok(dataset)
    }

    /// Why `item` cannot be kept, naming the field: its bounds, then its
    /// conversation as a new run's `input_items` is checked.
    fn item_problem(&self, project: &str, item: &NewDatasetItem) -> Option<String> {
        if let Some(problem) = item.problem() {
            return Some(problem);
        }
        self.input_problem(project, &item.input)
    }

    fn input_problem(&self, project: &str, input: &DatasetInput) -> Option<String> {
        // A prompt alone is a run's initial prompt, whose bounds `problem` checks.
        input.input_items.as_ref()?;
        match crate::runtime::create::prepare_as(&self.rt, project, input.run_request(), None) {
            Ok(_) => None,
            Err(EngineError::Invalid(m)) => Some(format!("input.{m}")),
            Err(e) => Some(format!("input: {e}")),
        }
    }

    /// New items from `items` (checked), as dataset `dataset_id`'s.
    fn new_items(dataset_id: &str, items: Vec<NewDatasetItem>, source_run_id: Option<&str>) -> Vec<DatasetItem> {
        let at = now();
        items
            .into_iter()
            .map(|new| DatasetItem {
                id: uuid::Uuid::now_v7().to_string(),
                dataset_id: dataset_id.to_owned(),
                input: new.input,
                expected: new.expected.filter(|v| !v.is_null()),
                metadata: new.metadata.unwrap_or_default(),
                tags: new.tags,
                source_run_id: source_run_id.map(str::to_owned),
                recorded_results: new.recorded_results,
                version_added: 0,
                created_at: at,
            })
            .collect()
    }

    /// Keeps `items` (checked) in dataset `dataset` of `project` as its next
    /// version; `what` says where they came from, for the audit log.
    async fn keep(
        self,
        project: &str,
        dataset: &Dataset,
        mut items: Vec<DatasetItem>,
        what: &str,
        by: &Actor,
    ) -> Result<DatasetItemsAdded> {
        let at = now();
        let write = self.rt.store.datasets().add_dataset_items(project, &dataset.id, &items, MAX_DATASET_ITEMS, at);
        let dataset = match write.await? {
            ItemsWrite::Saved(d) => d,
            ItemsWrite::TooMany => {
                let now = self.get(project, &dataset.id).await?;
                return Err(too_many_items(&now, items.len()));
            }
            ItemsWrite::NoDataset | ItemsWrite::NoItem | ItemsWrite::Stale => return Err(not_found(&dataset.id)),
        };
        for item in &mut items {
            item.version_added = dataset.version;
        }
        let detail = Some(format!("{} {what} (version {})", items.len(), dataset.version));
        self.identity().audit(Some(project), by, "dataset_items_added", Some(&dataset.id), detail).await;
        Ok(DatasetItemsAdded { item_ids: items.into_iter().map(|i| i.id).collect(), dataset })
    }

    /// Adds `items` (1 to [`MAX_ITEMS_PER_REQUEST`]) to dataset `id` of
    /// `project` as one new version: all or none. `Invalid` naming the item
    /// and field (`items[2].expected: …`), `Conflict` past the dataset's cap.
    pub async fn add_items(
        self,
        project: &str,
        id: &str,
        items: Vec<NewDatasetItem>,
        by: &Actor,
    ) -> Result<DatasetItemsAdded> {
        let dataset = self.get(project, id).await?;
        if items.is_empty() || items.len() > MAX_ITEMS_PER_REQUEST {
            return Err(EngineError::Invalid(format!("items: give 1 to {MAX_ITEMS_PER_REQUEST} items")));
        }
        for (i, item) in items.iter().enumerate() {
            if let Some(problem) = self.item_problem(project, item) {
                return Err(EngineError::Invalid(format!("items[{i}].{problem}")));
            }
        }
        let new = Self::new_items(id, items, None);
        self.keep(project, &dataset, new, "items", by).await
    }

    /// Edits item `item_id` of dataset `id` of `project` (what the edit does
    /// not name is kept) as the next version; the item keeps its id.
    pub async fn edit_item(
        self,
        project: &str,
        id: &str,
        item_id: &str,
        edit: DatasetItemEdit,
        by: &Actor,
    ) -> Result<DatasetItem> {
        let mut dataset = self.get(project, id).await?;
        if let Some(problem) = edit.problem() {
            return Err(EngineError::Invalid(problem));
        }
        if let Some(problem) = edit.input.as_ref().and_then(|input| self.input_problem(project, input)) {
            return Err(EngineError::Invalid(problem));
        }
        for _ in 0..EDIT_ATTEMPTS {
            let current = self.rt.store.datasets().dataset_item(id, item_id, dataset.version).await?;
            let current = current.ok_or_else(|| item_not_found(id, item_id))?;
            let read_at = current.version_added;
            let mut item = edit.clone().apply(current);
            item.created_at = now();
            let write = self.rt.store.datasets().replace_dataset_item(project, id, &item, read_at, item.created_at);
            match write.await? {
                ItemsWrite::Saved(d) => {
                    item.version_added = d.version;
                    let detail = Some(format!("item {item_id} (version {})", d.version));
                    self.identity().audit(Some(project), by, "dataset_item_edited", Some(id), detail).await;
                    return Ok(item);
                }
                ItemsWrite::NoDataset => return Err(not_found(id)),
                ItemsWrite::NoItem => return Err(item_not_found(id, item_id)),
                // Another change of the item came first: edit what it made.
                ItemsWrite::Stale | ItemsWrite::TooMany => dataset = self.get(project, id).await?,
            }
        }
        Err(EngineError::Conflict(format!("item `{item_id}` keeps changing; try the edit again")))
    }

    /// Deletes item `item_id` from dataset `id` of `project` as the next
    /// version (earlier versions keep it); the dataset as it is then.
    pub async fn delete_item(self, project: &str, id: &str, item_id: &str, by: &Actor) -> Result<Dataset> {
        self.get(project, id).await?;
        match self.rt.store.datasets().remove_dataset_item(project, id, item_id, now()).await? {
            ItemsWrite::Saved(d) => {
                let detail = Some(format!("item {item_id} (version {})", d.version));
                self.identity().audit(Some(project), by, "dataset_item_deleted", Some(id), detail).await;
                Ok(d)
            }
            ItemsWrite::NoDataset => Err(not_found(id)),
            _ => Err(item_not_found(id, item_id)),
        }
    }

    /// Item `item_id` of dataset `id` of `project` as it is now.
    pub async fn item(self, project: &str, id: &str, item_id: &str) -> Result<crate::model::DatasetItem> {
        let dataset = self.get(project, id).await?;
        (self.rt.store.datasets().dataset_item(id, item_id, dataset.version).await?)
            .ok_or_else(|| item_not_found(id, item_id))
    }

    /// The items of dataset `id` of `project` at `version` (default: the
    /// current one), by id, after the id `after`, at most `limit`. `Invalid`
    /// for a version the dataset has not reached.
    pub async fn items(
        self,
        project: &str,
        id: &str,
        version: Option<u32>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<DatasetItemPage> {
        let dataset = self.get(project, id).await?;
        let version = version.unwrap_or(dataset.version);
        if version > dataset.version {
            return Err(EngineError::Invalid(format!(
                "version: dataset `{}` is at version {}; ask for 0 to {}",
                dataset.name, dataset.version, dataset.version
            )));
        }
        let limit = limit.clamp(1, limits::MAX_LIST_LIMIT);
        let mut items = self.rt.store.datasets().dataset_items(id, version, after, limit + 1).await?;
        let next_cursor = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|i| i.id.clone())
        } else {
            None
        };
        Ok(DatasetItemPage { dataset_id: id.to_owned(), version, items, next_cursor })
    }

    /// Adds the items of an uploaded file (`format`: JSONL, one new item per
    /// line; CSV, a header row then a row per item) to dataset `id` of
    /// `project` as one new version. Any bad row refuses the whole upload
    /// (`Invalid` naming each bad row by its line, the first
    /// [`MAX_LISTED_BAD_ROWS`](crate::model::MAX_LISTED_BAD_ROWS)), and nothing is kept.
    pub async fn upload(
        self,
        project: &str,
        id: &str,
        format: UploadFormat,
        content: &str,
        by: &Actor,
    ) -> Result<DatasetItemsAdded> {
        let dataset = self.get(project, id).await?;
        if content.len() > crate::model::MAX_UPLOAD_BYTES {
            return Err(EngineError::Invalid(format!(
                "content: at most {} MiB",
                crate::model::MAX_UPLOAD_BYTES / (1024 * 1024)
            )));
        }
        let rows = upload::rows(format, content).map_err(|e| EngineError::Invalid(format!("content: {e}")))?;
        if rows.is_empty() {
            return Err(EngineError::Invalid(format!("content: no items ({})", upload::shape(format))));
        }
        let mut bad = Vec::new();
        let mut good = Vec::with_capacity(rows.len());
        for (line, row) in rows {
            match row.and_then(|item| self.item_problem(project, &item).map_or(Ok(item), Err)) {
                Ok(item) => good.push(item),
                Err(problem) => bad.push((line, problem)),
            }
        }
        if !bad.is_empty() {
            return Err(EngineError::Invalid(upload::refusal(&bad)));
        }
        if good.len() > MAX_DATASET_ITEMS as usize {
            return Err(too_many_items(&dataset, good.len()));
        }
        let what = match format {
            UploadFormat::Jsonl => "items uploaded (JSONL)",
            UploadFormat::Csv => "items uploaded (CSV)",
        };
        let new = Self::new_items(id, good, None);
        self.keep(project, &dataset, new, what, by).await
    }
}
