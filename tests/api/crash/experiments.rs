//! Kill -9 of the real binary while experiments run: two experiments of the
//! built-in model (its turns slowed, so kills find items mid-run) over a
//! dataset of 36 items, 3 at a time, scored by a scorer; the server is
//! killed at random moments and restarted. After every restart and at the
//! end, no item of either experiment has two runs; in the end both
//! experiments are `done`, every item has exactly one run, `done`, with one
//! score of the scorer, and the report counts them all.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::plan::Rng;
use super::server::{send, Server, KEY};
use crate::support::client_with_key;

const KILLS: u32 = 4;
const ITEMS: usize = 36;
/// Polls in a row (200 ms apart) in which an experiment's progress did not
/// move before it is called stuck: a hang, never a speed.
const STALLED_POLLS: u32 = 300;

/// Each item's runs of experiment `id`, from the runs list (every page).
async fn runs_by_item(http: &reqwest::Client, base: &str, id: &str) -> BTreeMap<String, Vec<Value>> {
    let mut by_item: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut cursor = String::new();
    loop {
        let url = format!("{base}/api/runs?limit=200&cursor={cursor}");
        let (_, page) = send(http, reqwest::Method::GET, url, None).await;
        for run in page["runs"].as_array().into_iter().flatten() {
            if run["experiment"]["experiment_id"] == id {
                let item = run["experiment"]["item_id"].as_str().unwrap_or_default().to_owned();
                by_item.entry(item).or_default().push(run.clone());
            }
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => return by_item,
        }
    }
}

/// No item of experiment `id` has two runs.
async fn check_once(http: &reqwest::Client, base: &str, id: &str) -> Result<BTreeMap<String, Vec<Value>>, String> {
    let by_item = runs_by_item(http, base, id).await;
    match by_item.iter().find(|(_, runs)| runs.len() > 1) {
        Some((item, runs)) => Err(format!("item {item} of experiment {id} ran {} times", runs.len())),
        None => Ok(by_item),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_experiments_runs_each_item_once_and_completes() {
    let seed = super::plan::seed("experiment", KILLS);
    let mut rng = Rng::new(seed);
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let db_url = format!("sqlite://{}", dir.path().join("experiments.db").display());
    let log = dir.path().join("server.log");
    let http = client_with_key(runlens_engine::net::http_builder().timeout(Duration::from_secs(15)), KEY);
    let mut server = Server::start(&http, &db_url, dir.path(), &log).await;

    let (status, dataset) =
        send(&http, reqwest::Method::POST, format!("{}/api/datasets", server.base), Some(json!({"name": "crash"})))
            .await;
    assert_eq!(status, 201, "{dataset}");
    let dataset = dataset["id"].as_str().unwrap().to_owned();
    let items: Vec<Value> = (0..ITEMS)
        .map(|i| json!({"input": {"prompt": format!("What is {i} + 1?")}, "expected": (i + 1).to_string()}))
        .collect();
    let url = format!("{}/api/datasets/{dataset}/items", server.base);
    let (status, added) = send(&http, reqwest::Method::POST, url, Some(json!({"items": items}))).await;
    assert_eq!(status, 201, "{added}");
    let mut experiments = Vec::new();
    for answer in ["1", "the answer"] {
        let body = json!({"dataset_id": dataset, "model": "builtin", "concurrency": 3,
            "model_settings": {"script": [{"text": answer}], "latency_ms": 200},
            "scorers": [{"name": "correct", "scorer": {"kind": "contains"}}]});
        let (status, exp) =
            send(&http, reqwest::Method::POST, format!("{}/api/experiments", server.base), Some(body)).await;
        assert_eq!(status, 201, "{exp}");
        experiments.push(exp["id"].as_str().unwrap().to_owned());
    }

    for kill in 1..=KILLS {
        tokio::time::sleep(Duration::from_millis(rng.range(100, 500))).await;
        let url = format!("{}/api/experiments/{}", server.base, experiments[kill as usize % 2]);
        let (_, before) = send(&http, reqwest::Method::GET, url, None).await;
        eprintln!(
            "kill #{kill}: the experiment was {} with {} of {ITEMS} items done",
            before["experiment"]["status"], before["progress"]["done"]
        );
        server.kill();
        server = Server::start(&http, &db_url, dir.path(), &log).await;
        for id in &experiments {
            if let Err(e) = check_once(&http, &server.base, id).await {
                panic!("seed {seed}: after restart #{kill}: {e}\n{}", server.log_tail());
            }
        }
    }

    for id in &experiments {
        let (mut last, mut stalled) = (Value::Null, 0u32);
        let report = loop {
            let (_, report) =
                send(&http, reqwest::Method::GET, format!("{}/api/experiments/{id}", server.base), None).await;
            if report["experiment"]["status"] != "running" {
                break report;
            }
            stalled = if report["progress"] == last { stalled + 1 } else { 0 };
            last = report["progress"].clone();
            assert!(stalled < STALLED_POLLS, "seed {seed}: experiment {id} stopped moving: {report}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(report["experiment"]["status"], "done", "seed {seed}: {report}\n{}", server.log_tail());
        assert_eq!(report["progress"]["done"], ITEMS, "seed {seed}: {report}");
        assert_eq!(report["scorers"][0]["summary"]["count"], ITEMS, "seed {seed}: each run scored once: {report}");
        let by_item = check_once(&http, &server.base, id).await.unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(by_item.len(), ITEMS, "seed {seed}: every item ran");
        for runs in by_item.values() {
            let run_id = runs[0]["id"].as_str().unwrap();
            assert_eq!(runs[0]["status"], "done", "seed {seed}: {}", runs[0]);
            let url = format!("{}/api/runs/{run_id}/scores", server.base);
            let (_, scores) = send(&http, reqwest::Method::GET, url, None).await;
            assert_eq!(scores["scores"].as_array().map_or(0, Vec::len), 1, "seed {seed}: {scores}");
        }
    }
    eprintln!(
        "experiment crash test: seed {seed}: {KILLS} kills survived; 2 experiments of {ITEMS} items each ran every \
         item once and scored it once ({:.0} s)",
        started.elapsed().as_secs_f64()
    );
}
