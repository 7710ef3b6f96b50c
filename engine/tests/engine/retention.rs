//! Retention: a project's policy deletes its finished runs past an age or a
//! count — each with everything recorded of it — never a paused or running
//! one, never another project's; bad policies are refused; each pass is
//! audited.

use chrono::{Duration, Utc};
use runlens_engine::model::{Actor, CreateRun, Retention, RunFilter, RunStatus, DEFAULT_PROJECT};
use runlens_engine::EngineError;
use serde_json::json;

use crate::support::{engine, run_to_end, scripted, SETTLE};

fn admin() -> Actor {
    Actor { id: "system".into(), name: "test".into() }
}

/// That nothing of run `id` is left to read.
async fn gone(engine: &runlens_engine::Engine, id: &str) {
    assert!(matches!(engine.runs().get_run(id).await, Err(EngineError::NotFound(_))), "{id}");
    let store = engine.store();
    assert!(store.steps(id).await.unwrap().is_empty(), "{id}: steps and calls");
    assert!(store.messages(id).await.unwrap().is_empty(), "{id}: messages");
    assert!(store.events_after(id, 0, 10).await.unwrap().is_empty(), "{id}: events");
    assert!(matches!(engine.runs().trace(id).await, Err(EngineError::NotFound(_))), "{id}: trace");
}

#[tokio::test]
async fn a_count_policy_deletes_the_oldest_finished_runs_and_everything_of_them() {
    let (engine, _dir) = engine().await;
    engine.identity().create_project("keep-all", &admin()).await.unwrap();
    let calc = json!({"name": "calculator", "arguments": {"expression": "2 + 2"}});
    let mut ids = Vec::new();
    for i in 0..5 {
        let req = CreateRun {
            initial_prompt: format!("retained quokka {i}"),
            ..scripted(json!([{"tool_calls": [calc]}, {"text": "4"}]))
        };
        ids.push(run_to_end(&engine, req).await.id);
    }
    // A paused run among the old ones is kept however old.
    let email = json!({"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}});
    let (paused, _) =
        engine.runs().create_run(scripted(json!([{"tool_calls": [email]}, {"text": "sent"}]))).await.unwrap();
    assert_eq!(engine.runs().wait_until_settled(&paused.id, SETTLE).await.unwrap().status, RunStatus::Paused);
    let newest = run_to_end(&engine, scripted(json!([{"text": "newest"}]))).await.id;
    let (theirs, _) = engine.runs().create_run_in(scripted(json!([{"text": "x"}])), "keep-all", None).await.unwrap();
    engine.runs().wait_until_settled(&theirs.id, SETTLE).await.unwrap();

    // Nothing without a policy.
    assert_eq!(engine.prune(DEFAULT_PROJECT).await.unwrap().runs_deleted, 0);
    // Runs that finished within the last minute wait for a later pass.
    let later = Utc::now() + Duration::minutes(2);
    let policy = Retention { max_runs: Some(2), ..Retention::default() };
    assert_eq!(engine.set_retention(DEFAULT_PROJECT, policy, &admin()).await.unwrap(), policy);
    assert_eq!(engine.retention(DEFAULT_PROJECT).await.unwrap(), policy);
    assert_eq!(engine.prune(DEFAULT_PROJECT).await.unwrap().runs_deleted, 0, "just finished");
    engine.traces().flush_events().await;
    let report = engine.prune_as_of(DEFAULT_PROJECT, later).await.unwrap();
    // Kept: the two newest root runs (newest, the paused one); the five
    // before them go.
    assert_eq!((report.runs_deleted, report.more), (5, false), "{report:?}");
    for id in &ids {
        gone(&engine, id).await;
    }
    let listed: Vec<String> = engine
        .runs()
        .list_runs(&RunFilter { project: Some(DEFAULT_PROJECT.into()), ..RunFilter::default() })
        .await
        .unwrap()
        .runs
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, [newest.clone(), paused.id.clone()]);
    let search = RunFilter { q: Some("quokka".into()), project: Some(DEFAULT_PROJECT.into()), ..RunFilter::default() };
    assert!(engine.runs().list_runs(&search).await.unwrap().runs.is_empty(), "the search index goes with them");
    assert!(engine.runs().get_run(&theirs.id).await.is_ok(), "another project's run is its own");
    no_rows_left(&_dir, &ids).await;
    // A second pass has nothing left to do.
    assert_eq!(engine.prune_as_of(DEFAULT_PROJECT, later).await.unwrap(), Default::default());
    let audit = engine.directory().audit(Some(DEFAULT_PROJECT), None, 0, 50).await.unwrap();
    let actions: Vec<&str> = audit.iter().map(|e| e.action.as_str()).collect();
    assert!(actions.contains(&"retention_set") && actions.contains(&"runs_pruned"), "{actions:?}");
    let pruned = audit.iter().find(|e| e.action == "runs_pruned").unwrap();
    assert!(pruned.detail.as_deref().unwrap().starts_with("5 runs deleted"), "{pruned:?}");
}

/// That no table holding rows by `run_id` (whatever later migrations add)
/// keeps one of `ids`, but those that record what happened (emails sent,
/// webhook deliveries, external agents' requests). SQLite only: the tables
/// are the same on PostgreSQL, and the deletes one text.
async fn no_rows_left(db: &crate::support::TestDb, ids: &[String]) {
    if crate::support::on_postgres() {
        return;
    }
    let pool = sqlx::SqlitePool::connect(&crate::support::db_url(db)).await.unwrap();
    let tables: Vec<(String, String)> = sqlx::query_as(
        "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p
         WHERE m.type = 'table' AND p.name IN ('run_id', 'root_run_id') AND m.name <> 'runs'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let kept = ["outbox", "webhook_deliveries", "status_changes", "agent_requests"];
    assert!(tables.len() >= 10, "{tables:?}");
    let list = serde_json::to_string(ids).unwrap();
    for (table, column) in tables.into_iter().filter(|(t, _)| !kept.contains(&t.as_str())) {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE {column} IN (SELECT value FROM json_each(?))");
        let n: i64 = sqlx::query_scalar(&sql).bind(&list).fetch_one(&pool).await.unwrap();
        assert_eq!(n, 0, "{table} keeps rows of deleted runs");
    }
}

#[tokio::test]
async fn an_age_policy_deletes_runs_older_than_its_days() {
    let (engine, _dir) = engine().await;
    let old = run_to_end(&engine, scripted(json!([{"text": "old"}]))).await;
    let policy = Retention { max_age_days: Some(30), ..Retention::default() };
    engine.set_retention(DEFAULT_PROJECT, policy, &admin()).await.unwrap();
    assert_eq!(engine.prune(DEFAULT_PROJECT).await.unwrap().runs_deleted, 0, "a new run is kept");
    let later = Utc::now() + Duration::days(31);
    // The run's last events are stored (a pass an hour later would find them so).
    engine.traces().flush_events().await;
    let report = engine.prune_as_of(DEFAULT_PROJECT, later).await.unwrap();
    assert_eq!(report.runs_deleted, 1);
    gone(&engine, &old.id).await;
}

#[tokio::test]
async fn bad_policies_are_refused_and_change_nothing() {
    let (engine, _dir) = engine().await;
    for (policy, expected) in [
        (Retention { max_age_days: Some(0), ..Retention::default() }, "max_age_days must be 1 to 36500"),
        (Retention { max_age_days: Some(36_501), ..Retention::default() }, "max_age_days"),
        (Retention { max_runs: Some(0), ..Retention::default() }, "max_runs must be 1 to"),
    ] {
        match engine.set_retention(DEFAULT_PROJECT, policy, &admin()).await {
            Err(EngineError::Invalid(m)) => assert!(m.contains(expected), "{m}"),
            other => panic!("{policy:?}: {other:?}"),
        }
    }
    assert!(matches!(
        engine.set_retention("no-such-project", Retention { max_runs: Some(1), ..Default::default() }, &admin()).await,
        Err(EngineError::NotFound(_))
    ));
    assert_eq!(engine.retention(DEFAULT_PROJECT).await.unwrap(), Retention::default());
}
