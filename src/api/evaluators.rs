//! Online evaluators for the pages: the project's evaluators with what
//! the form offers, and the forms that make, turn off or on, and delete one
//! (see `/api/evaluators…`).

use leptos::prelude::*;
use runlens_engine::model::{Evaluator, Role};
use serde::{Deserialize, Serialize};

use super::action_error::ActionError;
use super::agents::AgentChoice;

/// A failed evaluator form.
pub type EvaluatorError = ActionError<String>;

/// What `/evaluators` shows: the evaluators, the agents and models the form
/// offers, and the caller's role.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvaluatorsView {
    pub evaluators: Vec<Evaluator>,
    pub agents: Vec<AgentChoice>,
    pub models: Vec<String>,
    pub role: Option<Role>,
}

/// The current project's evaluators, by name.
#[server]
pub async fn get_evaluators() -> Result<EvaluatorsView, ServerFnError> {
    let (engine, caller) = super::ssr::for_project(Role::Viewer)?;
    let evaluators = engine.evaluators().list(&caller.project).await.map_err(super::ssr::to_server_error)?;
    let agents =
        super::agents::project_agent_choices(&engine, &caller.project).await.map_err(super::ssr::to_server_error)?;
    Ok(EvaluatorsView { evaluators, agents, models: engine.models(), role: caller.role_in(&caller.project) })
}

/// Makes an evaluator (operators). `watch` is `all`, `agent:ID`, `tag` (with
/// `tag` as `key:value`) or `service` (with `service`); `scorer` is
/// `judge:MODEL` (judging `setting`, the rubric), `not_contains` or
/// `contains` (of `setting`), `regex` (`setting` the pattern) or
/// `max_turns` (`setting` the bound).
#[server]
pub async fn create_evaluator(
    name: String,
    watch: String,
    tag: Option<String>,
    service: Option<String>,
    sample_percent: u8,
    scorer: String,
    setting: Option<String>,
) -> Result<String, EvaluatorError> {
    use super::ssr::{form_failed, non_empty};
    use runlens_engine::model::{EvaluatorTarget, NewEvaluator};
    use serde_json::json;

    let (engine, caller) = super::ssr::form_caller(Role::Operator)?;
    let invalid = |why: &str| super::ssr::form_invalid(why);
    let target = match watch.split_once(':') {
        _ if watch == "all" => EvaluatorTarget::default(),
        Some(("agent", id)) if !id.is_empty() => {
            EvaluatorTarget { agent_id: Some(id.to_owned()), ..Default::default() }
        }
        _ if watch == "tag" => {
            let tag = non_empty(tag).ok_or_else(|| invalid("tag: give the runs' tag as key:value"))?;
            EvaluatorTarget { tag: Some(crate::format::key_value(tag.trim())), ..Default::default() }
        }
        _ if watch == "service" => {
            let service = non_empty(service).ok_or_else(|| invalid("service: give the service's name"))?;
            EvaluatorTarget { service: Some(service.trim().to_owned()), ..Default::default() }
        }
        _ => return Err(invalid("watch: choose which runs")),
    };
    let setting = non_empty(setting).map(|s| s.trim().to_owned());
    let needs = |what: &str| setting.clone().ok_or_else(|| invalid(&format!("setting: give {what}")));
    let named = match scorer.split_once(':') {
        Some(("judge", model)) if !model.is_empty() => {
            json!({"name": "judge", "scorer": {"kind": "judge", "rubric": needs("the judge's rubric")?, "model": model}})
        }
        None if scorer == "contains" || scorer == "not_contains" => {
            json!({"name": scorer, "scorer": {"kind": scorer, "expected": needs("the text")?}})
        }
        None if scorer == "regex" => {
            json!({"name": "regex", "scorer": {"kind": "regex", "pattern": needs("the pattern")?}})
        }
        None if scorer == "max_turns" => {
            let turns: u32 =
                needs("the most turns")?.parse().map_err(|_| invalid("setting: the most turns, a number"))?;
            json!({"name": "turns", "scorer": {"kind": "bounds", "max_turns": turns}})
        }
        _ => return Err(invalid("scorer: choose one of the list")),
    };
    let req = NewEvaluator {
        name,
        target,
        sample_percent,
        scorers: vec![serde_json::from_value(named).map_err(|e| invalid(&e.to_string()))?],
        enabled: true,
    };
    let made = engine
        .evaluators()
        .create(&caller.project, req, &caller.actor)
        .await
        .map_err(|e| form_failed(e, "making an evaluator"))?;
    Ok(made.id)
}

/// Turns evaluator `id` on or off (operators).
#[server]
pub async fn switch_evaluator(id: String, enabled: bool) -> Result<(), EvaluatorError> {
    use super::ssr::form_failed;
    use runlens_engine::model::NewEvaluator;

    let (engine, caller) = super::ssr::form_caller(Role::Operator)?;
    let evaluators = engine.evaluators();
    let was = evaluators.get(&caller.project, &id).await.map_err(|e| form_failed(e, "reading an evaluator"))?;
    let req = NewEvaluator {
        name: was.name,
        target: was.target,
        sample_percent: was.sample_percent,
        scorers: was.scorers,
        enabled,
    };
    evaluators
        .update(&caller.project, &id, req, &caller.actor)
        .await
        .map_err(|e| form_failed(e, "changing an evaluator"))?;
    Ok(())
}

/// Deletes evaluator `id` (operators); its scores stay.
#[server]
pub async fn remove_evaluator(id: String) -> Result<(), EvaluatorError> {
    use super::ssr::form_failed;

    let (engine, caller) = super::ssr::form_caller(Role::Operator)?;
    engine
        .evaluators()
        .delete(&caller.project, &id, &caller.actor)
        .await
        .map_err(|e| form_failed(e, "deleting an evaluator"))?;
    Ok(())
}
