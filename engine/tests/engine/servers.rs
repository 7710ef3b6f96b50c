//! Two servers on one store: on PostgreSQL two engines, each with its own
//! connection pool, as two `runlens serve` processes would be; on SQLite
//! (one server per file) the same engine plays both, so both stores are held
//! to the same outcome. (The three-process test with a SIGKILL is
//! tests/api/crash/cluster.rs.)

use std::time::Duration;

use runlens_engine::events::{Event, EventKind, RunEvents};
use runlens_engine::model::{CreateRun, RunStatus};
use runlens_engine::Engine;
use serde_json::json;

use crate::support::*;

/// Server A and server B of one store (the same engine on SQLite).
async fn two_servers(url: &str) -> (Engine, Engine) {
    let a = engine_at(url).await;
    let b = if on_postgres() { engine_at(url).await } else { a.clone() };
    (a, b)
}

fn waits(secs: f64, turns: usize) -> CreateRun {
    let mut script: Vec<_> =
        (0..turns).map(|_| json!({"tool_calls": [{"name": "wait", "arguments": {"seconds": secs}}]})).collect();
    script.push(json!({"text": "waited"}));
    CreateRun {
        initial_prompt: "wait".into(),
        tools: Some(vec!["wait".into()]),
        max_turns: Some(turns as u32 + 1),
        model_settings: Some(json!({ "script": script })),
        ..CreateRun::default()
    }
}

async fn drain(mut events: RunEvents) -> Vec<Event> {
    let mut got = Vec::new();
    loop {
        match tokio::time::timeout(SETTLE, events.next()).await.expect("stream hangs") {
            Some(Ok(e)) => got.push(e),
            Some(Err(end)) => panic!("dropped: {end}"),
            None => return got,
        }
    }
}

/// A run created and driven on A, followed live through B from its start:
/// B's stream has every event A's store holds, numbered 1, 2, 3… with no
/// gap or duplicate, and ends with `run.finished`; B's all-runs feed (what
/// `/api/events`, the runs list and the approvals badge follow) sees it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_on_one_server_follows_a_run_driven_by_another() {
    let db = test_db();
    let (a, b) = two_servers(&db_url(&db)).await;
    let mut feed = b.subscribe();
    let (run, _) = a.runs().create_run(waits(0.05, 12)).await.unwrap();
    let got = drain(b.traces().run_events(&run.id, 0).await.unwrap()).await;
    let mut fed = Vec::new();
    loop {
        let e = tokio::time::timeout(SETTLE, feed.recv()).await.expect("the feed hangs").expect("feed lagged");
        if e.run_id == run.id {
            fed.push(e.seq);
            if matches!(e.kind, EventKind::RunFinished { .. }) {
                break;
            }
        }
    }
    assert_eq!(fed, (1..=fed.len() as u64).collect::<Vec<_>>(), "the feed has every event of the run, in order");
    let seqs: Vec<u64> = got.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=got.len() as u64).collect::<Vec<_>>(), "gap or duplicate");
    assert!(matches!(got.last().unwrap().kind, EventKind::RunFinished { status: RunStatus::Done, .. }));
    let stored = a.store().events_after(&run.id, 0, 10_000).await.unwrap();
    assert_eq!(stored.len(), got.len(), "the stream is the stored log");
}

/// A cancel on B stops a run A drives: the run ends `cancelled` at once and
/// no step is written after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_on_one_server_stops_a_run_driven_by_another() {
    let db = test_db();
    let (a, b) = two_servers(&db_url(&db)).await;
    let (run, _) = a.runs().create_run(waits(0.2, 50)).await.unwrap();
    // Until A drives it (a step is stored).
    for _ in 0..500 {
        if a.runs().get_run(&run.id).await.unwrap().step_count > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let cancelled = b.runs().cancel(&run.id).await.unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    let steps_then = b.runs().get_run(&run.id).await.unwrap().step_count;
    // Longer than several of the run's turns: a driver that went on would write steps.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = a.runs().get_run(&run.id).await.unwrap();
    assert_eq!(after.status, RunStatus::Cancelled);
    assert!(after.step_count <= steps_then + 1, "steps went on after the cancel: {steps_then} → {}", after.step_count);
    assert!(after.step_count < 50);
}

/// Writes of a run's loop are fenced by the lease: a driver whose lease is
/// gone (another owner, or an older attempt) has its step, its messages,
/// its usage, a call's progress and an email refused, and nothing of them is stored;
/// the holder of the lease writes them all in one go. (A PostgreSQL matter:
/// on SQLite one server drives every run and there is no lease.)
#[tokio::test]
async fn a_write_under_a_lost_lease_is_refused_and_stores_nothing() {
    use runlens_engine::error::EngineError;
    use runlens_engine::model::{Message, MessageBody, ToolCallStatus};
    use runlens_engine::store::cluster::{Fence, FENCE};
    use runlens_engine::store::StepWrite;

    if !on_postgres() {
        return;
    }
    let db = test_db();
    let url = db_url(&db);
    let engine = engine_at(&url).await;
    let email = json!({"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}});
    let (run, _) =
        engine.runs().create_run(scripted(json!([{"tool_calls": [email]}, {"text": "sent"}]))).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(run.status, RunStatus::Paused);
    sql(&url, &[&format!("UPDATE runs SET lease_owner = 'a', attempt = 3 WHERE id = '{}'", run.id)]).await;

    let store = open_store(&url).await;
    let mut step = engine.runs().steps(&run.id).await.unwrap().remove(0);
    step.index = 1;
    let mut call = step.tool_calls[0].clone();
    call.step_index = 1;
    call.status = ToolCallStatus::Running;
    step.tool_calls = vec![call.clone()];
    let last = engine.runs().messages(&run.id).await.unwrap().last().unwrap().clone();
    let message = Message {
        id: format!("{}-m{}", run.id, last.seq + 1),
        seq: last.seq + 1,
        step_index: Some(1),
        body: MessageBody::Human { message: "fenced".into() },
        ..last
    };
    let messages = [message];
    let mut usage = run.usage;
    usage.requests += 7;
    let write = || StepWrite { step: &step, messages: &messages, run_usage: &usage, step_count: 2, switch: None };
    let fence = |owner: &str, attempt: u64| Fence { run_id: run.id.clone(), owner: owner.into(), attempt };
    let email_of = |call: &runlens_engine::model::ToolCall| runlens_engine::model::Email {
        id: format!("{}-{}", call.run_id, call.id),
        run_id: call.run_id.clone(),
        to: "a@example.com".into(),
        subject: "s".into(),
        body: "b".into(),
        created_at: chrono::Utc::now(),
    };

    for stale in [fence("b", 3), fence("a", 2)] {
        let refused = FENCE.scope(stale.clone(), store.save_step(write())).await;
        assert!(matches!(refused, Err(EngineError::LeaseLost(_))), "{stale:?}: {refused:?}");
        let refused = FENCE.scope(stale.clone(), store.save_tool_call(&call, 0)).await;
        assert!(matches!(refused, Err(EngineError::LeaseLost(_))), "{stale:?}: {refused:?}");
        let refused = FENCE.scope(stale.clone(), store.insert_email(&email_of(&call))).await;
        assert!(matches!(refused, Err(EngineError::LeaseLost(_))), "{stale:?}: {refused:?}");
    }
    assert!(engine.outbox(10).await.unwrap().is_empty(), "no email sent");
    assert_eq!(engine.runs().steps(&run.id).await.unwrap().len(), 1, "no step written");
    assert_eq!(engine.runs().messages(&run.id).await.unwrap().len() as u64, last.seq + 1, "no message written");
    assert_eq!(engine.runs().get_run(&run.id).await.unwrap().usage, run.usage, "no usage written");

    FENCE.scope(fence("a", 3), store.save_step(write())).await.unwrap();
    FENCE.scope(fence("a", 3), store.insert_email(&email_of(&call))).await.unwrap();
    assert_eq!(engine.outbox(10).await.unwrap().len(), 1, "the holder of the lease sends it");
    let steps = engine.runs().steps(&run.id).await.unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[1].tool_calls[0].status, ToolCallStatus::Running);
    assert_eq!(steps[1].tool_calls[0].id, call.id);
    let stored = engine.runs().messages(&run.id).await.unwrap();
    assert_eq!(stored.last().unwrap().id, messages[0].id);
    let after = engine.runs().get_run(&run.id).await.unwrap();
    assert_eq!((after.usage, after.step_count), (usage, 2));
}

/// An evaluator watched by two servers at once: every run that ends is
/// scored once by each scorer, whichever server read it, and counted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_evaluating_score_each_run_once() {
    use runlens_engine::model::{Actor, ScoreSource};
    let db = test_db();
    let (a, b) = two_servers(&db_url(&db)).await;
    let _workers = (a.start_evaluators(), b.start_evaluators());
    let new = serde_json::from_value(json!({"name": "every run", "sample_percent": 100, "scorers": [
        {"name": "short", "scorer": {"kind": "bounds", "max_turns": 3}},
        {"name": "says 2", "scorer": {"kind": "contains", "expected": "2"}}]}))
    .unwrap();
    let evaluator = a.evaluators().create("default", new, &Actor::system()).await.unwrap();
    const RUNS: usize = 60;
    let mut runs = Vec::new();
    for i in 0..RUNS {
        let server = if i % 2 == 0 { &a } else { &b };
        let req = CreateRun {
            initial_prompt: format!("What is 1 + 1? ({i})"),
            model_settings: Some(json!({"script": [{"text": "2"}]})),
            ..CreateRun::default()
        };
        runs.push(server.runs().create_run(req).await.unwrap().0.id);
    }
    let mut stalled = 0;
    let mut last = 0;
    loop {
        let seen = b.evaluators().get("default", &evaluator.id).await.unwrap().runs_seen;
        if seen >= RUNS as u64 {
            assert_eq!(seen, RUNS as u64, "each run counted once");
            break;
        }
        stalled = if seen == last { stalled + 1 } else { 0 };
        last = seen;
        assert!(stalled < 400, "the evaluator stopped at {seen} of {RUNS}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    for run in &runs {
        let scores = a.scores().of_run("default", run).await.unwrap();
        let mut names: Vec<&str> = scores.iter().map(|s| s.name.as_str()).collect();
        names.sort();
        assert_eq!(names, ["says 2", "short"], "run {run}: {scores:?}");
        assert!(scores.iter().all(|s| s.source == ScoreSource::Scorer));
    }
}
