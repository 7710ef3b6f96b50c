//! [`AgentStore`] on PostgreSQL: the `agents` and `agent_versions` tables
//! (specs are JSONB, read back as text).
//!
//! Concurrent saves are settled by the database: an insert skips on either
//! unique key (`ON CONFLICT DO NOTHING` waits for a concurrent insert of the
//! same id or name to commit or roll back), an update is a compare-and-set
//! on the stored version (a concurrent update of the same agent waits on its
//! row and then finds the version moved), and a rename onto a name another
//! save has just taken fails with a unique violation, read as `NameTaken`.
//! Names are compared and ordered bytewise (`COLLATE "C"`), as in SQLite.

use async_trait::async_trait;

use crate::error::{EngineError, Result};
use crate::model::{Agent, AgentVersion, RunStatus, Usage};
use crate::store::agents::{AgentInsert, AgentRunSums, AgentStore};
use crate::store::json_text;
use crate::store::to_ms;

use super::PgStore;

use crate::store::rows::agents::*;

/// An agent with its current version's spec.
const AGENT_SELECT: &str = "SELECT a.id, a.project, a.version, a.created_at, a.updated_at, v.spec::text AS spec, \
     v.created_by_id, v.created_by FROM agents a JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.version";

/// The columns of `agent_versions` as [`VersionRow`] reads them.
const VERSION_COLUMNS: &str = "agent_id, version, spec::text AS spec, created_at, created_by_id, created_by";

/// Whether `e` is PostgreSQL's unique violation (SQLSTATE 23505).
fn unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("23505"))
}

async fn insert_version(tx: &mut sqlx::PgConnection, agent: &Agent) -> Result<()> {
    sqlx::query(
        "INSERT INTO agent_versions (agent_id, version, spec, created_at, created_by_id, created_by)
         VALUES ($1, $2, $3::jsonb, $4, $5, $6)",
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
async fn name_taken(tx: &mut sqlx::PgConnection, agent: &Agent) -> Result<bool> {
    let other: Option<String> =
        sqlx::query_scalar("SELECT id FROM agents WHERE project = $1 AND name = $2 AND id <> $3 LIMIT 1")
            .bind(&agent.project)
            .bind(&agent.spec.name)
            .bind(&agent.id)
            .fetch_optional(&mut *tx)
            .await?;
    Ok(other.is_some())
}

#[async_trait]
impl AgentStore for PgStore {
    // Each save's first statement is its write; the unique keys say whether
    // the id or the name was taken (see the module doc for concurrent saves).
    async fn insert_agent(&self, agent: &Agent) -> Result<AgentInsert> {
        let mut tx = self.pool().begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO agents (id, project, name, version, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
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
            let id_taken: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM agents WHERE id = $1)")
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
        // A concurrent update of the same agent holds its row: this one waits
        // and then matches nothing (the version moved). A new name another
        // agent holds (or is taking) is a unique violation: `UPDATE OR
        // IGNORE` in SQLite, which skipped the row and reported the name.
        let moved =
            sqlx::query("UPDATE agents SET name = $1, version = $2, updated_at = $3 WHERE id = $4 AND version = $5")
                .bind(&agent.spec.name)
                .bind(i64::from(agent.version))
                .bind(to_ms(agent.updated_at))
                .bind(&agent.id)
                .bind(i64::from(agent.version) - 1)
                .execute(&mut *tx)
                .await;
        let moved = match moved {
            Ok(done) => done.rows_affected(),
            // Dropping the (failed) transaction rolls it back.
            Err(e) if unique_violation(&e) => return Ok(AgentInsert::NameTaken),
            Err(e) => return Err(EngineError::from(e)),
        };
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
        let row = sqlx::query_as::<_, AgentRow>(&format!("{AGENT_SELECT} WHERE a.id = $1"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(Agent::from))
    }

    async fn agent_version(&self, id: &str, version: u32) -> Result<Option<AgentVersion>> {
        let row = sqlx::query_as::<_, VersionRow>(&format!(
            "SELECT {VERSION_COLUMNS} FROM agent_versions WHERE agent_id = $1 AND version = $2"
        ))
        .bind(id)
        .bind(i64::from(version))
        .fetch_optional(self.pool())
        .await?;
        Ok(row.map(AgentVersion::from))
    }

    async fn agent_versions(&self, id: &str, before: Option<u32>, limit: u32) -> Result<Vec<AgentVersion>> {
        let rows = sqlx::query_as::<_, VersionRow>(&format!(
            "SELECT {VERSION_COLUMNS} FROM agent_versions WHERE agent_id = $1 AND version < $2
             ORDER BY version DESC LIMIT $3"
        ))
        .bind(id)
        .bind(before.map_or(i64::MAX, i64::from))
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        Ok(rows.into_iter().map(AgentVersion::from).collect())
    }

    async fn agents(&self, project: &str, after: Option<&str>, offset: u32, limit: u32) -> Result<Vec<Agent>> {
        let rows = sqlx::query_as::<_, AgentRow>(&format!(
            "{AGENT_SELECT} WHERE a.project = $1 AND a.name COLLATE \"C\" > $2
             ORDER BY a.name COLLATE \"C\" LIMIT $3 OFFSET $4"
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
            "SELECT agent_version, status, model, count(*), sum(input_tokens)::bigint, sum(output_tokens)::bigint,
                sum(cache_read_tokens)::bigint, sum(reasoning_tokens)::bigint, sum(total_tokens)::bigint,
                sum(requests)::bigint
             FROM runs WHERE agent_id = $1 AND agent_version IS NOT NULL
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
