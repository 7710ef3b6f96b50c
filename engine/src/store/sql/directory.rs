//! [`Directory`] for every backend: projects, users, memberships, API keys
//! and the audit log (sessions and the setup token are `sessions.rs`).
//!
//! Two servers may act at once (PostgreSQL): creating the first user takes
//! turns ([`Dialect::serialize`]), as serialized as SQLite's single writer
//! makes it.
//! Every transaction's first statement writes (see `store::sqlite`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{sql, with_db, Db, Dialect, SqlStore};
use crate::error::Result;
use crate::model::{Actor, ApiKey, AuditEntry, Member, Project, Role, User};
use crate::store::directory::{Directory, UserInsert};
use crate::store::{from_ms, to_ms};

use crate::store::rows::directory::*;

/// Serializes every insert into `users`, so "only while there is no user"
/// is checked against every committed user.
const USERS_LOCK: &str = "runlens.users.insert";

const USER_COLUMNS: &str = "id, name, password_hash, instance_admin, created_at";

#[async_trait]
impl<S: SqlStore> Directory for S {
    async fn create_project(&self, name: &str, at: DateTime<Utc>) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            let n = sqlx::query(sql!(
                D,
                "INSERT INTO projects (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING"
            ))
            .bind(name)
            .bind(to_ms(at))
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if n == 1 {
                sqlx::query(sql!(
                    D,
                    "INSERT INTO project_prices
                        (project, model, input, output, cache_read, cache_write, reasoning, updated_at)
                     VALUES (?, 'builtin', 0, 0, 0, 0, 0, 0)
                     ON CONFLICT (project, model) DO NOTHING"
                ))
                .bind(name)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            Ok(n == 1)
        })
    }

    async fn project(&self, name: &str) -> Result<Option<Project>> {
        with_db!(self.db(), |pool, D| {
            let row: Option<(String, i64)> =
                sqlx::query_as(sql!(D, "SELECT name, created_at FROM projects WHERE name = ?"))
                    .bind(name)
                    .fetch_optional(pool)
                    .await?;
            Ok(row.map(|(name, at)| Project { name, created_at: from_ms(at) }))
        })
    }

    async fn projects(&self, after: Option<&str>, offset: u32, n: u32) -> Result<Vec<Project>> {
        with_db!(self.db(), |pool, D| {
            let rows: Vec<(String, i64)> = sqlx::query_as(sql!(
                D,
                "SELECT name, created_at FROM projects WHERE name > ? ORDER BY name LIMIT ? OFFSET ?"
            ))
            .bind(after.unwrap_or(""))
            .bind(limit(n))
            .bind(i64::from(offset))
            .fetch_all(pool)
            .await?;
            Ok(rows.into_iter().map(|(name, at)| Project { name, created_at: from_ms(at) }).collect())
        })
    }

    async fn user_count(&self) -> Result<u64> {
        with_db!(self.db(), |pool, D| {
            let n: i64 = sqlx::query_scalar(sql!(D, "SELECT count(*) FROM users")).fetch_one(pool).await?;
            Ok(n as u64)
        })
    }

    async fn insert_user(&self, user: &User, password_hash: &str, only_first: bool) -> Result<UserInsert> {
        with_db!(self.db(), |pool, D| {
            // Every insert waits for the others to commit, and each statement
            // after the lock reads a fresh snapshot (READ COMMITTED): "no user
            // yet" sees a first user another server has just created.
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            D::serialize(&mut tx, USERS_LOCK).await?;
            let n = sqlx::query(sql!(
                D,
                "INSERT INTO users (id, name, password_hash, instance_admin, created_at)
                 SELECT ?, ?, ?, ?, ? WHERE NOT ? OR NOT EXISTS (SELECT 1 FROM users)
                 ON CONFLICT (name) DO NOTHING"
            ))
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
            let taken: bool = sqlx::query_scalar(sql!(D, "SELECT EXISTS (SELECT 1 FROM users WHERE name = ?)"))
                .bind(&user.name)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(if taken { UserInsert::NameTaken } else { UserInsert::NotFirst })
        })
    }

    async fn user_by_name(&self, name: &str) -> Result<Option<(User, String)>> {
        with_db!(self.db(), |pool, D| {
            let row = sqlx::query_as::<_, UserRow>(sql!(D, format!("SELECT {USER_COLUMNS} FROM users WHERE name = ?")))
                .bind(name)
                .fetch_optional(pool)
                .await?;
            Ok(row.map(UserRow::split))
        })
    }

    async fn user_by_id(&self, id: &str) -> Result<Option<User>> {
        with_db!(self.db(), |pool, D| {
            let row = sqlx::query_as::<_, UserRow>(sql!(D, format!("SELECT {USER_COLUMNS} FROM users WHERE id = ?")))
                .bind(id)
                .fetch_optional(pool)
                .await?;
            Ok(row.map(|r| r.split().0))
        })
    }

    async fn set_password(&self, user_id: &str, password_hash: &str) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let n = sqlx::query(sql!(D, "UPDATE users SET password_hash = ? WHERE id = ?"))
                .bind(password_hash)
                .bind(user_id)
                .execute(pool)
                .await?
                .rows_affected();
            Ok(n == 1)
        })
    }

    async fn users(&self, after: Option<&str>, offset: u32, n: u32) -> Result<Vec<User>> {
        with_db!(self.db(), |pool, D| {
            let rows = sqlx::query_as::<_, UserRow>(sql!(
                D,
                format!("SELECT {USER_COLUMNS} FROM users WHERE name > ? ORDER BY name LIMIT ? OFFSET ?")
            ))
            .bind(after.unwrap_or(""))
            .bind(limit(n))
            .bind(i64::from(offset))
            .fetch_all(pool)
            .await?;
            Ok(rows.into_iter().map(|r| r.split().0).collect())
        })
    }

    async fn set_member(&self, project: &str, user_id: &str, role: Role) -> Result<()> {
        with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(
                D,
                "INSERT INTO memberships (project, user_id, role) VALUES (?, ?, ?)
                 ON CONFLICT (project, user_id) DO UPDATE SET role = EXCLUDED.role"
            ))
            .bind(project)
            .bind(user_id)
            .bind(role.as_str())
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    async fn remove_member(&self, project: &str, user_id: &str) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let n = sqlx::query(sql!(D, "DELETE FROM memberships WHERE project = ? AND user_id = ?"))
                .bind(project)
                .bind(user_id)
                .execute(pool)
                .await?
                .rows_affected();
            Ok(n == 1)
        })
    }

    async fn members(&self, project: &str, after: Option<&str>, offset: u32, n: u32) -> Result<Vec<Member>> {
        with_db!(self.db(), |pool, D| {
            let rows: Vec<(String, String, String)> = sqlx::query_as(sql!(
                D,
                "SELECT u.id, u.name, m.role FROM memberships m JOIN users u ON u.id = m.user_id
                 WHERE m.project = ? AND u.name > ? ORDER BY u.name LIMIT ? OFFSET ?"
            ))
            .bind(project)
            .bind(after.unwrap_or(""))
            .bind(limit(n))
            .bind(i64::from(offset))
            .fetch_all(pool)
            .await?;
            Ok(rows
                .into_iter()
                .map(|(user_id, user_name, role)| Member {
                    user_id,
                    user_name,
                    role: Role::parse(&role).unwrap_or(Role::Viewer),
                })
                .collect())
        })
    }

    async fn roles_of(&self, user_id: &str) -> Result<Vec<(String, Role)>> {
        with_db!(self.db(), |pool, D| {
            let rows: Vec<(String, String)> =
                sqlx::query_as(sql!(D, "SELECT project, role FROM memberships WHERE user_id = ? ORDER BY project"))
                    .bind(user_id)
                    .fetch_all(pool)
                    .await?;
            Ok(rows.into_iter().map(|(p, r)| (p, Role::parse(&r).unwrap_or(Role::Viewer))).collect())
        })
    }

    async fn insert_key(&self, key: &ApiKey, hash: &str) -> Result<()> {
        with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(
                D,
                "INSERT INTO api_keys (id, name, hash, prefix, project, role, created_at, created_by, last_used_at,
                    revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ))
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
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>> {
        with_db!(self.db(), |pool, D| {
            let sql = sql!(D, format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE hash = ?"));
            let row = sqlx::query_as::<_, KeyRow>(sql).bind(hash).fetch_optional(pool).await?;
            Ok(row.map(ApiKey::from))
        })
    }

    async fn key(&self, id: &str) -> Result<Option<ApiKey>> {
        with_db!(self.db(), |pool, D| {
            let sql = sql!(D, format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = ?"));
            let row = sqlx::query_as::<_, KeyRow>(sql).bind(id).fetch_optional(pool).await?;
            Ok(row.map(ApiKey::from))
        })
    }

    async fn touch_key(&self, id: &str, at: DateTime<Utc>) -> Result<()> {
        with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(D, "UPDATE api_keys SET last_used_at = ? WHERE id = ?"))
                .bind(to_ms(at))
                .bind(id)
                .execute(pool)
                .await?;
            Ok(())
        })
    }

    async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let n = sqlx::query(sql!(D, "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL"))
                .bind(to_ms(at))
                .bind(id)
                .execute(pool)
                .await?
                .rows_affected();
            Ok(n == 1)
        })
    }

    async fn keys(&self, project: Option<&str>, before: Option<&str>, offset: u32, n: u32) -> Result<Vec<ApiKey>> {
        with_db!(self.db(), |pool, D| {
            // Key ids are time-ordered (UUIDv7), so "newest first" is by id.
            let sql = sql!(
                D,
                format!(
                    "SELECT {KEY_COLUMNS} FROM api_keys
                 WHERE (?1::text IS NULL OR project = ?1) AND (?2::text IS NULL OR id < ?2)
                 ORDER BY id DESC LIMIT ?3 OFFSET ?4"
                )
            );
            let rows = sqlx::query_as::<_, KeyRow>(sql)
                .bind(project)
                .bind(before)
                .bind(limit(n))
                .bind(i64::from(offset))
                .fetch_all(pool)
                .await?;
            Ok(rows.into_iter().map(ApiKey::from).collect())
        })
    }

    async fn append_audit(&self, e: &AuditEntry) -> Result<()> {
        const INSERT: &str = "INSERT INTO audit_log (project, at, actor_id, actor_name, action, target, detail)
             VALUES (?, ?, ?, ?, ?, ?, ?)";
        if let Db::Sqlite(store) = self.db() {
            // On the write thread: an audit row often lands beside a run's
            // own writes (a decision), which it would otherwise wait on the
            // lock for.
            use rusqlite::types::Value;
            let text = |t: &Option<String>| t.clone().map_or(Value::Null, Value::Text);
            let row = vec![
                text(&e.project),
                Value::Integer(to_ms(e.at)),
                Value::Text(e.actor.id.clone()),
                Value::Text(e.actor.name.clone()),
                Value::Text(e.action.clone()),
                text(&e.target),
                text(&e.detail),
            ];
            return store.execute_on_thread(INSERT, row).await;
        }
        with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(D, INSERT))
                .bind(&e.project)
                .bind(to_ms(e.at))
                .bind(&e.actor.id)
                .bind(&e.actor.name)
                .bind(&e.action)
                .bind(&e.target)
                .bind(&e.detail)
                .execute(pool)
                .await?;
            Ok(())
        })
    }

    async fn audit(&self, project: Option<&str>, before: Option<i64>, offset: u32, n: u32) -> Result<Vec<AuditEntry>> {
        with_db!(self.db(), |pool, D| {
            let rows = sqlx::query_as::<_, AuditRow>(sql!(
                D,
                "SELECT seq, project, at, actor_id, actor_name, action, target, detail FROM audit_log
                 WHERE (?1::text IS NULL OR project = ?1
                        OR (project IS NULL AND actor_id IN
                            (SELECT 'user:' || user_id FROM memberships WHERE project = ?1)))
                   AND (?2::bigint IS NULL OR seq < ?2)
                 ORDER BY seq DESC LIMIT ?3 OFFSET ?4"
            ))
            .bind(project)
            .bind(before)
            .bind(limit(n))
            .bind(i64::from(offset))
            .fetch_all(pool)
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
        })
    }
}
