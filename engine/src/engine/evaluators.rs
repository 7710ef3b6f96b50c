//! Online evaluators (see [`crate::model::evaluator`]): made, read,
//! changed and deleted here (operators and above, every change audited);
//! run by a worker of their own (`worker`), which scores a sample of the
//! runs that end.
//!
//! An evaluator reads the runs that end after it is made (or turned on
//! again), never earlier ones: it watches new runs. A scorer that needs an
//! expected value must give its own (a live run has no dataset item).

use super::Engine;
use crate::error::{EngineError, Result};
use crate::model::{Actor, Evaluator, NewEvaluator, MAX_PROJECT_EVALUATORS};
use crate::runtime::now;
use crate::store::EvaluatorCursor;

mod worker;

crate::engine::facade_group!(Evaluators, evaluators, "Online evaluators: scorers of a sample of new runs.");

fn not_found(id: &str) -> EngineError {
    EngineError::NotFound(format!(
        "evaluator `{}`",
        id.chars().take(crate::model::limits::MAX_ID_CHARS).collect::<String>()
    ))
}

/// A cursor at `now`: the runs that end from now on.
fn from_now() -> EvaluatorCursor {
    EvaluatorCursor { at_ms: crate::store::to_ms(now()), run_id: String::new() }
}

impl Evaluators<'_> {
    /// Checks `req` (`Invalid` naming the field or scorer).
    fn check(self, req: &NewEvaluator) -> Result<()> {
        if let Some(problem) = req.problem() {
            return Err(EngineError::Invalid(problem));
        }
        for (i, named) in req.scorers.iter().enumerate() {
            self.scores()
                .check_scorer(&named.scorer)
                .map_err(|e| EngineError::Invalid(format!("scorers[{i}]: {e}")))?;
        }
        Ok(())
    }

    /// Makes `req` an evaluator of `project`, watching the runs that end
    /// from now on. `Conflict` for a name the project uses, or when it has
    /// [`MAX_PROJECT_EVALUATORS`].
    pub async fn create(self, project: &str, req: NewEvaluator, by: &Actor) -> Result<Evaluator> {
        self.check(&req)?;
        let at = now();
        let evaluator = Evaluator {
            id: uuid::Uuid::now_v7().to_string(),
            name: req.name.trim().to_owned(),
            target: req.target,
            sample_percent: req.sample_percent,
            scorers: req.scorers,
            enabled: req.enabled,
            runs_seen: 0,
            runs_scored: 0,
            created_by: by.clone(),
            created_at: at,
            updated_at: at,
        };
        let kept = (self.rt.store.evaluators())
            .insert_evaluator(project, &evaluator, &from_now(), MAX_PROJECT_EVALUATORS)
            .await?;
        kept.kept("an evaluator", "evaluators", &evaluator.name, MAX_PROJECT_EVALUATORS)?;
        let detail = format!("{} ({} %)", evaluator.name, evaluator.sample_percent);
        self.identity().audit(Some(project), by, "evaluator_created", Some(&evaluator.id), Some(detail)).await;
        self.wake_evaluators();
        Ok(evaluator)
    }

    /// Evaluator `id` of `project`.
    pub async fn get(self, project: &str, id: &str) -> Result<Evaluator> {
        self.rt.store.evaluators().evaluator(project, id).await?.ok_or_else(|| not_found(id))
    }

    /// `project`'s evaluators, by name.
    pub async fn list(self, project: &str) -> Result<Vec<Evaluator>> {
        self.rt.store.evaluators().evaluators(project, MAX_PROJECT_EVALUATORS).await
    }

    /// Replaces evaluator `id`'s settings with `req`. Turned on again, it
    /// watches the runs that end from now on (not those that ended while it
    /// was off). `Conflict` for a name another evaluator has.
    pub async fn update(self, project: &str, id: &str, req: NewEvaluator, by: &Actor) -> Result<Evaluator> {
        self.check(&req)?;
        let was = self.get(project, id).await?;
        let name = req.name.trim().to_owned();
        let others = self.list(project).await?;
        if others.iter().any(|e| e.id != was.id && e.name == name) {
            return Err(EngineError::Conflict(format!("an evaluator named `{name}` exists")));
        }
        let at = now();
        let updated = Evaluator {
            name,
            target: req.target,
            sample_percent: req.sample_percent,
            scorers: req.scorers,
            enabled: req.enabled,
            updated_at: at,
            ..was.clone()
        };
        let cursor = (req.enabled && !was.enabled).then(from_now);
        if !self.rt.store.evaluators().update_evaluator(project, &updated, cursor.as_ref(), at).await? {
            return Err(not_found(id));
        }
        let detail =
            format!("{} ({} %, {})", updated.name, updated.sample_percent, if updated.enabled { "on" } else { "off" });
        self.identity().audit(Some(project), by, "evaluator_updated", Some(id), Some(detail)).await;
        self.wake_evaluators();
        self.get(project, id).await
    }

    /// Deletes evaluator `id` of `project` (the scores it gave stay).
    pub async fn delete(self, project: &str, id: &str, by: &Actor) -> Result<Evaluator> {
        let was = self.get(project, id).await?;
        if !self.rt.store.evaluators().delete_evaluator(project, id).await? {
            return Err(not_found(id));
        }
        self.identity().audit(Some(project), by, "evaluator_deleted", Some(id), Some(was.name.clone())).await;
        Ok(was)
    }
}

impl Engine {
    /// Starts the worker that runs the evaluators (see `worker`); the
    /// server calls it once at start.
    pub fn start_evaluators(&self) -> tokio::task::JoinHandle<()> {
        worker::start(self.clone())
    }
}
