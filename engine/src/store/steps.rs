//! The steps part of the store: a run's steps and their tool calls, and its
//! transcript (messages), written step by step and read whole, paged or in
//! outline.

use async_trait::async_trait;
use serde_json::Value;

use super::runs::{RunPatch, RunStore};
use crate::error::Result;
use crate::model::{Message, Run, RunStatus, Step, StepOutline, ToolCall, Usage};

/// What [`StepStore::save_step`] writes in one transaction.
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

/// What [`StepStore::recorded_requests`] found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordedRequests {
    pub model: Option<crate::model::StepRequest>,
    pub tools: Option<crate::model::StepRequest>,
    pub system_prompt: Option<crate::model::StepRequest>,
}

/// Steps belong to runs: a [`RunStore`] too, since finishing a run's last
/// step moves the run (see [`StepStore::finish_step`]).
#[async_trait]
pub trait StepStore: RunStore {
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
    /// Records one tool call's progress (`pos` is its place in the step), so a
    /// finished call is durable even if the process dies before the step ends.
    async fn save_tool_call(&self, call: &ToolCall, pos: usize) -> Result<()>;
    /// Steps of a run in order, each with its tool calls.
    async fn steps(&self, run_id: &str) -> Result<Vec<Step>>;
    /// Up to `limit` steps with `index >= from`, in order, each with its tool calls.
    async fn steps_page(&self, run_id: &str, from: u32, limit: u32) -> Result<Vec<Step>>;
    /// Every step of a run without payloads, in order (see [`StepOutline`]).
    /// The default derives it from the full steps; stores override it with
    /// a read that skips the payload columns.
    async fn step_outline(&self, run_id: &str) -> Result<Vec<StepOutline>> {
        Ok(self.steps(run_id).await?.iter().map(StepOutline::from).collect())
    }
    /// The index of a run's last step, if it has any.
    async fn last_step_index(&self, run_id: &str) -> Result<Option<u32>> {
        Ok(self.step_outline(run_id).await?.last().map(|s| s.index))
    }
    /// The requests of the latest steps at or before `index` that recorded
    /// the model, the tools and the system prompt (a step records each only
    /// when it changed; see [`crate::model::StepRequest`]).
    async fn recorded_requests(&self, run_id: &str, index: u32) -> Result<RecordedRequests> {
        let steps = self.steps_page(run_id, 0, index.saturating_add(1)).await?;
        let latest = |has: fn(&crate::model::StepRequest) -> bool| {
            steps.iter().rev().map(|s| &s.request).find(|r| has(r)).cloned()
        };
        Ok(RecordedRequests {
            model: latest(|r| r.model.is_some()),
            tools: latest(|r| r.tools.is_some()),
            system_prompt: latest(|r| r.system_prompt.is_some()),
        })
    }
    /// One tool call of a run, by the model's call id.
    async fn tool_call(&self, run_id: &str, call_id: &str) -> Result<Option<ToolCall>>;
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
    /// The `seq` of a run's last transcript message (decodable or not), so
    /// new messages are numbered after it.
    async fn last_message_seq(&self, run_id: &str) -> Result<Option<u64>> {
        Ok(self.messages(run_id).await?.last().map(|m| m.seq))
    }
    /// How many of a run's messages are of `kind` (`agent`, `human`,
    /// `invocation-result`), without reading them.
    async fn count_messages(&self, run_id: &str, kind: &str) -> Result<u64> {
        Ok(self.messages(run_id).await?.iter().filter(|m| m.body.kind() == kind).count() as u64)
    }
    /// Where a run's driver picks up (see [`RunPosition`]), in one read
    /// where the store can.
    async fn position(&self, run_id: &str) -> Result<RunPosition> {
        let (last_step, last_seq, agent_messages) = tokio::try_join!(
            self.last_step_index(run_id),
            self.last_message_seq(run_id),
            self.count_messages(run_id, "agent"),
        )?;
        Ok(RunPosition { last_step, last_seq, agent_messages })
    }
}

/// Where a run stands, as its driver needs to know when it starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunPosition {
    /// The index of its last step, if it has any.
    pub last_step: Option<u32>,
    /// The `seq` of its last transcript message (see [`StepStore::last_message_seq`]).
    pub last_seq: Option<u64>,
    /// Its `agent` messages: the model turns taken.
    pub agent_messages: u64,
}
