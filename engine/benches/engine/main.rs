//! Engine speed and scale on a SQLite file (or, with
//! `RUNLENS_BENCH_STORE=postgres`, on the PostgreSQL of
//! `RUNLENS_BENCH_POSTGRES`, default `postgres://postgres@127.0.0.1:5432/test`,
//! in schemas of its own dropped at the end) with the built-in scripted model
//! (zero latency), each figure printed beside its target:
//! - engine time per durable turn at turns 1–20 and at turns 480–500 (each
//!   turn = model answer + 1 calculator call, saved before the next turn);
//! - runs/s for 1,000 one-turn runs created at once;
//! - stored bytes per 20-turn run (database growth after a checkpoint; on
//!   PostgreSQL the growth of the tables with their indexes and TOAST);
//! - time from an approval to the next model request, after 20 turns;
//! - memory per paused run, for 10,000 paused runs created in this process
//!   (the server's memory with a million paused runs, after a restart, is
//!   `--bench inbox`'s);
//! - tool selection over 1,000 attached tools: building the BM25 index
//!   (once per run driver) and scoring one turn's messages;
//! - items/s of an experiment of 1,000 items with recorded tools, scored.
//!
//! `cargo bench -p runlens-engine --bench engine` (release build); one
//! figure alone: `… -- turns | history | runs | bytes | approval | paused |
//! selection | experiment`.
//!
//! Turn times come from the model itself: the bench registers a `builtin`
//! that notes the moment each request reaches it and then answers like the
//! built-in model, so the time between two requests of a run is exactly
//! one turn of engine work (saving the answer, running the tool, saving
//! the results, preparing the next request), whatever the event stream does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The allocator of the `runlens` server binary, so figures match it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use async_trait::async_trait;
use futures::future::join_all;
use runlens_engine::events::EventKind;
use runlens_engine::llm::{BuiltinModel, Model, ModelError, ModelRegistry, ModelRequest, ModelStream};
use runlens_engine::model::{Actor, CreateRun, DecisionRequest, RunStatus};
use runlens_engine::tools::ToolRegistry;
use runlens_engine::{Engine, EngineConfig};
use serde_json::{json, Value};

mod experiment;
mod stores;
use stores::{stored_bytes, Db, Stores};

/// The built-in model, noting when each run's requests arrive and how long
/// the model itself took to answer (it counts the tokens of the whole
/// request, as a provider would: model time, not engine time).
#[derive(Default)]
struct Timed {
    arrivals: Mutex<HashMap<String, Vec<(Instant, Duration)>>>,
}

#[async_trait]
impl Model for Timed {
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let arrived = Instant::now();
        let run_id = request.run_id.clone();
        let answer = BuiltinModel.stream(request).await;
        self.arrivals.lock().unwrap().entry(run_id).or_default().push((arrived, arrived.elapsed()));
        answer
    }
    fn validate_settings(&self, settings: &Value) -> Result<(), String> {
        BuiltinModel.validate_settings(settings)
    }
}

impl Timed {
    fn take(&self, run_id: &str) -> Vec<(Instant, Duration)> {
        self.arrivals.lock().unwrap().remove(run_id).unwrap_or_default()
    }
}

fn calculator_turns(turns: usize) -> Vec<Value> {
    (0..turns)
        .map(|i| json!({"tool_calls": [{"name": "calculator", "arguments": {"expression": format!("{i} + 1")}}]}))
        .collect()
}

/// A run of `turns` turns: `turns - 1` calculator calls, then a final answer.
fn scripted(turns: usize) -> CreateRun {
    let mut script = calculator_turns(turns - 1);
    script.push(json!({"text": "done"}));
    CreateRun {
        initial_prompt: "bench".into(),
        tools: Some(vec!["calculator".into()]),
        max_turns: Some(turns as u32 + 1),
        model_settings: Some(json!({ "script": script })),
        ..CreateRun::default()
    }
}

/// `turns` calculator turns, then a `send_email` that needs approval, then a final answer.
fn pausing(turns: usize) -> CreateRun {
    let mut script = calculator_turns(turns);
    script.push(json!({"tool_calls": [{"name": "send_email", "arguments": {"to": "ops@example.com", "subject": "report", "body": "all done"}}]}));
    script.push(json!({"text": "sent"}));
    CreateRun {
        initial_prompt: "bench".into(),
        tools: Some(vec!["calculator".into(), "send_email".into()]),
        max_turns: Some(turns as u32 + 3),
        model_settings: Some(json!({ "script": script })),
        ..CreateRun::default()
    }
}

struct Bench {
    engine: Engine,
    model: Arc<Timed>,
    db: Db,
}

async fn bench(stores: &Stores, name: &str, max_concurrent_runs: usize) -> Bench {
    let (db, url) = stores.fresh(name);
    let store = runlens_engine::store::open(&url).await.unwrap();
    let model = Arc::new(Timed::default());
    let mut models = ModelRegistry::default();
    models.register("builtin", model.clone());
    let config = EngineConfig { max_concurrent_runs, ..EngineConfig::default() };
    let engine = Engine::with_parts(store, ToolRegistry::with_builtins(), models, config);
    Bench { engine, model, db }
}

impl Bench {
    /// Creates a run and waits for its `run.finished` (or pause) on the bus.
    async fn run(&self, req: CreateRun) -> String {
        let mut events = self.engine.subscribe();
        let (run, _) = self.engine.runs().create_run(req).await.unwrap();
        wait_for(&mut events, &run.id).await;
        run.id
    }
}

/// Waits until `run_id` finishes or pauses.
async fn wait_for(
    events: &mut tokio::sync::broadcast::Receiver<runlens_engine::events::Event>,
    run_id: &str,
) -> RunStatus {
    loop {
        let e = tokio::time::timeout(Duration::from_secs(120), events.recv()).await.unwrap().unwrap();
        if e.run_id != run_id {
            continue;
        }
        match e.kind {
            EventKind::RunFinished { status, .. } => return status,
            EventKind::RunStatus { new: RunStatus::Paused, .. } => return RunStatus::Paused,
            _ => {}
        }
    }
}

/// Mean engine time per turn over the arrivals `from..=to`: turn `i` is
/// the gap between request `i - 1` and request `i`, less the model's own
/// time answering request `i - 1`.
fn per_turn(arrivals: &[(Instant, Duration)], from: usize, to: usize) -> Duration {
    let model: Duration = arrivals[from - 1..to].iter().map(|a| a.1).sum();
    (arrivals[to].0 - arrivals[from - 1].0 - model) / (to - from + 1) as u32
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Median and range of `samples`, in µs.
fn spread(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let median = samples[samples.len() / 2];
    format!("{:.0} µs median ({:.0}–{:.0})", us(median), us(samples[0]), us(*samples.last().unwrap()))
}

async fn turns(dir: &Stores) {
    let b = bench(dir, "turns", 64).await;
    b.run(scripted(20)).await; // warm-up: pool, page cache
    let runs = 50;
    let start = Instant::now();
    let mut samples = Vec::new();
    for _ in 0..runs {
        let id = b.run(scripted(20)).await;
        let arrivals = b.model.take(&id);
        assert_eq!(arrivals.len(), 20);
        samples.push(per_turn(&arrivals, 1, 19));
    }
    let whole = start.elapsed() / (runs * 20) as u32;
    println!(
        "per durable turn, turns 1–20:   {}; whole runs incl. create and finish {:.0} µs/turn  [target ≤ 150 µs]",
        spread(samples),
        us(whole)
    );
}

async fn history(dir: &Stores) {
    let b = bench(dir, "history", 64).await;
    let n = 500;
    let id = b.run(scripted(n)).await;
    let arrivals = b.model.take(&id);
    assert_eq!(arrivals.len(), n);
    let early = per_turn(&arrivals, 1, 20);
    let late = per_turn(&arrivals, 480, 499);
    let model =
        |from: usize, to: usize| arrivals[from..=to].iter().map(|a| a.1).sum::<Duration>() / (to - from + 1) as u32;
    println!(
        "per durable turn, turns 480–500: {:.0} µs against {:.0} µs at turns 1–20 (×{:.2}); the model's own time {:.0} µs against {:.0} µs  [target ≤ ×1.2]",
        us(late),
        us(early),
        late.as_secs_f64() / early.as_secs_f64(),
        us(model(480, 499)),
        us(model(1, 20)),
    );
}

async fn runs(dir: &Stores, limit: usize) {
    let b = bench(dir, &format!("runs_{limit}"), limit).await;
    b.run(scripted(1)).await;
    let n = 1000;
    let mut events = b.engine.subscribe();
    let start = Instant::now();
    let created = join_all((0..n).map(|_| b.engine.runs().create_run(scripted(1)))).await;
    let created: Vec<_> = created.into_iter().map(|r| r.unwrap().0).collect();
    let mut finished = 0;
    while finished < n {
        match events.recv().await {
            Ok(e) => {
                if let EventKind::RunFinished { status, .. } = e.kind {
                    assert_eq!(status, RunStatus::Done);
                    finished += 1;
                }
            }
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                finished = count_done(&b.engine, &created).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    let elapsed = start.elapsed();
    println!(
        "runs/s: {:>6.0} ({n} one-turn runs created at once, {limit} driven at a time, {:.2} s)  [target ≥ 5,000]",
        n as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
}

async fn count_done(engine: &Engine, runs: &[runlens_engine::model::Run]) -> usize {
    let mut done = 0;
    for r in runs {
        if engine.runs().get_run(&r.id).await.unwrap().status.is_terminal() {
            done += 1;
        }
    }
    done
}

async fn bytes(dir: &Stores) {
    let b = bench(dir, "bytes", 64).await;
    b.run(scripted(20)).await;
    b.engine.traces().flush_events().await;
    let before = stored_bytes(&b.db).await;
    let n = 200;
    for _ in 0..n {
        b.run(scripted(20)).await;
    }
    b.engine.traces().flush_events().await;
    let after = stored_bytes(&b.db).await;
    let sample = b.engine.runs().list_runs(&Default::default()).await.unwrap().runs[0].clone();
    let export = serde_json::to_vec(&b.engine.snapshots().export_document(&sample.id).await.unwrap()).unwrap().len();
    println!(
        "stored bytes per 20-turn run: {:.1} KB (the state export of one is {:.1} KB; {n} runs)  [target ≤ 20 KB]",
        (after - before) as f64 / n as f64 / 1000.0,
        export as f64 / 1000.0
    );
}

async fn approval(dir: &Stores) {
    let b = bench(dir, "approval", 64).await;
    // Only an approver's decision grants a call: an approver key of the project.
    let (key, _) = b
        .engine
        .identity()
        .create_key(
            "bench",
            Some(runlens_engine::model::DEFAULT_PROJECT),
            runlens_engine::model::Role::Approver,
            &Actor::system(),
        )
        .await
        .unwrap();
    let by = runlens_engine::key_actor(&key);
    let (mut samples, mut calls) = (Vec::new(), Vec::new());
    for i in 0..21 {
        let id = b.run(pausing(20)).await;
        let run = b.engine.runs().get_run(&id).await.unwrap();
        assert_eq!(run.status, RunStatus::Paused);
        let call = run.interruptions[0].call_id.clone();
        let before = b.model.take(&id).len();
        let mut events = b.engine.subscribe();
        let decided = Instant::now();
        b.engine.approvals().approve(&id, &call, DecisionRequest::default(), &by).await.unwrap();
        let answered = decided.elapsed();
        assert_eq!(wait_for(&mut events, &id).await, RunStatus::Done);
        let arrivals = b.model.take(&id);
        assert_eq!(before, 21);
        if i > 0 {
            samples.push(arrivals[0].0 - decided);
            calls.push(answered);
        }
    }
    println!(
        "approval → next model request, after 20 turns: {} (20 runs; the email is sent in between; the approve call itself {})  [target ≤ 1,000 µs]",
        spread(samples),
        spread(calls)
    );
}

/// Resident memory of this process, in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

async fn paused(dir: &Stores) {
    let n = 10_000;
    {
        let b = bench(dir, "paused", 256).await;
        b.run(pausing(0)).await;
        let before = rss();
        let mut events = b.engine.subscribe();
        for chunk in 0..n / 1000 {
            let created = join_all((0..1000).map(|_| b.engine.runs().create_run(pausing(0)))).await;
            let mut waiting: std::collections::HashSet<String> = created.into_iter().map(|r| r.unwrap().0.id).collect();
            while !waiting.is_empty() {
                match events.recv().await {
                    Ok(e) => {
                        if matches!(e.kind, EventKind::RunStatus { new: RunStatus::Paused, .. }) {
                            waiting.remove(&e.run_id);
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        let ids: Vec<String> = waiting.iter().cloned().collect();
                        for id in ids {
                            if b.engine.runs().run_head(&id).await.unwrap().status == RunStatus::Paused {
                                waiting.remove(&id);
                            }
                        }
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            let _ = chunk;
        }
        b.engine.traces().flush_events().await;
        let busy = rss().saturating_sub(before);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let settled = rss().saturating_sub(before);
        println!(
            "memory per paused run, {n} paused: {:.2} KiB right after creating them, {:.2} KiB a second later  [target ≤ 1 KiB]",
            busy as f64 / n as f64 / 1024.0,
            settled as f64 / n as f64 / 1024.0
        );
    }
}

/// Tool selection over 1,000 tools of realistic shape (a name of two or
/// three words, a one-sentence description, a schema of two described
/// properties): the index build, and one turn's scoring and choice.
fn selection() {
    use runlens_engine::model::ToolInfo;
    use runlens_engine::tools::select::ToolIndex;

    const NOUNS: [&str; 25] = [
        "invoice",
        "customer",
        "order",
        "shipment",
        "ticket",
        "employee",
        "calendar",
        "document",
        "repository",
        "deployment",
        "server",
        "backup",
        "certificate",
        "campaign",
        "survey",
        "expense",
        "vendor",
        "flight",
        "hotel",
        "contract",
        "candidate",
        "webhook",
        "project",
        "weather",
        "currency",
    ];
    const VERBS: [&str; 8] = ["create", "get", "list", "update", "delete", "search", "archive", "export"];
    const SERVERS: [&str; 5] = ["office", "devops", "travel", "people", "finance"];
    let tools: Vec<ToolInfo> = (0..1000)
        .map(|i| {
            let (noun, verb, server) = (NOUNS[i % 25], VERBS[(i / 25) % 8], SERVERS[i / 200]);
            ToolInfo {
                name: format!("{server}__{verb}_{noun}"),
                description: format!("{verb}s a {noun} record of the {server} system, with its owner and dates."),
                schema: json!({"type": "object", "properties": {
                    "id": {"type": "string", "description": format!("The {noun} id")},
                    "fields": {"type": "object", "description": format!("What to {verb}")},
                }}),
                requires_approval: false,
                source: format!("mcp:{server}"),
                idempotent: true,
            }
        })
        .collect();
    let builds = 20;
    let start = Instant::now();
    for _ in 0..builds {
        std::hint::black_box(ToolIndex::new(&tools));
    }
    let build = start.elapsed() / builds;
    let index = ToolIndex::new(&tools);
    let queries = [
        "Please export last month's expense records for the finance team and archive the old ones.",
        "Is there a hotel near the conference, and what will the weather be on Friday?",
        "Create a ticket for the failed deployment on the devops server, then email the owner.",
    ];
    let used: Vec<String> = vec!["office__get_invoice".into(), "travel__search_flight".into()];
    let turns = 2000;
    let start = Instant::now();
    for i in 0..turns {
        std::hint::black_box(index.select(queries[i % queries.len()], &used, 20));
    }
    let turn = start.elapsed() / turns as u32;
    println!(
        "tool selection:    {:>8.1} µs per turn (1,000 tools, 20 offered; index built once per driver in {:.2} ms)",
        turn.as_secs_f64() * 1e6,
        build.as_secs_f64() * 1e3
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a figure's name runs it alone.
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|a| a == name);
    if wanted("selection") {
        selection();
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let dir = Stores::new();
    println!("store: {}", dir.name());
    // RUNLENS_BENCH_KEEP=1 keeps the databases (SQLite files, PostgreSQL schemas) for a look afterwards.
    let keep = std::env::var_os("RUNLENS_BENCH_KEEP").is_some();
    if keep && !dir.postgres {
        println!("databases kept in {}", dir.dir.path().display());
    }
    rt.block_on(async {
        if wanted("turns") {
            turns(&dir).await;
        }
        if wanted("history") {
            history(&dir).await;
        }
        if wanted("runs") {
            runs(&dir, 64).await;
            runs(&dir, 1000).await;
        }
        if wanted("bytes") {
            bytes(&dir).await;
        }
        if wanted("approval") {
            approval(&dir).await;
        }
        if wanted("paused") {
            paused(&dir).await;
        }
        if wanted("experiment") {
            experiment::experiment(&dir).await;
        }
        if keep && dir.postgres {
            println!("schemas kept: {:?}", dir.schemas.lock().unwrap());
        } else if !keep {
            dir.drop_schemas().await;
        }
    });
    if keep {
        let _ = dir.dir.keep();
    }
}
