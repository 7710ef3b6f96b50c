//! Two runs compared (`GET /api/compare`, issue 18): both runs read whole —
//! every step with its tool calls (one read each, as the trace does; a
//! 10,000-step run reads in tens of milliseconds), the transcripts, the
//! price table — plus how they share history by forking, then aligned by
//! [`crate::compare`] on the blocking pool.
//!
//! Forks: a fork made by editing a message copies its parent's messages
//! with `seq` below the edited message's, and the steps before the first
//! step after it; a fork made from step N shares the steps before N and the
//! messages before step N's first (step N itself may have been changed). Two runs of one
//! family share, back to their nearest common ancestor, what every fork on
//! the way shared: the smallest of those bounds, on either path.

use std::collections::HashMap;

use super::Engine;
use crate::compare::{compare, RunData, Window};
use crate::error::{EngineError, Result};
use crate::model::{CompareQuery, Comparison, FamilyMember, ForkRelation, Message, Run};

/// Messages read per page while looking for a fork's first new step.
const FORK_SCAN_PAGE: u32 = 256;

impl Engine {
    /// How `a` and `b` share history by forking (see the module docs);
    /// `None` when they do not (or are the same run).
    async fn fork_relation(
        &self,
        a: &Run,
        b: &Run,
        a_messages: &[Message],
        b_messages: &[Message],
    ) -> Result<Option<ForkRelation>> {
        // Shared history needs a fork on at least one side's way up.
        let forked = |r: &Run| r.forked_from_message_id.is_some() || r.forked_from_step.is_some();
        if a.id == b.id || (!forked(a) && !forked(b)) {
            return Ok(None);
        }
        let family = self.rt.store.family(&a.id).await?;
        let by_id: HashMap<&str, &FamilyMember> = family.iter().map(|m| (m.id.as_str(), m)).collect();
        if !by_id.contains_key(b.id.as_str()) {
            return Ok(None);
        }
        // A run and its forking ancestors, nearest first.
        let up = |id: &str| {
            let mut path: Vec<&FamilyMember> = Vec::new();
            let mut at = by_id.get(id).copied();
            while let Some(m) = at.filter(|m| path.len() <= family.len() && !path.iter().any(|p| p.id == m.id)) {
                path.push(m);
                at = m.parent_run_id.as_deref().and_then(|p| by_id.get(p).copied());
            }
            path
        };
        let (pa, pb) = (up(&a.id), up(&b.id));
        let Some(at_a) = pa.iter().position(|m| pb.iter().any(|n| n.id == m.id)) else { return Ok(None) };
        let ancestor = pa[at_a].id.clone();
        let at_b = pb.iter().position(|n| n.id == ancestor).unwrap_or(pb.len());
        let known = [(a.id.as_str(), a_messages), (b.id.as_str(), b_messages)];
        let (mut shared_messages, mut shared_steps) = (u64::MAX, u32::MAX);
        // Each run below the ancestor on either path is a fork of the next one up.
        for fork in pa[..at_a].iter().chain(&pb[..at_b]) {
            let (seq, cut) = match (&fork.parent_run_id, &fork.forked_from_message_id, fork.forked_from_step) {
                (Some(parent), Some(message), _) => self.fork_point(parent, message, &known).await?,
                (Some(parent), None, Some(step)) => self.step_fork_point(parent, step, &known).await?,
                _ => (0, 0),
            };
            shared_messages = shared_messages.min(seq);
            shared_steps = shared_steps.min(cut);
        }
        if shared_messages == u64::MAX {
            return Ok(None);
        }
        Ok(Some(ForkRelation { ancestor, shared_messages, shared_steps }))
    }

    /// Where a fork of `parent` made from its step `step` began: the steps
    /// before that one are shared, and the messages before its first (the
    /// fork may have changed what the step's model or tools said).
    async fn step_fork_point(&self, parent: &str, step: u32, known: &[(&str, &[Message])]) -> Result<(u64, u32)> {
        let read;
        let messages: &[Message] = match known.iter().find(|(id, _)| *id == parent) {
            Some((_, messages)) => messages,
            None => {
                read = self.rt.store.messages(parent).await?;
                &read
            }
        };
        let seq = messages
            .iter()
            .find(|m| m.step_index.is_some_and(|i| i >= step))
            .map_or_else(|| messages.last().map_or(0, |m| m.seq + 1), |m| m.seq);
        Ok((seq, step))
    }

    /// Where a fork of `parent` at `message_id` began: the edited message's
    /// `seq` and the first step index it did not copy (as `edit_message`
    /// cut it: the first step of a message after the edited one, else the
    /// parent's step count). `known` holds transcripts already read.
    async fn fork_point(&self, parent: &str, message_id: &str, known: &[(&str, &[Message])]) -> Result<(u64, u32)> {
        let read;
        let messages: Option<&[Message]> = match known.iter().find(|(id, _)| *id == parent) {
            Some((_, messages)) => Some(messages),
            None => None,
        };
        // Message ids are `<run id>-m<seq>`; look the id up if it is not.
        let parsed = message_id.strip_prefix(parent).and_then(|t| t.strip_prefix("-m")).and_then(|t| t.parse().ok());
        let seq = match parsed {
            Some(seq) => seq,
            None => {
                let all = match messages {
                    Some(m) => m,
                    None => {
                        read = self.rt.store.messages(parent).await?;
                        &read
                    }
                };
                match all.iter().find(|m| m.id == message_id) {
                    Some(m) => m.seq,
                    None => return Ok((0, 0)),
                }
            }
        };
        if let Some(messages) = messages {
            if let Some(step) = messages.iter().filter(|m| m.seq > seq).find_map(|m| m.step_index) {
                return Ok((seq, step));
            }
        } else {
            let mut from = seq + 1;
            loop {
                let page = self.rt.store.messages_page(parent, from, FORK_SCAN_PAGE).await?;
                if let Some(step) = page.iter().find_map(|m| m.step_index) {
                    return Ok((seq, step));
                }
                match page.last() {
                    Some(last) if page.len() == FORK_SCAN_PAGE as usize => from = last.seq + 1,
                    _ => break,
                }
            }
        }
        Ok((seq, self.runs().run_head(parent).await?.step_count))
    }
}

impl Comparisons<'_> {
    /// Runs `q.a` and `q.b` compared, with one page of each list of rows
    /// (see [`Comparison`]). `NotFound` for an unknown run, and for two
    /// runs of different projects; `Invalid` for a bad window (a limit not
    /// from 1 to `MAX_COMPARE_ROWS`, an empty or too long id).
    pub async fn compare(self, q: &CompareQuery) -> Result<Comparison> {
        let window = Window::from_query(q).map_err(EngineError::Invalid)?;
        let (a, b) = tokio::try_join!(self.runs().get_run(&q.a), self.runs().get_run(&q.b))?;
        if a.project != b.project {
            // Never say more about a run of another project than that it is not there.
            return Err(EngineError::NotFound(format!("run `{}`", b.id)));
        }
        let store = &self.rt.store;
        let (a_steps, b_steps, a_messages, b_messages, pricing) = tokio::try_join!(
            store.steps(&a.id),
            store.steps(&b.id),
            store.messages(&a.id),
            store.messages(&b.id),
            self.traces().pricing(&a.project),
        )?;
        let fork = self.fork_relation(&a, &b, &a_messages, &b_messages).await?;
        let now = crate::runtime::now();
        let work = move || {
            let da = RunData { run: &a, steps: &a_steps, messages: &a_messages };
            let db = RunData { run: &b, steps: &b_steps, messages: &b_messages };
            compare(&da, &db, fork, &pricing, &window, now)
        };
        tokio::task::spawn_blocking(work).await.map_err(|e| EngineError::Internal(format!("comparing failed: {e}")))
    }
}

crate::engine::facade_group!(
    Comparisons,
    comparisons,
    "Two runs compared, and batches of one configuration on several models."
);
