//! [`HttpToolStore`] for every backend: the `http_tools` table (`spec` and
//! `headers` are JSON: JSONB in PostgreSQL, read back as text).
//!
//! The cap on a project's tools is a count after the insert, in the same
//! transaction; concurrent inserts into one project would each miss the
//! other's uncommitted row, so inserts into one project take turns
//! ([`Dialect::serialize`]). Names are compared and ordered bytewise
//! (`COLLATE "C"`) on every database.

use async_trait::async_trait;

use super::{sql, with_db, Dialect, SqlStore};
use crate::error::Result;
use crate::store::http_tools::{HttpToolStore, HttpToolWrite, StoredHttpTool};
use crate::store::json_text;
use crate::store::to_ms;

use crate::store::rows::http_tools::*;

/// The columns of `http_tools` as [`Row`] reads them (JSONB as text).
const COLUMNS: &str = "project, name, spec::text AS spec, headers::text AS headers, secret, created_at, updated_at, \
    updated_by_id, updated_by, secret_created_at";

#[async_trait]
impl<S: SqlStore> HttpToolStore for S {
    // The primary key says whether the name was taken (`ON CONFLICT DO
    // NOTHING` waits for a concurrent insert of the name to settle), and the
    // count is read inside the same transaction, under the project's lock.
    async fn insert_http_tool(&self, stored: &StoredHttpTool, max: u32) -> Result<HttpToolWrite> {
        with_db!(self.db(), |pool, D| {
            let t = &stored.tool;
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            D::serialize(&mut tx, &format!("runlens.http_tools:{}", t.project)).await?;
            let inserted = sqlx::query(sql!(
                D,
                "INSERT INTO http_tools (project, name, spec, headers, secret, created_at, updated_at,
                    updated_by_id, updated_by, secret_created_at)
                 VALUES (?, ?, ?::jsonb, ?::jsonb, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
            ))
            .bind(&t.project)
            .bind(&t.name)
            .bind(spec_text(t))
            .bind(json_text(&stored.headers))
            .bind(&stored.secret)
            .bind(to_ms(t.created_at))
            .bind(to_ms(t.updated_at))
            .bind(t.updated_by.as_ref().map(|a| &a.id))
            .bind(t.updated_by.as_ref().map(|a| &a.name))
            .bind(to_ms(t.secret_created_at))
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1;
            if !inserted {
                return Ok(HttpToolWrite::NameTaken);
            }
            let count: i64 = sqlx::query_scalar(sql!(D, "SELECT count(*) FROM http_tools WHERE project = ?"))
                .bind(&t.project)
                .fetch_one(&mut *tx)
                .await?;
            if count > i64::from(max) {
                // Dropping the transaction rolls the insert back.
                return Ok(HttpToolWrite::TooMany);
            }
            tx.commit().await?;
            Ok(HttpToolWrite::Saved)
        })
    }

    async fn update_http_tool(&self, stored: &StoredHttpTool) -> Result<HttpToolWrite> {
        with_db!(self.db(), |pool, D| {
            let t = &stored.tool;
            let changed = sqlx::query(sql!(
                D,
                "UPDATE http_tools SET spec = ?::jsonb, headers = ?::jsonb, secret = ?, updated_at = ?,
                    updated_by_id = ?, updated_by = ?, secret_created_at = ? WHERE project = ? AND name = ?"
            ))
            .bind(spec_text(t))
            .bind(json_text(&stored.headers))
            .bind(&stored.secret)
            .bind(to_ms(t.updated_at))
            .bind(t.updated_by.as_ref().map(|a| &a.id))
            .bind(t.updated_by.as_ref().map(|a| &a.name))
            .bind(to_ms(t.secret_created_at))
            .bind(&t.project)
            .bind(&t.name)
            .execute(pool)
            .await?
            .rows_affected();
            Ok(if changed == 1 { HttpToolWrite::Saved } else { HttpToolWrite::NotFound })
        })
    }

    async fn delete_http_tool(&self, project: &str, name: &str) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let deleted = sqlx::query(sql!(D, "DELETE FROM http_tools WHERE project = ? AND name = ?"))
                .bind(project)
                .bind(name)
                .execute(pool)
                .await?
                .rows_affected();
            Ok(deleted == 1)
        })
    }

    async fn http_tool(&self, project: &str, name: &str) -> Result<Option<StoredHttpTool>> {
        with_db!(self.db(), |pool, D| {
            let row = sqlx::query_as::<_, Row>(sql!(
                D,
                format!("SELECT {COLUMNS} FROM http_tools WHERE project = ? AND name = ?")
            ))
            .bind(project)
            .bind(name)
            .fetch_optional(pool)
            .await?;
            Ok(row.map(StoredHttpTool::from))
        })
    }

    async fn http_tools(
        &self,
        project: &str,
        after: Option<&str>,
        offset: u32,
        limit: u32,
    ) -> Result<Vec<StoredHttpTool>> {
        with_db!(self.db(), |pool, D| {
            let rows = sqlx::query_as::<_, Row>(sql!(
                D,
                format!(
                    "SELECT {COLUMNS} FROM http_tools WHERE project = ? AND name COLLATE \"C\" > ?
                 ORDER BY name COLLATE \"C\" LIMIT ? OFFSET ?"
                )
            ))
            .bind(project)
            .bind(after.unwrap_or(""))
            .bind(i64::from(limit))
            .bind(i64::from(offset))
            .fetch_all(pool)
            .await?;
            Ok(rows.into_iter().map(StoredHttpTool::from).collect())
        })
    }

    async fn every_http_tool(&self) -> Result<Vec<StoredHttpTool>> {
        with_db!(self.db(), |pool, D| {
            let rows = sqlx::query_as::<_, Row>(sql!(
                D,
                format!("SELECT {COLUMNS} FROM http_tools ORDER BY project COLLATE \"C\", name COLLATE \"C\"")
            ))
            .fetch_all(pool)
            .await?;
            Ok(rows.into_iter().map(StoredHttpTool::from).collect())
        })
    }

    async fn agent_named(&self, project: &str, name: &str) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let found: bool =
                sqlx::query_scalar(sql!(D, "SELECT EXISTS (SELECT 1 FROM agents WHERE project = ? AND name = ?)"))
                    .bind(project)
                    .bind(name)
                    .fetch_one(pool)
                    .await?;
            Ok(found)
        })
    }
}
