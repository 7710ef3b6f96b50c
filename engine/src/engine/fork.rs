//! Time travel: a fork from any step of a run (see `model::fork`).
//!
//! The fork is a new run holding the parent's history up to the end of the
//! chosen step (messages, steps, tool calls with their decisions, usage, and
//! copies of the large results it keeps), written in one transaction like a
//! fork made by editing a message; the parent is never modified. At the
//! step, the fork may replace:
//!
//! - **tool results**: the calls keep their arguments, their results (or
//!   errors) and the `invocation-result` messages the model sees are
//!   replaced, and the fork's first turn answers them;
//! - **the model's answer**: its text and tool calls are replaced, the new
//!   calls are planned as the loop plans a model's calls (checked against
//!   the tools, approvals as the run's policy says) and the step is left
//!   open, so the driver runs them (or pauses for their approval) when it
//!   loads the fork. An answer without tool calls is a final answer: the
//!   fork is `done` with it.
//!
//! A fork carries no grant (see the runner's gate): the decisions in the
//! history it keeps are a record of what happened in the parent, and every
//! call of the fork that needs approval — hand-written, scripted or the
//! model's — waits for a person's decision in the fork. An "always reject"
//! kept from the parent still rejects (it grants nothing).
//!
//! The model, its settings, the system prompt and the tools may change from
//! the fork's next turn.

use chrono::{DateTime, Utc};

use super::snapshot::rebase_blob_ref;
use super::Engine;
use crate::error::{EngineError, Result};
use crate::llm::{ModelResponse, RequestedCall};
use crate::model::{
    replaced_error, Actor, ForkFromStep, Message, MessageBody, ModelAnswer, Run, RunOutcome, RunStatus, Step,
    StepResponse, StepStatus, ToolCallStatus, Usage,
};
use crate::runtime::now;
use crate::store::{BlobCopy, HistoryInsert, HistoryWrite};

/// What the fork's answer at its step says it came from.
const EDITED: &str = "edited";

impl Engine {
    /// The history of `run` a fork from `req.from_step` keeps from, after
    /// checking that step can be forked from (completed, with the calls
    /// `req.tool_results` names).
    async fn history_to_fork(&self, run: &Run, req: &ForkFromStep) -> Result<(Vec<Message>, Vec<Step>)> {
        let (run_id, n) = (run.id.as_str(), req.from_step);
        let (messages, steps) = tokio::try_join!(self.rt.store.messages(run_id), self.rt.store.steps(run_id))?;
        let step = steps.iter().find(|s| s.index == n).ok_or_else(|| {
            EngineError::Conflict(format!("step {n} of run `{run_id}` is not stored yet; fork from an earlier one"))
        })?;
        if step.status != StepStatus::Completed {
            return Err(EngineError::Conflict(format!(
                "step {n} of run `{run_id}` is {}; a fork starts after a completed step",
                if step.status == StepStatus::Running { "still running" } else { "interrupted" }
            )));
        }
        if let Some(id) = req.tool_results.keys().find(|id| !step.tool_calls.iter().any(|c| &c.id == *id)) {
            let ids: Vec<&str> = step.tool_calls.iter().map(|c| c.id.as_str()).collect();
            return Err(EngineError::Invalid(if ids.is_empty() {
                format!("tool_results: step {n} made no tool calls (`{id}` is not one of them)")
            } else {
                format!("tool_results: step {n} has no call `{id}`; its calls are {}", ids.join(", "))
            }));
        }
        Ok((messages, steps))
    }

    /// The step's answer replaced by `out`: its calls planned anew (the
    /// step left open for the driver), or a final answer that ends the fork.
    fn replace_answer(
        &self,
        fork: &mut Run,
        step: &mut Step,
        history: &mut Vec<Message>,
        out: &crate::model::ModelOutput,
    ) -> Result<()> {
        let n = step.index;
        let agent_seq = history
            .iter()
            .find(|m| m.step_index == Some(n) && matches!(m.body, MessageBody::Agent { .. }))
            .map(|m| m.seq)
            .ok_or_else(|| {
                EngineError::Invalid(format!("model_output: step {n} has no model answer to replace ({})", step.kind))
            })?;
        history.retain(|m| m.seq <= agent_seq);
        let text = out.text.clone().filter(|t| !t.trim().is_empty());
        let response = ModelResponse {
            text: text.clone(),
            tool_calls: out
                .tool_calls
                .iter()
                .map(|c| RequestedCall {
                    id: format!("call_{}", &uuid::Uuid::now_v7().simple().to_string()[20..]),
                    name: c.name.clone(),
                    arguments: Ok(c.arguments.clone()),
                    raw_arguments: c.arguments.to_string(),
                    reasoning: None,
                })
                .collect(),
            usage: step.usage,
            finish_reason: Some(EDITED.into()),
        };
        // A person wrote these calls: any tool of the run, not only the ones the turn offered.
        step.tool_calls = crate::runner::plan(&self.rt, fork, n, &response, None);
        let final_answer = step.tool_calls.is_empty();
        let result = final_answer.then(|| crate::runner::final_result(text.as_deref()));
        step.response = StepResponse::Answer(ModelAnswer {
            text: text.clone(),
            tool_calls: step.tool_calls.len() as u64,
            finish_reason: Some(EDITED.into()),
            result: result.clone().filter(|r| !r.is_null()),
            ..ModelAnswer::default()
        });
        let agent = history.iter_mut().find(|m| m.seq == agent_seq).expect("the answer is kept");
        agent.body = MessageBody::Agent {
            message: text.clone(),
            result: result.clone().filter(|r| !r.is_null()),
            invocations: step.tool_calls.iter().map(|c| crate::runner::invocation(c, text.as_deref())).collect(),
        };
        if final_answer {
            step.status = StepStatus::Completed;
            let at = now();
            fork.status = RunStatus::Done;
            fork.result = result;
            fork.summary = Some(text.unwrap_or_else(|| "The model ended without an answer.".into()));
            fork.started_at = Some(at);
            fork.finished_at = Some(at);
        } else {
            // Open: the driver runs the calls, or pauses for their approval.
            step.status = StepStatus::Running;
            step.completed_at = None;
        }
        Ok(())
    }
}

/// The step's calls named in `req.tool_results` with their results (or
/// errors) replaced, and the messages the model sees for them.
fn replace_results(step: &mut Step, history: &mut [Message], req: &ForkFromStep) {
    for call in step.tool_calls.iter_mut() {
        let Some(v) = req.tool_results.get(&call.id) else { continue };
        match replaced_error(v) {
            Some(e) => {
                call.status = ToolCallStatus::Failed;
                call.error = Some(e.unwrap_or_default().to_owned());
                call.result = None;
            }
            None => {
                call.status = ToolCallStatus::Succeeded;
                call.result = Some(v.clone());
                call.error = None;
            }
        }
        let body = crate::runner::result_message(call);
        let shown = history.iter_mut().find(|m| {
            m.step_index == Some(step.index)
                && matches!(&m.body, MessageBody::InvocationResult { id, .. } if *id == call.id)
        });
        if let Some(m) = shown {
            m.body = body;
        }
    }
}

/// The tools a kept "always reject" decision rejects for the rest of the
/// fork. (A kept "always approve" grants nothing: see the module docs.)
pub(super) fn always_rejected(steps: &[Step]) -> Vec<String> {
    let mut reject = Vec::new();
    for (call, d) in steps.iter().flat_map(|s| &s.tool_calls).filter_map(|c| c.approval.as_ref().map(|d| (c, d))) {
        if d.always && d.decision == crate::model::Decision::Rejected && !reject.contains(&call.tool_name) {
            reject.push(call.tool_name.clone());
        }
    }
    reject
}

/// What a new run keeps of run `parent`'s history: its steps and messages
/// renamed after the new run, and the blobs of the large results they refer
/// to, to copy under the new run's name.
pub(super) struct Kept {
    pub steps: Vec<Step>,
    pub history: Vec<Message>,
    pub copies: Vec<BlobCopy>,
}

/// `steps` and `messages` of run `parent`, as run `id`'s (see [`Kept`]).
pub(super) fn keep(
    parent: &str,
    id: &str,
    steps: impl IntoIterator<Item = Step>,
    messages: impl IntoIterator<Item = Message>,
) -> Kept {
    let mut copies: Vec<BlobCopy> = Vec::new();
    let mut keep_blob = |result: Option<&mut serde_json::Value>| {
        if let Some((from, to)) = rebase_blob_ref(result, parent, id) {
            let copy = BlobCopy { from, to };
            if !copies.contains(&copy) {
                copies.push(copy);
            }
        }
    };
    let mut steps: Vec<Step> = steps.into_iter().map(|s| rehome_step(s, id)).collect();
    for c in steps.iter_mut().flat_map(|s| &mut s.tool_calls) {
        keep_blob(c.result.as_mut());
    }
    let mut history: Vec<Message> = messages.into_iter().map(|m| rehome_message(m, id)).collect();
    for m in &mut history {
        if let MessageBody::InvocationResult { result, .. } = &mut m.body {
            keep_blob(Some(result));
        }
    }
    Kept { steps, history, copies }
}

/// A new run `id` made from `run` (a fork or a replay): its configuration,
/// with nothing run yet, no "always" decisions, and `run` as its parent. It
/// is the root of its own tree of agent calls, in no comparison group and
/// no experiment.
pub(super) fn derived_run(run: &Run, id: &str, name: String, at: DateTime<Utc>, by: Option<&Actor>) -> Run {
    Run {
        id: id.to_owned(),
        name,
        status: RunStatus::Pending,
        always_approve: Vec::new(),
        always_reject: Vec::new(),
        interruptions: Vec::new(),
        parent_run_id: Some(run.id.clone()),
        forked_from_message_id: None,
        forked_from_step: None,
        replay: None,
        result: None,
        summary: None,
        failure_reason: None,
        usage: Usage::default(),
        step_count: 0,
        created_at: at,
        updated_at: at,
        started_at: None,
        finished_at: None,
        idle_ms: 0,
        created_by: by.cloned().or(run.created_by.clone()),
        parent_call_id: None,
        root_run_id: id.to_owned(),
        depth: 0,
        child_count: 0,
        output: None,
        outcome: Default::default(),
        source: None,
        group_id: None,
        // Not a run of the experiment (its item ran once); it keeps how
        // tools answer (`tool_answers`), which grants nothing.
        experiment: None,
        ..run.clone()
    }
}

impl Engine {
    /// Stores `fork` with what it `kept` of its parent, in one transaction
    /// (its outcome then counts the calls it kept).
    pub(super) async fn insert_fork(&self, fork: &mut Run, kept: &Kept) -> Result<()> {
        fork.outcome = RunOutcome::of_steps(fork, &kept.steps);
        let write =
            HistoryWrite { run: fork, messages: &kept.history, steps: &kept.steps, blobs: &[], copies: &kept.copies };
        match self.rt.store.insert_run_with_blobs(write).await? {
            HistoryInsert::Inserted => Ok(()),
            other => Err(EngineError::Conflict(format!("the fork `{}` could not be created: {other:?}", fork.id))),
        }
    }
}

/// A message of the parent, as the fork's.
fn rehome_message(mut m: Message, run_id: &str) -> Message {
    m.id = format!("{run_id}-m{}", m.seq);
    m.run_id = run_id.to_owned();
    m
}

/// A step of the parent (with its calls), as the fork's.
fn rehome_step(mut s: Step, run_id: &str) -> Step {
    s.run_id = run_id.to_owned();
    s.id = Step::id_for(run_id, s.index);
    for c in &mut s.tool_calls {
        c.run_id = run_id.to_owned();
    }
    s
}

impl crate::engine::Conversation<'_> {
    /// Forks run `run_id` after its step `req.from_step`, changed as `req`
    /// says (see the module docs); returns the new run, which starts at
    /// once unless it is already `done`.
    pub async fn fork_from_step(self, run_id: &str, req: ForkFromStep, by: Option<&Actor>) -> Result<Run> {
        req.check_bounds().map_err(EngineError::Invalid)?;
        let run = self.runs().get_run(run_id).await?;
        crate::engine::Engine::refuse_read_only(&run, "forked")?;
        let n = req.from_step;
        if n >= run.step_count {
            return Err(EngineError::Invalid(match run.step_count {
                0 => format!("from_step: run `{run_id}` has no steps yet"),
                c => format!("from_step: run `{run_id}` has steps 0 to {}, not {n}", c - 1),
            }));
        }
        let (messages, steps) = self.history_to_fork(&run, &req).await?;
        // The configuration from the next turn, checked as when creating a run.
        let overrides = self.check_overrides(&run.project, None, req.tools.clone(), req.model.clone())?;
        let model_settings = req.model_settings.clone().unwrap_or_else(|| run.model_settings.clone());
        let model = crate::runtime::create::check_model(
            &self.rt,
            Some(overrides.model.as_deref().unwrap_or(&run.model)),
            &model_settings,
        )?;

        let id = uuid::Uuid::now_v7().to_string();
        // The history ends with the step's last message (a message written
        // after it, such as a follow-up, belongs to what came next).
        let cut = messages
            .iter()
            .filter(|m| m.step_index.is_some_and(|i| i <= n))
            .map(|m| m.seq)
            .max()
            .unwrap_or_else(|| messages.first().map_or(0, |m| m.seq));
        let mut kept = keep(
            run_id,
            &id,
            steps.into_iter().filter(|s| s.index <= n),
            messages.into_iter().filter(|m| m.seq <= cut),
        );
        let always_reject = always_rejected(&kept.steps);
        let at = now();
        let mut fork = Run {
            model,
            model_settings,
            system_prompt: match req.system_prompt.clone() {
                Some(p) if p.trim().is_empty() => None,
                Some(p) => Some(p),
                None => run.system_prompt.clone(),
            },
            tools: overrides.tools.unwrap_or_else(|| run.tools.clone()),
            always_reject,
            forked_from_step: Some(n),
            step_count: n + 1,
            ..derived_run(
                &run,
                &id,
                req.name.clone().unwrap_or_else(|| format!("{} · fork from step {n}", run.name)),
                at,
                by,
            )
        };
        let last = kept.steps.last_mut().expect("step n is kept");
        if let Some(out) = &req.model_output {
            self.replace_answer(&mut fork, last, &mut kept.history, out)?;
        } else {
            replace_results(last, &mut kept.history, &req);
        }
        kept.steps.iter().for_each(|s| fork.usage.add(&s.usage));
        self.insert_fork(&mut fork, &kept).await?;
        if fork.status == RunStatus::Pending {
            self.spawn(id);
        }
        Ok(fork)
    }
}
