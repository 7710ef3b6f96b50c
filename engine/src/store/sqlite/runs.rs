//! SQLite's own paths of [`RunStore`](crate::store::RunStore) (the rest is
//! `store::sql::runs`): creating runs and moving a run's status on the
//! write thread, beside the turns' writes, and the runs list's plan.

use super::hot::{self, Transition};
use super::SqliteStore;
use crate::error::Result;
use crate::model::{Email, Message, Run, RunStatus, Step};
use crate::store::{to_ms, RunPatch};

impl SqliteStore {
    /// Stores runs with their histories in one transaction of the write
    /// thread; `false`, with nothing stored, when one of the ids exists.
    pub(crate) async fn insert_runs_on_thread(&self, runs: &[(&Run, &[Message], &[Step])]) -> Result<bool> {
        let new: Vec<hot::NewRun> =
            runs.iter().map(|(run, messages, steps)| hot::NewRun::new(run, messages, steps)).collect();
        Ok(self.committer.write(move |c| hot::insert_runs(c, &new)).await?.is_some())
    }

    /// Moves a run from `from` to `to` on the write thread; `None` when it
    /// was not in `from`.
    pub(crate) async fn transition_on_thread(
        &self,
        id: &str,
        from: RunStatus,
        to: RunStatus,
        patch: RunPatch,
    ) -> Result<Option<Run>> {
        let t = Transition::new(id, from, to, patch);
        Ok(self.committer.write(move |c| hot::transition(c, &t)).await?.map(Run::from))
    }

    /// Stores an email on the write thread, beside the step that sent it.
    pub(crate) async fn insert_email_on_thread(&self, e: &Email) -> Result<()> {
        let e = e.clone();
        let write = move |c: &rusqlite::Connection| {
            let mut stmt = c.prepare_cached(
                "INSERT INTO outbox (id, run_id, recipient, subject, body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            )?;
            stmt.execute(rusqlite::params![e.id, e.run_id, e.to, e.subject, e.body, to_ms(e.created_at)])
                .map(|_| Some(()))
        };
        self.committer.write(write).await?;
        Ok(())
    }
}
