//! Experiments for the pages: the project's experiments (of one dataset,
//! when asked), one experiment's report with a page of its rows, two
//! compared item by item, and the forms that start and cancel one (see
//! `/api/experiments…`).

// A server function's arguments are its form's fields.
#![allow(clippy::too_many_arguments)]

use leptos::prelude::*;
use runlens_engine::model::{
    Experiment, ExperimentComparison, ExperimentReport, ExperimentRows, ExperimentSetReport, Role,
};
use serde::{Deserialize, Serialize};

use super::action_error::ActionError;
use super::agents::AgentChoice;

/// A failed experiment form.
pub type ExperimentError = ActionError<String>;

/// Experiments a list shows at most.
pub const EXPERIMENTS_SHOWN: u32 = 100;
/// Rows the experiment page shows per page.
pub const ROWS_SHOWN: u32 = 50;
/// Items a set's page shows per page (each with every model's row).
pub const SET_ROWS_SHOWN: u32 = 25;

/// What `/experiments` shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExperimentsView {
    pub experiments: Vec<Experiment>,
}

/// What `/experiments/:id` shows: the report, a page of rows, the other
/// experiments of its dataset (to compare with), and the caller's role.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExperimentView {
    pub report: ExperimentReport,
    pub rows: ExperimentRows,
    pub others: Vec<Experiment>,
    pub role: Option<Role>,
}

/// What the dataset page's experiment form offers: the project's agents and
/// the configured models, and the dataset's experiments so far.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExperimentFormOptions {
    pub agents: Vec<AgentChoice>,
    pub models: Vec<String>,
    pub experiments: Vec<Experiment>,
    pub role: Option<Role>,
}

/// The current project's experiments, newest first (of `dataset`, when given).
#[server]
pub async fn get_experiments(dataset: Option<String>) -> Result<ExperimentsView, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(Role::Viewer)?;
    let dataset = super::ssr::non_empty(dataset);
    let page = engine
        .experiments()
        .list(&caller.project, dataset.as_deref(), None, EXPERIMENTS_SHOWN)
        .await
        .map_err(super::ssr::to_server_error)?;
    Ok(ExperimentsView { experiments: page.experiments })
}

/// Experiment `id` of the current project with a page of its rows after
/// item `cursor`; `None` when there is no such experiment.
#[server]
pub async fn get_experiment(id: String, cursor: Option<String>) -> Result<Option<ExperimentView>, ServerFnError> {
    use runlens_engine::EngineError;

    let (engine, caller) = super::ssr::for_project(Role::Viewer)?;
    let experiments = engine.experiments();
    let report = match experiments.report(&caller.project, &id).await {
        Ok(r) => r,
        Err(EngineError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(super::ssr::to_server_error(e)),
    };
    let cursor = super::ssr::non_empty(cursor);
    let rows = experiments
        .rows(&caller.project, &id, cursor.as_deref(), ROWS_SHOWN)
        .await
        .map_err(super::ssr::to_server_error)?;
    let dataset = report.experiment.dataset_id.clone();
    let others = experiments
        .list(&caller.project, Some(&dataset), None, EXPERIMENTS_SHOWN)
        .await
        .map_err(super::ssr::to_server_error)?
        .experiments
        .into_iter()
        .filter(|e| e.id != id)
        .collect();
    Ok(Some(ExperimentView { report, rows, others, role: caller.role_in(&caller.project) }))
}

/// Experiment `id` against `with`, the items of `change` (all when absent)
/// after item `cursor`; `None` when either is not the project's.
#[server]
pub async fn get_experiment_comparison(
    id: String,
    with: String,
    change: Option<String>,
    cursor: Option<String>,
) -> Result<Option<ExperimentComparison>, ServerFnError> {
    use runlens_engine::model::ItemChange;
    use runlens_engine::EngineError;

    let (engine, caller) = super::ssr::for_project(Role::Viewer)?;
    let change = super::ssr::non_empty(change).and_then(|c| ItemChange::parse(&c));
    let cursor = super::ssr::non_empty(cursor);
    match engine.experiments().compare(&caller.project, &id, &with, change, cursor.as_deref(), ROWS_SHOWN).await {
        Ok(cmp) => Ok(Some(cmp)),
        Err(EngineError::NotFound(_)) => Ok(None),
        Err(e) => Err(super::ssr::to_server_error(e)),
    }
}

/// The dataset page's experiment form: agents, models, and the dataset's experiments.
#[server]
pub async fn get_experiment_form(dataset: String) -> Result<ExperimentFormOptions, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(Role::Viewer)?;
    let agents =
        super::agents::project_agent_choices(&engine, &caller.project).await.map_err(super::ssr::to_server_error)?;
    let experiments = engine
        .experiments()
        .list(&caller.project, Some(&dataset), None, EXPERIMENTS_SHOWN)
        .await
        .map_err(super::ssr::to_server_error)?
        .experiments;
    Ok(ExperimentFormOptions { agents, models: engine.models(), experiments, role: caller.role_in(&caller.project) })
}

/// Starts an experiment over dataset `dataset_id` (operators), then goes to
/// it. `run_with` is `agent:ID` (its current version) or `model:NAME`;
/// `scorer` one of `contains`, `exact`, `tool_calls`, `judge:MODEL` (an LLM
/// as judge of `rubric`) or empty (none). With `models`, a set of one
/// experiment per model (the `run_with` model first; an agent runs on each
/// of them), then goes to the set.
#[server]
pub async fn start_experiment(
    dataset_id: String,
    run_with: String,
    tool_mode: String,
    scorer: String,
    concurrency: Option<u32>,
    name: Option<String>,
    rubric: Option<String>,
    #[server(default)] models: Vec<String>,
) -> Result<String, ExperimentError> {
    use super::ssr::form_failed;
    use runlens_engine::model::{NewExperiment, ToolMode};

    let (engine, caller) = super::ssr::form_caller(Role::Operator)?;
    let invalid = |why: &str| super::ssr::form_invalid(why);
    let mut req = NewExperiment { dataset_id, name: super::ssr::non_empty(name), concurrency, ..Default::default() };
    match run_with.split_once(':') {
        Some(("agent", id)) if !id.is_empty() => req.agent_id = Some(id.to_owned()),
        Some(("model", name)) if !name.is_empty() => req.model = Some(name.to_owned()),
        _ => return Err(invalid("run with: choose an agent or a model")),
    }
    req.tool_mode = match tool_mode.as_str() {
        "recorded" => ToolMode::Recorded,
        "live" => ToolMode::Live,
        _ => return Err(invalid("tools: choose recorded or live")),
    };
    let named = match scorer.split_once(':') {
        None if scorer.is_empty() => None,
        None if ["contains", "exact", "tool_calls"].contains(&scorer.as_str()) => {
            Some(serde_json::json!({"name": scorer, "scorer": {"kind": scorer}}))
        }
        Some(("judge", model)) if !model.is_empty() => {
            let Some(rubric) = super::ssr::non_empty(rubric) else {
                return Err(invalid("rubric: say what a good answer is, for the judge"));
            };
            Some(serde_json::json!({"name": "judge", "scorer": {"kind": "judge", "rubric": rubric, "model": model}}))
        }
        _ => return Err(invalid("scorer: choose one of the list")),
    };
    if let Some(named) = named {
        req.scorers = vec![serde_json::from_value(named).map_err(|e| invalid(&e.to_string()))?];
    }
    if !models.is_empty() {
        let mut all: Vec<String> = req.model.take().into_iter().collect();
        for m in models {
            if !all.contains(&m) {
                all.push(m);
            }
        }
        let set = runlens_engine::model::NewExperimentSet { models: all, experiment: req };
        let set = engine
            .experiments()
            .start_set(&caller.project, set, &caller.actor)
            .await
            .map_err(|e| form_failed(e, "starting experiments"))?;
        leptos_axum::redirect(&format!("/experiments/sets/{}", crate::format::url_encode(&set.set_id)));
        return Ok(set.set_id);
    }
    let exp = engine
        .experiments()
        .start(&caller.project, req, &caller.actor)
        .await
        .map_err(|e| form_failed(e, "starting an experiment"))?;
    leptos_axum::redirect(&format!("/experiments/{}", crate::format::url_encode(&exp.id)));
    Ok(exp.id)
}

/// What `/experiments/sets/:id` shows: each experiment's report, and a
/// page of each one's rows (the same items, after item `cursor`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExperimentSetView {
    pub set: ExperimentSetReport,
    pub rows: Vec<ExperimentRows>,
}

/// Set `id` of the current project with a page of each experiment's rows
/// after item `cursor`; `None` when there is no such set.
#[server]
pub async fn get_experiment_set(
    id: String,
    cursor: Option<String>,
) -> Result<Option<ExperimentSetView>, ServerFnError> {
    use runlens_engine::EngineError;

    let (engine, caller) = super::ssr::for_project(Role::Viewer)?;
    let experiments = engine.experiments();
    let set = match experiments.set_report(&caller.project, &id).await {
        Ok(set) => set,
        Err(EngineError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(super::ssr::to_server_error(e)),
    };
    let cursor = super::ssr::non_empty(cursor);
    let mut rows = Vec::with_capacity(set.reports.len());
    for r in &set.reports {
        let page = experiments.rows(&caller.project, &r.experiment.id, cursor.as_deref(), SET_ROWS_SHOWN).await;
        rows.push(page.map_err(super::ssr::to_server_error)?);
    }
    Ok(Some(ExperimentSetView { set, rows }))
}

/// Cancels running experiment `id` (operators).
#[server]
pub async fn cancel_experiment(id: String) -> Result<(), ExperimentError> {
    use super::ssr::form_failed;

    let (engine, caller) = super::ssr::form_caller(Role::Operator)?;
    engine
        .experiments()
        .cancel(&caller.project, &id, &caller.actor)
        .await
        .map_err(|e| form_failed(e, "cancelling an experiment"))?;
    Ok(())
}
