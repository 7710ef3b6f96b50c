//! Kill -9 of the real binary while an online evaluator scores: runs of the
//! built-in model (its turns slowed, so kills find some mid-run and some
//! ended but not yet scored) are started in bursts between kills, and an
//! evaluator of every run (100 %, two scorers) scores them as they end.
//! After every restart no run has a score twice; in the end every run is
//! scored exactly once by each scorer, and the evaluator counts each run once.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::plan::Rng;
use super::server::{send, Server, KEY};
use crate::support::client_with_key;

const KILLS: u32 = 4;
/// Runs started before each kill, and after the last.
const BURST: usize = 10;
/// Polls in a row (200 ms apart) in which the evaluator's count did not move
/// before it is called stuck: a hang, never a speed.
const STALLED_POLLS: u32 = 300;

/// The names of run `id`'s scores, as kept.
async fn score_names(http: &reqwest::Client, base: &str, id: &str) -> Vec<String> {
    let (_, scores) = send(http, reqwest::Method::GET, format!("{base}/api/runs/{id}/scores"), None).await;
    scores["scores"].as_array().into_iter().flatten().map(|s| s["name"].as_str().unwrap_or("").to_owned()).collect()
}

/// No run of `runs` has one scorer's score twice.
async fn check_once(http: &reqwest::Client, base: &str, runs: &[String]) -> Result<(), String> {
    for id in runs {
        let mut names = score_names(http, base, id).await;
        let all = names.len();
        names.sort();
        names.dedup();
        if names.len() != all {
            return Err(format!("run {id} was scored twice by a scorer: {all} scores, {} names", names.len()));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_an_evaluator_scores_keeps_each_score_once_and_misses_no_run() {
    let seed = super::plan::seed("evaluator", KILLS);
    let mut rng = Rng::new(seed);
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let db_url = format!("sqlite://{}", dir.path().join("evaluators.db").display());
    let log = dir.path().join("server.log");
    let http = client_with_key(runlens_engine::net::http_builder().timeout(Duration::from_secs(15)), KEY);
    let mut server = Server::start(&http, &db_url, dir.path(), &log).await;

    let body = json!({"name": "every run", "sample_percent": 100, "scorers": [
        {"name": "short", "scorer": {"kind": "bounds", "max_turns": 3}},
        {"name": "says 2", "scorer": {"kind": "contains", "expected": "2"}}]});
    let (status, evaluator) =
        send(&http, reqwest::Method::POST, format!("{}/api/evaluators", server.base), Some(body)).await;
    assert_eq!(status, 201, "{evaluator}");
    let evaluator = evaluator["id"].as_str().unwrap().to_owned();

    let mut runs: Vec<String> = Vec::new();
    for kill in 0..=KILLS {
        for i in 0..BURST {
            let body = json!({"initial_prompt": format!("What is 1 + 1? ({kill}.{i})"),
                "model_settings": {"script": [{"text": "2"}], "latency_ms": rng.range(20, 200)}});
            let (status, run) =
                send(&http, reqwest::Method::POST, format!("{}/api/runs", server.base), Some(body)).await;
            assert_eq!(status, 201, "{run}");
            runs.push(run["id"].as_str().unwrap().to_owned());
        }
        if kill == KILLS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(rng.range(50, 400))).await;
        let url = format!("{}/api/evaluators/{evaluator}", server.base);
        let (_, before) = send(&http, reqwest::Method::GET, url, None).await;
        eprintln!("kill #{}: the evaluator had scored {} of {} runs", kill + 1, before["runs_scored"], runs.len());
        server.kill();
        server = Server::start(&http, &db_url, dir.path(), &log).await;
        if let Err(e) = check_once(&http, &server.base, &runs).await {
            panic!("seed {seed}: after restart #{}: {e}\n{}", kill + 1, server.log_tail());
        }
    }

    let (mut last, mut stalled) = (Value::Null, 0u32);
    let seen = loop {
        let url = format!("{}/api/evaluators/{evaluator}", server.base);
        let (_, e) = send(&http, reqwest::Method::GET, url, None).await;
        if e["runs_seen"].as_u64() >= Some(runs.len() as u64) {
            break e;
        }
        stalled = if e["runs_seen"] == last { stalled + 1 } else { 0 };
        last = e["runs_seen"].clone();
        assert!(stalled < STALLED_POLLS, "seed {seed}: the evaluator stopped at {e}\n{}", server.log_tail());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(seen["runs_seen"], runs.len(), "seed {seed}: each run counted once: {seen}");
    assert_eq!(seen["runs_scored"], runs.len(), "seed {seed}: {seen}");
    for id in &runs {
        let mut names = score_names(&http, &server.base, id).await;
        names.sort();
        assert_eq!(names, ["says 2", "short"], "seed {seed}: run {id}");
    }
    eprintln!(
        "evaluator crash test: seed {seed}: {KILLS} kills survived; {} runs each scored once by both scorers ({:.0} s)",
        runs.len(),
        started.elapsed().as_secs_f64()
    );
}
