//! A replay's comparison with the run it replays (see `engine::replay`):
//! before each turn, the step just finished is compared with the
//! original's step of the same index. A recorded replay stops `done` at the
//! first difference; a live one records it and goes on. A live replay's
//! last step (its final answer) is compared as the run ends.

use serde_json::Value;

use super::Loop;
use crate::error::Result;
use crate::model::{Replay, ReplayMode, Step, ToolCall, ToolCallStatus};
use crate::store::RunPatch;

impl Loop<'_> {
    /// Compares step `index` with the original's when this run is a replay
    /// not yet diverged; the divergence found, if any (also kept on the run).
    /// `ours`: the step as it is about to be saved (else it is read).
    pub(super) async fn replay_divergence(&mut self, index: u32, ours: Option<&Step>) -> Result<Option<Replay>> {
        let Some(replay) = self.run.replay.clone() else { return Ok(None) };
        if replay.diverged_at.is_some() || self.replay_checked.is_some_and(|c| c >= index) {
            return Ok(None);
        }
        self.replay_checked = Some(index);
        let theirs = self.rt.store.steps_page(&replay.of, index, 1).await?;
        let stored;
        let ours = match ours {
            Some(step) => step,
            None => {
                stored = self.rt.store.steps_page(&self.run.id, index, 1).await?;
                let Some(step) = stored.first() else { return Ok(None) };
                step
            }
        };
        let live = replay.mode == ReplayMode::Live;
        let Some(why) = difference(ours, theirs.first(), live) else { return Ok(None) };
        let diverged = Replay { diverged_at: Some(index), divergence: Some(why), ..replay };
        self.run.replay = Some(diverged.clone());
        Ok(Some(diverged))
    }

    /// Before turn `index`: a recorded replay that diverged at the previous
    /// step ends `done` there (`true`).
    pub(super) async fn replay_stops(&mut self, index: u32) -> Result<bool> {
        if index == 0 {
            return Ok(false);
        }
        let Some(diverged) = self.replay_divergence(index - 1, None).await? else { return Ok(false) };
        if diverged.mode == ReplayMode::Live {
            return Ok(false);
        }
        let summary = format!(
            "The replay diverged from run {} at step {}: {}",
            diverged.of,
            index - 1,
            diverged.divergence.as_deref().unwrap_or_default()
        );
        let patch = RunPatch {
            result: Some(Value::Null),
            summary: Some(summary),
            replay: Some(diverged),
            ..RunPatch::default()
        };
        self.end(crate::model::RunStatus::Done, patch).await?;
        Ok(true)
    }
}

impl Loop<'_> {
    /// The replay as a run's last transition records it: diverged (now, with
    /// `last`, the step it ends with, compared) or as it was.
    pub(super) async fn replay_patch(&mut self, last: Option<&Step>, patch: &mut RunPatch) -> Result<()> {
        if self.run.replay.is_none() || patch.replay.is_some() {
            return Ok(());
        }
        if let Some(step) = last {
            self.replay_divergence(step.index, Some(step)).await?;
        }
        if self.run.replay.as_ref().is_some_and(|r| r.diverged_at.is_some()) {
            patch.replay = self.run.replay.clone();
        }
        Ok(())
    }
}

/// How step `ours` of a replay differs from the original's (`None`: it
/// matches). A live replay also compares what the model said.
fn difference(ours: &Step, theirs: Option<&Step>, live: bool) -> Option<String> {
    let Some(theirs) = theirs else { return Some(format!("the original has no step {}", ours.index)) };
    if live && ours.response.text() != theirs.response.text() {
        return Some("the model answered differently".into());
    }
    let names = |s: &Step| s.tool_calls.iter().map(|c| c.tool_name.clone()).collect::<Vec<_>>().join(", ");
    if ours.tool_calls.len() != theirs.tool_calls.len()
        || ours.tool_calls.iter().zip(&theirs.tool_calls).any(|(a, b)| a.tool_name != b.tool_name)
    {
        return Some(format!("it called [{}] where the original called [{}]", names(ours), names(theirs)));
    }
    for (a, b) in ours.tool_calls.iter().zip(&theirs.tool_calls) {
        if a.arguments != b.arguments {
            return Some(format!("`{}` was called with other arguments", a.tool_name));
        }
        if let Some(why) = outcome_difference(a, b) {
            return Some(why);
        }
    }
    None
}

/// How one call's outcome differs from the original call's.
fn outcome_difference(a: &ToolCall, b: &ToolCall) -> Option<String> {
    let outcome = |c: &ToolCall| match c.status {
        ToolCallStatus::Succeeded => "succeeded",
        ToolCallStatus::Rejected => "was rejected",
        ToolCallStatus::Cancelled => "was cancelled",
        _ => "failed",
    };
    if outcome(a) != outcome(b) {
        return Some(format!("`{}` {} where the original's {}", a.tool_name, outcome(a), outcome(b)));
    }
    if a.status == ToolCallStatus::Succeeded && a.result != b.result {
        let shown = |v: &Option<Value>| {
            let text = v.as_ref().map(Value::to_string).unwrap_or_default();
            text.chars().take(120).collect::<String>()
        };
        return Some(format!(
            "`{}` returned {} where the original's returned {}",
            a.tool_name,
            shown(&a.result),
            shown(&b.result)
        ));
    }
    if a.status != ToolCallStatus::Succeeded && a.error != b.error {
        return Some(format!("`{}` ended with another error", a.tool_name));
    }
    None
}
