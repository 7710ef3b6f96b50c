//! Scale figures (issue 5), printed:
//! - events persisted per second through the bus (group commit), and the
//!   publish cost on the run loop's side;
//! - reading a 10,000-step run: its outline (target ≤ 10 ms) and all of it
//!   with payloads, and replaying its events;
//! - the first page of the runs list over 1,000,000 runs, per filter
//!   (target < 50 ms), and of a full-text search across them, per word
//!   (target ≤ 100 ms).
//!
//! `cargo bench -p runlens-engine --bench scale`. The 10k-step run and the
//! 1M-run database are built once into `CARGO_TARGET_TMPDIR` and reused
//! (delete `runlens-bench/` there to rebuild them).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use runlens_engine::events::{EventBus, EventKind};
use runlens_engine::model::{OutcomeFilter, RunFilter, RunStatus};
use runlens_engine::paging::light_step;
use runlens_engine::store::{RunStore, SqliteStore, Store};
use runlens_engine::{Engine, EngineConfig};

/// The allocator of the `runlens` server binary, so figures match it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const RUNS: i64 = 1_000_000;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Median and best of `n` timed calls.
async fn time<T, F: Future<Output = T>>(n: usize, mut f: impl FnMut() -> F) -> (Duration, Duration) {
    let mut all = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        std::hint::black_box(f().await);
        all.push(start.elapsed());
    }
    all.sort();
    (all[n / 2], all[0])
}

async fn events_per_second(dir: &Path) {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&url(&dir.join("events.db"))).await.unwrap());
    let bus = EventBus::new(4096, Some(store));
    let (n, runs) = (200_000u32, 20);
    let start = Instant::now();
    for i in 0..n {
        let kind = EventKind::MessageDelta { step_index: i / 16, text: "some streamed words ".into() };
        bus.publish(&format!("run-{}", i % runs), kind);
    }
    let published = start.elapsed();
    bus.flush().await;
    let total = start.elapsed();
    println!(
        "events persisted: {:>8.0} events/s ({n} message.delta events over {runs} runs, stored in {:.2} s); publish() costs {:.2} µs on the caller",
        f64::from(n) / total.as_secs_f64(),
        total.as_secs_f64(),
        published.as_secs_f64() * 1e6 / f64::from(n)
    );
}

async fn trace_10k(dir: &Path) {
    let engine = Engine::open(&url(&dir.join("trace-10k.db")), EngineConfig::default()).await.unwrap();
    let filter = RunFilter { tag: Some("fixture:trace".into()), ..RunFilter::default() };
    let existing = engine.runs().list_runs(&filter).await.unwrap().runs.into_iter().find(|r| r.step_count == 10_000);
    let run = match existing {
        Some(run) => run,
        None => {
            let start = Instant::now();
            let run = engine.runs().generate_trace(10_000).await.unwrap();
            println!("10k-step fixture:  generated in {:.1} s (reused on later runs)", start.elapsed().as_secs_f64());
            run
        }
    };
    assert_eq!(run.status, RunStatus::Done);
    let store = engine.store().clone();
    // Warm, as in a running server: the readers' connections are open and
    // hold their prepared statements (the first call opens them).
    let (cold, _) = time(1, || store.step_outline(&run.id)).await;
    let (med, best) = time(51, || store.step_outline(&run.id)).await;
    println!("10k steps outline: {:>8.2} ms median, {:.2} ms best, {:.2} ms first call (all 10,000 steps and calls through the covering indexes, no payloads; target ≤ 10 ms)", ms(med), ms(best), ms(cold));
    let (med, best) = time(15, || store.steps(&run.id)).await;
    println!("10k steps read:    {:>8.2} ms median, {:.2} ms best (all 10,000 steps with their tool calls and payloads, typed)", ms(med), ms(best));
    // For comparison: the same step rows fetched through sqlx, which moves
    // each row from its worker thread (why trace reads bypass it).
    let pool = sqlx::SqlitePool::connect(&url(&dir.join("trace-10k.db"))).await.unwrap();
    let rows = "SELECT * FROM steps WHERE run_id = ? ORDER BY idx";
    let (med, best) = time(10, || sqlx::query(rows).bind(&run.id).fetch_all(&pool)).await;
    println!(
        "  sqlx, rows only: {:>8.2} ms median, {:.2} ms best (the 10,000 step rows, not decoded)",
        ms(med),
        ms(best)
    );
    let (med, _) = time(50, || store.steps_page(&run.id, 5_000, 200)).await;
    println!("steps page:        {:>8.2} ms median (200 steps from index 5,000)", ms(med));
    let steps = store.steps(&run.id).await.unwrap();
    let (med, _) =
        time(5, || async { serde_json::to_string(&steps.iter().map(light_step).collect::<Vec<_>>()).unwrap().len() })
            .await;
    println!("light JSON:        {:>8.2} ms median (10,000 steps, payloads=false, serialized)", ms(med));
    let start = Instant::now();
    let mut events = engine.traces().run_events(&run.id, 0).await.unwrap();
    let mut n = 0u64;
    while let Some(e) = events.next().await {
        e.unwrap();
        n += 1;
    }
    let took = start.elapsed();
    println!(
        "events replayed:   {:>8.0} events/s ({n} events of the 10k-step run in {:.0} ms)",
        n as f64 / took.as_secs_f64(),
        ms(took)
    );
}

async fn runs_1m(dir: &Path) {
    let path = dir.join("runs-1m.db");
    let store = SqliteStore::open(&url(&path)).await.unwrap();
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM runs").fetch_one(store.pool()).await.unwrap();
    let children: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM runs WHERE parent_call_id IS NOT NULL")
        .fetch_one(store.pool())
        .await
        .unwrap();
    let answers: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM steps").fetch_one(store.pool()).await.unwrap();
    // A fixture from before child runs or answers existed is made again.
    if count < RUNS || children == 0 || answers == 0 {
        let start = Instant::now();
        fill_runs(&store).await;
        println!("1M-run fixture:    inserted in {:.1} s (reused on later runs)", start.elapsed().as_secs_f64());
    }
    // The server always lists one project's runs: every filter but the
    // first is timed as it asks (all fixture runs are in `default`).
    let project = |f: RunFilter| RunFilter { project: Some("default".into()), ..f };
    let filters = [
        ("all projects, none", RunFilter::default()),
        ("none (root runs)", project(RunFilter::default())),
        ("all=true (children too)", project(RunFilter { all: Some(true), ..RunFilter::default() })),
        ("status=failed (1%)", project(RunFilter { status: Some(RunStatus::Failed), ..RunFilter::default() })),
        ("tag env:prod (10%)", project(RunFilter { tag: Some("env:prod".into()), ..RunFilter::default() })),
        ("tag customer:c42 (0.1%)", project(RunFilter { tag: Some("customer:c42".into()), ..RunFilter::default() })),
        ("agent a7 (5%)", project(RunFilter { agent_id: Some("a7".into()), ..RunFilter::default() })),
        ("outcome=clean (~97%)", project(RunFilter { outcome: Some(OutcomeFilter::Clean), ..RunFilter::default() })),
    ];
    for (name, mut filter) in filters {
        filter.limit = Some(50);
        let (med, best) = time(20, || store.list_runs(&filter)).await;
        // Page 21: follow the cursor 20 times, then time the next page.
        for _ in 0..20 {
            filter.cursor = store.list_runs(&filter).await.unwrap().next_cursor;
        }
        let (deep, _) = time(20, || store.list_runs(&filter)).await;
        println!(
            "1M runs, {name:<24} first page {:>6.2} ms median ({:.2} best), page 21 {:.2} ms (50 runs; target < 50 ms)",
            ms(med),
            ms(best),
            ms(deep)
        );
    }
    // The worst case of the outcome filter: no run matches, so the page
    // walks every run in order and probes its rejected calls.
    let none = project(RunFilter { outcome: Some(OutcomeFilter::Rejected), limit: Some(50), ..RunFilter::default() });
    let (med, best) = time(3, || store.list_runs(&none)).await;
    println!(
        "1M runs, outcome=rejected (none match) first page {:>6.2} ms median ({:.2} best): every run probed once, no target",
        ms(med),
        ms(best)
    );
    search_1m(&store, project).await;
}

/// Full-text search over the million runs (their prompts, and the answers
/// of one in ten), per word from every run to none.
async fn search_1m(store: &SqliteStore, project: impl Fn(RunFilter) -> RunFilter) {
    let searches = [
        ("compute", "every run"),
        ("explain compute", "every run, two words"),
        ("topic7", "1%, one word"),
        ("compute topic7 explain", "1%, three words"),
        ("kohlrabi", "0.01%, in answers"),
        ("777777", "one run"),
        ("zzzzqq", "none"),
    ];
    for (q, share) in searches {
        let mut filter = project(RunFilter { q: Some(q.into()), limit: Some(50), ..RunFilter::default() });
        let page = store.list_runs(&filter).await.unwrap();
        let found = page.runs.len();
        let (med, best) = time(20, || store.list_runs(&filter)).await;
        for _ in 0..4 {
            filter.cursor = store.list_runs(&filter).await.unwrap().next_cursor;
        }
        let (deep, _) = time(20, || store.list_runs(&filter)).await;
        println!(
            "1M runs, search {:<24} first page {:>6.2} ms median ({:.2} best), page 5 {:.2} ms ({found} runs, {share}; target ≤ 100 ms)",
            format!("{q:?}"),
            ms(med),
            ms(best),
            ms(deep)
        );
    }
    let failed = project(RunFilter {
        q: Some("compute".into()),
        status: Some(RunStatus::Failed),
        limit: Some(50),
        ..RunFilter::default()
    });
    let (med, best) = time(20, || store.list_runs(&failed)).await;
    println!(
        "1M runs, search \"compute\" status=failed (1%) first page {:>6.2} ms median ({:.2} best) (target ≤ 100 ms)",
        ms(med),
        ms(best)
    );
}

/// A million runs in a few SQL statements: statuses, agents and tags spread
/// so that filters match 0.1%–90% of them; one in ten is a child run of the
/// run before it (the list shows root runs unless asked for all).
async fn fill_runs(store: &SqliteStore) {
    let pool = store.pool();
    sqlx::query("DELETE FROM run_tags").execute(pool).await.unwrap();
    sqlx::query("DELETE FROM steps").execute(pool).await.unwrap();
    sqlx::query("DELETE FROM runs").execute(pool).await.unwrap();
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
         INSERT INTO runs (id, name, status, model, model_settings, initial_prompt, tools, tags, context,
             max_turns, agent_id, input_tokens, output_tokens, total_tokens, requests, step_count,
             created_at, updated_at, started_at, finished_at, parent_run_id, parent_call_id, root_run_id, depth)
         SELECT printf('run-%07d', i), 'Run number ' || i,
             CASE WHEN i % 100 = 0 THEN 'failed' WHEN i % 97 = 0 THEN 'paused' WHEN i % 89 = 0 THEN 'running'
                  ELSE 'done' END,
             'builtin', 'null', 'Please compute ' || i || ' + 1 and explain topic' || (i % 100) || '.',
             '[\"calculator\"]',
             json_object('env', CASE WHEN i % 10 = 0 THEN 'prod' ELSE 'dev' END, 'customer', 'c' || (i % 1000)),
             'null', 10, 'a' || (i % 20), 120, 40, 160, 2, 2,
             1700000000000 + i * 1000, 1700000000000 + i * 1000 + 500, 1700000000000 + i * 1000,
             1700000000000 + i * 1000 + 500,
             CASE WHEN i % 10 = 5 THEN printf('run-%07d', i - 1) END, CASE WHEN i % 10 = 5 THEN 'call_0_0' END,
             printf('run-%07d', CASE WHEN i % 10 = 5 THEN i - 1 ELSE i END), CASE WHEN i % 10 = 5 THEN 1 ELSE 0 END
         FROM n",
    )
    .bind(RUNS)
    .execute(pool)
    .await
    .unwrap();
    // One run in ten has an answer; one in ten thousand names a kohlrabi.
    sqlx::query(
        "INSERT INTO steps (run_id, idx, kind, status, request, response, input_tokens, output_tokens,
             cache_read_tokens, reasoning_tokens, total_tokens, requests, started_at, completed_at)
         SELECT id, 0, 'model_turn', 'completed', '{\"messages\": 1}',
             json_object('text', 'The answer is ' || (rowid + 1) ||
                 CASE WHEN rowid % 10000 = 0 THEN ', and a kohlrabi.' ELSE '.' END, 'tool_calls', 0),
             120, 40, 0, 0, 160, 1, created_at, created_at + 500
         FROM runs WHERE rowid % 10 = 0",
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO run_tags (key, value, run_id, created_at)
         SELECT j.key, j.value, r.id, r.created_at FROM runs r, json_each(r.tags) j",
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE").execute(pool).await.unwrap();
}

fn url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("runlens-bench");
    std::fs::create_dir_all(&dir).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    rt.block_on(async {
        events_per_second(scratch.path()).await;
        trace_10k(&dir).await;
        runs_1m(&dir).await;
    });
}
