//! Scores on runs: attach one (a person, a program, or a scorer), read a
//! run's, delete one. A score names a run of the caller's project — any run,
//! ingested ones too — and optionally one of its steps or tool calls; a
//! run of another project is "not found", like one that does not exist.
//! Who may score is the server's decision (operators and above); every
//! score added or deleted is audited.

use crate::error::{EngineError, Result};
use crate::model::{
    Actor, EvaluateRun, NewScore, Run, RunOutput, Score, ScoreSource, ScoreSubject, Scorer, SubjectCall, MAX_RUN_SCORES,
};
use crate::runtime::now;
use crate::store::ScoreInsert;

crate::engine::facade_group!(Scores, scores, "Scores attached to runs.");

/// The steps of a run a scorer reads its tool calls from, at most.
pub const MAX_SUBJECT_STEPS: u32 = 10_000;

fn run_not_found(id: &str) -> EngineError {
    EngineError::NotFound(format!("run `{}`", id.chars().take(crate::model::limits::MAX_ID_CHARS).collect::<String>()))
}

/// The score `new` makes, given now by `by` (through `scorer`, if one).
fn new_score(new: NewScore, source: ScoreSource, scorer: Option<&str>, by: &Actor) -> Score {
    Score {
        id: uuid::Uuid::now_v7().to_string(),
        run_id: new.run_id,
        step_index: new.step_index,
        call_id: new.call_id,
        name: new.name,
        value: new.value,
        comment: new.comment.filter(|c| !c.trim().is_empty()),
        source,
        author: by.clone(),
        scorer: scorer.map(str::to_owned),
        label: None,
        judge_run_id: None,
        created_at: now(),
    }
}

/// The score a scorer's `verdict` on run `run_id` makes (the reason, cut
/// to fit, as its comment).
fn scorer_score(run_id: &str, named: &crate::model::NamedScorer, verdict: crate::model::Verdict, by: &Actor) -> Score {
    let mut reason = verdict.reason;
    if reason.chars().count() > crate::model::MAX_SCORE_COMMENT_CHARS {
        reason = reason.chars().take(crate::model::MAX_SCORE_COMMENT_CHARS - 1).collect::<String>() + "…";
    }
    let new = NewScore {
        run_id: run_id.to_owned(),
        step_index: None,
        call_id: None,
        name: named.score_name(),
        value: verdict.value,
        comment: Some(reason),
    };
    let mut score = new_score(new, ScoreSource::Scorer, Some(named.scorer.kind()), by);
    score.label = verdict.label.map(|l| l.chars().take(crate::model::MAX_SCORE_LABEL_CHARS).collect());
    score.judge_run_id = verdict.judge_run_id;
    score
}

impl Scores<'_> {
    /// Run `run_id`'s step count, when the run is `project`'s.
    async fn steps_of(self, project: &str, run_id: &str) -> Result<u32> {
        match self.rt.store.run_head(run_id).await? {
            Some(head) if head.project == project => Ok(head.step_count),
            _ => Err(run_not_found(run_id)),
        }
    }

    /// Keeps `new` on its run of `project` as given by `by` (`source`: a
    /// person in the UI or a program), or by scorer `scorer`. `Invalid` for a
    /// bad score or a step or call the run does not have, `NotFound` for a
    /// run not of `project`, `Conflict` when the run has as many scores as
    /// it may.
    pub async fn add(
        self,
        project: &str,
        new: NewScore,
        source: ScoreSource,
        scorer: Option<&str>,
        by: &Actor,
    ) -> Result<Score> {
        if let Some(problem) = new.problem() {
            return Err(EngineError::Invalid(problem));
        }
        let steps = self.steps_of(project, &new.run_id).await?;
        let mut step_index = new.step_index;
        if let Some(index) = step_index {
            if index >= steps {
                return Err(EngineError::Invalid(format!(
                    "step_index: run `{}` has {steps} steps (0-{})",
                    new.run_id,
                    steps.saturating_sub(1)
                )));
            }
        }
        if let Some(call_id) = &new.call_id {
            let call = self.rt.store.tool_call(&new.run_id, call_id).await?.ok_or_else(|| {
                EngineError::Invalid(format!(
                    "call_id: run `{}` has no tool call `{}`",
                    new.run_id,
                    call_id.chars().take(crate::model::limits::MAX_ID_CHARS).collect::<String>()
                ))
            })?;
            step_index = Some(call.step_index);
        }
        let new = NewScore { step_index, ..new };
        self.keep(project, new_score(new, source, scorer, by), by).await
    }

    /// Stores `score` (checked) on its run of `project` and audits it;
    /// `Conflict` when the run has as many scores as it may.
    async fn keep(self, project: &str, score: Score, by: &Actor) -> Result<Score> {
        let run_id = score.run_id.clone();
        (self.keep_as(project, score, by, false).await?)
            .ok_or_else(|| EngineError::Internal(format!("a score of run `{run_id}` was passed over")))
    }

    /// [`Self::keep`]; with `once`, nothing (`None`) when the run already
    /// has a scorer's score of that name — decided with the insert, so two
    /// servers scoring one run keep one.
    async fn keep_as(self, project: &str, score: Score, by: &Actor, once: bool) -> Result<Option<Score>> {
        match self.rt.store.scores().insert_score(project, &score, MAX_RUN_SCORES, once).await? {
            ScoreInsert::Kept => {}
            ScoreInsert::Already => return Ok(None),
            ScoreInsert::Full => {
                return Err(EngineError::Conflict(format!(
                    "run `{}` has {MAX_RUN_SCORES} scores, the most a run may have",
                    score.run_id
                )))
            }
        }
        let detail = format!("{} = {}", score.name, score.value.display());
        self.identity().audit(Some(project), by, "score_added", Some(&score.run_id), Some(detail)).await;
        Ok(Some(score))
    }

    /// Runs `req.scorers` on run `run_id` of `project` and keeps each
    /// verdict as a score (source `scorer`, the reason as its comment), all
    /// or none: `Invalid` for a scorer that cannot be applied (a bad
    /// configuration, an unknown judge model, no expected value), `Conflict`
    /// while the run has not ended or when a judge gave no verdict (its run
    /// failed: the message names it), `NotFound` for a run not of `project`.
    /// A judge's run is kept whatever the outcome.
    pub async fn evaluate(self, project: &str, run_id: &str, req: EvaluateRun, by: &Actor) -> Result<Vec<Score>> {
        if let Some(problem) = req.problem() {
            return Err(EngineError::Invalid(problem));
        }
        for (i, named) in req.scorers.iter().enumerate() {
            self.check_scorer(&named.scorer).map_err(|e| EngineError::Invalid(format!("scorers[{i}]: {e}")))?;
        }
        let run = match self.rt.store.get_run(run_id).await? {
            Some(run) if run.project == project => run,
            _ => return Err(run_not_found(run_id)),
        };
        if !run.status.is_terminal() {
            return Err(EngineError::Conflict(format!(
                "run `{run_id}` is {}; it is scored once it has ended",
                run.status
            )));
        }
        let subject = self.subject(&run).await?;
        // The computed scorers first: one that cannot be applied refuses
        // the request before any judge's run is started.
        let (judges, computed): (Vec<_>, Vec<_>) =
            req.scorers.iter().enumerate().partition(|(_, n)| matches!(n.scorer, Scorer::Judge { .. }));
        let mut verdicts = Vec::with_capacity(req.scorers.len());
        for (i, named) in computed.into_iter().chain(judges) {
            let verdict = self.verdict(project, &run, named, &subject, req.expected.as_ref(), by).await.map_err(
                |e| match named.scorer {
                    Scorer::Judge { .. } => EngineError::Conflict(format!("scorers[{i}]: {e}")),
                    _ => EngineError::Invalid(format!("scorers[{i}]: {e}")),
                },
            )?;
            verdicts.push((i, named, verdict));
        }
        verdicts.sort_by_key(|(i, ..)| *i);
        let mut kept = Vec::with_capacity(verdicts.len());
        for (_, named, verdict) in verdicts {
            kept.push(self.keep(project, scorer_score(run_id, named, verdict, by), by).await?);
        }
        Ok(kept)
    }

    /// Runs each of `scorers` on the ended run `run` (of `project`) against
    /// `expected`, skipping those whose score (by name, from a scorer) the
    /// run already has, and keeps each verdict as a score unless one of its
    /// name came meanwhile: an experiment's or an evaluator's scoring, which
    /// may be done again after a crash, or by two servers at once, without
    /// scoring twice.
    /// A scorer that gives no verdict (no expected value, a judge whose run
    /// failed) is named in the returned problems, not kept.
    pub(crate) async fn score_each(
        self,
        project: &str,
        run: &Run,
        scorers: &[crate::model::NamedScorer],
        expected: Option<&serde_json::Value>,
        by: &Actor,
    ) -> Result<Vec<String>> {
        let had = self.rt.store.scores().run_scores(&run.id, MAX_RUN_SCORES).await?;
        let todo: Vec<_> = (scorers.iter())
            .filter(|n| !had.iter().any(|s| s.source == ScoreSource::Scorer && s.name == n.score_name()))
            .collect();
        if todo.is_empty() {
            return Ok(Vec::new());
        }
        let subject = self.subject(run).await?;
        let mut problems = Vec::new();
        for named in todo {
            let name = named.score_name();
            match self.verdict(project, run, named, &subject, expected, by).await {
                Ok(verdict) => {
                    self.keep_as(project, scorer_score(&run.id, named, verdict, by), by, true).await?;
                }
                Err(why) => problems.push(format!("{name}: {why}")),
            }
        }
        Ok(problems)
    }

    /// What a scorer judges of `run`: its answer (a structured result as
    /// JSON text; none when it failed), its tool calls in order (of its
    /// first [`MAX_SUBJECT_STEPS`] steps), its active time, cost and turns.
    async fn subject(self, run: &Run) -> Result<ScoreSubject> {
        let output = match run.output_union() {
            Some(RunOutput::Structured { value }) => Some(value.to_string()),
            Some(RunOutput::LastMessage { message, value }) => message.or_else(|| value.map(|v| v.to_string())),
            Some(RunOutput::Error { .. }) | None => None,
        };
        let mut calls = Vec::new();
        let mut from = 0;
        while from < MAX_SUBJECT_STEPS {
            let page = self.rt.store.steps_page(&run.id, from, 200).await?;
            if page.is_empty() {
                break;
            }
            from += page.len() as u32;
            for step in page {
                calls.extend(
                    step.tool_calls.into_iter().map(|c| SubjectCall { name: c.tool_name, arguments: c.arguments }),
                );
            }
        }
        Ok(ScoreSubject {
            output,
            calls,
            duration_ms: run.duration_ms(now()),
            cost_usd: self.traces().run_cost(run).await?,
            turns: run.step_count,
        })
    }

    /// The scores of run `run_id` of `project`, oldest first.
    pub async fn of_run(self, project: &str, run_id: &str) -> Result<Vec<Score>> {
        self.steps_of(project, run_id).await?;
        self.rt.store.scores().run_scores(run_id, MAX_RUN_SCORES).await
    }

    /// The scores of each of `run_ids` (runs of `project`; others have
    /// none), summarized per name: the runs list's column.
    pub async fn summaries(
        self,
        project: &str,
        run_ids: &[String],
    ) -> Result<std::collections::BTreeMap<String, Vec<crate::model::ScoreSummary>>> {
        let mut by_run: std::collections::BTreeMap<String, Vec<_>> = Default::default();
        for (run, summary) in self.rt.store.scores().summaries_of_runs(project, run_ids).await? {
            by_run.entry(run).or_default().push(summary);
        }
        Ok(by_run)
    }

    /// Score `id` of `project`.
    pub async fn get(self, project: &str, id: &str) -> Result<Score> {
        self.rt.store.scores().score(project, id).await?.ok_or_else(|| EngineError::NotFound(format!("score `{id}`")))
    }

    /// Deletes score `id` of `project` (who may is the server's decision).
    pub async fn delete(self, project: &str, id: &str, by: &Actor) -> Result<Score> {
        let score = self.get(project, id).await?;
        if !self.rt.store.scores().delete_score(project, id).await? {
            return Err(EngineError::NotFound(format!("score `{id}`")));
        }
        let detail = format!("{} = {}", score.name, score.value.display());
        self.identity().audit(Some(project), by, "score_deleted", Some(&score.run_id), Some(detail)).await;
        Ok(score)
    }
}
