//! The PostgreSQL store: several runlens servers on one database.
//!
//! The same tables and columns as the SQLite store (migrations/postgres/),
//! read through the shared row codec (`store::rows`): JSON payloads are
//! JSONB, bound as text with `$n::jsonb` and selected back as text with
//! `::text` (the column lists below), times are Unix milliseconds.
//!
//! Unlike SQLite, PostgreSQL runs transactions concurrently (READ COMMITTED),
//! so a read-then-write that SQLite's single writer made safe takes a row
//! lock (`FOR UPDATE`) or a transaction-scoped advisory lock here.

mod agents;
mod approvals;
mod cluster;
mod conversation;
mod directory;
mod events;
mod fenced;
mod http_tools;
mod list;
mod recovery;
mod spans;
mod webhook_reads;
mod webhooks;
mod writes;

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgPool};

use self::writes::{insert_run_rows, transition_row, write_step};
use crate::error::{EngineError, Result};
use crate::model::{Email, FamilyMember, Message, Run, RunFilter, RunPage, RunStatus, Step, StepOutline, ToolCall};
use crate::store::rows::{EmailRow, MessageRow, RunRow};
use crate::store::{
    AgentStore, ApprovalStore, Blob, Directory, HistoryInsert, HistoryWrite, HttpToolStore, RunHead, RunOverrides,
    RunPatch, RunStore, StepStore, StepWrite, Store, WebhookStore,
};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

/// The columns of `runs` as [`RunRow`] reads them (JSONB as text).
pub(super) const RUN_COLUMNS: &str = "id, name, status, model, model_settings::text AS model_settings, system_prompt, \
    initial_prompt, input::text AS input, tools::text AS tools, tags::text AS tags, context::text AS context, \
    max_turns, agent_id, project, created_by_id, created_by, approval::text AS approval, \
    always_approve::text AS always_approve, always_reject::text AS always_reject, interactive, \
    result_schema::text AS result_schema, call_summarization, parent_run_id, forked_from_message_id, \
    result::text AS result, summary, failure_reason, input_tokens, output_tokens, cache_read_tokens, \
    reasoning_tokens, total_tokens, requests, step_count, created_at, updated_at, started_at, finished_at, \
    agent_version, agent_overrides::text AS agent_overrides, current_agent, current_agent_version, \
    sub_agents::text AS sub_agents, handoffs::text AS handoffs, handoff_turns, parent_call_id, root_run_id, depth, \
    child_count, metadata::text AS metadata, reasoning_traces, on_status_change::text AS on_status_change, \
    source::text AS source, group_id, forked_from_step, replay";

/// [`RUN_COLUMNS`] of the table aliased `alias` (for joins).
pub(super) fn run_columns(alias: &str) -> String {
    RUN_COLUMNS.split(", ").map(|c| format!("{alias}.{c}")).collect::<Vec<_>>().join(", ")
}

/// The columns of `steps` as `StepRow` reads them.
pub(super) const STEP_COLUMNS: &str = "run_id, idx, kind, status, request::text AS request, \
    response::text AS response, input_tokens, output_tokens, cache_read_tokens, reasoning_tokens, total_tokens, \
    requests, started_at, model_completed_at, completed_at, model";

/// The columns of `tool_calls` as `ToolCallRow` reads them.
pub(super) const CALL_COLUMNS: &str = "run_id, step_idx, pos, id, tool_name, arguments::text AS arguments, \
    result::text AS result, error, status, reasoning, requested_at, approval::text AS approval, started_at, \
    completed_at, child_run_id";

/// The columns of `messages` as `MessageRow` reads them.
pub(super) const MESSAGE_COLUMNS: &str = "run_id, seq, id, type, step_idx, data::text AS data, created_at";

/// A pool of connections to one PostgreSQL database (or one schema of it).
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    /// The `NOTIFY` channel of this store's schema (servers on other schemas
    /// of the database are other clusters).
    channel: String,
    /// This handle's id in its notifications (see `ClusterStore::instance`).
    instance: String,
}

impl PgStore {
    /// Connects to `url` (`postgres://user@host:port/db`) and brings the
    /// schema up to date. Several servers may open the same database at
    /// once: migrations run under sqlx's advisory lock. With
    /// `?options[search_path]=name` every table lives in schema `name`,
    /// created if missing (one database can hold several stores: each test
    /// gets its own this way).
    pub async fn open(url: &str) -> Result<Self> {
        let opts = PgConnectOptions::from_str(url)?;
        if let Some(schema) = search_path(&opts) {
            if schema.is_empty() || !schema.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(EngineError::Invalid(format!("search_path `{schema}` is not one name of [A-Za-z0-9_]")));
            }
            let mut conn =
                sqlx::postgres::PgConnection::connect_with(&opts.clone().options([("search_path", "public")])).await?;
            sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"")).execute(&mut conn).await?;
            sqlx::Connection::close(conn).await?;
        }
        Self::connect(opts).await
    }

    async fn connect(opts: PgConnectOptions) -> Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .idle_timeout(Duration::from_secs(60))
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts)
            .await?;
        MIGRATOR.run(&pool).await?;
        let schema: String = sqlx::query_scalar("SELECT current_schema()::text").fetch_one(&pool).await?;
        let channel = format!("runlens.{schema}");
        Ok(Self { pool, channel, instance: uuid::Uuid::now_v7().to_string() })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

impl Store for PgStore {
    fn directory(&self) -> &dyn Directory {
        self
    }

    fn agents(&self) -> &dyn AgentStore {
        self
    }

    fn webhooks(&self) -> &dyn WebhookStore {
        self
    }

    fn http_tools(&self) -> &dyn HttpToolStore {
        self
    }

    fn spans(&self) -> &dyn crate::store::SpanStore {
        self
    }

    fn requests(&self) -> &dyn crate::store::RequestStore {
        self
    }

    fn cluster(&self) -> Option<&dyn crate::store::ClusterStore> {
        Some(self)
    }
}

#[async_trait]
impl RunStore for PgStore {
    async fn insert_run(&self, run: &Run, first: &Message) -> Result<bool> {
        self.insert_run_with_history(run, std::slice::from_ref(first), &[]).await
    }

    async fn insert_run_with_history(&self, run: &Run, messages: &[Message], steps: &[Step]) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        if !insert_run_rows(&mut tx, run, messages, steps).await? {
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn insert_runs(&self, runs: &[(Run, Vec<Message>)]) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        for (run, messages) in runs {
            // Dropping the transaction rolls back the runs written before.
            if !insert_run_rows(&mut tx, run, messages, &[]).await? {
                return Ok(false);
            }
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn insert_run_with_blobs(&self, write: HistoryWrite<'_>) -> Result<HistoryInsert> {
        self::conversation::insert_run_with_blobs(&self.pool, write).await
    }

    async fn get_run(&self, id: &str) -> Result<Option<Run>> {
        let row = sqlx::query_as::<_, RunRow>(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        let Some(mut run) = row.map(Run::from) else { return Ok(None) };
        if run.status == RunStatus::Paused {
            run.interruptions = self.interruptions(Some(id), None).await?;
        }
        Ok(Some(run))
    }

    async fn run_to_drive(&self, id: &str) -> Result<Option<std::result::Result<Run, String>>> {
        let row = sqlx::query_as::<_, RunRow>(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await;
        match row {
            Ok(row) => Ok(row.map(RunRow::decode)),
            Err(e @ (sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_))) => Ok(Some(Err(e.to_string()))),
            Err(e) => Err(e.into()),
        }
    }

    async fn run_head(&self, id: &str) -> Result<Option<RunHead>> {
        let row: Option<(String, String, i64, String, Option<String>)> =
            sqlx::query_as("SELECT status, model, step_count, project, source::text FROM runs WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|(status, model, steps, project, source)| RunHead {
            status: RunStatus::parse(&status).unwrap_or(RunStatus::Failed),
            model,
            step_count: steps as u32,
            project,
            source: source.and_then(|s| serde_json::from_str(&s).ok()),
        }))
    }

    async fn list_runs(&self, f: &RunFilter) -> Result<RunPage> {
        self::list::list_runs(&self.pool, f).await
    }

    async fn run_ids_with_status(&self, status: RunStatus) -> Result<Vec<String>> {
        let ids = sqlx::query_scalar::<_, String>(
            "SELECT id FROM runs WHERE status = $1 AND source IS NULL ORDER BY created_at",
        )
        .bind(status.as_str())
        .fetch_all(&self.pool)
        .await?;
        Ok(ids)
    }

    async fn unannounced_finishes(&self) -> Result<Vec<String>> {
        let ids = sqlx::query_scalar::<_, String>("SELECT id FROM runs WHERE finish_unannounced")
            .fetch_all(&self.pool)
            .await?;
        Ok(ids)
    }

    async fn transition(&self, id: &str, from: RunStatus, to: RunStatus, patch: RunPatch) -> Result<Run> {
        from.check(to)?;
        let mut tx = self.pool.begin().await?;
        self::cluster::check_fence(&mut tx, id).await?;
        match transition_row(&mut tx, id, from, to, patch).await? {
            Some(row) => {
                tx.commit().await?;
                Ok(row.into())
            }
            None => {
                tx.rollback().await?;
                Err(self.transition_refused(id, from, to).await)
            }
        }
    }

    async fn follow_up(&self, run_id: &str, text: &str, o: &RunOverrides) -> Result<Option<(Run, Message)>> {
        self::conversation::follow_up(&self.pool, run_id, text, o).await
    }

    async fn family(&self, run_id: &str) -> Result<Vec<FamilyMember>> {
        self::conversation::family(&self.pool, run_id).await
    }

    async fn children(&self, id: &str) -> Result<Vec<Run>> {
        let rows = sqlx::query_as::<_, RunRow>(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE parent_run_id = $1 AND parent_call_id IS NOT NULL
             ORDER BY created_at, id"
        ))
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(Run::from).collect())
    }

    async fn group_runs(&self, group_id: &str, limit: u32) -> Result<Vec<Run>> {
        self::list::group_runs(&self.pool, group_id, limit).await
    }

    async fn tree_sums(&self, id: &str) -> Result<Vec<(String, u64, crate::model::Usage)>> {
        type Row = (String, i64, i64, i64, i64, i64, i64, i64);
        let rows: Vec<Row> = sqlx::query_as(
            "WITH RECURSIVE tree(id) AS (
                SELECT $1::text UNION ALL
                SELECT r.id FROM runs r JOIN tree t ON r.parent_run_id = t.id WHERE r.parent_call_id IS NOT NULL)
             SELECT model, count(*), sum(input_tokens)::bigint, sum(output_tokens)::bigint,
                sum(cache_read_tokens)::bigint, sum(reasoning_tokens)::bigint, sum(total_tokens)::bigint,
                sum(requests)::bigint
             FROM runs WHERE id IN (SELECT id FROM tree) GROUP BY model",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        let n = |v: i64| v.max(0) as u64;
        Ok(rows
            .into_iter()
            .map(|(model, runs, i, o, c, r, t, q)| {
                let usage = crate::model::Usage {
                    input_tokens: n(i),
                    output_tokens: n(o),
                    cache_read_tokens: n(c),
                    reasoning_tokens: n(r),
                    total_tokens: n(t),
                    requests: n(q),
                };
                (model, n(runs), usage)
            })
            .collect())
    }

    async fn insert_blob(&self, blob: &Blob) -> Result<()> {
        self::conversation::insert_blob(&self.pool, blob).await
    }

    async fn get_blob(&self, id: &str) -> Result<Option<Blob>> {
        self::conversation::get_blob(&self.pool, id).await
    }

    async fn run_blobs(&self, run_id: &str) -> Result<Vec<Blob>> {
        self::conversation::run_blobs(&self.pool, run_id).await
    }

    async fn insert_email(&self, e: &Email) -> Result<()> {
        fenced::insert_email(&self.pool, e).await
    }

    async fn email(&self, id: &str) -> Result<Option<Email>> {
        let row = sqlx::query_as::<_, EmailRow>("SELECT * FROM outbox WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(Email::from))
    }

    async fn outbox(&self, limit: u32, project: Option<&str>) -> Result<Vec<Email>> {
        let rows = sqlx::query_as::<_, EmailRow>(
            "SELECT outbox.* FROM outbox
             WHERE $1::text IS NULL OR run_id IN (SELECT id FROM runs WHERE project = $1)
             ORDER BY created_at DESC, id DESC LIMIT $2",
        )
        .bind(project)
        .bind(limit.clamp(1, 1000) as i64)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(Email::from).collect())
    }
}

#[async_trait]
impl StepStore for PgStore {
    async fn save_step(&self, w: StepWrite<'_>) -> Result<()> {
        if w.switch.is_none() {
            // One statement: its own transaction, one round trip.
            let mut conn = self.pool.acquire().await?;
            return write_step(&mut conn, &w).await;
        }
        let mut tx = self.pool.begin().await?;
        write_step(&mut tx, &w).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn finish_step(&self, w: StepWrite<'_>, from: RunStatus, to: RunStatus, patch: RunPatch) -> Result<Run> {
        from.check(to)?;
        let id = w.step.run_id.clone();
        let mut tx = self.pool.begin().await?;
        write_step(&mut tx, &w).await?;
        match transition_row(&mut tx, &id, from, to, patch).await? {
            Some(row) => {
                tx.commit().await?;
                Ok(row.into())
            }
            None => {
                tx.rollback().await?;
                Err(self.transition_refused(&id, from, to).await)
            }
        }
    }

    async fn save_tool_call(&self, call: &ToolCall, pos: usize) -> Result<()> {
        let mut conn = self.pool.acquire().await?;
        let w =
            fenced::Writes { run_id: &call.run_id, step: None, calls: vec![(pos, call)], messages: &[], usage: None };
        fenced::write(&mut conn, w).await
    }

    async fn steps(&self, run_id: &str) -> Result<Vec<Step>> {
        self.steps_page(run_id, 0, u32::MAX).await
    }

    async fn steps_page(&self, run_id: &str, from: u32, limit: u32) -> Result<Vec<Step>> {
        self::list::steps_page(&self.pool, run_id, from, limit).await
    }

    async fn step_outline(&self, run_id: &str) -> Result<Vec<StepOutline>> {
        self::list::step_outline(&self.pool, run_id).await
    }

    async fn last_step_index(&self, run_id: &str) -> Result<Option<u32>> {
        let idx: Option<i64> = sqlx::query_scalar("SELECT max(idx) FROM steps WHERE run_id = $1")
            .bind(run_id)
            .fetch_one(&self.pool)
            .await?;
        Ok(idx.and_then(|i| u32::try_from(i).ok()))
    }

    async fn tool_call(&self, run_id: &str, call_id: &str) -> Result<Option<ToolCall>> {
        self::list::tool_call(&self.pool, run_id, call_id).await
    }

    async fn messages(&self, run_id: &str) -> Result<Vec<Message>> {
        let rows = sqlx::query_as::<_, MessageRow>(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE run_id = $1 ORDER BY seq"
        ))
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().filter_map(MessageRow::into_message).collect())
    }

    async fn messages_page(&self, run_id: &str, from: u64, limit: u32) -> Result<Vec<Message>> {
        self::list::messages_page(&self.pool, run_id, from, limit).await
    }

    async fn messages_tail(&self, run_id: &str, n: u32) -> Result<(Vec<Message>, u64)> {
        self::list::messages_tail(&self.pool, run_id, n).await
    }

    async fn last_message_seq(&self, run_id: &str) -> Result<Option<u64>> {
        let seq: Option<i64> = sqlx::query_scalar("SELECT max(seq) FROM messages WHERE run_id = $1")
            .bind(run_id)
            .fetch_one(&self.pool)
            .await?;
        Ok(seq.map(|s| u64::try_from(s).unwrap_or(0)))
    }

    async fn count_messages(&self, run_id: &str, kind: &str) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM messages WHERE run_id = $1 AND type = $2")
            .bind(run_id)
            .bind(kind)
            .fetch_one(&self.pool)
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}

/// The schema a connection's `options` name with `-c search_path=…`.
fn search_path(opts: &PgConnectOptions) -> Option<String> {
    let options = opts.get_options()?;
    let at = options.find("search_path=")?;
    let value = &options[at + "search_path=".len()..];
    Some(value.split_whitespace().next().unwrap_or("").to_owned())
}

impl PgStore {
    /// Why a compare-and-set on a run's status changed nothing.
    async fn transition_refused(&self, id: &str, from: RunStatus, to: RunStatus) -> EngineError {
        match self.get_run(id).await {
            Err(e) => e,
            Ok(None) => EngineError::NotFound(format!("run `{id}`")),
            Ok(Some(run)) => match run.status.check(to) {
                Err(e) => e.into(),
                Ok(()) => EngineError::Conflict(format!("run `{id}` is {}, not {from} as expected", run.status)),
            },
        }
    }
}

crate::store::requests_sql::request_store!(PgStore, crate::store::requests_sql::numbered);
crate::store::grants::grant_store!(PgStore, crate::store::requests_sql::numbered);
crate::store::sign_ins::sign_in_store!(PgStore, crate::store::requests_sql::numbered);
