//! The evaluators' worker: one task per engine. It wakes when a run's
//! status changes (and once a second regardless), and for each evaluator
//! that is on reads the runs of its project that ended after its cursor,
//! in the order they ended, a page at a time. Each run it watches (its
//! target matches; never a judge's own run) and samples is scored with the
//! evaluator's scorers, as the evaluator; then the cursor moves past the
//! page, with the counts, by a compare-and-set (another server that moved
//! it first wins, and this one reads again from there).
//!
//! Crash-safe: the cursor moves only after the page is scored, and a
//! scorer's score is kept once per run by name, so a page scored again
//! after a crash adds nothing. A run still running when read (a
//! conversation continued) is passed; when it ends again it is read again.

use std::time::Duration;

use super::Engine;
use crate::error::Result;
use crate::model::{in_sample, Actor, Run};
use crate::store::{to_ms, EvaluatorCursor, WatchingEvaluator};

/// Runs read per evaluator per page.
const PAGE: u32 = 100;
/// Pages one evaluator may read in one round (the rest wait for the next).
const PAGES_PER_ROUND: u32 = 10;
/// The longest wait between rounds.
const IDLE: Duration = Duration::from_secs(1);
/// How long ago a run must have ended to be read (see `evaluate_page`).
const SETTLED: Duration = Duration::from_secs(2);
/// The shortest time between two rounds (status changes come in bursts).
const SETTLE: Duration = Duration::from_millis(100);

pub(super) fn start(engine: Engine) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut events = engine.subscribe();
        loop {
            if let Err(e) = engine.evaluate_round().await {
                tracing::warn!(error = %e, "an online evaluation round failed; it is tried again");
            }
            let wake = async {
                loop {
                    match events.recv().await {
                        Ok(event) if matches!(event.kind, crate::model::EventKind::RunFinished { .. }) => return,
                        Ok(_) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
                    }
                }
            };
            let woken = engine.drivers.evaluators.notified();
            tokio::select! {
                _ = tokio::time::timeout(IDLE, wake) => {}
                _ = woken => {}
            }
            tokio::time::sleep(SETTLE).await;
        }
    })
}

/// Who an evaluator's scores are by.
fn evaluator_actor(w: &WatchingEvaluator) -> Actor {
    Actor { id: format!("evaluator:{}", w.evaluator.id), name: format!("evaluator {}", w.evaluator.name) }
}

impl Engine {
    /// Wakes the evaluators' worker (an evaluator was made or changed).
    pub(super) fn wake_evaluators(&self) {
        self.drivers.evaluators.notify_one();
    }

    /// One round: each evaluator that is on reads what ended since its cursor.
    async fn evaluate_round(&self) -> Result<()> {
        for watching in self.rt.store.evaluators().enabled_evaluators().await? {
            let mut watching = watching;
            for _ in 0..PAGES_PER_ROUND {
                match self.evaluate_page(&watching).await? {
                    Some(next) => watching.cursor = next,
                    None => break,
                }
            }
        }
        Ok(())
    }

    /// Scores the next page of `w`'s runs and moves its cursor past them;
    /// the new cursor, or `None` when there was nothing more (or another
    /// server moved the cursor first).
    async fn evaluate_page(&self, w: &WatchingEvaluator) -> Result<Option<EvaluatorCursor>> {
        // Runs that ended a moment ago may still be committing (their end time
        // is taken before the write, and servers commit in any order): the
        // cursor passes only runs that ended SETTLED ago, so none is skipped.
        let until = to_ms(crate::runtime::now()) - SETTLED.as_millis() as i64;
        let runs = self.rt.store.evaluators().runs_ended_after(&w.project, &w.cursor, until, PAGE).await?;
        let Some(last) = runs.last() else { return Ok(None) };
        let next =
            EvaluatorCursor { at_ms: last.finished_at.map(to_ms).unwrap_or(w.cursor.at_ms), run_id: last.id.clone() };
        let by = evaluator_actor(w);
        let (mut seen, mut scored) = (0u64, 0u64);
        for run in &runs {
            if !self.watches(w, run) {
                continue;
            }
            seen += 1;
            if !in_sample(&w.evaluator.id, &run.id, w.evaluator.sample_percent) {
                continue;
            }
            scored += 1;
            let problems = self.scores().score_each(&w.project, run, &w.evaluator.scorers, None, &by).await?;
            if !problems.is_empty() {
                tracing::debug!(evaluator = %w.evaluator.id, run_id = %run.id, ?problems, "scorers not applied");
            }
        }
        let moved =
            self.rt.store.evaluators().advance_evaluator(&w.evaluator.id, &w.cursor, &next, seen, scored).await?;
        Ok(moved.then_some(next))
    }

    /// Whether `w` watches `run`: ended, of its target, not a judge's run.
    fn watches(&self, w: &WatchingEvaluator, run: &Run) -> bool {
        run.status.is_terminal()
            && !run.tags.contains_key(crate::engine::JUDGE_TAG)
            && w.evaluator.target.matches(
                run.agent_id.as_deref(),
                &run.tags,
                run.source.as_ref().and_then(|s| s.service.as_deref()),
            )
    }
}
