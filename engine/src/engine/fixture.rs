//! The 10,000-step fixture: a long run made by the real loop with the
//! scripted built-in model at zero latency (`runlens gen-trace`, benches).
//!
//! Past [`LOOP_STEPS`] the loop is too slow to wait for (each turn's cost
//! grows with the transcript: 100,000 steps would take hours), so a longer
//! fixture is written directly, the way an import writes a run: the loop
//! makes a two-step run, and its steps and messages are the pattern for
//! every step of the long one (ids, indexes, texts, arguments, results and
//! times changed), stored in one transaction.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::error::{EngineError, Result};
use crate::model::{CreateRun, Run};

/// Longest trace the fixture makes.
pub const MAX_FIXTURE_STEPS: u32 = 100_000;
/// Longest trace the real loop makes; longer ones are written directly.
pub const LOOP_STEPS: u32 = 10_000;

impl crate::engine::Runs<'_> {
    /// Makes a run of `steps` model turns — each but the last says a few
    /// words and calls `calculator` with `"{i} + 1"`, the last answers — and
    /// waits until it is done. The run is tagged `fixture:trace`.
    ///
    /// `max_turns` and the script are set past the create-time limits on
    /// purpose (after the request was checked with the script's first
    /// turn): only the fixture may make a run this long.
    pub async fn generate_trace(self, steps: u32) -> Result<Run> {
        if !(1..=MAX_FIXTURE_STEPS).contains(&steps) {
            return Err(EngineError::Invalid(format!("steps must be 1-{MAX_FIXTURE_STEPS}")));
        }
        if steps > LOOP_STEPS {
            return self.write_trace(steps).await;
        }
        self.loop_trace(steps).await
    }

    /// A fixture of `steps` made by the real loop.
    async fn loop_trace(self, steps: u32) -> Result<Run> {
        let mut script: Vec<Value> = (0..steps - 1)
            .map(|i| {
                json!({
                    "text": format!("Step {i}: adding one to {i}."),
                    "tool_calls": [{"name": "calculator", "arguments": {"expression": format!("{i} + 1")}}],
                })
            })
            .collect();
        script.push(json!({"text": format!("Done after {steps} steps.")}));
        let req = CreateRun {
            name: Some(format!("Generated trace ({steps} steps)")),
            initial_prompt: format!("Count with the calculator, {steps} steps."),
            tools: Some(vec!["calculator".into()]),
            tags: BTreeMap::from([("fixture".to_owned(), "trace".to_owned())]),
            model: Some("builtin".into()),
            model_settings: Some(json!({ "script": script[..1] })),
            ..CreateRun::default()
        };
        let (mut run, messages) = crate::runtime::create::prepare(&self.rt, crate::model::DEFAULT_PROJECT, req, None)?;
        run.max_turns = steps;
        run.model_settings = json!({ "script": script });
        self.rt.store.insert_run_with_history(&run, &messages, &[]).await?;
        self.spawn(run.id.clone());
        // Poll rather than wake on every event: a long run publishes ~10 per step.
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let run = self.runs().get_run(&run.id).await?;
            if run.status.is_terminal() {
                self.traces().flush_events().await;
                return Ok(run);
            }
        }
    }
}

impl crate::engine::Runs<'_> {
    /// A fixture of `steps` (> 2) written directly after the pattern of a
    /// two-step run the loop makes (see the module docs).
    async fn write_trace(self, steps: u32) -> Result<Run> {
        use crate::model::{MessageBody, StepResponse};

        let pattern = self.loop_trace(2).await?;
        let (pattern_steps, pattern_messages) =
            tokio::try_join!(self.rt.store.steps(&pattern.id), self.rt.store.messages(&pattern.id))?;
        let (turn, last) = match pattern_steps.as_slice() {
            [turn, last] if turn.tool_calls.len() == 1 => (turn, last),
            _ => return Err(EngineError::Internal("the pattern run is not one call then an answer".into())),
        };
        let [prompt, asked, answered, done] = pattern_messages.as_slice() else {
            return Err(EngineError::Internal("the pattern run does not have four messages".into()));
        };
        let id = uuid::Uuid::now_v7().to_string();
        let start = pattern.started_at.unwrap_or(pattern.created_at);
        // One millisecond a step, as the loop at zero latency about takes.
        let at = |i: u32| start + chrono::Duration::milliseconds(i64::from(i));
        let mut run = pattern.clone();
        run.id = id.clone();
        run.name = format!("Generated trace ({steps} steps)");
        run.initial_prompt = format!("Count with the calculator, {steps} steps.");
        run.max_turns = steps;
        run.step_count = steps;
        run.model_settings = json!({ "script": [] });
        run.usage = crate::model::Usage::default();

        let mut all_steps = Vec::with_capacity(steps as usize);
        let mut messages = Vec::with_capacity(2 * steps as usize);
        let mut message = |seq: u64, step: Option<u32>, body: MessageBody, created_at| {
            let mut m = prompt.clone();
            (m.id, m.run_id, m.seq, m.step_index, m.body, m.created_at) =
                (uuid::Uuid::now_v7().to_string(), id.clone(), seq, step, body, created_at);
            messages.push(m);
        };
        message(0, None, MessageBody::Human { message: run.initial_prompt.clone() }, start);
        for i in 0..steps {
            let final_step = i + 1 == steps;
            let mut step = if final_step { last.clone() } else { turn.clone() };
            step.run_id = id.clone();
            step.index = i;
            (step.started_at, step.model_completed_at, step.completed_at) = (at(i), Some(at(i)), Some(at(i + 1)));
            let text =
                if final_step { format!("Done after {steps} steps.") } else { format!("Step {i}: adding one to {i}.") };
            if let StepResponse::Answer(answer) = &mut step.response {
                answer.text = Some(text.clone());
                if final_step {
                    answer.result = Some(json!(text));
                }
            }
            let seq = 1 + 2 * u64::from(i);
            if final_step {
                let MessageBody::Agent { result, invocations, .. } = done.body.clone() else {
                    return Err(EngineError::Internal("the pattern's last message is not the model's".into()));
                };
                let body = MessageBody::Agent { message: Some(text.clone()), result, invocations };
                message(seq, Some(i), body, at(i + 1));
                run.result = Some(json!(text));
            } else {
                let call = &mut step.tool_calls[0];
                call.id = format!("call_{i}_0");
                call.run_id = id.clone();
                call.step_index = i;
                call.arguments = json!({ "expression": format!("{i} + 1") });
                call.reasoning = Some(text.clone());
                call.result = Some(json!({ "expression": format!("{i} + 1"), "value": i + 1 }));
                (call.requested_at, call.started_at, call.completed_at) = (Some(at(i)), Some(at(i)), Some(at(i + 1)));
                let MessageBody::Agent { result, invocations, .. } = asked.body.clone() else {
                    return Err(EngineError::Internal("the pattern's second message is not the model's".into()));
                };
                let invocations = invocations
                    .into_iter()
                    .map(|mut inv| {
                        (inv.id, inv.input) = (call.id.clone(), call.arguments.clone());
                        inv.reasoning = Some(text.clone());
                        inv
                    })
                    .collect();
                message(seq, Some(i), MessageBody::Agent { message: Some(text), result, invocations }, at(i));
                let MessageBody::InvocationResult { tool_name, result_type, .. } = answered.body.clone() else {
                    return Err(EngineError::Internal("the pattern's third message is not a tool result".into()));
                };
                let body = MessageBody::InvocationResult {
                    id: call.id.clone(),
                    tool_name,
                    result_type,
                    result: call.result.clone().unwrap_or_default(),
                };
                message(seq + 1, Some(i), body, at(i + 1));
            }
            run.usage.add(&step.usage);
            all_steps.push(step);
        }
        (run.created_at, run.started_at, run.updated_at) = (start, Some(start), at(steps));
        run.finished_at = Some(at(steps));
        if !self.rt.store.insert_run_with_history(&run, &messages, &all_steps).await? {
            return Err(EngineError::Internal("a generated run id was taken".into()));
        }
        self.runs().get_run(&id).await
    }
}
