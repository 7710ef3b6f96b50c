//! Experiments of several models (see [`crate::model::NewExperimentSet`]):
//! every model's experiment is checked, items and all, before any is
//! kept, so a set starts whole or not at all; each is then an ordinary
//! experiment with its own driver.

use crate::error::{EngineError, Result};
use crate::model::{limits, Actor, ExperimentSet, ExperimentSetReport, NewExperimentSet};

impl super::Experiments<'_> {
    /// Starts one experiment per model of `req` in `project`: `Invalid`
    /// naming the model whose experiment cannot run, and nothing kept then.
    pub async fn start_set(self, project: &str, req: NewExperimentSet, by: &Actor) -> Result<ExperimentSet> {
        if let Some(problem) = req.problem() {
            return Err(EngineError::Invalid(problem));
        }
        let set_id = uuid::Uuid::now_v7().to_string();
        let mut prepared = Vec::with_capacity(req.models.len());
        for (i, model) in req.models.iter().enumerate() {
            let exp = self.prepare(project, req.for_model(i), by, Some(&set_id)).await.map_err(|e| match e {
                EngineError::Invalid(why) if why.starts_with("model:") => {
                    EngineError::Invalid(format!("models[{i}]: {}", why.trim_start_matches("model:").trim()))
                }
                EngineError::Invalid(why) => EngineError::Invalid(format!("experiment (with model `{model}`): {why}")),
                other => other,
            })?;
            prepared.push(exp);
        }
        let mut experiments = Vec::with_capacity(prepared.len());
        for exp in prepared {
            experiments.push(self.launch(exp, by).await?);
        }
        Ok(ExperimentSet { set_id, experiments })
    }

    /// Set `set_id` of `project`: each experiment's report, oldest first
    /// (the order the models were given). `NotFound` for a set of another project.
    pub async fn set_report(self, project: &str, set_id: &str) -> Result<ExperimentSetReport> {
        let missing = || {
            EngineError::NotFound(format!(
                "experiment set `{}`",
                set_id.chars().take(limits::MAX_ID_CHARS).collect::<String>()
            ))
        };
        if set_id.is_empty() || set_id.chars().count() > limits::MAX_ID_CHARS {
            return Err(missing());
        }
        let experiments = self.rt.store.experiments().experiments_in_set(project, set_id).await?;
        if experiments.is_empty() {
            return Err(missing());
        }
        let mut reports = Vec::with_capacity(experiments.len());
        for exp in experiments {
            reports.push(self.report(project, &exp.id).await?);
        }
        Ok(ExperimentSetReport { set_id: set_id.to_owned(), reports })
    }
}
