//! Retention: each project's policy (how old and how many of its runs are
//! kept), set by its admins and audited, and the background job that
//! enforces it.
//!
//! The job wakes every [`EVERY`] and, for each project with a policy,
//! deletes the runs the policy no longer keeps in batches of [`BATCH`] root
//! runs, one short transaction each, pausing [`PAUSE`] between batches so a
//! run's writes are never held up behind it; a pass stops after
//! [`MAX_BATCHES`] batches (the next goes on). Each pass that deleted runs
//! is in the project's audit log (`runs_pruned`, by `system`). With several
//! servers, their passes may overlap: each run is deleted once (by the
//! batch whose status-guarded `DELETE` returns it), the other finds it gone.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Engine;
use crate::error::{EngineError, Result};
use crate::model::{Actor, PruneReport, Retention};
use crate::runtime::now;

/// How often the job looks at the projects' policies.
pub const EVERY: Duration = Duration::from_secs(300);
/// Root runs per batch (with their child runs).
pub const BATCH: u32 = 50;
/// Batches per project per pass.
pub const MAX_BATCHES: u32 = 200;
/// The pause between two batches.
pub const PAUSE: Duration = Duration::from_millis(20);

impl Engine {
    /// The project's retention policy (no limits when none was set).
    pub async fn retention(&self, project: &str) -> Result<Retention> {
        self.rt.store.retention(project).await
    }

    /// Sets the project's policy (`by` an admin of it; the server checks),
    /// recorded in its audit log.
    pub async fn set_retention(&self, project: &str, policy: Retention, by: &Actor) -> Result<Retention> {
        policy.check_bounds().map_err(EngineError::Invalid)?;
        if !self.rt.store.set_retention(project, &policy).await? {
            return Err(EngineError::NotFound(format!("project `{project}`")));
        }
        let detail = serde_json::to_string(&policy).ok();
        self.identity().audit(Some(project), by, "retention_set", Some(project), detail).await;
        Ok(policy)
    }

    /// One pass of the job over `project` now (see the module docs).
    pub async fn prune(&self, project: &str) -> Result<PruneReport> {
        self.prune_as_of(project, now()).await
    }

    /// [`Engine::prune`] as if it were `at` (runs older than the policy's
    /// age at `at` go).
    pub async fn prune_as_of(&self, project: &str, at: DateTime<Utc>) -> Result<PruneReport> {
        let policy = self.rt.store.retention(project).await?;
        let mut report = PruneReport::default();
        while policy.is_set() {
            if report.batches == MAX_BATCHES {
                report.more = true;
                break;
            }
            let deleted = self.rt.store.prune_runs(project, &policy, at, BATCH).await?;
            if deleted.is_empty() {
                break;
            }
            report.batches += 1;
            report.runs_deleted += deleted.len() as u64;
            tokio::time::sleep(PAUSE).await;
        }
        if report.runs_deleted > 0 {
            let detail = format!(
                "{} runs deleted in {} batches{} ({})",
                report.runs_deleted,
                report.batches,
                if report.more { ", more to go" } else { "" },
                serde_json::to_string(&policy).unwrap_or_default()
            );
            self.identity().audit(Some(project), &Actor::system(), "runs_pruned", Some(project), Some(detail)).await;
        }
        Ok(report)
    }

    /// Starts the job (the server calls it once at start).
    pub fn start_retention(&self) -> tokio::task::JoinHandle<()> {
        let engine = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                engine.prune_all().await;
            }
        })
    }

    /// One pass over every project with a policy; errors are logged and the
    /// next project goes on.
    async fn prune_all(&self) {
        let projects = match self.rt.store.retained_projects().await {
            Ok(projects) => projects,
            Err(e) => return tracing::warn!(error = %e, "retention: cannot read the policies"),
        };
        for (project, _) in projects {
            match self.prune(&project).await {
                Ok(r) if r.runs_deleted > 0 => {
                    tracing::info!(project, runs = r.runs_deleted, batches = r.batches, more = r.more, "retention pass")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(project, error = %e, "retention pass failed"),
            }
        }
    }
}
