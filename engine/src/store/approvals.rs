//! The approvals part of the store: decisions on tool calls awaiting
//! approval (each with its audit record), the calls still awaiting one, and
//! the decisions made, newest first.

use async_trait::async_trait;

use super::to_ms;
use crate::error::Result;
use crate::model::{ApprovalDecision, Interruption, ToolCall};

/// One decision on a call awaiting approval.
pub struct DecisionWrite<'a> {
    pub call: &'a ToolCall,
    pub decision: &'a ApprovalDecision,
    /// The arguments the call runs with (edited ones, when edited).
    pub final_arguments: &'a serde_json::Value,
    /// For a rejection: the error the model receives.
    pub error: Option<String>,
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

/// A decision on one tool call, with the call it was about (the audit view
/// of [`ApprovalStore::decisions`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DecidedCall {
    pub run_id: String,
    pub run_name: String,
    pub call_id: String,
    pub step_index: u32,
    pub tool_name: String,
    #[serde(flatten)]
    pub decision: ApprovalDecision,
}

impl DecidedCall {
    /// The cursor of the next page after this one (newest first):
    /// `<decided_at ms>_<run id>/<call id>` (a run id has no `/`).
    pub fn cursor(&self) -> String {
        format!("{}_{}/{}", to_ms(self.decision.decided_at), self.run_id, self.call_id)
    }
}

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

#[async_trait]
pub trait ApprovalStore: Send + Sync {
    /// Stores a decision if the call is still awaiting one (compare-and-set),
    /// with its audit record, and resumes the run when nothing else waits.
    async fn decide(&self, write: DecisionWrite<'_>) -> Result<DecideOutcome>;
    /// Calls awaiting a decision on paused runs (of one run, or all; of one
    /// project, or all), oldest first.
    async fn interruptions(&self, run_id: Option<&str>, project: Option<&str>) -> Result<Vec<Interruption>>;
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
