//! Grants: what lets a tool call that needs approval run (see
//! `migrations/sqlite/0020_grants.sql` and the runner's gate).
//!
//! Rows are written in the transaction of an approve decision only (each
//! backend's `decide`), and a follow-up ends a run's "always" grants in its
//! own transaction. The statements are written once for every database
//! (see `sql/grants.rs`).
//!
//! [`role_in`] says what role an actor holds in a project *now*, from the
//! directory: the decision path checks it before writing a grant, and the
//! gate checks it again before a grant is used, so a revoked key or a
//! demoted member grants nothing from then on.

use async_trait::async_trait;

use super::{from_ms, Directory};
use crate::error::Result;
use crate::model::{Grant, GrantScope, Role};

#[async_trait]
pub trait GrantStore: Send + Sync {
    /// The grant that covers call `call_id` of tool `tool` in run `run_id`:
    /// the call's own (`call` scope) when there is one, else a `run` grant
    /// of the tool not ended; the call's own wins so its arguments are checked.
    async fn grant_for(&self, run_id: &str, call_id: &str, tool: &str) -> Result<Option<Grant>>;
    /// Every grant of the run, oldest first (at most [`MAX_RUN_GRANTS`]).
    async fn grants(&self, run_id: &str) -> Result<Vec<Grant>>;
}

/// Grants one read lists; a run has one per approved call at most.
pub const MAX_RUN_GRANTS: i64 = 10_000;

#[derive(sqlx::FromRow)]
pub(crate) struct GrantRow {
    pub run_id: String,
    pub call_id: String,
    pub tool_name: String,
    pub scope: String,
    pub arguments: String,
    pub grantor_id: String,
    pub grantor_name: String,
    pub grantor_role: String,
    pub granted_at: i64,
    pub ended_at: Option<i64>,
}

impl GrantRow {
    /// `None` for a row the gate must not trust (an unknown scope or role,
    /// or arguments that are not JSON).
    pub(crate) fn into_grant(self) -> Option<Grant> {
        Some(Grant {
            scope: GrantScope::parse(&self.scope)?,
            arguments: serde_json::from_str(&self.arguments).ok()?,
            grantor_role: Role::parse(&self.grantor_role)?,
            run_id: self.run_id,
            call_id: self.call_id,
            tool_name: self.tool_name,
            grantor_id: self.grantor_id,
            grantor_name: self.grantor_name,
            granted_at: from_ms(self.granted_at),
            ended_at: self.ended_at.map(from_ms),
        })
    }
}

/// The call's own grant first, then a live `run` grant of its tool.
pub(crate) const GRANT_FOR: &str = "SELECT run_id, call_id, tool_name, scope, arguments, grantor_id, grantor_name,
        grantor_role, granted_at, ended_at
     FROM grants
     WHERE run_id = ? AND ((call_id = ? AND scope = 'call') OR (tool_name = ? AND scope = 'run' AND ended_at IS NULL))
     ORDER BY CASE scope WHEN 'call' THEN 0 ELSE 1 END, granted_at
     LIMIT 1";

pub(crate) const RUN_GRANTS: &str = "SELECT run_id, call_id, tool_name, scope, arguments, grantor_id, grantor_name,
        grantor_role, granted_at, ended_at
     FROM grants WHERE run_id = ? ORDER BY granted_at, call_id LIMIT ?";

/// Ends a run's "always" grants: `ended_at`, `run_id`.
pub(crate) const END_RUN_GRANTS: &str =
    "UPDATE grants SET ended_at = ? WHERE run_id = ? AND scope = 'run' AND ended_at IS NULL";

/// Writes a grant (every column but `ended_at`). A second
/// decision on one call is refused before this (the call's compare-and-set).
pub(crate) const INSERT_GRANT: &str = "INSERT INTO grants (run_id, call_id, tool_name, scope, arguments, grantor_id,
        grantor_name, grantor_role, granted_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";

/// The role actor `actor_id` (`user:<id>` or `key:<id>`) holds in `project`
/// now: an instance admin is admin everywhere; a key has its role in its
/// project (every project for an instance-admin key) unless revoked; a user
/// has the role of their membership. `None` for anyone else (the engine
/// itself, an unknown or revoked actor).
pub async fn role_in(directory: &dyn Directory, actor_id: &str, project: &str) -> Result<Option<Role>> {
    match actor_id.split_once(':') {
        Some(("user", id)) => {
            let Some(user) = directory.user_by_id(id).await? else { return Ok(None) };
            if user.instance_admin {
                return Ok(Some(Role::Admin));
            }
            let roles = directory.roles_of(id).await?;
            Ok(roles.into_iter().find(|(p, _)| p == project).map(|(_, role)| role))
        }
        Some(("key", id)) => {
            let Some(key) = directory.key(id).await? else { return Ok(None) };
            if key.revoked_at.is_some() {
                return Ok(None);
            }
            Ok(match &key.project {
                None => Some(key.role),
                Some(p) if p == project => Some(key.role),
                Some(_) => None,
            })
        }
        _ => Ok(None),
    }
}
