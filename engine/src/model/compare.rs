//! Comparing runs: two runs aligned step by step and message by message
//! (`GET /api/compare`), and comparison groups, one run configuration
//! started on several models at once (`POST /api/runs/batch`,
//! `GET /api/compare/groups/{id}`).
//!
//! A [`Comparison`] is computed on the server over both runs whole; its two
//! lists of aligned pairs come a page at a time, so two 10,000-step runs
//! answer with the figures, the configuration diff, the first point of
//! divergence and one window of rows.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{CreateRun, Run, RunStatus, StepStatus, ToolCallStatus, Usage};

/// Most models one batch starts (`POST /api/runs/batch`).
pub const MAX_BATCH_MODELS: usize = 8;
/// Aligned rows per page, at most (each list: steps, messages).
pub const MAX_COMPARE_ROWS: u32 = 500;
/// Aligned rows per page when the request does not say.
pub const DEFAULT_COMPARE_ROWS: u32 = 50;
/// Characters of one text, argument or result value shown in a row; longer
/// values are cut (a cut text ends with `…`; a cut object or array is its
/// JSON text, cut, as a string) and read whole from the trace. Equality is
/// decided on the whole values.
pub const COMPARE_TEXT_CHARS: usize = 4_000;

/// How one side of an aligned pair relates to the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Change {
    /// Present in both and the same in every compared part.
    Equal,
    /// Present in both (aligned) with differences.
    Changed,
    /// Only in run `b`.
    Inserted,
    /// Only in run `a`.
    Deleted,
}

/// Two runs compared: `GET /api/compare?a=…&b=…`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Comparison {
    pub a: CompareSide,
    pub b: CompareSide,
    /// True when nothing compared differs (configuration aside from the
    /// run's own identity, every step, every message, status and result).
    pub equal: bool,
    /// Set when the two runs share history by forking: one is a fork
    /// (or fork of a fork) of the other, or both descend from one run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<ForkRelation>,
    /// The configurations side by side, one entry per compared field.
    pub config: Vec<FieldDiff>,
    pub totals: CompareTotals,
    /// The first point where the runs differ; none when they are equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divergence: Option<Divergence>,
    /// Steps aligned by position and tool-call sequence, one page.
    pub steps: StepRows,
    /// Transcripts aligned message by message, one page.
    pub messages: MessageRows,
}

/// One run's identity and outcome in a comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompareSide {
    pub id: String,
    pub name: String,
    pub status: RunStatus,
    pub model: String,
    pub step_count: u32,
    pub message_count: u64,
    pub tool_calls: u64,
    pub usage: Usage,
    /// At today's prices; none when the model has no price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// From start to finish (or to now while running); none before it starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// How two runs share history by forking.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ForkRelation {
    /// The nearest run both descend from (one of the two when one is the
    /// other's ancestor).
    pub ancestor: String,
    /// Messages with `seq` below this are the same history in both (copied
    /// by the fork) and are folded: not listed in the message rows.
    pub shared_messages: u64,
    /// Steps with an index below this are shared the same way and folded.
    pub shared_steps: u32,
}

/// One configuration field of both runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FieldDiff {
    /// `model`, `model_settings`, `system_prompt`, `initial_prompt`, `input`,
    /// `tools`, `context`, `result_schema`, `max_turns`, `approval`,
    /// `agent`, `tags`.
    pub field: String,
    pub a: Value,
    pub b: Value,
    pub equal: bool,
    /// For object and array values that differ: the differences by JSON
    /// pointer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub json: Vec<JsonChange>,
    /// For text values that differ: the word-level diff.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub words: Vec<WordChange>,
}

/// Totals of both runs and `b - a`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompareTotals {
    pub a: Totals,
    pub b: Totals,
    pub delta: TotalsDelta,
}

/// One run's totals.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Totals {
    pub steps: u32,
    pub tool_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// `b - a` of each total (cost and duration when both sides have one).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TotalsDelta {
    pub steps: i64,
    pub tool_calls: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub total_tokens: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
}

/// The first point where two runs differ.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Divergence {
    /// The first step row that is not `equal` (its position in
    /// [`StepRows`], counting folded rows), and the step indexes on each side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_row: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a_step: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b_step: Option<u32>,
    /// The first message row that is not `equal`, and the message `seq` on each side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_row: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a_seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b_seq: Option<u64>,
    /// One line for people: what differs first ("step 4: only in b (calculator)",
    /// "step 2: arguments of calculator differ", "configuration: model"):
    /// the first differing message when it is a human one (an edit), else
    /// the first differing step, else message, else the configuration
    /// fields that differ, else the status or the result.
    pub summary: String,
}

/// How many aligned rows of each kind a list has (the folded rows of a
/// fork's shared history count as `equal`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChangeCounts {
    pub equal: u32,
    pub changed: u32,
    pub inserted: u32,
    pub deleted: u32,
}

/// One page of aligned steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepRows {
    /// Rows in the whole alignment, the folded shared prefix included.
    pub total: u32,
    /// Rows of the shared fork prefix (`row < folded`), never listed.
    pub folded: u32,
    pub counts: ChangeCounts,
    /// The first row of this page.
    pub from: u32,
    pub rows: Vec<StepPair>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_from: Option<u32>,
}

/// Two aligned steps (or one, inserted or deleted).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepPair {
    pub row: u32,
    pub change: Change,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a: Option<StepSide>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b: Option<StepSide>,
    /// What differs, among `text`, `tool_calls`, `status`, `tokens`, `cost`,
    /// `duration`. Tokens, cost and duration are reported but do not by
    /// themselves make a pair `changed` (two equal runs of a real model
    /// rarely match them to the unit).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<String>,
    /// Word-level diff of the model's text, when both have text and it differs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub text: Vec<WordChange>,
    /// The tool calls of both steps aligned by tool name and order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<CallPair>,
}

/// One side of a [`StepPair`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StepSide {
    pub index: u32,
    pub status: StepStatus,
    /// The model's text (cut at [`COMPARE_TEXT_CHARS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The tool names called, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    pub usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// Two aligned tool calls (or one).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallPair {
    pub change: Change,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a: Option<CallSide>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b: Option<CallSide>,
    /// The arguments' differences by JSON pointer (empty when equal; at
    /// most 100, arrays compared index by index).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<JsonChange>,
    /// Whether the results (or errors) are the same.
    pub result_equal: bool,
}

/// One side of a [`CallPair`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallSide {
    pub id: String,
    pub tool_name: String,
    pub status: ToolCallStatus,
    pub arguments: Value,
    /// The result as JSON text, cut at [`COMPARE_TEXT_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One difference between two JSON values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JsonChange {
    /// A JSON pointer (`""` for the whole value, `/to/0`).
    pub path: String,
    pub op: JsonOp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b: Option<Value>,
}

/// What happened at a [`JsonChange`]'s path from `a` to `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum JsonOp {
    Added,
    Removed,
    Changed,
}

/// One run of words in a word-level diff: the same in both, only in `a`
/// (`deleted`) or only in `b` (`inserted`). Concatenating the `equal` and
/// `deleted` parts gives `a`'s text; `equal` and `inserted`, `b`'s.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WordChange {
    pub change: Change,
    pub text: String,
}

/// One page of the aligned transcripts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessageRows {
    pub total: u32,
    /// Rows of the shared fork prefix (`row < folded`), never listed.
    pub folded: u32,
    pub counts: ChangeCounts,
    pub from: u32,
    pub rows: Vec<MessagePair>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_from: Option<u32>,
}

/// Two aligned messages (or one).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessagePair {
    pub row: u32,
    pub change: Change,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a: Option<MessageSide>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b: Option<MessageSide>,
    /// Word-level diff of the texts, when both are present and differ.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub words: Vec<WordChange>,
}

/// One side of a [`MessagePair`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessageSide {
    pub id: String,
    pub seq: u64,
    /// `human`, `agent` or `invocation-result` (see `MessageBody::kind`).
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_index: Option<u32>,
    /// What the model saw, as text (a tool result as JSON text), cut at
    /// [`COMPARE_TEXT_CHARS`].
    pub text: String,
}

/// `POST /api/runs/batch`: one run configuration started on several models.
///
/// The body is a [`CreateRun`] with `models` beside its fields, read by
/// hand (see `model/batch.rs`) so an unknown field is refused as in
/// `POST /api/runs` (a flattened `CreateRun` would never see one).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchRuns {
    /// The run to start on each model (its `model` and `id` must be absent).
    #[serde(flatten)]
    pub run: CreateRun,
    /// 1 to [`MAX_BATCH_MODELS`] distinct model names: `builtin` or
    /// configured providers' models.
    pub models: Vec<String>,
}

/// The answer to `POST /api/runs/batch`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchCreated {
    pub group_id: String,
    /// One run per model, in the order of `models`.
    pub runs: Vec<Run>,
}

/// A comparison group: `GET /api/compare/groups/{id}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompareGroup {
    pub id: String,
    pub project: String,
    pub created_at: DateTime<Utc>,
    /// The members in the order of the batch's `models`.
    pub members: Vec<GroupMember>,
}

/// One run of a comparison group: the summary row's column.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GroupMember {
    pub run_id: String,
    pub name: String,
    pub model: String,
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    pub step_count: u32,
    pub usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// What to compare and which rows to send: `GET /api/compare`'s query.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompareQuery {
    /// The run on the left.
    pub a: String,
    /// The run on the right.
    pub b: String,
    /// The first step row to send. Absent: the divergence region (two rows
    /// before the first difference, never inside the folded fork prefix).
    /// A row inside the folded prefix starts the page at its end; one past
    /// the last row gives an empty page.
    pub steps_from: Option<u32>,
    /// Step rows to send, 1 to [`MAX_COMPARE_ROWS`] ([`DEFAULT_COMPARE_ROWS`] when absent).
    pub steps_limit: Option<u32>,
    /// The first message row to send; absent: the divergence region, as for steps.
    pub messages_from: Option<u32>,
    /// Message rows to send, 1 to [`MAX_COMPARE_ROWS`].
    pub messages_limit: Option<u32>,
}
