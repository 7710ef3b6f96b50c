//! Crash recovery: a process dies mid-run (its runtime is torn down without
//! any cleanup), a new engine opens the same file and finishes the run.

use std::time::Duration;

use runlens_engine::model::{MessageBody, ResultType, RunStatus, ToolCallStatus};
use runlens_engine::EngineConfig;
use serde_json::json;

use crate::support::*;

/// Starts `req` in an engine on its own runtime, waits until `ready` holds
/// for the persisted steps, then kills that runtime like a crash would.
fn start_then_crash(url: &str, req: runlens_engine::model::CreateRun) -> String {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let id = rt.block_on(async {
        let engine = engine_at(url).await;
        let (run, _) = engine.create_run(req).await.unwrap();
        for _ in 0..500 {
            let steps = engine.steps(&run.id).await.unwrap();
            // Only calls with side effects are recorded as running.
            let running = steps.first().is_some_and(|s| {
                s.tool_calls.iter().any(|c| c.tool_name == "slow_side_effect" && c.status == ToolCallStatus::Running)
            });
            if running {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        run.id
    });
    rt.shutdown_background();
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_interrupted_mid_step_resumes_after_restart() {
    let dir = crate::support::test_db();
    let url = db_url(&dir);
    let req = scripted(json!([
        {"tool_calls": [
            {"name": "calculator", "arguments": {"expression": "2 + 2"}},
            {"name": "wait", "arguments": {"seconds": 0.5}},
            {"name": "slow_side_effect", "arguments": {}}
        ]},
        {"text": "finished after restart"}
    ]));
    let u = url.clone();
    let id = tokio::task::spawn_blocking(move || start_then_crash(&u, req)).await.unwrap();

    let engine = engine_at(&url).await;
    let before = engine.get_run(&id).await.unwrap();
    assert_eq!(before.status, RunStatus::Running, "the crash left it running");

    let settle = if crate::support::on_postgres() {
        // On a shared store the crashed server's lease on the run still
        // holds: the run is taken over once it expires (another server could
        // still be driving it until then).
        assert_eq!(engine.recover().await.unwrap(), 0, "the lease of the crashed server still holds");
        SETTLE + EngineConfig::default().lease
    } else {
        assert_eq!(engine.recover().await.unwrap(), 1);
        SETTLE
    };
    let run = engine.wait_until_settled(&id, settle).await.unwrap();
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    assert_eq!(run.result, Some(json!("finished after restart")));

    let calls = &engine.steps(&id).await.unwrap()[0].tool_calls;
    // The idempotent calls ran again; the one with side effects that was
    // under way was reported as interrupted, not repeated.
    assert_eq!(calls[0].result, Some(json!({"expression": "2 + 2", "value": 4})));
    assert_eq!(calls[0].status, ToolCallStatus::Succeeded);
    assert_eq!(calls[1].status, ToolCallStatus::Succeeded);
    assert_eq!(calls[2].status, ToolCallStatus::Failed);
    assert!(calls[2].error.as_deref().unwrap().contains("interrupted by a server restart"));

    let messages = engine.messages(&id).await.unwrap();
    let results: Vec<ResultType> = messages
        .iter()
        .filter_map(|m| match &m.body {
            MessageBody::InvocationResult { result_type, .. } => Some(*result_type),
            _ => None,
        })
        .collect();
    assert_eq!(results, [ResultType::Resolution, ResultType::Resolution, ResultType::Rejection]);
    let seqs: Vec<u64> = messages.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (0..messages.len() as u64).collect::<Vec<_>>(), "no gap or duplicate");
}

#[tokio::test]
async fn pending_runs_are_started_on_recovery() {
    let dir = crate::support::test_db();
    let url = db_url(&dir);
    let engine = engine_at(&url).await;
    let (run, _) = engine.create_run(scripted(json!([{"text": "hello"}]))).await.unwrap();
    engine.wait_until_settled(&run.id, SETTLE).await.unwrap();
    // The first server stops (on a shared store it would take the run below
    // from the queue itself).
    drop(engine);
    // Force the state a crash between insert and start would leave.
    crate::support::sql(
        &url,
        &[
            "UPDATE runs SET status = 'pending', step_count = 0",
            "DELETE FROM steps",
            "DELETE FROM messages WHERE seq > 0",
        ],
    )
    .await;

    let fresh = engine_at(&url).await;
    let picked = fresh.recover().await.unwrap();
    if crate::support::on_postgres() {
        // A shared store's queue: the run made ready by another server is
        // left to it for 2 s, then any server's claimer takes it.
        assert!(picked <= 1);
    } else {
        assert_eq!(picked, 1);
    }
    let done = fresh.wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(done.result, Some(json!("hello")));
}

/// A crash between a run's move to `done` and the commit of its
/// `run.finished` event: the next start publishes the event, so a client
/// following the run's stream sees it end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finish_whose_event_was_lost_is_announced_at_start() {
    let dir = crate::support::test_db();
    let url = db_url(&dir);
    let id = {
        let engine = engine_at(&url).await;
        let run = run_to_end(&engine, scripted(json!([{"text": "done"}]))).await;
        engine.flush_events().await;
        run.id
    };
    // What the crash leaves: the status change stored, its event not.
    let events = format!("FROM run_events WHERE run_id = '{id}' AND type IN ('run.finished', 'run.status')");
    let removed = crate::support::sql_rows(&url, &format!("SELECT type {events}")).await.len();
    assert!(removed >= 2, "the run had its status and finish events");
    crate::support::sql(
        &url,
        &[&format!("DELETE {events}"), &format!("UPDATE runs SET finish_unannounced = TRUE WHERE id = '{id}'")],
    )
    .await;

    let engine = engine_at(&url).await;
    engine.recover().await.unwrap();
    engine.flush_events().await;
    let mut events = engine.store().events_after(&id, 0, 1000).await.unwrap();
    if crate::support::on_postgres() {
        // On a shared store the finishing server may still be alive: its
        // run's end is published by another server once it has not been
        // heard of for a lease (the claimer looks every 2 s).
        let deadline = std::time::Instant::now() + EngineConfig::default().lease * 2 + SETTLE;
        while events.last().is_none_or(|e| e.kind.name() != "run.finished") && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
            events = engine.store().events_after(&id, 0, 1000).await.unwrap();
        }
    }
    let last = events.last().expect("events");
    assert_eq!(last.kind.name(), "run.finished", "the stream ends with run.finished again");
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[1] > w[0]), "numbering continues: {seqs:?}");
    // Announced once: a second start adds nothing.
    drop(engine);
    let engine = engine_at(&url).await;
    engine.recover().await.unwrap();
    engine.flush_events().await;
    assert_eq!(engine.store().events_after(&id, 0, 1000).await.unwrap().len(), events.len());
}

/// The server that paused a run dies before the call's approval deadline
/// (its timer dies with it): the call still times out as a rejection and the
/// run goes on — on SQLite when the server starts again, on a shared store
/// through a server that was already running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_deadline_outlives_the_server_that_armed_it() {
    let dir = crate::support::test_db();
    let url = db_url(&dir);
    let survivor = if on_postgres() { Some(engine_at(&url).await) } else { None };
    let mut req = scripted(json!([
        {"tool_calls": [{"name": "send_email", "arguments": {"to": "t@example.com", "subject": "s", "body": "b"}}]},
        {"text": "went on"}
    ]));
    req.tools = Some(vec!["send_email".into()]);
    req.approval = Some(json!({"tools": ["send_email"], "timeout_s": 2}));
    let u = url.clone();
    let id = tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let id = rt.block_on(async {
            let engine = engine_at(&u).await;
            let (run, _) = engine.create_run(req).await.unwrap();
            let run = engine.wait_until_settled(&run.id, SETTLE).await.unwrap();
            assert_eq!(run.status, RunStatus::Paused, "{:?}", run.failure_reason);
            run.id
        });
        rt.shutdown_background();
        id
    })
    .await
    .unwrap();
    let engine = match survivor {
        Some(engine) => engine,
        None => {
            let engine = engine_at(&url).await;
            engine.recover().await.unwrap();
            engine
        }
    };
    let run = engine.wait_until_settled(&id, SETTLE).await.unwrap();
    let run = if run.status == RunStatus::Paused {
        // Settled means "not pending or running": wait for the timeout.
        let deadline = std::time::Instant::now() + SETTLE;
        loop {
            let run = engine.get_run(&id).await.unwrap();
            if run.status != RunStatus::Paused || std::time::Instant::now() > deadline {
                break engine.wait_until_settled(&id, SETTLE).await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    } else {
        run
    };
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    assert_eq!(run.result, Some(json!("went on")));
    let call = &engine.steps(&id).await.unwrap()[0].tool_calls[0];
    assert_eq!(call.status, ToolCallStatus::Rejected);
    assert_eq!(call.approval.as_ref().unwrap().comment.as_deref(), Some("approval timed out"));
    assert!(engine.outbox(10).await.unwrap().is_empty(), "the email was never sent");
}
