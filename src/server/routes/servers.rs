//! The runlens servers sharing the database (`GET /api/servers`): each
//! server's address, version, heartbeat and load, for instance admins only
//! (addresses are infrastructure details). On SQLite the list is just this
//! server.

use axum::extract::State;
use axum::Json;
use runlens_engine::model::Server;
use runlens_engine::Engine;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::openapi::responses::*;
use super::super::state::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(servers))
}

/// The servers sharing the database.
#[derive(Debug, Serialize, ToSchema)]
pub struct ServerList {
    /// Every server that renewed its registration within the last day, the one answering marked `this`; on a
    /// SQLite database only this server (address `local`).
    pub servers: Vec<Server>,
}

/// The runlens servers sharing this database (instance admins): address, version, heartbeat, runs held.
///
/// With PostgreSQL several servers can share one database: each registers itself at start and renews its row
/// while it runs. A server that stopped renewing is listed with `alive: false` for a day; any other server takes
/// over its runs. Takes no query parameters.
#[utoipa::path(
    get,
    path = "/api/servers",
    tag = "server",
    responses(
        (status = 200, description = "OK", body = ServerList),
        (status = 500, response = Internal),
    )
)]
async fn servers(State(engine): State<Engine>, caller: Caller) -> Result<Json<ServerList>, AppError> {
    caller.require_instance_admin()?;
    Ok(Json(ServerList { servers: engine.cluster().servers().await? }))
}
