//! Browser sessions (their data JSON, with an expiry) and the one-time setup
//! token that creates the first admin: a part of every directory
//! ([`Directory`](crate::store::Directory)), written once for both databases
//! (`sql/sessions.rs`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::Result;

#[async_trait]
pub trait SessionStore: Send + Sync {
    /// `false` when the id is taken.
    async fn create_session(&self, id: &str, data: &str, expires_at: DateTime<Utc>) -> Result<bool>;
    async fn save_session(&self, id: &str, data: &str, expires_at: DateTime<Utc>) -> Result<()>;
    /// The session's data unless it has expired (expired ones are deleted).
    async fn load_session(&self, id: &str, now: DateTime<Utc>) -> Result<Option<String>>;
    async fn delete_session(&self, id: &str) -> Result<()>;
    /// Ends every session whose data mentions the user (a password reset).
    async fn delete_sessions_of(&self, user_id: &str) -> Result<u64>;

    /// Replaces any earlier setup token.
    async fn put_setup_token(&self, hash: &str, expires_at: DateTime<Utc>) -> Result<()>;
    /// `true` when the token exists and has not expired; it is then used up.
    async fn take_setup_token(&self, hash: &str, now: DateTime<Utc>) -> Result<bool>;
    /// Whether the token would be accepted, without using it.
    async fn setup_token_valid(&self, hash: &str, now: DateTime<Utc>) -> Result<bool>;
}
