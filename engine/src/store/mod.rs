//! Persistence behind traits, so the runner never knows which database it
//! writes to. The store reads as parts, one trait each: [`RunStore`] (runs,
//! their family and tree, blobs, sent emails), [`StepStore`] (steps, tool
//! calls and the transcript), [`ApprovalStore`] (decisions on tool calls),
//! [`GrantStore`] (what lets a call that needs approval run),
//! [`EventStore`] (each run's numbered events), [`PriceStore`] (price
//! tables) and [`SecretStore`] (server secrets). [`Store`] is all of them
//! at once, what the engine holds (`Arc<dyn Store>`), and hands out the sub-stores kept in the same
//! database: [`Directory`] (with its [`SessionStore`] and [`SignInStore`]), [`AgentStore`], [`WebhookStore`],
//! [`HttpToolStore`], [`SpanStore`], [`RequestStore`], [`TreeStore`] (each
//! tree of runs' counters and bounds) and [`ScoreStore`].
//!
//! Each part is written once for every database, in `sql/` (one file per
//! part: runs, steps and calls, approvals, events and prices, directory,
//! agents, HTTP tools, webhooks, OTLP spans, requests, recovery), against a
//! small dialect per database that says what truly differs (placeholders,
//! casts, row locks, JSON paths, advisory locks, planner hints; see
//! `sql::Dialect`). Each backend keeps a folder for what is its own: opening
//! and migrating, and the hot paths tuned for it — `sqlite/` (the embedded
//! default: a group-commit write thread and a rusqlite trace reader) and
//! `postgres/` (several servers on one database: fenced writes, leases and
//! notifications). Rows are decoded by the shared row codec (`rows/`).
//!
//! A third backend is a dialect, not a third copy: its store type in
//! `store/<backend>/`, its migrations in `migrations/<backend>/`, a variant
//! of `sql::Db` with an arm of `sql::with_db!`, an implementation of
//! `sql::Dialect` and `sql::RowWrites`, the arms of the few `match`es on
//! `sql::Db` where a backend has a path of its own, and its URL scheme in
//! [`open`]; then the engine and API suites run on it. The steps are
//! listed in `sql`'s module docs.
//!
//! Status changes go through [`RunStore::transition`], a compare-and-set on
//! the expected current status after [`RunStatus::check`] approved the move,
//! so a lost race is an error rather than a silent overwrite.
//!
//! [`RunStatus::check`]: crate::model::RunStatus::check

mod agents;
mod approvals;
pub mod cluster;
mod datasets;
mod directory;
mod evaluators;
mod events;
mod experiments;
pub(crate) mod grants;
mod http_tools;
#[cfg(feature = "postgres")]
mod postgres;
mod prices;
pub mod recovery;
mod requests;
mod retention;
mod reviews;
mod rows;
mod runs;
mod scores;
pub(crate) mod secrets;
pub(crate) mod sessions;
pub(crate) mod sign_ins;
mod spans;
mod sql;
mod sqlite;
mod steps;
pub(crate) mod trees;
mod webhooks;

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::model::Run;

pub use agents::{AgentInsert, AgentRunSums, AgentScoreSums, AgentStore};
pub use approvals::{
    ApprovalStore, DecideOutcome, DecidedCall, DecisionCursor, DecisionWrite, InboxCursor, InboxFilter, InboxPage,
    InboxStart, PendingCall, PendingCalls,
};
pub use cluster::ClusterStore;
pub use datasets::{DatasetStore, DatasetWrite, ItemsWrite};
pub use directory::{Directory, UserInsert};
pub use evaluators::{CappedInsert, EvaluatorCursor, EvaluatorStore, WatchingEvaluator};
pub use events::EventStore;
pub use experiments::{ExperimentStore, ItemRun, ValueCount};
pub use grants::{role_in, GrantStore, MAX_RUN_GRANTS};
pub use http_tools::{HttpToolStore, HttpToolWrite, StoredHttpTool};
#[cfg(feature = "postgres")]
pub use postgres::PgStore;
pub use prices::PriceStore;
pub use recovery::RecoveryStore;
pub use requests::{
    CallbackWrite, Inserted, RequestDecisionWrite, RequestFilter, RequestInsert, RequestStore, RuleKey,
};
pub use retention::RetentionStore;
pub use reviews::{ItemsAdded, QueueCount, QueueRow, ReviewStore};
pub use runs::{
    Blob, BlobCopy, HistoryInsert, HistoryWrite, Outbox, RunHead, RunOverrides, RunPatch, RunStore, StoreOutbox,
};
pub use scores::{ScoreInsert, ScoreStore};
pub use secrets::SecretStore;
pub use sessions::SessionStore;
pub use sign_ins::SignInStore;
pub use spans::{DerivedRun, IngestedRun, RunChange, SpanStore, StoredSpan, StoredSpanEvent, TraceFold, TraceIngest};
pub use sqlite::{ServerLock, SqliteStore};
pub use steps::{AgentSwitch, RecordedRequests, RunPosition, StepStore, StepWrite};
pub use trees::{TreeCount, TreeStore};
pub use webhooks::{AttemptWrite, Claimed, NewDelivery, Secrets, Settle, StatusChange, WebhookStore};

/// Opens the store `url` names, creating and migrating its schema:
/// `sqlite://path` (or `sqlite::memory:`), the embedded single-server store,
/// or `postgres://user@host:port/db` (`postgresql://` too), the store several
/// servers share (with `?options[search_path]=name` for a schema of its own).
pub async fn open(url: &str) -> Result<Arc<dyn Store>> {
    if url.starts_with("sqlite:") {
        return Ok(Arc::new(SqliteStore::open(url).await?));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        return Ok(Arc::new(PgStore::open(url).await?));
        #[cfg(not(feature = "postgres"))]
        return Err(crate::error::EngineError::Invalid(
            "this build has no PostgreSQL store (the engine's `postgres` feature)".into(),
        ));
    }
    Err(crate::error::EngineError::Invalid(
        "DATABASE_URL must start with sqlite: or postgres:// (postgresql://)".into(),
    ))
}

/// The whole store: every part of it in one database. The engine holds an
/// `Arc<dyn Store>`; the parts' methods are called on it directly.
pub trait Store:
    RunStore
    + StepStore
    + ApprovalStore
    + GrantStore
    + EventStore
    + PriceStore
    + RecoveryStore
    + RetentionStore
    + SecretStore
    + Send
    + Sync
    + 'static
{
    /// The identity records kept in the same database (see [`Directory`]).
    fn directory(&self) -> &dyn Directory;
    /// The saved agents kept in the same database (see [`AgentStore`]).
    fn agents(&self) -> &dyn AgentStore;
    /// Status webhooks and their outbox, kept in the same database (see [`WebhookStore`]).
    fn webhooks(&self) -> &dyn WebhookStore;
    /// Each project's own HTTP tools, kept in the same database (see [`HttpToolStore`]).
    fn http_tools(&self) -> &dyn HttpToolStore;
    /// OpenTelemetry spans other agents sent and the runs assembled from
    /// them, kept in the same database (see [`SpanStore`]).
    fn spans(&self) -> &dyn SpanStore;
    /// Approval requests and questions from agents runlens does not run,
    /// kept in the same database (see [`RequestStore`]).
    fn requests(&self) -> &dyn RequestStore;
    /// The counters and bounds of trees of runs, kept in the same database
    /// (see [`TreeStore`]).
    fn trees(&self) -> &dyn TreeStore;
    /// Scores attached to runs, kept in the same database (see [`ScoreStore`]).
    fn scores(&self) -> &dyn ScoreStore;
    /// Datasets and their versioned items, kept in the same database (see [`DatasetStore`]).
    fn datasets(&self) -> &dyn DatasetStore;
    /// Experiments, read with their runs (see [`ExperimentStore`]).
    fn experiments(&self) -> &dyn ExperimentStore;
    /// Online evaluators and the runs they read (see [`EvaluatorStore`]).
    fn evaluators(&self) -> &dyn EvaluatorStore;
    /// Review queues and their items (see [`ReviewStore`]).
    fn reviews(&self) -> &dyn ReviewStore;
    /// Leases, the server registry and notifications, when several servers
    /// share this store (see [`cluster`]); `None` for a store of one server.
    fn cluster(&self) -> Option<&dyn ClusterStore> {
        None
    }
}

/// JSON text of a payload column (TEXT in SQLite, bound as `$n::jsonb` in PostgreSQL).
pub(crate) fn json_text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// Unix milliseconds, the timestamp format of every table.
pub(crate) fn to_ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub(crate) fn from_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

/// Now, truncated to the millisecond precision the store keeps, so values
/// returned before and after a round trip compare equal.
pub(crate) fn now() -> DateTime<Utc> {
    from_ms(Utc::now().timestamp_millis())
}

/// Keyset cursor for newest-first run lists: `<created_at ms>_<id>`.
pub(crate) fn encode_cursor(run: &Run) -> String {
    format!("{}_{}", to_ms(run.created_at), run.id)
}

pub(crate) fn decode_cursor(cursor: &str) -> Option<(i64, String)> {
    let (ms, id) = cursor.split_once('_')?;
    Some((ms.parse().ok()?, id.to_owned()))
}
