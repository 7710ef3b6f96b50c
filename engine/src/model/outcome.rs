//! A run's outcome: its status and, in a few words, what a reader should
//! know beyond it. A run whose `send_email` a person rejected ends `done`
//! like a clean run; its outcome says `done · 1 call rejected`.
//!
//! The counts come from the store with every read of a run (one probe of a
//! partial index each, whatever the run's length), so every path that
//! writes tool calls — the runner, forks, imports, OTLP ingest — is counted
//! without remembering to.

use serde::{Deserialize, Serialize};

use super::{Run, Step, ToolCallStatus};
use crate::status::RunStatus;

/// How the summary of a run stopped by `max_turns` starts (the runner
/// writes it; the outcome reads it).
pub const MAX_TURNS_STOP: &str = "Stopped: the run reached max_turns";

/// A run's outcome beside its status, e.g. `done · 1 call rejected`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunOutcome {
    /// The status, then what to know beyond it: `done`, `done · 1 call
    /// rejected`, `done · 2 tool errors`, `done · max turns`, `failed ·
    /// budget`, `failed · model error`, `cancelled`.
    pub label: String,
    /// What follows the status in `label` (empty when nothing does).
    pub note: String,
    pub tone: OutcomeTone,
    /// Calls a person (or an approval timeout) rejected.
    pub rejected_calls: u32,
    /// Calls that ended in an error.
    pub failed_calls: u32,
}

/// How an outcome reads at a glance (a badge's colour).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum OutcomeTone {
    /// Pending, running or paused.
    #[default]
    Active,
    /// Done with no rejected or failed call and a final answer.
    Clean,
    /// Done, but a call was rejected or failed, or it ran out of turns; or cancelled.
    Warning,
    /// Failed.
    Error,
}

impl OutcomeTone {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Clean => "clean",
            Self::Warning => "warning",
            Self::Error => "error",
        }
    }
}

/// The runs a list's `outcome` filter keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum OutcomeFilter {
    /// Done with no rejected or failed call, not stopped by `max_turns`.
    Clean,
    /// With at least one rejected call.
    Rejected,
    /// With at least one failed call.
    ToolError,
    /// Everything finished that is not clean: failed, cancelled, or done
    /// with a rejected or failed call or stopped by `max_turns`.
    Issues,
}

impl OutcomeFilter {
    pub const ALL: [OutcomeFilter; 4] = [Self::Clean, Self::Rejected, Self::ToolError, Self::Issues];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Clean => "clean",
            Self::Rejected => "rejected",
            Self::ToolError => "tool_error",
            Self::Issues => "issues",
        }
    }
}

impl RunOutcome {
    /// The outcome of `run` with `rejected` and `failed` calls.
    pub fn of(run: &Run, rejected: u32, failed: u32) -> Self {
        let mut notes = Vec::new();
        if rejected > 0 {
            notes.push(plural(rejected, "call rejected", "calls rejected"));
        }
        if failed > 0 {
            notes.push(plural(failed, "tool error", "tool errors"));
        }
        let tone = match run.status {
            RunStatus::Pending | RunStatus::Running | RunStatus::Paused => OutcomeTone::Active,
            RunStatus::Done => {
                if run.summary.as_deref().is_some_and(|s| s.starts_with(MAX_TURNS_STOP)) {
                    notes.push("max turns".into());
                }
                if notes.is_empty() {
                    OutcomeTone::Clean
                } else {
                    OutcomeTone::Warning
                }
            }
            RunStatus::Cancelled => OutcomeTone::Warning,
            RunStatus::Failed => {
                if let Some(kind) = run.failure_reason.as_deref().and_then(failure_kind) {
                    notes.insert(0, kind.into());
                }
                OutcomeTone::Error
            }
        };
        let note = notes.join(" · ");
        let label = match note.is_empty() {
            true => run.status.as_str().to_owned(),
            false => format!("{} · {note}", run.status),
        };
        RunOutcome { label, note, tone, rejected_calls: rejected, failed_calls: failed }
    }

    /// The outcome of `run` whose steps are all in `steps` (a run not yet
    /// stored: a fork, an import, a new run).
    pub fn of_steps(run: &Run, steps: &[Step]) -> Self {
        let calls = || steps.iter().flat_map(|s| &s.tool_calls);
        let count = |status| calls().filter(|c| c.status == status).count().min(u32::MAX as usize) as u32;
        Self::of(run, count(ToolCallStatus::Rejected), count(ToolCallStatus::Failed))
    }
}

/// What kind of failure `reason` tells of, when it is one a reader tells apart.
fn failure_kind(reason: &str) -> Option<&'static str> {
    if reason.contains("budget") {
        Some("budget")
    } else if reason.starts_with("model error") || reason.contains("is not configured on this server") {
        Some("model error")
    } else {
        None
    }
}

fn plural(n: u32, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(status: RunStatus) -> Run {
        serde_json::from_value(serde_json::json!({
            "id": "r", "name": "n", "status": status.as_str(), "model": "builtin", "model_settings": null,
            "system_prompt": null, "initial_prompt": "p", "input": null, "tools": [], "tags": {},
            "context": null, "max_turns": 1, "agent_id": null, "result": null, "summary": null,
            "failure_reason": null, "usage": {}, "step_count": 0, "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z", "started_at": null, "finished_at": null
        }))
        .unwrap()
    }

    #[test]
    fn labels_say_what_the_status_does_not() {
        let done = run(RunStatus::Done);
        assert_eq!(RunOutcome::of(&done, 0, 0).label, "done");
        assert_eq!(RunOutcome::of(&done, 0, 0).tone, OutcomeTone::Clean);
        let rejected = RunOutcome::of(&done, 1, 0);
        assert_eq!((rejected.label.as_str(), rejected.tone), ("done · 1 call rejected", OutcomeTone::Warning));
        assert_eq!(RunOutcome::of(&done, 2, 3).label, "done · 2 calls rejected · 3 tool errors");
        assert_eq!(RunOutcome::of(&done, 0, 1).note, "1 tool error");

        let stopped =
            Run { summary: Some(format!("{MAX_TURNS_STOP} (3) before the model gave a final answer.")), ..done };
        assert_eq!(RunOutcome::of(&stopped, 0, 0).label, "done · max turns");

        let budget = Run {
            failure_reason: Some("stopped: the run tree's runs have used 9 tokens, all its budget allows (8)".into()),
            ..run(RunStatus::Failed)
        };
        let o = RunOutcome::of(&budget, 0, 1);
        assert_eq!((o.label.as_str(), o.tone), ("failed · budget · 1 tool error", OutcomeTone::Error));
        let model = Run { failure_reason: Some("model error: 500".into()), ..run(RunStatus::Failed) };
        assert_eq!(RunOutcome::of(&model, 0, 0).label, "failed · model error");
        assert_eq!(RunOutcome::of(&run(RunStatus::Failed), 0, 0).label, "failed");
        assert_eq!(RunOutcome::of(&run(RunStatus::Cancelled), 0, 0).tone, OutcomeTone::Warning);
        let paused = RunOutcome::of(&run(RunStatus::Paused), 1, 0);
        assert_eq!((paused.label.as_str(), paused.tone), ("paused · 1 call rejected", OutcomeTone::Active));
    }
}
