//! [`AgentStore`] on SQLite: the tables of `0011_agents.sql`.

use async_trait::async_trait;

use crate::error::Result;
use crate::model::{Agent, AgentVersion, RunStatus, Usage};
use crate::store::agents::{AgentInsert, AgentRunSums, AgentStore};
use crate::store::json_text;
use crate::store::{to_ms, SqliteStore};

use crate::store::rows::agents::*;

/// An agent with its current version's spec.
const AGENT_SELECT: &str = "SELECT a.id, a.project, a.version, a.created_at, a.updated_at, v.spec, v.created_by_id, \
     v.created_by FROM agents a JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.version";

async fn insert_version(tx: &mut sqlx::SqliteConnection, agent: &Agent) -> Result<()> {
    sqlx::query(
        "INSERT INTO agent_versions (agent_id, version, spec, created_at, created_by_id, created_by)
         VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(&agent.id)
    .bind(i64::from(agent.version))
    .bind(json_text(&agent.spec))
    .bind(to_ms(agent.updated_at))
    .bind(agent.updated_by.as_ref().map(|a| &a.id))
    .bind(agent.updated_by.as_ref().map(|a| &a.name))
    .execute(tx)
    .await?;
    Ok(())
}

/// Why a save wrote nothing: the name is another agent's of the project.
async fn name_taken(tx: &mut sqlx::SqliteConnection, agent: &Agent) -> Result<bool> {
    let other: Option<String> = sqlx::query_scalar("SELECT id FROM agents WHERE project = ? AND name = ? AND id != ?")
        .bind(&agent.project)
        .bind(&agent.spec.name)
        .bind(&agent.id)
        .fetch_optional(&mut *tx)
        .await?;
    Ok(other.is_some())
}

#[async_trait]
impl AgentStore for SqliteStore {
    // Each save's first statement is its write (`BEGIN IMMEDIATE` semantics:
    // a read first could not take the write lock while runs are written);
    // the unique keys say whether the id or the name was taken.
    async fn insert_agent(&self, agent: &Agent) -> Result<AgentInsert> {
        let mut tx = self.pool().begin().await?;
        let inserted = sqlx::query(
            "INSERT OR IGNORE INTO agents (id, project, name, version, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(&agent.id)
        .bind(&agent.project)
        .bind(&agent.spec.name)
        .bind(i64::from(agent.version))
        .bind(to_ms(agent.created_at))
        .bind(to_ms(agent.updated_at))
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if !inserted {
            let id_taken: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM agents WHERE id = ?)")
                .bind(&agent.id)
                .fetch_one(&mut *tx)
                .await?;
            return Ok(if id_taken { AgentInsert::IdTaken } else { AgentInsert::NameTaken });
        }
        insert_version(&mut tx, agent).await?;
        tx.commit().await?;
        Ok(AgentInsert::Saved)
    }

    async fn update_agent(&self, agent: &Agent) -> Result<AgentInsert> {
        let mut tx = self.pool().begin().await?;
        let moved = sqlx::query(
            "UPDATE OR IGNORE agents SET name = ?, version = ?, updated_at = ? WHERE id = ? AND version = ?",
        )
        .bind(&agent.spec.name)
        .bind(i64::from(agent.version))
        .bind(to_ms(agent.updated_at))
        .bind(&agent.id)
        .bind(i64::from(agent.version) - 1)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if moved != 1 {
            return Ok(if name_taken(&mut tx, agent).await? {
                AgentInsert::NameTaken
            } else {
                AgentInsert::VersionMoved
            });
        }
        insert_version(&mut tx, agent).await?;
        tx.commit().await?;
        Ok(AgentInsert::Saved)
    }

    async fn agent(&self, id: &str) -> Result<Option<Agent>> {
        let row = sqlx::query_as::<_, AgentRow>(&format!("{AGENT_SELECT} WHERE a.id = ?"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(Agent::from))
    }

    async fn agent_version(&self, id: &str, version: u32) -> Result<Option<AgentVersion>> {
        let row = sqlx::query_as::<_, VersionRow>("SELECT * FROM agent_versions WHERE agent_id = ? AND version = ?")
            .bind(id)
            .bind(i64::from(version))
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(AgentVersion::from))
    }

    async fn agent_versions(&self, id: &str, before: Option<u32>, limit: u32) -> Result<Vec<AgentVersion>> {
        let rows = sqlx::query_as::<_, VersionRow>(
            "SELECT * FROM agent_versions WHERE agent_id = ? AND version < ? ORDER BY version DESC LIMIT ?",
        )
        .bind(id)
        .bind(before.map_or(i64::MAX, i64::from))
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        Ok(rows.into_iter().map(AgentVersion::from).collect())
    }

    async fn agents(&self, project: &str, after: Option<&str>, offset: u32, limit: u32) -> Result<Vec<Agent>> {
        let rows = sqlx::query_as::<_, AgentRow>(&format!(
            "{AGENT_SELECT} WHERE a.project = ? AND a.name > ? ORDER BY a.name LIMIT ? OFFSET ?"
        ))
        .bind(project)
        .bind(after.unwrap_or(""))
        .bind(i64::from(limit))
        .bind(i64::from(offset))
        .fetch_all(self.pool())
        .await?;
        Ok(rows.into_iter().map(Agent::from).collect())
    }

    async fn agent_run_sums(&self, id: &str) -> Result<Vec<AgentRunSums>> {
        type Row = (Option<i64>, String, String, i64, i64, i64, i64, i64, i64, i64);
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT agent_version, status, model, count(*), sum(input_tokens), sum(output_tokens),
                sum(cache_read_tokens), sum(reasoning_tokens), sum(total_tokens), sum(requests)
             FROM runs WHERE agent_id = ? AND agent_version IS NOT NULL
             GROUP BY agent_version, status, model",
        )
        .bind(id)
        .fetch_all(self.pool())
        .await?;
        let n = |v: i64| v.max(0) as u64;
        Ok(rows
            .into_iter()
            .map(|(version, status, model, runs, input, output, cache, reasoning, total, requests)| AgentRunSums {
                version: version.unwrap_or(0).clamp(0, u32::MAX.into()) as u32,
                status: RunStatus::parse(&status).unwrap_or(RunStatus::Failed),
                model,
                runs: n(runs),
                usage: Usage {
                    input_tokens: n(input),
                    output_tokens: n(output),
                    cache_read_tokens: n(cache),
                    reasoning_tokens: n(reasoning),
                    total_tokens: n(total),
                    requests: n(requests),
                },
            })
            .collect())
    }
}
