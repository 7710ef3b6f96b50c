//! Online evaluators: scorers that score a sample of a project's new runs
//! as they end. An evaluator watches the runs of an agent, of a tag, of an
//! ingested service, or all of the project's (never a judge's own runs),
//! and scores a share of them (`sample_percent`, chosen by the run's id, so
//! the same run is always in or out) with its scorers. Scores land on the
//! runs like any scorer's, so they show in the runs list and its filter.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Actor, NamedScorer};

/// Evaluators of one project, at most.
pub const MAX_PROJECT_EVALUATORS: u32 = 50;
/// An evaluator's name: characters.
pub const MAX_EVALUATOR_NAME_CHARS: usize = 200;

/// Which runs an evaluator watches: every one given must match (none
/// given: all of the project's runs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct EvaluatorTarget {
    /// Runs of this agent (its id).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 128))]
    pub agent_id: Option<String>,
    /// Runs with this tag, `key:value`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(min_length = 3, max_length = 321, pattern = "^[^:]+:.*$"))]
    pub tag: Option<String>,
    /// Runs ingested from this service (its OpenTelemetry `service.name`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
    pub service: Option<String>,
}

impl EvaluatorTarget {
    /// Whether a run of this agent, with these tags, from this service, is watched.
    pub fn matches(
        &self,
        agent_id: Option<&str>,
        tags: &std::collections::BTreeMap<String, String>,
        service: Option<&str>,
    ) -> bool {
        let tag = self.tag.as_deref().and_then(|t| t.split_once(':'));
        self.agent_id.as_deref().is_none_or(|a| agent_id == Some(a))
            && tag.is_none_or(|(k, v)| tags.get(k).is_some_and(|have| have == v))
            && self.service.as_deref().is_none_or(|s| service == Some(s))
    }

    fn problem(&self) -> Option<String> {
        let bounded = |field: &str, v: &Option<String>, max: usize| {
            v.as_deref()
                .filter(|v| v.trim().is_empty() || v.chars().count() > max)
                .map(|_| format!("target.{field}: 1-{max} characters"))
        };
        bounded("agent_id", &self.agent_id, 128)
            .or_else(|| bounded("service", &self.service, 256))
            .or_else(|| bounded("tag", &self.tag, 321))
            .or_else(|| match self.tag.as_deref().map(|t| t.split_once(':')) {
                Some(None) | Some(Some(("", _))) => Some("target.tag: key:value".into()),
                _ => None,
            })
    }
}

/// An evaluator to create, or an evaluator's new settings (`PUT`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewEvaluator {
    /// 1-200 characters.
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 200, pattern = "\\S"))]
    pub name: String,
    #[serde(default)]
    pub target: EvaluatorTarget,
    /// The share of watched runs scored, 0 to 100 (0: none; the evaluator is kept).
    #[cfg_attr(feature = "openapi", schema(maximum = 100))]
    pub sample_percent: u8,
    /// 1 to 16 scorers; those that need an expected value must give their own.
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 16))]
    pub scorers: Vec<NamedScorer>,
    /// Off: no run is scored until it is on again (runs that ended meanwhile are not scored later).
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

impl NewEvaluator {
    /// Why it cannot be kept as given (each scorer's configuration is the
    /// engine's check too).
    pub fn problem(&self) -> Option<String> {
        if self.name.trim().is_empty() || self.name.chars().count() > MAX_EVALUATOR_NAME_CHARS {
            return Some(format!("name: 1-{MAX_EVALUATOR_NAME_CHARS} characters"));
        }
        if self.sample_percent > 100 {
            return Some("sample_percent: 0 to 100".into());
        }
        if self.scorers.is_empty() || self.scorers.len() > super::MAX_SCORERS_PER_REQUEST {
            return Some(format!("scorers: give 1 to {} scorers", super::MAX_SCORERS_PER_REQUEST));
        }
        let names: Vec<String> = self.scorers.iter().map(NamedScorer::score_name).collect();
        if let Some(i) = (1..names.len()).find(|&i| names[..i].contains(&names[i])) {
            return Some(format!("scorers[{i}]: the score `{}` is given twice; name one of them", names[i]));
        }
        self.target.problem().or_else(|| {
            self.scorers.iter().enumerate().find_map(|(i, s)| {
                let name = s.name.as_deref().and_then(super::score_name_problem);
                name.or_else(|| s.scorer.problem()).map(|p| format!("scorers[{i}]: {p}"))
            })
        })
    }
}

/// An evaluator as kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Evaluator {
    pub id: String,
    pub name: String,
    pub target: EvaluatorTarget,
    pub sample_percent: u8,
    pub scorers: Vec<NamedScorer>,
    pub enabled: bool,
    /// Watched runs that ended since it was made (or turned on), looked at.
    pub runs_seen: u64,
    /// Of those, the runs in the sample, scored.
    pub runs_scored: u64,
    pub created_by: Actor,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Whether run `run_id` is in a sample of `percent` % for evaluator
/// `evaluator_id`: a hash of both, so a run is always in or always out of
/// one evaluator's sample, and different evaluators sample differently.
pub fn in_sample(evaluator_id: &str, run_id: &str, percent: u8) -> bool {
    if percent >= 100 {
        return true;
    }
    // FNV-1a: stable across builds and platforms, unlike the std hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in evaluator_id.bytes().chain([0]).chain(run_id.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash % 100 < u64::from(percent)
}

/// The evaluators of a project.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EvaluatorList {
    pub evaluators: Vec<Evaluator>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_is_stable_and_near_its_share() {
        let picked = (0..10_000).filter(|i| in_sample("ev", &format!("run-{i}"), 20)).count();
        assert!((1_700..2_300).contains(&picked), "{picked}");
        assert!((0..100).all(|i| in_sample("ev", &format!("r{i}"), 100)));
        assert!((0..100).all(|i| !in_sample("ev", &format!("r{i}"), 0)));
        assert_eq!(in_sample("a", "run", 50), in_sample("a", "run", 50));
    }

    #[test]
    fn targets_match_every_given_part() {
        let tags = std::collections::BTreeMap::from([("env".to_owned(), "prod".to_owned())]);
        let all = EvaluatorTarget::default();
        assert!(all.matches(None, &Default::default(), None));
        let prod = EvaluatorTarget { tag: Some("env:prod".into()), ..Default::default() };
        assert!(prod.matches(None, &tags, None));
        assert!(!prod.matches(None, &Default::default(), None));
        let agent = EvaluatorTarget { agent_id: Some("a".into()), tag: Some("env:prod".into()), ..Default::default() };
        assert!(agent.matches(Some("a"), &tags, None));
        assert!(!agent.matches(Some("b"), &tags, None));
        let service = EvaluatorTarget { service: Some("svc".into()), ..Default::default() };
        assert!(service.matches(None, &tags, Some("svc")) && !service.matches(None, &tags, None));
        assert!(EvaluatorTarget { tag: Some("novalue".into()), ..Default::default() }.problem().is_some());
    }
}
