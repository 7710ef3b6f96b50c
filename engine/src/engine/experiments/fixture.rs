//! The experiment page's fixture (`runlens gen-experiment`): a finished
//! experiment of N items made by the real driver with the built-in model.

use crate::error::{EngineError, Result};
use crate::model::{Actor, Experiment, ExperimentStatus};
use crate::runtime::now;

impl super::Experiments<'_> {
    /// A fixture experiment for the experiment page's benchmark: a dataset
    /// of `items` items (`fixture: N items`), each run by the built-in model
    /// (answering from a script, no tool) and scored by `contains`, 32 at a
    /// time; waits until it is done. At most [`crate::model::MAX_DATASET_ITEMS`].
    pub async fn generate(self, items: u32) -> Result<Experiment> {
        use crate::model::{MAX_DATASET_ITEMS, MAX_ITEMS_PER_REQUEST};
        if !(1..=MAX_DATASET_ITEMS).contains(&items) {
            return Err(EngineError::Invalid(format!("items must be 1-{MAX_DATASET_ITEMS}")));
        }
        let project = crate::model::DEFAULT_PROJECT;
        let by = Actor::system();
        let stamp = now().format("%Y-%m-%d %H:%M:%S");
        let new = serde_json::from_value(serde_json::json!({"name": format!("fixture: {items} items at {stamp}")}))
            .map_err(|e| EngineError::Internal(e.to_string()))?;
        let dataset = self.datasets().create(project, new, &by).await?;
        let all: Vec<u32> = (0..items).collect();
        for chunk in all.chunks(MAX_ITEMS_PER_REQUEST) {
            let batch = chunk
                .iter()
                .map(|i| {
                    let expected = if i % 5 == 0 { "3" } else { "2" };
                    serde_json::from_value(serde_json::json!({
                        "input": {"prompt": format!("What is 1 + 1? (case {i})")}, "expected": expected}))
                })
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| EngineError::Internal(e.to_string()))?;
            self.datasets().add_items(project, &dataset.id, batch, &by).await?;
        }
        let req = serde_json::from_value(serde_json::json!({
            "dataset_id": dataset.id, "model": "builtin", "tools": [], "concurrency": 32,
            "name": format!("fixture: {items} items"),
            "model_settings": {"script": [{"text": "2"}]},
            "scorers": [{"name": "correct", "scorer": {"kind": "contains"}}]}))
        .map_err(|e| EngineError::Internal(e.to_string()))?;
        let exp = self.start(project, req, &by).await?;
        loop {
            let now = self.get(project, &exp.id).await?;
            if now.status != ExperimentStatus::Running {
                return Ok(now);
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
}
