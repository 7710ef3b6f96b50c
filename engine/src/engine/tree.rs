//! Trees of runs: a parent whose agent calls wait for child runs.
//!
//! A parent's driver stops while its children run (it holds no permit, so
//! a full semaphore can never deadlock a tree). What keeps the tree moving
//! lives here: a child that ends starts its parent's driver again (which
//! reads the child's result from the store); a child that pauses for a
//! person pauses its parent, and every ancestor, until no child waits;
//! a run that ends or is cancelled cancels what still runs below it. All of
//! it is derived from the stored statuses, so a restart recovers it.

use futures::future::BoxFuture;
use futures::FutureExt;

use super::Engine;
use crate::model::{Interruption, RunRef, RunStatus};
use crate::store::RunPatch;

/// How often a lost compare-and-set on a parent's status is retried.
const SYNC_TRIES: usize = 3;

impl Engine {
    /// Starts drivers for the child runs a parent waits on, unless driven now.
    pub(super) fn start_children(&self, children: Vec<String>) {
        for id in children {
            if self.drivers.driver(&id).is_none() {
                self.spawn(id);
            }
        }
    }

    /// After child run `id` paused, resumed or ended: its parent's status
    /// follows (see [`Engine::sync_tree`]), and an ended child starts its
    /// parent's driver to take the result.
    pub(super) async fn notify_parent(&self, id: &str) {
        let Ok(Some(child)) = self.rt.store.get_run(id).await else { return };
        let (Some(parent), Some(_)) = (child.parent_run_id, child.parent_call_id) else { return };
        self.sync_tree(&parent).await;
        if child.status.is_terminal() {
            self.spawn(parent);
        }
    }

    /// Run `id` (waiting on its children) is `paused` while any child is,
    /// and `running` otherwise; a change goes up to its own parent. A run
    /// paused for its own calls stays paused.
    pub(super) fn sync_tree(&self, id: &str) -> BoxFuture<'_, ()> {
        let id = id.to_owned();
        async move {
            for _ in 0..SYNC_TRIES {
                let Ok(Some(run)) = self.rt.store.get_run(&id).await else { return };
                let own_calls = !run.interruptions.is_empty();
                if !matches!(run.status, RunStatus::Running | RunStatus::Paused) || own_calls {
                    return;
                }
                let Ok(children) = self.rt.store.children(&id).await else { return };
                let target = if children.iter().any(|c| c.status == RunStatus::Paused) {
                    RunStatus::Paused
                } else {
                    RunStatus::Running
                };
                if target == run.status {
                    return;
                }
                match self.rt.set_status(&run, target, RunPatch::default()).await {
                    Ok(_) => {
                        if let Some(parent) = run.parent_run_id.filter(|_| run.parent_call_id.is_some()) {
                            self.sync_tree(&parent).await;
                        }
                        return;
                    }
                    Err(e) => tracing::debug!(run_id = %id, error = %e, "a tree status change lost a race; retrying"),
                }
            }
        }
        .boxed()
    }

    /// Cancels every run below `id` that has not finished.
    pub(super) async fn cancel_children(&self, id: &str) {
        let Ok(children) = self.rt.store.children(id).await else { return };
        for child in children.into_iter().filter(|c| !c.status.is_terminal()) {
            if let Err(e) = self.cancel_tree(&child.id).await {
                tracing::debug!(run_id = %child.id, error = %e, "a child run could not be cancelled");
            }
        }
    }

    /// `cancel_run` for a run and everything below it.
    pub(super) fn cancel_tree(&self, id: &str) -> BoxFuture<'_, crate::error::Result<crate::model::Run>> {
        let id = id.to_owned();
        async move { self.cancel_run(&id).await }.boxed()
    }

    /// Fills each interruption's chain: the runs above its run, root first.
    pub(super) async fn with_chains(&self, mut pending: Vec<Interruption>) -> crate::error::Result<Vec<Interruption>> {
        for i in &mut pending {
            let run = self.rt.store.get_run(&i.run_id).await?;
            i.chain = self.chain_from(run.filter(|r| r.is_child()).and_then(|r| r.parent_run_id)).await?;
        }
        Ok(pending)
    }

    /// The chain of runs above a child run, root first, from its parent
    /// `parent` up (empty for `None`: a run that is no one's child).
    pub(super) async fn chain_from(&self, mut parent: Option<String>) -> crate::error::Result<Vec<RunRef>> {
        let mut chain = Vec::new();
        while let Some(parent_id) = parent {
            if chain.len() > self.rt.config.max_depth as usize {
                break;
            }
            let Some(run) = self.rt.store.get_run(&parent_id).await? else { break };
            chain.push(RunRef { id: run.id.clone(), name: run.name.clone(), agent_id: run.current_agent.clone() });
            parent = run.parent_run_id.filter(|_| run.parent_call_id.is_some());
        }
        chain.reverse();
        Ok(chain)
    }
}
