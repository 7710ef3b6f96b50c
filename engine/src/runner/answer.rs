//! What the loop does with a model's answer: a final answer ends the run
//! (after at most one schema repair); tool calls run, then the step either
//! completes or pauses for approvals.

use serde_json::Value;

use super::{calls, context, Loop};
use crate::error::Result;
use crate::events::EventKind;
use crate::llm::ModelResponse;
use crate::model::{MessageBody, RunStatus, Step, StepStatus, ToolCallStatus};
use crate::store::RunPatch;

/// Whether the loop takes another turn.
pub(super) enum Next {
    Continue,
    Stop,
}

impl Loop<'_> {
    /// Records the answer of turn `index` (see the module docs).
    pub(super) async fn handle_answer(&mut self, mut step: Step, response: ModelResponse, index: u32) -> Result<Next> {
        let final_answer = step.tool_calls.is_empty();
        let checked = match (&self.run.result_schema, final_answer) {
            (_, false) => None,
            (None, true) => Some(Ok(final_result(response.text.as_deref()))),
            (Some(schema), true) => Some(context::check_result(schema, response.text.as_deref())),
        };
        let result = match &checked {
            Some(Ok(v)) => Some(v.clone()),
            _ => None,
        };
        let invocations = step.tool_calls.iter().map(|c| calls::invocation(c, response.text.as_deref())).collect();
        let agent = self.message(
            0,
            Some(index),
            MessageBody::Agent {
                message: response.text.clone(),
                result: result.clone().filter(|r| !r.is_null()),
                invocations,
            },
        );
        if final_answer {
            step.status = StepStatus::Completed;
            step.completed_at = step.model_completed_at;
            if let (Some(r), Some(answer)) = (&result, step.response.answer_mut()) {
                answer.result = Some(r.clone());
            }
        }
        self.usage.add(&response.usage);
        self.step_count += 1;
        let text = response.text.unwrap_or_default();
        match checked {
            None => {}
            Some(Ok(result)) => {
                let summary = if text.is_empty() { "The model ended without an answer.".into() } else { text };
                let patch = RunPatch { result: Some(result), summary: Some(summary), ..Default::default() };
                self.finish_with(&step, vec![agent], RunStatus::Done, patch, true).await?;
                return Ok(Next::Stop);
            }
            Some(Err(problem)) if !self.repair_requested() => {
                set_schema_error(&mut step, &problem);
                let repair = self.message(1, None, MessageBody::Human { message: context::repair_text(&problem) });
                self.save(&step, vec![agent, repair]).await?;
                return Ok(Next::Continue);
            }
            Some(Err(problem)) => {
                set_schema_error(&mut step, &problem);
                let summary =
                    format!("{text}\n\nThe final answer did not match result_schema after one repair: {problem}");
                let patch = RunPatch { result: Some(Value::Null), summary: Some(summary), ..Default::default() };
                self.finish(&step, vec![agent], RunStatus::Done, patch).await?;
                return Ok(Next::Stop);
            }
        }
        self.save(&step, vec![agent]).await?;
        self.rt.bus.publish(&self.run.id, EventKind::Usage { usage: self.usage });
        calls::execute(self.rt, &self.run, &mut step, &self.cancel).await;
        if awaiting(&step) && !self.cancel.is_cancelled() {
            self.pause(step).await?;
            return Ok(Next::Stop);
        }
        if super::waiting_on(&step).next().is_some() && !self.cancel.is_cancelled() {
            self.wait(step).await?;
            return Ok(Next::Stop);
        }
        self.complete_step(step).await?;
        Ok(Next::Continue)
    }
}

/// Records on the step why its final answer did not match the result schema.
fn set_schema_error(step: &mut Step, problem: &str) {
    if let Some(answer) = step.response.answer_mut() {
        answer.schema_error = Some(problem.to_owned());
    }
}

/// Whether any call of the step waits for a decision.
pub(super) fn awaiting(step: &Step) -> bool {
    step.tool_calls.iter().any(|c| c.status == ToolCallStatus::AwaitingApproval)
}

/// A final answer as a result: JSON when the text is a JSON object or array,
/// otherwise the text itself; no text is a null result.
pub(crate) fn final_result(text: Option<&str>) -> Value {
    match text.map(str::trim) {
        None | Some("") => Value::Null,
        Some(t) => match serde_json::from_str::<Value>(t) {
            Ok(v @ (Value::Object(_) | Value::Array(_))) => v,
            _ => Value::String(t.to_owned()),
        },
    }
}
