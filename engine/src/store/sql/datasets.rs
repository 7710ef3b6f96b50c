//! [`DatasetStore`] for every backend: the `datasets` and `dataset_items`
//! tables (JSON kept as text on both databases).
//!
//! Every change of a dataset's items runs in one transaction that reads the
//! dataset's version, writes the item rows of the next one and moves the
//! dataset to it; the changes of one dataset take turns
//! ([`Dialect::serialize`]), so two concurrent ones never make the same
//! version. The cap on a project's datasets is a count after the insert,
//! the inserts into one project taking turns, as the HTTP tools' cap is.
//! Names and item ids are compared and ordered bytewise (`COLLATE "C"`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{sql, unique_violation, with_db, Dialect, SqlStore};
use crate::error::Result;
use crate::model::{Actor, Dataset, DatasetInput, DatasetItem};
use crate::store::datasets::{DatasetStore, DatasetWrite, ItemsWrite};
use crate::store::{from_ms, json_text, to_ms};

const DATASET_COLUMNS: &str =
    "id, name, description, version, item_count, created_at, updated_at, created_by_id, created_by";

const ITEM_COLUMNS: &str = "id, dataset_id, version_added, input, expected, metadata, tags, source_run_id, \
    recorded_results, created_at";

#[derive(sqlx::FromRow)]
struct DatasetRow {
    id: String,
    name: String,
    description: String,
    version: i64,
    item_count: i64,
    created_at: i64,
    updated_at: i64,
    created_by_id: String,
    created_by: String,
}

impl From<DatasetRow> for Dataset {
    fn from(r: DatasetRow) -> Dataset {
        Dataset {
            id: r.id,
            name: r.name,
            description: r.description,
            version: u32::try_from(r.version).unwrap_or(u32::MAX),
            item_count: u32::try_from(r.item_count).unwrap_or(u32::MAX),
            created_at: from_ms(r.created_at),
            updated_at: from_ms(r.updated_at),
            created_by: Actor { id: r.created_by_id, name: r.created_by },
        }
    }
}

#[derive(sqlx::FromRow)]
struct ItemRow {
    id: String,
    dataset_id: String,
    version_added: i64,
    input: String,
    expected: Option<String>,
    metadata: String,
    tags: String,
    source_run_id: Option<String>,
    recorded_results: String,
    created_at: i64,
}

impl From<ItemRow> for DatasetItem {
    fn from(r: ItemRow) -> DatasetItem {
        // A row this store wrote always decodes; a damaged one says so.
        let input =
            serde_json::from_str(&r.input).unwrap_or_else(|_| DatasetInput::prompt("(unreadable input)".to_owned()));
        DatasetItem {
            id: r.id,
            dataset_id: r.dataset_id,
            input,
            expected: r.expected.and_then(|e| serde_json::from_str(&e).ok()),
            metadata: serde_json::from_str(&r.metadata).unwrap_or_default(),
            tags: serde_json::from_str(&r.tags).unwrap_or_default(),
            source_run_id: r.source_run_id,
            recorded_results: serde_json::from_str(&r.recorded_results).unwrap_or_default(),
            version_added: u32::try_from(r.version_added).unwrap_or(u32::MAX),
            created_at: from_ms(r.created_at),
        }
    }
}

/// The key the changes of dataset `id` take turns on.
fn turn(id: &str) -> String {
    format!("runlens.datasets:{id}")
}

/// Dataset `id` of `project` as read inside a change's transaction `tx`
/// of dialect `D` (its row locked where the database locks rows).
macro_rules! locked {
    ($tx:expr, $d:ty, $project:expr, $id:expr) => {
        sqlx::query_as::<_, DatasetRow>(sql!(
            $d,
            format!("SELECT {DATASET_COLUMNS} FROM datasets WHERE project = ? AND id = ? FOR UPDATE")
        ))
        .bind($project)
        .bind($id)
        .fetch_optional(&mut *$tx)
        .await?
        .map(Dataset::from)
    };
}

/// Moves dataset `$ds` to its next version with `$count` items, in `tx`.
macro_rules! next_version {
    ($tx:expr, $d:ty, $ds:expr, $count:expr, $at:expr) => {{
        $ds.version += 1;
        $ds.item_count = $count;
        $ds.updated_at = $at;
        sqlx::query(sql!($d, "UPDATE datasets SET version = ?, item_count = ?, updated_at = ? WHERE id = ?"))
            .bind(i64::from($ds.version))
            .bind(i64::from($count))
            .bind(to_ms($at))
            .bind(&$ds.id)
            .execute(&mut *$tx)
            .await?;
    }};
}

/// Writes `$item`'s row at `$version` into dataset `$id`, in `tx`.
macro_rules! insert_item {
    ($tx:expr, $d:ty, $id:expr, $item:expr, $version:expr) => {
        sqlx::query(sql!(
            $d,
            "INSERT INTO dataset_items (dataset_id, id, version_added, version_removed, input, expected, metadata,
                tags, source_run_id, recorded_results, created_at)
             VALUES (?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?)"
        ))
        .bind($id)
        .bind(&$item.id)
        .bind(i64::from($version))
        .bind(json_text(&$item.input))
        .bind($item.expected.as_ref().map(json_text))
        .bind(json_text(&$item.metadata))
        .bind(json_text(&$item.tags))
        .bind(&$item.source_run_id)
        .bind(json_text(&$item.recorded_results))
        .bind(to_ms($item.created_at))
        .execute(&mut *$tx)
        .await?
    };
}

#[async_trait]
impl<S: SqlStore> DatasetStore for S {
    async fn insert_dataset(&self, project: &str, d: &Dataset, max: u32) -> Result<DatasetWrite> {
        with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            D::serialize(&mut tx, &format!("runlens.datasets.project:{project}")).await?;
            let inserted = sqlx::query(sql!(
                D,
                "INSERT INTO datasets (id, project, name, description, version, item_count, created_at, updated_at,
                    created_by_id, created_by)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
            ))
            .bind(&d.id)
            .bind(project)
            .bind(&d.name)
            .bind(&d.description)
            .bind(i64::from(d.version))
            .bind(i64::from(d.item_count))
            .bind(to_ms(d.created_at))
            .bind(to_ms(d.updated_at))
            .bind(&d.created_by.id)
            .bind(&d.created_by.name)
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1;
            if !inserted {
                return Ok(DatasetWrite::NameTaken);
            }
            let count: i64 = sqlx::query_scalar(sql!(D, "SELECT count(*) FROM datasets WHERE project = ?"))
                .bind(project)
                .fetch_one(&mut *tx)
                .await?;
            if count > i64::from(max) {
                // Dropping the transaction rolls the insert back.
                return Ok(DatasetWrite::TooMany);
            }
            tx.commit().await?;
            Ok(DatasetWrite::Saved)
        })
    }

    async fn update_dataset(
        &self,
        project: &str,
        id: &str,
        name: &str,
        description: &str,
        at: DateTime<Utc>,
    ) -> Result<DatasetWrite> {
        with_db!(self.db(), |pool, D| {
            let changed = sqlx::query(sql!(
                D,
                "UPDATE datasets SET name = ?, description = ?, updated_at = ? WHERE project = ? AND id = ?"
            ))
            .bind(name)
            .bind(description)
            .bind(to_ms(at))
            .bind(project)
            .bind(id)
            .execute(pool)
            .await;
            match changed {
                Ok(done) if done.rows_affected() == 1 => Ok(DatasetWrite::Saved),
                Ok(_) => Ok(DatasetWrite::NotFound),
                Err(e) if unique_violation(&e) => Ok(DatasetWrite::NameTaken),
                Err(e) => Err(e.into()),
            }
        })
    }

    async fn delete_dataset(&self, project: &str, id: &str) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            D::serialize(&mut tx, &turn(id)).await?;
            let deleted = sqlx::query(sql!(D, "DELETE FROM datasets WHERE project = ? AND id = ?"))
                .bind(project)
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected()
                == 1;
            if !deleted {
                return Ok(false);
            }
            sqlx::query(sql!(D, "DELETE FROM dataset_items WHERE dataset_id = ?")).bind(id).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(true)
        })
    }

    async fn dataset(&self, project: &str, id: &str) -> Result<Option<Dataset>> {
        with_db!(self.db(), |pool, D| {
            let row = sqlx::query_as::<_, DatasetRow>(sql!(
                D,
                format!("SELECT {DATASET_COLUMNS} FROM datasets WHERE project = ? AND id = ?")
            ))
            .bind(project)
            .bind(id)
            .fetch_optional(pool)
            .await?;
            Ok(row.map(Dataset::from))
        })
    }

    async fn datasets(&self, project: &str, after: Option<&str>, offset: u32, limit: u32) -> Result<Vec<Dataset>> {
        with_db!(self.db(), |pool, D| {
            let rows = sqlx::query_as::<_, DatasetRow>(sql!(
                D,
                format!(
                    "SELECT {DATASET_COLUMNS} FROM datasets WHERE project = ? AND name COLLATE \"C\" > ?
                     ORDER BY name COLLATE \"C\" LIMIT ? OFFSET ?"
                )
            ))
            .bind(project)
            .bind(after.unwrap_or(""))
            .bind(i64::from(limit))
            .bind(i64::from(offset))
            .fetch_all(pool)
            .await?;
            Ok(rows.into_iter().map(Dataset::from).collect())
        })
    }

    async fn add_dataset_items(
        &self,
        project: &str,
        id: &str,
        items: &[DatasetItem],
        max: u32,
        at: DateTime<Utc>,
    ) -> Result<ItemsWrite> {
        with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            D::serialize(&mut tx, &turn(id)).await?;
            let Some(mut d) = locked!(tx, D, project, id) else { return Ok(ItemsWrite::NoDataset) };
            let count = u64::from(d.item_count) + items.len() as u64;
            if count > u64::from(max) {
                return Ok(ItemsWrite::TooMany);
            }
            let version = d.version + 1;
            for item in items {
                insert_item!(tx, D, id, item, version);
            }
            next_version!(tx, D, d, count as u32, at);
            tx.commit().await?;
            Ok(ItemsWrite::Saved(d))
        })
    }

    async fn replace_dataset_item(
        &self,
        project: &str,
        id: &str,
        item: &DatasetItem,
        read_at: u32,
        at: DateTime<Utc>,
    ) -> Result<ItemsWrite> {
        with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            D::serialize(&mut tx, &turn(id)).await?;
            let Some(mut d) = locked!(tx, D, project, id) else { return Ok(ItemsWrite::NoDataset) };
            let version = d.version + 1;
            let live: Option<i64> = sqlx::query_scalar(sql!(
                D,
                "SELECT version_added FROM dataset_items
                 WHERE dataset_id = ? AND id = ? AND version_removed IS NULL"
            ))
            .bind(id)
            .bind(&item.id)
            .fetch_optional(&mut *tx)
            .await?;
            match live {
                None => return Ok(ItemsWrite::NoItem),
                Some(v) if v != i64::from(read_at) => return Ok(ItemsWrite::Stale),
                Some(_) => {}
            }
            sqlx::query(sql!(
                D,
                "UPDATE dataset_items SET version_removed = ?
                 WHERE dataset_id = ? AND id = ? AND version_removed IS NULL"
            ))
            .bind(i64::from(version))
            .bind(id)
            .bind(&item.id)
            .execute(&mut *tx)
            .await?;
            insert_item!(tx, D, id, item, version);
            let count = d.item_count;
            next_version!(tx, D, d, count, at);
            tx.commit().await?;
            Ok(ItemsWrite::Saved(d))
        })
    }

    async fn remove_dataset_item(
        &self,
        project: &str,
        id: &str,
        item_id: &str,
        at: DateTime<Utc>,
    ) -> Result<ItemsWrite> {
        with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            D::serialize(&mut tx, &turn(id)).await?;
            let Some(mut d) = locked!(tx, D, project, id) else { return Ok(ItemsWrite::NoDataset) };
            let removed = sqlx::query(sql!(
                D,
                "UPDATE dataset_items SET version_removed = ?
                 WHERE dataset_id = ? AND id = ? AND version_removed IS NULL"
            ))
            .bind(i64::from(d.version + 1))
            .bind(id)
            .bind(item_id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if removed == 0 {
                return Ok(ItemsWrite::NoItem);
            }
            let count = d.item_count.saturating_sub(1);
            next_version!(tx, D, d, count, at);
            tx.commit().await?;
            Ok(ItemsWrite::Saved(d))
        })
    }

    async fn dataset_items(&self, id: &str, version: u32, after: Option<&str>, limit: u32) -> Result<Vec<DatasetItem>> {
        with_db!(self.db(), |pool, D| {
            let rows = sqlx::query_as::<_, ItemRow>(sql!(
                D,
                format!(
                    "SELECT {ITEM_COLUMNS} FROM dataset_items
                     WHERE dataset_id = ?1 AND version_added <= ?2 AND (version_removed IS NULL OR version_removed > ?2)
                        AND id COLLATE \"C\" > ?3
                     ORDER BY id COLLATE \"C\" LIMIT ?4"
                )
            ))
            .bind(id)
            .bind(i64::from(version))
            .bind(after.unwrap_or(""))
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?;
            Ok(rows.into_iter().map(DatasetItem::from).collect())
        })
    }

    async fn dataset_item(&self, id: &str, item_id: &str, version: u32) -> Result<Option<DatasetItem>> {
        with_db!(self.db(), |pool, D| {
            let row = sqlx::query_as::<_, ItemRow>(sql!(
                D,
                format!(
                    "SELECT {ITEM_COLUMNS} FROM dataset_items
                     WHERE dataset_id = ?1 AND id = ?2 AND version_added <= ?3
                        AND (version_removed IS NULL OR version_removed > ?3)"
                )
            ))
            .bind(id)
            .bind(item_id)
            .bind(i64::from(version))
            .fetch_optional(pool)
            .await?;
            Ok(row.map(DatasetItem::from))
        })
    }

    async fn dataset_items_of(&self, id: &str, item_ids: &[String], version: u32) -> Result<Vec<DatasetItem>> {
        if item_ids.is_empty() {
            return Ok(Vec::new());
        }
        with_db!(self.db(), |pool, D| {
            let rows = sqlx::query_as::<_, ItemRow>(sql!(
                D,
                format!(
                    "SELECT {ITEM_COLUMNS} FROM dataset_items
                     WHERE dataset_id = ? AND id {} AND version_added <= ?
                        AND (version_removed IS NULL OR version_removed > ?)",
                    D::IN_LIST
                )
            ))
            .bind(id)
            .bind(D::list(item_ids))
            .bind(i64::from(version))
            .bind(i64::from(version))
            .fetch_all(pool)
            .await?;
            Ok(rows.into_iter().map(DatasetItem::from).collect())
        })
    }
}
