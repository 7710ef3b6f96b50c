//! The 10,000-step fixture: a long run made by the real loop with the
//! scripted built-in model at zero latency (`runlens gen-trace`, benches).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::error::{EngineError, Result};
use crate::model::{CreateRun, Run};

/// Longest trace the fixture makes.
pub const MAX_FIXTURE_STEPS: u32 = 100_000;

impl crate::engine::Runs<'_> {
    /// Makes a run of `steps` model turns — each but the last says a few
    /// words and calls `calculator` with `"{i} + 1"`, the last answers — and
    /// waits until it is done. The run is tagged `fixture:trace`.
    ///
    /// `max_turns` and the script are set past the create-time limits on
    /// purpose (after the request was checked with the script's first
    /// turn): only the fixture may make a run this long.
    pub async fn generate_trace(self, steps: u32) -> Result<Run> {
        if !(1..=MAX_FIXTURE_STEPS).contains(&steps) {
            return Err(EngineError::Invalid(format!("steps must be 1-{MAX_FIXTURE_STEPS}")));
        }
        let mut script: Vec<Value> = (0..steps - 1)
            .map(|i| {
                json!({
                    "text": format!("Step {i}: adding one to {i}."),
                    "tool_calls": [{"name": "calculator", "arguments": {"expression": format!("{i} + 1")}}],
                })
            })
            .collect();
        script.push(json!({"text": format!("Done after {steps} steps.")}));
        let req = CreateRun {
            name: Some(format!("Generated trace ({steps} steps)")),
            initial_prompt: format!("Count with the calculator, {steps} steps."),
            tools: Some(vec!["calculator".into()]),
            tags: BTreeMap::from([("fixture".to_owned(), "trace".to_owned())]),
            model: Some("builtin".into()),
            model_settings: Some(json!({ "script": script[..1] })),
            ..CreateRun::default()
        };
        let (mut run, messages) = crate::runtime::create::prepare(&self.rt, crate::model::DEFAULT_PROJECT, req, None)?;
        run.max_turns = steps;
        run.model_settings = json!({ "script": script });
        self.rt.store.insert_run_with_history(&run, &messages, &[]).await?;
        self.spawn(run.id.clone());
        // Poll rather than wake on every event: a long run publishes ~10 per step.
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let run = self.runs().get_run(&run.id).await?;
            if run.status.is_terminal() {
                self.traces().flush_events().await;
                return Ok(run);
            }
        }
    }
}
