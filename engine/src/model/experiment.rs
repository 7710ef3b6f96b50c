//! Experiments: an agent (or a run configuration) run over the items of a
//! dataset at one version. Each item becomes an ordinary run of the
//! experiment (trace, compare and fork work on it), started at most once,
//! a bounded number at a time; each finished run is scored by the
//! experiment's scorers against the item's `expected`.
//!
//! How an experiment's runs call tools is its [`ToolMode`]: `recorded`
//! (no tool runs: a call answers with the item's recorded result of the
//! same tool and arguments, or fails saying none was recorded), `live`
//! (tools run under the normal approval rules) or `mock` (the mocked tools
//! answer with their given result, the others run live). A substituted
//! answer is not a grant: nothing runs for it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::limits::json_size;
use super::{Actor, NamedScorer, RecordedResult, RunStatus, ScoreSummary, Usage};

/// Runs of one experiment running at once, at most.
pub const MAX_EXPERIMENT_CONCURRENCY: u32 = 32;
/// Runs of one experiment running at once when the request does not say.
pub const DEFAULT_EXPERIMENT_CONCURRENCY: u32 = 4;
/// Mocked tools of one experiment.
pub const MAX_TOOL_MOCKS: usize = 64;
/// A mock's result: bytes of compact JSON.
pub const MAX_MOCK_RESULT_BYTES: usize = 64 * 1024;
/// An experiment's name: characters.
pub const MAX_EXPERIMENT_NAME_CHARS: usize = 200;

/// How the runs of an experiment call tools (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ToolMode {
    /// No tool runs: each call answers with the item's recorded result of the same tool and arguments, or fails.
    #[default]
    Recorded,
    /// Tools run for real, under the approval rules: a call that needs approval waits for a person.
    Live,
    /// The tools in `mocks` answer with the given result; the others run live.
    Mock,
}

impl ToolMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolMode::Recorded => "recorded",
            ToolMode::Live => "live",
            ToolMode::Mock => "mock",
        }
    }
}

/// A tool's given answer in a `mock` experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolMock {
    /// The tool (1-128 characters).
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 128, pattern = "^\\S(.*\\S)?$"))]
    pub tool: String,
    /// What every call of it answers: any JSON, at most 64 KiB.
    #[serde(default)]
    pub result: Value,
}

/// What answers a run's tool calls instead of the tools, when something
/// does: set on an experiment's runs in `recorded` and `mock` mode (and
/// kept by a fork of one). Absent: the tools run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum RunTools {
    /// Every call answers with the recorded result of the same tool and arguments; no tool runs.
    Recorded { results: Vec<RecordedResult> },
    /// A call of a mocked tool answers with its result; the others run.
    Mock { mocks: Vec<ToolMock> },
}

impl RunTools {
    /// What answers a call of `tool` with `arguments` instead of the tool:
    /// `Some(Ok(result))`, `Some(Err(why))` (recorded mode, nothing
    /// recorded for this call), or `None` (the tool itself runs). A
    /// recorded result matches a call of the same tool with equal
    /// arguments; the first one recorded answers every such call.
    pub fn substitute(&self, tool: &str, arguments: &Value) -> Option<Result<Value, String>> {
        match self {
            RunTools::Recorded { results } => Some(
                results
                    .iter()
                    .find(|r| r.tool == tool && &r.arguments == arguments)
                    .map(|r| r.result.clone())
                    .ok_or_else(|| {
                        let same_tool = results.iter().filter(|r| r.tool == tool).count();
                        if same_tool == 0 {
                            format!("no result of `{tool}` was recorded for this item (recorded tools: nothing runs)")
                        } else {
                            format!(
                                "no result of `{tool}` was recorded for these arguments ({same_tool} recorded for \
                                 other arguments; recorded tools: nothing runs)"
                            )
                        }
                    }),
            ),
            RunTools::Mock { mocks } => mocks.iter().find(|m| m.tool == tool).map(|m| Ok(m.result.clone())),
        }
    }

    pub fn mode(&self) -> ToolMode {
        match self {
            RunTools::Recorded { .. } => ToolMode::Recorded,
            RunTools::Mock { .. } => ToolMode::Mock,
        }
    }
}

/// The experiment a run was started for, and the dataset item it ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExperimentLink {
    pub experiment_id: String,
    pub item_id: String,
}

/// Where an experiment is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ExperimentStatus {
    /// Items are being run or scored.
    Running,
    /// Every item ran and was scored.
    Done,
    /// Cancelled: items not started then never will be; those running were cancelled.
    Cancelled,
}

impl ExperimentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ExperimentStatus::Running => "running",
            ExperimentStatus::Done => "done",
            ExperimentStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "running" => Some(ExperimentStatus::Running),
            "done" => Some(ExperimentStatus::Done),
            "cancelled" => Some(ExperimentStatus::Cancelled),
            _ => None,
        }
    }
}

/// The body of `POST /api/experiments`: what to run over which dataset
/// version, how tools answer, and how to score.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewExperiment {
    /// At most 200 characters; absent: the agent (or model) and the dataset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(max_length = 200))]
    pub name: Option<String>,
    /// A dataset of the project.
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 128))]
    pub dataset_id: String,
    /// The version to run; absent: the dataset's current one (which must hold items).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 2147483647))]
    pub dataset_version: Option<u32>,
    /// A saved agent of the project (its id or name) whose version runs every item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 128))]
    pub agent_id: Option<String>,
    /// With `agent_id`: the version to run; absent: its current version when the experiment starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 2147483647))]
    pub agent_version: Option<u32>,
    /// The model (a playground configuration; with an agent, it overrides the agent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::model_name))]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::model_settings))]
    pub model_settings: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::system_prompt))]
    pub system_prompt: Option<String>,
    /// Attached tools; absent: the agent's, or every tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::tool_list))]
    pub tools: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::max_turns))]
    pub max_turns: Option<u32>,
    /// How tools answer (default `recorded`: nothing runs).
    #[serde(default)]
    pub tool_mode: ToolMode,
    /// With `tool_mode: mock`: each mocked tool's answer (1 to 64, one per tool).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 64))]
    pub mocks: Vec<ToolMock>,
    /// Scorers applied to each finished run (0 to 16), against the item's `expected`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 16))]
    pub scorers: Vec<NamedScorer>,
    /// Runs at once, 1 to 32 (default 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 32))]
    pub concurrency: Option<u32>,
}

impl NewExperiment {
    /// Why the request cannot be run as given, naming the field; what needs
    /// the store (the dataset, the agent, the tools) is the engine's check.
    pub fn problem(&self) -> Option<String> {
        if let Some(name) = &self.name {
            if name.chars().count() > MAX_EXPERIMENT_NAME_CHARS {
                return Some(format!("name: at most {MAX_EXPERIMENT_NAME_CHARS} characters"));
            }
        }
        if self.dataset_version == Some(0) {
            return Some("dataset_version: version 0 holds no items; ask for 1 or more".into());
        }
        if self.agent_version.is_some() && self.agent_id.is_none() {
            return Some("agent_version: give it with agent_id".into());
        }
        if self.agent_id.is_none() && self.model.is_none() {
            return Some("give agent_id (a saved agent) or model (a run configuration)".into());
        }
        if let Some(c) = self.concurrency {
            if c == 0 || c > MAX_EXPERIMENT_CONCURRENCY {
                return Some(format!("concurrency: 1 to {MAX_EXPERIMENT_CONCURRENCY}"));
            }
        }
        match (self.tool_mode, self.mocks.is_empty()) {
            (ToolMode::Mock, true) => return Some("mocks: tool_mode `mock` needs at least one mock".into()),
            (ToolMode::Recorded | ToolMode::Live, false) => {
                return Some(format!("mocks: only with tool_mode `mock` (it is `{}`)", self.tool_mode.as_str()))
            }
            _ => {}
        }
        if self.mocks.len() > MAX_TOOL_MOCKS {
            return Some(format!("mocks: at most {MAX_TOOL_MOCKS}"));
        }
        for (i, mock) in self.mocks.iter().enumerate() {
            if mock.tool.trim().is_empty() || mock.tool.trim() != mock.tool || mock.tool.chars().count() > 128 {
                return Some(format!("mocks[{i}].tool: 1-128 characters, not starting or ending with a space"));
            }
            if self.mocks[..i].iter().any(|m| m.tool == mock.tool) {
                return Some(format!("mocks[{i}].tool: `{}` is mocked twice", mock.tool));
            }
            if json_size(&mock.result) > MAX_MOCK_RESULT_BYTES {
                return Some(format!("mocks[{i}].result: at most {} KiB of JSON", MAX_MOCK_RESULT_BYTES / 1024));
            }
        }
        if self.scorers.len() > super::MAX_SCORERS_PER_REQUEST {
            return Some(format!("scorers: at most {}", super::MAX_SCORERS_PER_REQUEST));
        }
        self.scorers.iter().enumerate().find_map(|(i, s)| {
            let name = s.name.as_deref().and_then(super::score_name_problem);
            name.or_else(|| s.scorer.problem()).map(|p| format!("scorers[{i}]: {p}"))
        })
    }

    pub fn concurrency(&self) -> u32 {
        self.concurrency.unwrap_or(DEFAULT_EXPERIMENT_CONCURRENCY).clamp(1, MAX_EXPERIMENT_CONCURRENCY)
    }
}

/// An experiment as kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Experiment {
    pub id: String,
    pub project: String,
    pub name: String,
    pub dataset_id: String,
    /// The dataset's name when the experiment started.
    pub dataset_name: String,
    /// The dataset version it ran on.
    pub dataset_version: u32,
    /// Items at that version: one run each.
    pub item_count: u32,
    pub status: ExperimentStatus,
    /// What it runs, as asked (with the agent's version fixed when it started).
    pub spec: NewExperiment,
    pub created_by: Actor,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The set of experiments of several models it belongs to (see
    /// [`super::NewExperimentSet`]); absent when it was started alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_id: Option<String>,
}

/// One page of a project's experiments, newest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExperimentPage {
    pub experiments: Vec<Experiment>,
    /// The `cursor` of the next page; null on the last one.
    pub next_cursor: Option<String>,
}

/// How far an experiment is: its items by the state of their runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExperimentProgress {
    pub items: u32,
    /// Items whose run has been created.
    pub started: u32,
    /// Runs pending or running.
    pub running: u32,
    /// Runs paused for a person's decision (live tools).
    pub waiting: u32,
    pub done: u32,
    pub failed: u32,
    pub cancelled: u32,
}

/// One bar of a scorer's distribution: a value (`yes`, a label) or a range of numbers, and how many runs got it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScoreBucket {
    pub label: String,
    pub count: u32,
}

/// A scorer's scores over an experiment's runs: count, mean, yes/no and distribution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScorerAggregate {
    pub summary: ScoreSummary,
    /// At most 10 bars (numbers in equal ranges from the lowest to the highest).
    pub distribution: Vec<ScoreBucket>,
}

/// An experiment with its progress, usage, cost and scores so far
/// (`GET /api/experiments/{id}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExperimentReport {
    pub experiment: Experiment,
    pub progress: ExperimentProgress,
    pub usage: Usage,
    /// At the project's prices today; none when a model has no price.
    pub cost_usd: Option<f64>,
    pub scorers: Vec<ScorerAggregate>,
}

/// One item of an experiment: its input, what was expected, and its run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExperimentRow {
    pub item_id: String,
    /// The human message the run answered.
    pub input: String,
    pub expected: Option<Value>,
    /// Absent until the item's run is created.
    pub run_id: Option<String>,
    pub status: Option<RunStatus>,
    /// The run's answer (or why it failed).
    pub output: Option<String>,
    pub scores: Vec<ScoreSummary>,
    pub usage: Usage,
    pub cost_usd: Option<f64>,
    pub duration_ms: Option<u64>,
}

/// One page of an experiment's items, in the dataset's order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExperimentRows {
    pub rows: Vec<ExperimentRow>,
    /// The `cursor` of the next page (an item id); null on the last one.
    pub next_cursor: Option<String>,
}

/// How an item did in one experiment against another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ItemChange {
    Improved,
    Regressed,
    Unchanged,
    /// Not scored in one of the two (not run, or no scorer applied).
    Missing,
}

impl ItemChange {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemChange::Improved => "improved",
            ItemChange::Regressed => "regressed",
            ItemChange::Unchanged => "unchanged",
            ItemChange::Missing => "missing",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "improved" => Some(ItemChange::Improved),
            "regressed" => Some(ItemChange::Regressed),
            "unchanged" => Some(ItemChange::Unchanged),
            "missing" => Some(ItemChange::Missing),
            _ => None,
        }
    }
}

/// One item of a comparison: each experiment's run and mean score.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ComparedItem {
    pub item_id: String,
    /// The human message the runs answered.
    pub input: String,
    pub base_run_id: Option<String>,
    pub other_run_id: Option<String>,
    /// The mean of the run's numeric and yes/no scores (yes = 1).
    pub base_score: Option<f64>,
    pub other_score: Option<f64>,
    pub change: ItemChange,
}

/// Two experiments item by item (`GET /api/experiments/{id}/compare?with=…`):
/// counts over every item, and a page of the items (those of `change`, when asked).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExperimentComparison {
    pub base: Experiment,
    pub other: Experiment,
    pub improved: u32,
    pub regressed: u32,
    pub unchanged: u32,
    pub missing: u32,
    pub items: Vec<ComparedItem>,
    /// The `cursor` of the next page (an item id); null on the last one.
    pub next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn recorded() -> RunTools {
        RunTools::Recorded {
            results: vec![
                RecordedResult { tool: "send_email".into(), arguments: json!({"to": "a@b.c"}), result: json!("sent") },
                RecordedResult { tool: "send_email".into(), arguments: json!({"to": "x@y.z"}), result: json!("x") },
            ],
        }
    }

    #[test]
    fn a_recorded_result_answers_only_the_same_call() {
        let tools = recorded();
        assert_eq!(tools.substitute("send_email", &json!({"to": "a@b.c"})), Some(Ok(json!("sent"))));
        let other = tools.substitute("send_email", &json!({"to": "evil@x.test"})).unwrap().unwrap_err();
        assert!(other.contains("2 recorded for other arguments"), "{other}");
        let none = tools.substitute("calculator", &json!({})).unwrap().unwrap_err();
        assert!(none.contains("no result of `calculator`"), "{none}");
    }

    #[test]
    fn a_mock_answers_its_tool_and_leaves_the_others() {
        let tools = RunTools::Mock { mocks: vec![ToolMock { tool: "send_email".into(), result: json!({"id": 1}) }] };
        assert_eq!(tools.substitute("send_email", &json!({"anything": true})), Some(Ok(json!({"id": 1}))));
        assert_eq!(tools.substitute("calculator", &json!({})), None);
    }

    #[test]
    fn requests_are_checked_by_field() {
        let base = NewExperiment { dataset_id: "d".into(), model: Some("builtin".into()), ..Default::default() };
        assert_eq!(base.problem(), None);
        let mock = NewExperiment { tool_mode: ToolMode::Mock, ..base.clone() };
        assert!(mock.problem().unwrap().starts_with("mocks:"));
        let stray = NewExperiment { mocks: vec![ToolMock { tool: "t".into(), result: json!(1) }], ..base.clone() };
        assert!(stray.problem().unwrap().contains("only with tool_mode `mock`"));
        let neither = NewExperiment { model: None, ..base.clone() };
        assert!(neither.problem().unwrap().contains("agent_id"));
        let busy = NewExperiment { concurrency: Some(33), ..base.clone() };
        assert!(busy.problem().unwrap().starts_with("concurrency"));
        let zero = NewExperiment { dataset_version: Some(0), ..base };
        assert!(zero.problem().unwrap().starts_with("dataset_version"));
    }
}
