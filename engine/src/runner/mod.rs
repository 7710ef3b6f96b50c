//! The agent loop: model turn → tool calls → results → next turn.
//!
//! One [`Loop`] drives one run. It persists the model's answer as soon as it
//! arrives, each tool call as it finishes, and the step's results in one
//! transaction, so a run can always resume from the store: after a crash the
//! loop is simply started again on what was persisted (see [`Loop::load`]).
//!
//! The runner works with a [`Runtime`] only and knows nothing of scheduling:
//! [`drive`] says how the run ended up (see [`Outcome`]), and its caller acts
//! on that, e.g. arms the approval timers of a paused run.

mod answer;
mod budget;
mod calls;
mod child_id;
mod context;
mod delegate;
mod gate;
mod offer;
mod outcome;
mod record;
mod replay;
mod results;

pub(crate) use context::{system_prompt, REPAIR_PREFIX};
pub(crate) use offer::definitions as tool_definitions;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::Result;
use crate::events::EventKind;
use crate::llm::{collect, ModelError, ModelRequest, ModelResponse};
use crate::model::{
    Message, MessageBody, ModelAnswer, Run, RunStatus, Step, StepRequest, StepResponse, StepStatus, ToolCallStatus,
    Usage, MAX_TURNS_STOP,
};
use crate::runtime::{cancelled_patch, now, undecodable, Runtime};
use crate::store::{RunPatch, StepWrite};
use crate::tools::ToolError;

pub(crate) use answer::final_result;
use answer::{awaiting, Next};
pub(crate) use calls::{invocation, plan, result_message};
pub(crate) use outcome::{Deadline, Outcome};

/// Drives the run `run_id` until it finishes, pauses or is cancelled, and
/// says which (see [`Outcome`]); arming timers or starting it again is the
/// caller's business.
pub(crate) async fn drive(rt: &Runtime, run_id: &str, cancel: CancellationToken) -> Result<Outcome> {
    let mut run = match rt.store.run_to_drive(run_id).await? {
        None => return Ok(Outcome::NotDriven),
        // A run recorded from OpenTelemetry spans is never driven: runlens did not run it.
        Some(Ok(run)) if run.source.is_some() => return Ok(Outcome::NotDriven),
        Some(Ok(run)) => run,
        Some(Err(problem)) => {
            // Never driven on guessed defaults: the run fails, with the reason.
            let failed = rt.fail_if_active(run_id, undecodable(&problem)).await;
            return Ok(if failed { Outcome::Ended(RunStatus::Failed) } else { Outcome::NotDriven });
        }
    };
    if cancel.is_cancelled() {
        if run.status.is_terminal() {
            return Ok(Outcome::NotDriven);
        }
        rt.set_status(&run, RunStatus::Cancelled, cancelled_patch()).await?;
        return Ok(Outcome::Ended(RunStatus::Cancelled));
    }
    match run.status {
        RunStatus::Pending => run = rt.set_status(&run, RunStatus::Running, RunPatch::default()).await?,
        RunStatus::Running => {} // resumed after a restart or a decision
        _ => return Ok(Outcome::NotDriven),
    }
    let mut run_loop = Loop::load(rt, run, cancel).await?;
    if run_loop.run.status == RunStatus::Running && run_loop.waiting.is_none() {
        run_loop.run().await?;
    }
    Ok(run_loop.outcome())
}

struct Loop<'a> {
    rt: &'a Runtime,
    run: Run,
    cancel: CancellationToken,
    /// The newest part of the transcript (see `transcript_tail`), then
    /// every message this driver adds; shared with each model request.
    messages: Vec<Arc<Message>>,
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
    /// The system prompt last recorded on a step (see `Loop::request`).
    recorded_prompt: Option<String>,
    /// Which tools a turn offers when the run has more than one turn may.
    offer: offer::Offer,
    step_count: u32,
    /// The `seq` the next transcript message gets: one after the store's
    /// last, whatever `messages` holds.
    next_seq: u64,
    usage: Usage,
    /// The run's call ids known to be taken (see `calls::unique_ids`).
    call_ids: calls::KnownIds,
    /// When the calls of a pause are to be rejected (see [`Outcome::Paused`]).
    deadlines: Vec<Deadline>,
    /// Set when the driver stops because agent calls wait for these child runs.
    waiting: Option<Vec<String>>,
    /// For a replay: the last step compared with the original's.
    replay_checked: Option<u32>,
}

impl<'a> Loop<'a> {
    /// Reads what was persisted. A step still open (interrupted by a crash,
    /// or resumed after its approvals were decided) is finished first (see
    /// `calls::resume`), and the run pauses again when it still waits for a
    /// decision.
    async fn load(rt: &'a Runtime, run: Run, cancel: CancellationToken) -> Result<Loop<'a>> {
        // Only the newest step can still be open: earlier ones are never read.
        let position = rt.store.position(&run.id).await?;
        let (last_index, last_seq, agent_turns) = (position.last_step, position.last_seq, position.agent_messages);
        let steps = match last_index {
            Some(i) => rt.store.steps_page(&run.id, i, 1).await?,
            None => Vec::new(),
        };
        let call_ids = calls::KnownIds::new(last_index.is_some());
        let messages: Vec<Arc<Message>> =
            context::transcript_tail(rt, &run, last_seq).await?.into_iter().map(Arc::new).collect();
        let base = messages.first().map_or(0, |m| m.seq);
        // Numbered after the last stored step, whatever the run's counter says.
        let step_count = last_index.map_or(0, |i| i + 1);
        let window = context::Window::new(&messages);
        let turns_since_person = context::turns_since_person(&messages);
        let settings = Arc::new(run.model_settings.clone());
        let mut this = Loop {
            rt,
            step_count,
            next_seq: last_seq.map_or(0, |s| s + 1),
            usage: run.usage,
            run,
            cancel,
            messages,
            window,
            turns_since_person,
            recorded: None,
            recorded_prompt: None,
            offer: offer::Offer::default(),
            settings,
            agent_turns: usize::try_from(agent_turns).unwrap_or(usize::MAX),
            base,
            call_ids,
            deadlines: Vec::new(),
            waiting: None,
            replay_checked: None,
        };
        let Some(mut last) = steps.into_iter().last() else { return Ok(this) };
        if last.status == StepStatus::Running {
            calls::resume(rt, &this.run, &mut last, &this.cancel).await;
            if awaiting(&last) {
                this.pause(last).await?;
                return Ok(this);
            }
            if !this.cancel.is_cancelled() && waiting_on(&last).next().is_some() {
                this.wait(last).await?;
                return Ok(this);
            }
            this.complete_step(last).await?;
        } else if let Some(link) = delegate::handoff_made(&this.run, &last).cloned() {
            // The step that made a handoff was saved, its switch was not.
            this.hand_off(&link).await?;
        }
        Ok(this)
    }

    /// Saves the step with its agent calls still running and stops the
    /// driver; the child runs' ends start it again (see `Engine::settle`).
    async fn wait(&mut self, step: Step) -> Result<()> {
        let children = waiting_on(&step).map(str::to_owned).collect();
        self.save(&step, Vec::new()).await?;
        self.waiting = Some(children);
        Ok(())
    }

    /// Switches the run to `link`'s agent, recorded as a `handoff` step
    /// written with the switch in one transaction.
    async fn hand_off(&mut self, link: &crate::model::AgentLink) -> Result<()> {
        let mut switch = delegate::switch_to(self.rt, &self.run, link).await?;
        switch.turns_before = u32::try_from(self.agent_turns).unwrap_or(u32::MAX);
        let from = match &self.run.current_agent {
            Some(id) => self.rt.store.agents().agent(id).await?.map_or_else(|| id.clone(), |a| a.spec.name),
            None => "the run's agent".to_owned(),
        };
        let index = self.step_count;
        self.step_count += 1;
        let step = delegate::handoff_step(&self.run, index, &from, link, &switch);
        let write = StepWrite {
            step: &step,
            messages: &[],
            run_usage: &self.usage,
            step_count: self.step_count,
            switch: Some(&switch),
        };
        self.rt.store.save_step(write).await?;
        switch.apply(&mut self.run);
        self.settings = Arc::new(self.run.model_settings.clone());
        self.saved(&step, Vec::new());
        Ok(())
    }

    /// Records the step with its calls awaiting approval and pauses the run;
    /// the driver then ends, with the calls' deadlines in its outcome. A
    /// decision resumes it (see `Approvals::approve`).
    async fn pause(&mut self, step: Step) -> Result<()> {
        self.save(&step, Vec::new()).await?;
        // Fixed before the status changes, so a timer armed on them counts
        // from before anyone could see the run paused.
        if let Some(secs) = self.run.approval.timeout_s {
            let after = Duration::from_secs(secs);
            self.deadlines = (step.tool_calls.iter())
                .filter(|c| c.status == ToolCallStatus::AwaitingApproval)
                .filter_map(|c| Deadline::after(c.id.clone(), after))
                .collect();
        }
        self.end(RunStatus::Paused, RunPatch::default()).await
    }

    /// What the driver came to: only called once the loop stopped, so the
    /// run has ended or is paused.
    fn outcome(self) -> Outcome {
        if let Some(children) = self.waiting {
            return Outcome::Waiting { children };
        }
        match self.run.status {
            RunStatus::Paused => Outcome::Paused { deadlines: self.deadlines },
            status => Outcome::Ended(status),
        }
    }

    /// Takes turns until the run finishes, pauses or is cancelled.
    async fn run(&mut self) -> Result<()> {
        loop {
            if self.replay_stops(self.step_count).await? {
                return Ok(());
            }
            // Read every turn: a handoff changes the model and the tools.
            let Some(model) = self.rt.models.get(&self.run.model) else {
                let reason = ModelError::NotConfigured(self.run.model.clone()).to_string();
                return self
                    .end(RunStatus::Failed, RunPatch { failure_reason: Some(reason), ..Default::default() })
                    .await;
            };
            let offered = self.offer.tools(self.rt, &self.run, &self.messages).await?;
            if self.cancel.is_cancelled() {
                return self.end(RunStatus::Cancelled, cancelled_patch()).await;
            }
            if self.turns_since_person >= self.run.max_turns {
                let summary =
                    format!("{MAX_TURNS_STOP} ({}) before the model gave a final answer.", self.run.max_turns);
                let patch = RunPatch { result: Some(Value::Null), summary: Some(summary), ..Default::default() };
                return self.end(RunStatus::Done, patch).await;
            }
            if let Some(reason) = budget::take_turn(self.rt, &self.run).await? {
                let patch = RunPatch { failure_reason: Some(reason), ..Default::default() };
                return self.end(RunStatus::Failed, patch).await;
            }
            let index = self.step_count;
            let started_at = now();
            self.rt.bus.publish(&self.run.id, EventKind::StepStarted { index });
            let (request, summary) = self.request(model.as_ref(), offered);
            let (bus, run_id) = (self.rt.bus.clone(), self.run.id.clone());
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
            let step = Step {
                id: Step::id_for(&self.run.id, index),
                run_id: self.run.id.clone(),
                index,
                kind: "model_turn".into(),
                status: StepStatus::Running,
                request: summary,
                response: StepResponse::default(),
                usage: Usage::default(),
                started_at,
                model_completed_at: Some(now()),
                completed_at: None,
                tool_calls: Vec::new(),
            };
            if let Next::Stop = self.answered(step, response).await? {
                return Ok(());
            }
        }
    }

    /// What turn `self.step_count` asks the model (with `offered` tools), and
    /// how its step records the request.
    fn request(&mut self, model: &dyn crate::llm::Model, offered: offer::Offered) -> (ModelRequest, StepRequest) {
        let tools = offered.tools;
        let system = context::system_prompt(self.run.system_prompt.as_deref(), self.run.result_schema.as_ref());
        let window = model.context_window(&self.run.model_settings);
        let budget = context::budget(window, system.as_deref(), &tools);
        let first = self.window.first_kept(&self.messages, budget);
        // The system prompt as sent, recorded when it differs from the
        // last one recorded (a handoff changes it), "" for none; so a
        // step's messages can be shown exactly as the model got them.
        let prompt = system.clone().unwrap_or_default();
        let new_prompt = (self.recorded_prompt.as_ref() != Some(&prompt)).then(|| {
            self.recorded_prompt = Some(prompt.clone());
            prompt
        });
        let request = ModelRequest {
            run_id: self.run.id.clone(),
            system_prompt: system,
            messages: self.messages[first..].to_vec(),
            tools: tools.clone(),
            settings: self.settings.clone(),
            result_schema: self.run.result_schema.clone(),
            turns_taken: self.agent_turns.saturating_sub(self.run.handoff_turns as usize),
        };
        // The sampling settings passed through to the provider, as sent.
        let settings: serde_json::Map<String, Value> = ["temperature", "max_tokens", "top_p", "seed"]
            .into_iter()
            .filter_map(|k| Some((k.to_owned(), request.settings.get(k).filter(|v| !v.is_null())?.clone())))
            .collect();
        let dropped = self.base + first as u64;
        let mut summary = StepRequest {
            messages: request.messages.len() as u64,
            dropped_messages: (dropped > 0).then_some(dropped),
            settings: (!settings.is_empty()).then_some(settings),
            selection: offered.selection,
            system_prompt: new_prompt,
            ..StepRequest::default()
        };
        // Model, window and tools rarely change: recorded on the first
        // step and whenever they differ (a selection's offered set
        // included), which keeps long traces small.
        let tool_names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
        let recorded = (self.run.model.clone(), window, tool_names);
        if self.recorded.as_ref() != Some(&recorded) {
            summary.model = Some(recorded.0.clone());
            summary.context_window = Some(recorded.1);
            summary.tools = Some(recorded.2.clone());
            self.recorded = Some(recorded);
        }
        (request, summary)
    }

    /// Records what the model answered at `step` (a failure fails the run;
    /// calls are planned), and says whether the loop goes on.
    async fn answered(
        &mut self,
        mut step: Step,
        response: std::result::Result<ModelResponse, ModelError>,
    ) -> Result<Next> {
        let index = step.index;
        let mut response = match response {
            Ok(r) => r,
            Err(e) => {
                step.status = StepStatus::Interrupted;
                step.response = StepResponse::Failed { error: e.to_string() };
                step.completed_at = step.model_completed_at;
                self.step_count += 1;
                let patch = RunPatch { failure_reason: Some(format!("model error: {e}")), ..Default::default() };
                self.finish(&step, Vec::new(), RunStatus::Failed, patch).await?;
                return Ok(Next::Stop);
            }
        };
        step.usage = response.usage;
        budget::add_tokens(self.rt, &self.run, &step.usage).await?;
        calls::unique_ids(self.rt, &self.run.id, &mut self.call_ids, index, &mut response.tool_calls).await?;
        step.tool_calls = calls::plan(self.rt, &self.run, index, &response, step.request.selection.as_ref());
        step.response = StepResponse::Answer(ModelAnswer {
            text: response.text.clone(),
            // The calls themselves are the step's tool calls (argument
            // text that was not valid JSON is kept there verbatim).
            tool_calls: response.tool_calls.len() as u64,
            finish_reason: response.finish_reason.clone(),
            ..ModelAnswer::default()
        });
        self.handle_answer(step, response, index).await
    }

    /// Appends each call's result to the transcript and marks the step done.
    async fn complete_step(&mut self, mut step: Step) -> Result<()> {
        // Reached with unfinished calls only when the run is being cancelled.
        for call in step.tool_calls.iter_mut().filter(|c| !c.status.is_finished()) {
            call.status = ToolCallStatus::Cancelled;
            call.error = Some(ToolError::cancelled().to_string());
            call.completed_at = Some(now());
        }
        let extra = results::shrink(self.rt, &self.run, &mut step).await?;
        self.usage.add(&extra);
        let messages = (step.tool_calls.iter().enumerate())
            .map(|(i, c)| self.message(i, Some(step.index), calls::result_message(c)))
            .collect();
        let cancelled = step.tool_calls.iter().any(|c| c.status == ToolCallStatus::Cancelled);
        step.status = if cancelled { StepStatus::Interrupted } else { StepStatus::Completed };
        step.completed_at = Some(now());
        self.save(&step, messages).await?;
        match delegate::handoff_made(&self.run, &step).cloned() {
            Some(link) if !cancelled => self.hand_off(&link).await,
            _ => Ok(()),
        }
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
}

/// The child runs a step's agent calls wait for.
fn waiting_on(step: &Step) -> impl Iterator<Item = &str> {
    (step.tool_calls.iter()).filter(|c| c.status == ToolCallStatus::Running).filter_map(|c| c.child_run_id.as_deref())
}
