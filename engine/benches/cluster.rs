//! Several servers on one PostgreSQL database, beside the embedded SQLite
//! store, with the built-in scripted model (zero latency); printed as a
//! table of figures:
//! - overhead per durable turn (sequential 20-turn runs), SQLite and PostgreSQL;
//! - runs/s for 1,000 one-turn runs created at once: SQLite, PostgreSQL with
//!   one server, and with two servers sharing the database (two engines,
//!   each with its own connection pool, in this process);
//! - takeover: a server holding runs that wait in a tool call dies without
//!   a word (its runtime is dropped, as a SIGKILL would), and the time until
//!   another server has finished all of them, with a 3 s and a 15 s lease.
//!
//! `cargo bench -p runlens-engine --bench cluster` (release build). Needs the
//! PostgreSQL of `RUNLENS_BENCH_POSTGRES` (default
//! `postgres://postgres@127.0.0.1:5432/test`); works in schemas of its own,
//! dropped at the end.

use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use futures::future::join_all;
use runlens_engine::events::EventKind;
use runlens_engine::model::{CreateRun, RunStatus};
use runlens_engine::{Engine, EngineConfig};
use serde_json::json;

fn scripted(turns: usize) -> CreateRun {
    let mut script: Vec<_> = (0..turns - 1)
        .map(|i| json!({"tool_calls": [{"name": "calculator", "arguments": {"expression": format!("{i} + 1")}}]}))
        .collect();
    script.push(json!({"text": "done"}));
    CreateRun {
        initial_prompt: "bench".into(),
        tools: Some(vec!["calculator".into()]),
        max_turns: Some(turns as u32),
        model_settings: Some(json!({ "script": script })),
        ..CreateRun::default()
    }
}

/// A run that waits `secs` in a tool call, then answers.
fn waiting(secs: f64) -> CreateRun {
    CreateRun {
        initial_prompt: "bench".into(),
        tools: Some(vec!["wait".into()]),
        max_turns: Some(2),
        model_settings: Some(json!({ "script": [
            {"tool_calls": [{"name": "wait", "arguments": {"seconds": secs}}]},
            {"text": "done"}
        ]})),
        ..CreateRun::default()
    }
}

fn postgres() -> String {
    std::env::var("RUNLENS_BENCH_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// The URL of schema `name` of the bench database.
fn schema_url(name: &str) -> String {
    format!("{}?options[search_path]={name}", postgres())
}

async fn drop_schema(name: &str) {
    use sqlx::Connection;
    if let Ok(mut conn) = sqlx::PgConnection::connect(&postgres()).await {
        let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE")).execute(&mut conn).await;
    }
}

async fn engine(url: &str, max_concurrent_runs: usize, lease: Duration) -> Engine {
    Engine::open(url, EngineConfig { max_concurrent_runs, lease, ..EngineConfig::default() }).await.unwrap()
}

/// Microseconds per durable turn over sequential 20-turn runs.
async fn per_turn(url: &str) -> f64 {
    let engine = engine(url, 64, Duration::from_secs(15)).await;
    let (runs, turns) = (30, 20);
    let (run, _) = engine.runs().create_run(scripted(turns)).await.unwrap();
    engine.runs().wait_until_settled(&run.id, Duration::from_secs(60)).await.unwrap();
    let start = Instant::now();
    for _ in 0..runs {
        let mut events = engine.subscribe();
        let (run, _) = engine.runs().create_run(scripted(turns)).await.unwrap();
        loop {
            let e = tokio::time::timeout(Duration::from_secs(60), events.recv()).await.unwrap().unwrap();
            if e.run_id == run.id {
                if let EventKind::RunFinished { status, .. } = e.kind {
                    assert_eq!(status, RunStatus::Done);
                    break;
                }
            }
        }
    }
    start.elapsed().as_secs_f64() * 1e6 / (runs * turns) as f64
}

/// Runs/s for `n` one-turn runs created at once, spread over `engines`
/// (each drives at most 64 at a time), until the store has them all done.
async fn runs_per_second(engines: &[Engine], n: usize) -> f64 {
    let start = Instant::now();
    let created = join_all((0..n).map(|i| engines[i % engines.len()].runs().create_run(scripted(1)))).await;
    let ids: Vec<String> = created.into_iter().map(|r| r.unwrap().0.id).collect();
    wait_all_done(&engines[0], &ids, Duration::from_secs(300)).await;
    n as f64 / start.elapsed().as_secs_f64()
}

/// Waits until every run of `ids` is `done` (asserted), reading the store.
async fn wait_all_done(engine: &Engine, ids: &[String], limit: Duration) {
    let deadline = Instant::now() + limit;
    let mut left: Vec<&String> = ids.iter().collect();
    while !left.is_empty() {
        assert!(Instant::now() < deadline, "{} runs not done", left.len());
        let mut still = Vec::new();
        for id in left {
            let run = engine.runs().get_run(id).await.unwrap();
            if run.status.is_terminal() {
                assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
            } else {
                still.push(id);
            }
        }
        left = still;
        if !left.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Seconds from a server's death until another server has taken over all
/// of its `n` runs: each waits 1 s in an idempotent tool call when the
/// server dies, the survivor runs the call again and the run finishes; the
/// figure is the time to the last run done, less that 1 s call.
fn takeover(url: &str, lease: Duration, n: usize) -> f64 {
    // The server that dies lives in a runtime of its own.
    let doomed = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let ids: Vec<String> = doomed.block_on(async {
        let a = engine(url, 64, lease).await;
        let mut ids = Vec::new();
        for _ in 0..n {
            ids.push(a.runs().create_run(waiting(1.0)).await.unwrap().0.id);
        }
        // Until every run is in its tool call (running, its lease held by A).
        for id in &ids {
            while a.runs().get_run(id).await.unwrap().step_count == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        ids
    });
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    // B is running when A dies, as in a cluster.
    let b = rt.block_on(engine(url, 64, lease));
    let killed = Instant::now();
    doomed.shutdown_background();
    rt.block_on(wait_all_done(&b, &ids, Duration::from_secs(120)));
    let took = killed.elapsed().as_secs_f64() - 1.0;
    rt.block_on(b.cluster().leave());
    took
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = |name: &str| format!("sqlite://{}", dir.path().join(name).display());
    let pid = std::process::id();
    let schemas: Vec<String> = (0..6).map(|i| format!("bench_{pid}_{i}")).collect();
    let (turn_sqlite, turn_pg, rps_sqlite, rps_pg1, rps_pg2) = rt.block_on(async {
        let turn_sqlite = per_turn(&sqlite("turns.db")).await;
        let turn_pg = per_turn(&schema_url(&schemas[0])).await;
        let one = engine(&sqlite("runs.db"), 64, Duration::from_secs(15)).await;
        let rps_sqlite = runs_per_second(&[one], 1000).await;
        let one = engine(&schema_url(&schemas[1]), 64, Duration::from_secs(15)).await;
        let rps_pg1 = runs_per_second(&[one], 1000).await;
        let a = engine(&schema_url(&schemas[2]), 64, Duration::from_secs(15)).await;
        let b = engine(&schema_url(&schemas[2]), 64, Duration::from_secs(15)).await;
        let rps_pg2 = runs_per_second(&[a, b], 1000).await;
        (turn_sqlite, turn_pg, rps_sqlite, rps_pg1, rps_pg2)
    });
    let takeover_3 = takeover(&schema_url(&schemas[3]), Duration::from_secs(3), 20);
    let takeover_15 = takeover(&schema_url(&schemas[4]), Duration::from_secs(15), 20);
    println!("                                   SQLite        PostgreSQL       target");
    println!("per durable turn                 {turn_sqlite:>8.1} µs   {turn_pg:>8.1} µs        —");
    println!("runs/s, one server               {rps_sqlite:>8.0}      {rps_pg1:>8.0}            —");
    println!("runs/s, two servers                     —      {rps_pg2:>8.0}            —");
    println!("takeover after a server dies, lease  3 s   —   {takeover_3:>8.2} s    ≤ 30 s");
    println!("takeover after a server dies, lease 15 s   —   {takeover_15:>8.2} s    ≤ 30 s");
    rt.block_on(async {
        for s in &schemas {
            drop_schema(s).await;
        }
    });
}
