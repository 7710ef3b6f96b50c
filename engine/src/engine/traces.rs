//! Reading runs at scale: the event stream with replay, pages of steps,
//! single tool calls, and the price table with costs.
//!
//! These are the engine calls behind `/api/runs/{id}/events`,
//! `/api/runs/{id}/steps`, `/api/runs/{id}/tool-calls/{call_id}` and
//! `/api/prices`; server functions of the UI can call them directly.

use crate::cost::{ModelPrice, PriceInput, Pricing};
use crate::error::{EngineError, Result};
use crate::events::{RunEvents, StreamEnd};
use crate::model::{Message, ModelCall, Run, StepOutline, ToolCall};
use crate::paging::{StepsPage, MAX_STEP_PAGE};
use crate::store::RunHead;

/// A page read with one message more than `limit`: the extra one only says
/// that more follow, and where.
fn split_page(mut page: Vec<Message>, limit: u32) -> (Vec<Message>, Option<u64>) {
    if page.len() <= limit as usize {
        return (page, None);
    }
    page.truncate(limit as usize);
    let next_from = page.last().map(|m| m.seq + 1);
    (page, next_from)
}

impl Traces<'_> {
    /// Run `id`'s events with `seq > after`, then live ones; the stream ends
    /// after `run.finished` (see [`RunEvents`]). `NotFound` for an unknown run.
    pub async fn run_events(self, id: &str, after: u64) -> Result<RunEvents> {
        let run = self.runs().run_head(id).await?;
        let events = self.rt.bus.run_events(id, after, run.status.is_terminal()).await;
        // Opening only reads the database: a failure there is internal.
        events.map_err(|e: StreamEnd| EngineError::Store(sqlx::Error::Protocol(e.to_string())))
    }

    /// The `seq` of run `id`'s latest event (0 when none). A page reads it
    /// before reading the run's state, then streams with `?after=` it: events
    /// in between are applied twice at worst, which is harmless because every
    /// event but `message.delta` carries absolute state (skip deltas of a
    /// step already completed).
    pub async fn last_event_seq(self, id: &str) -> Result<u64> {
        self.runs().run_head(id).await?;
        if let Some(seq) = self.rt.bus.last_seq(id) {
            return Ok(seq);
        }
        Ok(self.rt.store.last_event(id).await?.map_or(0, |(seq, _)| seq))
    }

    /// Waits until every event published so far is in the database
    /// (before a shutdown, or in tests that reopen the database).
    pub async fn flush_events(self) {
        self.rt.bus.flush().await;
    }

    /// `Err(why)` while the event log cannot be written (see `EventBus::health`).
    pub fn events_health(self) -> std::result::Result<(), String> {
        self.rt.bus.health()
    }

    /// Steps `from..from + limit` of run `id` (limit clamped to 1..=10,000),
    /// with `next_from` when more follow.
    pub async fn steps_page(self, id: &str, from: u32, limit: u32) -> Result<StepsPage> {
        let run = self.runs().run_head(id).await?;
        let limit = limit.clamp(1, MAX_STEP_PAGE);
        let steps = self.rt.store.steps_page(id, from, limit).await?;
        let full = steps.len() as u32 == limit;
        let next_from = steps.last().map(|s| s.index + 1).filter(|n| full && *n < run.step_count);
        Ok(StepsPage { steps, next_from })
    }

    /// Every step of run `id` without payloads: what a step tree, timeline
    /// or token chart of a long run needs (see [`StepOutline`]); with the
    /// run's head, read to check the run exists, whose model prices the
    /// steps that recorded none.
    pub async fn step_outline(self, id: &str) -> Result<(RunHead, Vec<StepOutline>)> {
        let head = self.runs().run_head(id).await?;
        Ok((head, self.rt.store.step_outline(id).await?))
    }

    /// Up to `limit` messages of run `id` with `seq >= from` (limit clamped
    /// to 1..=10,000), with the `seq` to ask for next when more follow.
    pub async fn messages_page(self, id: &str, from: u64, limit: u32) -> Result<(Vec<Message>, Option<u64>)> {
        self.runs().run_head(id).await?;
        let limit = limit.clamp(1, MAX_STEP_PAGE);
        let page = self.rt.store.messages_page(id, from, limit.saturating_add(1)).await?;
        Ok(split_page(page, limit))
    }

    /// The last `n` messages of run `id` in order, and how many it has.
    pub async fn messages_tail(self, id: &str, n: u32) -> Result<(Vec<Message>, u64)> {
        self.runs().run_head(id).await?;
        self.rt.store.messages_tail(id, n).await
    }

    /// Step `index`'s model call in full (see [`ModelCall`]): the messages
    /// as sent, the tools offered, and the provider's request and response
    /// bodies, built by the model's own adapter from what the run recorded.
    /// At most the latest `max_messages` of the messages sent are included
    /// (`omitted_messages` counts the rest; the transcript has them all).
    /// `NotFound` for an unknown run or step, `Invalid` for a step that
    /// called no model (a handoff).
    pub async fn model_call(self, id: &str, index: u32, max_messages: u32) -> Result<ModelCall> {
        let run = self.runs().get_run(id).await?;
        let step = self.rt.store.steps_page(id, index, 1).await?.into_iter().next().filter(|s| s.index == index);
        let step = step.ok_or_else(|| EngineError::NotFound(format!("step {index} of run `{id}`")))?;
        if step.kind != "model_turn" {
            return Err(EngineError::Invalid(format!("step {index} is a `{}` step: it called no model", step.kind)));
        }
        let recorded = self.rt.store.recorded_requests(id, index).await?;
        let model = recorded.model.and_then(|r| r.model).unwrap_or_else(|| run.model.clone());
        let tool_names = recorded.tools.and_then(|r| r.tools).unwrap_or_default();
        // Steps recorded before steps kept their prompt: the run's own is
        // the one sent unless an agent handed off since (every handoff
        // follows a model turn, so `handoff_turns` is 0 only without one).
        let (system_prompt, system_prompt_known) = match recorded.system_prompt.and_then(|r| r.system_prompt) {
            Some(prompt) => (Some(prompt).filter(|p| !p.is_empty()), true),
            None if run.handoff_turns == 0 => {
                (crate::runner::system_prompt(run.system_prompt.as_deref(), run.result_schema.as_ref()), true)
            }
            None => (None, false),
        };
        let dropped = step.request.dropped_messages.unwrap_or(0);
        let sent = step.request.messages;
        let included = sent.min(u64::from(max_messages.clamp(1, MAX_STEP_PAGE)));
        let first = dropped + (sent - included);
        let messages =
            if included == 0 { Vec::new() } else { self.rt.store.messages_page(id, first, included as u32).await? };
        let (tools, undefined_tools) = crate::runner::tool_definitions(&self.rt, &run, &tool_names);
        let settings = step.request.settings.clone().unwrap_or_default();
        let request = crate::llm::ModelRequest {
            run_id: run.id.clone(),
            system_prompt: system_prompt.clone(),
            messages: messages.iter().cloned().map(std::sync::Arc::new).collect(),
            tools: tools.clone(),
            settings: std::sync::Arc::new(serde_json::Value::Object(settings.clone())),
            result_schema: run.result_schema.clone(),
            turns_taken: 0,
        };
        // A model no longer configured: its requests are shown in the
        // engine's own form.
        let adapter = self.rt.models.get(&model).unwrap_or_else(|| std::sync::Arc::new(crate::llm::BuiltinModel));
        let (response_body, error) = match &step.response {
            crate::model::StepResponse::Failed { error } => (None, Some(error.clone())),
            crate::model::StepResponse::Answer(answer) if step.model_completed_at.is_some() => {
                let answered = crate::llm::Answered {
                    text: answer.text.as_deref(),
                    calls: &step.tool_calls,
                    finish_reason: answer.finish_reason.as_deref(),
                    usage: &step.usage,
                };
                (Some(adapter.response_body(&answered)), None)
            }
            crate::model::StepResponse::Answer(_) => (None, None),
        };
        Ok(ModelCall {
            step_index: index,
            model,
            system_prompt,
            system_prompt_known,
            omitted_messages: sent - included,
            messages,
            dropped_messages: dropped,
            tools,
            undefined_tools,
            settings,
            request_body: adapter.request_body(&request),
            response_body,
            error,
        })
    }

    /// One tool call with its full arguments and result.
    pub async fn tool_call(self, id: &str, call_id: &str) -> Result<ToolCall> {
        self.runs().run_head(id).await?;
        self.rt
            .store
            .tool_call(id, call_id)
            .await?
            .ok_or_else(|| EngineError::NotFound(format!("tool call `{call_id}` in run `{id}`")))
    }

    /// The price table (see [`crate::cost`]).
    pub async fn pricing(self, project: &str) -> Result<Pricing> {
        Ok(Pricing { prices: self.rt.store.prices(project).await? })
    }

    /// Creates or replaces `model`'s price; `Invalid` for negative or absurd prices.
    pub async fn set_price(self, project: &str, model: &str, input: PriceInput) -> Result<ModelPrice> {
        self.traces().set_price_by(project, model, input, None).await
    }

    /// [`Traces::set_price`], recorded in the project's audit log as `by`'s.
    pub async fn set_price_by(
        self,
        project: &str,
        model: &str,
        input: PriceInput,
        by: Option<&crate::model::Actor>,
    ) -> Result<ModelPrice> {
        let mut price = input.into_price(model).map_err(EngineError::Invalid)?;
        price.updated_at = Some(crate::runtime::now());
        self.rt.store.put_price(project, &price).await?;
        if let Some(by) = by {
            self.identity().audit(Some(project), by, "price_set", Some(model), None).await;
        }
        Ok(price)
    }

    /// Removes `model`'s price (its runs then have no cost).
    pub async fn delete_price(self, project: &str, model: &str) -> Result<()> {
        self.traces().delete_price_by(project, model, None).await
    }

    /// [`Traces::delete_price`], recorded in the project's audit log as `by`'s.
    pub async fn delete_price_by(self, project: &str, model: &str, by: Option<&crate::model::Actor>) -> Result<()> {
        match self.rt.store.delete_price(project, model).await? {
            true => {
                if let Some(by) = by {
                    self.identity().audit(Some(project), by, "price_deleted", Some(model), None).await;
                }
                Ok(())
            }
            false => Err(EngineError::NotFound(format!("price of model `{model}`"))),
        }
    }

    /// A run's cost in USD at today's prices; `None` when its model has no price.
    pub async fn run_cost(self, run: &Run) -> Result<Option<f64>> {
        Ok(self.traces().pricing(&run.project).await?.run_cost_usd(run))
    }
}

crate::engine::facade_group!(
    Traces,
    traces,
    "A run's trace read in pages, its events, and the prices its cost is priced with."
);
