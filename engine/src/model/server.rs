//! The servers sharing one database (PostgreSQL): each registers itself and
//! renews its row while it lives (`GET /api/servers`, the Settings panel).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// One runlens server, as it last reported itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Server {
    /// Chosen by the server at start (a UUID), new at every start.
    pub id: String,
    /// Where it listens, as it was told (`RUNLENS_ADDRESS`, else its bind address).
    pub address: String,
    /// The runlens version it runs.
    pub version: String,
    pub started_at: DateTime<Utc>,
    /// Its last renewal; a server that stopped renewing is `alive: false`.
    pub heartbeat_at: DateTime<Utc>,
    /// Runs it drives now (leases it holds).
    pub runs_held: u64,
    /// How many runs it drives at most at once (`RUNLENS_MAX_CONCURRENT_RUNS`).
    pub max_runs: u64,
    /// Renewed within the lease time: its runs are its own. Once not, any
    /// other server takes them over.
    pub alive: bool,
    /// The server that answered the request.
    pub this: bool,
}
