//! [`SecretStore`] for every backend (the statements in `store::secrets`).

use async_trait::async_trait;

use super::{sql, with_db, SqlStore};
use crate::error::Result;
use crate::store::secrets::{KEEP_FIRST, READ};
use crate::store::SecretStore;

#[async_trait]
impl<S: SqlStore> SecretStore for S {
    async fn server_secret(&self, name: &str, fresh: &str) -> Result<String> {
        let value: String = with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(D, KEEP_FIRST)).bind(name).bind(fresh).execute(pool).await?;
            sqlx::query_scalar(sql!(D, READ)).bind(name).fetch_one(pool).await?
        });
        Ok(value)
    }
}
