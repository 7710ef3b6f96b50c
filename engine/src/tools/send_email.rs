//! `send_email`: writes an email to runlens's outbox.
//!
//! runlens does not deliver mail; the outbox table is the visible effect
//! (shown on the Outbox page), which makes this the demonstration tool for
//! calls with side effects. Not idempotent: after a crash mid-call it is
//! reported as interrupted, never sent twice.

use async_trait::async_trait;
use chrono::Utc;
use serde_json::{json, Value};

use super::{Tool, ToolContext, ToolError};
use crate::model::Email;

pub struct SendEmail;

#[async_trait]
impl Tool for SendEmail {
    fn name(&self) -> &str {
        "send_email"
    }
    fn description(&self) -> &str {
        "Sends an email (to the runlens outbox) with a recipient, subject and body."
    }
    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "to": {"type": "string", "minLength": 3, "maxLength": 320, "pattern": "^[^@\\s]+@[^@\\s]+$",
                       "examples": ["team@example.com"]},
                "subject": {"type": "string", "maxLength": 500, "examples": ["A message from runlens"]},
                "body": {"type": "string", "maxLength": 100000, "examples": ["Hello from a runlens agent."]}
            },
            "required": ["to", "subject", "body"],
            "additionalProperties": false
        })
    }
    /// Email leaves the system: a person approves each one unless the run
    /// (or an "always" decision) says otherwise.
    fn requires_approval(&self) -> bool {
        true
    }
    fn idempotent(&self) -> bool {
        false
    }
    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        // Past this check the email is written and the call succeeds: the
        // runner waits for it even when the run is cancelled meanwhile.
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled("cancelled: the run was cancelled before the email was written".into()));
        }
        let field = |k: &str| args[k].as_str().unwrap_or_default().to_owned();
        let email = Email {
            id: format!("{}-{}", ctx.run_id, ctx.call_id),
            run_id: ctx.run_id.clone(),
            to: field("to"),
            subject: field("subject"),
            body: field("body"),
            created_at: Utc::now(),
        };
        ctx.store.insert_email(&email).await.map_err(|e| format!("the outbox could not be written: {e}"))?;
        Ok(json!({ "id": email.id, "status": "sent", "to": email.to }))
    }
}
