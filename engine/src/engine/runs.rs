//! Runs: created, read, listed, cancelled and waited for (`engine.runs()`).

use super::*;
use crate::model::{limits, Session, MAX_SESSION_RUNS};

impl Runs<'_> {
    /// Creates a run and starts driving it. Returns the run and whether it was
    /// created (`false`: a run with the client-supplied id already existed).
    /// The request is validated first: an invalid one is refused even when a
    /// run with its id exists, so a 200 always means a well-formed request.
    pub async fn create_run(self, req: CreateRun) -> Result<(Run, bool)> {
        self.runs().create_run_in(req, crate::model::DEFAULT_PROJECT, None).await
    }

    /// [`Runs::create_run`] in `project`, recording who started it. A
    /// client-supplied id in use outside the project is refused (a
    /// conflict) with the words of [`unusable_id`], which say nothing of
    /// where or whether a run has it.
    pub async fn create_run_in(
        self,
        req: CreateRun,
        project: &str,
        by: Option<&crate::model::Actor>,
    ) -> Result<(Run, bool)> {
        self.create_run_as(req, project, by, false).await
    }

    /// The root runs of session `session_id` in `project`, oldest first (its
    /// latest [`MAX_SESSION_RUNS`]), with their costs at today's prices and
    /// their totals. A session no run of the project has (another
    /// project's, or none) has no runs; a malformed id is `Invalid`.
    pub async fn session(self, project: &str, session_id: &str) -> Result<Session> {
        limits::check_session_id("the session id", session_id).map_err(EngineError::Invalid)?;
        let filter = RunFilter {
            project: Some(project.to_owned()),
            session_id: Some(session_id.to_owned()),
            limit: Some(MAX_SESSION_RUNS),
            ..RunFilter::default()
        };
        let (page, pricing) = tokio::try_join!(self.runs().list_runs(&filter), self.traces().pricing(project))?;
        let more = page.next_cursor.is_some();
        Ok(Session::new(session_id, page.runs, more, |r| pricing.run_cost_usd(r), crate::runtime::now()))
    }

    /// Run `id`'s status and step count, without reading its settings;
    /// `NotFound` for an unknown run.
    pub async fn run_head(self, id: &str) -> Result<crate::store::RunHead> {
        self.rt.store.run_head(id).await?.ok_or_else(|| EngineError::NotFound(format!("run `{id}`")))
    }

    pub async fn get_run(self, id: &str) -> Result<Run> {
        self.rt.store.get_run(id).await?.ok_or_else(|| EngineError::NotFound(format!("run `{id}`")))
    }

    pub async fn list_runs(self, filter: &RunFilter) -> Result<RunPage> {
        filter.check_bounds().map_err(EngineError::Invalid)?;
        self.rt.store.list_runs(filter).await
    }

    pub async fn steps(self, id: &str) -> Result<Vec<Step>> {
        self.runs().run_head(id).await?;
        self.rt.store.steps(id).await
    }

    pub async fn messages(self, id: &str) -> Result<Vec<Message>> {
        self.runs().run_head(id).await?;
        self.rt.store.messages(id).await
    }

    pub async fn trace(self, id: &str) -> Result<RunTrace> {
        let run = self.runs().get_run(id).await?;
        let (steps, messages, spans) =
            tokio::try_join!(self.rt.store.steps(id), self.rt.store.messages(id), self.otel().run_spans(&run))?;
        Ok(RunTrace { run, steps, messages, spans })
    }

    /// [`Runs::cancel_by`] without an audit record (the engine's own use, tests).
    pub async fn cancel(self, id: &str) -> Result<Run> {
        self.runs().cancel_by(id, None).await
    }

    /// Cancels a run that has not finished; a tool in flight is interrupted.
    /// With `by`, the cancel goes into the project's audit log.
    pub async fn cancel_by(self, id: &str, by: Option<&crate::model::Actor>) -> Result<Run> {
        let cancelled = self.cancel_run(id).await?;
        if let Some(by) = by {
            self.identity().audit(Some(&cancelled.project), by, "cancelled", Some(id), None).await;
        }
        Ok(cancelled)
    }

    /// Waits until the run is no longer `pending` or `running`.
    pub async fn wait_until_settled(self, id: &str, timeout: Duration) -> Result<Run> {
        let mut events = self.subscribe();
        // Checked: a caller's timeout too large to add waits "forever" (a year).
        let now = tokio::time::Instant::now();
        let deadline = now.checked_add(timeout).unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600));
        loop {
            let run = self.runs().get_run(id).await?;
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
}

crate::engine::facade_group!(Runs, runs, "Runs: create, read, list, cancel, wait; generated and replayed runs.");
