//! The runs part of the store: creating runs (with their history, for
//! imports and forks), reading and listing them, moving them between
//! statuses, their family (forks), tree (child runs) and comparison group,
//! their blobs, and the emails they sent.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::error::Result;
use crate::model::{Email, FamilyMember, Message, Run, RunFilter, RunPage, RunSource, RunStatus, Step, Usage};

/// What reads of a run's parts check first: that it exists, its status,
/// its model (to price steps) and how many steps it has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunHead {
    pub status: RunStatus,
    pub model: String,
    pub step_count: u32,
    /// Who may see the run is decided by its project.
    pub project: String,
    /// Where a run runlens did not run came from (see [`Run::source`]).
    pub source: Option<RunSource>,
}

impl RunHead {
    /// Why the run cannot be `what` when runlens did not run it (see [`Run::read_only`]).
    pub fn read_only(&self, id: &str, what: &str) -> Option<String> {
        self.source.as_ref().map(|s| s.refusal(id, what))
    }
}

/// Fields written together with a status change.
#[derive(Clone, Debug, Default)]
pub struct RunPatch {
    /// `Some(Value::Null)` stores a null result.
    pub result: Option<Value>,
    pub summary: Option<String>,
    pub failure_reason: Option<String>,
    /// A replay's divergence, recorded as it ends.
    pub replay: Option<crate::model::Replay>,
}

/// Changes a follow-up may make to how the run continues.
#[derive(Clone, Debug, Default)]
pub struct RunOverrides {
    pub max_turns: Option<u32>,
    pub tools: Option<Vec<String>>,
    pub model: Option<String>,
}

/// A large tool result kept outside the transcript.
#[derive(Clone, Debug, PartialEq)]
pub struct Blob {
    pub id: String,
    pub run_id: String,
    pub call_id: Option<String>,
    pub content_type: String,
    pub data: Vec<u8>,
    pub created_at: DateTime<Utc>,
}

/// A run created with its history and blobs in one transaction (imports and
/// forks, see [`RunStore::insert_run_with_blobs`]).
pub struct HistoryWrite<'a> {
    pub run: &'a Run,
    pub messages: &'a [Message],
    pub steps: &'a [Step],
    /// New blobs of the run.
    pub blobs: &'a [Blob],
    /// Stored blobs copied into the run (a fork keeps its parent's results).
    pub copies: &'a [BlobCopy],
}

/// A stored blob copied under a new id into the run being written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobCopy {
    pub from: String,
    pub to: String,
}

/// What [`RunStore::insert_run_with_blobs`] did; only `Inserted` wrote anything.
#[derive(Debug, PartialEq, Eq)]
pub enum HistoryInsert {
    Inserted,
    RunExists,
    /// A blob id is taken (or repeated in the write).
    BlobTaken(String),
}

#[async_trait]
pub trait RunStore: Send + Sync {
    /// Creates the run with its first message; `false` when the id exists.
    async fn insert_run(&self, run: &Run, first: &Message) -> Result<bool>;
    /// Creates a run together with its history; `false` when the id exists
    /// (forks and imports use [`RunStore::insert_run_with_blobs`]).
    async fn insert_run_with_history(&self, run: &Run, messages: &[Message], steps: &[Step]) -> Result<bool>;
    /// Creates several runs, each with its first messages, in one
    /// transaction: all of them, or (`false`) none when any id exists or is
    /// repeated among them. An error stores nothing either.
    async fn insert_runs(&self, runs: &[(Run, Vec<Message>)]) -> Result<bool>;
    /// Creates a run with its history, its new blobs and copies of stored
    /// blobs, all in one transaction: nothing is written unless all of it is.
    async fn insert_run_with_blobs(&self, write: HistoryWrite<'_>) -> Result<HistoryInsert>;
    async fn get_run(&self, id: &str) -> Result<Option<Run>>;
    /// The run as the runner drives it: `Some(Err(why))` when a stored field
    /// cannot be decoded (the run is then failed with that reason rather than
    /// driven on defaults). Stores whose reads are already strict keep the default.
    async fn run_to_drive(&self, id: &str) -> Result<Option<Result<Run, String>>> {
        Ok(self.get_run(id).await?.map(Ok))
    }
    /// A run's status and step count only: for checks that must not pay for
    /// parsing its settings (a scripted run's can be megabytes).
    async fn run_head(&self, id: &str) -> Result<Option<RunHead>> {
        Ok(self.get_run(id).await?.map(|r| RunHead {
            status: r.status,
            model: r.model,
            step_count: r.step_count,
            project: r.project,
            source: r.source,
        }))
    }
    async fn list_runs(&self, filter: &RunFilter) -> Result<RunPage>;
    async fn run_ids_with_status(&self, status: RunStatus) -> Result<Vec<String>>;
    /// Finished runs whose `run.finished` event was never stored (the
    /// process died between the status change and the event's commit).
    async fn unannounced_finishes(&self) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
    /// Moves a run from `from` to `to` atomically; fails when the run is not
    /// (or no longer) in `from`, or the move is illegal.
    async fn transition(&self, id: &str, from: RunStatus, to: RunStatus, patch: RunPatch) -> Result<Run>;
    /// Reopens a done, interactive run with a human message; `None` if it is not.
    async fn follow_up(&self, run_id: &str, text: &str, overrides: &RunOverrides) -> Result<Option<(Run, Message)>>;
    /// The run's root ancestor and all forks below it, oldest first.
    async fn family(&self, run_id: &str) -> Result<Vec<FamilyMember>>;
    /// The child runs of run `id` (started by its agent calls), oldest first.
    async fn children(&self, id: &str) -> Result<Vec<Run>>;
    /// Run `id` and every run below it, summed per model: `(model, runs, usage)`.
    async fn tree_sums(&self, id: &str) -> Result<Vec<(String, u64, Usage)>>;
    /// The runs of comparison group `group_id` in the order they were
    /// created (`created_at`, then `id`), at most `limit` of them.
    async fn group_runs(&self, group_id: &str, limit: u32) -> Result<Vec<Run>>;
    /// Stores a blob; replaces one only of the same run (an id taken by
    /// another run is an error).
    async fn insert_blob(&self, blob: &Blob) -> Result<()>;
    async fn get_blob(&self, id: &str) -> Result<Option<Blob>>;
    async fn run_blobs(&self, run_id: &str) -> Result<Vec<Blob>>;
    async fn insert_email(&self, email: &Email) -> Result<()>;
    /// One email of the outbox, by its id (`{run_id}-{call_id}`).
    async fn email(&self, id: &str) -> Result<Option<Email>>;
    /// The newest emails sent (of one project's runs, or of all).
    async fn outbox(&self, limit: u32, project: Option<&str>) -> Result<Vec<Email>>;
}

/// What a tool that records its own effect may touch (see `tools::ToolContext`):
/// the outbox, not the rest of the store.
#[async_trait]
pub trait Outbox: Send + Sync {
    /// Writes one email (its id `{run_id}-{call_id}`).
    async fn insert_email(&self, email: &Email) -> Result<()>;
    /// One email of the outbox, by its id.
    async fn email(&self, id: &str) -> Result<Option<Email>>;
}

/// The outbox of a whole store.
pub struct StoreOutbox(pub std::sync::Arc<dyn super::Store>);

#[async_trait]
impl Outbox for StoreOutbox {
    async fn insert_email(&self, email: &Email) -> Result<()> {
        self.0.insert_email(email).await
    }

    async fn email(&self, id: &str) -> Result<Option<Email>> {
        self.0.email(id).await
    }
}
