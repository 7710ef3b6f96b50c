//! The persisted event stream: numbering, replay after N (also while the
//! run is live and events sit between broadcast and commit), the end of a
//! finished run's stream, slow-subscriber drop, and numbering across a restart.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use runlens_engine::events::{Event, EventKind, RunEvents, StreamEnd};
use runlens_engine::llm::ModelRegistry;
use runlens_engine::model::{CreateRun, DecisionRequest, RunStatus};
use runlens_engine::store::SqliteStore;
use runlens_engine::{Engine, EngineConfig};
use serde_json::{json, Value};

use crate::support::{db_url, engine, engine_at, run_to_end, scripted, test_tools, wait_for_status, SETTLE};

/// `turns - 1` calculator turns with a little text each, then an answer.
fn counting(turns: usize, latency_ms: u64) -> CreateRun {
    let mut script: Vec<Value> = (0..turns - 1)
        .map(|i| json!({"text": format!("step {i} of many"), "tool_calls": [{"name": "calculator", "arguments": {"expression": format!("{i} + 1")}}]}))
        .collect();
    script.push(json!({"text": "all done now"}));
    let mut req = scripted(Value::Array(script));
    req.max_turns = Some(turns as u32);
    req.model_settings.as_mut().unwrap()["latency_ms"] = json!(latency_ms);
    req
}

/// Drains a stream to its end; panics if it is dropped or hangs.
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

fn assert_numbered(events: &[Event], from: u64) {
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    let expected: Vec<u64> = (from..from + events.len() as u64).collect();
    assert_eq!(seqs, expected, "gap or duplicate");
}

#[tokio::test]
async fn events_are_numbered_in_publish_order_and_stored() {
    let (engine, _dir) = engine().await;
    let run = run_to_end(&engine, counting(3, 0)).await;
    let all = drain(engine.run_events(&run.id, 0).await.unwrap()).await;
    assert_numbered(&all, 1);
    assert_eq!(engine.last_event_seq(&run.id).await.unwrap(), all.len() as u64);
    let names: Vec<&str> = all.iter().map(|e| e.kind.name()).collect();
    assert_eq!(names[..2], ["run.status", "step.started"]);
    assert_eq!(all[0].kind, EventKind::RunStatus { old: RunStatus::Pending, new: RunStatus::Running });
    assert_eq!(*names.last().unwrap(), "run.finished");
    for name in EventKind::NAMES {
        assert!(names.contains(&name), "no {name} in {names:?}");
    }
    let deltas: String = all
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::MessageDelta { step_index: 2, text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, "all done now");
    // The same events, read back from the database after the tail is gone.
    engine.flush_events().await;
    let stored = engine.store().events_after(&run.id, 0, 10_000).await.unwrap();
    assert_eq!(stored, all);
}

#[tokio::test]
async fn replay_after_n_then_the_stream_ends() {
    let (engine, _dir) = engine().await;
    let run = run_to_end(&engine, counting(2, 0)).await;
    let all = drain(engine.run_events(&run.id, 0).await.unwrap()).await;
    let rest = drain(engine.run_events(&run.id, 5).await.unwrap()).await;
    assert_eq!(rest, all[5..]);
    let last = all.last().unwrap().seq;
    assert!(engine.run_events(&run.id, last).await.unwrap().is_over(), "nothing after run.finished");
    assert!(!engine.run_events(&run.id, last - 1).await.unwrap().is_over());
    assert!(engine.run_events("nope", 0).await.is_err());
}

#[tokio::test]
async fn replay_under_load_has_no_gap_and_no_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { event_capacity: 1 << 16, ..EngineConfig::default() };
    let store = SqliteStore::open(&db_url(&dir)).await.unwrap();
    let engine = Engine::with_parts(Arc::new(store), test_tools(), ModelRegistry::with_builtin(), config);
    // Several busy runs make big batches: events wait long between broadcast and commit.
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(engine.create_run(counting(60, 0)).await.unwrap().0.id);
    }
    let watched = ids[0].clone();
    let mut readers = Vec::new();
    for i in 0..40u64 {
        let events = engine.run_events(&watched, i * 3).await.unwrap();
        readers.push(tokio::spawn(async move { (i * 3, drain(events).await) }));
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let total = drain(engine.run_events(&watched, 0).await.unwrap()).await.len() as u64;
    for (after, got) in join_all(readers).await.into_iter().map(Result::unwrap) {
        assert_numbered(&got, after + 1);
        assert_eq!(got.last().unwrap().seq, total, "reader after {after} stopped early");
        assert_eq!(got.last().unwrap().kind.name(), "run.finished");
    }
    for id in &ids {
        engine.wait_until_settled(id, SETTLE).await.unwrap();
    }
}

#[tokio::test]
async fn a_slow_subscriber_is_dropped_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { event_capacity: 16, ..EngineConfig::default() };
    let store = SqliteStore::open(&db_url(&dir)).await.unwrap();
    let engine = Engine::with_parts(Arc::new(store), test_tools(), ModelRegistry::with_builtin(), config);
    // The run pauses for an approval first, then makes 30 more turns.
    let mut req = counting(31, 0);
    let script = req.model_settings.as_mut().unwrap()["script"].as_array_mut().unwrap();
    script.insert(0, json!({"tool_calls": [{"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}}]}));
    req.tools = Some(vec!["send_email".into(), "calculator".into()]);
    req.max_turns = Some(32);
    let (run, _) = engine.create_run(req).await.unwrap();
    let paused = wait_for_status(&engine, &run.id, RunStatus::Paused).await;
    // Reading up to the pause replays the stored events; from there on this
    // reader can only be fed live, through its bounded buffer. (Opened on a
    // running run instead, it could find every event already stored and
    // catch up from the database, never falling behind.)
    let mut slow = engine.run_events(&run.id, 0).await.unwrap();
    let mut got = Vec::new();
    loop {
        let e = tokio::time::timeout(SETTLE, slow.next()).await.unwrap().unwrap().unwrap();
        let pause = matches!(e.kind, EventKind::RunStatus { new: RunStatus::Paused, .. });
        got.push(e);
        if pause {
            break;
        }
    }
    // The run goes on without waiting for this reader...
    let call_id = &paused.interruptions[0].call_id;
    engine.approve(&run.id, call_id, DecisionRequest::default(), "web").await.unwrap();
    let done = engine.wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    // ...which is dropped once it reaches what it missed.
    let end = loop {
        match slow.next().await {
            Some(Ok(e)) => got.push(e),
            Some(Err(end)) => break end,
            None => panic!("expected a drop"),
        }
    };
    assert!(matches!(end, StreamEnd::Lagged(_)), "{end:?}");
    assert!(slow.next().await.is_none());
    assert_numbered(&got, 1);
    // Reconnecting after the last event received completes the stream.
    let rest = drain(engine.run_events(&run.id, slow.last_seq()).await.unwrap()).await;
    assert_numbered(&rest, slow.last_seq() + 1);
    assert_eq!(rest.last().unwrap().kind.name(), "run.finished");
}

#[tokio::test]
async fn numbering_continues_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let url = db_url(&dir);
    let mut req = scripted(json!([
        {"tool_calls": [{"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}}]},
        {"text": "sent"}]));
    req.tools = Some(vec!["send_email".into()]);
    let (id, before) = {
        let engine = engine_at(&url).await;
        let (run, _) = engine.create_run(req).await.unwrap();
        wait_for_status(&engine, &run.id, RunStatus::Paused).await;
        let before = drain_until_paused(&engine, &run.id).await;
        engine.flush_events().await;
        (run.id, before)
    };
    let engine = engine_at(&url).await;
    engine.recover().await.unwrap();
    let call = engine.get_run(&id).await.unwrap().interruptions[0].call_id.clone();
    engine.approve(&id, &call, DecisionRequest::default(), "test").await.unwrap();
    engine.wait_until_settled(&id, SETTLE).await.unwrap();
    let all = drain(engine.run_events(&id, 0).await.unwrap()).await;
    assert_numbered(&all, 1);
    assert_eq!(all[..before.len()], before[..]);
    assert!(all.len() > before.len() + 2);
    engine.flush_events().await;
    assert_eq!(
        engine_at(&url).await.last_event_seq(&id).await.unwrap(),
        all.len() as u64,
        "read back from the database"
    );
    assert_eq!(all[before.len()].kind.name(), "tool_call.updated", "the decision, numbered after the pause");
}

/// The events of a paused run, up to its `run.status` → paused.
async fn drain_until_paused(engine: &Engine, id: &str) -> Vec<Event> {
    let mut events = engine.run_events(id, 0).await.unwrap();
    let mut got = Vec::new();
    while let Some(Ok(e)) = tokio::time::timeout(SETTLE, events.next()).await.unwrap() {
        let paused = matches!(e.kind, EventKind::RunStatus { new: RunStatus::Paused, .. });
        got.push(e);
        if paused {
            return got;
        }
    }
    panic!("no pause in {got:?}")
}
