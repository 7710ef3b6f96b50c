//! `wait`: sleeps for a number of seconds; cancelling the run interrupts it.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{Tool, ToolContext, ToolError};

/// One hour: long enough for demonstrations, short enough to catch typos.
const MAX_SECONDS: f64 = 3600.0;

pub struct Wait;

#[async_trait]
impl Tool for Wait {
    fn name(&self) -> &str {
        "wait"
    }
    fn description(&self) -> &str {
        "Waits for the given number of seconds (at most 3600), then returns."
    }
    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": MAX_SECONDS}},
            "required": ["seconds"],
            "additionalProperties": false
        })
    }
    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let seconds = args["seconds"].as_f64().ok_or("`seconds` must be a number")?;
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs_f64(seconds.clamp(0.0, MAX_SECONDS))) => {
                Ok(json!({ "waited_seconds": seconds }))
            }
            _ = ctx.cancel.cancelled() => Err(ToolError::Cancelled("the wait was interrupted: the run was cancelled".into())),
        }
    }
}
