//! The approvals inbox at scale: the pending count the database keeps equals
//! a real count after every kind of transition (pause, approve, reject,
//! "always", cancel, fail, re-save, delete, import, restart, migration), on
//! either store; keyset pages oldest first with every filter; and the plan
//! of every page reads one index range in order.

use std::collections::BTreeMap;
use std::sync::Arc;

use runlens_engine::model::{
    Actor, AgentInput, AgentSpec, ApprovalRequest, CreateRun, DecisionRequest, RunStatus, ToolCallStatus,
};
use runlens_engine::store::{InboxCursor, InboxFilter, InboxStart, Store};
use runlens_engine::Engine;
use runlens_engine::ImportOptions;
use serde_json::{json, Value};

use crate::support::*;

const DEFAULT: &str = "default";
const OTHER: &str = "team-b";

fn email(to: &str) -> Value {
    json!({"name": "send_email", "arguments": {"to": to, "subject": "Status", "body": "All good."}})
}

fn calc(expr: &str) -> Value {
    json!({"name": "calculator", "arguments": {"expression": expr}})
}

/// A run whose first step calls `calls` (each needing approval), then ends.
fn pausing(calls: Vec<Value>) -> CreateRun {
    let mut req = scripted(json!([{ "tool_calls": calls }, {"text": "done"}]));
    req.approval = Some(ApprovalRequest::tools(["send_email", "calculator"]));
    req
}

async fn paused_in(engine: &Engine, project: &str, calls: Vec<Value>) -> runlens_engine::model::Run {
    let (run, _) = engine.runs().create_run_in(pausing(calls), project, None).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(run.status, RunStatus::Paused, "{:?}", run.failure_reason);
    run
}

fn admin() -> Actor {
    Actor { id: "system".into(), name: "test".into() }
}

/// Checks the stored count of each project against a real count of the
/// calls awaiting a decision on paused runs, and `pending_calls` against
/// those calls themselves.
async fn assert_counted(store: &Arc<dyn Store>, url: &str, when: &str) {
    let real: BTreeMap<String, u64> = sql_rows(
        url,
        "SELECT r.project, CAST(count(*) AS TEXT) FROM tool_calls tc JOIN runs r ON r.id = tc.run_id
         WHERE tc.status = 'awaiting_approval' AND r.status = 'paused' GROUP BY r.project",
    )
    .await
    .into_iter()
    .map(|row| (row[0].clone(), row[1].parse().unwrap()))
    .collect();
    for project in [DEFAULT, OTHER] {
        let counted = store.pending_count(project).await.unwrap();
        assert_eq!(counted, real.get(project).copied().unwrap_or(0), "after {when}: the count of {project}");
    }
    let rows = sql_rows(
        url,
        "SELECT project, run_id, CAST(step_idx AS TEXT), CAST(pos AS TEXT), tool_name, CAST(requested_at AS TEXT)
         FROM pending_calls ORDER BY run_id, step_idx, pos",
    )
    .await;
    let calls = sql_rows(
        url,
        "SELECT r.project, tc.run_id, CAST(tc.step_idx AS TEXT), CAST(tc.pos AS TEXT), tc.tool_name,
                CAST(tc.requested_at AS TEXT)
         FROM tool_calls tc JOIN runs r ON r.id = tc.run_id
         WHERE tc.status = 'awaiting_approval' AND r.status = 'paused' ORDER BY tc.run_id, tc.step_idx, tc.pos",
    )
    .await;
    assert_eq!(rows, calls, "after {when}: the inbox rows are the calls awaiting a decision");
}

fn approve() -> DecisionRequest {
    DecisionRequest::default()
}

#[tokio::test]
async fn the_pending_count_equals_a_real_count_after_every_transition() {
    let db = test_db();
    let url = db_url(&db);
    let engine = engine_at(&url).await;
    engine.identity().create_project(OTHER, &admin()).await.unwrap();
    assert_counted(engine.store(), &url, "nothing").await;

    // Pause: one call, then two in one step (another project).
    let one = paused_in(&engine, DEFAULT, vec![email("a@example.com")]).await;
    assert_counted(engine.store(), &url, "a pause").await;
    let two = paused_in(&engine, OTHER, vec![email("b@example.com"), calc("1 + 1")]).await;
    assert_counted(engine.store(), &url, "a pause with two calls").await;
    assert_eq!(
        (
            engine.approvals().pending_count(DEFAULT).await.unwrap(),
            engine.approvals().pending_count(OTHER).await.unwrap()
        ),
        (1, 2)
    );

    // Approve: the run resumes and finishes.
    engine
        .approvals()
        .approve(&one.id, &one.interruptions[0].call_id, approve(), &crate::support::approver(&engine, "ada").await)
        .await
        .unwrap();
    assert_counted(engine.store(), &url, "an approval").await;
    assert_eq!(engine.runs().wait_until_settled(&one.id, SETTLE).await.unwrap().status, RunStatus::Done);
    assert_counted(engine.store(), &url, "the approved run finished").await;

    // Reject one of two: the run stays paused on the other.
    let req = DecisionRequest { reason: Some("no".into()), ..DecisionRequest::default() };
    let other_ada = crate::support::approver_in(&engine, OTHER, "ada").await;
    engine.approvals().reject(&two.id, &two.interruptions[0].call_id, req, &other_ada).await.unwrap();
    assert_counted(engine.store(), &url, "a rejection").await;
    assert_eq!(engine.approvals().pending_count(OTHER).await.unwrap(), 1);
    engine.approvals().approve(&two.id, &two.interruptions[1].call_id, approve(), &other_ada).await.unwrap();
    engine.runs().wait_until_settled(&two.id, SETTLE).await.unwrap();
    assert_counted(engine.store(), &url, "the last call decided").await;

    // "Always" settles the tool's other calls in the step.
    let always = paused_in(&engine, DEFAULT, vec![email("c@example.com"), email("d@example.com")]).await;
    assert_counted(engine.store(), &url, "a pause before always").await;
    let req = DecisionRequest { always: true, ..DecisionRequest::default() };
    engine
        .approvals()
        .approve(&always.id, &always.interruptions[0].call_id, req, &crate::support::approver(&engine, "ada").await)
        .await
        .unwrap();
    assert_counted(engine.store(), &url, "approve always").await;
    engine.runs().wait_until_settled(&always.id, SETTLE).await.unwrap();

    // Cancel a paused run.
    let cancelled = paused_in(&engine, DEFAULT, vec![email("e@example.com"), calc("2 + 2")]).await;
    engine.runs().cancel(&cancelled.id).await.unwrap();
    assert_counted(engine.store(), &url, "a cancel").await;

    // Fail a paused run (as recovery does with one it cannot decode): the
    // calls leave the inbox with the status, before they are cancelled.
    let failed = paused_in(&engine, OTHER, vec![email("f@example.com")]).await;
    assert_counted(engine.store(), &url, "a pause before failing").await;
    let store = engine.store();
    store.transition(&failed.id, RunStatus::Paused, RunStatus::Failed, Default::default()).await.unwrap();
    assert_counted(engine.store(), &url, "a failed run").await;
    store.cancel_awaiting(&failed.id).await.unwrap();
    assert_counted(engine.store(), &url, "its calls cancelled").await;

    // A call re-saved as it is (an upsert replaces the row), then as no
    // longer awaiting, then awaiting again.
    let resaved = paused_in(&engine, DEFAULT, vec![calc("3 + 3")]).await;
    let mut call = engine.runs().steps(&resaved.id).await.unwrap()[0].tool_calls[0].clone();
    store.save_tool_call(&call, 0).await.unwrap();
    assert_counted(engine.store(), &url, "a call re-saved").await;
    assert_eq!(engine.approvals().pending_count(DEFAULT).await.unwrap(), 1);
    call.status = ToolCallStatus::Pending;
    store.save_tool_call(&call, 0).await.unwrap();
    assert_counted(engine.store(), &url, "a call saved as no longer awaiting").await;
    call.status = ToolCallStatus::AwaitingApproval;
    store.save_tool_call(&call, 0).await.unwrap();
    assert_counted(engine.store(), &url, "a call saved as awaiting again").await;

    // Import a paused run into the other project.
    let doc = serde_json::to_value(engine.snapshots().export_state(&resaved.id).await.unwrap()).unwrap();
    let opts = ImportOptions { project: Some(OTHER.into()), ..ImportOptions::default() };
    let imported = engine.snapshots().import_state(&doc, opts).await.unwrap();
    assert_eq!(imported.status, RunStatus::Paused);
    assert_counted(engine.store(), &url, "an import").await;
    assert_eq!(engine.approvals().pending_count(OTHER).await.unwrap(), 1);

    // A request time moved (the inbox keeps its order by it).
    sql(&url, &[&format!("UPDATE tool_calls SET requested_at = 5 WHERE run_id = '{}'", imported.id)]).await;
    assert_counted(engine.store(), &url, "a request time changed").await;

    // Delete: a paused run's calls, then a paused run itself.
    let gone_calls = paused_in(&engine, DEFAULT, vec![email("g@example.com")]).await;
    sql(&url, &[&format!("DELETE FROM tool_calls WHERE run_id = '{}'", gone_calls.id)]).await;
    assert_counted(engine.store(), &url, "deleted calls").await;
    let gone_run = paused_in(&engine, DEFAULT, vec![email("h@example.com"), email("i@example.com")]).await;
    sql(&url, &[&format!("DELETE FROM runs WHERE id = '{}'", gone_run.id)]).await;
    assert_counted(engine.store(), &url, "a deleted run").await;
    sql(&url, &[&format!("DELETE FROM tool_calls WHERE run_id = '{}'", gone_run.id)]).await;
    assert_counted(engine.store(), &url, "a deleted run's calls").await;

    // A restart reads the same count.
    let before = (
        engine.approvals().pending_count(DEFAULT).await.unwrap(),
        engine.approvals().pending_count(OTHER).await.unwrap(),
    );
    drop(engine);
    let engine = engine_at(&url).await;
    assert_eq!(
        (
            engine.approvals().pending_count(DEFAULT).await.unwrap(),
            engine.approvals().pending_count(OTHER).await.unwrap()
        ),
        before
    );
    assert_counted(engine.store(), &url, "a restart").await;
    assert_eq!(engine.approvals().pending_count("no-such-project").await.unwrap(), 0);
}

/// Every page of `filter` (with `limit`), in order.
async fn all_pages(engine: &Engine, filter: &InboxFilter) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    let mut filter = filter.clone();
    for _ in 0..100 {
        let page = engine.approvals().pending_inbox(&filter).await.unwrap();
        assert!(page.items.len() <= filter.limit as usize);
        seen.extend(page.items.iter().map(|i| (i.run_id.clone(), i.call_id.clone())));
        match page.next {
            Some(next) => filter.after = Some(next),
            None => return seen,
        }
    }
    panic!("more than 100 pages");
}

/// The calls awaiting a decision in `project` as SQL orders them (what the
/// inbox must list), with their tool and request time.
async fn expected(url: &str, project: &str) -> Vec<(String, String, String, i64)> {
    sql_rows(
        url,
        &format!(
            "SELECT tc.run_id, tc.id, tc.tool_name, CAST(tc.requested_at AS TEXT)
             FROM tool_calls tc JOIN runs r ON r.id = tc.run_id
             WHERE tc.status = 'awaiting_approval' AND r.status = 'paused' AND r.project = '{project}'
             ORDER BY tc.requested_at, tc.run_id, tc.step_idx, tc.pos"
        ),
    )
    .await
    .into_iter()
    .map(|r| (r[0].clone(), r[1].clone(), r[2].clone(), r[3].parse().unwrap()))
    .collect()
}

#[tokio::test]
async fn the_inbox_pages_oldest_first_and_filters_by_tool_run_and_age() {
    let db = test_db();
    let url = db_url(&db);
    let engine = engine_at(&url).await;
    engine.identity().create_project(OTHER, &admin()).await.unwrap();
    let mut runs = Vec::new();
    for i in 0..6 {
        let calls = match i % 3 {
            0 => vec![email(&format!("{i}@example.com"))],
            1 => vec![calc(&format!("{i} + 1"))],
            _ => vec![email(&format!("{i}@example.com")), calc(&format!("{i} * 2"))],
        };
        runs.push(paused_in(&engine, DEFAULT, calls).await);
    }
    let theirs = paused_in(&engine, OTHER, vec![email("x@example.com")]).await;
    // Request times an hour apart, newest first by creation, two runs tied.
    let now = chrono::Utc::now().timestamp_millis();
    for (i, run) in runs.iter().enumerate() {
        let at = now - 3_600_000 * (6 - i.min(4) as i64);
        sql(&url, &[&format!("UPDATE tool_calls SET requested_at = {at} WHERE run_id = '{}'", run.id)]).await;
    }
    let all = expected(&url, DEFAULT).await;
    assert_eq!(all.len(), 8);
    assert_eq!(engine.approvals().pending_count(DEFAULT).await.unwrap(), 8);
    let ids = |rows: &[(String, String, String, i64)]| -> Vec<(String, String)> {
        rows.iter().map(|r| (r.0.clone(), r.1.clone())).collect()
    };
    let filter = |limit: u32| InboxFilter { project: DEFAULT.into(), limit, ..InboxFilter::default() };

    // Every page size lists every call once, oldest first.
    for limit in [1, 2, 3, 8, 50] {
        assert_eq!(all_pages(&engine, &filter(limit)).await, ids(&all), "pages of {limit}");
    }
    let first = engine.approvals().pending_inbox(&filter(50)).await.unwrap();
    assert_eq!(first.next, None, "no next page after the last");
    assert!(first.items.windows(2).all(|w| w[0].requested_at <= w[1].requested_at));
    assert!(first.items.iter().all(|i| i.run_id != theirs.id), "only the project's own calls");

    // By tool, by run, by both.
    let tool = InboxFilter { tool: Some("calculator".into()), ..filter(1) };
    let calcs: Vec<_> = all.iter().filter(|r| r.2 == "calculator").cloned().collect();
    assert_eq!(all_pages(&engine, &tool).await, ids(&calcs));
    let run = &runs[2];
    let one_run = InboxFilter { run_id: Some(run.id.clone()), ..filter(1) };
    let of_run: Vec<_> = all.iter().filter(|r| r.0 == run.id).cloned().collect();
    assert_eq!(of_run.len(), 2);
    assert_eq!(all_pages(&engine, &one_run).await, ids(&of_run));
    let both = InboxFilter { tool: Some("send_email".into()), ..one_run.clone() };
    assert_eq!(all_pages(&engine, &both).await.len(), 1);
    let elsewhere = InboxFilter { run_id: Some(theirs.id.clone()), ..filter(50) };
    assert!(engine.approvals().pending_inbox(&elsewhere).await.unwrap().items.is_empty(), "another project's run");

    // By age: waited at least 3.5 hours; at most 3.5 hours; between 2.5 and 4.5.
    let cut = now - 3 * 3_600_000 - 1_800_000;
    let older = InboxFilter { requested_until_ms: Some(cut), ..filter(1) };
    let old: Vec<_> = all.iter().filter(|r| r.3 <= cut).cloned().collect();
    assert!(!old.is_empty() && old.len() < all.len());
    assert_eq!(all_pages(&engine, &older).await, ids(&old));
    let newer = InboxFilter { requested_from_ms: Some(cut), ..filter(1) };
    let new: Vec<_> = all.iter().filter(|r| r.3 >= cut).cloned().collect();
    assert_eq!(all_pages(&engine, &newer).await, ids(&new));
    let (from, until) = (now - 4 * 3_600_000 - 1_800_000, now - 2 * 3_600_000 - 1_800_000);
    let between = InboxFilter { requested_from_ms: Some(from), requested_until_ms: Some(until), ..filter(2) };
    let mid: Vec<_> = all.iter().filter(|r| (from..=until).contains(&r.3)).cloned().collect();
    assert_eq!(all_pages(&engine, &between).await, ids(&mid));

    // A cursor from before the age bound starts at the bound; one after it
    // goes on from itself.
    let early = InboxCursor { requested_at_ms: 0, run_id: "a".into(), step_idx: 0, pos: 0 };
    let f = InboxFilter { after: Some(early.clone()), requested_from_ms: Some(cut), ..filter(50) };
    assert_eq!(f.lower_bound(), InboxStart::From(cut));
    assert_eq!(
        ids(&new),
        engine
            .approvals()
            .pending_inbox(&f)
            .await
            .unwrap()
            .items
            .iter()
            .map(|i| (i.run_id.clone(), i.call_id.clone()))
            .collect::<Vec<_>>()
    );
    let late = InboxCursor { requested_at_ms: cut + 1, ..early };
    let f = InboxFilter { after: Some(late.clone()), requested_from_ms: Some(cut), ..filter(50) };
    assert_eq!(f.lower_bound(), InboxStart::After(&late));

    // Decisions between pages: nothing is skipped or repeated.
    let page = engine.approvals().pending_inbox(&filter(3)).await.unwrap();
    let seen: Vec<_> = page.items.iter().map(|i| (i.run_id.clone(), i.call_id.clone())).collect();
    let (decided_seen, decided_unseen) = (&all[0], &all[5]);
    engine
        .approvals()
        .approve(&decided_seen.0, &decided_seen.1, approve(), &crate::support::approver(&engine, "ada").await)
        .await
        .unwrap();
    engine
        .approvals()
        .approve(&decided_unseen.0, &decided_unseen.1, approve(), &crate::support::approver(&engine, "ada").await)
        .await
        .unwrap();
    let rest = all_pages(&engine, &InboxFilter { after: page.next, ..filter(2) }).await;
    let mut listed = seen;
    listed.extend(rest);
    let wanted: Vec<_> =
        ids(&all).into_iter().filter(|c| *c != (decided_unseen.0.clone(), decided_unseen.1.clone())).collect();
    assert_eq!(listed, wanted);

    // Cursors round-trip; anything else is refused.
    let c =
        InboxCursor { requested_at_ms: 1_700_000_000_123, run_id: "run_with_underscores".into(), step_idx: 7, pos: 2 };
    assert_eq!(InboxCursor::parse(&c.encode()), Some(c));
    for bad in ["", "1_2_3", "1_2_3_", "x_2_3_r", "1_-2_3_r", "1_2_x_r"] {
        assert_eq!(InboxCursor::parse(bad), None, "{bad:?}");
    }
}

/// A child run's call comes with the chain of runs above it.
#[tokio::test]
async fn a_child_runs_call_comes_with_its_chain() {
    let (engine, _db) = engine().await;
    let careful = AgentSpec {
        name: "careful".into(),
        description: "Asks first.".into(),
        tools: vec!["calculator".into()],
        approval: Some(ApprovalRequest::all()),
        ..AgentSpec::default()
    };
    engine
        .agents()
        .create_agent(DEFAULT, AgentInput { id: Some("careful".into()), spec: careful }, &by("ada"))
        .await
        .unwrap();
    let script = json!([{"tool_calls": [{"name": "careful", "arguments": {"input": "3 * 3"}}]}, {"text": "done"}]);
    let lead = AgentSpec {
        name: "lead".into(),
        description: "Leads.".into(),
        agents: vec!["careful".into()],
        model_settings: Some(json!({ "script": script })),
        ..AgentSpec::default()
    };
    engine
        .agents()
        .create_agent(DEFAULT, AgentInput { id: Some("lead".into()), spec: lead }, &by("ada"))
        .await
        .unwrap();
    let req = CreateRun { agent_id: Some("lead".into()), initial_prompt: "Go.".into(), ..CreateRun::default() };
    let (run, _) = engine.runs().create_run(req).await.unwrap();
    wait_for_status(&engine, &run.id, RunStatus::Paused).await;
    let child = engine.agents().children(&run.id).await.unwrap().remove(0);
    wait_for_status(&engine, &child.id, RunStatus::Paused).await;

    let filter = InboxFilter { project: DEFAULT.into(), limit: 50, ..InboxFilter::default() };
    let page = engine.approvals().pending_inbox(&filter).await.unwrap();
    assert_eq!(page.items.len(), 1, "the parent waits on its child, not on calls of its own");
    assert_eq!(page.items[0].run_id, child.id);
    assert_eq!(page.items[0].chain.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), [run.id.as_str()]);
    assert_eq!(engine.approvals().pending_approvals(Some(DEFAULT)).await.unwrap()[0].chain, page.items[0].chain);
    assert_eq!(engine.approvals().pending_below(&run.id).await.unwrap(), page.items, "what the parent waits for");
    assert!(engine.approvals().pending_below(&child.id).await.unwrap().is_empty(), "nothing below the child");
    assert_eq!(engine.approvals().pending_count(DEFAULT).await.unwrap(), 1);
}

#[tokio::test]
async fn every_inbox_page_reads_one_index_range_in_order() {
    let db = test_db();
    let url = db_url(&db);
    let cursor = InboxCursor { requested_at_ms: 1_700_000_000_000, run_id: "r".into(), step_idx: 0, pos: 0 };
    let base = InboxFilter { project: "p".into(), limit: 50, ..InboxFilter::default() };
    let filters = [
        ("first page", base.clone()),
        ("cursor", InboxFilter { after: Some(cursor.clone()), ..base.clone() }),
        ("tool", InboxFilter { tool: Some("send_email".into()), ..base.clone() }),
        ("tool+cursor", InboxFilter { tool: Some("send_email".into()), after: Some(cursor.clone()), ..base.clone() }),
        ("older", InboxFilter { requested_until_ms: Some(1_700_000_000_000), ..base.clone() }),
        ("newer", InboxFilter { requested_from_ms: Some(1_600_000_000_000), ..base.clone() }),
        (
            "cursor+older+newer",
            InboxFilter {
                after: Some(cursor.clone()),
                requested_from_ms: Some(1_600_000_000_000),
                requested_until_ms: Some(1_800_000_000_000),
                ..base.clone()
            },
        ),
        (
            "tool+cursor+older",
            InboxFilter {
                tool: Some("calculator".into()),
                after: Some(cursor.clone()),
                requested_until_ms: Some(1_800_000_000_000),
                ..base.clone()
            },
        ),
        ("run", InboxFilter { run_id: Some("r".into()), ..base.clone() }),
        (
            "run+tool+cursor",
            InboxFilter { run_id: Some("r".into()), tool: Some("x".into()), after: Some(cursor), ..base },
        ),
    ];
    if on_postgres() {
        let store = runlens_engine::store::PgStore::open(&url).await.unwrap();
        for (name, filter) in filters {
            let plan = store.explain_pending_inbox(&filter).await.unwrap().join("\n");
            assert!(!plan.contains("Seq Scan"), "{name} scans a table:\n{plan}");
            let pending = plan.lines().find(|l| l.contains(" on pending_calls")).unwrap_or_default();
            assert!(pending.contains("Index"), "{name} reads pending_calls without an index:\n{plan}");
            if filter.run_id.is_none() {
                assert!(!plan.contains("Sort"), "{name} sorts instead of reading in order:\n{plan}");
            }
        }
        return;
    }
    let store = runlens_engine::store::SqliteStore::open(&url).await.unwrap();
    for (name, filter) in filters {
        let lines = store.explain_pending_inbox(&filter).await.unwrap();
        let plan = lines.join(" | ");
        for line in lines.iter().filter(|l| !l.starts_with("USE TEMP B-TREE")) {
            assert!(line.contains("USING") && line.starts_with("SEARCH"), "{name} scans instead of seeking: {plan}");
        }
        let expected = match (&filter.run_id, &filter.tool) {
            (Some(_), _) => "pending_calls_by_call (run_id=?)",
            (None, Some(_)) => "pending_calls_by_tool (project=? AND tool_name=?",
            (None, None) => "PRIMARY KEY (project=?",
        };
        assert!(lines[0].contains(expected), "{name} reads the wrong index: {plan}");
        if filter.run_id.is_some() {
            // One run's few calls are sorted; the project's are never.
            continue;
        }
        assert!(!plan.contains("TEMP B-TREE"), "{name} sorts instead of reading in order: {plan}");
        if filter.after.is_some() || filter.requested_from_ms.is_some() {
            assert!(lines[0].contains(">"), "{name} does not seek to its first row: {plan}");
        }
        if filter.requested_until_ms.is_some() {
            assert!(lines[0].contains("requested_at<"), "{name} does not stop at its last row: {plan}");
        }
    }
}

/// A store migrated from before the inbox tables (SQLite 0015, PostgreSQL
/// 0004) counts and lists the calls that were pending then: the migration
/// fills both from the stored calls.
#[tokio::test]
async fn the_migration_counts_and_lists_what_was_pending_before_it() {
    use sqlx::migrate::Migrator;
    use std::str::FromStr;

    let db = test_db();
    let url = db_url(&db);
    if on_postgres() {
        let (base, _) = url.split_once('?').unwrap();
        let (_, schema) = url.rsplit_once("options[search_path]=").unwrap();
        sql(base, &[&format!("CREATE SCHEMA \"{schema}\"")]).await;
        let all = sqlx::migrate!("../migrations/postgres");
        let before = Migrator { migrations: all.migrations.iter().filter(|m| m.version < 4).cloned().collect(), ..all };
        let options = sqlx::postgres::PgConnectOptions::from_str(&url).unwrap();
        let pool = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect_with(options).await.unwrap();
        before.run(&pool).await.unwrap();
        pool.close().await;
    } else {
        let all = sqlx::migrate!("../migrations/sqlite");
        let before =
            Migrator { migrations: all.migrations.iter().filter(|m| m.version < 15).cloned().collect(), ..all };
        let options = sqlx::sqlite::SqliteConnectOptions::from_str(&url).unwrap().create_if_missing(true);
        let pool = sqlx::sqlite::SqlitePoolOptions::new().max_connections(1).connect_with(options).await.unwrap();
        before.run(&pool).await.unwrap();
        pool.close().await;
    }
    let run = |id: &str, status: &str, project: &str| {
        format!(
            "('{id}', '{id}', '{status}', 'builtin', '{{}}', 'hi', '[]', '{{}}', 'null', 5, 1, 1, '{project}',
              '{{\"tools\": [\"send_email\"], \"timeout_s\": 60}}')"
        )
    };
    let call = |run: &str, step: u32, pos: u32, id: &str, status: &str, at: i64| {
        format!("('{run}', {step}, {pos}, '{id}', 'send_email', '{{\"to\": \"{id}\"}}', '{status}', {at})")
    };
    sql(
        &url,
        &[
            &format!(
                "INSERT INTO runs (id, name, status, model, model_settings, initial_prompt, tools, tags, context,
                    max_turns, created_at, updated_at, project, approval) VALUES {}, {}, {}",
                run("p1", "paused", DEFAULT),
                run("p2", "paused", OTHER),
                run("r1", "running", DEFAULT)
            ),
            &format!(
                "INSERT INTO tool_calls (run_id, step_idx, pos, id, tool_name, arguments, status, requested_at)
                 VALUES {}, {}, {}, {}, {}",
                call("p1", 0, 0, "c1", "awaiting_approval", 10),
                call("p1", 0, 1, "c2", "succeeded", 10),
                call("p2", 1, 0, "c4", "awaiting_approval", 30),
                call("p2", 0, 0, "c3", "awaiting_approval", 20),
                call("r1", 0, 0, "c5", "awaiting_approval", 5)
            ),
        ],
    )
    .await;

    let store = open_store(&url).await;
    assert_eq!((store.pending_count(DEFAULT).await.unwrap(), store.pending_count(OTHER).await.unwrap()), (1, 2));
    let page = store.pending_inbox(&InboxFilter { project: OTHER.into(), limit: 1, ..InboxFilter::default() }).await;
    let page = page.unwrap();
    assert_eq!(page.calls.iter().map(|c| c.call.call_id.as_str()).collect::<Vec<_>>(), ["c3"]);
    assert_eq!(page.calls[0].call.arguments["to"], "c3");
    assert_eq!(page.calls[0].call.deadline.map(|d| d.timestamp_millis()), Some(60_020), "the run's timeout");
    let after = InboxFilter { project: OTHER.into(), limit: 1, after: page.next, ..InboxFilter::default() };
    let rest = store.pending_inbox(&after).await.unwrap();
    assert_eq!(rest.calls.iter().map(|c| c.call.call_id.as_str()).collect::<Vec<_>>(), ["c4"]);
    assert_eq!(rest.next, None);
    assert_counted(&store, &url, "the migration").await;
}

/// A measurement to run by hand (no timed assertion): the inbox's first
/// page, a page deep in, each filter, and the count over a million pending
/// calls on SQLite, made by cloning one real paused run's rows with
/// INSERT … SELECT (the triggers fill the inbox and its count as they go).
///
/// `RUNLENS_INBOX_CALLS=1000000 cargo test -p runlens-engine --test engine
/// measure_the_inbox -- --ignored --nocapture` (`RUNLENS_INBOX_DB=path`
/// keeps the database for another run).
#[tokio::test]
#[ignore = "a measurement, run by hand"]
async fn measure_the_inbox_over_a_million_pending_calls() {
    use std::time::{Duration, Instant};

    let total: u64 = std::env::var("RUNLENS_INBOX_CALLS").ok().and_then(|n| n.parse().ok()).unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let path = std::env::var("RUNLENS_INBOX_DB").unwrap_or_else(|_| dir.path().join("inbox.db").display().to_string());
    let url = format!("sqlite://{path}");
    let engine = engine_at(&url).await;
    let have = engine.approvals().pending_count(DEFAULT).await.unwrap();
    if have < total {
        let run = paused_in(&engine, DEFAULT, vec![email("a@example.com")]).await;
        let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
        let columns = |table: &'static str| {
            let pool = pool.clone();
            async move {
                sqlx::query_scalar::<_, String>(&format!("SELECT name FROM pragma_table_info('{table}')"))
                    .fetch_all(&pool)
                    .await
                    .unwrap()
            }
        };
        let (run_cols, call_cols) = (columns("runs").await, columns("tool_calls").await);
        let clone_run = |c: &String| match c.as_str() {
            "id" | "root_run_id" => "'clone_' || n.i".to_owned(),
            "name" => "'clone ' || n.i".to_owned(),
            "created_at" | "updated_at" => format!("{c} - n.i"),
            other => other.to_owned(),
        };
        let clone_call = |c: &String| match c.as_str() {
            "run_id" => "'clone_' || n.i".to_owned(),
            // A spread of request times over the last 11 days, some tied.
            "requested_at" => "requested_at - (n.i * 7919) % 1000000000".to_owned(),
            "tool_name" => "CASE WHEN n.i % 10 = 0 THEN 'calculator' ELSE tool_name END".to_owned(),
            other => other.to_owned(),
        };
        let started = Instant::now();
        let chunk = 100_000u64;
        let mut from = have;
        while from < total {
            let to = (from + chunk).min(total);
            let numbers =
                format!("WITH RECURSIVE n(i) AS (SELECT {from} UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {to})");
            let mut tx = pool.begin().await.unwrap();
            let (cols, select): (Vec<_>, Vec<_>) = run_cols.iter().map(|c| (c.clone(), clone_run(c))).unzip();
            let sql = format!(
                "{numbers} INSERT INTO runs ({}) SELECT {} FROM runs, n WHERE runs.id = ?",
                cols.join(", "),
                select.join(", ")
            );
            sqlx::query(&sql).bind(&run.id).execute(&mut *tx).await.unwrap();
            let (cols, select): (Vec<_>, Vec<_>) = call_cols.iter().map(|c| (c.clone(), clone_call(c))).unzip();
            let sql = format!(
                "{numbers} INSERT INTO tool_calls ({}) SELECT {} FROM tool_calls, n WHERE tool_calls.run_id = ?",
                cols.join(", "),
                select.join(", ")
            );
            sqlx::query(&sql).bind(&run.id).execute(&mut *tx).await.unwrap();
            tx.commit().await.unwrap();
            from = to;
            eprintln!("cloned {to} paused runs ({:.1} s)", started.elapsed().as_secs_f64());
        }
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&pool).await.unwrap();
        pool.close().await;
    }
    let count = engine.approvals().pending_count(DEFAULT).await.unwrap();
    eprintln!("{count} calls pending in `default`");
    assert!(count >= total);

    async fn time<F, Fut, T>(what: &str, reps: usize, mut f: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        let mut took: Vec<Duration> = Vec::new();
        let mut last = None;
        for _ in 0..reps {
            let started = Instant::now();
            last = Some(f().await);
            took.push(started.elapsed());
        }
        took.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        eprintln!(
            "{what:<44} best {:>8.3} ms  median {:>8.3} ms  max {:>8.3} ms",
            ms(took[0]),
            ms(took[reps / 2]),
            ms(took[reps - 1])
        );
        last.unwrap()
    }
    let page = |f: InboxFilter| {
        let engine = engine.clone();
        move || {
            let engine = engine.clone();
            let f = f.clone();
            async move { engine.approvals().pending_inbox(&f).await.unwrap() }
        }
    };
    let base = InboxFilter { project: DEFAULT.into(), limit: 50, ..InboxFilter::default() };
    let first = time("first page (50)", 30, page(base.clone())).await;
    assert_eq!(first.items.len(), 50);
    time("count", 30, || async { engine.approvals().pending_count(DEFAULT).await.unwrap() }).await;
    // Walk 2,000 pages in (100,000 calls) and time the page there.
    let mut at = first.next.clone();
    for _ in 0..2000 {
        at = engine.approvals().pending_inbox(&InboxFilter { after: at, ..base.clone() }).await.unwrap().next;
    }
    time("page 2,001 (cursor)", 30, page(InboxFilter { after: at.clone(), ..base.clone() })).await;
    time("page of 200", 30, page(InboxFilter { limit: 200, after: at.clone(), ..base.clone() })).await;
    time("tool=calculator, first page", 30, page(InboxFilter { tool: Some("calculator".into()), ..base.clone() }))
        .await;
    time(
        "tool=calculator, after the cursor",
        30,
        page(InboxFilter { tool: Some("calculator".into()), after: at.clone(), ..base.clone() }),
    )
    .await;
    let now = chrono::Utc::now().timestamp_millis();
    time("older_than 5 days", 30, page(InboxFilter { requested_until_ms: Some(now - 5 * 86_400_000), ..base.clone() }))
        .await;
    time("newer_than 1 day", 30, page(InboxFilter { requested_from_ms: Some(now - 86_400_000), ..base.clone() })).await;
    let last = time(
        "older_than 11 days (last few)",
        30,
        page(InboxFilter { requested_until_ms: Some(now - 999_000_000), ..base.clone() }),
    )
    .await;
    eprintln!("  ({} calls in that page)", last.items.len());
    time("run=<one clone>", 30, page(InboxFilter { run_id: Some("clone_123456".into()), ..base.clone() })).await;
    time("another project (empty)", 30, page(InboxFilter { project: OTHER.into(), ..base.clone() })).await;
    let f = InboxFilter { project: DEFAULT.into(), limit: 50, ..InboxFilter::default() };
    let call = engine.approvals().pending_inbox(&f).await.unwrap().items.remove(0);
    time("a run's own calls (interruptions)", 30, || async {
        engine.store().interruptions(Some(&call.run_id), None).await.unwrap()
    })
    .await;
    let started = Instant::now();
    engine
        .approvals()
        .approve(&call.run_id, &call.call_id, approve(), &crate::support::approver(&engine, "ada").await)
        .await
        .unwrap();
    eprintln!("one approval at this backlog: {:.3} ms", started.elapsed().as_secs_f64() * 1000.0);
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    eprintln!("database: {:.0} MB", size as f64 / 1e6);
}
