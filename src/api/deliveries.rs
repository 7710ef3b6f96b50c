//! A run's webhook deliveries for the trace page: each status change on its
//! way to a hook, with its newest attempts (see `GET /api/runs/{id}/deliveries`).

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use runlens_engine::model::DeliveryPage;
use serde::{Deserialize, Serialize};

/// Deliveries the trace page shows (the newest changes; the API pages the rest).
pub const DELIVERIES_SHOWN: u32 = 50;

/// A run's newest deliveries, with the server's clock (for "next attempt in …").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunDeliveries {
    pub page: DeliveryPage,
    pub now: DateTime<Utc>,
}

/// Run `run_id`'s newest deliveries; `Ok(None)` when there is no such run
/// (or it belongs to a project the caller has no role in).
#[server]
pub async fn get_deliveries(run_id: String) -> Result<Option<RunDeliveries>, ServerFnError> {
    use runlens_engine::EngineError;

    let Some((engine, _, _)) = super::ssr::run_or_none(&run_id, super::ssr::Role::Viewer).await? else {
        return Ok(None);
    };
    match engine.webhooks().run_deliveries(&run_id, 0, DELIVERIES_SHOWN).await {
        Ok(page) => Ok(Some(RunDeliveries { page, now: Utc::now() })),
        Err(EngineError::NotFound(_)) => Ok(None),
        Err(e) => Err(super::ssr::to_server_error(e)),
    }
}
