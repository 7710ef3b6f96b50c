//! [`GrantStore`] for every backend (the statements in `store::grants`).

use async_trait::async_trait;

use super::{sql, with_db, SqlStore};
use crate::error::Result;
use crate::model::Grant;
use crate::store::grants::{GrantRow, GRANT_FOR, MAX_RUN_GRANTS, RUN_GRANTS};
use crate::store::GrantStore;

#[async_trait]
impl<S: SqlStore> GrantStore for S {
    async fn grant_for(&self, run_id: &str, call_id: &str, tool: &str) -> Result<Option<Grant>> {
        let row = with_db!(self.db(), |pool, D| {
            sqlx::query_as::<_, GrantRow>(sql!(D, GRANT_FOR))
                .bind(run_id)
                .bind(call_id)
                .bind(tool)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.and_then(GrantRow::into_grant))
    }

    async fn grants(&self, run_id: &str) -> Result<Vec<Grant>> {
        let rows = with_db!(self.db(), |pool, D| {
            sqlx::query_as::<_, GrantRow>(sql!(D, RUN_GRANTS)).bind(run_id).bind(MAX_RUN_GRANTS).fetch_all(pool).await?
        });
        Ok(rows.into_iter().filter_map(GrantRow::into_grant).collect())
    }
}
