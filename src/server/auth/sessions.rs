//! Server-side sessions in runlens's own database: the cookie carries only
//! a random session id; what it stands for (the user, the chosen project)
//! is a row of the `sessions` table, so signing out or resetting a
//! password ends a session at once.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use runlens_engine::Engine;
use tower_sessions::cookie::time::{Duration, OffsetDateTime};
use tower_sessions::cookie::SameSite;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{Error, Result};
use tower_sessions::{Expiry, SessionManagerLayer, SessionStore};

/// The session cookie's name.
pub const COOKIE: &str = "runlens_session";
/// A session ends after this long without a request.
pub const IDLE: Duration = Duration::days(7);

/// The session layer: cookie `runlens_session`, HttpOnly, SameSite=Lax,
/// Secure when `secure` (the app is served over https).
pub fn layer(engine: Engine, secure: bool) -> SessionManagerLayer<DbSessions> {
    SessionManagerLayer::new(DbSessions(engine))
        .with_name(COOKIE)
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(secure)
        .with_path("/")
        .with_expiry(Expiry::OnInactivity(IDLE))
}

/// Sessions stored through the engine's directory.
#[derive(Clone)]
pub struct DbSessions(Engine);

impl DbSessions {
    pub fn new(engine: Engine) -> Self {
        DbSessions(engine)
    }
}

impl std::fmt::Debug for DbSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DbSessions")
    }
}

fn expiry(record: &Record) -> DateTime<Utc> {
    DateTime::from_timestamp(record.expiry_date.unix_timestamp(), 0).unwrap_or_default()
}

fn backend(e: impl std::fmt::Display) -> Error {
    Error::Backend(e.to_string())
}

#[async_trait]
impl SessionStore for DbSessions {
    async fn create(&self, record: &mut Record) -> Result<()> {
        let data = serde_json::to_string(record).map_err(|e| Error::Encode(e.to_string()))?;
        // A collision of 128 random bits is not expected; retry with a new id anyway.
        for _ in 0..8 {
            if self
                .0
                .directory()
                .create_session(&record.id.to_string(), &data, expiry(record))
                .await
                .map_err(backend)?
            {
                return Ok(());
            }
            record.id = Id::default();
        }
        Err(Error::Backend("could not find a free session id".into()))
    }

    async fn save(&self, record: &Record) -> Result<()> {
        let data = serde_json::to_string(record).map_err(|e| Error::Encode(e.to_string()))?;
        self.0.directory().save_session(&record.id.to_string(), &data, expiry(record)).await.map_err(backend)
    }

    async fn load(&self, id: &Id) -> Result<Option<Record>> {
        let Some(data) = self.0.directory().load_session(&id.to_string(), Utc::now()).await.map_err(backend)? else {
            return Ok(None);
        };
        let record: Record = serde_json::from_str(&data).map_err(|e| Error::Decode(e.to_string()))?;
        Ok((record.expiry_date > OffsetDateTime::now_utc()).then_some(record))
    }

    async fn delete(&self, id: &Id) -> Result<()> {
        self.0.directory().delete_session(&id.to_string()).await.map_err(backend)
    }
}
