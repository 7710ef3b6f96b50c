//! [`SignInStore`] for every backend (the statements in `store::sign_ins`).

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};

use super::{sql, with_db, SqlStore};
use crate::error::Result;
use crate::store::sign_ins::{CLEAR, FORGET_PASSED, GIVE_BACK, TAKE};
use crate::store::SignInStore;

#[async_trait]
impl<S: SqlStore> SignInStore for S {
    async fn take_sign_in_attempt(
        &self,
        subject: &str,
        max: u32,
        now: DateTime<Utc>,
        window: Duration,
    ) -> Result<bool> {
        let cutoff = (now - window).timestamp_millis();
        let taken: Option<i64> = with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(D, FORGET_PASSED)).bind(cutoff).execute(pool).await?;
            sqlx::query_scalar(sql!(D, TAKE))
                .bind(subject)
                .bind(now.timestamp_millis())
                .bind(cutoff)
                .bind(cutoff)
                .bind(cutoff)
                .bind(i64::from(max))
                .fetch_optional(pool)
                .await?
        });
        Ok(taken.is_some())
    }

    async fn return_sign_in_attempt(&self, subject: &str) -> Result<()> {
        with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(D, GIVE_BACK)).bind(subject).execute(pool).await?;
        });
        Ok(())
    }

    async fn clear_sign_in_attempts(&self, subject: &str) -> Result<()> {
        with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(D, CLEAR)).bind(subject).execute(pool).await?;
        });
        Ok(())
    }
}
