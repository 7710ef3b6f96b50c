//! Who may do what: projects, the four roles, users, API keys, the actor
//! recorded on runs and decisions, and the audit log.
//!
//! Roles are ordered: each one may do everything the one before it may.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The project every instance has, and where runs stored before projects
/// existed belong.
pub const DEFAULT_PROJECT: &str = "default";

/// A role in one project.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Role {
    /// Reads everything of the project.
    Viewer,
    /// Also starts, cancels, follows up, edits (forks) and imports runs.
    Operator,
    /// Also approves and rejects tool calls.
    Approver,
    /// Also manages members, keys, prices and the project's settings.
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Operator, Role::Approver, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Approver => "approver",
            Role::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == text)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who did something: a user (`user:<id>`) or an API key (`key:<id>`), with
/// the name shown for it (the user's name; the key's name).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Actor {
    pub id: String,
    pub name: String,
}

impl Actor {
    /// The engine itself (timeouts, recovery).
    pub fn system() -> Actor {
        Actor { id: "system".into(), name: "runlens".into() }
    }

    /// `user` or `key` (or `system`).
    pub fn kind(&self) -> &str {
        self.id.split_once(':').map_or(self.id.as_str(), |(kind, _)| kind)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Project {
    pub name: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct User {
    pub id: String,
    pub name: String,
    /// Admin of every project; may create projects and users.
    pub instance_admin: bool,
    pub created_at: DateTime<Utc>,
}

/// A user's role in a project.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Member {
    pub user_id: String,
    pub user_name: String,
    pub role: Role,
}

/// An API key as listed: never its secret, which is shown once at creation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApiKey {
    pub id: String,
    pub name: String,
    /// The first characters of the secret (`rl_abcd…`), to tell keys apart.
    pub prefix: String,
    /// `null` for an instance-admin key (every project).
    pub project: Option<String>,
    pub role: Role,
    pub created_at: DateTime<Utc>,
    /// The name of who created it.
    pub created_by: Option<String>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// One line of a project's audit log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditEntry {
    /// Increasing; the paging cursor.
    pub seq: i64,
    /// `null` for instance-wide entries (sign-ins, users, projects).
    pub project: Option<String>,
    pub at: DateTime<Utc>,
    pub actor: Actor,
    /// `sign_in`, `sign_in_failed`, `sign_out`, `key_created`, `key_revoked`,
    /// `approved`, `rejected`, `cancelled`, `imported`, `run_created`,
    /// `member_set`, `member_removed`, `project_created`, `user_created`,
    /// `password_reset`, `price_set`, `price_deleted`, `retention_set`,
    /// `runs_pruned` (a retention pass, by `system`).
    pub action: String,
    /// What it was done to: a run, a call, a key, a user.
    pub target: Option<String>,
    pub detail: Option<String>,
}
