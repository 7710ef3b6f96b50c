//! The row codec every backend shares: row types and their conversion to the
//! model.
//!
//! Rows are read with runtime `query_as` (no compile-time database needed)
//! and derive `FromRow` for any sqlx database. Every backend returns JSON
//! payloads as text (SQLite stores TEXT; PostgreSQL stores JSONB and selects
//! it as `column::text`), which is parsed here; timestamps are Unix
//! milliseconds, integers 64-bit, flags booleans.

pub(crate) mod agents;
pub(crate) mod directory;
pub(crate) mod http_tools;
mod lite;
pub(crate) mod params;
pub(crate) mod spans;
pub(crate) mod webhooks;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::model::{
    ApprovalDecision, ApprovalPolicy, Decision, Email, Interruption, Message, MessageBody, Run, RunStatus, Step,
    StepStatus, ToolCall, ToolCallStatus, Usage,
};
use crate::store::from_ms;

fn json<T: DeserializeOwned + Default>(text: &str) -> T {
    serde_json::from_str(text).unwrap_or_default()
}

fn opt_json(text: Option<String>) -> Option<Value> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

#[derive(sqlx::FromRow)]
pub struct RunRow {
    pub(crate) id: String,
    name: String,
    status: String,
    model: String,
    model_settings: String,
    system_prompt: Option<String>,
    initial_prompt: String,
    input: Option<String>,
    tools: String,
    tags: String,
    context: String,
    max_turns: i64,
    agent_id: Option<String>,
    project: String,
    created_by_id: Option<String>,
    created_by: Option<String>,
    approval: String,
    always_approve: String,
    always_reject: String,
    interactive: bool,
    result_schema: Option<String>,
    call_summarization: bool,
    parent_run_id: Option<String>,
    forked_from_message_id: Option<String>,
    result: Option<String>,
    summary: Option<String>,
    failure_reason: Option<String>,
    input_tokens: i64,
    output_tokens: i64,
    cache_read_tokens: i64,
    reasoning_tokens: i64,
    total_tokens: i64,
    requests: i64,
    step_count: i64,
    created_at: i64,
    updated_at: i64,
    started_at: Option<i64>,
    finished_at: Option<i64>,
    agent_version: Option<i64>,
    agent_overrides: String,
    current_agent: Option<String>,
    current_agent_version: Option<i64>,
    sub_agents: String,
    handoffs: String,
    handoff_turns: i64,
    parent_call_id: Option<String>,
    root_run_id: Option<String>,
    depth: i64,
    child_count: i64,
    metadata: Option<String>,
    reasoning_traces: bool,
    on_status_change: Option<String>,
    source: Option<String>,
    group_id: Option<String>,
    forked_from_step: Option<i64>,
    replay: Option<String>,
    idle_ms: i64,
    session_id: Option<String>,
    end_user: Option<String>,
    tool_answers: Option<String>,
    experiment_id: Option<String>,
    experiment_item_id: Option<String>,
    /// Counted by the read (see `RUN_COLUMNS`), not stored.
    rejected_calls: i64,
    failed_calls: i64,
}

impl RunRow {
    /// The run, refusing any stored field that cannot be decoded (JSON that
    /// does not parse to its type, a time outside the calendar, an unknown
    /// status): what the runner drives must be exactly what was stored.
    /// Reads for display use the lenient `From` instead.
    pub fn decode(self) -> Result<Run, String> {
        fn strict<T: DeserializeOwned>(column: &str, text: &str) -> Result<T, String> {
            serde_json::from_str(text).map_err(|e| format!("`{column}` is not valid ({e})"))
        }
        fn strict_opt(column: &str, text: &Option<String>) -> Result<(), String> {
            text.as_deref().map_or(Ok(()), |t| strict::<Value>(column, t).map(drop))
        }
        fn time(column: &str, ms: Option<i64>) -> Result<(), String> {
            match ms {
                Some(ms) if DateTime::from_timestamp_millis(ms).is_none() => {
                    Err(format!("`{column}` holds a time out of range ({ms})"))
                }
                _ => Ok(()),
            }
        }
        RunStatus::parse(&self.status).ok_or_else(|| format!("`status` is unknown ({:?})", self.status))?;
        strict::<Value>("model_settings", &self.model_settings)?;
        strict::<Vec<String>>("tools", &self.tools)?;
        strict::<std::collections::BTreeMap<String, String>>("tags", &self.tags)?;
        strict::<Value>("context", &self.context)?;
        strict::<ApprovalPolicy>("approval", &self.approval)?;
        strict::<Vec<String>>("always_approve", &self.always_approve)?;
        strict::<Vec<String>>("always_reject", &self.always_reject)?;
        strict_opt("input", &self.input)?;
        strict_opt("result_schema", &self.result_schema)?;
        strict_opt("result", &self.result)?;
        strict::<Vec<String>>("agent_overrides", &self.agent_overrides)?;
        strict::<Vec<crate::model::AgentLink>>("sub_agents", &self.sub_agents)?;
        strict::<Vec<crate::model::AgentLink>>("handoffs", &self.handoffs)?;
        if let Some(meta) = &self.metadata {
            strict::<crate::model::Metadata>("metadata", meta)?;
        }
        if let Some(hook) = &self.on_status_change {
            strict::<crate::model::OnStatusChange>("on_status_change", hook)?;
        }
        if let Some(source) = &self.source {
            strict::<crate::model::RunSource>("source", source)?;
        }
        u32::try_from(self.depth).map_err(|_| format!("`depth` is out of range ({})", self.depth))?;
        time("created_at", Some(self.created_at))?;
        time("updated_at", Some(self.updated_at))?;
        time("started_at", self.started_at)?;
        time("finished_at", self.finished_at)?;
        u32::try_from(self.max_turns).map_err(|_| format!("`max_turns` is out of range ({})", self.max_turns))?;
        u32::try_from(self.step_count).map_err(|_| format!("`step_count` is out of range ({})", self.step_count))?;
        Ok(Run::from(self))
    }
}

impl From<RunRow> for Run {
    fn from(r: RunRow) -> Run {
        let mut run = Run {
            status: RunStatus::parse(&r.status).unwrap_or(RunStatus::Failed),
            model_settings: json(&r.model_settings),
            input: opt_json(r.input),
            tools: json(&r.tools),
            tags: json(&r.tags),
            context: json(&r.context),
            max_turns: r.max_turns as u32,
            approval: json(&r.approval),
            always_approve: json(&r.always_approve),
            always_reject: json(&r.always_reject),
            interruptions: Vec::new(),
            interactive: r.interactive,
            result_schema: opt_json(r.result_schema),
            call_summarization: r.call_summarization,
            parent_run_id: r.parent_run_id,
            forked_from_message_id: r.forked_from_message_id,
            root_run_id: r.root_run_id.unwrap_or_else(|| r.id.clone()),
            parent_call_id: r.parent_call_id,
            depth: r.depth.clamp(0, u32::MAX.into()) as u32,
            child_count: r.child_count.clamp(0, u32::MAX.into()) as u32,
            agent_version: r.agent_version.map(|v| v.clamp(0, u32::MAX.into()) as u32),
            agent_overrides: json(&r.agent_overrides),
            current_agent: r.current_agent,
            current_agent_version: r.current_agent_version.map(|v| v.clamp(0, u32::MAX.into()) as u32),
            sub_agents: json(&r.sub_agents),
            handoffs: json(&r.handoffs),
            handoff_turns: r.handoff_turns.clamp(0, u32::MAX.into()) as u32,
            reasoning_traces: r.reasoning_traces,
            on_status_change: r.on_status_change.and_then(|h| serde_json::from_str(&h).ok()),
            metadata: r.metadata.as_deref().map(json).unwrap_or_default(),
            source: r.source.and_then(|s| serde_json::from_str(&s).ok()),
            group_id: r.group_id,
            forked_from_step: r.forked_from_step.map(|v| v.clamp(0, u32::MAX.into()) as u32),
            replay: r.replay.and_then(|t| serde_json::from_str(&t).ok()),
            output: None,
            outcome: Default::default(),
            result: opt_json(r.result),
            usage: Usage {
                input_tokens: r.input_tokens as u64,
                output_tokens: r.output_tokens as u64,
                cache_read_tokens: r.cache_read_tokens as u64,
                reasoning_tokens: r.reasoning_tokens as u64,
                total_tokens: r.total_tokens as u64,
                requests: r.requests as u64,
            },
            step_count: r.step_count as u32,
            created_at: from_ms(r.created_at),
            updated_at: from_ms(r.updated_at),
            started_at: r.started_at.map(from_ms),
            finished_at: r.finished_at.map(from_ms),
            idle_ms: r.idle_ms.max(0) as u64,
            session_id: r.session_id,
            end_user: r.end_user,
            tool_answers: r.tool_answers.and_then(|t| serde_json::from_str(&t).ok()),
            experiment: r
                .experiment_id
                .zip(r.experiment_item_id)
                .map(|(experiment_id, item_id)| crate::model::ExperimentLink { experiment_id, item_id }),
            id: r.id,
            name: r.name,
            model: r.model,
            system_prompt: r.system_prompt,
            initial_prompt: r.initial_prompt,
            agent_id: r.agent_id,
            project: r.project,
            created_by: r.created_by_id.zip(r.created_by).map(|(id, name)| crate::model::Actor { id, name }),
            summary: r.summary,
            failure_reason: r.failure_reason,
        };
        run.output = run.output_union();
        let count = |n: i64| n.clamp(0, u32::MAX.into()) as u32;
        run.outcome = crate::model::RunOutcome::of(&run, count(r.rejected_calls), count(r.failed_calls));
        run
    }
}

#[derive(sqlx::FromRow)]
pub struct StepRow {
    pub(super) run_id: String,
    pub(super) idx: i64,
    pub(super) kind: String,
    pub(super) status: String,
    pub(super) request: String,
    pub(super) response: String,
    pub(super) input_tokens: i64,
    pub(super) output_tokens: i64,
    pub(super) cache_read_tokens: i64,
    pub(super) reasoning_tokens: i64,
    pub(super) total_tokens: i64,
    pub(super) requests: i64,
    pub(super) started_at: i64,
    pub(super) model_completed_at: Option<i64>,
    pub(super) completed_at: Option<i64>,
}

pub fn step_status_str(s: StepStatus) -> &'static str {
    match s {
        StepStatus::Running => "running",
        StepStatus::Completed => "completed",
        StepStatus::Interrupted => "interrupted",
    }
}

/// A step's stored status; anything unknown reads as interrupted.
pub fn parse_step_status(s: &str) -> StepStatus {
    match s {
        "running" => StepStatus::Running,
        "completed" => StepStatus::Completed,
        _ => StepStatus::Interrupted,
    }
}

impl From<StepRow> for Step {
    fn from(r: StepRow) -> Step {
        Step {
            index: r.idx as u32,
            status: parse_step_status(&r.status),
            request: json(&r.request),
            response: json(&r.response),
            usage: Usage {
                input_tokens: r.input_tokens as u64,
                output_tokens: r.output_tokens as u64,
                cache_read_tokens: r.cache_read_tokens as u64,
                reasoning_tokens: r.reasoning_tokens as u64,
                total_tokens: r.total_tokens as u64,
                requests: r.requests as u64,
            },
            started_at: from_ms(r.started_at),
            model_completed_at: r.model_completed_at.map(from_ms),
            completed_at: r.completed_at.map(from_ms),
            tool_calls: Vec::new(),
            id: Step::id_for(&r.run_id, r.idx as u32),
            run_id: r.run_id,
            kind: r.kind,
        }
    }
}

#[derive(sqlx::FromRow)]
pub struct ToolCallRow {
    pub(super) run_id: String,
    pub(super) step_idx: i64,
    pub(super) id: String,
    pub(super) tool_name: String,
    pub(super) arguments: String,
    pub(super) result: Option<String>,
    pub(super) error: Option<String>,
    pub(super) status: String,
    pub(super) reasoning: Option<String>,
    pub(super) requested_at: Option<i64>,
    pub(super) approval: Option<String>,
    pub(super) started_at: Option<i64>,
    pub(super) completed_at: Option<i64>,
    pub(super) child_run_id: Option<String>,
}

impl From<ToolCallRow> for ToolCall {
    fn from(r: ToolCallRow) -> ToolCall {
        ToolCall {
            step_index: r.step_idx as u32,
            arguments: json(&r.arguments),
            result: opt_json(r.result),
            status: ToolCallStatus::parse(&r.status).unwrap_or(ToolCallStatus::Failed),
            reasoning: r.reasoning,
            requested_at: r.requested_at.map(from_ms),
            approval: r.approval.and_then(|a| serde_json::from_str(&a).ok()),
            started_at: r.started_at.map(from_ms),
            completed_at: r.completed_at.map(from_ms),
            id: r.id,
            run_id: r.run_id,
            tool_name: r.tool_name,
            error: r.error,
            child_run_id: r.child_run_id,
        }
    }
}

#[derive(sqlx::FromRow)]
pub struct MessageRow {
    run_id: String,
    seq: i64,
    id: String,
    #[sqlx(rename = "type")]
    kind: String,
    step_idx: Option<i64>,
    data: String,
    created_at: i64,
}

impl MessageRow {
    pub fn into_message(self) -> Option<Message> {
        let tagged = serde_json::json!({ "type": self.kind, "data": json::<Value>(&self.data) });
        let body: MessageBody = serde_json::from_value(tagged).ok()?;
        Some(Message {
            id: self.id,
            run_id: self.run_id,
            seq: self.seq as u64,
            step_index: self.step_idx.map(|i| i as u32),
            created_at: from_ms(self.created_at),
            body,
        })
    }
}

/// The `data` column of a message: its body without the type tag.
pub fn message_data(body: &MessageBody) -> String {
    let mut v = serde_json::to_value(body).unwrap_or_default();
    v.get_mut("data").map(Value::take).unwrap_or_default().to_string()
}

#[derive(sqlx::FromRow)]
pub struct EmailRow {
    id: String,
    run_id: String,
    recipient: String,
    subject: String,
    body: String,
    created_at: i64,
}

impl From<EmailRow> for Email {
    fn from(r: EmailRow) -> Email {
        Email {
            id: r.id,
            run_id: r.run_id,
            to: r.recipient,
            subject: r.subject,
            body: r.body,
            created_at: from_ms(r.created_at),
        }
    }
}

/// When a call requested at `requested_at` times out after `timeout_s`
/// seconds; `None` (no deadline) when that lies beyond the last time the
/// calendar can represent, so no stored value can make this panic.
pub fn deadline(requested_at: DateTime<Utc>, timeout_s: u64) -> Option<DateTime<Utc>> {
    let secs = i64::try_from(timeout_s).ok()?;
    requested_at.checked_add_signed(chrono::TimeDelta::try_seconds(secs)?)
}

/// A call awaiting approval, joined with its run's name and policy.
#[derive(sqlx::FromRow)]
pub struct InterruptionRow {
    run_id: String,
    run_name: String,
    run_approval: String,
    id: String,
    step_idx: i64,
    tool_name: String,
    arguments: String,
    reasoning: Option<String>,
    requested_at: Option<i64>,
}

impl From<InterruptionRow> for Interruption {
    fn from(r: InterruptionRow) -> Interruption {
        let requested_at = from_ms(r.requested_at.unwrap_or_default());
        let policy: ApprovalPolicy = json(&r.run_approval);
        Interruption {
            deadline: policy.timeout_s.and_then(|s| deadline(requested_at, s)),
            run_id: r.run_id,
            run_name: r.run_name,
            call_id: r.id,
            step_index: r.step_idx as u32,
            tool_name: r.tool_name,
            arguments: json(&r.arguments),
            reasoning: r.reasoning,
            requested_at,
            chain: Vec::new(),
        }
    }
}

/// A row of the pending inbox: an [`InterruptionRow`] with the call's
/// position in its step (for the cursor) and, for a child run's call, the
/// run waiting on it.
#[derive(sqlx::FromRow)]
pub struct PendingCallRow {
    #[sqlx(flatten)]
    call: InterruptionRow,
    pos: i64,
    parent_run_id: Option<String>,
}

impl From<PendingCallRow> for crate::store::PendingCall {
    fn from(r: PendingCallRow) -> Self {
        let call = Interruption::from(r.call);
        crate::store::PendingCall { pos: r.pos as u32, parent_run_id: r.parent_run_id, call }
    }
}

#[derive(sqlx::FromRow)]
pub struct DecidedCallRow {
    run_id: String,
    run_name: String,
    call_id: String,
    step_idx: i64,
    tool_name: String,
    decision: String,
    decided_by: String,
    decided_by_id: Option<String>,
    decided_at: i64,
    always: bool,
    original_arguments: String,
    edited_arguments: Option<String>,
    comment: Option<String>,
}

impl From<DecidedCallRow> for crate::store::DecidedCall {
    fn from(r: DecidedCallRow) -> Self {
        let decision = if r.decision == "approved" { Decision::Approved } else { Decision::Rejected };
        crate::store::DecidedCall {
            run_id: r.run_id,
            run_name: r.run_name,
            call_id: r.call_id,
            step_index: r.step_idx as u32,
            tool_name: r.tool_name,
            decision: ApprovalDecision {
                decision,
                decided_by: r.decided_by,
                decided_by_id: r.decided_by_id,
                decided_at: from_ms(r.decided_at),
                always: r.always,
                original_arguments: json(&r.original_arguments),
                edited_arguments: opt_json(r.edited_arguments),
                comment: r.comment,
            },
        }
    }
}
