//! `send_email`: writes an email to runlens's outbox.
//!
//! runlens does not deliver mail; the outbox table is the visible effect
//! (shown on the Outbox page), which makes this the demonstration tool for
//! calls with side effects. Not idempotent, but recoverable: after a crash
//! mid-call the outbox says whether the email was written, so the call ends
//! sent exactly once.

use async_trait::async_trait;
use chrono::Utc;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CannotTell, ToolContext, ToolError, TypedTool};
use crate::model::Email;

pub struct SendEmail;

/// The email to write.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Draft {
    #[schemars(length(min = 3, max = 320), regex(pattern = r"^[^@\s]+@[^@\s]+$"), example = "team@example.com")]
    pub to: String,
    #[schemars(length(max = 500), example = "A message from runlens")]
    pub subject: String,
    #[schemars(length(max = 100000), example = "Hello from a runlens agent.")]
    pub body: String,
}

/// An email in the outbox.
#[derive(Debug, Serialize)]
pub struct Sent {
    pub id: String,
    /// Always `sent`.
    pub status: &'static str,
    pub to: String,
}

#[async_trait]
impl TypedTool for SendEmail {
    const NAME: &'static str = "send_email";
    type Args = Draft;
    type Output = Sent;

    fn description(&self) -> &str {
        "Sends an email (to the runlens outbox) with a recipient, subject and body."
    }
    /// Email leaves the system: a person approves each one unless the run
    /// (or an "always" decision) says otherwise.
    fn requires_approval(&self) -> bool {
        true
    }
    fn idempotent(&self) -> bool {
        false
    }
    async fn run(&self, draft: Draft, ctx: &ToolContext) -> Result<Sent, ToolError> {
        // Past this check the email is written and the call succeeds: the
        // runner waits for it even when the run is cancelled meanwhile.
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled("cancelled: the run was cancelled before the email was written".into()));
        }
        let email = Email {
            id: format!("{}-{}", ctx.run_id, ctx.call_id),
            run_id: ctx.run_id.clone(),
            to: draft.to,
            subject: draft.subject,
            body: draft.body,
            created_at: Utc::now(),
        };
        ctx.outbox.insert_email(&email).await.map_err(|e| format!("the outbox could not be written: {e}"))?;
        Ok(Sent { id: email.id, status: "sent", to: email.to })
    }
    /// The email is one row, written in one commit under the call's id: the
    /// outbox says whether an interrupted call sent it, so after a crash the
    /// call ends as it really did — sent once, or sent now — never twice.
    async fn recover(&self, ctx: &ToolContext) -> Result<Option<Sent>, CannotTell> {
        match ctx.outbox.email(&format!("{}-{}", ctx.run_id, ctx.call_id)).await {
            Ok(Some(email)) => Ok(Some(Sent { id: email.id, status: "sent", to: email.to })),
            Ok(None) => Ok(None),
            Err(e) => {
                tracing::warn!(run_id = %ctx.run_id, call_id = %ctx.call_id, error = %e, "the outbox could not be read");
                Err(CannotTell)
            }
        }
    }
}
