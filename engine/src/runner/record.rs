//! What the loop writes: a step saved (with its messages), the run's last
//! step saved and the run moved on in one transaction, or the run moved on
//! alone; each then published on the event bus, and taken into the loop's
//! state.

use std::sync::Arc;

use super::{context, Loop};
use crate::error::Result;
use crate::events::EventKind;
use crate::model::{Message, MessageBody, RunStatus, Step};
use crate::store::{RunPatch, StepWrite};

impl Loop<'_> {
    /// Persists a step with new messages, then publishes them.
    pub(super) async fn save(&mut self, step: &Step, messages: Vec<Message>) -> Result<()> {
        let write =
            StepWrite { step, messages: &messages, run_usage: &self.usage, step_count: self.step_count, switch: None };
        self.rt.store.save_step(write).await?;
        self.saved(step, messages);
        Ok(())
    }

    /// Saves the run's last step with its messages and moves the run to `to`
    /// in one transaction (see `Store::finish_step`), then publishes it all
    /// (with the run's usage when `usage` is set).
    pub(super) async fn finish(
        &mut self,
        step: &Step,
        messages: Vec<Message>,
        to: RunStatus,
        patch: RunPatch,
    ) -> Result<()> {
        self.finish_with(step, messages, to, patch, false).await
    }

    pub(super) async fn finish_with(
        &mut self,
        step: &Step,
        messages: Vec<Message>,
        to: RunStatus,
        mut patch: RunPatch,
        usage: bool,
    ) -> Result<()> {
        if to.is_terminal() {
            self.replay_patch(Some(step), &mut patch).await?;
        }
        let write =
            StepWrite { step, messages: &messages, run_usage: &self.usage, step_count: self.step_count, switch: None };
        let old = self.run.status;
        let updated = self.rt.store.finish_step(write, old, to, patch).await?;
        self.saved(step, messages);
        if usage {
            self.rt.bus.publish(&self.run.id, EventKind::Usage { usage: self.usage });
        }
        self.rt.publish_status(old, &updated);
        self.run = updated;
        Ok(())
    }

    /// Takes a step and its messages the store just committed into the
    /// loop's state, and publishes them.
    pub(super) fn saved(&mut self, step: &Step, messages: Vec<Message>) {
        self.offer.note_step(step);
        for m in messages {
            self.rt.bus.publish(&self.run.id, EventKind::Item { message: m.clone() });
            self.window.push(&m);
            if matches!(m.body, MessageBody::Agent { .. }) {
                self.agent_turns += 1;
                self.turns_since_person += 1;
            } else if context::is_person(&m) {
                self.turns_since_person = 0;
            }
            self.next_seq = self.next_seq.max(m.seq + 1);
            self.messages.push(Arc::new(m));
        }
        self.rt.bus.publish(&self.run.id, EventKind::StepCompleted { step: Box::new(step.clone()) });
    }

    /// Moves the run to `to` without a step (see `Runtime::set_status`).
    pub(super) async fn end(&mut self, to: RunStatus, mut patch: RunPatch) -> Result<()> {
        if to.is_terminal() {
            self.replay_patch(None, &mut patch).await?;
        }
        self.run = self.rt.set_status(&self.run, to, patch).await?;
        Ok(())
    }
}
