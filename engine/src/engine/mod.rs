//! The engine façade: create, read, cancel and recover runs.
//!
//! The façade owns the scheduling (see [`schedule`]): each run is driven by
//! its own tokio task calling the runner, a semaphore bounds how many are
//! driven at once (the rest wait as `pending`), and the façade acts on what
//! the runner returns, queuing the approval deadlines of a paused run. Everything
//! a run step needs lives in the [`Runtime`] it shares with the runner.
//! The engine is cheap to clone (two `Arc`s) and is the only handle the web
//! layer holds.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

use crate::error::{EngineError, Result};
use crate::events::Event;
use crate::llm::ModelRegistry;
use crate::model::{CreateRun, Email, Message, Run, RunFilter, RunPage, RunStatus, RunTrace, Step, ToolInfo};
use crate::runtime::{cancelled_patch, EngineConfig, Runtime};
use crate::store::Store;
use crate::tools::ToolRegistry;

mod agents;
mod approvals;
mod cluster;
mod compare;
mod conversation;
mod datasets;
mod deadlines;
mod evaluators;
mod experiments;
mod fixture;
mod fork;
mod groups;
mod http_tools;
pub mod identity;
mod judge;
mod otel;
mod otlp;
mod recovery;
mod replay;
mod requests;
mod retention;
mod reviews;
mod runs;
mod schedule;
mod scores;
mod snapshot;
mod traces;
mod tree;
mod webhooks;
mod webhooks_worker;

pub use fixture::LOOP_STEPS;
pub use judge::{JUDGE_TAG, JUDGE_TIMEOUT};
pub use otlp::OtlpReport;
pub use recovery::{PaceControl, Recovered, RecoveryPace};
pub use requests::{CreatedRequest, APPROVAL_DECIDED, MAX_RUN_REQUESTS, QUESTION_ANSWERED};
pub use snapshot::{BlobState, ImportOptions, RunState, STATE_SCHEMA_VERSION};

pub use agents::Agents;
pub use approvals::Approvals;
pub use cluster::Cluster;
pub use compare::Comparisons;
pub use conversation::Conversation;
pub use datasets::Datasets;
pub use evaluators::Evaluators;
pub use experiments::Experiments;
pub use http_tools::HttpTools;
pub use identity::Identity;
pub use otlp::Otel;
pub use requests::Requests;
pub use reviews::Reviews;
pub use runs::Runs;
pub use scores::Scores;
pub use snapshot::Snapshots;
pub use traces::Traces;
pub use webhooks::Webhooks;

use schedule::Drivers;

/// Declares a group of the façade: a handle on the engine for one concern
/// (`engine.runs()`, `engine.approvals()`, …), whose methods live in that
/// concern's file. A group reads through to the engine's parts.
macro_rules! facade_group {
    ($group:ident, $accessor:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Copy)]
        pub struct $group<'e>(&'e $crate::engine::Engine);

        impl std::ops::Deref for $group<'_> {
            type Target = $crate::engine::Engine;
            fn deref(&self) -> &$crate::engine::Engine {
                self.0
            }
        }

        impl $crate::engine::Engine {
            #[doc = $doc]
            pub fn $accessor(&self) -> $group<'_> {
                $group(self)
            }
        }
    };
}
pub(crate) use facade_group;

/// The run engine. See the module docs.
#[derive(Clone)]
pub struct Engine {
    /// What the runner drives runs with.
    rt: Arc<Runtime>,
    /// Which runs are driven now, under the semaphore.
    drivers: Arc<Drivers>,
}

impl Engine {
    /// An engine over `store` with the built-in tools and model.
    pub fn new(store: Arc<dyn Store>, config: EngineConfig) -> Self {
        Self::with_parts(store, ToolRegistry::with_builtins(), ModelRegistry::with_builtin(), config)
    }

    /// An engine with the given tools and models (tests and embedders add their own).
    pub fn with_parts(store: Arc<dyn Store>, tools: ToolRegistry, models: ModelRegistry, config: EngineConfig) -> Self {
        let member = store.cluster().map(|_| {
            let address = config.server_address.clone().unwrap_or_else(|| "unknown".into());
            Arc::new(cluster::Member::new(address, config.max_concurrent_runs))
        });
        let drivers = Drivers::new(config.max_concurrent_runs, member);
        let engine = Self { rt: Arc::new(Runtime::new(store, tools, models, config)), drivers: Arc::new(drivers) };
        engine.start_membership();
        engine
    }

    /// Opens the store at `url` (created and migrated, see [`crate::store::open`])
    /// and builds an engine on it.
    pub async fn open(url: &str, config: EngineConfig) -> Result<Self> {
        Ok(Self::new(crate::store::open(url).await?, config))
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.rt.store
    }

    /// The tools runs of project `project` can call.
    pub fn tools(&self, project: &str) -> Vec<ToolInfo> {
        self.rt.tools.view(project).infos()
    }

    /// Every configured MCP server's health, by name.
    pub fn mcp_servers(&self) -> Vec<crate::model::McpServerStatus> {
        self.rt.tools.mcp_status()
    }

    /// Starts a supervisor per configured MCP server (see `tools::mcp`):
    /// each server's tools join the registry once listed, and its health
    /// shows in [`Engine::mcp_servers`]. Keep the hub while serving.
    pub fn start_mcp(&self, servers: Vec<crate::tools::mcp::McpServer>) -> crate::tools::mcp::McpHub {
        crate::tools::mcp::McpHub::start(servers, self.rt.tools.clone())
    }

    /// The live tool registry (MCP servers and HTTP tools register here).
    pub fn tool_registry(&self) -> &crate::tools::ToolRegistry {
        &self.rt.tools
    }

    pub fn models(&self) -> Vec<String> {
        self.rt.models.names()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.rt.bus.subscribe()
    }

    /// The run of what a client names by its own id `external` in
    /// `project` (`kind`: `thread`, an AG-UI thread), created as
    /// [`Runs::create_run_in`] does under the id the server gives it
    /// there (see [`crate::model::limits::scoped_run_id`]), or found when
    /// it exists. `external` follows the rules of client-chosen run ids.
    pub async fn create_scoped_run(
        &self,
        mut req: CreateRun,
        project: &str,
        by: Option<&crate::model::Actor>,
        (kind, external): (&str, &str),
    ) -> Result<(Run, bool)> {
        crate::runtime::create::check_id(external)?;
        req.id = Some(crate::model::limits::scoped_run_id(project, kind, external));
        self.create_run_as(req, project, by, true).await
    }

    /// [`Runs::create_run_in`]; `id_made_here`: `req.id` is one the
    /// server made, not a client's (whose rules it need not follow).
    async fn create_run_as(
        &self,
        req: CreateRun,
        project: &str,
        by: Option<&crate::model::Actor>,
        id_made_here: bool,
    ) -> Result<(Run, bool)> {
        let client_id = req.id.is_some();
        let agent = self.request_agent(project, &req).await?;
        let (run, messages) = self.prepare_run(req, project, by, agent.as_ref(), id_made_here).await?;
        if client_id {
            if let Some(existing) = self.rt.store.get_run(&run.id).await? {
                if existing.project != project {
                    return Err(unusable_id(&run.id));
                }
                return Ok((existing, false));
            }
        }
        if !self.rt.store.insert_run_with_history(&run, &messages, &[]).await? {
            // Lost a race with a request carrying the same id.
            let existing = self.runs().get_run(&run.id).await?;
            if existing.project != project {
                return Err(unusable_id(&run.id));
            }
            return Ok((existing, false));
        }
        self.spawn(run.id.clone());
        Ok((run, true))
    }

    /// The saved agent (at the version asked for, else its current one) a
    /// create-run request starts from, if it names one.
    async fn request_agent(&self, project: &str, req: &CreateRun) -> Result<Option<crate::runtime::Resolved>> {
        match (&req.agent_id, req.agent_version) {
            (Some(id), version) => {
                crate::model::limits::check_chars("agent_id", id, crate::model::limits::MAX_ID_CHARS)
                    .map_err(EngineError::Invalid)?;
                Ok(Some(self.rt.resolve_agent(project, id, version, "agent_id").await?))
            }
            (None, Some(_)) => Err(EngineError::Invalid("agent_version needs agent_id".into())),
            (None, None) => Ok(None),
        }
    }

    /// Checks `req` and builds its run in `project` (not stored yet): from
    /// `agent` when it names one, its webhook's secret checked, `by`
    /// recorded as who started it.
    async fn prepare_run(
        &self,
        req: CreateRun,
        project: &str,
        by: Option<&crate::model::Actor>,
        agent: Option<&crate::runtime::Resolved>,
        id_made_here: bool,
    ) -> Result<(Run, Vec<Message>)> {
        let (mut run, messages) = match id_made_here {
            true => crate::runtime::create::prepare_as(&self.rt, project, req, agent)?,
            false => crate::runtime::create::prepare(&self.rt, project, req, agent)?,
        };
        self.check_hook_secret(project, run.on_status_change.as_ref()).await?;
        run.created_by = by.cloned();
        Ok((run, messages))
    }

    /// The newest emails sent by runs (of one project, or of all).
    pub async fn outbox(&self, limit: u32) -> Result<Vec<Email>> {
        self.rt.store.outbox(limit, None).await
    }

    pub async fn project_outbox(&self, project: &str, limit: u32) -> Result<Vec<Email>> {
        self.rt.store.outbox(limit, Some(project)).await
    }

    pub(super) async fn cancel_run(&self, id: &str) -> Result<Run> {
        let mut run = self.runs().get_run(id).await?;
        Self::refuse_read_only(&run, "cancelled")?;
        if run.status.is_terminal() {
            return Err(EngineError::Conflict(format!("run `{id}` is already {}", run.status)));
        }
        // The run may change hands meanwhile (a pending run claimed and
        // started, a paused one resumed): then the status it was read with
        // is stale, and the cancel is tried again on what it is now.
        for attempt in 1.. {
            if let Some((token, mut done)) = self.drivers.driver(id) {
                token.cancel();
                // The driver records the cancellation; wait for it to finish.
                let _ = tokio::time::timeout(Duration::from_secs(10), done.wait_for(|d| *d)).await;
                run = self.runs().get_run(id).await?;
            }
            if run.status.is_terminal() {
                break;
            }
            // Not driven here (any more): pending, paused waiting for
            // decisions (a driver that was just pausing it has let go), or
            // driven by another server (which is told to stop).
            match self.rt.set_status(&run, RunStatus::Cancelled, cancelled_patch()).await {
                Ok(_) => {
                    self.rt.store.cancel_awaiting(id).await?;
                    self.announce_cancel(id).await;
                    break;
                }
                Err(EngineError::Conflict(_)) if attempt < 5 => run = self.runs().get_run(id).await?,
                Err(e) => return Err(e),
            }
        }
        // Its calls are no longer waiting for anyone.
        self.drivers.deadlines.forget_run(id);
        // Everything below it stops too, and a cancelled child's parent
        // takes the failure and goes on.
        self.cancel_children(id).await;
        self.notify_parent(id).await;
        let run = self.runs().get_run(id).await?;
        if run.status == RunStatus::Cancelled {
            Ok(run)
        } else {
            Err(EngineError::Conflict(format!("run `{id}` ended {} before it could be cancelled", run.status)))
        }
    }
}

/// The refusal of a client-chosen run id in use outside the caller's
/// project: the same words whether or not a run has it, and nothing of
/// which project.
pub(crate) fn unusable_id(id: &str) -> EngineError {
    EngineError::Conflict(format!("the run id `{id}` cannot be used: choose another, or leave `id` out"))
}
