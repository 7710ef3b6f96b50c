//! The datasets half of the store: a project's datasets (see
//! [`crate::model::Dataset`]) and their items at every version.
//!
//! An item is kept as rows of its contents, one per version it was written
//! at (`version_added`), each closed by the version that replaced or
//! deleted it (`version_removed`); the items at version `v` are the rows
//! with `version_added <= v` and no `version_removed` at or before `v`.
//! Every change of the items is one transaction that moves the dataset to
//! its next version, the changes of one dataset taking turns, so versions
//! are dense and each names an exact set of items.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::model::{Dataset, DatasetItem};

/// How a write of a dataset went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatasetWrite {
    /// Written.
    Saved,
    /// Another dataset of the project has the name; nothing was written.
    NameTaken,
    /// The project has as many datasets as it may; nothing was written.
    TooMany,
    /// No such dataset in the project.
    NotFound,
}

/// How a change of a dataset's items went.
#[derive(Clone, Debug, PartialEq)]
pub enum ItemsWrite {
    /// Done: the dataset as it is now, at its new version.
    Saved(Dataset),
    /// No such dataset in the project.
    NoDataset,
    /// No such item at the dataset's current version.
    NoItem,
    /// The item is not at the version it was read at (another change came
    /// first); nothing was written.
    Stale,
    /// The dataset would hold more items than it may; nothing was written.
    TooMany,
}

#[async_trait]
pub trait DatasetStore: Send + Sync {
    /// Keeps the new dataset `d` of `project` when the project then has at
    /// most `max` datasets and no other one has its name.
    async fn insert_dataset(&self, project: &str, d: &Dataset, max: u32) -> Result<DatasetWrite>;
    /// Renames dataset `id` of `project` and sets its description.
    async fn update_dataset(
        &self,
        project: &str,
        id: &str,
        name: &str,
        description: &str,
        at: DateTime<Utc>,
    ) -> Result<DatasetWrite>;
    /// Deletes dataset `id` of `project` with all its items; whether it was there.
    async fn delete_dataset(&self, project: &str, id: &str) -> Result<bool>;
    /// Dataset `id` of `project`, if there is one.
    async fn dataset(&self, project: &str, id: &str) -> Result<Option<Dataset>>;
    /// The datasets of `project` by name (bytewise), named after `after`,
    /// skipping `offset`, at most `limit`.
    async fn datasets(&self, project: &str, after: Option<&str>, offset: u32, limit: u32) -> Result<Vec<Dataset>>;
    /// Adds `items` (their `version_added` is the new version's, whatever
    /// they say) to dataset `id` of `project` as its next version, when it
    /// then holds at most `max` items.
    async fn add_dataset_items(
        &self,
        project: &str,
        id: &str,
        items: &[DatasetItem],
        max: u32,
        at: DateTime<Utc>,
    ) -> Result<ItemsWrite>;
    /// Replaces item `item.id` of dataset `id` of `project`, read at
    /// `read_at` (its `version_added` then), with `item` as the next version.
    async fn replace_dataset_item(
        &self,
        project: &str,
        id: &str,
        item: &DatasetItem,
        read_at: u32,
        at: DateTime<Utc>,
    ) -> Result<ItemsWrite>;
    /// Deletes item `item_id` from dataset `id` of `project` as the next version.
    async fn remove_dataset_item(
        &self,
        project: &str,
        id: &str,
        item_id: &str,
        at: DateTime<Utc>,
    ) -> Result<ItemsWrite>;
    /// The items of dataset `id` at `version`, by id (bytewise), after
    /// `after`, at most `limit`.
    async fn dataset_items(&self, id: &str, version: u32, after: Option<&str>, limit: u32) -> Result<Vec<DatasetItem>>;
    /// Item `item_id` of dataset `id` as it is at `version`.
    async fn dataset_item(&self, id: &str, item_id: &str, version: u32) -> Result<Option<DatasetItem>>;
    /// Items `item_ids` of dataset `id` as they were at `version` (those it had), in one read.
    async fn dataset_items_of(&self, id: &str, item_ids: &[String], version: u32) -> Result<Vec<DatasetItem>>;
}
