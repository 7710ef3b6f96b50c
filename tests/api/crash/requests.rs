//! Kill -9 of the real binary while agents ask for approvals (some with a
//! one-second timeout), people approve (with edited arguments) and reject
//! them, and agents long-poll for the outcome. After every restart: a retry
//! of each create with its idempotency key finds the request it made (the
//! same id when the first create was answered; never a second request); every
//! decision that was answered is stored exactly as answered (no decision is
//! lost, none is replaced); the badge's count equals the pending requests
//! listed; a long-poll on a decided request answers with its decision. At
//! the end, every request nobody decided whose timeout passed is rejected
//! "timed out" by runlens.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::task::JoinHandle;

use super::plan::Rng;
use super::server::{Server, KEY};
use crate::support::client_with_key;

const KILLS: u32 = 4;
/// Polls (200 ms apart) with no request changing before the timed-out ones are called stuck.
const STALLED_POLLS: u32 = 300;

/// The body of request `k` (`timeout`: one second).
fn body(k: usize, timeout: bool) -> Value {
    let mut b = json!({"tool": "send_email", "arguments": {"to": format!("c{k}@example.com"), "n": k},
        "run": {"external_id": format!("conv-{}", k % 3), "name": "crash agent"},
        "idempotency_key": format!("crash-{k}")});
    if timeout {
        b["timeout_s"] = json!(1);
    }
    b
}

#[derive(Default)]
struct Seen {
    /// Each request's body, by its number.
    asked: Vec<Value>,
    /// Requests whose create was answered: the id.
    created: BTreeMap<usize, String>,
    /// Decisions that were answered 200: the request id and its stored decision.
    decided: BTreeMap<String, Value>,
    violations: Vec<String>,
}

async fn create(http: reqwest::Client, base: String, k: usize, body: Value, seen: Arc<Mutex<Seen>>) {
    let Ok(resp) = http.post(format!("{base}/api/approval-requests")).json(&body).send().await else { return };
    let status = resp.status().as_u16();
    let v: Value = resp.json().await.unwrap_or_default();
    let mut s = seen.lock().unwrap();
    match status {
        200 | 201 => {
            s.created.insert(k, v["id"].as_str().unwrap_or_default().to_owned());
        }
        _ => s.violations.push(format!("create {k} was answered {status}: {v}")),
    }
}

async fn decide(http: reqwest::Client, base: String, id: String, approve: bool, seen: Arc<Mutex<Seen>>) {
    let (verb, body) = if approve {
        ("approve", json!({"arguments": {"to": "edited@example.com"}, "comment": "crash"}))
    } else {
        ("reject", json!({"reason": format!("no to {id}")}))
    };
    let url = format!("{base}/api/approval-requests/{id}/{verb}");
    let Ok(resp) = http.post(url).json(&body).send().await else { return };
    let status = resp.status().as_u16();
    let v: Value = resp.json().await.unwrap_or_default();
    let mut s = seen.lock().unwrap();
    match status {
        200 => {
            s.decided.insert(id, v["decision"].clone());
        }
        409 => {} // decided first by a timeout
        _ => s.violations.push(format!("{verb} {id} was answered {status}: {v}")),
    }
}

/// Every request of the project with the given status, page by page.
async fn list(http: &reqwest::Client, base: &str, status: &str) -> Result<Vec<Value>, String> {
    let mut all = Vec::new();
    let mut cursor = String::new();
    loop {
        let url = format!("{base}/api/approval-requests?status={status}&limit=200&cursor={cursor}");
        let page: Value =
            http.get(&url).send().await.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
        all.extend(page["requests"].as_array().cloned().ok_or(format!("GET {url}: {page}"))?);
        match page["next_cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => return Ok(all),
        }
    }
}

/// The invariants (see the module docs).
async fn check(http: &reqwest::Client, base: &str, seen: &Mutex<Seen>) -> Result<Vec<Value>, String> {
    let (asked, created, decided) = {
        let s = seen.lock().unwrap();
        (s.asked.clone(), s.created.clone(), s.decided.clone())
    };
    for (k, body) in asked.iter().enumerate() {
        let resp =
            http.post(format!("{base}/api/approval-requests")).json(body).send().await.map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let v: Value = resp.json().await.map_err(|e| e.to_string())?;
        match (created.get(&k), status) {
            (Some(id), 200) if v["id"] == json!(id) => {}
            (Some(id), _) => return Err(format!("request {k} was created as {id}; a retry got {status} {v}")),
            // Never answered: the retry makes it (201) or finds it (200).
            (None, 200 | 201) => {
                seen.lock().unwrap().created.insert(k, v["id"].as_str().unwrap_or_default().to_owned());
            }
            (None, _) => return Err(format!("a retry of request {k} got {status} {v}")),
        }
    }
    for (id, decision) in &decided {
        let url = format!("{base}/api/approval-requests/{id}?wait=5");
        let v: Value =
            http.get(&url).send().await.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
        if v["decision"] != *decision {
            return Err(format!("request {id} was decided {decision}; it is stored as {}", v["decision"]));
        }
    }
    let pending = list(http, base, "pending").await?;
    let decided_all = list(http, base, "decided").await?;
    let count: Value = http
        .get(format!("{base}/api/approvals/count"))
        .send()
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())?;
    if count["requests"] != json!(pending.len()) {
        return Err(format!("the badge counts {} requests; {} are pending", count["requests"], pending.len()));
    }
    let total = pending.len() + decided_all.len();
    let known = seen.lock().unwrap().created.len();
    if total != known {
        return Err(format!("{total} requests are stored for {known} idempotency keys"));
    }
    Ok(pending.into_iter().chain(decided_all).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_agents_ask_and_people_decide_loses_and_repeats_nothing() {
    let seed = std::env::var("RUNLENS_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        t.as_nanos() as u64 ^ u64::from(std::process::id())
    });
    eprintln!("requests crash test: seed {seed} (RUNLENS_CRASH_SEED={seed} replays it), {KILLS} kills");
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let db_url = format!("sqlite://{}", dir.path().join("requests.db").display());
    let log = dir.path().join("server.log");
    let http = client_with_key(runlens_engine::net::http_builder().timeout(Duration::from_secs(15)), KEY);
    let mut server = Server::start(&http, &db_url, dir.path(), &log).await;
    let seen = Arc::new(Mutex::new(Seen::default()));

    for kill in 1..=KILLS {
        let mut tasks: Vec<JoinHandle<()>> = Vec::new();
        let count = rng.range(6, 16);
        for i in 0..count {
            let k = seen.lock().unwrap().asked.len();
            let b = body(k, rng.chance(30));
            seen.lock().unwrap().asked.push(b.clone());
            tasks.push(tokio::spawn(create(http.clone(), server.base.clone(), k, b, seen.clone())));
            // Decide one of the requests created so far, now and then.
            let ids: Vec<String> = seen.lock().unwrap().created.values().cloned().collect();
            if !ids.is_empty() && rng.chance(60) {
                let id = ids[rng.range(0, ids.len() as u64) as usize].clone();
                let approve = rng.chance(50);
                tasks.push(tokio::spawn(decide(http.clone(), server.base.clone(), id, approve, seen.clone())));
            }
            let pause = if i + 1 < count { rng.range(5, 80) } else { rng.range(0, 8) };
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
        server.kill();
        for t in tasks {
            t.await.expect("a request does not panic");
        }
        server = Server::start(&http, &db_url, dir.path(), &log).await;
        let checked = check(&http, &server.base, &seen).await;
        let violations = std::mem::take(&mut seen.lock().unwrap().violations);
        if let Err(e) = checked.map(|_| ()).and_then(|()| violations.first().map_or(Ok(()), |v| Err(v.clone()))) {
            panic!("seed {seed}: after restart #{kill}: {e}\nthe end of the server log:\n{}", server.log_tail());
        }
    }

    // Every request with a timeout that nobody decided ends rejected "timed out".
    let (mut last, mut stalled) = (String::new(), 0u32);
    let all = loop {
        let all = check(&http, &server.base, &seen).await.unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let waiting: Vec<&Value> =
            all.iter().filter(|r| r["status"] == "pending" && !r["deadline"].is_null()).collect();
        if waiting.is_empty() {
            break all;
        }
        let progress: String = all.iter().map(|r| format!("{}:{};", r["id"], r["status"])).collect();
        stalled = if progress == last { stalled + 1 } else { 0 };
        last = progress;
        assert!(
            stalled < STALLED_POLLS,
            "seed {seed}: {} requests stay past their deadline: {waiting:?}",
            waiting.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let decided = seen.lock().unwrap().decided.clone();
    let mut timed_out = 0;
    for r in &all {
        let id = r["id"].as_str().unwrap_or_default();
        if !r["deadline"].is_null() && !decided.contains_key(id) {
            assert_eq!(r["status"], "rejected", "seed {seed}: {r}");
            assert_eq!(r["decision"]["reason"], "timed out", "seed {seed}: {r}");
            timed_out += 1;
        }
    }
    eprintln!(
        "requests crash test: seed {seed}: {KILLS} kills survived, {} requests, {} decisions answered and kept, \
         {timed_out} timed out",
        all.len(),
        decided.len()
    );
}
