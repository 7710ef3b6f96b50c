//! Items made from runs: the conversation of a turn (a one-message run's
//! prompt, else the transcript up to the person's message that started the
//! turn), what the run answered then as the expected value, and the tool
//! results of the steps up to it, kept for replay.

use serde_json::Value;

use super::{short, Datasets};
use crate::error::{EngineError, Result};
use crate::model::limits::{self, MAX_INPUT_ITEMS, MAX_INPUT_ITEMS_BYTES};
use crate::model::{
    Actor, DatasetInput, DatasetItem, Message, MessageBody, NewDatasetItem, RecordedResult, Run, RunOutput,
    RunToDataset, Step, ToolCallStatus,
};
use crate::runner::REPAIR_PREFIX;

fn run_not_found(id: &str) -> EngineError {
    EngineError::NotFound(format!("run `{}`", short(id)))
}

/// Whether `m` is a person's message (not the runner's schema repair).
fn is_person(m: &Message) -> bool {
    matches!(&m.body, MessageBody::Human { message } if !message.starts_with(REPAIR_PREFIX))
}

/// What a run ended with, as an item's expected value.
fn output_value(run: &Run) -> Option<Value> {
    match run.output_union()? {
        RunOutput::Structured { value } => Some(value),
        RunOutput::LastMessage { message, value } => message.map(Value::String).or(value),
        RunOutput::Error { .. } => None,
    }
}

/// The answer an agent message gives, as an item's expected value, as the
/// run's output would give it: its result for a run with a result schema,
/// else its text.
fn answer_value(body: &MessageBody, structured: bool) -> Option<Value> {
    let MessageBody::Agent { message, result, .. } = body else { return None };
    let text = message.as_ref().filter(|m| !m.trim().is_empty()).map(|m| Value::String(m.clone()));
    let result = result.clone().filter(|v| !v.is_null());
    if structured {
        result.or(text)
    } else {
        text.or(result)
    }
}

impl Datasets<'_> {
    /// Makes an item of dataset `req.dataset_id` from a turn of run `run_id`
    /// (both of `project`): its input is the run's conversation up to the
    /// person's message that started step `req.up_to_step` (default: the
    /// last step) — the prompt of a one-message run, else the conversation —
    /// its expected value `req.expected`, or what the run answered that turn
    /// (its output for the last turn), its recorded results the tool results
    /// of the steps up to that one. Ingested runs too, when they recorded a
    /// person's message. `Conflict` for a run that has not ended or whose
    /// turn cannot be kept.
    pub async fn add_run(self, project: &str, run_id: &str, req: RunToDataset, by: &Actor) -> Result<DatasetItem> {
        let run = match self.rt.store.get_run(run_id).await? {
            Some(run) if run.project == project => run,
            _ => return Err(run_not_found(run_id)),
        };
        let dataset = self.get(project, &req.dataset_id).await?;
        if let Some(problem) = req.problem() {
            return Err(EngineError::Invalid(problem));
        }
        if !run.status.is_terminal() {
            return Err(EngineError::Conflict(format!(
                "run `{run_id}` is {}; it can be added to a dataset once it has ended",
                run.status
            )));
        }
        let (messages, steps) = tokio::try_join!(self.rt.store.messages(run_id), self.rt.store.steps(run_id))?;
        let step = match req.up_to_step {
            Some(n) if !steps.iter().any(|s| s.index == n) => {
                return Err(EngineError::Invalid(match steps.len() {
                    0 => format!("up_to_step: run `{run_id}` has no steps"),
                    len => format!("up_to_step: run `{run_id}` has {len} steps (0-{})", len - 1),
                }));
            }
            Some(n) => Some(n),
            None => steps.last().map(|s| s.index),
        };
        let turn = Turn::of(&run, &messages, step)?;
        let input = turn.input(&run)?;
        let given = req.expected.is_some();
        let expected = match req.expected {
            Some(v) => Some(v).filter(|v| !v.is_null()),
            None => turn.answer(&run),
        };
        let new = NewDatasetItem {
            input,
            expected,
            metadata: None,
            tags: Vec::new(),
            recorded_results: recorded(&steps, step),
        };
        if let Some(problem) = new.problem() {
            return Err(match problem.split_once(": ") {
                Some(("recorded_results", _)) => EngineError::Conflict(format!(
                    "run `{run_id}` recorded more tool results up to step {} than an item keeps ({problem}): choose \
                     an earlier up_to_step",
                    step.unwrap_or(0)
                )),
                Some(("expected", _)) if !given => EngineError::Conflict(format!(
                    "run `{run_id}`'s answer is too large to expect ({problem}): give `expected`"
                )),
                _ => EngineError::Invalid(problem),
            });
        }
        if let Some(problem) = self.input_problem(project, &new.input) {
            return Err(EngineError::Conflict(format!(
                "run `{run_id}`'s conversation cannot be replayed as an item: {problem}"
            )));
        }
        let mut items = Self::new_items(&dataset.id, vec![new], Some(run_id));
        let added = self.keep(project, &dataset, items.clone(), &format!("item from run {run_id}"), by).await?;
        let mut item = items.remove(0);
        item.version_added = added.dataset.version;
        Ok(item)
    }
}

/// The turn of a run an item is made of: the conversation up to the
/// person's message that started it.
struct Turn<'m> {
    /// The transcript up to and including that message.
    conversation: &'m [Message],
    /// The transcript after it.
    rest: &'m [Message],
}

impl<'m> Turn<'m> {
    /// The turn of `run` that step `step` (`None`: no step) belongs to.
    fn of(run: &Run, messages: &'m [Message], step: Option<u32>) -> Result<Turn<'m>> {
        let not_captured = crate::otel::ingest::assemble::PROMPT_NOT_CAPTURED;
        // The step's first message; the turn's person message is the last one before it.
        let boundary =
            step.and_then(|n| messages.iter().filter(|m| m.step_index.is_some_and(|s| s >= n)).map(|m| m.seq).min());
        let person = messages
            .iter()
            .rposition(|m| is_person(m) && boundary.is_none_or(|b| m.seq < b))
            .filter(|&i| !matches!(&messages[i].body, MessageBody::Human { message } if message == not_captured));
        let Some(i) = person else {
            return Err(EngineError::Conflict(match &run.source {
                Some(_) => format!(
                    "run `{}` recorded no person's message before that step (its spans carry no message contents), \
                     so it has no input to make an item of",
                    run.id
                ),
                None => format!("run `{}` has no person's message before that step to make an item of", run.id),
            }));
        };
        let (conversation, rest) = messages.split_at(i + 1);
        Ok(Turn { conversation, rest })
    }

    /// The item's input: the run's prompt (and structured input) when the
    /// turn is its first message alone, else the conversation.
    fn input(&self, run: &Run) -> Result<DatasetInput> {
        let over = |what: String| {
            EngineError::Conflict(format!(
                "run `{}`'s conversation up to that step {what}; an item holds at most {MAX_INPUT_ITEMS} messages \
                 and {} KiB: choose an earlier up_to_step",
                run.id,
                MAX_INPUT_ITEMS_BYTES / 1024
            ))
        };
        if let [Message { body: MessageBody::Human { message }, .. }] = self.conversation {
            let structured = run.input.as_ref().filter(|v| v.is_object());
            return Ok(match structured {
                // The first message as a run made it: its prompt with the input merged in.
                Some(input) if *message != run.initial_prompt && message.starts_with(&run.initial_prompt) => {
                    DatasetInput {
                        prompt: Some(run.initial_prompt.clone()),
                        input: Some(input.clone()),
                        ..Default::default()
                    }
                }
                _ => DatasetInput::prompt(message.clone()),
            });
        }
        if self.conversation.len() > MAX_INPUT_ITEMS {
            return Err(over(format!("has {} messages", self.conversation.len())));
        }
        let items: Vec<MessageBody> = self.conversation.iter().map(|m| m.body.clone()).collect();
        let bytes: usize = items.iter().map(|i| serde_json::to_value(i).map_or(0, |v| limits::json_size(&v))).sum();
        if bytes > MAX_INPUT_ITEMS_BYTES {
            return Err(over(format!("is {bytes} bytes of JSON")));
        }
        Ok(DatasetInput::conversation(items))
    }

    /// What the run answered this turn: its output for its last turn, else
    /// the last answer before the next person's message.
    fn answer(&self, run: &Run) -> Option<Value> {
        match self.rest.iter().position(is_person) {
            None => output_value(run),
            Some(next) => {
                let structured = run.result_schema.is_some();
                self.rest[..next].iter().rev().find_map(|m| answer_value(&m.body, structured))
            }
        }
    }
}

/// The tool results of `steps` up to step `step`, in order: each call that
/// answered, with its tool and arguments.
fn recorded(steps: &[Step], step: Option<u32>) -> Vec<RecordedResult> {
    let Some(last) = step else { return Vec::new() };
    steps
        .iter()
        .filter(|s| s.index <= last)
        .flat_map(|s| &s.tool_calls)
        .filter(|c| c.status == ToolCallStatus::Succeeded)
        .filter_map(|c| {
            let result = c.result.clone()?;
            Some(RecordedResult { tool: c.tool_name.clone(), arguments: c.arguments.clone(), result })
        })
        .collect()
}
