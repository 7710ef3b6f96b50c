//! Kill -9 of the real binary while a tree of runs works: a lead agent calls
//! two workers in one turn (two child runs in parallel), each waits, then
//! sends an email that needs a person's approval (pausing its parent too).
//! The server is killed at seeded-random moments — while children run,
//! while the tree is paused, right after a decision — and restarted each
//! time; in the end the tree finishes with every email sent exactly once,
//! one child per call, and no model turn repeated in any run.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::plan::Rng;
use super::server::Server;
use crate::support::client_with_key;

const KILLS: u32 = 6;
/// Polls in a row in which nothing in the tree moved (no status, step or
/// call changed) before the test calls it stuck: a hang, never a speed.
const STALLED_POLLS: u32 = 300;

async fn get(http: &reqwest::Client, url: &str) -> Option<Value> {
    let resp = http.get(url).send().await.ok()?;
    resp.status().is_success().then_some(())?;
    resp.json().await.ok()
}

async fn post(http: &reqwest::Client, url: &str, body: Value) -> Option<(u16, Value)> {
    let resp = http.post(url).json(&body).send().await.ok()?;
    let status = resp.status().as_u16();
    Some((status, resp.json().await.unwrap_or_default()))
}

/// The agents and the tree's root run (created idempotently: ids are fixed).
async fn start_tree(http: &reqwest::Client, base: &str) {
    let worker_script = json!([
        {"tool_calls": [{"name": "wait", "arguments": {"seconds": 0.6}}]},
        {"text": "Writing it up.", "tool_calls": [{"name": "send_email", "arguments": {
            "to": "team@example.com", "subject": "tree report", "body": "from a worker"}}]},
        {"text": "Worker finished."}
    ]);
    let worker = json!({"id": "crash-worker", "name": "worker", "tools": ["wait", "send_email"],
        "model_settings": {"script": worker_script, "latency_ms": 200}});
    let lead_script = json!([
        {"tool_calls": [
            {"name": "worker", "arguments": {"input": "part one"}},
            {"name": "worker", "arguments": {"input": "part two"}}
        ]},
        {"text": "The tree is done."}
    ]);
    let lead = json!({"id": "crash-lead", "name": "lead", "agents": ["crash-worker"],
        "model_settings": {"script": lead_script, "latency_ms": 200}});
    for agent in [worker, lead] {
        let (status, body) = post(http, &format!("{base}/api/agents"), agent).await.expect("the server answers");
        assert!(status == 201 || status == 409, "creating an agent answered {status}: {body}");
    }
    let run = json!({"id": "crash-tree", "agent_id": "crash-lead", "initial_prompt": "Split the work."});
    let (status, body) = post(http, &format!("{base}/api/runs"), run).await.expect("the server answers");
    assert!(status == 200 || status == 201, "creating the tree answered {status}: {body}");
}

/// Every run of the tree: the root, then each call's child, read from the steps.
async fn tree_runs(http: &reqwest::Client, base: &str) -> Vec<(String, Value, Vec<Value>)> {
    let mut out = Vec::new();
    let mut todo = vec!["crash-tree".to_owned()];
    while let Some(id) = todo.pop() {
        let (Some(run), Some(steps)) = (
            get(http, &format!("{base}/api/runs/{id}")).await,
            get(http, &format!("{base}/api/runs/{id}/steps")).await,
        ) else {
            continue;
        };
        let steps = steps["steps"].as_array().cloned().unwrap_or_default();
        for call in steps.iter().flat_map(|s| s["tool_calls"].as_array().cloned().unwrap_or_default()) {
            if let Some(child) = call["child_run_id"].as_str() {
                todo.push(child.to_owned());
            }
        }
        out.push((id, run, steps));
    }
    out
}

/// Approves every call of the tree waiting for a decision.
async fn approve_all(http: &reqwest::Client, base: &str) {
    let Some(list) = get(http, &format!("{base}/api/approvals")).await else { return };
    for a in list["approvals"].as_array().into_iter().flatten() {
        let (run, call) = (a["run_id"].as_str().unwrap_or_default(), a["call_id"].as_str().unwrap_or_default());
        let url = format!("{base}/api/runs/{run}/tool-calls/{call}/approve");
        let _ = post(http, &url, json!({"comment": "approved by the tree crash test"})).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_a_run_tree_works_loses_nothing_and_repeats_nothing() {
    let seed = std::env::var("RUNLENS_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        t.as_nanos() as u64 ^ u64::from(std::process::id())
    });
    eprintln!("tree crash test: seed {seed} (RUNLENS_CRASH_SEED={seed} replays it), {KILLS} kills");
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let db_url = format!("sqlite://{}", dir.path().join("tree.db").display());
    let log = dir.path().join("server.log");
    let http =
        client_with_key(runlens_engine::net::http_builder().timeout(Duration::from_secs(15)), super::server::KEY);
    let mut server = Server::start(&http, &db_url, dir.path(), &log).await;
    start_tree(&http, &server.base).await;

    for kill in 1..=KILLS {
        let until = Instant::now() + Duration::from_millis(rng.range(150, 1200));
        while Instant::now() < until {
            if rng.chance(40) {
                approve_all(&http, &server.base).await;
            }
            tokio::time::sleep(Duration::from_millis(rng.range(20, 150))).await;
        }
        server.kill();
        server = Server::start(&http, &db_url, dir.path(), &log).await;
        // The root exists after every restart, and at most one child per call.
        let runs = tree_runs(&http, &server.base).await;
        let tail = server.log_tail();
        assert!(
            runs.iter().any(|(id, ..)| id == "crash-tree"),
            "seed {seed}: the tree is gone after kill #{kill}\n{tail}"
        );
        assert!(runs.len() <= 3, "seed {seed}: {} runs in the tree after kill #{kill}", runs.len());
    }

    let (mut last_seen, mut stalled) = (String::new(), 0);
    loop {
        approve_all(&http, &server.base).await;
        let root = get(&http, &format!("{}/api/runs/crash-tree", server.base)).await.unwrap_or_default();
        if root["status"] == "done" {
            break;
        }
        let status = root["status"].clone();
        // What the tree looks like now: every run's status and steps, with their calls.
        let seen = format!(
            "{:?}",
            tree_runs(&http, &server.base).await.iter().map(|(_, r, s)| (&r["status"], s)).collect::<Vec<_>>()
        );
        stalled = if seen == last_seen { stalled + 1 } else { 0 };
        last_seen = seen;
        assert!(stalled < STALLED_POLLS, "seed {seed}: the tree stopped moving while {status}\n{}", server.log_tail());
        assert!(status != "failed" && status != "cancelled", "seed {seed}: the tree ended {status}: {root}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let runs = tree_runs(&http, &server.base).await;
    assert_eq!(runs.len(), 3, "seed {seed}: the root and one child per call");
    for (id, run, steps) in &runs {
        assert_eq!(run["status"], "done", "seed {seed}: run {id}: {run}");
        let turns = if id == "crash-tree" { 2 } else { 3 };
        assert_eq!(steps.len(), turns, "seed {seed}: run {id} took a turn twice: {steps:#?}");
        let indexes: Vec<u64> = steps.iter().filter_map(|s| s["index"].as_u64()).collect();
        assert_eq!(indexes, (0..turns as u64).collect::<Vec<_>>(), "seed {seed}: run {id}");
    }
    let root_calls = runs[0].2[0]["tool_calls"].as_array().cloned().unwrap_or_default();
    assert!(root_calls.iter().all(|c| c["status"] == "succeeded"), "seed {seed}: {root_calls:#?}");
    let outbox = get(&http, &format!("{}/api/outbox", server.base)).await.unwrap_or_default();
    let sent: Vec<&str> =
        outbox["emails"].as_array().into_iter().flatten().filter_map(|e| e["run_id"].as_str()).collect();
    let mut children: Vec<&str> = runs[1..].iter().map(|(id, ..)| id.as_str()).collect();
    let mut sent_sorted = sent.clone();
    children.sort();
    sent_sorted.sort();
    assert_eq!(sent_sorted, children, "seed {seed}: each worker's email exactly once");
    eprintln!("tree crash test: seed {seed}: {KILLS} kills survived, 3 runs and {} emails checked", sent.len());
}
