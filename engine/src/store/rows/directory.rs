//! Rows of the identity tables (users, API keys) and their model types.

use crate::model::{ApiKey, Role, User};
use crate::store::from_ms;

#[derive(sqlx::FromRow)]
pub(crate) struct UserRow {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) password_hash: String,
    pub(crate) instance_admin: bool,
    pub(crate) created_at: i64,
}

impl UserRow {
    pub(crate) fn split(self) -> (User, String) {
        let user = User {
            id: self.id,
            name: self.name,
            instance_admin: self.instance_admin,
            created_at: from_ms(self.created_at),
        };
        (user, self.password_hash)
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct KeyRow {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) prefix: String,
    pub(crate) project: Option<String>,
    pub(crate) role: String,
    pub(crate) created_at: i64,
    pub(crate) created_by: Option<String>,
    pub(crate) last_used_at: Option<i64>,
    pub(crate) revoked_at: Option<i64>,
}

impl From<KeyRow> for ApiKey {
    fn from(r: KeyRow) -> ApiKey {
        ApiKey {
            id: r.id,
            name: r.name,
            prefix: r.prefix,
            project: r.project,
            // An unknown stored role grants the least.
            role: Role::parse(&r.role).unwrap_or(Role::Viewer),
            created_at: from_ms(r.created_at),
            created_by: r.created_by,
            last_used_at: r.last_used_at.map(from_ms),
            revoked_at: r.revoked_at.map(from_ms),
        }
    }
}

pub(crate) const KEY_COLUMNS: &str =
    "id, name, prefix, project, role, created_at, created_by, last_used_at, revoked_at";

#[derive(sqlx::FromRow)]
pub(crate) struct AuditRow {
    pub(crate) seq: i64,
    pub(crate) project: Option<String>,
    pub(crate) at: i64,
    pub(crate) actor_id: String,
    pub(crate) actor_name: String,
    pub(crate) action: String,
    pub(crate) target: Option<String>,
    pub(crate) detail: Option<String>,
}

pub(crate) fn limit(n: u32) -> i64 {
    n.clamp(1, 1000) as i64
}
