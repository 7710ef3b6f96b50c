//! [`SessionStore`] for every backend. Two servers may act at once
//! (PostgreSQL): replacing the setup token takes turns
//! ([`Dialect::serialize`]); taking it is one conditional `DELETE`, which
//! only one of two concurrent takers can win. Every transaction's first
//! statement writes (see `store::sqlite`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{sql, with_db, Dialect, SqlStore};
use crate::error::Result;
use crate::store::{to_ms, SessionStore};

/// Serializes replacing the setup token, so at most one is ever stored.
const SETUP_TOKEN_LOCK: &str = "runlens.setup_tokens.put";

#[async_trait]
impl<S: SqlStore> SessionStore for S {
    async fn create_session(&self, id: &str, data: &str, expires_at: DateTime<Utc>) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let n = sqlx::query(sql!(
                D,
                "INSERT INTO sessions (id, data, expires_at) VALUES (?, ?::jsonb, ?) ON CONFLICT (id) DO NOTHING"
            ))
            .bind(id)
            .bind(data)
            .bind(to_ms(expires_at))
            .execute(pool)
            .await?
            .rows_affected();
            Ok(n == 1)
        })
    }

    async fn save_session(&self, id: &str, data: &str, expires_at: DateTime<Utc>) -> Result<()> {
        with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(
                D,
                "INSERT INTO sessions (id, data, expires_at) VALUES (?, ?::jsonb, ?)
                 ON CONFLICT (id) DO UPDATE SET data = EXCLUDED.data, expires_at = EXCLUDED.expires_at"
            ))
            .bind(id)
            .bind(data)
            .bind(to_ms(expires_at))
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    async fn load_session(&self, id: &str, now: DateTime<Utc>) -> Result<Option<String>> {
        with_db!(self.db(), |pool, D| {
            let row: Option<(String, i64)> =
                sqlx::query_as(sql!(D, "SELECT data::text, expires_at FROM sessions WHERE id = ?"))
                    .bind(id)
                    .fetch_optional(pool)
                    .await?;
            match row {
                Some((data, expires)) if expires > to_ms(now) => Ok(Some(data)),
                Some(_) => {
                    sqlx::query(sql!(D, "DELETE FROM sessions WHERE expires_at <= ?"))
                        .bind(to_ms(now))
                        .execute(pool)
                        .await?;
                    Ok(None)
                }
                None => Ok(None),
            }
        })
    }

    async fn delete_session(&self, id: &str) -> Result<()> {
        with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(D, "DELETE FROM sessions WHERE id = ?")).bind(id).execute(pool).await?;
            Ok(())
        })
    }

    async fn delete_sessions_of(&self, user_id: &str) -> Result<u64> {
        with_db!(self.db(), |pool, D| {
            let n = sqlx::query(sql!(
                D,
                format!("DELETE FROM sessions WHERE {} = ?", D::json_text("data", &["data", "user_id"]))
            ))
            .bind(user_id)
            .execute(pool)
            .await?
            .rows_affected();
            Ok(n)
        })
    }

    async fn put_setup_token(&self, hash: &str, expires_at: DateTime<Utc>) -> Result<()> {
        with_db!(self.db(), |pool, D| {
            // Without the lock, two servers replacing the token at once would
            // each delete the old one and both insert theirs.
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            D::serialize(&mut tx, SETUP_TOKEN_LOCK).await?;
            sqlx::query(sql!(D, "DELETE FROM setup_tokens")).execute(&mut *tx).await?;
            sqlx::query(sql!(D, "INSERT INTO setup_tokens (hash, expires_at) VALUES (?, ?)"))
                .bind(hash)
                .bind(to_ms(expires_at))
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    async fn take_setup_token(&self, hash: &str, now: DateTime<Utc>) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            // A second concurrent taker blocks on the row the first deletes, then
            // finds it gone: exactly one sees a row deleted.
            let n = sqlx::query(sql!(D, "DELETE FROM setup_tokens WHERE hash = ? AND expires_at > ?"))
                .bind(hash)
                .bind(to_ms(now))
                .execute(pool)
                .await?
                .rows_affected();
            Ok(n == 1)
        })
    }

    async fn setup_token_valid(&self, hash: &str, now: DateTime<Utc>) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let valid: bool = sqlx::query_scalar(sql!(
                D,
                "SELECT EXISTS (SELECT 1 FROM setup_tokens WHERE hash = ? AND expires_at > ?)"
            ))
            .bind(hash)
            .bind(to_ms(now))
            .fetch_one(pool)
            .await?;
            Ok(valid)
        })
    }
}
