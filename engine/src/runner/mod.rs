//! The agent loop: model turn → tool calls → results → next turn.
//!
//! One [`Loop`] drives one run. It persists the model's answer as soon as it
//! arrives, each tool call as it finishes, and the step's results in one
//! transaction, so a run can always resume from the store: after a crash the
//! loop is simply started again on what was persisted (see [`Loop::load`]).

mod answer;
mod calls;
mod context;
mod results;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::engine::{now, Inner};
use crate::error::Result;
use crate::events::EventKind;
use crate::llm::{collect, ModelError, ModelRequest};
use crate::model::{
    Message, MessageBody, ModelAnswer, Run, RunStatus, Step, StepRequest, StepResponse, StepStatus, ToolCallStatus,
    ToolInfo, Usage,
};
use crate::store::{RunPatch, StepWrite};
use crate::tools::ToolError;

use answer::{awaiting, Next};

/// Moves `run` to `to` in the store and publishes the change.
pub(crate) async fn set_status(inner: &Inner, run: &Run, to: RunStatus, patch: RunPatch) -> Result<Run> {
    let updated = inner.store.transition(&run.id, run.status, to, patch).await?;
    publish_status(inner, run.status, &updated);
    Ok(updated)
}

/// Announces a status change already stored (`updated` is the run after it).
fn publish_status(inner: &Inner, old: RunStatus, updated: &Run) {
    let to = updated.status;
    inner.bus.publish(&updated.id, EventKind::RunStatus { old, new: to });
    if to.is_terminal() {
        inner.bus.publish(
            &updated.id,
            EventKind::RunFinished {
                status: to,
                result: updated.result.clone(),
                summary: updated.summary.clone(),
                usage: updated.usage,
            },
        );
    }
}

pub(crate) fn cancelled_patch() -> RunPatch {
    RunPatch { summary: Some("Cancelled on request.".into()), ..RunPatch::default() }
}

/// Marks a run `failed` if it is still pending or running (after an
/// internal error, or when its record cannot be decoded: only its status
/// is read, so even then the run ends with the reason).
pub(crate) async fn fail_if_active(inner: &Inner, run_id: &str, reason: String) {
    let head = match inner.store.run_head(run_id).await {
        Ok(Some(head)) => head,
        Ok(None) => return,
        Err(e) => {
            tracing::error!(run_id, error = %e, "could not read the run to mark it failed");
            return;
        }
    };
    if matches!(head.status, RunStatus::Pending | RunStatus::Running) {
        let patch = RunPatch { failure_reason: Some(reason), ..RunPatch::default() };
        match inner.store.transition(run_id, head.status, RunStatus::Failed, patch).await {
            Ok(updated) => publish_status(inner, head.status, &updated),
            Err(e) => tracing::error!(run_id, error = %e, "could not mark the run failed"),
        }
    }
}

/// The failure reason of a run whose stored record cannot be decoded.
pub(crate) fn undecodable(problem: &str) -> String {
    format!("the stored run could not be read: {problem}")
}

/// Drives the run `run_id` until it finishes, pauses or is cancelled.
pub(crate) async fn drive(inner: &Arc<Inner>, run_id: &str, cancel: CancellationToken) -> Result<()> {
    let mut run = match inner.store.run_to_drive(run_id).await? {
        None => return Ok(()),
        Some(Ok(run)) => run,
        Some(Err(problem)) => {
            // Never driven on guessed defaults: the run fails, with the reason.
            fail_if_active(inner, run_id, undecodable(&problem)).await;
            return Ok(());
        }
    };
    if cancel.is_cancelled() {
        if !run.status.is_terminal() {
            set_status(inner, &run, RunStatus::Cancelled, cancelled_patch()).await?;
        }
        return Ok(());
    }
    match run.status {
        RunStatus::Pending => run = set_status(inner, &run, RunStatus::Running, RunPatch::default()).await?,
        RunStatus::Running => {} // resumed after a restart or a decision
        _ => return Ok(()),
    }
    match Loop::load(inner, run, cancel).await? {
        Some(run_loop) => run_loop.run().await,
        None => Ok(()), // paused again, waiting for decisions
    }
}

struct Loop<'a> {
    inner: &'a Arc<Inner>,
    run: Run,
    cancel: CancellationToken,
    /// The newest part of the transcript (see `transcript_tail`), then
    /// every message this driver adds.
    messages: Vec<Message>,
    /// How many messages precede `messages` in the transcript.
    base: u64,
    /// What of the history fits the context window.
    window: context::Window,
    /// Model turns since the latest message a person wrote.
    turns_since_person: u32,
    /// The run's model settings, shared with every request.
    settings: Arc<Value>,
    /// Agent messages in the whole transcript (model turns taken), kept up to date.
    agent_turns: usize,
    /// Model, context window and tool names last written to a step's request.
    recorded: Option<(String, u64, Vec<String>)>,
    step_count: u32,
    /// The `seq` the next transcript message gets: one after the store's
    /// last, whatever `messages` holds.
    next_seq: u64,
    usage: Usage,
}

impl<'a> Loop<'a> {
    /// Reads what was persisted. A step still open (interrupted by a crash,
    /// or resumed after its approvals were decided) is finished first (see
    /// `calls::resume`); `None` when it still waits for a decision.
    async fn load(inner: &'a Arc<Inner>, run: Run, cancel: CancellationToken) -> Result<Option<Loop<'a>>> {
        // Only the newest step can still be open: earlier ones are never read.
        let (last_index, last_seq, agent_turns) = tokio::try_join!(
            inner.store.last_step_index(&run.id),
            inner.store.last_message_seq(&run.id),
            inner.store.count_messages(&run.id, "agent"),
        )?;
        let steps = match last_index {
            Some(i) => inner.store.steps_page(&run.id, i, 1).await?,
            None => Vec::new(),
        };
        let messages = transcript_tail(inner, &run, last_seq).await?;
        let base = messages.first().map_or(0, |m| m.seq);
        // Numbered after the last stored step, whatever the run's counter says.
        let step_count = last_index.map_or(0, |i| i + 1);
        let window = context::Window::new(&messages);
        let turns_since_person = turns_since_person(&messages);
        let settings = Arc::new(run.model_settings.clone());
        let mut this = Loop {
            inner,
            step_count,
            next_seq: last_seq.map_or(0, |s| s + 1),
            usage: run.usage,
            run,
            cancel,
            messages,
            window,
            turns_since_person,
            recorded: None,
            settings,
            agent_turns: usize::try_from(agent_turns).unwrap_or(usize::MAX),
            base,
        };
        if let Some(mut last) = steps.into_iter().last().filter(|s| s.status == StepStatus::Running) {
            calls::resume(inner, &this.run, &mut last, &this.cancel).await;
            if awaiting(&last) {
                this.pause(last).await?;
                return Ok(None);
            }
            this.complete_step(last).await?;
        }
        Ok(Some(this))
    }

    /// Records the step with its calls awaiting approval and pauses the run;
    /// the driver then ends. A decision resumes it (see `Engine::approve`).
    async fn pause(&mut self, step: Step) -> Result<()> {
        self.save(&step, Vec::new()).await?;
        // Armed before the status changes, so the timer exists by the time
        // anyone can see the run paused.
        if let Some(secs) = self.run.approval.timeout_s {
            let ids = step
                .tool_calls
                .iter()
                .filter(|c| c.status == ToolCallStatus::AwaitingApproval)
                .map(|c| c.id.clone())
                .collect();
            crate::engine::arm_approval_timeout(self.inner, &self.run.id, ids, Duration::from_secs(secs));
        }
        self.end(RunStatus::Paused, RunPatch::default()).await
    }

    async fn run(mut self) -> Result<()> {
        let Some(model) = self.inner.models.get(&self.run.model) else {
            let reason = ModelError::NotConfigured(self.run.model.clone()).to_string();
            return self.end(RunStatus::Failed, RunPatch { failure_reason: Some(reason), ..Default::default() }).await;
        };
        let tools: Vec<ToolInfo> = self.run.tools.iter().filter_map(|n| self.inner.tools.info(n)).collect();
        loop {
            if self.cancel.is_cancelled() {
                return self.end(RunStatus::Cancelled, cancelled_patch()).await;
            }
            if self.turns_since_person >= self.run.max_turns {
                let summary = format!(
                    "Stopped: the run reached max_turns ({}) before the model gave a final answer.",
                    self.run.max_turns
                );
                let patch = RunPatch { result: Some(Value::Null), summary: Some(summary), ..Default::default() };
                return self.end(RunStatus::Done, patch).await;
            }
            let index = self.step_count;
            let started_at = now();
            self.inner.bus.publish(&self.run.id, EventKind::StepStarted { index });
            let system = context::system_prompt(self.run.system_prompt.as_deref(), self.run.result_schema.as_ref());
            let window = model.context_window(&self.run.model_settings);
            let budget = context::budget(window, system.as_deref(), &tools);
            let first = self.window.first_kept(&self.messages, budget);
            let request = ModelRequest {
                run_id: self.run.id.clone(),
                system_prompt: system,
                messages: self.messages[first..].to_vec(),
                tools: tools.clone(),
                settings: self.settings.clone(),
                result_schema: self.run.result_schema.clone(),
                turns_taken: self.agent_turns,
            };
            // The sampling settings passed through to the provider, as sent.
            let settings: serde_json::Map<String, Value> = ["temperature", "max_tokens", "top_p", "seed"]
                .into_iter()
                .filter_map(|k| Some((k.to_owned(), request.settings.get(k).filter(|v| !v.is_null())?.clone())))
                .collect();
            let dropped = self.base + first as u64;
            let mut request_summary = StepRequest {
                messages: request.messages.len() as u64,
                dropped_messages: (dropped > 0).then_some(dropped),
                settings: (!settings.is_empty()).then_some(settings),
                ..StepRequest::default()
            };
            // Model, window and tools rarely change: recorded on the first
            // step and whenever they differ, which keeps long traces small.
            let tool_names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
            let recorded = (self.run.model.clone(), window, tool_names);
            if self.recorded.as_ref() != Some(&recorded) {
                request_summary.model = Some(recorded.0.clone());
                request_summary.context_window = Some(recorded.1);
                request_summary.tools = Some(recorded.2.clone());
                self.recorded = Some(recorded);
            }
            let (bus, run_id) = (self.inner.bus.clone(), self.run.id.clone());
            let turn = async {
                let stream = model.stream(request).await?;
                collect(stream, |d| {
                    bus.publish(&run_id, EventKind::MessageDelta { step_index: index, text: d.to_owned() })
                })
                .await
            };
            let response = tokio::select! {
                r = turn => r,
                _ = self.cancel.cancelled() => return self.end(RunStatus::Cancelled, cancelled_patch()).await,
            };
            let mut step = Step {
                run_id: self.run.id.clone(),
                index,
                kind: "model_turn".into(),
                status: StepStatus::Running,
                request: request_summary,
                response: StepResponse::default(),
                usage: Usage::default(),
                started_at,
                model_completed_at: Some(now()),
                completed_at: None,
                tool_calls: Vec::new(),
            };
            let mut response = match response {
                Ok(r) => r,
                Err(e) => {
                    step.status = StepStatus::Interrupted;
                    step.response = StepResponse::Failed { error: e.to_string() };
                    step.completed_at = step.model_completed_at;
                    self.step_count += 1;
                    let patch = RunPatch { failure_reason: Some(format!("model error: {e}")), ..Default::default() };
                    return self.finish(&step, Vec::new(), RunStatus::Failed, patch).await;
                }
            };
            step.usage = response.usage;
            calls::unique_ids(self.inner, &self.run.id, index, &mut response.tool_calls).await?;
            step.tool_calls = calls::plan(self.inner, &self.run, index, &response);
            step.response = StepResponse::Answer(ModelAnswer {
                text: response.text.clone(),
                // The calls themselves are the step's tool calls (argument
                // text that was not valid JSON is kept there verbatim).
                tool_calls: response.tool_calls.len() as u64,
                finish_reason: response.finish_reason.clone(),
                ..ModelAnswer::default()
            });
            if let Next::Stop = self.handle_answer(step, response, index).await? {
                return Ok(());
            }
        }
    }

    /// Appends each call's result to the transcript and marks the step done.
    async fn complete_step(&mut self, mut step: Step) -> Result<()> {
        // Reached with unfinished calls only when the run is being cancelled.
        for call in step.tool_calls.iter_mut().filter(|c| !c.status.is_finished()) {
            call.status = ToolCallStatus::Cancelled;
            call.error = Some(ToolError::cancelled().to_string());
            call.completed_at = Some(now());
        }
        let extra = results::shrink(self.inner, &self.run, &mut step).await?;
        self.usage.add(&extra);
        let messages = (step.tool_calls.iter().enumerate())
            .map(|(i, c)| self.message(i, Some(step.index), calls::result_message(c)))
            .collect();
        let cancelled = step.tool_calls.iter().any(|c| c.status == ToolCallStatus::Cancelled);
        step.status = if cancelled { StepStatus::Interrupted } else { StepStatus::Completed };
        step.completed_at = Some(now());
        self.save(&step, messages).await
    }

    /// Persists a step with new messages, then publishes them.
    async fn save(&mut self, step: &Step, messages: Vec<Message>) -> Result<()> {
        let write = StepWrite { step, messages: &messages, run_usage: &self.usage, step_count: self.step_count };
        self.inner.store.save_step(write).await?;
        self.saved(step, messages);
        Ok(())
    }

    /// Saves the run's last step with its messages and moves the run to `to`
    /// in one transaction (see `Store::finish_step`), then publishes it all
    /// (with the run's usage when `usage` is set).
    async fn finish(&mut self, step: &Step, messages: Vec<Message>, to: RunStatus, patch: RunPatch) -> Result<()> {
        self.finish_with(step, messages, to, patch, false).await
    }

    async fn finish_with(
        &mut self,
        step: &Step,
        messages: Vec<Message>,
        to: RunStatus,
        patch: RunPatch,
        usage: bool,
    ) -> Result<()> {
        let write = StepWrite { step, messages: &messages, run_usage: &self.usage, step_count: self.step_count };
        let old = self.run.status;
        let updated = self.inner.store.finish_step(write, old, to, patch).await?;
        self.saved(step, messages);
        if usage {
            self.inner.bus.publish(&self.run.id, EventKind::Usage { usage: self.usage });
        }
        publish_status(self.inner, old, &updated);
        self.run = updated;
        Ok(())
    }

    /// Takes a step and its messages the store just committed into the
    /// loop's state, and publishes them.
    fn saved(&mut self, step: &Step, messages: Vec<Message>) {
        for m in messages {
            self.inner.bus.publish(&self.run.id, EventKind::Item { message: m.clone() });
            self.window.push(&m);
            if matches!(m.body, MessageBody::Agent { .. }) {
                self.agent_turns += 1;
                self.turns_since_person += 1;
            } else if context::is_person(&m) {
                self.turns_since_person = 0;
            }
            self.next_seq = self.next_seq.max(m.seq + 1);
            self.messages.push(m);
        }
        self.inner.bus.publish(&self.run.id, EventKind::StepCompleted { step: Box::new(step.clone()) });
    }

    /// A new transcript message, `offset` places after the last saved one
    /// (several results of one step are saved together).
    fn message(&self, offset: usize, step_index: Option<u32>, body: MessageBody) -> Message {
        let seq = self.next_seq + offset as u64;
        Message {
            id: format!("{}-m{seq}", self.run.id),
            run_id: self.run.id.clone(),
            seq,
            step_index,
            created_at: Utc::now(),
            body,
        }
    }

    /// Whether a schema repair was already asked for since the person's message.
    fn repair_requested(&self) -> bool {
        self.messages
            .iter()
            .rev()
            .take_while(|m| !context::is_person(m))
            .any(|m| matches!(&m.body, MessageBody::Human { .. }))
    }

    async fn end(&mut self, to: RunStatus, patch: RunPatch) -> Result<()> {
        self.run = set_status(self.inner, &self.run, to, patch).await?;
        Ok(())
    }
}

/// Messages read per page when a run loads its transcript.
const TAIL_PAGE: u32 = 64;

/// The newest messages of the run's transcript (whose last is `last_seq`),
/// read page by page into the past until they hold all the loop needs (see
/// `context::tail_suffices`), so resuming a long run reads its recent
/// history, not all of it.
async fn transcript_tail(inner: &Inner, run: &Run, last_seq: Option<u64>) -> Result<Vec<Message>> {
    let budget = match inner.models.get(&run.model) {
        Some(model) => {
            let tools: Vec<ToolInfo> = run.tools.iter().filter_map(|n| inner.tools.info(n)).collect();
            let system = context::system_prompt(run.system_prompt.as_deref(), run.result_schema.as_ref());
            context::budget(model.context_window(&run.model_settings), system.as_deref(), &tools)
        }
        None => 0, // the run fails before any request
    };
    // Seqs below `cursor` are not read yet.
    let mut cursor = last_seq.map_or(0, |s| s + 1);
    let mut tail = Vec::new();
    while cursor > 0 && (tail.is_empty() || !context::tail_suffices(&tail, budget, run.max_turns)) {
        let from = cursor.saturating_sub(u64::from(TAIL_PAGE));
        let mut older = inner.store.messages_page(&run.id, from, TAIL_PAGE).await?;
        older.retain(|m| m.seq < cursor);
        older.append(&mut tail);
        tail = older;
        cursor = from;
    }
    Ok(tail)
}

/// Model turns taken since the latest message a person wrote.
fn turns_since_person(messages: &[Message]) -> u32 {
    messages
        .iter()
        .rev()
        .take_while(|m| !context::is_person(m))
        .filter(|m| matches!(m.body, MessageBody::Agent { .. }))
        .count() as u32
}
