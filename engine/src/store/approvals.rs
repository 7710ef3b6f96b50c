//! The approvals part of the store: decisions on tool calls awaiting
//! approval (each with its audit record), the calls still awaiting one (a
//! run's own, or a project's inbox in keyset pages, oldest first, with its
//! count kept up to date by the database), and the decisions made, newest
//! first.

use async_trait::async_trait;

use super::to_ms;
use crate::error::Result;
use crate::model::limits::MAX_LIST_LIMIT;
use crate::model::{ApprovalDecision, Interruption, ToolCall};

/// One decision on a call awaiting approval.
pub struct DecisionWrite<'a> {
    pub call: &'a ToolCall,
    pub decision: &'a ApprovalDecision,
    /// The arguments the call runs with (edited ones, when edited).
    pub final_arguments: &'a serde_json::Value,
    /// For a rejection: the error the model receives.
    pub error: Option<String>,
    /// The decider's role in the run's project, checked by the engine: an
    /// approval writes a grant (see `grants`) recording it.
    pub role: Option<crate::model::Role>,
}

/// What [`ApprovalStore::decide`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum DecideOutcome {
    /// The decision was stored; `resumed` when it was the step's last pending
    /// one and the run moved from `paused` to `running` in the same transaction.
    Applied { resumed: bool },
    /// Another decision (or a cancel) got there first.
    NotAwaiting,
}

pub use crate::model::DecidedCall;

/// Where a newest-first page of decisions continues: after the decision
/// `(decided_at ms, run id, call id)` (see [`DecidedCall::cursor`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecisionCursor {
    pub decided_at_ms: i64,
    pub run_id: String,
    pub call_id: String,
}

impl DecisionCursor {
    /// `None` when `text` is not a cursor [`DecidedCall::cursor`] made.
    pub fn parse(text: &str) -> Option<DecisionCursor> {
        let (ms, rest) = text.split_once('_')?;
        let (run_id, call_id) = rest.split_once('/')?;
        if run_id.is_empty() || call_id.is_empty() {
            return None;
        }
        Some(DecisionCursor { decided_at_ms: ms.parse().ok()?, run_id: run_id.to_owned(), call_id: call_id.to_owned() })
    }
}

/// Where an oldest-first page of the pending inbox continues: after the call
/// `(requested_at ms, run id, step index, position in the step)`, the order
/// the inbox is kept in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InboxCursor {
    pub requested_at_ms: i64,
    pub run_id: String,
    pub step_idx: u32,
    pub pos: u32,
}

impl InboxCursor {
    /// `<requested_at ms>_<step>_<pos>_<run id>` (the run id last: it may
    /// hold `_`). Clients pass it back as it came.
    pub fn encode(&self) -> String {
        format!("{}_{}_{}_{}", self.requested_at_ms, self.step_idx, self.pos, self.run_id)
    }

    /// `None` when `text` is not a cursor [`InboxCursor::encode`] made.
    pub fn parse(text: &str) -> Option<InboxCursor> {
        let mut parts = text.splitn(4, '_');
        let requested_at_ms = parts.next()?.parse().ok()?;
        let step_idx = parts.next()?.parse().ok()?;
        let pos = parts.next()?.parse().ok()?;
        let run_id = parts.next().filter(|id| !id.is_empty())?.to_owned();
        Some(InboxCursor { requested_at_ms, run_id, step_idx, pos })
    }
}

/// Which page of a project's pending inbox to read: oldest first, after
/// `after`, at most `limit` calls, of one tool and of one run when given,
/// and requested within `[requested_from_ms, requested_until_ms]` (both
/// inclusive, Unix milliseconds) when given.
#[derive(Clone, Debug, Default)]
pub struct InboxFilter {
    pub project: String,
    pub after: Option<InboxCursor>,
    pub tool: Option<String>,
    pub run_id: Option<String>,
    /// Only calls requested at or after this time ("waited at most …").
    pub requested_from_ms: Option<i64>,
    /// Only calls requested at or before this time ("waited at least …").
    pub requested_until_ms: Option<i64>,
    /// Calls in the page, 1 to [`MAX_LIST_LIMIT`] (the store reads one more
    /// to know whether another page follows).
    pub limit: u32,
}

impl InboxFilter {
    /// The page's size: `limit`, from 1 to [`MAX_LIST_LIMIT`].
    pub fn page_size(&self) -> u32 {
        self.limit.clamp(1, MAX_LIST_LIMIT)
    }

    /// Where the page starts: after the cursor, or at the earliest request
    /// time, whichever is later — one bound, so every page seeks straight to
    /// its first row. (Rows requested after `requested_from_ms` all follow a
    /// cursor from before it; rows after a cursor from after it all satisfy
    /// it.)
    pub fn lower_bound(&self) -> InboxStart<'_> {
        match (&self.after, self.requested_from_ms) {
            (Some(after), Some(from)) if from > after.requested_at_ms => InboxStart::From(from),
            (Some(after), _) => InboxStart::After(after),
            (None, Some(from)) => InboxStart::From(from),
            (None, None) => InboxStart::Beginning,
        }
    }
}

/// Where a page of the pending inbox starts (see [`InboxFilter::lower_bound`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InboxStart<'a> {
    Beginning,
    /// After this call.
    After(&'a InboxCursor),
    /// At the first call requested at or after this time (ms).
    From(i64),
}

/// A call of the pending inbox as the store reads it: the call (its `chain`
/// empty), where it sits in its step, and for a child run's call the run
/// waiting on it (the engine builds the chain from there).
#[derive(Clone, Debug, PartialEq)]
pub struct PendingCall {
    pub call: Interruption,
    pub pos: u32,
    pub parent_run_id: Option<String>,
}

impl PendingCall {
    /// The cursor of the page after this call.
    pub fn cursor(&self) -> InboxCursor {
        InboxCursor {
            requested_at_ms: to_ms(self.call.requested_at),
            run_id: self.call.run_id.clone(),
            step_idx: self.call.step_index,
            pos: self.pos,
        }
    }
}

/// One page of the pending inbox, as the store reads it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PendingCalls {
    pub calls: Vec<PendingCall>,
    /// Where the next page starts; `None` on the last one.
    pub next: Option<InboxCursor>,
}

impl PendingCalls {
    /// The page of `limit` from the `limit + 1` rows read for it.
    pub fn from_rows(mut calls: Vec<PendingCall>, limit: u32) -> Self {
        let more = calls.len() > limit as usize;
        calls.truncate(limit as usize);
        let next = if more { calls.last().map(PendingCall::cursor) } else { None };
        PendingCalls { calls, next }
    }
}

/// One page of the pending inbox with each child run's chain of runs (what
/// [`crate::Approvals::pending_inbox`] returns).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InboxPage {
    pub items: Vec<Interruption>,
    /// Where the next page starts; `None` on the last one.
    pub next: Option<InboxCursor>,
}

#[async_trait]
pub trait ApprovalStore: Send + Sync {
    /// Stores a decision if the call is still awaiting one (compare-and-set),
    /// with its audit record, and resumes the run when nothing else waits.
    async fn decide(&self, write: DecisionWrite<'_>) -> Result<DecideOutcome>;
    /// Calls awaiting a decision on paused runs (of one run, or all; of one
    /// project, or all), oldest first. Unpaged: for one run's calls (a run's
    /// own pending calls, recovery); a project's inbox reads
    /// [`ApprovalStore::pending_inbox`].
    async fn interruptions(&self, run_id: Option<&str>, project: Option<&str>) -> Result<Vec<Interruption>>;
    /// One page of a project's calls awaiting a decision on paused runs,
    /// oldest first (see [`InboxFilter`]): one index range, whatever the
    /// backlog.
    async fn pending_inbox(&self, filter: &InboxFilter) -> Result<PendingCalls>;
    /// How many calls await a decision on `project`'s paused runs: one row,
    /// kept by the database in the transactions that change them.
    async fn pending_count(&self, project: &str) -> Result<u64>;
    /// Decisions on the calls of `project`'s runs, newest first (by
    /// decision time, then run and call id), after `before` when given,
    /// skipping `offset`, at most `limit`.
    async fn decisions(
        &self,
        project: &str,
        before: Option<&DecisionCursor>,
        offset: u32,
        limit: u32,
    ) -> Result<Vec<DecidedCall>>;
    /// Marks a run's calls awaiting approval as cancelled.
    async fn cancel_awaiting(&self, run_id: &str) -> Result<u64>;
}
