//! Persistence behind one trait, so the runner never knows which database it
//! writes to. Each backend is a folder beside the traits: `sqlite/` (the
//! embedded default) holds one file per part of the store (runs and their
//! reads, writes, approvals, events, conversation, agents, directory, HTTP
//! tools, webhooks), and another backend sits beside it the same way.
//!
//! Status changes go through [`Store::transition`], a compare-and-set on the
//! expected current status after [`RunStatus::check`] approved the move, so a
//! lost race is an error rather than a silent overwrite.

mod agents;
mod directory;
mod http_tools;
mod sqlite;
mod webhooks;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::cost::ModelPrice;
use crate::error::Result;
use crate::events::Event;
use crate::model::{
    ApprovalDecision, Email, FamilyMember, Interruption, Message, Run, RunFilter, RunPage, RunStatus, Step,
    StepOutline, ToolCall, Usage,
};

pub use agents::{AgentInsert, AgentRunSums, AgentStore};
pub use directory::{Directory, UserInsert};
pub use http_tools::{HttpToolStore, HttpToolWrite, StoredHttpTool};
pub use sqlite::{ServerLock, SqliteStore};
pub use webhooks::{AttemptWrite, Claimed, NewDelivery, Secrets, Settle, StatusChange, WebhookStore};

/// What reads of a run's parts check first: that it exists, its status,
/// its model (to price steps) and how many steps it has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunHead {
    pub status: RunStatus,
    pub model: String,
    pub step_count: u32,
    /// Who may see the run is decided by its project.
    pub project: String,
}

/// Fields written together with a status change.
#[derive(Clone, Debug, Default)]
pub struct RunPatch {
    /// `Some(Value::Null)` stores a null result.
    pub result: Option<Value>,
    pub summary: Option<String>,
    pub failure_reason: Option<String>,
}

/// What [`Store::save_step`] writes in one transaction.
pub struct StepWrite<'a> {
    pub step: &'a Step,
    /// Transcript messages produced by this part of the step.
    pub messages: &'a [Message],
    /// The run's usage total after this step.
    pub run_usage: &'a Usage,
    pub step_count: u32,
    /// A handoff: the run's agent changes with this step.
    pub switch: Option<&'a AgentSwitch>,
}

/// What a handoff changes on a run: the agent in charge and everything the
/// run takes from it (the transcript, turn budget and result schema stay).
#[derive(Clone, Debug, PartialEq)]
pub struct AgentSwitch {
    pub agent_id: String,
    pub version: u32,
    pub system_prompt: Option<String>,
    pub model: String,
    pub model_settings: Value,
    pub tools: Vec<String>,
    pub approval: crate::model::ApprovalPolicy,
    pub sub_agents: Vec<crate::model::AgentLink>,
    pub handoffs: Vec<crate::model::AgentLink>,
    pub reasoning_traces: bool,
    /// Model turns the run had taken when it switched.
    pub turns_before: u32,
}

impl AgentSwitch {
    /// Applies the switch to a run read before it was stored.
    pub fn apply(&self, run: &mut Run) {
        run.current_agent = Some(self.agent_id.clone());
        run.current_agent_version = Some(self.version);
        run.system_prompt.clone_from(&self.system_prompt);
        run.model.clone_from(&self.model);
        run.model_settings.clone_from(&self.model_settings);
        run.tools.clone_from(&self.tools);
        run.approval = self.approval.clone();
        run.sub_agents.clone_from(&self.sub_agents);
        run.handoffs.clone_from(&self.handoffs);
        run.reasoning_traces = self.reasoning_traces;
        run.handoff_turns = self.turns_before;
    }
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
/// forks, see [`Store::insert_run_with_blobs`]).
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

/// What [`Store::insert_run_with_blobs`] did; only `Inserted` wrote anything.
#[derive(Debug, PartialEq, Eq)]
pub enum HistoryInsert {
    Inserted,
    RunExists,
    /// A blob id is taken (or repeated in the write).
    BlobTaken(String),
}

/// One decision on a call awaiting approval.
pub struct DecisionWrite<'a> {
    pub call: &'a ToolCall,
    pub decision: &'a ApprovalDecision,
    /// The arguments the call runs with (edited ones, when edited).
    pub final_arguments: &'a serde_json::Value,
    /// For a rejection: the error the model receives.
    pub error: Option<String>,
}

/// What [`Store::decide`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum DecideOutcome {
    /// The decision was stored; `resumed` when it was the step's last pending
    /// one and the run moved from `paused` to `running` in the same transaction.
    Applied { resumed: bool },
    /// Another decision (or a cancel) got there first.
    NotAwaiting,
}

/// A decision on one tool call, with the call it was about (the audit view
/// of [`Store::decisions`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DecidedCall {
    pub run_id: String,
    pub run_name: String,
    pub call_id: String,
    pub step_index: u32,
    pub tool_name: String,
    #[serde(flatten)]
    pub decision: ApprovalDecision,
}

impl DecidedCall {
    /// The cursor of the next page after this one (newest first):
    /// `<decided_at ms>_<run id>/<call id>` (a run id has no `/`).
    pub fn cursor(&self) -> String {
        format!("{}_{}/{}", to_ms(self.decision.decided_at), self.run_id, self.call_id)
    }
}

/// Where a newest-first page of decisions continues: after the decision
/// `(decided_at ms, run id, call id)` (see [`DecidedCall::cursor`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecisionCursor {
    pub decided_at_ms: i64,
    pub run_id: String,
    pub call_id: String,
}

impl DecisionCursor {
    /// `None` when `text` is not a cursor [`DecidedCall::cursor`] made.
    pub fn parse(text: &str) -> Option<DecisionCursor> {
        let (ms, rest) = text.split_once('_')?;
        let (run_id, call_id) = rest.split_once('/')?;
        if run_id.is_empty() || call_id.is_empty() {
            return None;
        }
        Some(DecisionCursor { decided_at_ms: ms.parse().ok()?, run_id: run_id.to_owned(), call_id: call_id.to_owned() })
    }
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The identity records kept in the same database (see [`Directory`]).
    fn directory(&self) -> &dyn Directory;
    /// The saved agents kept in the same database (see [`AgentStore`]).
    fn agents(&self) -> &dyn AgentStore;
    /// Status webhooks and their outbox, kept in the same database (see [`WebhookStore`]).
    fn webhooks(&self) -> &dyn WebhookStore;
    /// Each project's own HTTP tools, kept in the same database (see [`HttpToolStore`]).
    fn http_tools(&self) -> &dyn HttpToolStore;
    /// The child runs of run `id` (started by its agent calls), oldest first.
    async fn children(&self, id: &str) -> Result<Vec<Run>>;
    /// Run `id` and every run below it, summed per model: `(model, runs, usage)`.
    async fn tree_sums(&self, id: &str) -> Result<Vec<(String, u64, Usage)>>;
    /// Creates the run with its first message; `false` when the id exists.
    async fn insert_run(&self, run: &Run, first: &Message) -> Result<bool>;
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
        }))
    }
    async fn list_runs(&self, filter: &RunFilter) -> Result<RunPage>;
    /// Moves a run from `from` to `to` atomically; fails when the run is not
    /// (or no longer) in `from`, or the move is illegal.
    async fn transition(&self, id: &str, from: RunStatus, to: RunStatus, patch: RunPatch) -> Result<Run>;
    /// Upserts a step and its tool calls, appends messages, updates the run's
    /// usage, all in one transaction.
    async fn save_step(&self, write: StepWrite<'_>) -> Result<()>;
    /// Saves a run's last step (a final answer) and moves the run from `from`
    /// to `to` with `patch` in one transaction, so a crash can never leave the
    /// answer saved on a run that is still `running` (recovery would ask the
    /// model again). The default is not atomic; durable stores override it.
    async fn finish_step(&self, write: StepWrite<'_>, from: RunStatus, to: RunStatus, patch: RunPatch) -> Result<Run> {
        let id = write.step.run_id.clone();
        self.save_step(write).await?;
        self.transition(&id, from, to, patch).await
    }
    /// The `seq` of a run's last transcript message (decodable or not), so
    /// new messages are numbered after it.
    async fn last_message_seq(&self, run_id: &str) -> Result<Option<u64>> {
        Ok(self.messages(run_id).await?.last().map(|m| m.seq))
    }
    /// The index of a run's last step, if it has any.
    async fn last_step_index(&self, run_id: &str) -> Result<Option<u32>> {
        Ok(self.step_outline(run_id).await?.last().map(|s| s.index))
    }
    /// How many of a run's messages are of `kind` (`agent`, `human`,
    /// `invocation-result`), without reading them.
    async fn count_messages(&self, run_id: &str, kind: &str) -> Result<u64> {
        Ok(self.messages(run_id).await?.iter().filter(|m| m.body.kind() == kind).count() as u64)
    }
    /// Records one tool call's progress (`pos` is its place in the step), so a
    /// finished call is durable even if the process dies before the step ends.
    async fn save_tool_call(&self, call: &ToolCall, pos: usize) -> Result<()>;
    /// Steps of a run in order, each with its tool calls.
    async fn steps(&self, run_id: &str) -> Result<Vec<Step>>;
    /// A run's whole transcript, in order.
    async fn messages(&self, run_id: &str) -> Result<Vec<Message>>;
    /// Up to `limit` messages with `seq >= from`, in order.
    async fn messages_page(&self, run_id: &str, from: u64, limit: u32) -> Result<Vec<Message>> {
        let all = self.messages(run_id).await?;
        Ok(all.into_iter().filter(|m| m.seq >= from).take(limit as usize).collect())
    }
    /// The last `n` messages in order, and how many the run has in all.
    async fn messages_tail(&self, run_id: &str, n: u32) -> Result<(Vec<Message>, u64)> {
        let mut all = self.messages(run_id).await?;
        let total = all.len();
        all.drain(..total.saturating_sub(n as usize));
        Ok((all, total as u64))
    }
    /// Creates a run together with its history; `false` when the id exists
    /// (forks and imports use [`Store::insert_run_with_blobs`]).
    async fn insert_run_with_history(&self, run: &Run, messages: &[Message], steps: &[Step]) -> Result<bool>;
    /// Creates a run with its history, its new blobs and copies of stored
    /// blobs, all in one transaction: nothing is written unless all of it is.
    async fn insert_run_with_blobs(&self, write: HistoryWrite<'_>) -> Result<HistoryInsert>;
    /// Reopens a done, interactive run with a human message; `None` if it is not.
    async fn follow_up(&self, run_id: &str, text: &str, overrides: &RunOverrides) -> Result<Option<(Run, Message)>>;
    /// The run's root ancestor and all forks below it, oldest first.
    async fn family(&self, run_id: &str) -> Result<Vec<FamilyMember>>;
    /// Stores a blob; replaces one only of the same run (an id taken by
    /// another run is an error).
    async fn insert_blob(&self, blob: &Blob) -> Result<()>;
    async fn get_blob(&self, id: &str) -> Result<Option<Blob>>;
    async fn run_blobs(&self, run_id: &str) -> Result<Vec<Blob>>;
    /// Stores a decision if the call is still awaiting one (compare-and-set),
    /// with its audit record, and resumes the run when nothing else waits.
    async fn decide(&self, write: DecisionWrite<'_>) -> Result<DecideOutcome>;
    /// Calls awaiting a decision on paused runs (of one run, or all; of one
    /// project, or all), oldest first.
    async fn interruptions(&self, run_id: Option<&str>, project: Option<&str>) -> Result<Vec<Interruption>>;
    /// Decisions on the calls of `project`'s runs, newest first (by
    /// decision time, then run and call id), after `before` when given,
    /// skipping `offset`, at most `limit`.
    async fn decisions(
        &self,
        project: &str,
        before: Option<&DecisionCursor>,
        offset: u32,
        limit: u32,
    ) -> Result<Vec<DecidedCall>>;
    /// Marks a run's calls awaiting approval as cancelled.
    async fn cancel_awaiting(&self, run_id: &str) -> Result<u64>;
    async fn run_ids_with_status(&self, status: RunStatus) -> Result<Vec<String>>;
    /// Finished runs whose `run.finished` event was never stored (the
    /// process died between the status change and the event's commit).
    async fn unannounced_finishes(&self) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
    async fn insert_email(&self, email: &Email) -> Result<()>;
    /// The newest emails sent (of one project's runs, or of all).
    async fn outbox(&self, limit: u32, project: Option<&str>) -> Result<Vec<Email>>;

    // --- Events, huge traces and prices (issue 5) ---
    /// Stores a batch of numbered events in one transaction.
    async fn append_events(&self, events: &[Arc<Event>]) -> Result<()>;
    /// Up to `limit` events of a run with `seq > after`, in order.
    async fn events_after(&self, run_id: &str, after: u64, limit: u32) -> Result<Vec<Event>>;
    /// The `seq` and type of a run's last stored event.
    async fn last_event(&self, run_id: &str) -> Result<Option<(u64, String)>>;
    /// Up to `limit` steps with `index >= from`, in order, each with its tool calls.
    async fn steps_page(&self, run_id: &str, from: u32, limit: u32) -> Result<Vec<Step>>;
    /// Every step of a run without payloads, in order (see [`StepOutline`]).
    /// The default derives it from the full steps; stores override it with
    /// a read that skips the payload columns.
    async fn step_outline(&self, run_id: &str) -> Result<Vec<StepOutline>> {
        Ok(self.steps(run_id).await?.iter().map(StepOutline::from).collect())
    }
    /// One tool call of a run, by the model's call id.
    async fn tool_call(&self, run_id: &str, call_id: &str) -> Result<Option<ToolCall>>;
    /// A project's price table, by model name.
    async fn prices(&self, project: &str) -> Result<Vec<ModelPrice>>;
    /// Creates or replaces one model's price in a project.
    async fn put_price(&self, project: &str, price: &ModelPrice) -> Result<()>;
    /// `false` when the model had no price in the project.
    async fn delete_price(&self, project: &str, model: &str) -> Result<bool>;
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
