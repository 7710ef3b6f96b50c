//! Conversation control: follow-ups on finished runs, and editing an earlier
//! human message, which forks a new run from that point.
//!
//! A fork copies the history before the edited message (messages, steps,
//! tool calls and their approval decisions, and the blobs of the large
//! results it keeps, renamed after the fork) into a new run in one
//! transaction and runs from there; the original run is never modified.
//! The copied decisions are history only: the fork has no grant, so its
//! calls that need approval wait for a decision in the fork (see `fork`).
//!
//! A follow-up continues the same run, but ends its "always" grants: what
//! an approver allowed for the conversation so far does not cover what the
//! new message asks for.

use super::fork::{derived_run, keep};
use super::Engine;
use crate::error::{EngineError, Result};
use crate::events::EventKind;
use crate::model::{FollowUp, Message, MessageBody, Run, RunFamily, RunStatus, Usage};
use crate::runtime::now;
use crate::store::{Blob, RunOverrides};

impl Engine {
    /// Validates continuation overrides (shared by follow-ups and imports).
    pub(crate) fn check_overrides(
        &self,
        project: &str,
        max_turns: Option<u32>,
        tools: Option<Vec<String>>,
        model: Option<String>,
    ) -> Result<RunOverrides> {
        if let Some(n) = max_turns {
            if !(1..=1000).contains(&n) {
                return Err(EngineError::Invalid("max_turns must be between 1 and 1000".into()));
            }
        }
        // Names, sources or `all`, as when the run was created.
        let tools = tools.map(|list| crate::runtime::attach_tools(&self.rt, project, "", &list)).transpose()?;
        if let Some(m) = &model {
            if self.rt.models.get(m).is_none() {
                return Err(EngineError::Invalid(format!("unknown model `{m}`")));
            }
        }
        Ok(RunOverrides { max_turns, tools, model })
    }
}

impl Conversation<'_> {
    /// Appends a human message to a `done` run and runs it again; the new
    /// steps continue the run's step numbering.
    pub async fn follow_up(self, run_id: &str, req: FollowUp) -> Result<Run> {
        req.check_bounds().map_err(EngineError::Invalid)?;
        let text = req.message.trim();
        if text.is_empty() {
            return Err(EngineError::Invalid("message must not be empty".into()));
        }
        let run = self.runs().get_run(run_id).await?;
        crate::engine::Engine::refuse_read_only(&run, "followed up")?;
        let overrides = self.check_overrides(&run.project, req.max_turns, req.tools, req.model)?;
        if !run.interactive {
            return Err(EngineError::Conflict(format!(
                "run `{run_id}` was created with interactive: false and takes no follow-up messages"
            )));
        }
        if run.status != RunStatus::Done {
            return Err(EngineError::Conflict(format!(
                "run `{run_id}` is {}; follow-up messages are accepted once it is done",
                run.status
            )));
        }
        let Some((reopened, message)) = self.rt.store.follow_up(run_id, text, &overrides).await? else {
            let now = self.runs().get_run(run_id).await?;
            return Err(EngineError::Conflict(format!("run `{run_id}` is {} now", now.status)));
        };
        self.rt.publish_transition(run_id, RunStatus::Done, RunStatus::Running);
        self.rt.bus.publish(run_id, EventKind::Item { message });
        self.spawn(run_id.to_owned());
        Ok(reopened)
    }

    /// Forks the run at `message_id` (a human message) with `text` in its
    /// place; returns the new run, which starts at once.
    pub async fn edit_message(self, run_id: &str, message_id: &str, text: &str) -> Result<Run> {
        self.conversation().edit_message_by(run_id, message_id, text, None).await
    }

    /// [`Conversation::edit_message`], recording `by` as who created the fork
    /// (without one, the fork keeps its parent's creator).
    pub async fn edit_message_by(
        self,
        run_id: &str,
        message_id: &str,
        text: &str,
        by: Option<&crate::model::Actor>,
    ) -> Result<Run> {
        crate::model::limits::check_message("message", text).map_err(EngineError::Invalid)?;
        let text = text.trim();
        if text.is_empty() {
            return Err(EngineError::Invalid("message must not be empty".into()));
        }
        let run = self.runs().get_run(run_id).await?;
        crate::engine::Engine::refuse_read_only(&run, "forked or edited")?;
        let (messages, steps) = tokio::try_join!(self.rt.store.messages(run_id), self.rt.store.steps(run_id))?;
        let edited = messages
            .iter()
            .find(|m| m.id == message_id)
            .ok_or_else(|| EngineError::NotFound(format!("message `{message_id}` in run `{run_id}`")))?;
        if !matches!(edited.body, MessageBody::Human { .. }) {
            return Err(EngineError::Invalid(format!(
                "only human messages can be edited; `{message_id}` is an {} message",
                edited.body.kind()
            )));
        }
        let id = uuid::Uuid::now_v7().to_string();
        // Steps whose messages all come before the edit point are kept.
        let cut = messages
            .iter()
            .filter(|m| m.seq > edited.seq)
            .filter_map(|m| m.step_index)
            .min()
            .unwrap_or(steps.len() as u32);
        let mut kept = keep(
            run_id,
            &id,
            steps.into_iter().filter(|s| s.index < cut),
            messages.iter().filter(|m| m.seq < edited.seq).cloned(),
        );
        let at = now();
        kept.history.push(Message {
            id: format!("{id}-m{}", edited.seq),
            run_id: id.clone(),
            seq: edited.seq,
            step_index: None,
            created_at: at,
            body: MessageBody::Human { message: text.to_owned() },
        });
        let mut usage = Usage::default();
        kept.steps.iter().for_each(|s| usage.add(&s.usage));
        // No grant is kept (see `fork`): only "always reject" decisions.
        let always_reject = super::fork::always_rejected(&kept.steps);
        let mut fork = Run {
            initial_prompt: if edited.seq == 0 { text.to_owned() } else { run.initial_prompt.clone() },
            always_reject,
            forked_from_message_id: Some(edited.id.clone()),
            usage,
            step_count: kept.steps.len() as u32,
            ..derived_run(&run, &id, format!("{} · fork", run.name), at, by)
        };
        self.insert_fork(&mut fork, &kept).await?;
        self.spawn(id);
        Ok(fork)
    }

    /// The run's ancestors and forks.
    pub async fn family(self, run_id: &str) -> Result<RunFamily> {
        self.runs().get_run(run_id).await?;
        Ok(RunFamily { runs: self.rt.store.family(run_id).await? })
    }

    /// A stored large tool result.
    pub async fn blob(self, id: &str) -> Result<Blob> {
        self.rt.store.get_blob(id).await?.ok_or_else(|| EngineError::NotFound(format!("blob `{id}`")))
    }
}

crate::engine::facade_group!(
    Conversation,
    conversation,
    "Follow-ups, edited messages and forks: a run continued or branched."
);
