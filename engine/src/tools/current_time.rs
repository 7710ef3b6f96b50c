//! `current_time`: the current date and time in a time zone.
//!
//! The zone comes from the arguments, else from the run's `context.timezone`
//! (so an operator can set it without the model seeing it), else UTC.

use async_trait::async_trait;
use chrono::Utc;
use chrono_tz::Tz;
use serde_json::{json, Value};

use super::{Tool, ToolContext, ToolError};

pub struct CurrentTime;

#[async_trait]
impl Tool for CurrentTime {
    fn name(&self) -> &str {
        "current_time"
    }
    fn description(&self) -> &str {
        "Returns the current date and time (ISO 8601) in a time zone such as \"Europe/Paris\"."
    }
    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"timezone": {"type": "string",
                "description": "IANA time zone; defaults to the run's context.timezone, else UTC"}},
            "additionalProperties": false
        })
    }
    async fn call(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let name = args["timezone"]
            .as_str()
            .filter(|s| !s.is_empty())
            .or_else(|| ctx.context.get("timezone").and_then(Value::as_str))
            .unwrap_or("UTC");
        let tz: Tz = name.parse().map_err(|_| format!("unknown time zone `{name}`"))?;
        let now = Utc::now().with_timezone(&tz);
        Ok(json!({
            "timezone": name,
            "iso": now.to_rfc3339(),
            "unix": now.timestamp(),
            "weekday": now.format("%A").to_string(),
        }))
    }
}
