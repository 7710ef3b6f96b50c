//! Rows of the agent tables (`agents`, `agent_versions`) and their model types.

use crate::model::{Actor, Agent, AgentSpec, AgentVersion};
use crate::store::from_ms;

#[derive(sqlx::FromRow)]
pub(crate) struct AgentRow {
    pub(crate) id: String,
    pub(crate) project: String,
    pub(crate) version: i64,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
    pub(crate) spec: String,
    pub(crate) created_by_id: Option<String>,
    pub(crate) created_by: Option<String>,
}

pub(crate) fn actor(id: Option<String>, name: Option<String>) -> Option<Actor> {
    Some(Actor { id: id?, name: name.unwrap_or_default() })
}

pub(crate) fn spec(text: &str) -> AgentSpec {
    serde_json::from_str(text).unwrap_or_default()
}

impl From<AgentRow> for Agent {
    fn from(r: AgentRow) -> Agent {
        Agent {
            id: r.id,
            project: r.project,
            version: r.version.clamp(0, u32::MAX.into()) as u32,
            created_at: from_ms(r.created_at),
            updated_at: from_ms(r.updated_at),
            updated_by: actor(r.created_by_id, r.created_by),
            spec: spec(&r.spec),
        }
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct VersionRow {
    pub(crate) agent_id: String,
    pub(crate) version: i64,
    pub(crate) spec: String,
    pub(crate) created_at: i64,
    pub(crate) created_by_id: Option<String>,
    pub(crate) created_by: Option<String>,
}

impl From<VersionRow> for AgentVersion {
    fn from(r: VersionRow) -> AgentVersion {
        AgentVersion {
            agent_id: r.agent_id,
            version: r.version.clamp(0, u32::MAX.into()) as u32,
            created_at: from_ms(r.created_at),
            created_by: actor(r.created_by_id, r.created_by),
            spec: spec(&r.spec),
        }
    }
}
