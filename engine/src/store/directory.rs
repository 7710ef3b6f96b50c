//! The identity half of the store: projects, users, memberships, API keys,
//! the audit log, and as parts of every directory the browser sessions and
//! the one-time setup token ([`SessionStore`]) and sign-in attempts
//! ([`SignInStore`]). Secrets are never
//! stored: passwords as argon2id hashes, keys and tokens as SHA-256 digests
//! (see `crate::identity`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::model::{ApiKey, AuditEntry, Member, Project, Role, User};
use crate::store::{SessionStore, SignInStore};

/// What [`Directory::insert_user`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum UserInsert {
    Inserted,
    NameTaken,
    /// `only_first` was set and a user already exists.
    NotFirst,
}

#[async_trait]
pub trait Directory: SignInStore + SessionStore + Send + Sync {
    /// `false` when the name is taken. A new project gets the built-in
    /// model's (zero) price.
    async fn create_project(&self, name: &str, at: DateTime<Utc>) -> Result<bool>;
    async fn project(&self, name: &str) -> Result<Option<Project>>;
    /// Projects by name after `after`, skipping `offset`, at most `limit`.
    async fn projects(&self, after: Option<&str>, offset: u32, limit: u32) -> Result<Vec<Project>>;

    async fn user_count(&self) -> Result<u64>;
    /// Inserts a user; with `only_first`, only while there is no user at all
    /// (the setup link), checked in the same transaction.
    async fn insert_user(&self, user: &User, password_hash: &str, only_first: bool) -> Result<UserInsert>;
    /// The user and their password hash.
    async fn user_by_name(&self, name: &str) -> Result<Option<(User, String)>>;
    async fn user_by_id(&self, id: &str) -> Result<Option<User>>;
    /// `false` when there is no such user.
    async fn set_password(&self, user_id: &str, password_hash: &str) -> Result<bool>;
    /// Users by name after `after`, skipping `offset`, at most `limit`.
    async fn users(&self, after: Option<&str>, offset: u32, limit: u32) -> Result<Vec<User>>;

    async fn set_member(&self, project: &str, user_id: &str, role: Role) -> Result<()>;
    async fn remove_member(&self, project: &str, user_id: &str) -> Result<bool>;
    /// Members of a project by user name after `after`, skipping `offset`,
    /// at most `limit`.
    async fn members(&self, project: &str, after: Option<&str>, offset: u32, limit: u32) -> Result<Vec<Member>>;
    /// A user's role in every project they belong to.
    async fn roles_of(&self, user_id: &str) -> Result<Vec<(String, Role)>>;

    async fn insert_key(&self, key: &ApiKey, hash: &str) -> Result<()>;
    /// The key with this digest, revoked or not.
    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>>;
    async fn key(&self, id: &str) -> Result<Option<ApiKey>>;
    async fn touch_key(&self, id: &str, at: DateTime<Utc>) -> Result<()>;
    /// Revokes a key not yet revoked; `false` when there is no such live key.
    async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> Result<bool>;
    /// Keys of a project (or every key, with `None`), newest first, created
    /// before the key `before` when given, skipping `offset`, at most `limit`.
    async fn keys(&self, project: Option<&str>, before: Option<&str>, offset: u32, limit: u32) -> Result<Vec<ApiKey>>;

    async fn append_audit(&self, entry: &AuditEntry) -> Result<()>;
    /// A project's entries plus the instance-wide ones (`project` null:
    /// sign-ins, sign-outs, users) made by the project's members — another
    /// project's people signing in are not this project's business; failed
    /// sign-ins are instance-wide only. With `None`, every entry. Newest
    /// first, with `seq < before` when given, skipping `offset`, at most
    /// `limit`.
    async fn audit(
        &self,
        project: Option<&str>,
        before: Option<i64>,
        offset: u32,
        limit: u32,
    ) -> Result<Vec<AuditEntry>>;
}
