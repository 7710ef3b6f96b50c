//! [`HttpToolStore`] on PostgreSQL: the `http_tools` table (`spec` and
//! `headers` are JSONB, read back as text).
//!
//! The cap on a project's tools is a count after the insert, in the same
//! transaction; concurrent inserts into one project would each miss the
//! other's uncommitted row, so an insert first takes a transaction-scoped
//! advisory lock on the project: inserts into one project run one at a time.
//! Names are compared and ordered bytewise (`COLLATE "C"`), as in SQLite.

use async_trait::async_trait;

use crate::error::Result;
use crate::store::http_tools::{HttpToolStore, HttpToolWrite, StoredHttpTool};
use crate::store::json_text;
use crate::store::to_ms;

use super::PgStore;

use crate::store::rows::http_tools::*;

/// The columns of `http_tools` as [`Row`] reads them (JSONB as text).
const COLUMNS: &str = "project, name, spec::text AS spec, headers::text AS headers, secret, created_at, updated_at, \
    updated_by_id, updated_by, secret_created_at";

#[async_trait]
impl HttpToolStore for PgStore {
    // The primary key says whether the name was taken (`ON CONFLICT DO
    // NOTHING` waits for a concurrent insert of the name to settle), and the
    // count is read inside the same transaction, under the project's lock.
    async fn insert_http_tool(&self, stored: &StoredHttpTool, max: u32) -> Result<HttpToolWrite> {
        let t = &stored.tool;
        let mut tx = self.pool().begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('runlens.http_tools:' || $1))")
            .bind(&t.project)
            .execute(&mut *tx)
            .await?;
        let inserted = sqlx::query(
            "INSERT INTO http_tools (project, name, spec, headers, secret, created_at, updated_at,
                updated_by_id, updated_by, secret_created_at)
             VALUES ($1, $2, $3::jsonb, $4::jsonb, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING",
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
        let count: i64 = sqlx::query_scalar("SELECT count(*) FROM http_tools WHERE project = $1")
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
            "UPDATE http_tools SET spec = $1::jsonb, headers = $2::jsonb, secret = $3, updated_at = $4,
                updated_by_id = $5, updated_by = $6, secret_created_at = $7 WHERE project = $8 AND name = $9",
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
        let deleted = sqlx::query("DELETE FROM http_tools WHERE project = $1 AND name = $2")
            .bind(project)
            .bind(name)
            .execute(self.pool())
            .await?
            .rows_affected();
        Ok(deleted == 1)
    }

    async fn http_tool(&self, project: &str, name: &str) -> Result<Option<StoredHttpTool>> {
        let row =
            sqlx::query_as::<_, Row>(&format!("SELECT {COLUMNS} FROM http_tools WHERE project = $1 AND name = $2"))
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
        let rows = sqlx::query_as::<_, Row>(&format!(
            "SELECT {COLUMNS} FROM http_tools WHERE project = $1 AND name COLLATE \"C\" > $2
             ORDER BY name COLLATE \"C\" LIMIT $3 OFFSET $4"
        ))
        .bind(project)
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .bind(i64::from(offset))
        .fetch_all(self.pool())
        .await?;
        Ok(rows.into_iter().map(StoredHttpTool::from).collect())
    }

    async fn every_http_tool(&self) -> Result<Vec<StoredHttpTool>> {
        let rows = sqlx::query_as::<_, Row>(&format!(
            "SELECT {COLUMNS} FROM http_tools ORDER BY project COLLATE \"C\", name COLLATE \"C\""
        ))
        .fetch_all(self.pool())
        .await?;
        Ok(rows.into_iter().map(StoredHttpTool::from).collect())
    }

    async fn agent_named(&self, project: &str, name: &str) -> Result<bool> {
        let found: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM agents WHERE project = $1 AND name = $2)")
            .bind(project)
            .bind(name)
            .fetch_one(self.pool())
            .await?;
        Ok(found)
    }
}
