//! The driver of one experiment (see the parent module's docs): a task
//! that starts the next items as room allows, scores what ended, and ends
//! the experiment once every item has run and been scored.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde_json::Value;

use super::ITEM_PAGE;
use crate::engine::Engine;
use crate::error::Result;
use crate::model::{DatasetItem, Experiment, ExperimentStatus, RunStatus};
use crate::runtime::{now, Resolved};
use crate::store::ItemRun;

/// How long the driver waits for news of its runs before looking again.
const IDLE_WAIT: Duration = Duration::from_millis(500);

impl Engine {
    /// Cancels experiment `id`'s runs that have not ended.
    pub(super) async fn cancel_active_runs(&self, id: &str) -> Result<()> {
        for run in self.rt.store.experiments().item_runs(id).await? {
            if !run.status.is_terminal() {
                if let Err(e) = self.runs().cancel(&run.run_id).await {
                    tracing::warn!(experiment = %id, run_id = %run.run_id, error = %e, "could not cancel a run of a cancelled experiment");
                }
            }
        }
        Ok(())
    }

    /// Starts the task that drives `exp` (see the module docs), unless one
    /// drives it here already.
    pub(super) fn drive_experiment(self, exp: Experiment) {
        {
            let mut driven = self.drivers.experiments.lock().unwrap_or_else(|e| e.into_inner());
            if !driven.insert(exp.id.clone()) {
                return;
            }
        }
        tokio::spawn(async move {
            let id = exp.id.clone();
            let mut driver = Driver::new(self.clone(), exp);
            driver.run().await;
            self.drivers.experiments.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        });
    }
}

/// The state of one experiment's driver (see the module docs).
struct Driver {
    engine: Engine,
    exp: Experiment,
    agent: Option<Resolved>,
    /// The dataset's next items to start, read a page at a time.
    queue: std::collections::VecDeque<DatasetItem>,
    /// The id of the last item read from the dataset (None: from the start).
    read_after: Option<String>,
    /// Whether every item has been read from the dataset.
    read_all: bool,
    /// Runs whose scoring is done (here, or found scored).
    scored: HashSet<String>,
    /// Items that could not be started, with why (each counts as run).
    skipped: HashMap<String, String>,
}

impl Driver {
    fn new(engine: Engine, exp: Experiment) -> Self {
        Driver {
            engine,
            exp,
            agent: None,
            queue: Default::default(),
            read_after: None,
            read_all: false,
            scored: HashSet::new(),
            skipped: HashMap::new(),
        }
    }

    async fn run(&mut self) {
        let mut events = self.engine.subscribe();
        loop {
            match self.pass().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => tracing::warn!(experiment = %self.exp.id, error = %e, "experiment pass failed; trying again"),
            }
            // Wait for one of this experiment's runs to finish (or a while).
            let wait = async {
                loop {
                    match events.recv().await {
                        Ok(ev) if matches!(ev.kind, crate::model::EventKind::RunFinished { .. }) => return,
                        Ok(ev)
                            if matches!(ev.kind, crate::model::EventKind::RunStatus { new: RunStatus::Paused, .. }) =>
                        {
                            return
                        }
                        Ok(_) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
                    }
                }
            };
            let _ = tokio::time::timeout(IDLE_WAIT, wait).await;
        }
    }

    /// One look at the experiment: ends it when cancelled or complete,
    /// scores what ended, starts what fits. Whether the driver is done.
    async fn pass(&mut self) -> Result<bool> {
        let engine = self.engine.clone();
        let store = engine.rt.store.experiments();
        let current = store.experiment(&self.exp.project, &self.exp.id).await?;
        match current.map(|e| e.status) {
            Some(ExperimentStatus::Running) => {}
            Some(ExperimentStatus::Cancelled) => {
                engine.cancel_active_runs(&self.exp.id).await?;
                return Ok(true);
            }
            // Done, or deleted.
            _ => return Ok(true),
        }
        let runs = store.item_runs(&self.exp.id).await?;
        let active = runs.iter().filter(|r| !r.status.is_terminal()).count() as u32;
        // The ended runs are scored side by side, as many at once as the
        // experiment runs items (a judge's verdict is a run of its own).
        let ended: Vec<&ItemRun> =
            runs.iter().filter(|r| r.status.is_terminal() && !self.scored.contains(&r.run_id)).collect();
        for batch in ended.chunks(self.exp.spec.concurrency().max(1) as usize) {
            let mut scoring = Vec::with_capacity(batch.len());
            for run in batch {
                scoring.push(self.score(run));
            }
            let outcomes = futures::future::join_all(scoring).await;
            for (run, outcome) in batch.iter().zip(outcomes) {
                outcome?;
                self.scored.insert(run.run_id.clone());
            }
        }
        let mut active = active;
        let started: HashSet<&str> = runs.iter().map(|r| r.item_id.as_str()).collect();
        // The agent's version is read before the first item starts, and
        // again on the next pass if it could not be: an item never runs
        // without the agent's configuration.
        if self.exp.spec.agent_id.is_some() && self.agent.is_none() {
            self.agent = engine.experiment_agent(&self.exp).await?;
        }
        let concurrency = self.exp.spec.concurrency();
        while active < concurrency {
            let Some(item) = self.next_item(&started).await? else { break };
            let by = Engine::experiment_actor(&self.exp);
            let (run, messages) = match engine.item_run(&self.exp, self.agent.as_ref(), &item, &by).await {
                Ok(prepared) => prepared,
                Err(e) => {
                    tracing::warn!(experiment = %self.exp.id, item = %item.id, error = %e, "an item could not start");
                    self.skipped.insert(item.id.clone(), e.to_string());
                    continue;
                }
            };
            match engine.rt.store.insert_run_with_history(&run, &messages, &[]).await {
                Ok(true) => {
                    engine.spawn(run.id.clone());
                    active += 1;
                }
                // A run of this id exists: not expected, every id is new.
                Ok(false) => {}
                Err(e) => {
                    // Another driver (another server) may have started the
                    // item first, and the unique index refused this run; if
                    // not, the item is tried again on the next pass.
                    self.queue.push_front(item);
                    return Err(e);
                }
            }
        }
        let accounted = runs.len() + self.skipped.len();
        let all_scored = runs.iter().all(|r| self.scored.contains(&r.run_id));
        if active == 0
            && all_scored
            && self.read_all
            && self.queue.is_empty()
            && accounted >= self.exp.item_count as usize
        {
            store.finish_experiment(&self.exp.id, ExperimentStatus::Done, now()).await?;
            return Ok(true);
        }
        Ok(false)
    }

    /// The next item of the dataset that has no run yet.
    async fn next_item(&mut self, started: &HashSet<&str>) -> Result<Option<DatasetItem>> {
        loop {
            while let Some(item) = self.queue.pop_front() {
                if !started.contains(item.id.as_str()) && !self.skipped.contains_key(&item.id) {
                    return Ok(Some(item));
                }
            }
            if self.read_all {
                return Ok(None);
            }
            let page = (self.engine.rt.store.datasets())
                .dataset_items(&self.exp.dataset_id, self.exp.dataset_version, self.read_after.as_deref(), ITEM_PAGE)
                .await?;
            self.read_all = page.len() < ITEM_PAGE as usize;
            self.read_after = page.last().map(|i| i.id.clone()).or(self.read_after.take());
            self.queue.extend(page);
        }
    }

    /// Scores the ended run of `item_run` with the experiment's scorers.
    async fn score(&self, item_run: &ItemRun) -> Result<()> {
        if self.exp.spec.scorers.is_empty() {
            return Ok(());
        }
        let engine = &self.engine;
        let Some(run) = engine.rt.store.get_run(&item_run.run_id).await? else { return Ok(()) };
        let item = (engine.rt.store.datasets())
            .dataset_item(&self.exp.dataset_id, &item_run.item_id, self.exp.dataset_version)
            .await?;
        let expected: Option<Value> = item.and_then(|i| i.expected);
        let by = Engine::experiment_actor(&self.exp);
        let problems = (engine.scores())
            .score_each(&self.exp.project, &run, &self.exp.spec.scorers, expected.as_ref(), &by)
            .await?;
        if !problems.is_empty() {
            tracing::debug!(experiment = %self.exp.id, run_id = %run.id, ?problems, "scorers not applied");
        }
        Ok(())
    }
}
