//! The runtime: what a run step needs, and nothing about scheduling.
//!
//! A [`Runtime`] holds the store, the event bus, the tools, the models and
//! the engine's settings, and changes a run's status the one way every layer
//! uses (see [`status`]: stored as a compare-and-set the status machine
//! approved, then published). The runner drives a run with it alone; the
//! engine façade owns one, and adds what is about scheduling: which runs are
//! driven, the semaphore, cancellation and timers.
//!
//! Dependencies run one way: engine façade → runner → runtime → store,
//! events, tools, llm.

mod agents;
mod attach;
pub(crate) mod create;
mod status;

use std::sync::Arc;

use crate::events::EventBus;
use crate::llm::ModelRegistry;
use crate::model::TreeLimits;
use crate::store::Store;
use crate::tools::ToolRegistry;

pub(crate) use crate::store::now;
pub(crate) use agents::{agent_tool_infos, child_prompt, Resolved};
pub(crate) use attach::{attach_known, attach_tools};
pub(crate) use status::{cancelled_patch, undecodable};

/// Engine-wide settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Runs driven at the same time; others wait as `pending`.
    pub max_concurrent_runs: usize,
    /// `max_turns` of a run that does not set it.
    pub default_max_turns: u32,
    /// Events buffered per subscriber before a slow one lags.
    pub event_capacity: usize,
    /// How deep a tree of agent calls may grow (a root run is at depth 0):
    /// a call that would start a child deeper fails, with the reason.
    pub max_depth: u32,
    /// Child runs one run may start in all; calls past it fail, with the reason.
    pub max_children: u32,
    /// Bounds on each whole tree of runs (`[tree_budget]`; see [`TreeLimits`]).
    pub tree: TreeLimits,
    /// Let HTTP tools and webhooks reach loopback, private and link-local
    /// addresses (`[http] allow_private_networks`).
    pub allow_private_networks: bool,
    /// The most tools one turn offers; runs with more attached are offered
    /// the most relevant (`[tool_selection] max`).
    pub tool_selection_max: u32,
    /// How status webhooks are sent and retried (`[webhooks]`).
    pub webhooks: crate::tools::config::WebhooksConfig,
    /// Where this server is reached, as the server registry lists it (a
    /// store several servers share; `RUNLENS_ADDRESS`, else the bind address).
    pub server_address: Option<String>,
    /// How long a run's lease lasts without renewal on a shared store: a
    /// server that stops renewing (it died or froze) has its runs taken over
    /// by another within this and a claim poll (2 s). Renewed every third.
    pub lease: std::time::Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            max_concurrent_runs: 64,
            default_max_turns: 10,
            event_capacity: 4096,
            max_depth: crate::model::limits::DEFAULT_MAX_DEPTH,
            max_children: crate::model::limits::DEFAULT_MAX_CHILDREN,
            tree: TreeLimits::default(),
            allow_private_networks: false,
            tool_selection_max: crate::tools::config::DEFAULT_SELECTION_MAX,
            webhooks: crate::tools::config::WebhooksConfig::default(),
            server_address: None,
            lease: std::time::Duration::from_secs(15),
        }
    }
}

/// The store, event bus, tools, models and settings a run step works with
/// (see the module docs).
pub(crate) struct Runtime {
    pub store: Arc<dyn Store>,
    /// The store's outbox, the part of it tools see (see `tools::ToolContext`).
    pub outbox: Arc<dyn crate::store::Outbox>,
    pub tools: ToolRegistry,
    pub models: ModelRegistry,
    pub bus: EventBus,
    pub config: EngineConfig,
    /// Bumped whenever a request from another agent is created or decided
    /// here: long-polls waiting on one re-read it (see `engine::requests`).
    pub requests: tokio::sync::watch::Sender<u64>,
    /// The runs of the OTLP traces sent to lately, as assembled so far.
    pub assemblies: crate::otel::ingest::Assemblies,
    /// The database's key for derived run ids, read once (see [`Runtime::id_key`]).
    id_key: tokio::sync::OnceCell<String>,
}

impl Runtime {
    pub fn new(store: Arc<dyn Store>, tools: ToolRegistry, models: ModelRegistry, config: EngineConfig) -> Self {
        // The bus persists events through the same store (see `events`).
        let bus = EventBus::new(config.event_capacity, Some(store.clone()));
        let outbox = Arc::new(crate::store::StoreOutbox(store.clone()));
        let requests = tokio::sync::watch::Sender::new(0);
        Self {
            store,
            outbox,
            tools,
            models,
            bus,
            config,
            requests,
            assemblies: Default::default(),
            id_key: tokio::sync::OnceCell::new(),
        }
    }

    /// The key run ids the server derives are made with (see
    /// `identity::keyed_id`): 32 random bytes made once per database, so
    /// every server on it derives the same ids and no client can.
    pub async fn id_key(&self) -> crate::error::Result<&str> {
        let key = self
            .id_key
            .get_or_try_init(|| async {
                let fresh = crate::identity::random_hex(32);
                self.store.server_secret("run_ids", &fresh).await
            })
            .await?;
        Ok(key.as_str())
    }
}
