//! `current_time`: the current date and time in a time zone.
//!
//! The zone comes from the arguments, else from the run's `context.timezone`
//! (so an operator can set it without the model seeing it), else UTC.

use async_trait::async_trait;
use chrono::Utc;
use chrono_tz::Tz;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ToolContext, ToolError, TypedTool};

pub struct CurrentTime;

/// The current_time tool's arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimeZone {
    /// IANA time zone; defaults to the run's context.timezone, else UTC
    // May be left out; `null` is not offered.
    #[schemars(extend("type" = "string"))]
    pub timezone: Option<String>,
}

/// The time in a zone.
#[derive(Debug, Serialize)]
pub struct Now {
    pub timezone: String,
    /// RFC 3339, with the zone's offset.
    pub iso: String,
    pub unix: i64,
    pub weekday: String,
}

#[async_trait]
impl TypedTool for CurrentTime {
    const NAME: &'static str = "current_time";
    type Args = TimeZone;
    type Output = Now;

    fn description(&self) -> &str {
        "Returns the current date and time (ISO 8601) in a time zone such as \"Europe/Paris\"."
    }
    async fn run(&self, args: TimeZone, ctx: &ToolContext) -> Result<Now, ToolError> {
        let name = args
            .timezone
            .filter(|s| !s.is_empty())
            .or_else(|| ctx.context.get("timezone").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| "UTC".to_owned());
        let tz: Tz = name.parse().map_err(|_| format!("unknown time zone `{name}`"))?;
        let now = Utc::now().with_timezone(&tz);
        Ok(Now { iso: now.to_rfc3339(), unix: now.timestamp(), weekday: now.format("%A").to_string(), timezone: name })
    }
}
