//! The statements of a decision, one text for both databases (SQLite runs
//! them on its write thread through rusqlite, PostgreSQL in a sqlx
//! transaction under a lock on the run's row; see `sqlite/approvals.rs` and
//! `postgres/approvals.rs` for why each backend runs them as it does).
//!
//! A decision is one transaction: a compare-and-set on the call's status
//! (so exactly one concurrent decision wins), the audit row (whose primary
//! key also refuses a second decision), the grant, the "always" list, the
//! edited arguments in the transcript, and — when it was the step's last
//! pending call — the `paused → running` move. A crash can never separate them.

use serde_json::Value;

/// Locks the run's row while it is paused (nothing on SQLite, whose writes
/// are serial anyway).
pub(crate) const LOCK_PAUSED_RUN: &str = "SELECT id FROM runs WHERE id = ?1 AND status = 'paused' FOR UPDATE";

/// The compare-and-set: only a call still awaiting approval in a paused run.
pub(crate) const UPDATE_CALL: &str =
    "UPDATE tool_calls SET status = ?1, approval = ?2::jsonb, arguments = ?3::jsonb, error = ?4, completed_at = ?5
     WHERE run_id = ?6 AND id = ?7 AND status = 'awaiting_approval'
       AND run_id IN (SELECT id FROM runs WHERE id = ?6 AND status = 'paused')";

/// The audit row.
pub(crate) const INSERT_DECISION: &str =
    "INSERT INTO approval_decisions (run_id, call_id, step_idx, tool_name, decision, decided_by, decided_at,
        always, original_arguments, edited_arguments, comment, decided_by_id)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9::jsonb, ?10::jsonb, ?11, ?12)";

/// The calls of the step still waiting.
pub(crate) const COUNT_WAITING: &str =
    "SELECT COUNT(*) FROM tool_calls WHERE run_id = ?1 AND step_idx = ?2 AND status = 'awaiting_approval'";

/// `paused → running`, when the last waiting call was decided.
pub(crate) const RESUME_RUN: &str =
    "UPDATE runs SET status = 'running', updated_at = ?1 WHERE id = ?2 AND status = 'paused'";

/// The step's agent message, whose invocation an edit rewrites.
pub(crate) const AGENT_MESSAGE: &str = "SELECT seq, data::text FROM messages
     WHERE run_id = ?1 AND step_idx = ?2 AND type = 'agent' ORDER BY seq LIMIT 1";

/// The agent message rewritten.
pub(crate) const UPDATE_MESSAGE: &str = "UPDATE messages SET data = ?1::jsonb WHERE run_id = ?2 AND seq = ?3";

/// The "always" list column a decision adds its tool to.
pub(crate) fn always_column(approved: bool) -> &'static str {
    if approved {
        "always_approve"
    } else {
        "always_reject"
    }
}

/// The agent message `data` with call `call_id`'s input replaced by `args`,
/// so the model's history shows the arguments that actually ran.
pub(crate) fn with_edited_input(data: &str, call_id: &str, args: &Value) -> String {
    let mut data: Value = serde_json::from_str(data).unwrap_or_default();
    if let Some(invocations) = data.get_mut("invocations").and_then(Value::as_array_mut) {
        for inv in invocations.iter_mut().filter(|i| i["id"] == call_id) {
            inv["input"] = args.clone();
        }
    }
    data.to_string()
}
