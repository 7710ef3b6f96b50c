//! [`AgentStore`] for every backend: the `agents` and `agent_versions`
//! tables (specs are JSON: JSONB in PostgreSQL, read back as text).
//!
//! Concurrent saves are settled by the database: an insert skips on either
//! unique key (`ON CONFLICT DO NOTHING` waits for a concurrent insert of the
//! same id or name to commit or roll back), an update is a compare-and-set
//! on the stored version (a concurrent update of the same agent waits on its
//! row and then finds the version moved), and a rename onto a name another
//! save has just taken fails with a unique violation, read as `NameTaken`.
//! Names are compared and ordered bytewise (`COLLATE "C"`) on every database.

use async_trait::async_trait;

use super::{sql, unique_violation, with_db, SqlStore};
use crate::error::Result;
use crate::model::{Agent, AgentVersion, RunStatus, Usage};
use crate::store::agents::{AgentInsert, AgentRunSums, AgentScoreSums, AgentStore};
use crate::store::json_text;
use crate::store::to_ms;

use crate::store::rows::agents::*;

/// An agent with its current version's spec.
const AGENT_SELECT: &str = "SELECT a.id, a.project, a.version, a.created_at, a.updated_at, v.spec::text AS spec, \
     v.created_by_id, v.created_by FROM agents a JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.version";

/// The columns of `agent_versions` as [`VersionRow`] reads them.
const VERSION_COLUMNS: &str = "agent_id, version, spec::text AS spec, created_at, created_by_id, created_by";

/// Saves `agent` in one transaction: its row (inserted, or moved on from
/// the version before) and then its version row.
async fn save<S: SqlStore>(store: &S, agent: &Agent, new: bool) -> Result<AgentInsert> {
    with_db!(store.db(), |pool, D| {
        let mut tx = pool.begin_with(<D as super::Dialect>::BEGIN_WRITE).await?;
        let written = if new {
            sqlx::query(sql!(
                D,
                "INSERT INTO agents (id, project, name, version, created_at, updated_at)
                 VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
            ))
            .bind(&agent.id)
            .bind(&agent.project)
            .bind(&agent.spec.name)
            .bind(i64::from(agent.version))
            .bind(to_ms(agent.created_at))
            .bind(to_ms(agent.updated_at))
            .execute(&mut *tx)
            .await
        } else {
            sqlx::query(sql!(D, "UPDATE agents SET name = ?, version = ?, updated_at = ? WHERE id = ? AND version = ?"))
                .bind(&agent.spec.name)
                .bind(i64::from(agent.version))
                .bind(to_ms(agent.updated_at))
                .bind(&agent.id)
                .bind(i64::from(agent.version) - 1)
                .execute(&mut *tx)
                .await
        };
        let written = match written {
            Ok(done) => done.rows_affected() == 1,
            // A new name another agent holds (or is taking); dropping the
            // failed transaction rolls it back.
            Err(e) if unique_violation(&e) => return Ok(AgentInsert::NameTaken),
            Err(e) => return Err(e.into()),
        };
        if !written {
            // Why: an insert met the id or the name, an update a moved
            // version or the name.
            let (id_taken, name_taken): (bool, bool) = sqlx::query_as(sql!(
                D,
                "SELECT EXISTS (SELECT 1 FROM agents WHERE id = ?1),
                    EXISTS (SELECT 1 FROM agents WHERE project = ?2 AND name = ?3 AND id <> ?1)"
            ))
            .bind(&agent.id)
            .bind(&agent.project)
            .bind(&agent.spec.name)
            .fetch_one(&mut *tx)
            .await?;
            return Ok(match (new, id_taken, name_taken) {
                (true, true, _) => AgentInsert::IdTaken,
                (true, false, _) | (false, _, true) => AgentInsert::NameTaken,
                (false, _, false) => AgentInsert::VersionMoved,
            });
        }
        sqlx::query(sql!(
            D,
            "INSERT INTO agent_versions (agent_id, version, spec, created_at, created_by_id, created_by)
             VALUES (?, ?, ?::jsonb, ?, ?, ?)"
        ))
        .bind(&agent.id)
        .bind(i64::from(agent.version))
        .bind(json_text(&agent.spec))
        .bind(to_ms(agent.updated_at))
        .bind(agent.updated_by.as_ref().map(|a| &a.id))
        .bind(agent.updated_by.as_ref().map(|a| &a.name))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(AgentInsert::Saved)
    })
}

#[async_trait]
impl<S: SqlStore> AgentStore for S {
    // Each save's first statement is its write; the unique keys say whether
    // the id or the name was taken (see the module doc for concurrent saves).
    async fn insert_agent(&self, agent: &Agent) -> Result<AgentInsert> {
        save(self, agent, true).await
    }

    // A concurrent update of the same agent holds its row: this one waits
    // and then matches nothing (the version moved).
    async fn update_agent(&self, agent: &Agent) -> Result<AgentInsert> {
        save(self, agent, false).await
    }

    async fn agent(&self, id: &str) -> Result<Option<Agent>> {
        with_db!(self.db(), |pool, D| {
            let row = sqlx::query_as::<_, AgentRow>(sql!(D, format!("{AGENT_SELECT} WHERE a.id = ?")))
                .bind(id)
                .fetch_optional(pool)
                .await?;
            Ok(row.map(Agent::from))
        })
    }

    async fn agent_version(&self, id: &str, version: u32) -> Result<Option<AgentVersion>> {
        with_db!(self.db(), |pool, D| {
            let row = sqlx::query_as::<_, VersionRow>(sql!(
                D,
                format!("SELECT {VERSION_COLUMNS} FROM agent_versions WHERE agent_id = ? AND version = ?")
            ))
            .bind(id)
            .bind(i64::from(version))
            .fetch_optional(pool)
            .await?;
            Ok(row.map(AgentVersion::from))
        })
    }

    async fn agent_versions(&self, id: &str, before: Option<u32>, limit: u32) -> Result<Vec<AgentVersion>> {
        with_db!(self.db(), |pool, D| {
            let rows = sqlx::query_as::<_, VersionRow>(sql!(
                D,
                format!(
                    "SELECT {VERSION_COLUMNS} FROM agent_versions WHERE agent_id = ? AND version < ?
                 ORDER BY version DESC LIMIT ?"
                )
            ))
            .bind(id)
            .bind(before.map_or(i64::MAX, i64::from))
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?;
            Ok(rows.into_iter().map(AgentVersion::from).collect())
        })
    }

    async fn agents(&self, project: &str, after: Option<&str>, offset: u32, limit: u32) -> Result<Vec<Agent>> {
        with_db!(self.db(), |pool, D| {
            let rows = sqlx::query_as::<_, AgentRow>(sql!(
                D,
                format!(
                    "{AGENT_SELECT} WHERE a.project = ? AND a.name COLLATE \"C\" > ?
                 ORDER BY a.name COLLATE \"C\" LIMIT ? OFFSET ?"
                )
            ))
            .bind(project)
            .bind(after.unwrap_or(""))
            .bind(i64::from(limit))
            .bind(i64::from(offset))
            .fetch_all(pool)
            .await?;
            Ok(rows.into_iter().map(Agent::from).collect())
        })
    }

    async fn agent_run_sums(&self, id: &str) -> Result<Vec<AgentRunSums>> {
        with_db!(self.db(), |pool, D| {
            type Row = (Option<i64>, String, String, i64, i64, i64, i64, i64, i64, i64);
            let rows: Vec<Row> = sqlx::query_as(sql!(
                D,
                "SELECT agent_version, status, model, count(*), sum(input_tokens)::bigint, sum(output_tokens)::bigint,
                    sum(cache_read_tokens)::bigint, sum(reasoning_tokens)::bigint, sum(total_tokens)::bigint,
                    sum(requests)::bigint
                 FROM runs WHERE agent_id = ? AND agent_version IS NOT NULL
                 GROUP BY agent_version, status, model"
            ))
            .bind(id)
            .fetch_all(pool)
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
        })
    }

    async fn agent_score_sums(&self, id: &str, limit: u32) -> Result<Vec<AgentScoreSums>> {
        with_db!(self.db(), |pool, D| {
            type Row = (Option<i64>, String, i64, i64, Option<f64>, i64, i64);
            let rows: Vec<Row> = sqlx::query_as(sql!(
                D,
                "SELECT r.agent_version, s.name, count(*), count(s.number), sum(s.number), min(r.created_at),
                    max(r.created_at)
                 FROM runs r JOIN scores s ON s.run_id = r.id
                 WHERE r.agent_id = ? AND r.agent_version IS NOT NULL
                 GROUP BY r.agent_version, s.name
                 ORDER BY r.agent_version, s.name LIMIT ?"
            ))
            .bind(id)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?;
            let n = |v: i64| v.max(0) as u64;
            Ok(rows
                .into_iter()
                .map(|(version, name, count, numbers, sum, first_ms, last_ms)| AgentScoreSums {
                    version: version.unwrap_or(0).clamp(0, u32::MAX.into()) as u32,
                    name,
                    count: n(count),
                    numbers: n(numbers),
                    sum: sum.unwrap_or(0.0),
                    first_ms,
                    last_ms,
                })
                .collect())
        })
    }
}
