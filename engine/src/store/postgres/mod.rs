//! The PostgreSQL store: several runlens servers on one database.
//!
//! The same tables and columns as the SQLite store (migrations/postgres/),
//! with the store's parts written once for both (`store::sql`): JSON
//! payloads are JSONB, bound as text with `?::jsonb` and selected back as
//! text with `::text`, times are Unix milliseconds. What is PostgreSQL's own
//! is here: opening and migrating, a step's fenced writes (`fenced`,
//! `writes`), leases and notifications (`cluster`), numbered event appends
//! (`events`), a decision under a row lock (`approvals`), the list and trace
//! reads tuned for its planner (`list`), and OTLP spans (`spans`).
//!
//! Unlike SQLite, PostgreSQL runs transactions concurrently (READ COMMITTED),
//! so a read-then-write that SQLite's single writer made safe takes a row
//! lock (`FOR UPDATE`) or a transaction-scoped advisory lock.

mod approvals;
mod cluster;
mod events;
mod fenced;
mod list;
mod writes;

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgPool};

use self::writes::{transition_row, write_step};
use crate::error::{EngineError, Result};
use crate::model::{Email, Message, Run, RunStatus, Step, StepOutline, ToolCall};
use crate::store::sql::{insert_history, Pg};
use crate::store::{RunPatch, StepWrite};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

pub(super) use crate::store::sql::columns::{CALL_COLUMNS, STEP_COLUMNS};

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

impl PgStore {
    /// Stores runs with their histories in one transaction; `false`, with
    /// nothing stored (dropping the transaction rolls back the runs written
    /// before), when one of the ids exists.
    pub(crate) async fn insert_runs_in_transaction(&self, runs: &[(&Run, &[Message], &[Step])]) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        for (run, messages, steps) in runs {
            if !insert_history::<Pg>(&mut tx, run, messages, steps).await? {
                return Ok(false);
            }
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Moves a run from `from` to `to`, fenced by this server's lease on it;
    /// `None` when it was not in `from`.
    pub(crate) async fn transition_fenced(
        &self,
        id: &str,
        from: RunStatus,
        to: RunStatus,
        patch: RunPatch,
    ) -> Result<Option<Run>> {
        let mut tx = self.pool.begin().await?;
        self::cluster::check_fence(&mut tx, id).await?;
        let row = transition_row(&mut tx, id, from, to, patch).await?;
        if row.is_some() {
            tx.commit().await?;
        }
        Ok(row.map(Run::from))
    }

    /// Stores an email under this server's lease on its run (see `fenced`).
    pub(crate) async fn insert_email_fenced(&self, e: &Email) -> Result<()> {
        fenced::insert_email(&self.pool, e).await
    }
}

impl PgStore {
    /// A step's writes, fenced by this server's lease (see `writes::write_step`).
    pub(crate) async fn save_step_fenced(&self, w: StepWrite<'_>) -> Result<()> {
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

    /// A step's writes and its run's status change in one transaction;
    /// `None` (the step rolled back with it) when the run was not in `from`.
    pub(crate) async fn finish_step_fenced(
        &self,
        w: StepWrite<'_>,
        from: RunStatus,
        to: RunStatus,
        patch: RunPatch,
    ) -> Result<Option<Run>> {
        let mut tx = self.pool.begin().await?;
        write_step(&mut tx, &w).await?;
        let row = transition_row(&mut tx, &w.step.run_id, from, to, patch).await?;
        if row.is_some() {
            tx.commit().await?;
        }
        Ok(row.map(Run::from))
    }

    /// One tool call's row, fenced by this server's lease (see `fenced`).
    pub(crate) async fn save_tool_call_fenced(&self, call: &ToolCall, pos: usize) -> Result<()> {
        let mut conn = self.pool.acquire().await?;
        let w =
            fenced::Writes { run_id: &call.run_id, step: None, calls: vec![(pos, call)], messages: &[], usage: None };
        fenced::write(&mut conn, w).await
    }

    /// A page of a run's steps with their calls in one snapshot (see `list`).
    pub(crate) async fn steps_page_snapshot(&self, run_id: &str, from: u32, limit: u32) -> Result<Vec<Step>> {
        self::list::steps_page(&self.pool, run_id, from, limit).await
    }

    /// A run's step outline in one snapshot (see `list`).
    pub(crate) async fn step_outline_snapshot(&self, run_id: &str) -> Result<Vec<StepOutline>> {
        self::list::step_outline(&self.pool, run_id).await
    }
}

/// The schema a connection's `options` name with `-c search_path=…`.
fn search_path(opts: &PgConnectOptions) -> Option<String> {
    let options = opts.get_options()?;
    let at = options.find("search_path=")?;
    let value = &options[at + "search_path=".len()..];
    Some(value.split_whitespace().next().unwrap_or("").to_owned())
}
