//! The engine façade: create, read, cancel and recover runs.
//!
//! Each run is driven by its own tokio task; a semaphore bounds how many are
//! driven at once (the rest wait as `pending`). The engine is cheap to clone
//! (one `Arc`) and is the only handle the web layer holds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use futures::FutureExt;
use serde_json::Value;
use tokio::sync::{broadcast, watch, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::error::{EngineError, Result};
use crate::events::{Event, EventBus, EventKind};
use crate::llm::ModelRegistry;
use crate::model::{CreateRun, Email, Message, Run, RunFilter, RunPage, RunStatus, RunTrace, Step, ToolInfo};
use crate::runner;
use crate::store::{SqliteStore, Store};
use crate::tools::ToolRegistry;

mod approvals;
mod conversation;
mod create;
mod snapshot;

pub use snapshot::{BlobState, ImportOptions, RunState, STATE_SCHEMA_VERSION};
mod fixture;
mod traces;

pub(crate) use approvals::arm_approval_timeout;

/// Engine-wide settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Runs driven at the same time; others wait as `pending`.
    pub max_concurrent_runs: usize,
    /// `max_turns` of a run that does not set it.
    pub default_max_turns: u32,
    /// Events buffered per subscriber before a slow one lags.
    pub event_capacity: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self { max_concurrent_runs: 64, default_max_turns: 10, event_capacity: 4096 }
    }
}

struct Active {
    cancel: CancellationToken,
    done: watch::Receiver<bool>,
}

pub(crate) struct Inner {
    pub store: Arc<dyn Store>,
    pub tools: ToolRegistry,
    pub models: ModelRegistry,
    pub bus: EventBus,
    pub config: EngineConfig,
    permits: Arc<Semaphore>,
    active: Mutex<HashMap<String, Active>>,
}

/// The run engine. See the module docs.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

impl Engine {
    /// An engine over `store` with the built-in tools and model.
    pub fn new(store: Arc<dyn Store>, config: EngineConfig) -> Self {
        Self::with_parts(store, ToolRegistry::with_builtins(), ModelRegistry::with_builtin(), config)
    }

    /// An engine with the given tools and models (tests and embedders add their own).
    pub fn with_parts(store: Arc<dyn Store>, tools: ToolRegistry, models: ModelRegistry, config: EngineConfig) -> Self {
        // The bus persists events through the same store (see `events`).
        let bus = EventBus::new(config.event_capacity, Some(store.clone()));
        let inner = Inner {
            store,
            tools,
            models,
            bus,
            permits: Arc::new(Semaphore::new(config.max_concurrent_runs.max(1))),
            active: Mutex::new(HashMap::new()),
            config,
        };
        Self { inner: Arc::new(inner) }
    }

    /// Opens the SQLite database at `url` (created and migrated) and builds an engine on it.
    pub async fn open_sqlite(url: &str, config: EngineConfig) -> Result<Self> {
        Ok(Self::new(Arc::new(SqliteStore::open(url).await?), config))
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    pub fn tools(&self) -> Vec<ToolInfo> {
        self.inner.tools.infos()
    }

    pub fn models(&self) -> Vec<String> {
        self.inner.models.names()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.inner.bus.subscribe()
    }

    /// Creates a run and starts driving it. Returns the run and whether it was
    /// created (`false`: a run with the client-supplied id already existed).
    /// The request is validated first: an invalid one is refused even when a
    /// run with its id exists, so a 200 always means a well-formed request.
    pub async fn create_run(&self, req: CreateRun) -> Result<(Run, bool)> {
        let client_id = req.id.is_some();
        let (run, first) = create::prepare(&self.inner, req)?;
        if client_id {
            if let Some(existing) = self.inner.store.get_run(&run.id).await? {
                return Ok((existing, false));
            }
        }
        if !self.inner.store.insert_run(&run, &first).await? {
            // Lost a race with a request carrying the same id.
            let existing = self.get_run(&run.id).await?;
            return Ok((existing, false));
        }
        self.spawn(run.id.clone());
        Ok((run, true))
    }

    /// Run `id`'s status and step count, without reading its settings;
    /// `NotFound` for an unknown run.
    pub async fn run_head(&self, id: &str) -> Result<crate::store::RunHead> {
        self.inner.store.run_head(id).await?.ok_or_else(|| EngineError::NotFound(format!("run `{id}`")))
    }

    pub async fn get_run(&self, id: &str) -> Result<Run> {
        self.inner.store.get_run(id).await?.ok_or_else(|| EngineError::NotFound(format!("run `{id}`")))
    }

    pub async fn list_runs(&self, filter: &RunFilter) -> Result<RunPage> {
        filter.check_bounds().map_err(EngineError::Invalid)?;
        self.inner.store.list_runs(filter).await
    }

    pub async fn steps(&self, id: &str) -> Result<Vec<Step>> {
        self.run_head(id).await?;
        self.inner.store.steps(id).await
    }

    pub async fn messages(&self, id: &str) -> Result<Vec<Message>> {
        self.run_head(id).await?;
        self.inner.store.messages(id).await
    }

    pub async fn trace(&self, id: &str) -> Result<RunTrace> {
        let run = self.get_run(id).await?;
        let (steps, messages) = tokio::try_join!(self.inner.store.steps(id), self.inner.store.messages(id))?;
        Ok(RunTrace { run, steps, messages })
    }

    pub async fn outbox(&self, limit: u32) -> Result<Vec<Email>> {
        self.inner.store.outbox(limit).await
    }

    /// Cancels a run that has not finished; a tool in flight is interrupted.
    pub async fn cancel(&self, id: &str) -> Result<Run> {
        let run = self.get_run(id).await?;
        if run.status.is_terminal() {
            return Err(EngineError::Conflict(format!("run `{id}` is already {}", run.status)));
        }
        let active = {
            let map = self.inner.active.lock().unwrap_or_else(|e| e.into_inner());
            map.get(id).map(|a| (a.cancel.clone(), a.done.clone()))
        };
        match active {
            Some((token, mut done)) => {
                token.cancel();
                // The driver records the cancellation; wait for it to finish.
                let _ = tokio::time::timeout(Duration::from_secs(10), done.wait_for(|d| *d)).await;
            }
            None => {
                // Not driven here: pending, or paused waiting for decisions.
                runner::set_status(&self.inner, &run, RunStatus::Cancelled, runner::cancelled_patch()).await?;
                self.inner.store.cancel_awaiting(id).await?;
            }
        }
        let run = self.get_run(id).await?;
        if run.status == RunStatus::Cancelled {
            Ok(run)
        } else {
            Err(EngineError::Conflict(format!("run `{id}` ended {} before it could be cancelled", run.status)))
        }
    }

    /// Resumes runs a previous process left `pending` or `running` (and
    /// paused runs whose decisions were all made), and re-arms approval
    /// timeouts. Returns how many runs were picked up.
    pub async fn recover(&self) -> Result<usize> {
        self.announce_lost_finishes().await?;
        let mut ids = self.inner.store.run_ids_with_status(RunStatus::Running).await?;
        ids.extend(self.inner.store.run_ids_with_status(RunStatus::Pending).await?);
        let n = ids.len();
        for id in ids {
            self.spawn(id);
        }
        Ok(n + self.resume_paused().await?)
    }

    /// Publishes the `run.finished` of runs whose status change was stored
    /// but whose event was lost with the previous process, so every finished
    /// run's event stream ends with one.
    async fn announce_lost_finishes(&self) -> Result<()> {
        for id in self.inner.store.unannounced_finishes().await? {
            let Ok(Some(run)) = self.inner.store.get_run(&id).await else { continue };
            if run.status.is_terminal() {
                let kind = EventKind::RunFinished {
                    status: run.status,
                    result: run.result.clone(),
                    summary: run.summary.clone(),
                    usage: run.usage,
                };
                self.inner.bus.publish(&id, kind);
            }
        }
        Ok(())
    }

    /// Waits until the run is no longer `pending` or `running`.
    pub async fn wait_until_settled(&self, id: &str, timeout: Duration) -> Result<Run> {
        let mut events = self.subscribe();
        // Checked: a caller's timeout too large to add waits "forever" (a year).
        let now = tokio::time::Instant::now();
        let deadline = now.checked_add(timeout).unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600));
        loop {
            let run = self.get_run(id).await?;
            if !matches!(run.status, RunStatus::Pending | RunStatus::Running) {
                return Ok(run);
            }
            let wait = tokio::time::timeout_at(deadline, events.recv());
            match wait.await {
                Err(_) => return Err(EngineError::Conflict(format!("run `{id}` is still {}", run.status))),
                Ok(_) => continue,
            }
        }
    }

    fn spawn(&self, run_id: String) {
        let token = CancellationToken::new();
        let (done_tx, done_rx) = watch::channel(false);
        {
            let mut map = self.inner.active.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(current) = map.get(&run_id) {
                // A driver is still finishing (e.g. it just paused the run and
                // a decision resumed it): start again once it is done.
                let mut done = current.done.clone();
                let engine = self.clone();
                tokio::spawn(async move {
                    let _ = done.wait_for(|d| *d).await;
                    engine.spawn(run_id);
                });
                return;
            }
            map.insert(run_id.clone(), Active { cancel: token.clone(), done: done_rx });
        }
        let inner = self.inner.clone();
        tokio::spawn(async move {
            let permit = tokio::select! {
                p = inner.permits.clone().acquire_owned() => p.ok(),
                _ = token.cancelled() => None,
            };
            let outcome = std::panic::AssertUnwindSafe(runner::drive(&inner, &run_id, token)).catch_unwind().await;
            let failure = match outcome {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(format!("internal error: {e}")),
                Err(_) => Some("internal error: the run loop panicked".to_owned()),
            };
            if let Some(reason) = failure {
                tracing::error!(run_id, %reason, "run loop failed");
                runner::fail_if_active(&inner, &run_id, reason).await;
            }
            drop(permit);
            inner.active.lock().unwrap_or_else(|e| e.into_inner()).remove(&run_id);
            let _ = done_tx.send(true);
        });
    }
}

/// `true` for a JSON object (or null, meaning none).
pub(crate) fn is_object_or_null(v: &Value) -> bool {
    v.is_object() || v.is_null()
}

/// Now, truncated to the millisecond precision the store keeps, so values
/// returned before and after a round trip compare equal.
pub(crate) fn now() -> chrono::DateTime<Utc> {
    crate::store::now()
}
