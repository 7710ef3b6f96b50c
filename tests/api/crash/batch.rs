//! Kill -9 of the real binary while comparison groups are started
//! (`POST /api/runs/batch`): batches of three models (two served by a mock
//! OpenAI-compatible provider in this process, answering after a pause, and
//! the built-in model) and scripted batches of the built-in model alone, each
//! named after its place in the test. After every restart and at the end,
//! every group in the store is whole — exactly the models its batch asked
//! for, in order — or absent, never partial; every batch answered 201 exists
//! with the runs the answer named; no batch makes two groups; and in the end
//! every member is `done`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::task::JoinHandle;

use super::plan::Rng;
use super::server::{Server, KEY};
use crate::support::client_with_key;

const KILLS: u32 = 5;
/// How long the mock provider takes to answer, so kills find members mid-turn.
const MODEL_LATENCY: Duration = Duration::from_millis(250);
/// Polls in a row (200 ms apart) in which no member moved (no status or step
/// count changed) before the members are called stuck: a hang, never a speed.
const STALLED_POLLS: u32 = 300;

const MIXED: [&str; 3] = ["mock/small", "builtin", "mock/large"];

/// A chat completion answering "It is 4.", after [`MODEL_LATENCY`].
async fn complete(body: axum::body::Bytes) -> axum::Json<Value> {
    tokio::time::sleep(MODEL_LATENCY).await;
    let req: Value = serde_json::from_slice(&body).unwrap_or_default();
    axum::Json(json!({"id": "crash", "object": "chat.completion", "model": req["model"],
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "It is 4."}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}))
}

/// Starts the mock provider; its base URL.
async fn mock_provider() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(complete));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

/// Batch `k`'s body and the models it asks for.
fn batch_body(k: usize, rng: &mut Rng) -> (Value, Vec<&'static str>) {
    let name = format!("batch {k}");
    if rng.chance(70) {
        let body = json!({"name": name, "initial_prompt": "What is 2+2?", "tools": ["calculator"], "models": MIXED});
        return (body, MIXED.to_vec());
    }
    let script = json!([
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "2+2"}}]},
        {"text": "It is 4."}
    ]);
    let body = json!({"name": name, "initial_prompt": "What is 2+2?", "tools": ["calculator"],
        "model_settings": {"script": script, "latency_ms": 200}, "models": ["builtin"]});
    (body, vec!["builtin"])
}

/// What the test knows of the batches it posted.
#[derive(Default)]
struct Batches {
    /// Each batch's models, by its number.
    asked: Vec<Vec<&'static str>>,
    /// Batches answered 201: the group id and the run ids of the answer.
    created: BTreeMap<usize, (String, Vec<String>)>,
    violations: Vec<String>,
}

async fn post_batch(http: reqwest::Client, base: String, k: usize, body: Value, batches: Arc<Mutex<Batches>>) {
    let Ok(resp) = http.post(format!("{base}/api/runs/batch")).json(&body).send().await else { return };
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    let mut b = batches.lock().unwrap();
    match status {
        201 => {
            let v: Value = serde_json::from_str(&text).unwrap_or_default();
            let group = v["group_id"].as_str().unwrap_or_default().to_owned();
            let runs = v["runs"].as_array().into_iter().flatten();
            let ids = runs.map(|r| r["id"].as_str().unwrap_or_default().to_owned()).collect();
            b.created.insert(k, (group, ids));
        }
        429 | 503 => {} // turned away under load: nothing was created
        _ => b.violations.push(format!("batch {k} was answered {status}: {text}")),
    }
}

/// Every run of the store, page by page.
async fn all_runs(http: &reqwest::Client, base: &str) -> Result<Vec<Value>, String> {
    let mut runs = Vec::new();
    let mut cursor = String::new();
    loop {
        let url = format!("{base}/api/runs?all=true&limit=200&cursor={cursor}");
        let resp = http.get(&url).send().await.map_err(|e| format!("GET {url}: {e}"))?;
        let page: Value = resp.json().await.map_err(|e| format!("GET {url}: {e}"))?;
        runs.extend(page["runs"].as_array().cloned().ok_or(format!("GET {url}: {page}"))?);
        match page["next_cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => return Ok(runs),
        }
    }
}

/// The invariants (see the module docs); when they hold, every run and the
/// number of groups whose batch got no answer (a kill cut it off).
async fn check(http: &reqwest::Client, base: &str, batches: &Mutex<Batches>) -> Result<(Vec<Value>, usize), String> {
    let runs = all_runs(http, base).await?;
    // Each group's runs, oldest first (the list is newest first).
    let mut groups: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for run in runs.iter().rev() {
        let group = run["group_id"].as_str().ok_or_else(|| format!("a run in no group: {run}"))?;
        groups.entry(group.to_owned()).or_default().push(run);
    }
    let b = batches.lock().unwrap();
    let mut batch_group: BTreeMap<usize, &str> = BTreeMap::new();
    for (group, members) in &groups {
        let name = members[0]["name"].as_str().unwrap_or_default();
        let k: usize = (name.strip_prefix("batch ").and_then(|n| n.split(' ').next()).and_then(|n| n.parse().ok()))
            .ok_or_else(|| format!("group {group}: unexpected name `{name}`"))?;
        let asked = b.asked.get(k).ok_or_else(|| format!("group {group}: batch {k} was never posted"))?;
        let models: Vec<&str> = members.iter().map(|r| r["model"].as_str().unwrap_or_default()).collect();
        let names: Vec<String> = asked.iter().map(|m| format!("batch {k} · {m}")).collect();
        let got: Vec<&str> = members.iter().map(|r| r["name"].as_str().unwrap_or_default()).collect();
        if models != *asked || got != names {
            return Err(format!("group {group} of batch {k} is partial: it holds {models:?} of {asked:?}"));
        }
        if let Some(other) = batch_group.insert(k, group) {
            return Err(format!("batch {k} made two groups: {other} and {group}"));
        }
    }
    for (k, (group, ids)) in &b.created {
        let members =
            groups.get(group).ok_or_else(|| format!("batch {k} was answered 201, but group {group} is gone"))?;
        let stored: Vec<&str> = members.iter().map(|r| r["id"].as_str().unwrap_or_default()).collect();
        if stored != *ids {
            return Err(format!("group {group} of batch {k} holds {stored:?}; the answer named {ids:?}"));
        }
    }
    let unanswered = batch_group.keys().filter(|k| !b.created.contains_key(k)).count();
    drop(b);
    Ok((runs, unanswered))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_batches_start_leaves_every_group_whole_or_absent() {
    let seed = super::plan::seed("batch", KILLS);
    let mut rng = Rng::new(seed);
    let test_started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("runlens.toml");
    let provider = mock_provider().await;
    let toml =
        format!("[providers.mock]\nbase_url = \"{provider}\"\nmodels = [\"small\", \"large\"]\nstream = false\n");
    std::fs::write(&config, toml).unwrap();
    let config = config.display().to_string();
    let args = ["--config", config.as_str()];
    let db_url = format!("sqlite://{}", dir.path().join("batch.db").display());
    let log = dir.path().join("server.log");
    let http = client_with_key(runlens_engine::net::http_builder().timeout(Duration::from_secs(15)), KEY);
    let mut server = Server::start_with(&http, &db_url, dir.path(), &log, &args).await;
    let batches = Arc::new(Mutex::new(Batches::default()));

    for kill in 1..=KILLS {
        // A few batches a while apart, the last one posted just before the kill.
        let mut posts: Vec<JoinHandle<()>> = Vec::new();
        let count = rng.range(2, 6);
        for i in 0..count {
            let k = batches.lock().unwrap().asked.len();
            let (body, models) = batch_body(k, &mut rng);
            batches.lock().unwrap().asked.push(models);
            posts.push(tokio::spawn(post_batch(http.clone(), server.base.clone(), k, body, batches.clone())));
            let pause = if i + 1 < count { rng.range(20, 300) } else { rng.range(0, 12) };
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
        server.kill();
        for p in posts {
            p.await.expect("a post does not panic");
        }
        server = Server::start_with(&http, &db_url, dir.path(), &log, &args).await;
        let checked = check(&http, &server.base, &batches).await;
        let violations = std::mem::take(&mut batches.lock().unwrap().violations);
        if let Err(e) = checked.map(|_| ()).and_then(|()| violations.first().map_or(Ok(()), |v| Err(v.clone()))) {
            panic!("seed {seed}: after restart #{kill}: {e}\nthe end of the server log:\n{}", server.log_tail());
        }
    }

    let (mut last_progress, mut stalled) = (String::new(), 0u32);
    let (runs, unanswered) = loop {
        let checked = check(&http, &server.base, &batches).await;
        let (runs, unanswered) =
            checked.unwrap_or_else(|e| panic!("seed {seed}: at the end: {e}\n{}", server.log_tail()));
        let open: Vec<&Value> =
            runs.iter().filter(|r| !matches!(r["status"].as_str(), Some("done" | "failed" | "cancelled"))).collect();
        if open.is_empty() {
            break (runs, unanswered);
        }
        let progress: String =
            runs.iter().map(|r| format!("{}:{}:{};", r["id"], r["status"], r["step_count"])).collect();
        stalled = if progress == last_progress { stalled + 1 } else { 0 };
        last_progress = progress;
        assert!(stalled < STALLED_POLLS, "seed {seed}: {} members stopped moving: {open:?}", open.len());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for run in &runs {
        assert_eq!(run["status"], "done", "seed {seed}: {run}\n{}", server.log_tail());
    }
    let b = batches.lock().unwrap();
    let groups = runs.iter().filter_map(|r| r["group_id"].as_str()).collect::<std::collections::BTreeSet<_>>();
    eprintln!(
        "batch crash test: seed {seed}: {KILLS} kills survived, {} batches posted, {} answered 201 ({} without \
         an answer stored whole, the others not at all), {} groups of {} runs checked ({:.0} s)",
        b.asked.len(),
        b.created.len(),
        unanswered,
        groups.len(),
        runs.len(),
        test_started.elapsed().as_secs_f64()
    );
    assert!(!b.created.is_empty(), "seed {seed}: no batch was ever answered");
}
