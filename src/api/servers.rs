//! Server function of the settings page's Servers panel: the runlens servers
//! sharing the database (`runlens_engine::Engine::servers`), for instance
//! admins only, like `GET /api/servers` (addresses are infrastructure
//! details). On SQLite the list is this server alone.

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::model::Server;
use serde::{Deserialize, Serialize};

/// The servers, with the server's clock for the heartbeats' ages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServersView {
    pub servers: Vec<Server>,
    pub now: DateTime<Utc>,
}

/// The servers sharing the database for an instance admin; `None` for
/// anyone else (the panel is then not shown).
#[server]
pub async fn list_servers() -> Result<Option<ServersView>, ServerFnError> {
    let caller = super::ssr::caller()?;
    if !caller.instance_admin {
        return Ok(None);
    }
    let engine = super::ssr::engine()?;
    let servers = engine.cluster().servers().await.map_err(super::ssr::to_server_error)?;
    Ok(Some(ServersView { servers, now: Utc::now() }))
}
