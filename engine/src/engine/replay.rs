//! Replays: a finished run's configuration run again from its first
//! message, as a new run that records what it replays (`Run::replay`).
//!
//! - **recorded**: the built-in model plays the original's recorded
//!   answers (its text and tool calls, turn by turn; no provider is
//!   called), while the tools run for real. The loop compares each step
//!   with the original's and stops the replay `done` at the first one that
//!   differs (a result, an error, a rejection), recording where and how
//!   (see `runner::replay`). A replay that matches to the end is identical.
//! - **live**: the original's model is called again; the first step that
//!   differs is recorded and the replay goes on.
//!
//! A replay starts with no "always" decisions, so every call that needs
//! approval waits for one, whatever the original's approvers said.

use serde_json::{json, Value};

use crate::error::{EngineError, Result};
use crate::model::limits::MAX_REPLAY_TURNS;
use crate::model::{Actor, Message, MessageBody, Replay, ReplayMode, ReplayRequest, Run, RunOutcome, Step};
use crate::runtime::now;

/// The model that plays a recording.
const PLAYER: &str = "builtin";

/// The original's answers as the built-in model's script, up to its first
/// final answer (what its first message led to).
fn recording(run_id: &str, steps: &[Step]) -> Result<Vec<Value>> {
    let mut turns = Vec::new();
    for step in steps {
        if step.kind != "model_turn" {
            return Err(EngineError::Invalid(format!(
                "run `{run_id}` changed agents at step {} ({}); replay it live instead",
                step.index, step.kind
            )));
        }
        let turn = match (step.response.answer(), &step.response) {
            (Some(answer), _) => {
                let calls: Vec<Value> =
                    step.tool_calls.iter().map(|c| json!({"name": c.tool_name, "arguments": c.arguments})).collect();
                let mut turn = json!({ "text": answer.text });
                if !calls.is_empty() {
                    turn["tool_calls"] = Value::Array(calls);
                }
                if answer.text.is_none() && step.tool_calls.is_empty() {
                    turn["text"] = json!("");
                }
                turn
            }
            (None, crate::model::StepResponse::Failed { error }) => json!({ "error": error }),
            (None, _) => json!({ "text": "" }),
        };
        let done = step.tool_calls.is_empty();
        turns.push(turn);
        if done {
            break;
        }
    }
    if turns.is_empty() {
        return Err(EngineError::Invalid(format!("run `{run_id}` has no steps to replay")));
    }
    if turns.len() > MAX_REPLAY_TURNS {
        return Err(EngineError::Invalid(format!(
            "run `{run_id}` has {} steps before its first final answer; a recorded replay plays at most {MAX_REPLAY_TURNS}",
            turns.len()
        )));
    }
    Ok(turns)
}

impl crate::engine::Runs<'_> {
    /// Starts a replay of run `run_id` (see the module docs).
    pub async fn replay_run(self, run_id: &str, req: ReplayRequest, by: Option<&Actor>) -> Result<Run> {
        let run = self.runs().get_run(run_id).await?;
        crate::engine::Engine::refuse_read_only(&run, "replayed")?;
        if !run.status.is_terminal() {
            return Err(EngineError::Conflict(format!(
                "run `{run_id}` is {}; a replay starts from a finished run",
                run.status
            )));
        }
        let first = self.rt.store.messages_page(run_id, 0, 1).await?.into_iter().next();
        let Some(Message { body: MessageBody::Human { message }, .. }) = first else {
            return Err(EngineError::Invalid(format!("run `{run_id}` has no first message to replay from")));
        };
        let (model, model_settings) = match req.mode {
            ReplayMode::Live => (run.model.clone(), run.model_settings.clone()),
            ReplayMode::Recorded => {
                let steps = self.rt.store.steps(run_id).await?;
                (PLAYER.to_owned(), json!({ "script": recording(run_id, &steps)? }))
            }
        };
        if self.rt.models.get(&model).is_none() {
            return Err(EngineError::Invalid(format!("the model `{model}` of run `{run_id}` is not configured here")));
        }
        let id = uuid::Uuid::now_v7().to_string();
        let at = now();
        let mut replay = Run {
            model,
            model_settings,
            initial_prompt: message.clone(),
            replay: Some(Replay { of: run.id.clone(), mode: req.mode, diverged_at: None, divergence: None }),
            // From its first message: no agent has taken over yet.
            current_agent: None,
            current_agent_version: None,
            handoff_turns: 0,
            ..super::fork::derived_run(&run, &id, format!("{} · replay ({})", run.name, req.mode.as_str()), at, by)
        };
        let first = Message {
            id: format!("{id}-m0"),
            run_id: id.clone(),
            seq: 0,
            step_index: None,
            created_at: at,
            body: MessageBody::Human { message },
        };
        replay.outcome = RunOutcome::of(&replay, 0, 0);
        if !self.rt.store.insert_run(&replay, &first).await? {
            return Err(EngineError::Conflict(format!("the replay `{id}` could not be created")));
        }
        self.spawn(id);
        Ok(replay)
    }
}
