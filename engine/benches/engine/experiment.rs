//! Items per second of an experiment: 1,000 dataset items, each a run of
//! the built-in model that calls the calculator once (answered from the
//! item's recorded result: no tool runs) and answers, scored by a
//! `contains` scorer, 32 at a time. The clock runs from the experiment's
//! start (every item's run checked first) to its end (every run scored).

use std::time::{Duration, Instant};

use runlens_engine::model::{Actor, ExperimentStatus, DEFAULT_PROJECT};
use serde_json::{json, Value};

use super::{bench, Stores};

const ITEMS: usize = 1000;

pub async fn experiment(dir: &Stores) {
    let b = bench(dir, "experiment", 64).await;
    let system = Actor::system();
    let new = serde_json::from_value(json!({"name": "bench"})).unwrap();
    let dataset = b.engine.datasets().create(DEFAULT_PROJECT, new, &system).await.unwrap();
    let items: Vec<Value> = (0..ITEMS)
        .map(|i| {
            json!({"input": {"prompt": format!("What is 1 + 1? (case {i})")}, "expected": "2",
                "recorded_results": [{"tool": "calculator", "arguments": {"expression": "1 + 1"}, "result": 2}]})
        })
        .collect();
    let items = items.into_iter().map(|i| serde_json::from_value(i).unwrap()).collect();
    b.engine.datasets().add_items(DEFAULT_PROJECT, &dataset.id, items, &system).await.unwrap();
    let req = json!({"dataset_id": dataset.id, "model": "builtin", "tools": ["calculator"], "concurrency": 32,
        "model_settings": {"script": [
            {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1 + 1"}}]},
            {"text": "2"}]},
        "scorers": [{"name": "correct", "scorer": {"kind": "contains"}}]});
    let start = Instant::now();
    let exp =
        (b.engine.experiments()).start(DEFAULT_PROJECT, serde_json::from_value(req).unwrap(), &system).await.unwrap();
    loop {
        let now = b.engine.experiments().get(DEFAULT_PROJECT, &exp.id).await.unwrap();
        if now.status != ExperimentStatus::Running {
            assert_eq!(now.status, ExperimentStatus::Done);
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = start.elapsed();
    let report = b.engine.experiments().report(DEFAULT_PROJECT, &exp.id).await.unwrap();
    assert_eq!(report.progress.done as usize, ITEMS);
    assert_eq!(report.scorers[0].summary.yes as usize, ITEMS);
    println!(
        "experiment items/s: {:>6.0} ({ITEMS} items, recorded tools, scored, 32 at a time, {:.2} s)  [target ≥ 200]",
        ITEMS as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
}
