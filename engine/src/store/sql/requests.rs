//! [`RequestStore`] for every backend: the tables of the `agent_requests`
//! migration of each are the same, with text payloads and millisecond
//! integers.
//!
//! Every write's first statement writes (SQLite then holds its write lock
//! for the whole transaction); a decision is a compare-and-set on
//! `status = 'pending'`, so of two racing decisions exactly one is stored.

use async_trait::async_trait;

use super::{sql, with_db, SqlStore};
use crate::model::{AgentRequest, ExternalRun, RequestKind, RequestOutcome, RequestStatus};
use crate::store::{from_ms, RequestStore};

#[derive(sqlx::FromRow)]
struct RequestRow {
    pub id: String,
    pub project: String,
    pub kind: String,
    pub status: String,
    pub tool: Option<String>,
    pub arguments: Option<String>,
    pub question: Option<String>,
    pub choices: Option<String>,
    pub context: Option<String>,
    pub external_id: Option<String>,
    pub run_name: String,
    pub trace_id: Option<String>,
    pub run_id: Option<String>,
    pub fingerprint: String,
    pub callback_url: Option<String>,
    pub requested_by: String,
    pub requested_by_id: String,
    pub created_at: i64,
    pub deadline: Option<i64>,
    pub outcome: Option<String>,
}

fn parse<T: serde::de::DeserializeOwned>(text: Option<String>) -> Option<T> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

impl From<RequestRow> for AgentRequest {
    fn from(r: RequestRow) -> Self {
        AgentRequest {
            id: r.id,
            project: r.project,
            kind: RequestKind::parse(&r.kind).unwrap_or(RequestKind::Approval),
            status: RequestStatus::parse(&r.status).unwrap_or(RequestStatus::Pending),
            tool: r.tool,
            arguments: parse(r.arguments),
            question: r.question,
            choices: parse(r.choices),
            context: parse(r.context),
            run: ExternalRun { external_id: r.external_id, name: r.run_name, trace_id: r.trace_id },
            run_id: r.run_id,
            requested_by: r.requested_by,
            requested_by_id: r.requested_by_id,
            created_at: from_ms(r.created_at),
            deadline: r.deadline.map(from_ms),
            callback_url: r.callback_url,
            decision: parse::<RequestOutcome>(r.outcome),
        }
    }
}

#[async_trait]
impl<S: SqlStore> RequestStore for S {
    async fn insert_request(
        &self,
        insert: crate::store::RequestInsert<'_>,
    ) -> crate::error::Result<crate::store::Inserted> {
        with_db!(self.db(), |pool, D| {
            use crate::store::json_text;
            let r = insert.request;
            let mut tx = pool.begin_with(<D as super::Dialect>::BEGIN_WRITE).await?;
            let added = sqlx::query(sql!(
                D,
                "INSERT INTO agent_requests (id, project, kind, status, tool, arguments, question, choices,
                    context, external_id, run_name, trace_id, run_id, idempotency_key, fingerprint, callback_url,
                    requested_by, requested_by_id, created_at, deadline, decided_at, outcome)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                 ON CONFLICT DO NOTHING",
            ))
            .bind(&r.id)
            .bind(insert.project)
            .bind(r.kind.as_str())
            .bind(r.status.as_str())
            .bind(&r.tool)
            .bind(r.arguments.as_ref().map(json_text))
            .bind(&r.question)
            .bind(r.choices.as_ref().map(json_text))
            .bind(r.context.as_ref().map(json_text))
            .bind(&r.run.external_id)
            .bind(&r.run.name)
            .bind(&r.run.trace_id)
            .bind(&r.run_id)
            .bind(insert.idempotency_key)
            .bind(insert.fingerprint)
            .bind(&r.callback_url)
            .bind(&r.requested_by)
            .bind(&r.requested_by_id)
            .bind(r.created_at.timestamp_millis())
            .bind(r.deadline.map(|d| d.timestamp_millis()))
            .bind(r.decision.as_ref().map(|d| d.decided_at.timestamp_millis()))
            .bind(r.decision.as_ref().map(json_text))
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1;
            if !added {
                // Only the idempotency key's index can conflict (ids are random).
                let row: Option<RequestRow> = sqlx::query_as(sql!(D, SELECT_BY_KEY))
                    .bind(insert.project)
                    .bind(r.kind.as_str())
                    .bind(insert.idempotency_key)
                    .fetch_optional(&mut *tx)
                    .await?;
                tx.commit().await?;
                return match row {
                    Some(row) => {
                        let same = row.fingerprint == insert.fingerprint;
                        Ok(crate::store::Inserted::Existing { request: row.into(), same })
                    }
                    None => Err(crate::error::EngineError::Conflict(format!(
                        "request `{}` could not be stored; try again",
                        r.id
                    ))),
                };
            }
            if r.status == crate::model::RequestStatus::Pending {
                sqlx::query(sql!(
                    D,
                    "INSERT INTO request_counts (project, n) VALUES (?, 1)
                     ON CONFLICT (project) DO UPDATE SET n = request_counts.n + 1",
                ))
                .bind(insert.project)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            Ok(crate::store::Inserted::Created(r.clone()))
        })
    }

    async fn request(
        &self,
        project: Option<&str>,
        id: &str,
    ) -> crate::error::Result<Option<crate::model::AgentRequest>> {
        with_db!(self.db(), |pool, D| {
            let row: Option<RequestRow> = match project {
                Some(p) => sqlx::query_as(sql!(D, SELECT_IN_PROJECT)).bind(id).bind(p).fetch_optional(pool).await?,
                None => sqlx::query_as(sql!(D, SELECT_BY_ID)).bind(id).fetch_optional(pool).await?,
            };
            Ok(row.map(Into::into))
        })
    }

    async fn decide_request(
        &self,
        write: crate::store::RequestDecisionWrite<'_>,
    ) -> crate::error::Result<Option<crate::model::AgentRequest>> {
        with_db!(self.db(), |pool, D| {
            use crate::store::json_text;
            let o = write.outcome;
            let at = o.decided_at.timestamp_millis();
            let mut tx = pool.begin_with(<D as super::Dialect>::BEGIN_WRITE).await?;
            let changed = sqlx::query(sql!(
                D,
                "UPDATE agent_requests SET status = ?, outcome = ?, decided_at = ?
                 WHERE id = ? AND project = ? AND status = 'pending'",
            ))
            .bind(o.outcome.as_str())
            .bind(json_text(o))
            .bind(at)
            .bind(write.id)
            .bind(write.project)
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1;
            if !changed {
                return Ok(None);
            }
            sqlx::query(sql!(D, "UPDATE request_counts SET n = n - 1 WHERE project = ?"))
                .bind(write.project)
                .execute(&mut *tx)
                .await?;
            if let Some(cb) = &write.callback {
                sqlx::query(sql!(
                    D,
                    "INSERT INTO webhook_deliveries (id, run_id, project, subscription_id, target, change_seq,
                        url, old_status, new_status, changed_at, payload, state, attempts, next_attempt_at,
                        claimed_until, created_at)
                     VALUES (?, ?, ?, NULL, 'callback', 0, ?, 'paused', 'running', ?, ?, 'pending', 0, ?, 0, ?)",
                ))
                .bind(cb.delivery_id)
                .bind(write.id)
                .bind(write.project)
                .bind(cb.url)
                .bind(at)
                .bind(cb.payload)
                .bind(at)
                .bind(at)
                .execute(&mut *tx)
                .await?;
            }
            if let Some(rule) = write.rule {
                sqlx::query(sql!(
                    D,
                    "INSERT INTO request_rules (project, requested_by_id, external_id, tool, outcome)
                     VALUES (?, ?, ?, ?, ?)
                     ON CONFLICT (project, requested_by_id, external_id, tool) DO UPDATE SET outcome = excluded.outcome",
                ))
                .bind(write.project)
                .bind(rule.requested_by_id)
                .bind(rule.external_id)
                .bind(rule.tool)
                .bind(json_text(o))
                .execute(&mut *tx)
                .await?;
            }
            let row: RequestRow = sqlx::query_as(sql!(D, SELECT_IN_PROJECT))
                .bind(write.id)
                .bind(write.project)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(Some(row.into()))
        })
    }

    async fn requests(&self, f: &crate::store::RequestFilter) -> crate::error::Result<Vec<crate::model::AgentRequest>> {
        with_db!(self.db(), |pool, D| {
            let kinds: [&str; 2] = match f.kind {
                Some(k) => [k.as_str(); 2],
                None => ["approval", "question"],
            };
            let (after_ms, after_id) =
                f.after.clone().unwrap_or((if f.pending { i64::MIN } else { i64::MAX }, String::new()));
            let text = match (f.pending, f.after.is_some()) {
                (true, false) => sql!(D, PAGE_PENDING_FIRST),
                (true, true) => sql!(D, PAGE_PENDING_AFTER),
                (false, false) => sql!(D, PAGE_DECIDED_FIRST),
                (false, true) => sql!(D, PAGE_DECIDED_AFTER),
            };
            let mut q = sqlx::query_as::<_, RequestRow>(text).bind(&f.project).bind(kinds[0]).bind(kinds[1]);
            if f.after.is_some() {
                q = q.bind(after_ms).bind(after_ms).bind(after_id);
            }
            let rows = q.bind(i64::from(f.limit)).fetch_all(pool).await?;
            Ok(rows.into_iter().map(Into::into).collect())
        })
    }

    async fn run_requests(&self, run_id: &str, limit: u32) -> crate::error::Result<Vec<crate::model::AgentRequest>> {
        with_db!(self.db(), |pool, D| {
            let rows: Vec<RequestRow> =
                sqlx::query_as(sql!(D, SELECT_BY_RUN)).bind(run_id).bind(i64::from(limit)).fetch_all(pool).await?;
            Ok(rows.into_iter().map(Into::into).collect())
        })
    }

    async fn pending_requests(&self, project: &str) -> crate::error::Result<u64> {
        with_db!(self.db(), |pool, D| {
            let n: Option<i64> = sqlx::query_scalar(sql!(D, "SELECT n FROM request_counts WHERE project = ?"))
                .bind(project)
                .fetch_optional(pool)
                .await?;
            Ok(n.unwrap_or(0).max(0) as u64)
        })
    }

    async fn due_requests(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        limit: u32,
    ) -> crate::error::Result<Vec<(String, String)>> {
        with_db!(self.db(), |pool, D| {
            Ok(sqlx::query_as(sql!(
                D,
                "SELECT project, id FROM agent_requests
                 WHERE status = 'pending' AND deadline IS NOT NULL AND deadline <= ?
                 ORDER BY deadline LIMIT ?",
            ))
            .bind(now.timestamp_millis())
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?)
        })
    }

    async fn next_request_deadline(&self) -> crate::error::Result<Option<chrono::DateTime<chrono::Utc>>> {
        with_db!(self.db(), |pool, D| {
            let at: Option<i64> = sqlx::query_scalar(sql!(
                D,
                "SELECT min(deadline) FROM agent_requests WHERE status = 'pending' AND deadline IS NOT NULL",
            ))
            .fetch_one(pool)
            .await?;
            Ok(at.map(crate::store::from_ms))
        })
    }

    async fn request_rule(
        &self,
        project: &str,
        key: crate::store::RuleKey<'_>,
    ) -> crate::error::Result<Option<crate::model::RequestOutcome>> {
        with_db!(self.db(), |pool, D| {
            let text: Option<String> = sqlx::query_scalar(sql!(
                D,
                "SELECT outcome FROM request_rules
                 WHERE project = ? AND requested_by_id = ? AND external_id = ? AND tool = ?",
            ))
            .bind(project)
            .bind(key.requested_by_id)
            .bind(key.external_id)
            .bind(key.tool)
            .fetch_optional(pool)
            .await?;
            Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
        })
    }
}

macro_rules! select {
    ($($rest:literal),*) => {
        concat!(
            "SELECT id, project, kind, status, tool, arguments, question, choices, context, external_id, run_name, trace_id, \
             run_id, fingerprint, callback_url, requested_by, requested_by_id, created_at, deadline, outcome \
             FROM agent_requests ",
            $($rest),*
        )
    };
}

const SELECT_BY_KEY: &str = select!("WHERE project = ? AND kind = ? AND idempotency_key = ?");
const SELECT_IN_PROJECT: &str = select!("WHERE id = ? AND project = ?");
const SELECT_BY_ID: &str = select!("WHERE id = ?");
const SELECT_BY_RUN: &str = select!("WHERE run_id = ? ORDER BY created_at, id LIMIT ?");
const PAGE_PENDING_FIRST: &str =
    select!("WHERE project = ? AND kind IN (?, ?) AND status = 'pending' ORDER BY created_at, id LIMIT ?");
const PAGE_PENDING_AFTER: &str = select!(
    "WHERE project = ? AND kind IN (?, ?) AND status = 'pending' ",
    "AND (created_at > ? OR (created_at = ? AND id > ?)) ORDER BY created_at, id LIMIT ?"
);
const PAGE_DECIDED_FIRST: &str =
    select!("WHERE project = ? AND kind IN (?, ?) AND status <> 'pending' ORDER BY decided_at DESC, id DESC LIMIT ?");
const PAGE_DECIDED_AFTER: &str = select!(
    "WHERE project = ? AND kind IN (?, ?) AND status <> 'pending' ",
    "AND (decided_at < ? OR (decided_at = ? AND id < ?)) ORDER BY decided_at DESC, id DESC LIMIT ?"
);
