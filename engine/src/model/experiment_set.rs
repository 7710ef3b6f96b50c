//! Experiments of several models: the same dataset version, settings,
//! tools and scorers run once per model, as one experiment each, kept
//! together by a set id so their results can be read side by side.

use serde::{Deserialize, Serialize};

use super::{Experiment, ExperimentReport, NewExperiment};

/// Models of one set, at most (and at least 2).
pub const MAX_SET_MODELS: usize = 8;

/// The body of `POST /api/experiment-sets`: one experiment per model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewExperimentSet {
    /// 2 to 8 distinct models; each runs every item.
    #[cfg_attr(feature = "openapi", schema(schema_with = models_schema))]
    pub models: Vec<String>,
    /// What every experiment of the set runs, without `model` (the
    /// models above replace it); its `name`, when given, is followed by
    /// each model's name.
    pub experiment: NewExperiment,
}

impl NewExperimentSet {
    /// Why the request cannot be run as given, naming the field (the
    /// experiment's own problems are the experiment's check).
    pub fn problem(&self) -> Option<String> {
        if self.models.len() < 2 || self.models.len() > MAX_SET_MODELS {
            return Some(format!("models: 2 to {MAX_SET_MODELS} models (one experiment each)"));
        }
        for (i, model) in self.models.iter().enumerate() {
            if model.trim().is_empty() || model.chars().count() > 128 {
                return Some(format!("models[{i}]: 1-128 characters"));
            }
            if self.models[..i].contains(model) {
                return Some(format!("models[{i}]: `{model}` is listed twice"));
            }
        }
        if self.experiment.model.is_some() {
            return Some("experiment.model: give the models in `models`, not here".into());
        }
        None
    }

    /// The experiment of the set for `models[i]`.
    pub fn for_model(&self, i: usize) -> NewExperiment {
        let model = self.models[i].clone();
        let name = self.experiment.name.as_deref().map(str::trim).filter(|n| !n.is_empty());
        NewExperiment { name: name.map(|n| format!("{n} · {model}")), model: Some(model), ..self.experiment.clone() }
    }
}

/// `NewExperimentSet.models`: the bounds [`NewExperimentSet::problem`] checks.
#[cfg(feature = "openapi")]
fn models_schema() -> utoipa::openapi::schema::Schema {
    super::openapi::raw(serde_json::json!({
        "type": "array",
        "minItems": 2,
        "maxItems": MAX_SET_MODELS,
        "uniqueItems": true,
        "items": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "\\S"},
        "description": "Configured models (GET /api/models), one experiment each",
    }))
}

/// A set as started: its id and one experiment per model, in the order asked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExperimentSet {
    pub set_id: String,
    pub experiments: Vec<Experiment>,
}

/// Each experiment of a set with its progress, usage and scores
/// (`GET /api/experiment-sets/{id}`), oldest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExperimentSetReport {
    pub set_id: String,
    pub reports: Vec<ExperimentReport>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(models: &[&str]) -> NewExperimentSet {
        NewExperimentSet {
            models: models.iter().map(|m| m.to_string()).collect(),
            experiment: NewExperiment { dataset_id: "d".into(), name: Some("nightly".into()), ..Default::default() },
        }
    }

    #[test]
    fn a_set_needs_two_to_eight_distinct_models_and_no_model_of_its_own() {
        assert_eq!(set(&["a", "b"]).problem(), None);
        assert!(set(&["a"]).problem().unwrap().starts_with("models:"));
        assert!(set(&["a"; 9]).problem().unwrap().starts_with("models:"));
        assert!(set(&["a", "a"]).problem().unwrap().contains("listed twice"));
        assert!(set(&["a", " "]).problem().unwrap().starts_with("models[1]"));
        let mut own = set(&["a", "b"]);
        own.experiment.model = Some("a".into());
        assert!(own.problem().unwrap().starts_with("experiment.model"));
    }

    #[test]
    fn each_experiment_runs_its_model_under_the_sets_name() {
        let s = set(&["builtin", "gpt"]);
        let second = s.for_model(1);
        assert_eq!(second.model.as_deref(), Some("gpt"));
        assert_eq!(second.name.as_deref(), Some("nightly · gpt"));
        assert_eq!(second.dataset_id, "d");
        let unnamed = NewExperimentSet { experiment: NewExperiment::default(), ..s };
        assert_eq!(unnamed.for_model(0).name, None);
    }
}
