//! Experiments (see [`crate::model::experiment`]): start one over a dataset
//! version, read its progress, rows and scores, compare two, cancel one.
//!
//! A started experiment is driven by a task of its own (`drive`), here or,
//! after a restart, by recovery ([`Experiments::resume_running`]). The
//! driver keeps at most `concurrency` of its runs active: it starts the
//! next items in the dataset's order (each run stored with the experiment
//! and the item, whose unique index lets an item run once whatever races
//! it), scores each run that has ended (a scorer's score is kept once per
//! run, so scoring again after a crash adds nothing), and ends the
//! experiment `done` once every item has run and been scored. Everything
//! it knows it reads from the store, so a restart carries on where the
//! last process stopped: kill it mid-way and each item still runs once.
//!
//! Every item's run is checked before anything is stored (the run each
//! item stands for, as create-run checks it), so an experiment that could
//! not run an item is refused whole, naming the item.

use std::collections::{BTreeMap, HashMap};

use super::Engine;
use crate::error::{EngineError, Result};
use crate::model::limits::{self, MAX_NAME_CHARS};
use crate::model::{
    Actor, CreateRun, DatasetItem, Experiment, ExperimentLink, ExperimentPage, ExperimentProgress, ExperimentReport,
    ExperimentRow, ExperimentRows, ExperimentStatus, MessageBody, NewExperiment, RunStatus, RunTools, ScoreBucket,
    ScoreSummary, ScoreValue, ScorerAggregate, ToolMode, Usage,
};
use crate::runtime::{now, Resolved};

mod compare;
mod driver;
mod fixture;
mod sets;

crate::engine::facade_group!(Experiments, experiments, "Experiments: an agent run over a dataset version, scored.");

/// Items read from the dataset at a time.
const ITEM_PAGE: u32 = 200;
/// Distinct (scorer, value) pairs an experiment's report reads, at most.
const MAX_SCORE_VALUES: u32 = 5000;
/// Bars of a number scorer's distribution.
const BUCKETS: usize = 10;

fn not_found(id: &str) -> EngineError {
    EngineError::NotFound(format!("experiment `{}`", id.chars().take(limits::MAX_ID_CHARS).collect::<String>()))
}

/// The human message an item's run answers.
fn prompt_of(item: &DatasetItem) -> String {
    match (&item.input.prompt, &item.input.input_items) {
        (Some(p), _) => p.clone(),
        (None, Some(items)) => match items.last() {
            Some(MessageBody::Human { message }) => message.clone(),
            _ => String::new(),
        },
        (None, None) => String::new(),
    }
}

/// `"{experiment} · {prompt}"`, cut to fit a run's name.
fn run_name(experiment: &str, item: &DatasetItem) -> String {
    let name = format!("{experiment} · {}", crate::runtime::create::name_from(prompt_of(item).trim()));
    if name.chars().count() <= MAX_NAME_CHARS {
        return name;
    }
    name.chars().take(MAX_NAME_CHARS - 1).collect::<String>() + "…"
}

impl Engine {
    /// The run item `item` of `exp` stands for, checked as create-run
    /// checks it (`Invalid` names the problem), not stored.
    async fn item_run(
        &self,
        exp: &Experiment,
        agent: Option<&Resolved>,
        item: &DatasetItem,
        by: &Actor,
    ) -> Result<(crate::model::Run, Vec<crate::model::Message>)> {
        let spec = &exp.spec;
        let req = CreateRun {
            name: Some(run_name(&exp.name, item)),
            agent_id: spec.agent_id.clone(),
            agent_version: spec.agent_version,
            model: spec.model.clone(),
            model_settings: spec.model_settings.clone(),
            system_prompt: spec.system_prompt.clone(),
            tools: spec.tools.clone(),
            max_turns: spec.max_turns,
            ..item.input.run_request()
        };
        let (mut run, messages) = self.prepare_run(req, &exp.project, Some(by), agent, false).await?;
        run.experiment = Some(ExperimentLink { experiment_id: exp.id.clone(), item_id: item.id.clone() });
        run.tool_answers = match spec.tool_mode {
            ToolMode::Recorded => Some(RunTools::Recorded { results: item.recorded_results.clone() }),
            ToolMode::Mock => Some(RunTools::Mock { mocks: spec.mocks.clone() }),
            ToolMode::Live => None,
        };
        Ok((run, messages))
    }

    /// The agent `exp` runs, at its fixed version.
    async fn experiment_agent(&self, exp: &Experiment) -> Result<Option<Resolved>> {
        match &exp.spec.agent_id {
            Some(id) => Ok(Some(self.rt.resolve_agent(&exp.project, id, exp.spec.agent_version, "agent_id").await?)),
            None => Ok(None),
        }
    }

    /// Who an experiment's runs and scores are by: the person who started it.
    fn experiment_actor(exp: &Experiment) -> Actor {
        exp.created_by.clone()
    }
}

impl Experiments<'_> {
    /// Starts `req` over its dataset version in `project` (see the module
    /// docs): `NotFound` for a dataset not of `project`, `Invalid` naming
    /// what cannot run (an item among them), and nothing is stored then.
    pub async fn start(self, project: &str, req: NewExperiment, by: &Actor) -> Result<Experiment> {
        let exp = self.prepare(project, req, by, None).await?;
        self.launch(exp, by).await
    }

    /// Checks `req` and every item's run as [`Self::start`] does, and
    /// returns the experiment it would keep (in set `set_id`, when given);
    /// nothing is stored.
    async fn prepare(
        self,
        project: &str,
        mut req: NewExperiment,
        by: &Actor,
        set_id: Option<&str>,
    ) -> Result<Experiment> {
        if let Some(problem) = req.problem() {
            return Err(EngineError::Invalid(problem));
        }
        for (i, named) in req.scorers.iter().enumerate() {
            self.scores()
                .check_scorer(&named.scorer)
                .map_err(|e| EngineError::Invalid(format!("scorers[{i}]: {e}")))?;
        }
        let dataset = self.datasets().get(project, &req.dataset_id).await?;
        let version = req.dataset_version.unwrap_or(dataset.version);
        if version == 0 {
            return Err(EngineError::Invalid(format!(
                "dataset_id: dataset `{}` has no items yet; add some first",
                dataset.name
            )));
        }
        if version > dataset.version {
            return Err(EngineError::Invalid(format!(
                "dataset_version: dataset `{}` is at version {}; ask for 1 to {}",
                dataset.name, dataset.version, dataset.version
            )));
        }
        if let Some(model) = &req.model {
            if self.rt.models.get(model).is_none() {
                return Err(EngineError::Invalid(format!(
                    "model: unknown model `{model}`; available: {}",
                    self.rt.models.names().join(", ")
                )));
            }
        }
        let known = self.rt.tools.view(project);
        if let Some(i) = req.mocks.iter().position(|m| !known.contains(&m.tool)) {
            return Err(EngineError::Invalid(format!("mocks[{i}].tool: no tool `{}` here", req.mocks[i].tool)));
        }
        let agent = match &req.agent_id {
            Some(id) => Some(self.rt.resolve_agent(project, id, req.agent_version, "agent_id").await?),
            None => None,
        };
        // One agent version for every item, even if the agent changes meanwhile.
        if let Some(agent) = &agent {
            req.agent_id = Some(agent.agent_id.clone());
            req.agent_version = Some(agent.version);
        }
        let name = match req.name.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
            Some(name) => name.to_owned(),
            None => {
                let what = match (&agent, &req.model) {
                    (Some(a), _) => format!("{} v{}", a.spec.name, a.version),
                    (None, Some(model)) => model.clone(),
                    (None, None) => "run".into(),
                };
                format!("{what} on {} v{version}", dataset.name)
            }
        };
        let mut exp = Experiment {
            id: uuid::Uuid::now_v7().to_string(),
            project: project.to_owned(),
            name,
            dataset_id: dataset.id.clone(),
            dataset_name: dataset.name.clone(),
            dataset_version: version,
            item_count: 0,
            status: ExperimentStatus::Running,
            spec: req,
            created_by: by.clone(),
            created_at: now(),
            finished_at: None,
            set_id: set_id.map(str::to_owned),
        };
        // Every item's run is checked before anything is kept.
        let mut after: Option<String> = None;
        loop {
            let page =
                self.rt.store.datasets().dataset_items(&dataset.id, version, after.as_deref(), ITEM_PAGE).await?;
            for item in &page {
                self.item_run(&exp, agent.as_ref(), item, by).await.map_err(|e| match e {
                    EngineError::Invalid(why) => {
                        EngineError::Invalid(format!("item `{}` of dataset `{}`: {why}", item.id, dataset.name))
                    }
                    other => other,
                })?;
            }
            exp.item_count += page.len() as u32;
            if page.len() < ITEM_PAGE as usize {
                break;
            }
            after = page.last().map(|i| i.id.clone());
        }
        Ok(exp)
    }

    /// Keeps prepared `exp`, audits it and starts its driver.
    async fn launch(self, exp: Experiment, by: &Actor) -> Result<Experiment> {
        self.rt.store.experiments().insert_experiment(&exp).await?;
        let detail =
            format!("{} on {} v{} ({} items)", exp.name, exp.dataset_name, exp.dataset_version, exp.item_count);
        self.identity().audit(Some(&exp.project), by, "experiment_started", Some(&exp.id), Some(detail)).await;
        self.0.clone().drive_experiment(exp.clone());
        Ok(exp)
    }

    /// Drives every experiment left running by a previous process; how
    /// many were picked up.
    pub async fn resume_running(self) -> Result<usize> {
        let running = self.rt.store.experiments().running_experiments().await?;
        let n = running.len();
        for exp in running {
            self.0.clone().drive_experiment(exp);
        }
        Ok(n)
    }

    /// Experiment `id` of `project`.
    pub async fn get(self, project: &str, id: &str) -> Result<Experiment> {
        if id.is_empty() || id.chars().count() > limits::MAX_ID_CHARS {
            return Err(not_found(id));
        }
        self.rt.store.experiments().experiment(project, id).await?.ok_or_else(|| not_found(id))
    }

    /// `project`'s experiments (of `dataset_id`, when given), newest first,
    /// after the cursor `before`, at most `limit`.
    pub async fn list(
        self,
        project: &str,
        dataset_id: Option<&str>,
        before: Option<&str>,
        limit: u32,
    ) -> Result<ExperimentPage> {
        let limit = limit.clamp(1, limits::MAX_LIST_LIMIT);
        let mut experiments = self.rt.store.experiments().experiments(project, dataset_id, before, limit + 1).await?;
        let next_cursor = if experiments.len() > limit as usize {
            experiments.truncate(limit as usize);
            experiments.last().map(|e| e.id.clone())
        } else {
            None
        };
        Ok(ExperimentPage { experiments, next_cursor })
    }

    /// Cancels running experiment `id` of `project`: items not started
    /// never will be, and its active runs are cancelled. `Conflict` when it
    /// has already ended.
    pub async fn cancel(self, project: &str, id: &str, by: &Actor) -> Result<Experiment> {
        let exp = self.get(project, id).await?;
        if !self.rt.store.experiments().finish_experiment(id, ExperimentStatus::Cancelled, now()).await? {
            return Err(EngineError::Conflict(format!("experiment `{id}` has ended ({})", exp.status.as_str())));
        }
        self.0.cancel_active_runs(id).await?;
        self.identity().audit(Some(project), by, "experiment_cancelled", Some(id), Some(exp.name.clone())).await;
        self.get(project, id).await
    }

    /// Experiment `id` of `project` with its progress, usage, cost and
    /// each scorer's aggregate and distribution.
    pub async fn report(self, project: &str, id: &str) -> Result<ExperimentReport> {
        let experiment = self.get(project, id).await?;
        let store = self.rt.store.experiments();
        let mut progress = ExperimentProgress { items: experiment.item_count, ..Default::default() };
        for run in store.item_runs(id).await? {
            progress.started += 1;
            match run.status {
                RunStatus::Pending | RunStatus::Running => progress.running += 1,
                RunStatus::Paused => progress.waiting += 1,
                RunStatus::Done => progress.done += 1,
                RunStatus::Failed => progress.failed += 1,
                RunStatus::Cancelled => progress.cancelled += 1,
            }
        }
        let pricing = self.traces().pricing(project).await?;
        let mut usage = Usage::default();
        let mut cost = Some(0.0);
        for (model, u) in store.usage_by_model(id).await? {
            usage.add(&u);
            cost = cost.zip(pricing.cost_usd(&model, &u)).map(|(a, b)| a + b);
        }
        let scorers = aggregates(store.score_values(id, MAX_SCORE_VALUES).await?);
        Ok(ExperimentReport { experiment, progress, usage, cost_usd: cost, scorers })
    }

    /// A page of experiment `id`'s items in the dataset's order, after the
    /// item id `after`: each with its run's outcome, scores, usage and cost.
    pub async fn rows(self, project: &str, id: &str, after: Option<&str>, limit: u32) -> Result<ExperimentRows> {
        let exp = self.get(project, id).await?;
        let limit = limit.clamp(1, limits::MAX_LIST_LIMIT);
        let mut items =
            self.rt.store.datasets().dataset_items(&exp.dataset_id, exp.dataset_version, after, limit + 1).await?;
        let next_cursor = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|i| i.id.clone())
        } else {
            None
        };
        let ids: Vec<String> = items.iter().map(|i| i.id.clone()).collect();
        let runs = self.rt.store.experiments().runs_of_items(id, &ids).await?;
        let run_ids: Vec<String> = runs.iter().map(|r| r.id.clone()).collect();
        let mut scores = self.scores().summaries(project, &run_ids).await?;
        let mut by_item: HashMap<String, crate::model::Run> =
            runs.into_iter().filter_map(|r| Some((r.experiment.clone()?.item_id, r))).collect();
        let pricing = self.traces().pricing(project).await?;
        let at = now();
        let rows = items
            .into_iter()
            .map(|item| {
                let run = by_item.remove(&item.id);
                ExperimentRow {
                    input: prompt_of(&item),
                    expected: item.expected.clone(),
                    run_id: run.as_ref().map(|r| r.id.clone()),
                    status: run.as_ref().map(|r| r.status),
                    output: run.as_ref().and_then(|r| match r.output_union()? {
                        crate::model::RunOutput::Structured { value } => Some(value.to_string()),
                        crate::model::RunOutput::LastMessage { message, value } => {
                            message.or_else(|| value.map(|v| v.to_string()))
                        }
                        crate::model::RunOutput::Error { message } => Some(message),
                    }),
                    scores: run.as_ref().and_then(|r| scores.remove(&r.id)).unwrap_or_default(),
                    usage: run.as_ref().map(|r| r.usage).unwrap_or_default(),
                    cost_usd: run.as_ref().and_then(|r| pricing.run_cost_usd(r)),
                    duration_ms: run.as_ref().and_then(|r| r.duration_ms(at)).map(|ms| ms.max(0) as u64),
                    item_id: item.id,
                }
            })
            .collect();
        Ok(ExperimentRows { rows, next_cursor })
    }
}

/// Each scorer's summary and distribution from its (value, count) pairs.
fn aggregates(values: Vec<crate::store::ValueCount>) -> Vec<ScorerAggregate> {
    let mut by_name: BTreeMap<String, Vec<crate::store::ValueCount>> = BTreeMap::new();
    for v in values {
        by_name.entry(v.name.clone()).or_default().push(v);
    }
    by_name
        .into_iter()
        .map(|(name, values)| {
            let count: u32 = values.iter().map(|v| v.count).sum();
            let numbers: Vec<(f64, u32)> = values.iter().filter_map(|v| Some((v.number?, v.count))).collect();
            let weight: u32 = numbers.iter().map(|(_, c)| c).sum();
            let mean =
                (weight > 0).then(|| numbers.iter().map(|(n, c)| n * f64::from(*c)).sum::<f64>() / f64::from(weight));
            let decoded: Vec<(ScoreValue, u32)> = values
                .iter()
                .filter_map(|v| Some((serde_json::from_str::<ScoreValue>(&v.value).ok()?, v.count)))
                .collect();
            let yes = decoded.iter().filter(|(v, _)| *v == ScoreValue::Bool(true)).map(|(_, c)| c).sum();
            let no = decoded.iter().filter(|(v, _)| *v == ScoreValue::Bool(false)).map(|(_, c)| c).sum();
            let labels: Vec<(String, u32)> = decoded
                .iter()
                .filter_map(|(v, c)| match v {
                    ScoreValue::Label(l) => Some((l.clone(), *c)),
                    _ => None,
                })
                .collect();
            let all_numbers = decoded.iter().all(|(v, _)| matches!(v, ScoreValue::Number(_)));
            let distribution = if all_numbers { number_buckets(&numbers) } else { value_buckets(&decoded) };
            ScorerAggregate { summary: ScoreSummary { name, count, mean, labels, yes, no }, distribution }
        })
        .collect()
}

/// Numbers in [`BUCKETS`] equal ranges from the lowest to the highest (one
/// bar when they are all equal).
fn number_buckets(numbers: &[(f64, u32)]) -> Vec<ScoreBucket> {
    let lo = numbers.iter().map(|(n, _)| *n).fold(f64::INFINITY, f64::min);
    let hi = numbers.iter().map(|(n, _)| *n).fold(f64::NEG_INFINITY, f64::max);
    if numbers.is_empty() {
        return Vec::new();
    }
    let show = |n: f64| ScoreValue::Number(n).display();
    if hi - lo < 1e-12 {
        return vec![ScoreBucket { label: show(lo), count: numbers.iter().map(|(_, c)| c).sum() }];
    }
    let width = (hi - lo) / BUCKETS as f64;
    let mut counts = [0u32; BUCKETS];
    for (n, c) in numbers {
        let i = (((n - lo) / width) as usize).min(BUCKETS - 1);
        counts[i] += c;
    }
    (0..BUCKETS)
        .map(|i| {
            let from = lo + width * i as f64;
            ScoreBucket { label: format!("{}–{}", show(from), show(from + width)), count: counts[i] }
        })
        .collect()
}

/// One bar per value (yes, no, a label, a number), most frequent first.
fn value_buckets(values: &[(ScoreValue, u32)]) -> Vec<ScoreBucket> {
    let mut counts: BTreeMap<String, u32> = BTreeMap::new();
    for (v, c) in values {
        *counts.entry(v.display()).or_default() += c;
    }
    let mut bars: Vec<ScoreBucket> = counts.into_iter().map(|(label, count)| ScoreBucket { label, count }).collect();
    bars.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.label.cmp(&b.label)));
    bars.truncate(BUCKETS * 2);
    bars
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_fall_into_ten_ranges_and_values_into_bars() {
        let bars = number_buckets(&[(0.0, 2), (1.0, 3), (0.55, 1)]);
        assert_eq!(bars.len(), BUCKETS);
        assert_eq!(bars[0].count, 2);
        assert_eq!(bars[5].count, 1);
        assert_eq!(bars[9].count, 3);
        assert_eq!(number_buckets(&[(0.5, 4)]), vec![ScoreBucket { label: "0.5".into(), count: 4 }]);
        let bars = value_buckets(&[(ScoreValue::Bool(true), 3), (ScoreValue::Bool(false), 5)]);
        assert_eq!(bars[0], ScoreBucket { label: "no".into(), count: 5 });
        assert_eq!(bars[1], ScoreBucket { label: "yes".into(), count: 3 });
    }
}
