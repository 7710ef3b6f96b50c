//! Saved agents: versioned configurations a run starts from, and the links
//! that make agents call each other (as tools, starting child runs) or hand
//! a run over to each other.
//!
//! An agent's every save is a new [`AgentVersion`]; a run records the agent
//! and version it started from, the fields its request overrode, and, after
//! a handoff, the agent now in charge.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{limits, Actor, ApprovalRequest, Usage};

/// What one version of an agent holds: everything a run takes from it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentSpec {
    /// Unique in the project; the tool other agents call it by
    /// (`math_helper`), and `transfer_to_<name>` for handoffs.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::agent_name, required = true))]
    pub name: String,
    /// What the agent does: shown to people, and to models as its tool description.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::agent_description))]
    pub description: String,
    /// The agent's instructions (its persona).
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::system_prompt))]
    pub system_prompt: Option<String>,
    /// The model; `builtin` when empty.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::model_name))]
    pub model: Option<String>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::model_settings))]
    pub model_settings: Option<Value>,
    /// Registered tools the agent may call.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::agent_tools))]
    pub tools: Vec<String>,
    /// Which tools need a person's approval: `"all"` or `{"tools": [...], "timeout_s": N}`.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::approval_request))]
    pub approval: Option<ApprovalRequest>,
    /// JSON Schema the final result must match.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::result_schema))]
    pub result_schema: Option<Value>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::max_turns))]
    pub max_turns: Option<u32>,
    /// JSON Schema a run's `input` must match; also the arguments of the
    /// agent's tool when another agent calls it.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::input_schema))]
    pub input_schema: Option<Value>,
    /// Agents (by id) this one may call as tools: each call starts a child run.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::agent_links))]
    pub agents: Vec<String>,
    /// Agents (by id) this one may hand the run over to.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::agent_links))]
    pub handoffs: Vec<String>,
    /// Ask the model for a short reason with each tool call.
    pub reasoning_traces: bool,
    /// Bounds on the whole tree of runs a run of this agent starts (as its
    /// root): each lowers the server's, none raises it. Required, even
    /// empty (`{}`: the server's bounds), of an agent that can reach itself
    /// through its `agents`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::tree_budget))]
    pub tree_budget: Option<TreeBudget>,
}

/// Bounds on a tree of runs: the root run and every run its agent calls
/// start, and theirs, down the tree. A sub-agent call past a bound fails,
/// telling the model why, and a child run stops when the tree has no turns
/// or tokens left. The server's (`[tree_budget]` in `runlens.toml`) apply
/// to every tree; an agent's lower them for the trees under its runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, try_from = "BudgetObject")]
pub struct TreeBudget {
    /// Runs in the tree, the root included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs: Option<u32>,
    /// Levels below the root (a child of the root is at depth 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    /// Model turns of all the tree's runs together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turns: Option<u32>,
    /// Tokens (input and output) of all the tree's runs together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

/// A tree budget as sent: a JSON object only (serde would also read a
/// struct from an array, which the document does not allow).
#[derive(Deserialize)]
struct BudgetObject(serde_json::Map<String, serde_json::Value>);

impl TryFrom<BudgetObject> for TreeBudget {
    type Error = String;

    fn try_from(object: BudgetObject) -> Result<Self, String> {
        #[derive(Deserialize)]
        #[serde(default, deny_unknown_fields)]
        #[derive(Default)]
        struct Fields {
            runs: Option<u32>,
            depth: Option<u32>,
            turns: Option<u32>,
            tokens: Option<u64>,
        }
        let f: Fields = serde_json::from_value(serde_json::Value::Object(object.0)).map_err(|e| e.to_string())?;
        Ok(TreeBudget { runs: f.runs, depth: f.depth, turns: f.turns, tokens: f.tokens })
    }
}

impl TreeBudget {
    /// Each bound given is within its range (a 400 naming it).
    pub fn check_bounds(&self, field: &str) -> Result<(), String> {
        use limits::*;
        let bounds = [
            ("runs", self.runs.map(u64::from), MAX_TREE_RUNS),
            ("depth", self.depth.map(u64::from), MAX_TREE_DEPTH),
            ("turns", self.turns.map(u64::from), MAX_TREE_TURNS),
            ("tokens", self.tokens, MAX_TREE_TOKENS),
        ];
        for (name, value, max) in bounds {
            if let Some(n) = value.filter(|n| !(1..=max).contains(n)) {
                return Err(format!("{field}.{name} must be between 1 and {max}, not {n}"));
            }
        }
        Ok(())
    }
}

impl AgentSpec {
    /// The bounds of every field (a 400 naming the field).
    pub fn check_bounds(&self) -> Result<(), String> {
        use limits::*;
        if let Some(problem) = agent_name_problem(&self.name) {
            return Err(format!("name {problem}"));
        }
        check_chars("description", &self.description, MAX_AGENT_DESCRIPTION_CHARS)?;
        if let Some(system) = &self.system_prompt {
            check_bytes("system_prompt", system, MAX_SYSTEM_PROMPT_BYTES)?;
        }
        if let Some(model) = &self.model {
            check_chars("model", model, MAX_ID_CHARS)?;
        }
        if let Some(settings) = &self.model_settings {
            check_json("model_settings", settings, MAX_MODEL_SETTINGS_BYTES)?;
        }
        check_tool_list("tools", &self.tools)?;
        if let Some(schema) = &self.result_schema {
            check_json("result_schema", schema, MAX_RESULT_SCHEMA_BYTES)?;
        }
        if let Some(schema) = &self.input_schema {
            check_json("input_schema", schema, MAX_RESULT_SCHEMA_BYTES)?;
        }
        check_max_turns(self.max_turns)?;
        if let Some(budget) = &self.tree_budget {
            budget.check_bounds("tree_budget")?;
        }
        for (field, list) in [("agents", &self.agents), ("handoffs", &self.handoffs)] {
            if list.len() > MAX_AGENT_LINKS {
                return Err(format!("{field} lists {} agents; the limit is {MAX_AGENT_LINKS}", list.len()));
            }
            for id in list {
                check_chars(field, id, MAX_ID_CHARS)?;
            }
        }
        Ok(())
    }
}

/// Why `name` cannot name an agent, or `None`: 1 to
/// [`limits::MAX_AGENT_NAME_CHARS`] of `a-z`, `0-9` and `_`, starting with a
/// letter (it becomes a tool name).
pub fn agent_name_problem(name: &str) -> Option<String> {
    let ok = name.len() <= limits::MAX_AGENT_NAME_CHARS
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    (!ok).then(|| {
        format!(
            "must be 1-{} characters of `a-z`, `0-9` and `_`, starting with a letter (it is a tool name)",
            limits::MAX_AGENT_NAME_CHARS
        )
    })
}

/// The body of `POST /api/agents` and `PUT /api/agents/{id}`: the spec, and
/// on create an optional client-chosen id.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentInput {
    /// Client-chosen id on create (ignored on update); generated when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::run_id))]
    pub id: Option<String>,
    #[serde(flatten)]
    pub spec: AgentSpec,
}

/// A saved agent at its current version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Agent {
    pub id: String,
    pub project: String,
    /// The current version, from 1.
    pub version: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Who saved the current version.
    #[serde(default)]
    pub updated_by: Option<Actor>,
    #[serde(flatten)]
    pub spec: AgentSpec,
}

/// One saved version of an agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentVersion {
    pub agent_id: String,
    pub version: u32,
    pub created_at: DateTime<Utc>,
    #[serde(default)]
    pub created_by: Option<Actor>,
    #[serde(flatten)]
    pub spec: AgentSpec,
}

/// One page of agents, by name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentPage {
    pub agents: Vec<Agent>,
    pub next_cursor: Option<String>,
}

/// How an agent's runs went, for one version.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentVersionStats {
    pub version: u32,
    pub runs: u64,
    pub done: u64,
    pub failed: u64,
    pub cancelled: u64,
    /// Runs not finished yet (pending, running, paused).
    pub active: u64,
    /// `done` out of the finished runs, from 0 to 1 (`null` before any finished).
    pub success_rate: Option<f64>,
    pub usage: Usage,
    /// Priced with the project's price table (`null` when a model has no price).
    pub cost_usd: Option<f64>,
    /// The scores its runs were given, per name (by name).
    #[serde(default)]
    pub scores: Vec<VersionScore>,
}

/// The scores of one name a version's runs were given.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VersionScore {
    pub name: String,
    /// Scores of this name.
    pub count: u64,
    /// The mean of those that are numbers or yes/no (yes = 1); `null` for labels only.
    pub mean: Option<f64>,
    /// When the first and the last scored run started.
    pub first_run_at: chrono::DateTime<chrono::Utc>,
    pub last_run_at: chrono::DateTime<chrono::Utc>,
}

/// An agent with how its runs went, per version (`GET /api/agents/{id}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentDetail {
    #[serde(flatten)]
    pub agent: Agent,
    /// Newest version first; versions without runs are listed too.
    pub stats: Vec<AgentVersionStats>,
}

/// Another agent a run may call or hand over to, as the model sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentLink {
    /// The tool name offered to the model (`math_helper`, `transfer_to_billing`).
    pub tool: String,
    pub agent_id: String,
    /// The agent's name when the link was made.
    pub agent_name: String,
    /// The tool's description, as offered to the model.
    #[serde(default)]
    pub description: String,
    /// The tool's arguments, as a JSON Schema.
    #[serde(default)]
    pub schema: Value,
}

/// The prefix of a handoff tool's name.
pub const HANDOFF_PREFIX: &str = "transfer_to_";

/// The bounds of one tree of runs (a root run and all the runs its agent
/// calls start, down the tree): the server's, lowered by the root agent's
/// `tree_budget` (the engine enforces them in `runner::budget`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeLimits {
    /// Runs, the root included.
    pub runs: u32,
    /// Levels below the root.
    pub depth: u32,
    /// Model turns of all the runs together; `None`: no bound.
    pub turns: Option<u32>,
    /// Tokens of all the runs together; `None`: no bound.
    pub tokens: Option<u64>,
}

impl Default for TreeLimits {
    fn default() -> Self {
        use limits::*;
        Self { runs: DEFAULT_TREE_RUNS, depth: DEFAULT_MAX_DEPTH, turns: Some(DEFAULT_TREE_TURNS), tokens: None }
    }
}

impl TreeLimits {
    /// These limits lowered by `budget`'s bounds (never raised).
    pub fn within(self, budget: &TreeBudget) -> Self {
        fn lower<T: Ord + Copy>(limit: Option<T>, bound: Option<T>) -> Option<T> {
            match (limit, bound) {
                (Some(l), Some(b)) => Some(l.min(b)),
                (l, b) => l.or(b),
            }
        }
        Self {
            runs: budget.runs.map_or(self.runs, |b| self.runs.min(b)),
            depth: budget.depth.map_or(self.depth, |b| self.depth.min(b)),
            turns: lower(self.turns, budget.turns),
            tokens: lower(self.tokens, budget.tokens),
        }
    }
}

/// What a run ended with, one of three shapes (`GET /api/runs/{id}` `output`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum RunOutput {
    /// A result that matched the run's `result_schema`.
    Structured { value: Value },
    /// The model's final message (its result, when not structured).
    LastMessage {
        message: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<Value>,
    },
    /// The run failed or was cancelled.
    Error { message: String },
}

/// Free metadata on a run: any JSON object.
pub type Metadata = Map<String, Value>;

/// Usage and cost of a run and every run below it (`GET /api/runs/{id}/tree`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TreeUsage {
    /// The run itself and its descendants.
    pub runs: u64,
    pub usage: Usage,
    /// Priced with the project's price table (`null` when a model has no price).
    pub cost_usd: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::TreeBudget;

    #[test]
    fn a_tree_budget_is_an_object_of_known_bounds_only() {
        let ok: TreeBudget = serde_json::from_str(r#"{"runs": 5, "tokens": 9}"#).unwrap();
        assert_eq!((ok.runs, ok.tokens, ok.depth), (Some(5), Some(9), None));
        assert_eq!(serde_json::from_str::<TreeBudget>("{}").unwrap(), TreeBudget::default());
        // Found by the API fuzz test: serde reads a struct from an array too.
        assert!(serde_json::from_str::<TreeBudget>("[null, null]").is_err());
        assert!(serde_json::from_str::<TreeBudget>(r#"{"runz": 5}"#).is_err());
        assert!(serde_json::from_str::<TreeBudget>(r#"{"runs": -1}"#).is_err());
    }
}
