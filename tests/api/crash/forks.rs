//! Kill -9 of the real binary while forks from steps (with a tool result
//! replaced) and recorded replays are started and run. After every restart:
//! every fork or replay that was answered 201 exists; every fork holds its
//! parent's history whole up to its step (never part of it), with the
//! replaced result; the originals are unchanged. At the end every fork and
//! replay is `done`: each fork answered from its replaced result, each
//! replay identical to its original.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use super::plan::Rng;
use super::server::{Server, KEY};
use crate::support::client_with_key;

const KILLS: u32 = 3;
const ORIGINALS: usize = 3;
/// Polls (200 ms apart) with nothing moving before the runs are called stuck.
const STALLED_POLLS: u32 = 300;

#[derive(Default)]
struct Seen {
    /// Forks answered 201: id → (parent, step, replaced value).
    forks: BTreeMap<String, (String, u64, i64)>,
    /// Replays answered 201: id → original.
    replays: BTreeMap<String, String>,
    violations: Vec<String>,
}

async fn get(http: &reqwest::Client, url: String) -> Result<Value, String> {
    let resp = http.get(&url).send().await.map_err(|e| format!("GET {url}: {e}"))?;
    resp.json().await.map_err(|e| format!("GET {url}: {e}"))
}

async fn post(http: reqwest::Client, url: String, body: Value, seen: Arc<Mutex<Seen>>, what: (String, u64, i64)) {
    let Ok(resp) = http.post(&url).json(&body).send().await else { return };
    let status = resp.status().as_u16();
    let v: Value = resp.json().await.unwrap_or_default();
    let mut s = seen.lock().unwrap();
    match status {
        201 => {
            let id = v["id"].as_str().unwrap_or_default().to_owned();
            if url.ends_with("/replay") {
                s.replays.insert(id, what.0);
            } else {
                s.forks.insert(id, what);
            }
        }
        _ => s.violations.push(format!("POST {url} was answered {status}: {v}")),
    }
}

/// The invariants after a restart; the forks and replays not finished yet.
async fn check(
    http: &reqwest::Client,
    base: &str,
    seen: &Mutex<Seen>,
    originals: &BTreeMap<String, Value>,
) -> Result<usize, String> {
    for (id, steps) in originals {
        let now = get(http, format!("{base}/api/runs/{id}/steps")).await?;
        if now != *steps {
            return Err(format!("original {id} changed:\n{now}\n{steps}"));
        }
    }
    let (forks, replays) = {
        let s = seen.lock().unwrap();
        (s.forks.clone(), s.replays.clone())
    };
    let mut open = 0;
    for (id, (parent, step, value)) in &forks {
        let run = get(http, format!("{base}/api/runs/{id}")).await?;
        if run["forked_from_step"] != json!(step) || run["parent_run_id"] != json!(parent) {
            return Err(format!("fork {id} is not the fork of {parent} at step {step}: {run}"));
        }
        let steps = get(http, format!("{base}/api/runs/{id}/steps")).await?;
        let steps = steps["steps"].as_array().cloned().unwrap_or_default();
        let theirs = originals[parent]["steps"].as_array().cloned().unwrap_or_default();
        for i in 0..=*step as usize {
            let (ours, orig) = (steps.get(i), theirs.get(i));
            let (Some(ours), Some(orig)) = (ours, orig) else {
                return Err(format!("fork {id} lacks step {i} of its parent's history"));
            };
            let want = if i == *step as usize { json!(value) } else { orig["tool_calls"][0]["result"].clone() };
            if ours["tool_calls"][0]["result"] != want {
                return Err(format!(
                    "fork {id} step {i}: {} where {want} was expected",
                    ours["tool_calls"][0]["result"]
                ));
            }
        }
        match run["status"].as_str() {
            Some("done") => {
                let summary = run["summary"].as_str().unwrap_or_default();
                if !summary.contains(&value.to_string()) {
                    return Err(format!("fork {id} ended without its replaced result {value}: {summary}"));
                }
            }
            Some("pending" | "running") => open += 1,
            other => return Err(format!("fork {id} is {other:?}: {run}")),
        }
    }
    for (id, of) in &replays {
        let run = get(http, format!("{base}/api/runs/{id}")).await?;
        if run["replay"]["of"] != json!(of) {
            return Err(format!("replay {id} does not say it replays {of}: {run}"));
        }
        match run["status"].as_str() {
            Some("done") if run["replay"]["diverged_at"].is_null() => {}
            Some("pending" | "running") => open += 1,
            _ => return Err(format!("replay {id} of the unchanged {of} did not end identical: {run}")),
        }
    }
    Ok(open)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_forks_and_replays_start_leaves_each_whole_and_each_ends_right() {
    let seed = std::env::var("RUNLENS_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        t.as_nanos() as u64 ^ u64::from(std::process::id())
    });
    eprintln!("forks crash test: seed {seed} (RUNLENS_CRASH_SEED={seed} replays it), {KILLS} kills");
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let db_url = format!("sqlite://{}", dir.path().join("forks.db").display());
    let log = dir.path().join("server.log");
    let http = client_with_key(runlens_engine::net::http_builder().timeout(Duration::from_secs(15)), KEY);
    let mut server = Server::start(&http, &db_url, dir.path(), &log).await;
    // Originals: three calculator steps (each a little slow), then an answer.
    let script: Vec<Value> = (1..=3)
        .map(|i| json!({"tool_calls": [{"name": "calculator", "arguments": {"expression": format!("{i}+{i}")}}]}))
        .chain([json!({"text": "Added."})])
        .collect();
    let mut originals = BTreeMap::new();
    for _ in 0..ORIGINALS {
        let body = json!({"initial_prompt": "Add", "tools": ["calculator"],
                          "model_settings": {"script": script, "latency_ms": 30}});
        let run = http.post(format!("{}/api/runs", server.base)).json(&body).send().await.unwrap();
        let id = run.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
        originals.insert(id, Value::Null);
    }
    for (id, steps) in originals.iter_mut() {
        loop {
            let run = get(&http, format!("{}/api/runs/{id}", server.base)).await.unwrap();
            if run["status"] == "done" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Read until two reads agree: what the test compares with later.
        let mut read = get(&http, format!("{}/api/runs/{id}/steps", server.base)).await.unwrap();
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let again = get(&http, format!("{}/api/runs/{id}/steps", server.base)).await.unwrap();
            if again == read {
                break;
            }
            read = again;
        }
        *steps = read;
    }
    let ids: Vec<String> = originals.keys().cloned().collect();
    let seen = Arc::new(Mutex::new(Seen::default()));
    for kill in 1..=KILLS {
        let mut tasks = Vec::new();
        for i in 0..rng.range(3, 8) {
            let parent = ids[rng.range(0, ids.len() as u64) as usize].clone();
            let steps = originals[&parent]["steps"].as_array().cloned().unwrap_or_default();
            let base = server.base.clone();
            if rng.chance(40) {
                let url = format!("{base}/api/runs/{parent}/replay");
                let what = (parent, 0, 0);
                tasks.push(tokio::spawn(post(http.clone(), url, json!({"mode": "recorded"}), seen.clone(), what)));
            } else {
                let step = rng.range(0, 3);
                let call = steps[step as usize]["tool_calls"][0]["id"].as_str().unwrap_or_default().to_owned();
                let value = 1000 + i64::from(kill) * 100 + i as i64;
                // Without the script, the built-in model answers from the results it sees.
                let body = json!({"from_step": step, "tool_results": {call: value},
                                  "model_settings": {"latency_ms": 30}});
                let url = format!("{base}/api/runs/{parent}/fork");
                tasks.push(tokio::spawn(post(http.clone(), url, body, seen.clone(), (parent, step, value))));
            }
            tokio::time::sleep(Duration::from_millis(rng.range(0, 60))).await;
        }
        server.kill();
        for t in tasks {
            t.await.expect("a request does not panic");
        }
        server = Server::start(&http, &db_url, dir.path(), &log).await;
        let checked = check(&http, &server.base, &seen, &originals).await;
        let violations = std::mem::take(&mut seen.lock().unwrap().violations);
        if let Err(e) = checked.map(|_| ()).and_then(|()| violations.first().map_or(Ok(()), |v| Err(v.clone()))) {
            panic!("seed {seed}: after restart #{kill}: {e}\nthe end of the server log:\n{}", server.log_tail());
        }
    }
    let (mut last, mut stalled) = (usize::MAX, 0u32);
    loop {
        let open = check(&http, &server.base, &seen, &originals)
            .await
            .unwrap_or_else(|e| panic!("seed {seed}: at the end: {e}\n{}", server.log_tail()));
        if open == 0 {
            break;
        }
        stalled = if open == last { stalled + 1 } else { 0 };
        last = open;
        assert!(stalled < STALLED_POLLS, "seed {seed}: {open} forks or replays stopped moving\n{}", server.log_tail());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let s = seen.lock().unwrap();
    eprintln!(
        "forks crash test: seed {seed}: {KILLS} kills survived, {} forks and {} replays answered 201, all whole and done",
        s.forks.len(),
        s.replays.len()
    );
}
