//! Comparison groups: one run configuration started on several models at
//! once ([`Comparisons::create_batch`], `POST /api/runs/batch`), and a group read
//! back as the compare page's summary row ([`Comparisons::compare_group`],
//! `GET /api/compare/groups/{id}`).
//!
//! A batch is checked whole before anything is stored, so a bad one changes
//! nothing: 1 to [`MAX_BATCH_MODELS`] distinct configured models, no `id`
//! or `model` in the body (each run gets a new id, and its model from
//! `models`), the settings valid for every model, and every run as
//! create-run checks it. Then one run per model, in the order of `models`,
//! each named `"{name} · {model}"` (the name defaulting as create-run's
//! does) and all carrying one new group id, is stored with its first
//! messages in one transaction ([`RunStore::insert_runs`]), and only then
//! are they started. A group is thus whole or absent: a store error (logged;
//! the client sees a 500) or a crash before the commit leaves no run of it,
//! and a crash after it leaves every run, `pending` ones started by recovery.
//!
//! A group lists its runs in the order they were created, which is the
//! order of `models` (ids are UUIDv7, increasing within a process, and
//! break a tie of `created_at`), each with its cost at the project's prices
//! today and its duration so far.
//!
//! [`RunStore::insert_runs`]: crate::store::RunStore::insert_runs

use std::collections::HashSet;

use chrono::Utc;

use super::Engine;
use crate::cost::Pricing;
use crate::error::{EngineError, Result};
use crate::model::limits::{self, MAX_ID_CHARS, MAX_NAME_CHARS};
use crate::model::{Actor, BatchCreated, BatchRuns, CompareGroup, CreateRun, GroupMember, Run, MAX_BATCH_MODELS};

/// Runs read of one group, at most: a batch makes no more.
const GROUP_READ_LIMIT: u32 = MAX_BATCH_MODELS as u32;

fn invalid(why: impl Into<String>) -> EngineError {
    EngineError::Invalid(why.into())
}

impl Engine {
    /// 1 to [`MAX_BATCH_MODELS`] distinct configured models.
    fn check_models(&self, models: &[String]) -> Result<()> {
        if models.is_empty() {
            return Err(invalid(format!("models must name 1 to {MAX_BATCH_MODELS} models; it is empty")));
        }
        if models.len() > MAX_BATCH_MODELS {
            return Err(invalid(format!(
                "models names {} models; a batch starts at most {MAX_BATCH_MODELS}",
                models.len()
            )));
        }
        let mut seen = HashSet::new();
        for (i, name) in models.iter().enumerate() {
            limits::check_chars(&format!("models[{i}]"), name, MAX_ID_CHARS).map_err(invalid)?;
            if !seen.insert(name.as_str()) {
                return Err(invalid(format!("models[{i}]: `{name}` is named twice; each model runs once")));
            }
            if self.rt.models.get(name).is_none() {
                return Err(invalid(format!(
                    "unknown model `{name}` (models[{i}]); available: {}",
                    self.rt.models.names().join(", ")
                )));
            }
        }
        Ok(())
    }
}

/// `"{base} · {model}"`, the base cut (with `…`) so the whole fits a run's name.
fn member_name(base: &str, model: &str) -> String {
    let suffix = format!(" · {model}");
    let room = MAX_NAME_CHARS.saturating_sub(suffix.chars().count());
    if base.chars().count() <= room {
        return format!("{base}{suffix}");
    }
    let cut: String = base.chars().take(room.saturating_sub(1)).collect();
    format!("{}…{suffix}", cut.trim_end())
}

fn member(run: &Run, pricing: &Pricing, now: chrono::DateTime<Utc>) -> GroupMember {
    GroupMember {
        run_id: run.id.clone(),
        name: run.name.clone(),
        model: run.model.clone(),
        status: run.status,
        result: run.result.clone(),
        failure_reason: run.failure_reason.clone(),
        step_count: run.step_count,
        usage: run.usage,
        cost_usd: pricing.run_cost_usd(run),
        duration_ms: run.duration_ms(now).map(|ms| ms.max(0) as u64),
    }
}

impl crate::engine::Comparisons<'_> {
    /// Starts `req`'s run on each of its models in `project`, as one
    /// comparison group (see the module docs). `Invalid` names the problem
    /// and nothing is created.
    pub async fn create_batch(self, project: &str, req: BatchRuns, by: Option<&Actor>) -> Result<BatchCreated> {
        let BatchRuns { run: base, models } = req;
        self.check_models(&models)?;
        if base.id.is_some() {
            return Err(invalid("id must be absent: every run of a batch gets a new id"));
        }
        if base.model.is_some() {
            return Err(invalid("model must be absent: a batch names its models in `models`"));
        }
        if let Some(name) = &base.name {
            limits::check_chars("name", name, MAX_NAME_CHARS).map_err(invalid)?;
        }
        // One agent version for every run, even if the agent changes meanwhile.
        let agent = self.request_agent(project, &base).await?;
        let settings = (base.model_settings.clone())
            .or_else(|| agent.as_ref().and_then(|a| a.spec.model_settings.clone()))
            .unwrap_or_default();
        for (i, name) in models.iter().enumerate() {
            if let Some(model) = self.rt.models.get(name) {
                model
                    .validate_settings(&settings)
                    .map_err(|why| invalid(format!("{why} (for models[{i}], `{name}`)")))?;
            }
        }
        let base_name = (base.name.as_deref().map(str::trim).filter(|n| !n.is_empty()).map(str::to_owned))
            .unwrap_or_else(|| crate::runtime::create::name_from(base.initial_prompt.trim()));
        let group_id = uuid::Uuid::now_v7().to_string();
        let mut prepared = Vec::with_capacity(models.len());
        for model in &models {
            let req =
                CreateRun { model: Some(model.clone()), name: Some(member_name(&base_name, model)), ..base.clone() };
            let (mut run, messages) = self.prepare_run(req, project, by, agent.as_ref(), false).await?;
            run.group_id = Some(group_id.clone());
            prepared.push((run, messages));
        }
        if !self.rt.store.insert_runs(&prepared).await? {
            // Not expected: every id is a new UUIDv7.
            return Err(EngineError::Internal(format!(
                "the batch of group `{group_id}` was not stored: one of its new run ids was taken"
            )));
        }
        let runs: Vec<Run> = prepared.into_iter().map(|(run, _)| run).collect();
        for run in &runs {
            self.spawn(run.id.clone());
        }
        Ok(BatchCreated { group_id, runs })
    }

    /// Comparison group `id`: its runs in the order of the batch's
    /// `models`, each with its outcome, usage, cost and duration.
    /// `NotFound` when no run is in it.
    pub async fn compare_group(self, id: &str) -> Result<CompareGroup> {
        let cut: String = id.chars().take(MAX_ID_CHARS).collect();
        let not_found = || EngineError::NotFound(format!("comparison group `{cut}`"));
        if id.is_empty() || cut.len() < id.len() {
            return Err(not_found());
        }
        let runs = self.rt.store.group_runs(id, GROUP_READ_LIMIT).await?;
        let Some(first) = runs.first() else { return Err(not_found()) };
        let (project, created_at) = (first.project.clone(), first.created_at);
        let pricing = self.traces().pricing(&project).await?;
        let now = Utc::now();
        let members = runs.iter().filter(|r| r.project == project).map(|r| member(r, &pricing, now)).collect();
        Ok(CompareGroup { id: id.to_owned(), project, created_at, members })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_names_fit_a_run_name() {
        assert_eq!(member_name("What is 2+2?", "builtin"), "What is 2+2? · builtin");
        let long = "x".repeat(MAX_NAME_CHARS);
        let model = "m".repeat(MAX_ID_CHARS);
        let name = member_name(&long, &model);
        assert_eq!(name.chars().count(), MAX_NAME_CHARS);
        assert!(name.ends_with(&format!("… · {model}")), "{name}");
    }
}
