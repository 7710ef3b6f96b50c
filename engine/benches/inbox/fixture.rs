//! The inbox bench's database of paused runs: a few real runs paused
//! through the engine with the built-in scripted model, then cloned in SQL
//! under new ids with their steps, calls, messages and events, made once into
//! `target/bench-inbox/` and reused while it is fresh.

use super::*;

/// Real paused runs the fixture clones.
const TEMPLATES: usize = 4;
/// The approval timeout of every fixture run (30 days, the most allowed):
/// recovery queues a deadline for each call.
const TIMEOUT_S: i64 = 30 * 24 * 3600;
/// A fixture older than this is made again (its deadlines would come near).
const FIXTURE_DAYS: i64 = 20;
/// Runs cloned per transaction.
const BATCH: i64 = 50_000;

/// The database of `n` paused runs, made if missing or stale.
pub(super) async fn fixture(n: u64) -> PathBuf {
    let dir = target_dir().join("bench-inbox");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("paused-{n}.db"));
    if path.exists() {
        let store = SqliteStore::open(&url(&path)).await.unwrap();
        let made: Option<(i64, i64)> =
            sqlx::query_as("SELECT n, made_at FROM bench_fixture").fetch_optional(store.pool()).await.unwrap_or(None);
        let pending = pending_count(&store).await;
        match made {
            Some((made_n, at)) if made_n as u64 == n && pending == n && now_ms() - at < FIXTURE_DAYS * 86_400_000 => {
                println!("fixture: {} ({n} paused runs, reused)", path.display());
                return path;
            }
            _ => println!("fixture: {} is stale or incomplete; making it again", path.display()),
        }
        drop(store);
    }
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let started = Instant::now();
    make_fixture(&path, n).await;
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "fixture: {} made in {:.1} s ({n} paused runs, {:.0} MB)",
        path.display(),
        started.elapsed().as_secs_f64(),
        size as f64 / 1e6
    );
    path
}

async fn pending_count(store: &SqliteStore) -> u64 {
    // The inbox's counter when the store keeps one, else a count.
    let counted: Option<i64> =
        sqlx::query_scalar("SELECT sum(n) FROM pending_counts").fetch_one(store.pool()).await.unwrap_or(None);
    match counted {
        Some(n) => n as u64,
        None => sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM tool_calls tc JOIN runs r ON r.id = tc.run_id
             WHERE tc.status = 'awaiting_approval' AND r.status = 'paused'",
        )
        .fetch_one(store.pool())
        .await
        .unwrap() as u64,
    }
}

/// What a run of the fixture asks for: one email to send, needing approval.
fn paused_run(i: usize) -> CreateRun {
    let to = format!("customer-{i}@example.com");
    CreateRun {
        initial_prompt: format!("Send the weekly status report to {to}."),
        tools: Some(vec!["send_email".into()]),
        approval: Some(ApprovalRequest::tools(["send_email"]).with_timeout_s(TIMEOUT_S as u64)),
        model_settings: Some(json!({ "script": [
            {"text": "I'll send the report now.", "tool_calls": [{"name": "send_email", "arguments": {
                "to": to, "subject": "Weekly status", "body": "All systems nominal this week."}}]},
            {"text": "Sent."}
        ]})),
        ..CreateRun::default()
    }
}

/// Tables with a `run_id` the clone copies row for row (the inbox's
/// `pending_calls` and its counts follow `runs` and `tool_calls` through
/// their triggers; `status_changes` through its trigger, for runs with a
/// status webhook, which these have not).
const CLONED: [&str; 5] = ["steps", "tool_calls", "messages", "run_events", "run_tags"];
const BY_TRIGGER: [&str; 2] = ["pending_calls", "status_changes"];

async fn make_fixture(path: &Path, n: u64) {
    let engine = Engine::open(&url(path), EngineConfig::default()).await.unwrap();
    let mut templates = Vec::new();
    for i in 0..TEMPLATES {
        let (run, _) = engine.runs().create_run(paused_run(i)).await.unwrap();
        let run = engine.runs().wait_until_settled(&run.id, Duration::from_secs(60)).await.unwrap();
        assert_eq!(run.status, RunStatus::Paused, "{:?}", run.failure_reason);
        assert_eq!(run.interruptions.len(), 1);
        templates.push(run.id);
    }
    engine.traces().flush_events().await;
    let store = SqliteStore::open(&url(path)).await.unwrap();
    let pool = store.pool();
    let ids = templates.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");

    // Every table holding rows of the template runs must be cloned or kept by a trigger.
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table'").fetch_all(pool).await.unwrap();
    for table in &tables {
        let has_run_id: i64 =
            sqlx::query_scalar(&format!("SELECT count(*) FROM pragma_table_info('{table}') WHERE name = 'run_id'"))
                .fetch_one(pool)
                .await
                .unwrap();
        if has_run_id == 0 || CLONED.contains(&table.as_str()) || BY_TRIGGER.contains(&table.as_str()) {
            continue;
        }
        let rows: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM \"{table}\" WHERE run_id IN ({ids})"))
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(rows, 0, "the fixture does not clone `{table}`, which holds rows of a paused run");
    }

    // Run i (0-based) clones template i % TEMPLATES under a new id shaped
    // like the engine's (a UUIDv7 of its creation time); runs are 10 ms
    // apart, the newest an hour old.
    let base = now_ms() - 3_600_000 - n as i64 * 10;
    let templates_cte =
        templates.iter().enumerate().map(|(t, id)| format!("({t}, '{id}')")).collect::<Vec<_>>().join(", ");
    let ids_cte = format!(
        "WITH RECURSIVE k(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?2),
         tpl(t, id) AS (VALUES {templates_cte}),
         ids AS (SELECT k.i, tpl.id AS old, {base} + k.i * 10 AS at,
                        printf('%08x-%04x-7%03x-%04x-%012x', ({base} + k.i * 10) >> 16, ({base} + k.i * 10) & 65535,
                               (k.i >> 16) & 4095, 32768 | (k.i & 16383), k.i) AS new
                 FROM k JOIN tpl ON tpl.t = k.i % {TEMPLATES})"
    );
    // Per table: each column copied, with the run's id replaced (in JSON
    // text too) and its times moved to the clone's.
    let mut statements = Vec::new();
    for table in std::iter::once("runs").chain(CLONED) {
        let columns: Vec<(String, String)> =
            sqlx::query_as(&format!("SELECT name, type FROM pragma_table_info('{table}')"))
                .fetch_all(pool)
                .await
                .unwrap();
        let shift = |c: &str| format!("CASE WHEN x.{c} IS NULL THEN NULL ELSE ids.at + (x.{c} - r.created_at) END");
        let exprs: Vec<String> = columns
            .iter()
            .map(|(name, ty)| match (table, name.as_str()) {
                ("runs", "id") | (_, "run_id") => "ids.new".into(),
                ("runs", "root_run_id") => "ids.new".into(),
                ("runs", "name") => "x.name || ' #' || ids.i".into(),
                ("runs", "created_at") => "ids.at".into(),
                (
                    _,
                    "created_at" | "updated_at" | "started_at" | "finished_at" | "requested_at" | "completed_at"
                    | "model_completed_at" | "at",
                ) => shift(name),
                _ if ty.eq_ignore_ascii_case("TEXT") => format!("replace(x.{name}, ids.old, ids.new)"),
                _ => format!("x.{name}"),
            })
            .collect();
        let names = columns.iter().map(|(c, _)| format!("\"{c}\"")).collect::<Vec<_>>().join(", ");
        let key = if table == "runs" { "id" } else { "run_id" };
        statements.push(format!(
            "{ids_cte} INSERT INTO {table} ({names})
             SELECT {} FROM ids JOIN {table} x ON x.{key} = ids.old JOIN runs r ON r.id = ids.old",
            exprs.join(", ")
        ));
    }
    let started = Instant::now();
    let mut from = 0i64;
    while from < n as i64 {
        let to = (from + BATCH).min(n as i64);
        let mut tx = pool.begin().await.unwrap();
        for sql in &statements {
            sqlx::query(sql).bind(from).bind(to).execute(&mut *tx).await.unwrap();
        }
        tx.commit().await.unwrap();
        from = to;
        eprint!("\r  cloned {to} of {n} runs ({:.0} s)", started.elapsed().as_secs_f64());
    }
    eprintln!();
    // The templates themselves go: the fixture holds exactly the clones.
    let mut tx = pool.begin().await.unwrap();
    for table in CLONED {
        sqlx::query(&format!("DELETE FROM {table} WHERE run_id IN ({ids})")).execute(&mut *tx).await.unwrap();
    }
    sqlx::query(&format!("DELETE FROM runs WHERE id IN ({ids})")).execute(&mut *tx).await.unwrap();
    sqlx::query("CREATE TABLE bench_fixture (n INTEGER NOT NULL, made_at INTEGER NOT NULL)")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("INSERT INTO bench_fixture (n, made_at) VALUES (?, ?)")
        .bind(n as i64)
        .bind(now_ms())
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(pool).await.unwrap();
    let pending = pending_count(&store).await;
    assert_eq!(pending, n, "every clone has its call pending");
    drop(engine);
}
