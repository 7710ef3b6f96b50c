//! Engine throughput on a SQLite file with the built-in scripted model
//! (zero latency), printed as figures:
//! - overhead per durable turn, over sequential 20-turn runs;
//! - runs/s for 1,000 concurrent 1-turn runs;
//! - tool selection over 1,000 attached tools: building the BM25 index
//!   (once per run driver) and scoring one turn's messages.
//!
//! `cargo bench -p runlens-engine --bench engine` (release build);
//! `… -- selection` prints the selection figures alone. Targets for later:
//! ≤ 150 µs per durable turn, ≥ 5,000 durable runs/s; selection ≤ 1 ms a turn.

use std::time::{Duration, Instant};

/// The allocator of the `runlens` server binary, so figures match it.
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

async fn engine(dir: &tempfile::TempDir, name: &str, max_concurrent_runs: usize) -> Engine {
    let url = format!("sqlite://{}", dir.path().join(name).display());
    Engine::open(&url, EngineConfig { max_concurrent_runs, ..EngineConfig::default() }).await.unwrap()
}

async fn per_turn(dir: &tempfile::TempDir) {
    let engine = engine(dir, "turns.db", 64).await;
    let runs = 50;
    let turns = 20;
    // Warm up the pool and the page cache.
    let (run, _) = engine.create_run(scripted(turns)).await.unwrap();
    engine.wait_until_settled(&run.id, Duration::from_secs(60)).await.unwrap();
    let start = Instant::now();
    for _ in 0..runs {
        // Wait on the bus, not by polling the store, so only the engine's own
        // work is timed.
        let mut events = engine.subscribe();
        let (run, _) = engine.create_run(scripted(turns)).await.unwrap();
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
    let elapsed = start.elapsed();
    let sample = engine.list_runs(&Default::default()).await.unwrap().runs[0].clone();
    assert_eq!(sample.step_count as usize, turns);
    let per_turn = elapsed / (runs * turns) as u32;
    println!(
        "per-turn overhead: {:>8.1} µs per durable turn ({runs} sequential runs × {turns} turns, each turn = model answer + 1 calculator call, in {:.2} s)",
        per_turn.as_secs_f64() * 1e6,
        elapsed.as_secs_f64()
    );
}

async fn concurrent_runs(dir: &tempfile::TempDir, limit: usize) {
    let engine = engine(dir, &format!("concurrent-{limit}.db"), limit).await;
    let n = 1000;
    let mut events = engine.subscribe();
    let start = Instant::now();
    let created = join_all((0..n).map(|_| engine.create_run(scripted(1)))).await;
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
                finished = count_done(&engine, &created).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    let elapsed = start.elapsed();
    println!(
        "concurrent runs:   {:>8.0} runs/s ({n} one-turn runs created at once, {limit} driven at a time, {:.2} s)",
        n as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
}

async fn count_done(engine: &Engine, runs: &[runlens_engine::model::Run]) -> usize {
    let mut done = 0;
    for r in runs {
        if engine.get_run(&r.id).await.unwrap().status.is_terminal() {
            done += 1;
        }
    }
    done
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
    // `cargo bench` passes `--bench`; `selection` runs that figure alone.
    selection();
    if std::env::args().any(|a| a == "selection") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    rt.block_on(async {
        per_turn(&dir).await;
        concurrent_runs(&dir, 64).await;
        concurrent_runs(&dir, 1000).await;
    });
}
