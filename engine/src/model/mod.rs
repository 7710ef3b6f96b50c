//! The data model of runlens: runs, steps, tool calls, messages and usage.
//!
//! These types are plain serde values with no runtime dependencies, so the
//! browser bundle uses the very same definitions the engine persists and the
//! REST API returns. Field names are the API contract: add fields freely, do
//! not rename them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod agent;
mod approval;
mod batch;
mod compare;
mod conversation;
mod dataset;
mod evaluator;
mod event;
mod experiment;
mod experiment_set;
mod fork;
mod http_tool;
mod identity;
mod kept_out;
pub mod limits;
mod list;
mod message;
mod model_call;
#[cfg(feature = "openapi")]
pub mod openapi;
mod outcome;
mod outline;
mod request;
mod retention;
mod review;
mod score;
mod scorer;
mod server;
mod session;
mod source;
mod step;
mod tools;
mod webhook;

pub use crate::status::{IllegalTransition, RunStatus};
pub use agent::{
    agent_name_problem, Agent, AgentDetail, AgentInput, AgentLink, AgentPage, AgentSpec, AgentVersion,
    AgentVersionStats, Metadata, RunOutput, TreeBudget, TreeLimits, TreeUsage, VersionScore, HANDOFF_PREFIX,
};
pub use approval::{
    AllTools, ApprovalDecision, ApprovalPolicy, ApprovalRequest, ApprovalTools, DecidedCall, Decision, DecisionRequest,
    Grant, GrantScope, Interruption, RunRef,
};
pub use compare::{
    BatchCreated, BatchRuns, CallPair, CallSide, Change, ChangeCounts, CompareGroup, CompareQuery, CompareSide,
    CompareTotals, Comparison, Divergence, FieldDiff, ForkRelation, GroupMember, JsonChange, JsonOp, MessagePair,
    MessageRows, MessageSide, StepPair, StepRows, StepSide, Totals, TotalsDelta, WordChange, COMPARE_TEXT_CHARS,
    DEFAULT_COMPARE_ROWS, MAX_BATCH_MODELS, MAX_COMPARE_ROWS,
};
pub use conversation::{FamilyMember, FollowUp, RunFamily};
pub use dataset::{
    dataset_name_problem, Dataset, DatasetChange, DatasetInput, DatasetItem, DatasetItemEdit, DatasetItemPage,
    DatasetItemsAdded, DatasetPage, DatasetUpload, NewDataset, NewDatasetItem, NewDatasetItems, RecordedResult,
    RunToDataset, UploadFormat, MAX_DATASETS, MAX_DATASET_DESCRIPTION_CHARS, MAX_DATASET_ITEMS, MAX_DATASET_NAME_CHARS,
    MAX_EXPECTED_BYTES, MAX_ITEMS_PER_REQUEST, MAX_ITEM_METADATA_BYTES, MAX_ITEM_TAGS, MAX_ITEM_TAG_CHARS,
    MAX_LISTED_BAD_ROWS, MAX_RECORDED_RESULTS, MAX_RECORDED_RESULTS_BYTES, MAX_UPLOAD_BYTES,
};
pub use evaluator::{
    in_sample, Evaluator, EvaluatorList, EvaluatorTarget, NewEvaluator, MAX_EVALUATOR_NAME_CHARS,
    MAX_PROJECT_EVALUATORS,
};
pub use event::{Event, EventKind, RUN_EVENT_TYPES};
pub use experiment::{
    ComparedItem, Experiment, ExperimentComparison, ExperimentLink, ExperimentPage, ExperimentProgress,
    ExperimentReport, ExperimentRow, ExperimentRows, ExperimentStatus, ItemChange, NewExperiment, RunTools,
    ScoreBucket, ScorerAggregate, ToolMock, ToolMode, DEFAULT_EXPERIMENT_CONCURRENCY, MAX_EXPERIMENT_CONCURRENCY,
    MAX_EXPERIMENT_NAME_CHARS, MAX_MOCK_RESULT_BYTES, MAX_TOOL_MOCKS,
};
pub use experiment_set::{ExperimentSet, ExperimentSetReport, NewExperimentSet, MAX_SET_MODELS};
pub use fork::{replaced_error, ForkFromStep, ModelOutput, OutputCall, Replay, ReplayMode, ReplayRequest};
#[cfg(feature = "openapi")]
pub use http_tool::schemas as http_tool_schemas;
pub use http_tool::{
    http_tool_name_problem, HttpTool, HttpToolPage, HttpToolSecret, HttpToolSpec, NewHttpTool, RESERVED_HEADERS,
};
pub use identity::{Actor, ApiKey, AuditEntry, Member, Project, Role, User, DEFAULT_PROJECT};
pub use kept_out::KeptOut;
pub use list::{MatchedIn, RunFilter, RunPage, ScoreCheck, ScoreTest, SearchMatch, SnippetPart, MAX_SEARCH_WORDS};
pub use message::{Invocation, Message, MessageBody, ResultType};
pub use model_call::ModelCall;
pub use outcome::{OutcomeFilter, OutcomeTone, RunOutcome, MAX_TURNS_STOP};
pub use outline::{CallOutline, StepOutline};
pub use request::{
    AgentRequest, ExternalRun, NewApprovalRequest, NewQuestion, RequestDecision, RequestKind, RequestOutcome,
    RequestPage, RequestStatus, RequestVerdict, MAX_CHOICES, MAX_CHOICE_CHARS, MAX_REQUEST_CONTEXT_BYTES, MAX_WAIT_S,
    TIMED_OUT,
};
pub use retention::{PruneReport, Retention, MAX_RETENTION_DAYS, MAX_RETENTION_RUNS};
pub use review::{
    AddedReviewItems, FieldKind, NewReviewItems, NewReviewQueue, ReviewField, ReviewItem, ReviewItemPage, ReviewQueue,
    ReviewQueueList, ReviewStatus, ReviewSubmit, ReviewerProgress, MAX_ASSIGNEES, MAX_CORRECTION_CHARS,
    MAX_PROJECT_QUEUES, MAX_QUEUE_ITEMS, MAX_REVIEW_FIELDS, MAX_RUNS_PER_ADD,
};
pub use score::{
    score_name_problem, NewScore, Score, ScoreSource, ScoreSummary, ScoreValue, MAX_RUN_SCORES,
    MAX_SCORE_COMMENT_CHARS, MAX_SCORE_LABEL_CHARS, MAX_SCORE_NAME_CHARS,
};
pub use scorer::judge;
pub use scorer::{
    expected_calls_problem, CallOrder, EvaluateRun, ExpectedCall, NamedScorer, ScoreSubject, Scorer, SubjectCall,
    Verdict, MAX_EXPECTED_CALLS, MAX_IGNORE_PATHS, MAX_JUDGE_LABELS, MAX_PATTERN_CHARS, MAX_POINTER_CHARS,
    MAX_RUBRIC_CHARS, MAX_SCORERS_PER_REQUEST, MAX_SCORER_JSON_BYTES, MAX_SCORER_TEXT_BYTES,
};
pub use server::Server;
pub use session::{Session, SessionTotals, MAX_SESSION_RUNS};
pub use source::{RunSource, SpanEventNode, SpanNode, SOURCE_OTLP};
pub use step::{ModelAnswer, Step, StepRequest, StepResponse, StepStatus, ToolCall, ToolCallStatus};
pub use tools::{
    mcp_source, McpServerStatus, McpState, OfferedTool, ToolSelection, BUILTIN_TOOLS, SOURCE_BUILTIN, SOURCE_HTTP,
    SOURCE_MCP_PREFIX,
};
pub use webhook::{
    statuses_problem, wants, CreatedWebhook, Delivery, DeliveryAttempt, DeliveryPage, DeliveryState, NewWebhook,
    OnStatusChange, PendingCall, ShownSecret, StatusChangePayload, Webhook, WebhookPage, IDEMPOTENCY_HEADER,
    STATUS_CHANGED,
};

/// Token usage of one model turn, or summed over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cache_read_tokens: u64,
    /// Output tokens the model spent reasoning (a subset of `output_tokens`).
    pub reasoning_tokens: u64,
    pub total_tokens: u64,
    /// Number of model requests made.
    pub requests: u64,
}

impl Usage {
    /// Adds `other` into `self` (used to roll step usage up onto the run).
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.total_tokens += other.total_tokens;
        self.requests += other.requests;
    }
}

/// One agent execution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Run {
    pub id: String,
    pub name: String,
    pub status: RunStatus,
    pub model: String,
    pub model_settings: Value,
    pub system_prompt: Option<String>,
    pub initial_prompt: String,
    pub input: Option<Value>,
    /// Names of the tools attached to this run.
    pub tools: Vec<String>,
    pub tags: BTreeMap<String, String>,
    /// Passed to tools, never to the model.
    pub context: Value,
    pub max_turns: u32,
    pub agent_id: Option<String>,
    /// The project the run belongs to (and its steps, approvals, events).
    #[serde(default = "default_project")]
    pub project: String,
    /// Who started it (for a fork: who edited; for an import: who imported).
    #[serde(default)]
    pub created_by: Option<Actor>,
    /// Which tools need a person's approval in this run.
    #[serde(default)]
    pub approval: ApprovalPolicy,
    /// Tools approved or rejected "always" by a decision in this run.
    #[serde(default)]
    pub always_approve: Vec<String>,
    #[serde(default)]
    pub always_reject: Vec<String>,
    /// Calls waiting for a decision (non-empty only while paused).
    #[serde(default)]
    pub interruptions: Vec<Interruption>,
    /// Whether follow-up messages are accepted once the run is done.
    #[serde(default = "yes")]
    pub interactive: bool,
    /// JSON Schema the final result must match.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::result_schema))]
    pub result_schema: Option<Value>,
    /// Summarize tool results over 10,000 characters with one extra model call.
    #[serde(default)]
    pub call_summarization: bool,
    /// The run this one was forked from (with `forked_from_message_id`, the
    /// message edited to fork it), or for a child run the run whose agent
    /// call started it (with `parent_call_id`).
    #[serde(default)]
    pub parent_run_id: Option<String>,
    #[serde(default)]
    pub forked_from_message_id: Option<String>,
    /// For a child run: the parent's tool call that started it and waits for it.
    #[serde(default)]
    pub parent_call_id: Option<String>,
    /// The run at the top of this run's tree of agent calls (itself for a root run).
    #[serde(default)]
    pub root_run_id: String,
    /// How far below its root the run is (0 for a root run).
    #[serde(default)]
    pub depth: u32,
    /// Child runs this run's agent calls started.
    #[serde(default)]
    pub child_count: u32,
    /// The saved agent's version the run started from (with `agent_id`).
    #[serde(default)]
    pub agent_version: Option<u32>,
    /// Fields of the create request that overrode the agent's.
    #[serde(default)]
    pub agent_overrides: Vec<String>,
    /// The agent in charge now: `agent_id` until a handoff changes it.
    #[serde(default)]
    pub current_agent: Option<String>,
    #[serde(default)]
    pub current_agent_version: Option<u32>,
    /// Agents the model may call as tools now (each call starts a child run).
    #[serde(default)]
    pub sub_agents: Vec<AgentLink>,
    /// Agents the model may hand the run over to now.
    #[serde(default)]
    pub handoffs: Vec<AgentLink>,
    /// Agent messages in the transcript that are not turns of the agent in
    /// charge: those `input_items` seeded, and every turn before the latest
    /// handoff (a built-in script starts at its first turn after them).
    #[serde(default)]
    pub handoff_turns: u32,
    /// The model is asked for a short reason with each tool call.
    #[serde(default)]
    pub reasoning_traces: bool,
    /// Where each status change of the run is POSTed (see [`OnStatusChange`]).
    #[serde(default)]
    pub on_status_change: Option<OnStatusChange>,
    /// Free metadata: any JSON object.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub metadata: Metadata,
    /// Where a run runlens did not run came from (`null` for runs runlens
    /// ran): such a run was recorded from OpenTelemetry spans and is
    /// read-only (it cannot be resumed, approved, forked or followed up).
    #[serde(default)]
    pub source: Option<RunSource>,
    /// The comparison group the run was started in: one run configuration
    /// started on several models at once (`POST /api/runs/batch`,
    /// `GET /api/compare/groups/{id}`). Absent for a run started alone; a
    /// fork or an imported run is in no group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// For a fork made from a step (`POST /api/runs/{id}/fork`): the index
    /// of the parent's step it continues after (the parent is `parent_run_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from_step: Option<u32>,
    /// For a replay (`POST /api/runs/{id}/replay`): the run it replays, how, and where it diverged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<Replay>,
    /// What the run ended with, as one of three shapes (absent until it ends).
    #[serde(default)]
    pub output: Option<RunOutput>,
    /// The status and what to know beyond it (`done · 1 call rejected`),
    /// with the counts of rejected and failed calls.
    #[serde(default)]
    pub outcome: RunOutcome,
    pub result: Option<Value>,
    pub summary: Option<String>,
    pub failure_reason: Option<String>,
    pub usage: Usage,
    pub step_count: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Time the run sat finished before a follow-up message restarted it,
    /// summed over its follow-ups: wall time, not work, so not part of its
    /// duration (see [`Run::duration_ms`]).
    #[serde(default)]
    pub idle_ms: u64,
    /// The session (a conversation or thread) the run belongs to:
    /// `session_id` at create, or what an ingested trace's spans name
    /// (`session.id`, `gen_ai.conversation.id`…). A fork stays in its run's
    /// session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The end user the run served: `user_id` at create, or an ingested
    /// trace's `user.id` / `enduser.id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_user: Option<String>,
    /// What answers the run's tool calls instead of the tools (an
    /// experiment's `recorded` or `mock` tools); absent: the tools run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_answers: Option<RunTools>,
    /// The experiment the run was started for, and the item it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experiment: Option<ExperimentLink>,
}

impl Run {
    /// What the run ended with (see [`RunOutput`]), or `None` while it is active.
    pub fn output_union(&self) -> Option<RunOutput> {
        match self.status {
            RunStatus::Done => Some(match (&self.result, &self.result_schema) {
                (Some(v), Some(_)) if !v.is_null() => RunOutput::Structured { value: v.clone() },
                (result, _) => RunOutput::LastMessage {
                    message: self.summary.clone(),
                    value: result.clone().filter(|v| !v.is_null()),
                },
            }),
            RunStatus::Failed | RunStatus::Cancelled => Some(RunOutput::Error {
                message: self.failure_reason.clone().unwrap_or_else(|| format!("the run was {}", self.status)),
            }),
            _ => None,
        }
    }

    /// Why this run cannot be `what` (resumed, forked…) when runlens did not
    /// run it; `None` for a run runlens ran.
    pub fn read_only(&self, what: &str) -> Option<String> {
        self.source.as_ref().map(|s| s.refusal(&self.id, what))
    }

    /// Whether an agent call of another run started this one.
    pub fn is_child(&self) -> bool {
        self.parent_call_id.is_some()
    }

    /// Active time: from start to finish (or to now while the run is
    /// active) without the idle gaps before its follow-ups. This is the
    /// run's duration everywhere (lists, compare, groups).
    pub fn duration_ms(&self, now: DateTime<Utc>) -> Option<i64> {
        let idle = i64::try_from(self.idle_ms).unwrap_or(i64::MAX);
        self.wall_ms(now).map(|wall| wall.saturating_sub(idle).max(0))
    }

    /// Wall time from start to finish (or to now while the run is active),
    /// idle gaps included.
    pub fn wall_ms(&self, now: DateTime<Utc>) -> Option<i64> {
        let start = self.started_at?;
        let end = self.finished_at.unwrap_or(now);
        Some((end - start).num_milliseconds().max(0))
    }
}

/// Options for creating a run (the body of `POST /api/runs`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateRun {
    /// Client-supplied id; creating an existing id returns the existing run.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::run_id))]
    pub id: Option<String>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::run_name))]
    pub name: Option<String>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::initial_prompt, required = true))]
    pub initial_prompt: String,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::system_prompt))]
    pub system_prompt: Option<String>,
    /// Structured input, merged into the prompt.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::input))]
    pub input: Option<Value>,
    /// Attached tool names; `None` attaches every registered tool.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::tool_list))]
    pub tools: Option<Vec<String>>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::tags))]
    pub tags: BTreeMap<String, String>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::context))]
    pub context: Option<Value>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::max_turns))]
    pub max_turns: Option<u32>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::model_name))]
    pub model: Option<String>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::model_settings))]
    pub model_settings: Option<Value>,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::agent_id))]
    pub agent_id: Option<String>,
    /// `"all"` or `{"tools": [...], "timeout_s": N}`.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::approval_request))]
    pub approval: Option<ApprovalRequest>,
    /// Accept follow-up messages once done (default true).
    pub interactive: Option<bool>,
    /// JSON Schema for the final result.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::result_schema))]
    pub result_schema: Option<Value>,
    pub call_summarization: Option<bool>,
    /// With `agent_id`: the version to run (the current one when absent).
    pub agent_version: Option<u32>,
    /// Messages that seed the transcript before `initial_prompt`: human,
    /// agent (with invocations) and invocation-result items.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::input_items))]
    #[serde(deserialize_with = "message::kept_items")]
    pub input_items: Option<Vec<MessageBody>>,
    /// Free metadata: a JSON object.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::metadata))]
    pub metadata: Option<Value>,
    /// The session the run belongs to (1-128 characters): the runs of one
    /// conversation or thread, listed together (`GET /api/sessions/{id}`).
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::session_id))]
    pub session_id: Option<String>,
    /// The end user the run serves (1-128 characters): shown on the run and
    /// filterable in the runs list.
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::session_id))]
    pub user_id: Option<String>,
    /// Ask the model for a short reason with each tool call.
    pub reasoning_traces: Option<bool>,
    /// POST each status change of the run to `url` (those in `statuses`, or all), signed with the project's run
    /// webhook secret (`POST /api/webhooks/secret` creates it).
    pub on_status_change: Option<OnStatusChange>,
}

fn yes() -> bool {
    true
}

fn default_project() -> String {
    DEFAULT_PROJECT.to_owned()
}

/// A registered tool as described to clients and models.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub schema: Value,
    pub requires_approval: bool,
    /// `builtin`, `mcp:NAME` or `http` (see [`SOURCE_BUILTIN`]).
    #[serde(default = "builtin_source")]
    pub source: String,
    /// Whether a call may run again after a crash interrupted it; a call
    /// of a tool that is not is reported to the model as interrupted.
    #[serde(default = "yes")]
    pub idempotent: bool,
}

fn builtin_source() -> String {
    SOURCE_BUILTIN.to_owned()
}

/// An email written by the `send_email` tool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Email {
    pub id: String,
    pub run_id: String,
    pub to: String,
    pub subject: String,
    pub body: String,
    pub created_at: DateTime<Utc>,
}

/// Everything the trace page shows about one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunTrace {
    pub run: Run,
    pub steps: Vec<Step>,
    pub messages: Vec<Message>,
    /// For a run recorded from OpenTelemetry spans: the spans that are not
    /// its agent, model or tool spans (empty for runs runlens ran).
    #[serde(default)]
    pub spans: Vec<SpanNode>,
}
