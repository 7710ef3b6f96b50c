//! [`Directory`] on PostgreSQL: projects, users, memberships, API keys,
//! sessions (their data JSONB), the setup token and the audit log.
//!
//! Two servers may act at once: creating the first user and replacing the
//! setup token take a transaction-scoped advisory lock, so they stay as
//! serialized as SQLite's single writer made them; taking the setup token is
//! one conditional `DELETE`, which only one of two concurrent takers can win.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::PgStore;
use crate::error::Result;
use crate::model::{Actor, ApiKey, AuditEntry, Member, Project, Role, User};
use crate::store::directory::{Directory, UserInsert};
use crate::store::{from_ms, to_ms};

use crate::store::rows::directory::*;

/// Serializes every insert into `users`, so "only while there is no user"
/// is checked against every committed user.
const USERS_LOCK: &str = "SELECT pg_advisory_xact_lock(hashtext('runlens.users.insert'))";

/// Serializes replacing the setup token, so at most one is ever stored.
const SETUP_TOKEN_LOCK: &str = "SELECT pg_advisory_xact_lock(hashtext('runlens.setup_tokens.put'))";

const USER_COLUMNS: &str = "id, name, password_hash, instance_admin, created_at";

#[async_trait]
impl Directory for PgStore {
    async fn create_project(&self, name: &str, at: DateTime<Utc>) -> Result<bool> {
        let mut tx = self.pool().begin().await?;
        let n = sqlx::query("INSERT INTO projects (name, created_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING")
            .bind(name)
            .bind(to_ms(at))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n == 1 {
            sqlx::query(
                "INSERT INTO project_prices
                    (project, model, input, output, cache_read, cache_write, reasoning, updated_at)
                 VALUES ($1, 'builtin', 0, 0, 0, 0, 0, 0)
                 ON CONFLICT (project, model) DO NOTHING",
            )
            .bind(name)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(n == 1)
    }

    async fn project(&self, name: &str) -> Result<Option<Project>> {
        let row: Option<(String, i64)> = sqlx::query_as("SELECT name, created_at FROM projects WHERE name = $1")
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(|(name, at)| Project { name, created_at: from_ms(at) }))
    }

    async fn projects(&self, after: Option<&str>, offset: u32, n: u32) -> Result<Vec<Project>> {
        let rows: Vec<(String, i64)> =
            sqlx::query_as("SELECT name, created_at FROM projects WHERE name > $1 ORDER BY name LIMIT $2 OFFSET $3")
                .bind(after.unwrap_or(""))
                .bind(limit(n))
                .bind(i64::from(offset))
                .fetch_all(self.pool())
                .await?;
        Ok(rows.into_iter().map(|(name, at)| Project { name, created_at: from_ms(at) }).collect())
    }

    async fn user_count(&self) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM users").fetch_one(self.pool()).await?;
        Ok(n as u64)
    }

    async fn insert_user(&self, user: &User, password_hash: &str, only_first: bool) -> Result<UserInsert> {
        // Every insert waits for the others to commit, and each statement
        // after the lock reads a fresh snapshot (READ COMMITTED): "no user
        // yet" sees a first user another server has just created.
        let mut tx = self.pool().begin().await?;
        sqlx::query(USERS_LOCK).execute(&mut *tx).await?;
        let n = sqlx::query(
            "INSERT INTO users (id, name, password_hash, instance_admin, created_at)
             SELECT $1, $2, $3, $4, $5 WHERE NOT $6 OR NOT EXISTS (SELECT 1 FROM users)
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(&user.id)
        .bind(&user.name)
        .bind(password_hash)
        .bind(user.instance_admin)
        .bind(to_ms(user.created_at))
        .bind(only_first)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if n == 1 {
            tx.commit().await?;
            return Ok(UserInsert::Inserted);
        }
        let taken: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM users WHERE name = $1)")
            .bind(&user.name)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(if taken { UserInsert::NameTaken } else { UserInsert::NotFirst })
    }

    async fn user_by_name(&self, name: &str) -> Result<Option<(User, String)>> {
        let row = sqlx::query_as::<_, UserRow>(&format!("SELECT {USER_COLUMNS} FROM users WHERE name = $1"))
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(UserRow::split))
    }

    async fn user_by_id(&self, id: &str) -> Result<Option<User>> {
        let row = sqlx::query_as::<_, UserRow>(&format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(|r| r.split().0))
    }

    async fn set_password(&self, user_id: &str, password_hash: &str) -> Result<bool> {
        let n = sqlx::query("UPDATE users SET password_hash = $1 WHERE id = $2")
            .bind(password_hash)
            .bind(user_id)
            .execute(self.pool())
            .await?
            .rows_affected();
        Ok(n == 1)
    }

    async fn users(&self, after: Option<&str>, offset: u32, n: u32) -> Result<Vec<User>> {
        let rows = sqlx::query_as::<_, UserRow>(&format!(
            "SELECT {USER_COLUMNS} FROM users WHERE name > $1 ORDER BY name LIMIT $2 OFFSET $3"
        ))
        .bind(after.unwrap_or(""))
        .bind(limit(n))
        .bind(i64::from(offset))
        .fetch_all(self.pool())
        .await?;
        Ok(rows.into_iter().map(|r| r.split().0).collect())
    }

    async fn set_member(&self, project: &str, user_id: &str, role: Role) -> Result<()> {
        sqlx::query(
            "INSERT INTO memberships (project, user_id, role) VALUES ($1, $2, $3)
             ON CONFLICT (project, user_id) DO UPDATE SET role = EXCLUDED.role",
        )
        .bind(project)
        .bind(user_id)
        .bind(role.as_str())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    async fn remove_member(&self, project: &str, user_id: &str) -> Result<bool> {
        let n = sqlx::query("DELETE FROM memberships WHERE project = $1 AND user_id = $2")
            .bind(project)
            .bind(user_id)
            .execute(self.pool())
            .await?
            .rows_affected();
        Ok(n == 1)
    }

    async fn members(&self, project: &str, after: Option<&str>, offset: u32, n: u32) -> Result<Vec<Member>> {
        let rows: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT u.id, u.name, m.role FROM memberships m JOIN users u ON u.id = m.user_id
             WHERE m.project = $1 AND u.name > $2 ORDER BY u.name LIMIT $3 OFFSET $4",
        )
        .bind(project)
        .bind(after.unwrap_or(""))
        .bind(limit(n))
        .bind(i64::from(offset))
        .fetch_all(self.pool())
        .await?;
        Ok(rows
            .into_iter()
            .map(|(user_id, user_name, role)| Member {
                user_id,
                user_name,
                role: Role::parse(&role).unwrap_or(Role::Viewer),
            })
            .collect())
    }

    async fn roles_of(&self, user_id: &str) -> Result<Vec<(String, Role)>> {
        let rows: Vec<(String, String)> =
            sqlx::query_as("SELECT project, role FROM memberships WHERE user_id = $1 ORDER BY project")
                .bind(user_id)
                .fetch_all(self.pool())
                .await?;
        Ok(rows.into_iter().map(|(p, r)| (p, Role::parse(&r).unwrap_or(Role::Viewer))).collect())
    }

    async fn insert_key(&self, key: &ApiKey, hash: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO api_keys (id, name, hash, prefix, project, role, created_at, created_by, last_used_at,
                revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&key.id)
        .bind(&key.name)
        .bind(hash)
        .bind(&key.prefix)
        .bind(&key.project)
        .bind(key.role.as_str())
        .bind(to_ms(key.created_at))
        .bind(&key.created_by)
        .bind(key.last_used_at.map(to_ms))
        .bind(key.revoked_at.map(to_ms))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>> {
        let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE hash = $1");
        let row = sqlx::query_as::<_, KeyRow>(&sql).bind(hash).fetch_optional(self.pool()).await?;
        Ok(row.map(ApiKey::from))
    }

    async fn key(&self, id: &str) -> Result<Option<ApiKey>> {
        let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = $1");
        let row = sqlx::query_as::<_, KeyRow>(&sql).bind(id).fetch_optional(self.pool()).await?;
        Ok(row.map(ApiKey::from))
    }

    async fn touch_key(&self, id: &str, at: DateTime<Utc>) -> Result<()> {
        sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2")
            .bind(to_ms(at))
            .bind(id)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> Result<bool> {
        let n = sqlx::query("UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
            .bind(to_ms(at))
            .bind(id)
            .execute(self.pool())
            .await?
            .rows_affected();
        Ok(n == 1)
    }

    async fn keys(&self, project: Option<&str>, before: Option<&str>, offset: u32, n: u32) -> Result<Vec<ApiKey>> {
        // Key ids are time-ordered (UUIDv7), so "newest first" is by id.
        let sql = format!(
            "SELECT {KEY_COLUMNS} FROM api_keys
             WHERE ($1::text IS NULL OR project = $1) AND ($2::text IS NULL OR id < $2)
             ORDER BY id DESC LIMIT $3 OFFSET $4"
        );
        let rows = sqlx::query_as::<_, KeyRow>(&sql)
            .bind(project)
            .bind(before)
            .bind(limit(n))
            .bind(i64::from(offset))
            .fetch_all(self.pool())
            .await?;
        Ok(rows.into_iter().map(ApiKey::from).collect())
    }

    async fn create_session(&self, id: &str, data: &str, expires_at: DateTime<Utc>) -> Result<bool> {
        let n = sqlx::query(
            "INSERT INTO sessions (id, data, expires_at) VALUES ($1, $2::jsonb, $3) ON CONFLICT (id) DO NOTHING",
        )
        .bind(id)
        .bind(data)
        .bind(to_ms(expires_at))
        .execute(self.pool())
        .await?
        .rows_affected();
        Ok(n == 1)
    }

    async fn save_session(&self, id: &str, data: &str, expires_at: DateTime<Utc>) -> Result<()> {
        sqlx::query(
            "INSERT INTO sessions (id, data, expires_at) VALUES ($1, $2::jsonb, $3)
             ON CONFLICT (id) DO UPDATE SET data = EXCLUDED.data, expires_at = EXCLUDED.expires_at",
        )
        .bind(id)
        .bind(data)
        .bind(to_ms(expires_at))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    async fn load_session(&self, id: &str, now: DateTime<Utc>) -> Result<Option<String>> {
        let row: Option<(String, i64)> = sqlx::query_as("SELECT data::text, expires_at FROM sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        match row {
            Some((data, expires)) if expires > to_ms(now) => Ok(Some(data)),
            Some(_) => {
                sqlx::query("DELETE FROM sessions WHERE expires_at <= $1")
                    .bind(to_ms(now))
                    .execute(self.pool())
                    .await?;
                Ok(None)
            }
            None => Ok(None),
        }
    }

    async fn delete_session(&self, id: &str) -> Result<()> {
        sqlx::query("DELETE FROM sessions WHERE id = $1").bind(id).execute(self.pool()).await?;
        Ok(())
    }

    async fn delete_sessions_of(&self, user_id: &str) -> Result<u64> {
        let n = sqlx::query("DELETE FROM sessions WHERE data -> 'data' ->> 'user_id' = $1")
            .bind(user_id)
            .execute(self.pool())
            .await?
            .rows_affected();
        Ok(n)
    }

    async fn put_setup_token(&self, hash: &str, expires_at: DateTime<Utc>) -> Result<()> {
        // Without the lock, two servers replacing the token at once would
        // each delete the old one and both insert theirs.
        let mut tx = self.pool().begin().await?;
        sqlx::query(SETUP_TOKEN_LOCK).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM setup_tokens").execute(&mut *tx).await?;
        sqlx::query("INSERT INTO setup_tokens (hash, expires_at) VALUES ($1, $2)")
            .bind(hash)
            .bind(to_ms(expires_at))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn take_setup_token(&self, hash: &str, now: DateTime<Utc>) -> Result<bool> {
        // A second concurrent taker blocks on the row the first deletes, then
        // finds it gone: exactly one sees a row deleted.
        let n = sqlx::query("DELETE FROM setup_tokens WHERE hash = $1 AND expires_at > $2")
            .bind(hash)
            .bind(to_ms(now))
            .execute(self.pool())
            .await?
            .rows_affected();
        Ok(n == 1)
    }

    async fn setup_token_valid(&self, hash: &str, now: DateTime<Utc>) -> Result<bool> {
        let valid: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM setup_tokens WHERE hash = $1 AND expires_at > $2)")
                .bind(hash)
                .bind(to_ms(now))
                .fetch_one(self.pool())
                .await?;
        Ok(valid)
    }

    async fn append_audit(&self, e: &AuditEntry) -> Result<()> {
        sqlx::query(
            "INSERT INTO audit_log (project, at, actor_id, actor_name, action, target, detail)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&e.project)
        .bind(to_ms(e.at))
        .bind(&e.actor.id)
        .bind(&e.actor.name)
        .bind(&e.action)
        .bind(&e.target)
        .bind(&e.detail)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    async fn audit(&self, project: Option<&str>, before: Option<i64>, offset: u32, n: u32) -> Result<Vec<AuditEntry>> {
        let rows = sqlx::query_as::<_, AuditRow>(
            "SELECT seq, project, at, actor_id, actor_name, action, target, detail FROM audit_log
             WHERE ($1::text IS NULL OR project = $1
                    OR (project IS NULL AND actor_id IN
                        (SELECT 'user:' || user_id FROM memberships WHERE project = $1)))
               AND ($2::bigint IS NULL OR seq < $2)
             ORDER BY seq DESC LIMIT $3 OFFSET $4",
        )
        .bind(project)
        .bind(before)
        .bind(limit(n))
        .bind(i64::from(offset))
        .fetch_all(self.pool())
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| AuditEntry {
                seq: r.seq,
                project: r.project,
                at: from_ms(r.at),
                actor: Actor { id: r.actor_id, name: r.actor_name },
                action: r.action,
                target: r.target,
                detail: r.detail,
            })
            .collect())
    }
}
