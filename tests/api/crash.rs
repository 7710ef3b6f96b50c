//! The crash test: the real `runlens` binary on a database file, killed with
//! SIGKILL at seeded-random moments while it streams answers, runs tools,
//! waits, pauses for approvals, takes follow-ups and sends email, and
//! restarted each time. After every kill and restart it checks what the
//! server promises (see `crash/checks.rs`); at the end it lets everything
//! finish and checks the final state and every run's event stream.
//!
//! `RUNLENS_CRASH_SEED` replays a seed (printed at the start);
//! `RUNLENS_CRASH_KILLS` sets how many kills (default 24, at least 20 in CI);
//! `RUNLENS_CRASH_KEEP_GOING=1` collects every violation to the end instead
//! of stopping after the first restart that found one.

mod agui;
mod batch;
mod checks;
mod cluster;
mod connections;
mod evaluators;
mod experiments;
mod forks;
mod ingest;
mod mcp;
mod otel;
mod plan;
mod recovery;
mod requests;
mod server;
mod single_server;
mod sse;
mod tree;
mod webhooks;
mod world;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::support::client_with_key;
use plan::{Kind, Rng, KINDS};
use server::Server;
use sse::{Control, SseLog};
use world::{FollowUp, Known, Ours, RunRec, World};

/// Runs the test starts in all (each a few seconds of work).
const MAX_RUNS: u32 = 40;
/// How long the final phase may take to settle every run (a hang, not speed).
const SETTLE_LIMIT: Duration = Duration::from_secs(120);

fn env_number(key: &str) -> Option<u64> {
    std::env::var(key).ok().map(|v| v.trim().parse().unwrap_or_else(|_| panic!("{key} must be a number, not `{v}`")))
}

struct Test {
    http: reqwest::Client,
    sse_http: reqwest::Client,
    world: Arc<Mutex<World>>,
    seed: u64,
    control: Control,
    keep_going: bool,
    tasks: Vec<JoinHandle<()>>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_moments_loses_nothing_and_repeats_no_side_effect() {
    let seed = env_number("RUNLENS_CRASH_SEED").unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        t.as_nanos() as u64 ^ u64::from(std::process::id())
    });
    let kills = env_number("RUNLENS_CRASH_KILLS").unwrap_or(24);
    let keep_going = std::env::var("RUNLENS_CRASH_KEEP_GOING").is_ok_and(|v| v == "1");
    eprintln!("crash test: seed {seed} (RUNLENS_CRASH_SEED={seed} replays it), {kills} kills");
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let db_url = format!("sqlite://{}", dir.path().join("crash.db").display());
    let log = dir.path().join("server.log");
    let http = client_with_key(runlens_engine::net::http_builder().timeout(Duration::from_secs(15)), server::KEY);
    let sse_http =
        client_with_key(runlens_engine::net::http_builder().connect_timeout(Duration::from_secs(2)), server::KEY);

    let mut server = Server::start(&http, &db_url, dir.path(), &log).await;
    let (base_tx, base_rx) = watch::channel(server.base.clone());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut t = Test {
        http,
        sse_http,
        world: Arc::new(Mutex::new(World::default())),
        seed,
        control: Control { base: base_rx, stop: stop_rx },
        keep_going,
        tasks: Vec::new(),
    };
    let started = Instant::now();
    // Events compared with the database while the server was down.
    let mut committed_checks = 0;
    for kill in 1..=kills {
        // Drive the server for a random while, then kill it mid-work.
        let until = Instant::now() + Duration::from_millis(rng.range(100, 1600));
        let mut actions: Vec<JoinHandle<()>> = Vec::new();
        while Instant::now() < until {
            if let Some(action) = t.act(&mut rng, &server.base) {
                actions.push(action);
            }
            tokio::time::sleep(Duration::from_millis(rng.range(20, 120))).await;
        }
        server.kill();
        // Requests in flight fail now; their effect is unknown until checked.
        for a in actions {
            a.await.expect("an action task does not panic");
        }
        t.wait_for_clients_to_notice().await;
        let when = format!("at kill #{kill}");
        committed_checks += checks::check_events_committed(&db_url, &t.world, &when).await;

        server = Server::start(&t.http, &db_url, dir.path(), &log).await;
        base_tx.send_replace(server.base.clone());
        let when = format!("after restart #{kill}");
        let outcome = async {
            checks::resolve_unknowns(&t.http, &server.base, &t.world).await?;
            checks::check_state(&t.http, &server.base, &t.world, &when, false).await
        };
        if let Err(e) = outcome.await {
            panic!("seed {seed}: checking {when} failed: {e}\nthe end of the server log:\n{}", server.log_tail());
        }
        t.report(&when, &server);
    }

    // Let everything finish: decide every call (the timeout run decides
    // itself), post the remaining follow-ups, and wait.
    let settle_started = Instant::now();
    loop {
        let unsettled = t.settle_step(&mut rng, &server.base).await;
        if unsettled.is_empty() {
            break;
        }
        if settle_started.elapsed() > SETTLE_LIMIT {
            t.world.lock().unwrap().violations.push(format!(
                "after the last restart, these runs did not settle within {SETTLE_LIMIT:?}: {unsettled:?}"
            ));
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop_tx.send_replace(true);
    for task in std::mem::take(&mut t.tasks) {
        if tokio::time::timeout(Duration::from_secs(30), task).await.is_err() {
            t.world.lock().unwrap().violations.push("an SSE client did not stop within 30 s".into());
        }
    }
    let counts = checks::check_state(&t.http, &server.base, &t.world, "at the end", true).await;
    let counts = counts.unwrap_or_else(|e| panic!("seed {seed}: the final check failed: {e}"));
    let streamed = checks::check_streams(&t.http, &server.base, &t.world).await;
    let events_checked = streamed.unwrap_or_else(|e| panic!("seed {seed}: the final stream check failed: {e}"));
    // Requests whose address the server had left (see `crash/sse.rs`).
    let left_behind: u32 = t.world.lock().unwrap().runs.values().map(|r| r.sse.lock().unwrap().left_behind).sum();
    eprintln!(
        "crash test: seed {seed}: {kills} kills survived, {} runs checked, {events_checked} events checked \
         (and {committed_checks} against the database at the kills), {} emails checked, {} decisions and {} tool \
         calls checked, {left_behind} SSE requests left at a dead server's address ({:.0} s)",
        counts.runs,
        counts.emails,
        counts.decisions,
        counts.calls,
        started.elapsed().as_secs_f64()
    );
    t.keep_going = false;
    t.report("at the end", &server);
}

impl Test {
    /// Fails the test with every violation found so far (unless keep-going).
    fn report(&mut self, when: &str, server: &Server) {
        let mut w = self.world.lock().unwrap();
        if w.violations.is_empty() || (self.keep_going && when != "at the end") {
            return;
        }
        let mut distinct: Vec<String> = Vec::new();
        for v in w.violations.drain(..) {
            if !distinct.contains(&v) {
                distinct.push(v);
            }
        }
        drop(w);
        panic!(
            "seed {} (RUNLENS_CRASH_SEED={} replays it): {} invariant(s) broke, found {when}:\n  - {}\n\
             the end of the server log:\n{}",
            self.seed,
            self.seed,
            distinct.len(),
            distinct.join("\n  - "),
            server.log_tail()
        );
    }

    /// One random action against the running server, as a task so a kill
    /// can interrupt it.
    fn act(&mut self, rng: &mut Rng, base: &str) -> Option<JoinHandle<()>> {
        let (http, world, base) = (self.http.clone(), self.world.clone(), base.to_owned());
        let roll = rng.range(0, 100);
        if roll < 25 {
            let (id, body) = self.new_run(rng)?;
            return Some(tokio::spawn(create(http, base, world, id, body)));
        }
        if roll < 60 {
            let pick = rng.next();
            let approve = rng.chance(70);
            return Some(tokio::spawn(decide_one(http, base, world, pick, approve)));
        }
        if roll < 75 {
            let todo: Vec<String> = {
                let w = world.lock().unwrap();
                w.runs.iter().filter(|(_, r)| r.follow_up == FollowUp::Todo).map(|(id, _)| id.clone()).collect()
            };
            let id = rng.pick(&todo)?.clone();
            return Some(tokio::spawn(follow_up(http, base, world, id)));
        }
        if roll < 80 {
            let waits: Vec<String> = {
                let w = world.lock().unwrap();
                w.runs
                    .iter()
                    .filter(|(_, r)| r.kind == Kind::Wait && !r.cancel_asked)
                    .map(|(id, _)| id.clone())
                    .collect()
            };
            let id = rng.pick(&waits)?.clone();
            world.lock().unwrap().runs.get_mut(&id).expect("a tracked run").cancel_asked = true;
            return Some(tokio::spawn(async move {
                let url = format!("{base}/api/runs/{id}/cancel");
                let answer = post(&http, &url, &json!({})).await;
                if let Ok((status, body)) = answer {
                    if status >= 500 {
                        world.lock().unwrap().violations.push(format!("POST {url} answered {status}: {body}"));
                    }
                }
            }));
        }
        None
    }

    /// Registers a new run (and its SSE client); `None` once enough exist.
    fn new_run(&mut self, rng: &mut Rng) -> Option<(String, Value)> {
        let mut w = self.world.lock().unwrap();
        if w.next_run >= MAX_RUNS {
            return None;
        }
        w.next_run += 1;
        let id = format!("crash-{:x}-{}", self.seed & 0xffff_ffff, w.next_run);
        let kind = *rng.pick(&KINDS).expect("kinds");
        let body = plan::create_body(kind, &id, rng);
        let sse = Arc::new(Mutex::new(SseLog::default()));
        let (wake, wake_rx) = watch::channel(0);
        let client = sse::follow(self.sse_http.clone(), id.clone(), self.control.clone(), wake_rx, sse.clone());
        self.tasks.push(client);
        let follow_up = if kind == Kind::FollowUp { FollowUp::Todo } else { FollowUp::None };
        let rec =
            RunRec { kind, body: body.clone(), created: Known::Unknown, follow_up, cancel_asked: false, sse, wake };
        w.runs.insert(id.clone(), rec);
        Some((id, body))
    }

    /// Waits (briefly) until no SSE client is still reading from the dead
    /// server, so what they received is complete.
    async fn wait_for_clients_to_notice(&self) {
        let logs: Vec<Arc<Mutex<SseLog>>> = self.world.lock().unwrap().runs.values().map(|r| r.sse.clone()).collect();
        for _ in 0..100 {
            if logs.iter().all(|l| !l.lock().unwrap().connected) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// One round of the final phase; returns the runs not settled yet.
    async fn settle_step(&mut self, rng: &mut Rng, base: &str) -> Vec<String> {
        if let Err(e) = checks::resolve_unknowns(&self.http, base, &self.world).await {
            panic!("seed {}: after the last restart: {e}", self.seed);
        }
        let listed = self.http.get(format!("{base}/api/runs?limit=200")).send().await;
        let listed: Value = match listed {
            Ok(r) => r.json().await.unwrap_or_default(),
            Err(e) => panic!("seed {}: listing runs after the last restart failed: {e}", self.seed),
        };
        let mut unsettled = Vec::new();
        for run in listed["runs"].as_array().into_iter().flatten() {
            let id = run["id"].as_str().unwrap_or_default().to_owned();
            let status = run["status"].as_str().unwrap_or_default();
            let (kind, follow) = match self.world.lock().unwrap().runs.get(&id) {
                Some(r) => (r.kind, r.follow_up),
                None => continue,
            };
            if status == "done" && follow == FollowUp::Todo {
                follow_up(self.http.clone(), base.to_owned(), self.world.clone(), id.clone()).await;
                unsettled.push(format!("{id} ({kind:?}): done, follow-up posted"));
            } else if !matches!(status, "done" | "failed" | "cancelled") {
                unsettled.push(format!("{id} ({kind:?}): {status}"));
            }
        }
        // Decide everything waiting (the timeout run's call decides itself).
        for _ in 0..unsettled.len() {
            let approve = rng.chance(70);
            decide_one(self.http.clone(), base.to_owned(), self.world.clone(), rng.next(), approve).await;
        }
        unsettled
    }
}

/// POSTs JSON; `Err` when no answer came (the server died).
async fn post(http: &reqwest::Client, url: &str, body: &Value) -> Result<(u16, String), reqwest::Error> {
    let resp = http.post(url).json(body).send().await?;
    let status = resp.status().as_u16();
    Ok((status, resp.text().await.unwrap_or_default()))
}

async fn create(http: reqwest::Client, base: String, world: Arc<Mutex<World>>, id: String, body: Value) {
    let url = format!("{base}/api/runs");
    match post(&http, &url, &body).await {
        Ok((200 | 201, _)) => world.lock().unwrap().runs.get_mut(&id).expect("a tracked run").created = Known::Yes,
        Ok((429 | 503, _)) => {} // turned away under load: created after the next restart
        Ok((status, text)) => {
            world.lock().unwrap().violations.push(format!("creating run {id} was answered {status}: {text}"))
        }
        Err(_) => {} // stays unknown: resolved after the restart
    }
}

/// Decides one call waiting for approval, picked by `pick` (the same call
/// always gets the same decision, even when a kill lost the answer).
async fn decide_one(http: reqwest::Client, base: String, world: Arc<Mutex<World>>, pick: u64, approve: bool) {
    let Ok(resp) = http.get(format!("{base}/api/approvals")).send().await else { return };
    let Ok(list) = resp.json::<Value>().await else { return };
    let candidates: Vec<(String, String)> = {
        let w = world.lock().unwrap();
        list["approvals"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                (
                    a["run_id"].as_str().unwrap_or_default().to_owned(),
                    a["call_id"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .filter(|(run, _)| w.runs.get(run).is_some_and(|r| r.kind != Kind::Timeout))
            .collect()
    };
    if candidates.is_empty() {
        return;
    }
    let (run_id, call_id) = candidates[(pick % candidates.len() as u64) as usize].clone();
    let key = (run_id.clone(), call_id.clone());
    let decision = {
        let mut w = world.lock().unwrap();
        let d = if approve { "approved" } else { "rejected" };
        w.ours.entry(key.clone()).or_insert(Ours { decision: d.into(), confirmed: false }).decision.clone()
    };
    let (verb, body) = if decision == "approved" {
        ("approve", json!({ "comment": "approved by the crash test" }))
    } else {
        ("reject", json!({ "reason": "rejected by the crash test" }))
    };
    let url = format!("{base}/api/runs/{run_id}/tool-calls/{call_id}/{verb}");
    let Ok((status, text)) = post(&http, &url, &body).await else { return };
    let mut w = world.lock().unwrap();
    match status {
        200 => w.ours.get_mut(&key).expect("recorded above").confirmed = true,
        409 => {
            // Lost a race (or an earlier, unanswered attempt won): the
            // decision that won is the one that must stay.
            let answer: Value = serde_json::from_str(&text).unwrap_or_default();
            if let Some(won) = answer["decision"]["decision"].as_str() {
                let ours = w.ours.get_mut(&key).expect("recorded above");
                ours.decision = won.to_owned();
                ours.confirmed = true;
            }
        }
        429 | 503 => {} // turned away under load: decided later
        _ => w.violations.push(format!("POST {url} answered {status}: {text}")),
    }
}

async fn follow_up(http: reqwest::Client, base: String, world: Arc<Mutex<World>>, id: String) {
    let url = format!("{base}/api/runs/{id}/messages");
    let answer = post(&http, &url, &json!({ "message": plan::follow_up_text(&id) })).await;
    let mut w = world.lock().unwrap();
    let rec = w.runs.get_mut(&id).expect("a tracked run");
    match answer {
        Ok((200..=202, _)) => rec.follow_up = FollowUp::Posted,
        Ok((409 | 429 | 503, _)) => return, // not done yet, or turned away under load
        Ok((status, text)) => {
            let v = format!("POST {url} answered {status}: {text}");
            w.violations.push(v);
            return;
        }
        Err(_) => rec.follow_up = FollowUp::Unknown,
    }
    // The finished run may go on: its SSE client reconnects.
    rec.wake.send_modify(|n| *n += 1);
}
