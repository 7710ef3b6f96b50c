//! Three `runlens serve` processes on one PostgreSQL schema, one of them
//! killed with SIGKILL in the middle of the work (always PostgreSQL: the
//! test makes its own schema and drops it at the end, whatever happens).
//!
//! Each server runs with `--lease-secs 3` and `--max-concurrent-runs 8`, so
//! most of the 200 runs wait in the queue the servers share. The runs
//! (calculator calls, waits, emails that need approval, streamed answers,
//! one in three answering without delay; see `plan.rs`) are created on the
//! servers in turn, each email is approved through a server other than the
//! one its run was created on, and every fourth run's event stream is
//! followed through a server other than its creator. Once a third of the
//! runs have moved, one server (chosen by the seed) is killed while it
//! drives runs, at the worst moment the next few seconds offer: right after
//! it stored the end of a run, before it stored that run's `run.finished`.
//! Its stream clients reconnect to a survivor with `Last-Event-ID`,
//! creations and approvals go on with the survivors, and the test measures
//! how long the survivors take to pick up what the dead server held
//! (printed as `TAKEOVER`, never asserted).
//!
//! In the end every run must be `done` with one step per turn of its script
//! (indexes 0, 1, 2…), a transcript numbered 0, 1, 2… with each call
//! answered once, an event log numbered 1, 2, 3… ending with one
//! `run.finished`; every approved email is in the outbox exactly once and
//! its call succeeded (a call the kill interrupted ends as the outbox says,
//! on whichever server takes the run over); every followed stream is gap-free and duplicate-free, the
//! same as the stored log, and ends with `run.finished`.
//!
//! `RUNLENS_CRASH_SEED` replays a seed (printed at the start);
//! `RUNLENS_TEST_POSTGRES` names the database (default
//! `postgres://postgres@127.0.0.1:5432/test`). On failure the servers' logs
//! are kept (the message gives their directory). Run it alone with
//! `cargo test --no-default-features --features ssr --test api -- crash::cluster --nocapture`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::postgres::{PgPool, PgPoolOptions};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::checks;
use super::plan::{self, Kind, Rng};
use super::server::{log_tail, Server, KEY, KEY_NAME};
use super::sse::{self, Control, SseLog};
use super::world::{FollowUp, Known, RunRec, World};
use crate::support::client_with_key;

/// Servers sharing the schema; one of them is killed.
const SERVERS: usize = 3;
/// Runs created in all, spread over the servers.
const RUNS: u32 = 200;
/// `--lease-secs` of every server (the smallest it accepts).
const LEASE_SECS: u64 = 3;
/// `--max-concurrent-runs` of every server: small, so the queue matters.
const MAX_RUNS_PER_SERVER: u32 = 8;
/// One run in this many has its event stream followed.
const FOLLOW_EVERY: u32 = 4;
/// The runs' kinds: tool calls, waits, approvals, streamed answers.
const KINDS: [Kind; 4] = [Kind::Calc, Kind::Wait, Kind::Email, Kind::Mixed];
/// Nothing stored and no status changed for this long (many leases) while
/// runs are unfinished: the cluster is stuck. A hang, never a speed limit.
const STALL_LIMIT: Duration = Duration::from_secs(20 * LEASE_SECS);
/// A bound on each phase of the test (a hang, never a speed limit).
const HANG_LIMIT: Duration = Duration::from_secs(300);

fn env_seed() -> u64 {
    match std::env::var("RUNLENS_CRASH_SEED") {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| panic!("RUNLENS_CRASH_SEED must be a number, not `{v}`")),
        Err(_) => {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            t.as_nanos() as u64 ^ u64::from(std::process::id())
        }
    }
}

/// The test's own schema, dropped with the guard (declared before the
/// servers, so they are killed first). Named `t_<pid>_…` like the suites'
/// schemas, so their sweep drops it should this process die first.
struct Schema {
    base: String,
    name: String,
}

impl Schema {
    fn new() -> Schema {
        let base =
            std::env::var("RUNLENS_TEST_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        Schema { base, name: format!("t_{}_cluster_{nanos}", std::process::id()) }
    }

    fn url(&self) -> String {
        format!("{}?options[search_path]={}", self.base, self.name)
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        // From a thread with a runtime of its own: the test's may be gone.
        let (url, name) = (self.base.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                use sqlx::Connection;
                let Ok(mut conn) = sqlx::PgConnection::connect(&url).await else { return };
                let _ = sqlx::query("SET lock_timeout = '10s'").execute(&mut conn).await;
                let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE")).execute(&mut conn).await;
            });
        })
        .join();
    }
}

/// A run a server confirmed creating.
struct Tracked {
    kind: Kind,
    /// Turns of its script: the steps it must end with.
    turns: usize,
    /// The server that answered its creation.
    creator: usize,
    body: Value,
}

/// An approval the test sent.
struct Approval {
    /// The server it was (last) sent through, and the run's creator.
    via: usize,
    creator: usize,
    /// A server answered that it is stored (200, or 409 naming our approval).
    confirmed: bool,
    attempts: u32,
    /// The last answer, in words.
    last: String,
}

/// What the test's tasks share.
struct Shared {
    bases: Vec<String>,
    alive: Mutex<Vec<bool>>,
    runs: Mutex<BTreeMap<String, Tracked>>,
    approvals: Mutex<BTreeMap<(String, String), Approval>>,
    violations: Mutex<Vec<String>>,
}

impl Shared {
    fn alive(&self) -> Vec<usize> {
        let alive = self.alive.lock().unwrap();
        (0..SERVERS).filter(|i| alive[*i]).collect()
    }

    fn is_alive(&self, i: usize) -> bool {
        self.alive.lock().unwrap()[i]
    }

    /// The `turn`th live server other than `not` (any live one when there is no other).
    fn other_than(&self, not: usize, turn: usize) -> usize {
        let alive = self.alive();
        let others: Vec<usize> = alive.iter().copied().filter(|i| *i != not).collect();
        let pool = if others.is_empty() { &alive } else { &others };
        pool[turn % pool.len()]
    }

    fn violation(&self, v: String) {
        self.violations.lock().unwrap().push(v);
    }
}

/// A followed run's stream client: the run's creator, the server the
/// client reads from, and the sender that moves it.
type Client = (usize, usize, watch::Sender<String>);

/// The followed streams: their clients and where each reads now.
struct Followers {
    /// The followed runs, for `checks::check_streams`.
    world: Arc<Mutex<World>>,
    clients: Mutex<BTreeMap<String, Client>>,
    /// Runs whose client was moved off the killed server.
    moved: Mutex<BTreeSet<String>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    http: reqwest::Client,
    stop: watch::Receiver<bool>,
}

impl Followers {
    /// Follows run `id` through a live server other than its creator.
    fn follow(&self, sh: &Shared, id: &str, tracked: &Tracked, turn: usize) {
        let at = sh.other_than(tracked.creator, turn);
        let (base_tx, base_rx) = watch::channel(sh.bases[at].clone());
        let log = Arc::new(Mutex::new(SseLog::default()));
        let (wake, wake_rx) = watch::channel(0);
        let control = Control { base: base_rx, stop: self.stop.clone() };
        let task = sse::follow(self.http.clone(), id.to_owned(), control, wake_rx, log.clone());
        self.tasks.lock().unwrap().push(task);
        let rec = RunRec {
            kind: tracked.kind,
            body: tracked.body.clone(),
            created: Known::Yes,
            follow_up: FollowUp::None,
            cancel_asked: false,
            sse: log,
            wake,
        };
        self.world.lock().unwrap().runs.insert(id.to_owned(), rec);
        self.clients.lock().unwrap().insert(id.to_owned(), (tracked.creator, at, base_tx));
    }

    /// Moves every client reading from `dead` to a survivor (not its run's
    /// creator); how many moved.
    fn move_from(&self, sh: &Shared, dead: usize) -> usize {
        let mut clients = self.clients.lock().unwrap();
        let mut moved = self.moved.lock().unwrap();
        for (n, (id, (creator, at, base))) in clients.iter_mut().enumerate() {
            if *at == dead {
                *at = sh.other_than(*creator, n);
                base.send_replace(sh.bases[*at].clone());
                moved.insert(id.clone());
            }
        }
        moved.len()
    }
}

/// POSTs JSON; `Err` when no answer came (the server died).
async fn post(http: &reqwest::Client, url: &str, body: &Value) -> Result<(u16, String), reqwest::Error> {
    let resp = http.post(url).json(body).send().await?;
    let status = resp.status().as_u16();
    Ok((status, resp.text().await.unwrap_or_default()))
}

async fn get_json(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let resp = http.get(url).send().await.map_err(|e| format!("GET {url} failed: {e}"))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| format!("GET {url}: the body could not be read: {e}"))?;
    if !status.is_success() {
        return Err(format!("GET {url} answered {status}: {}", text.chars().take(300).collect::<String>()));
    }
    serde_json::from_str(&text).map_err(|e| format!("GET {url}: not JSON ({e})"))
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Creates the runs one after the other on the live servers in turn; a
/// creation whose server died under it is sent again (same id) to another.
async fn create_runs(sh: Arc<Shared>, followers: Arc<Followers>, http: reqwest::Client, seed: u64) {
    let mut rng = Rng::new(seed ^ 0x9e37_79b9_7f4a_7c15);
    for n in 1..=RUNS {
        let id = format!("cl-{:x}-{n}", seed & 0xffff_ffff);
        let kind = *rng.pick(&KINDS).expect("kinds");
        let mut body = plan::create_body(kind, &id, &mut rng);
        body["name"] = json!(format!("cluster {kind:?}"));
        // One run in three answers at once: servers then finish runs in quick
        // succession, as with short tasks.
        let latency = if n % 3 == 0 { 0 } else { rng.range(100, 600) };
        body["model_settings"]["latency_ms"] = json!(latency);
        let turns = body["model_settings"]["script"].as_array().map_or(0, Vec::len);
        let mut target = n as usize % SERVERS;
        let mut creator = None;
        for _attempt in 0..100 {
            if !sh.is_alive(target) {
                target = (target + 1) % SERVERS;
                continue;
            }
            match post(&http, &format!("{}/api/runs", sh.bases[target]), &body).await {
                Ok((200 | 201, _)) => {
                    creator = Some(target);
                    break;
                }
                Ok((429 | 503, _)) => tokio::time::sleep(Duration::from_millis(200)).await,
                Ok((status, answer)) => {
                    sh.violation(format!("creating run {id} on server {target} was answered {status}: {answer}"));
                    creator = None;
                    break;
                }
                Err(_) => {
                    // Killed under the request: the run may exist; again elsewhere.
                    target = (target + 1) % SERVERS;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        let Some(creator) = creator else {
            sh.violation(format!("run {id} could not be created (see above, or no server answered)"));
            continue;
        };
        let tracked = Tracked { kind, turns, creator, body };
        if n % FOLLOW_EVERY == 0 {
            followers.follow(&sh, &id, &tracked, (n / FOLLOW_EVERY) as usize);
        }
        sh.runs.lock().unwrap().insert(id, tracked);
        // Faster than the servers drive them: the queue grows.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Approves every call awaiting approval, each through a live server other
/// than its run's creator, until told to stop.
async fn approve_all(sh: Arc<Shared>, http: reqwest::Client, stop: watch::Receiver<bool>) {
    let mut turn = 0usize;
    while !*stop.borrow() {
        turn += 1;
        let alive = sh.alive();
        let lister = alive[turn % alive.len()];
        if let Ok(list) = get_json(&http, &format!("{}/api/approvals", sh.bases[lister])).await {
            let mut sent = tokio::task::JoinSet::new();
            for a in list["approvals"].as_array().into_iter().flatten() {
                let key = (text(a, "run_id").to_owned(), text(a, "call_id").to_owned());
                // A run whose creation is not confirmed yet waits for the next round.
                let Some(creator) = sh.runs.lock().unwrap().get(&key.0).map(|t| t.creator) else { continue };
                let via = sh.other_than(creator, turn + sent.len());
                sent.spawn(approve(sh.clone(), http.clone(), key, creator, via));
            }
            while sent.join_next().await.is_some() {}
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn approve(sh: Arc<Shared>, http: reqwest::Client, key: (String, String), creator: usize, via: usize) {
    {
        let mut approvals = sh.approvals.lock().unwrap();
        let rec = approvals.entry(key.clone()).or_insert(Approval {
            via,
            creator,
            confirmed: false,
            attempts: 0,
            last: String::new(),
        });
        rec.via = via;
        rec.attempts += 1;
    }
    let (run_id, call_id) = &key;
    let url = format!("{}/api/runs/{run_id}/tool-calls/{call_id}/approve", sh.bases[via]);
    let body = json!({ "comment": format!("approved through server {via} by the cluster test") });
    let answer = post(&http, &url, &body).await;
    let last = match &answer {
        Ok((status, text)) => format!("{status} {}", text.chars().take(200).collect::<String>()),
        Err(e) => format!("no answer ({e})"),
    };
    let confirmed = match answer {
        Ok((200, _)) => true,
        Ok((409, answer)) => {
            let answer: Value = serde_json::from_str(&answer).unwrap_or_default();
            let decision = &answer["decision"];
            match decision["decision"].as_str() {
                // An earlier attempt whose answer was lost (or a second listing) won.
                Some("approved") if text(decision, "decided_by") == KEY_NAME => true,
                Some(other) => {
                    let by = text(decision, "decided_by");
                    sh.violation(format!("run {run_id} call {call_id}: only ever approved, yet {other} by {by}"));
                    false
                }
                None => false, // not paused yet, or no longer: listed again while it waits
            }
        }
        Ok((429 | 503, _)) | Err(_) => false, // turned away, or the server died: listed again
        Ok((status, answer)) => {
            sh.violation(format!("POST {url} answered {status}: {answer}"));
            false
        }
    };
    let mut approvals = sh.approvals.lock().unwrap();
    let rec = approvals.get_mut(&key).expect("recorded above");
    rec.confirmed |= confirmed;
    rec.last = last;
}

/// Failure reports: every server's log, kept on disk.
struct Logs {
    dir: Option<tempfile::TempDir>,
    files: Vec<PathBuf>,
}

impl Logs {
    fn fail(&mut self, seed: u64, what: &str) -> ! {
        let tails: Vec<String> = self
            .files
            .iter()
            .enumerate()
            .map(|(i, f)| format!("--- the end of server {i}'s log:\n{}", log_tail(f)))
            .collect();
        let kept = self.dir.take().map(|d| d.keep().display().to_string()).unwrap_or_default();
        panic!(
            "seed {seed} (RUNLENS_CRASH_SEED={seed} replays it): {what}\nthe servers' logs are kept in {kept}\n{}",
            tails.join("\n")
        );
    }
}

async fn count(pool: &PgPool, query: &str) -> i64 {
    sqlx::query_scalar(query).fetch_one(pool).await.unwrap_or_else(|e| panic!("{query}: {e}"))
}

/// Runs not finished yet, as the database has them (for failure messages).
async fn unfinished(pool: &PgPool) -> String {
    let rows: Vec<(String, String, Option<String>, i64)> = sqlx::query_as(
        "SELECT id, status, lease_owner, attempt FROM runs WHERE status NOT IN ('done', 'failed', 'cancelled')
         ORDER BY created_at LIMIT 40",
    )
    .fetch_all(pool)
    .await
    .unwrap_or_default();
    let servers: Vec<(String, String)> =
        sqlx::query_as("SELECT id, address FROM servers").fetch_all(pool).await.unwrap_or_default();
    let rows: Vec<String> = rows
        .into_iter()
        .map(|(id, status, owner, attempt)| format!("{id} {status} lease {owner:?} attempt {attempt}"))
        .collect();
    format!("{} (servers: {servers:?})", rows.join(", "))
}

/// Waits (a few seconds at most) for a moment when server `victim` has
/// stored the end of a run it drives but not yet that run's `run.finished`
/// (the run's `finish_unannounced` mark); the run, if one was seen.
async fn kill_moment(pool: &PgPool, victim: &str) -> Option<String> {
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let found = sqlx::query_scalar::<_, String>(
            "SELECT id FROM runs WHERE lease_owner = $1 AND finish_unannounced
                AND status IN ('done', 'failed', 'cancelled') LIMIT 1",
        )
        .bind(victim)
        .fetch_optional(pool)
        .await;
        match found {
            Ok(Some(id)) => return Some(id),
            Ok(None) => tokio::time::sleep(Duration::from_millis(5)).await,
            Err(_) => return None, // the mark is the store's to rename: any moment then
        }
    }
    None
}

/// What the takeover took, from the SIGKILL.
struct Takeover {
    held: usize,
    /// Until the last of them was claimed by a survivor.
    claimed: Option<Duration>,
    /// Until the last of them stored a new event there.
    progressed: Option<Duration>,
}

/// Watches the runs the killed server `dead` held until each was claimed by
/// a survivor and went on there (or the hang bound passed).
async fn measure_takeover(pool: &PgPool, dead: &str, killed_at: Instant) -> (Takeover, Vec<String>) {
    const EVENTS: &str = "COALESCE((SELECT max(e.seq) FROM run_events e WHERE e.run_id = r.id), 0)";
    let at_kill: Vec<(String, i64)> = sqlx::query_as(&format!(
        "SELECT r.id, {EVENTS} FROM runs r WHERE r.lease_owner = $1 AND r.status IN ('pending', 'running')"
    ))
    .bind(dead)
    .fetch_all(pool)
    .await
    .expect("the runs held read");
    let ids: Vec<String> = at_kill.iter().map(|(id, _)| id.clone()).collect();
    let seq_at_kill: BTreeMap<String, i64> = at_kill.into_iter().collect();
    let mut claimed: BTreeMap<String, Duration> = BTreeMap::new();
    let mut progressed: BTreeMap<String, Duration> = BTreeMap::new();
    let mut broke = Vec::new();
    while progressed.len() < ids.len() {
        let rows: Vec<(String, String, Option<String>, i64)> =
            sqlx::query_as(&format!("SELECT r.id, r.status, r.lease_owner, {EVENTS} FROM runs r WHERE r.id = ANY($1)"))
                .bind(&ids)
                .fetch_all(pool)
                .await
                .expect("the runs held read");
        let now = killed_at.elapsed();
        for (id, status, owner, seq) in rows {
            let finished = matches!(status.as_str(), "done" | "failed" | "cancelled");
            if owner.as_deref() != Some(dead) || finished {
                claimed.entry(id.clone()).or_insert(now);
            }
            if claimed.contains_key(&id) && (seq > seq_at_kill[&id] || finished) {
                progressed.entry(id).or_insert(now);
            }
        }
        if killed_at.elapsed() > HANG_LIMIT {
            let left: Vec<&String> = ids.iter().filter(|id| !progressed.contains_key(*id)).collect();
            broke.push(format!(
                "runs the killed server held were not taken over within {HANG_LIMIT:?} (lease {LEASE_SECS} s): \
                 {left:?}; {}",
                unfinished(pool).await
            ));
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let last = |m: &BTreeMap<String, Duration>| (m.len() == ids.len()).then(|| m.values().max().copied()).flatten();
    (Takeover { held: ids.len(), claimed: last(&claimed), progressed: last(&progressed) }, broke)
}

/// The outbox as the database holds it (the API lists only the latest 100).
#[derive(Default)]
struct Outbox {
    /// Emails per email id (`<run id>-<call id>`).
    by_id: BTreeMap<String, usize>,
    /// Per run: each email's id and subject.
    by_run: BTreeMap<String, Vec<(String, String)>>,
}

impl Outbox {
    async fn read(pool: &PgPool) -> Outbox {
        let rows: Vec<(String, String, String)> =
            sqlx::query_as("SELECT id, run_id, subject FROM outbox").fetch_all(pool).await.expect("the outbox reads");
        let mut outbox = Outbox::default();
        for (id, run_id, subject) in rows {
            *outbox.by_id.entry(id.clone()).or_default() += 1;
            outbox.by_run.entry(run_id).or_default().push((id, subject));
        }
        outbox
    }
}

/// What the final check looked at.
#[derive(Default)]
struct Counts {
    steps: usize,
    messages: usize,
    calls: usize,
    emails: usize,
}

/// One run at the end, read through the API of `base`: done, one step per
/// turn, a transcript without gap or repeat, each email once.
async fn check_run(
    http: &reqwest::Client,
    base: &str,
    id: &str,
    run: &Tracked,
    outbox: &Outbox,
    counts: &mut Counts,
) -> Result<Vec<String>, String> {
    let mut broke = Vec::new();
    let name = format!("run {id} ({:?}, created on server {})", run.kind, run.creator);
    let got = get_json(http, &format!("{base}/api/runs/{id}")).await?;
    if text(&got, "status") != "done" {
        broke.push(format!("{name} ended {} ({:?})", text(&got, "status"), text(&got, "failure_reason")));
    }
    let script = run.body["model_settings"]["script"].as_array().cloned().unwrap_or_default();

    // Steps: indexes 0..turns, each turn once, each with the calls of its turn.
    let steps = get_json(http, &format!("{base}/api/runs/{id}/steps")).await?;
    let steps = steps["steps"].as_array().cloned().unwrap_or_default();
    counts.steps += steps.len();
    let indexes: Vec<u64> = steps.iter().filter_map(|s| s["index"].as_u64()).collect();
    if indexes != (0..run.turns as u64).collect::<Vec<_>>() {
        broke.push(format!("{name}: step indexes {indexes:?}, expected 0..{} (one step per turn)", run.turns));
    }
    let mut call_ids = BTreeSet::new();
    let mut sent_calls = BTreeSet::new();
    for (step, turn) in steps.iter().zip(&script) {
        let index = &step["index"];
        if text(step, "status") != "completed" {
            broke.push(format!("{name}: step {index} is {}", text(step, "status")));
        }
        let calls = step["tool_calls"].as_array().cloned().unwrap_or_default();
        let names: Vec<&str> = calls.iter().map(|c| text(c, "tool_name")).collect();
        let wanted: Vec<&str> = turn["tool_calls"].as_array().into_iter().flatten().map(|c| text(c, "name")).collect();
        if names != wanted {
            broke.push(format!("{name}: step {index} made the calls {names:?}, its turn {wanted:?}"));
        }
        for call in &calls {
            counts.calls += 1;
            let call_id = text(call, "id");
            if !call_ids.insert(call_id.to_owned()) {
                broke.push(format!("{name}: two tool calls with the id {call_id}"));
            }
            let (status, error) = (text(call, "status"), text(call, "error"));
            let what = format!("{name}: call {call_id} ({})", text(call, "tool_name"));
            if text(call, "tool_name") != "send_email" {
                if status != "succeeded" {
                    broke.push(format!("{what} is {status} ({error:?})"));
                }
                continue;
            }
            let approval = &call["approval"];
            if text(approval, "decision") != "approved" || text(approval, "decided_by") != KEY_NAME {
                broke.push(format!("{what} was decided {approval} (the test only approves)"));
            }
            let emails = outbox.by_id.get(&format!("{id}-{call_id}")).copied().unwrap_or(0);
            match status {
                "succeeded" if emails == 1 => {}
                "succeeded" => broke.push(format!("{what} succeeded and the outbox holds {emails} emails for it")),
                _ => {
                    let hint = if error.contains("UNIQUE") || error.contains("outbox") || error.contains("duplicate") {
                        " (it ran a second time and found its email already in the outbox)"
                    } else {
                        ""
                    };
                    broke.push(format!("{what} is {status} ({error:?}), {emails} emails for it{hint}"));
                }
            }
            sent_calls.insert(format!("{id}-{call_id}"));
        }
    }
    // The outbox: nothing for a call the run does not have, each subject once.
    let mut subjects: BTreeMap<&str, usize> = BTreeMap::new();
    for (email_id, subject) in outbox.by_run.get(id).into_iter().flatten() {
        counts.emails += 1;
        if !sent_calls.contains(email_id) {
            broke.push(format!("{name}: email {email_id} ({subject}) was sent by no send_email call of the run"));
        }
        *subjects.entry(subject.as_str()).or_default() += 1;
    }
    for (subject, n) in subjects {
        if n > 1 {
            broke.push(format!("{name}: the email `{subject}` was sent {n} times"));
        }
    }

    // The transcript: seq 0, 1, 2…; the prompt, one agent message per turn,
    // one result per call.
    let messages = get_json(http, &format!("{base}/api/runs/{id}/messages")).await?;
    let messages = messages["messages"].as_array().cloned().unwrap_or_default();
    counts.messages += messages.len();
    let seqs: Vec<u64> = messages.iter().filter_map(|m| m["seq"].as_u64()).collect();
    if seqs != (0..messages.len() as u64).collect::<Vec<_>>() {
        broke.push(format!("{name}: message seqs {seqs:?} are not 0, 1, 2…"));
    }
    let of_type = |t: &str| messages.iter().filter(|m| text(m, "type") == t).count();
    let (humans, agents) = (of_type("human"), of_type("agent"));
    if humans != 1 || agents != run.turns {
        broke.push(format!("{name}: {humans} human and {agents} agent messages, expected 1 and {}", run.turns));
    }
    let mut answered: BTreeMap<String, usize> = BTreeMap::new();
    for m in messages.iter().filter(|m| text(m, "type") == "invocation-result") {
        let call_id = text(&m["data"], "id");
        *answered.entry(call_id.to_owned()).or_default() += 1;
    }
    let answered_once: BTreeSet<String> = answered.iter().filter(|(_, n)| **n == 1).map(|(c, _)| c.clone()).collect();
    if answered_once != call_ids || answered.len() != call_ids.len() {
        broke.push(format!("{name}: calls {call_ids:?}, but results in the transcript {answered:?}"));
    }
    Ok(broke)
}

/// Every run's stored events: numbered 1, 2, 3… and ending with exactly one
/// `run.finished`. A run without one is replayed through a survivor's SSE
/// (what a browser would see) for the failure message.
async fn check_event_logs(
    pool: &PgPool,
    http: &reqwest::Client,
    base: &str,
    runs: &BTreeSet<String>,
) -> (usize, Vec<String>) {
    let rows: Vec<(String, i64, i64, i64, i64, Option<i64>)> = sqlx::query_as(
        "SELECT run_id, count(*), min(seq), max(seq),
                count(*) FILTER (WHERE type = 'run.finished'),
                max(seq) FILTER (WHERE type = 'run.finished')
         FROM run_events GROUP BY run_id",
    )
    .fetch_all(pool)
    .await
    .expect("the event log reads");
    let mut broke = Vec::new();
    let mut events = 0;
    let mut stored: BTreeMap<String, i64> = runs.iter().map(|id| (id.clone(), 0)).collect();
    let mut unfinished = Vec::new();
    for (run_id, n, min, max, finished, finished_at) in rows {
        let Some(count) = stored.get_mut(&run_id) else { continue };
        *count = n;
        events += n as usize;
        if min != 1 || max != n {
            broke.push(format!("run {run_id}: its {n} stored events are numbered {min}..={max}"));
        }
        if finished == 0 {
            unfinished.push(run_id);
        } else if finished > 1 || finished_at != Some(max) {
            // What was stored from the first run.finished on, for the message.
            let tail: Vec<(i64, String, String, i64)> = sqlx::query_as(
                "SELECT seq, type, data::text, at FROM run_events WHERE run_id = $1
                 AND seq >= (SELECT min(seq) FROM run_events WHERE run_id = $1 AND type = 'run.finished') ORDER BY seq",
            )
            .bind(&run_id)
            .fetch_all(pool)
            .await
            .unwrap_or_default();
            let tail: Vec<String> = tail
                .into_iter()
                .map(|(seq, kind, data, at)| {
                    format!("#{seq} {kind} at {at} {}", data.chars().take(160).collect::<String>())
                })
                .collect();
            broke.push(format!(
                "run {run_id}: {finished} run.finished events stored, the log ends at #{max}, not with its \
                 run.finished: {}",
                tail.join(" | ")
            ));
        }
    }
    unfinished.extend(stored.iter().filter(|(_, n)| **n == 0).map(|(id, _)| id.clone()));
    let marked: BTreeSet<String> = sqlx::query_scalar("SELECT id FROM runs WHERE finish_unannounced")
        .fetch_all(pool)
        .await
        .unwrap_or_default()
        .into_iter()
        .collect();
    for (i, run_id) in unfinished.iter().enumerate() {
        let why = if marked.contains(run_id) {
            " (still marked `finish_unannounced`: its end was stored by a server that died before storing the event, \
             and no survivor announced it)"
        } else {
            ""
        };
        // What a client of a survivor gets, for the first few.
        let seen = if i < 3 {
            match sse::replay(http, base, run_id).await {
                Ok(e) => format!(
                    "; replayed through {base}, its stream ends after {} events with {:?}",
                    e.len(),
                    e.last().map(|e| e.kind.clone())
                ),
                Err(e) => format!("; replayed through {base}: {e}"),
            }
        } else {
            String::new()
        };
        broke.push(format!("run {run_id}: no run.finished among its {} stored events{why}{seen}", stored[run_id]));
    }
    (events, broke)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_servers_on_one_database_survive_a_kill_9_of_one() {
    let seed = env_seed();
    let mut rng = Rng::new(seed);
    let victim = rng.range(0, SERVERS as u64) as usize;
    eprintln!(
        "cluster test: seed {seed} (RUNLENS_CRASH_SEED={seed} replays it): {SERVERS} servers, {RUNS} runs, \
         lease {LEASE_SECS} s, {MAX_RUNS_PER_SERVER} runs per server; server {victim} is killed"
    );
    let schema = Schema::new();
    let db_url = schema.url();
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = (0..SERVERS).map(|i| dir.path().join(format!("server-{i}.log"))).collect();
    let mut logs = Logs { dir: Some(dir), files };
    let http = client_with_key(runlens_engine::net::http_builder().timeout(Duration::from_secs(15)), KEY);
    let sse_http = client_with_key(runlens_engine::net::http_builder().connect_timeout(Duration::from_secs(2)), KEY);
    let started = Instant::now();
    let (lease, max) = (LEASE_SECS.to_string(), MAX_RUNS_PER_SERVER.to_string());
    let extra = ["--lease-secs", lease.as_str(), "--max-concurrent-runs", max.as_str()];
    let work_dir = logs.dir.as_ref().expect("kept until a failure").path().to_owned();
    // The first creates the schema; the other two join it at the same time.
    let first = Server::start_with(&http, &db_url, &work_dir, &logs.files[0], &extra).await;
    let (second, third) = tokio::join!(
        Server::start_with(&http, &db_url, &work_dir, &logs.files[1], &extra),
        Server::start_with(&http, &db_url, &work_dir, &logs.files[2], &extra),
    );
    let mut servers = vec![first, second, third];
    let pool = PgPoolOptions::new().max_connections(2).connect(&db_url).await.expect("the test's schema opens");
    eprintln!("cluster test: {SERVERS} servers up in {:.1} s", started.elapsed().as_secs_f64());

    let sh = Arc::new(Shared {
        bases: servers.iter().map(|s| s.base.clone()).collect(),
        alive: Mutex::new(vec![true; SERVERS]),
        runs: Mutex::default(),
        approvals: Mutex::default(),
        violations: Mutex::default(),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let followers = Arc::new(Followers {
        world: Arc::new(Mutex::new(World::default())),
        clients: Mutex::default(),
        moved: Mutex::default(),
        tasks: Mutex::default(),
        http: sse_http,
        stop: stop_rx.clone(),
    });
    let creating = tokio::spawn(create_runs(sh.clone(), followers.clone(), http.clone(), seed));
    let approving = tokio::spawn(approve_all(sh.clone(), http.clone(), stop_rx.clone()));

    // The victim's id in the registry, then a third of the runs moving
    // while the victim holds some.
    let victim_base = sh.bases[victim].clone();
    let victim_id: String = loop {
        let id = sqlx::query_scalar("SELECT id FROM servers WHERE address = $1")
            .bind(&victim_base)
            .fetch_optional(&pool)
            .await
            .expect("the registry reads");
        if let Some(id) = id {
            break id;
        }
        if started.elapsed() > HANG_LIMIT {
            logs.fail(seed, &format!("server {victim} ({victim_base}) never appeared in the server registry"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let waiting = Instant::now();
    loop {
        let moving = count(&pool, "SELECT count(*) FROM runs WHERE status <> 'pending'").await;
        let held = sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM runs WHERE lease_owner = $1 AND status IN ('pending', 'running')",
        )
        .bind(&victim_id)
        .fetch_one(&pool)
        .await
        .expect("the leases read");
        if moving >= i64::from(RUNS / 3) && held > 0 {
            break;
        }
        if waiting.elapsed() > HANG_LIMIT {
            let what = format!("a third of the runs did not start within {HANG_LIMIT:?}: {}", unfinished(&pool).await);
            logs.fail(seed, &what);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The worst moment within the next seconds: right after the victim
    // stored a run's end, before it stored that run's `run.finished`.
    let caught = kill_moment(&pool, &victim_id).await;
    servers[victim].kill();
    let killed_at = Instant::now();
    sh.alive.lock().unwrap()[victim] = false;
    let moved = followers.move_from(&sh, victim);
    let created_before = sh.runs.lock().unwrap().len();
    let moment = match &caught {
        Some(id) => format!("right after it finished run {id}, whose run.finished was not stored yet"),
        None => "while it drove runs".to_owned(),
    };
    eprintln!(
        "cluster test: server {victim} killed at {:.1} s {moment} ({created_before} runs created); {moved} stream \
         clients move to a survivor",
        started.elapsed().as_secs_f64()
    );
    let (takeover, broke) = measure_takeover(&pool, &victim_id, killed_at).await;
    sh.violations.lock().unwrap().extend(broke);
    let secs = |d: Option<Duration>| d.map_or("never".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()));
    eprintln!(
        "cluster test: TAKEOVER: the killed server held {} runs; the last was claimed by a survivor {} and went on \
         there {} after the SIGKILL (lease {LEASE_SECS} s, promised within lease + 2 s)",
        takeover.held,
        secs(takeover.claimed),
        secs(takeover.progressed)
    );

    // Let everything finish on the survivors.
    let settling = Instant::now();
    let (mut last, mut still_since, mut reported) = (None, Instant::now(), Instant::now());
    loop {
        let statuses: Vec<(String, i64)> =
            sqlx::query_as("SELECT status, count(*) FROM runs GROUP BY status ORDER BY status")
                .fetch_all(&pool)
                .await
                .expect("the runs read");
        let events = count(&pool, "SELECT count(*) FROM run_events").await;
        let finished: i64 = statuses
            .iter()
            .filter(|(s, _)| matches!(s.as_str(), "done" | "failed" | "cancelled"))
            .map(|(_, n)| n)
            .sum();
        if creating.is_finished() && finished == statuses.iter().map(|(_, n)| n).sum::<i64>() {
            break;
        }
        let now = Some((statuses.clone(), events));
        if now != last {
            (last, still_since) = (now, Instant::now());
        }
        if still_since.elapsed() > STALL_LIMIT || settling.elapsed() > HANG_LIMIT {
            let what = format!(
                "the runs did not all finish: nothing moved for {:.0} s ({statuses:?}); {}",
                still_since.elapsed().as_secs_f64(),
                unfinished(&pool).await
            );
            sh.violation(what);
            break;
        }
        if reported.elapsed() > Duration::from_secs(10) {
            reported = Instant::now();
            eprintln!("cluster test: at {:.0} s: {statuses:?}", started.elapsed().as_secs_f64());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let settled = settling.elapsed();
    stop_tx.send_replace(true);
    for task in [creating, approving] {
        if tokio::time::timeout(Duration::from_secs(30), task).await.is_err() {
            sh.violation("a creating or approving task did not stop within 30 s".into());
        }
    }
    let clients = std::mem::take(&mut *followers.tasks.lock().unwrap());
    for task in clients {
        if tokio::time::timeout(Duration::from_secs(30), task).await.is_err() {
            sh.violation("an SSE client did not stop within 30 s".into());
        }
    }

    // The final check, read through the survivors in turn.
    let survivors = sh.alive();
    let outbox = Outbox::read(&pool).await;
    let mut counts = Counts::default();
    let mut broke = Vec::new();
    let runs: Vec<(String, Tracked)> = std::mem::take(&mut *sh.runs.lock().unwrap()).into_iter().collect();
    if runs.len() != RUNS as usize {
        broke.push(format!("{} runs were created, not {RUNS}", runs.len()));
    }
    for (n, (id, run)) in runs.iter().enumerate() {
        let base = &sh.bases[survivors[n % survivors.len()]];
        match check_run(&http, base, id, run, &outbox, &mut counts).await {
            Ok(b) => broke.extend(b),
            Err(e) => broke.push(format!("run {id}: {e}")),
        }
    }
    let ids: BTreeSet<String> = runs.iter().map(|(id, _)| id.clone()).collect();
    let (events, b) = check_event_logs(&pool, &http, &sh.bases[survivors[0]], &ids).await;
    broke.extend(b);
    let approvals = std::mem::take(&mut *sh.approvals.lock().unwrap());
    let mut lost = 0;
    for ((run_id, call_id), a) in &approvals {
        // Sent to the victim, which stored it and died before answering: the
        // call was not listed again (`check_run` checked what is stored).
        if !a.confirmed && a.via == victim {
            lost += 1;
        } else if !a.confirmed {
            broke.push(format!(
                "run {run_id} call {call_id}: no approval of the test's was confirmed ({} attempts, the last through \
                 server {} answered {})",
                a.attempts, a.via, a.last
            ));
        }
        if a.via == a.creator {
            broke.push(format!("run {run_id} call {call_id} was approved through its creator {}", a.creator));
        }
    }
    let retried = approvals.values().filter(|a| a.attempts > 1).count();
    let streamed = checks::check_streams(&http, &sh.bases[survivors[0]], &followers.world).await;
    let streamed = streamed.unwrap_or_else(|e| {
        broke.push(format!("the stream check failed: {e}"));
        0
    });
    let world = std::mem::take(&mut *followers.world.lock().unwrap());
    broke.extend(world.violations);
    let reconnects: u32 = world.runs.values().map(|r| r.sse.lock().unwrap().streams.saturating_sub(1)).sum();
    broke.extend(std::mem::take(&mut *sh.violations.lock().unwrap()));
    for s in &mut servers {
        s.kill();
    }
    pool.close().await;
    if !broke.is_empty() {
        let mut distinct: Vec<String> = Vec::new();
        for v in broke {
            if !distinct.contains(&v) {
                distinct.push(v);
            }
        }
        let what = format!("{} invariant(s) broke:\n  - {}", distinct.len(), distinct.join("\n  - "));
        logs.fail(seed, &what);
    }
    eprintln!(
        "cluster test: seed {seed}: passed in {:.0} s (settled {:.0} s after the kill's takeover): {} runs done, \
         {} steps, {} messages, {} tool calls, {events} stored events, {} emails, {} approvals through a server other than the creator ({retried} sent more than \
         once, {lost} answers lost with the killed server), {} streams followed ({streamed} events, {moved} moved \
         off the killed server, {reconnects} reconnections); takeover of {} runs: claimed after {}, going on after {}",
        started.elapsed().as_secs_f64(),
        settled.as_secs_f64(),
        runs.len(),
        counts.steps,
        counts.messages,
        counts.calls,
        counts.emails,
        approvals.len(),
        world.runs.len(),
        takeover.held,
        secs(takeover.claimed),
        secs(takeover.progressed),
    );
}
