//! The saved-agents half of the store: agents, their versions, and the
//! sums of their runs per version.

use async_trait::async_trait;

use crate::error::Result;
use crate::model::{Agent, AgentVersion, RunStatus, Usage};

/// What [`AgentStore::insert_agent`] and [`AgentStore::update_agent`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum AgentInsert {
    Saved,
    IdTaken,
    /// Another agent of the project has the name.
    NameTaken,
    /// The agent is not (or no longer) at the version the update read.
    VersionMoved,
}

/// Runs of one agent version that ended in one status on one model, summed.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentRunSums {
    pub version: u32,
    pub status: RunStatus,
    pub model: String,
    pub runs: u64,
    pub usage: Usage,
}

#[async_trait]
pub trait AgentStore: Send + Sync {
    /// Inserts the agent at version 1 with its first version row.
    async fn insert_agent(&self, agent: &Agent) -> Result<AgentInsert>;
    /// Saves `agent` (its `version` one above the stored one) as a new
    /// version, if the stored agent is still at `agent.version - 1`.
    async fn update_agent(&self, agent: &Agent) -> Result<AgentInsert>;
    async fn agent(&self, id: &str) -> Result<Option<Agent>>;
    async fn agent_version(&self, id: &str, version: u32) -> Result<Option<AgentVersion>>;
    /// Versions of an agent, newest first, below `before` when given, at most `limit`.
    async fn agent_versions(&self, id: &str, before: Option<u32>, limit: u32) -> Result<Vec<AgentVersion>>;
    /// A project's agents by name, after the name `after` when given,
    /// skipping `offset`, at most `limit`.
    async fn agents(&self, project: &str, after: Option<&str>, offset: u32, limit: u32) -> Result<Vec<Agent>>;
    /// The agent's runs (started from it, in any project it is in), summed
    /// per version, status and model.
    async fn agent_run_sums(&self, id: &str) -> Result<Vec<AgentRunSums>>;
    /// The scores of agent `id`'s runs, per version and score name: how
    /// many, the sum and count of those that are numbers (yes = 1), and the
    /// first and last scored run's start (milliseconds); at most `limit` rows.
    async fn agent_score_sums(&self, id: &str, limit: u32) -> Result<Vec<AgentScoreSums>>;
}

/// One version's scores of one name (see [`AgentStore::agent_score_sums`]).
#[derive(Clone, Debug, PartialEq)]
pub struct AgentScoreSums {
    pub version: u32,
    pub name: String,
    pub count: u64,
    pub numbers: u64,
    pub sum: f64,
    pub first_ms: i64,
    pub last_ms: i64,
}
