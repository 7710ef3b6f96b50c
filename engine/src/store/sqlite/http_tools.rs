//! [`HttpToolStore`] on SQLite: the table of `0012_http_tools.sql`.

use async_trait::async_trait;

use crate::error::Result;
use crate::store::http_tools::{HttpToolStore, HttpToolWrite, StoredHttpTool};
use crate::store::json_text;
use crate::store::{to_ms, SqliteStore};

use crate::store::rows::http_tools::*;

#[async_trait]
impl HttpToolStore for SqliteStore {
    // Each write's first statement is its write (a read first could not take
    // the write lock while runs are written); the primary key says whether
    // the name was taken, and the count is read inside the same transaction.
    async fn insert_http_tool(&self, stored: &StoredHttpTool, max: u32) -> Result<HttpToolWrite> {
        let t = &stored.tool;
        let mut tx = self.pool().begin().await?;
        let inserted = sqlx::query(
            "INSERT OR IGNORE INTO http_tools (project, name, spec, headers, secret, created_at, updated_at,
                updated_by_id, updated_by, secret_created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
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
        let count: i64 = sqlx::query_scalar("SELECT count(*) FROM http_tools WHERE project = ?")
            .bind(&t.project)
            .fetch_one(&mut *tx)
            .await?;
        if count > i64::from(max) {
            // Dropping the transaction rolls the insert back.
            return Ok(HttpToolWrite::TooMany);
        }
        tx.commit().await?;
        Ok(HttpToolWrite::Saved)
    }

    async fn update_http_tool(&self, stored: &StoredHttpTool) -> Result<HttpToolWrite> {
        let t = &stored.tool;
        let changed = sqlx::query(
            "UPDATE http_tools SET spec = ?, headers = ?, secret = ?, updated_at = ?, updated_by_id = ?,
                updated_by = ?, secret_created_at = ? WHERE project = ? AND name = ?",
        )
        .bind(spec_text(t))
        .bind(json_text(&stored.headers))
        .bind(&stored.secret)
        .bind(to_ms(t.updated_at))
        .bind(t.updated_by.as_ref().map(|a| &a.id))
        .bind(t.updated_by.as_ref().map(|a| &a.name))
        .bind(to_ms(t.secret_created_at))
        .bind(&t.project)
        .bind(&t.name)
        .execute(self.pool())
        .await?
        .rows_affected();
        Ok(if changed == 1 { HttpToolWrite::Saved } else { HttpToolWrite::NotFound })
    }

    async fn delete_http_tool(&self, project: &str, name: &str) -> Result<bool> {
        let deleted = sqlx::query("DELETE FROM http_tools WHERE project = ? AND name = ?")
            .bind(project)
            .bind(name)
            .execute(self.pool())
            .await?
            .rows_affected();
        Ok(deleted == 1)
    }

    async fn http_tool(&self, project: &str, name: &str) -> Result<Option<StoredHttpTool>> {
        let row = sqlx::query_as::<_, Row>("SELECT * FROM http_tools WHERE project = ? AND name = ?")
            .bind(project)
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(StoredHttpTool::from))
    }

    async fn http_tools(
        &self,
        project: &str,
        after: Option<&str>,
        offset: u32,
        limit: u32,
    ) -> Result<Vec<StoredHttpTool>> {
        let rows = sqlx::query_as::<_, Row>(
            "SELECT * FROM http_tools WHERE project = ? AND name > ? ORDER BY name LIMIT ? OFFSET ?",
        )
        .bind(project)
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .bind(i64::from(offset))
        .fetch_all(self.pool())
        .await?;
        Ok(rows.into_iter().map(StoredHttpTool::from).collect())
    }

    async fn every_http_tool(&self) -> Result<Vec<StoredHttpTool>> {
        let rows =
            sqlx::query_as::<_, Row>("SELECT * FROM http_tools ORDER BY project, name").fetch_all(self.pool()).await?;
        Ok(rows.into_iter().map(StoredHttpTool::from).collect())
    }

    async fn agent_named(&self, project: &str, name: &str) -> Result<bool> {
        let found: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM agents WHERE project = ? AND name = ?)")
            .bind(project)
            .bind(name)
            .fetch_one(self.pool())
            .await?;
        Ok(found)
    }
}
