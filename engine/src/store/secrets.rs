//! Server secrets: random values made once per database and shared by
//! every server on it (the key run ids are derived with, see
//! `identity::keyed_id`). Never shown through the API. The table is the
//! same in both databases (`0023_server_secrets.sql` in SQLite,
//! `0012_server_secrets.sql` in PostgreSQL), so one implementation serves
//! both (`sql/secrets.rs`).

use async_trait::async_trait;

use crate::error::Result;

#[async_trait]
pub trait SecretStore: Send + Sync {
    /// The secret named `name`: `fresh` is stored when there is none yet,
    /// and whichever was stored first is returned (servers starting
    /// together agree on one).
    async fn server_secret(&self, name: &str, fresh: &str) -> Result<String>;
}

pub(crate) const KEEP_FIRST: &str =
    "INSERT INTO server_secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING";
pub(crate) const READ: &str = "SELECT value FROM server_secrets WHERE name = ?";
