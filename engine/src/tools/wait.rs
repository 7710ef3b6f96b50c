//! `wait`: sleeps for a number of seconds; cancelling the run interrupts it.

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ToolContext, ToolError, TypedTool};

/// One hour: long enough for demonstrations, short enough to catch typos.
const MAX_SECONDS: f64 = 3600.0;

pub struct Wait;

/// How long to wait.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Seconds {
    // Seconds, fractions allowed (no description is sent: the tool's says it).
    #[schemars(range(min = 0, max = MAX_SECONDS))]
    pub seconds: f64,
}

/// A wait that ran its course.
#[derive(Debug, Serialize)]
pub struct Waited {
    pub waited_seconds: f64,
}

#[async_trait]
impl TypedTool for Wait {
    const NAME: &'static str = "wait";
    type Args = Seconds;
    type Output = Waited;

    fn description(&self) -> &str {
        "Waits for the given number of seconds (at most 3600), then returns."
    }
    async fn run(&self, Seconds { seconds }: Seconds, ctx: &ToolContext) -> Result<Waited, ToolError> {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs_f64(seconds.clamp(0.0, MAX_SECONDS))) => {
                Ok(Waited { waited_seconds: seconds })
            }
            _ = ctx.cancel.cancelled() => Err(ToolError::Cancelled("the wait was interrupted: the run was cancelled".into())),
        }
    }
}
