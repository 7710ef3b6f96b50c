//! The persisted event stream: numbering, replay after N (also while the
//! run is live and events are being committed), the end of a finished run's
//! stream, slow-subscriber drop, numbering across a restart, nothing shown
//! before it is stored, a failing event log, the bounded publish queue, and
//! watchers of a paused run that the approval timeout resumes (also after a
//! restart, and while the writer evicts resting runs).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::join_all;
use futures::FutureExt;
use runlens_engine::error::{EngineError, Result as EngineResult};
use runlens_engine::events::{Event, EventBus, EventKind, EventLog, RunEvents, StoreLog, StreamEnd, LOUD_AFTER};
use runlens_engine::llm::ModelRegistry;
use runlens_engine::model::{ApprovalRequest, CreateRun, DecisionRequest, RunStatus};
use runlens_engine::store::Store;
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
    let all = drain(engine.traces().run_events(&run.id, 0).await.unwrap()).await;
    assert_numbered(&all, 1);
    assert_eq!(engine.traces().last_event_seq(&run.id).await.unwrap(), all.len() as u64);
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
    engine.traces().flush_events().await;
    let stored = engine.store().events_after(&run.id, 0, 10_000).await.unwrap();
    assert_eq!(stored, all);
}

#[tokio::test]
async fn replay_after_n_then_the_stream_ends() {
    let (engine, _dir) = engine().await;
    let run = run_to_end(&engine, counting(2, 0)).await;
    let all = drain(engine.traces().run_events(&run.id, 0).await.unwrap()).await;
    let rest = drain(engine.traces().run_events(&run.id, 5).await.unwrap()).await;
    assert_eq!(rest, all[5..]);
    let last = all.last().unwrap().seq;
    assert!(engine.traces().run_events(&run.id, last).await.unwrap().is_over(), "nothing after run.finished");
    assert!(!engine.traces().run_events(&run.id, last - 1).await.unwrap().is_over());
    assert!(engine.traces().run_events("nope", 0).await.is_err());
}

#[tokio::test]
async fn replay_under_load_has_no_gap_and_no_duplicate() {
    let dir = crate::support::test_db();
    let config = EngineConfig { event_capacity: 1 << 16, ..EngineConfig::default() };
    let store = crate::support::open_store(&db_url(&dir)).await;
    let engine = Engine::with_parts(store, test_tools(), ModelRegistry::with_builtin(), config);
    // Several busy runs make big batches: events wait long between broadcast and commit.
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(engine.runs().create_run(counting(60, 0)).await.unwrap().0.id);
    }
    let watched = ids[0].clone();
    let mut readers = Vec::new();
    for i in 0..40u64 {
        let events = engine.traces().run_events(&watched, i * 3).await.unwrap();
        readers.push(tokio::spawn(async move { (i * 3, drain(events).await) }));
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let total = drain(engine.traces().run_events(&watched, 0).await.unwrap()).await.len() as u64;
    for (after, got) in join_all(readers).await.into_iter().map(Result::unwrap) {
        assert_numbered(&got, after + 1);
        assert_eq!(got.last().unwrap().seq, total, "reader after {after} stopped early");
        assert_eq!(got.last().unwrap().kind.name(), "run.finished");
    }
    for id in &ids {
        engine.runs().wait_until_settled(id, SETTLE).await.unwrap();
    }
}

#[tokio::test]
async fn a_slow_subscriber_is_dropped_and_resumes() {
    let dir = crate::support::test_db();
    let config = EngineConfig { event_capacity: 16, ..EngineConfig::default() };
    let store = crate::support::open_store(&db_url(&dir)).await;
    let engine = Engine::with_parts(store, test_tools(), ModelRegistry::with_builtin(), config);
    // The run pauses for an approval first, then makes 30 more turns.
    let mut req = counting(31, 0);
    let script = req.model_settings.as_mut().unwrap()["script"].as_array_mut().unwrap();
    script.insert(0, json!({"tool_calls": [{"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}}]}));
    req.tools = Some(vec!["send_email".into(), "calculator".into()]);
    req.max_turns = Some(32);
    let (run, _) = engine.runs().create_run(req).await.unwrap();
    let paused = wait_for_status(&engine, &run.id, RunStatus::Paused).await;
    // Reading up to the pause replays the stored events; from there on this
    // reader can only be fed live, through its bounded buffer. (Opened on a
    // running run instead, it could find every event already stored and
    // catch up from the database, never falling behind.)
    let mut slow = engine.traces().run_events(&run.id, 0).await.unwrap();
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
    engine
        .approvals()
        .approve(&run.id, call_id, DecisionRequest::default(), &crate::support::approver(&engine, "web").await)
        .await
        .unwrap();
    let done = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
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
    let rest = drain(engine.traces().run_events(&run.id, slow.last_seq()).await.unwrap()).await;
    assert_numbered(&rest, slow.last_seq() + 1);
    assert_eq!(rest.last().unwrap().kind.name(), "run.finished");
}

#[tokio::test]
async fn numbering_continues_after_a_restart() {
    let dir = crate::support::test_db();
    let url = db_url(&dir);
    let mut req = scripted(json!([
        {"tool_calls": [{"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}}]},
        {"text": "sent"}]));
    req.tools = Some(vec!["send_email".into()]);
    let (id, before) = {
        let engine = engine_at(&url).await;
        let (run, _) = engine.runs().create_run(req).await.unwrap();
        wait_for_status(&engine, &run.id, RunStatus::Paused).await;
        let before = drain_until_paused(&engine, &run.id).await;
        engine.traces().flush_events().await;
        (run.id, before)
    };
    let engine = engine_at(&url).await;
    engine.recover().await.unwrap();
    let call = engine.runs().get_run(&id).await.unwrap().interruptions[0].call_id.clone();
    engine
        .approvals()
        .approve(&id, &call, DecisionRequest::default(), &crate::support::approver(&engine, "test").await)
        .await
        .unwrap();
    engine.runs().wait_until_settled(&id, SETTLE).await.unwrap();
    let all = drain(engine.traces().run_events(&id, 0).await.unwrap()).await;
    assert_numbered(&all, 1);
    assert_eq!(all[..before.len()], before[..]);
    assert!(all.len() > before.len() + 2);
    engine.traces().flush_events().await;
    assert_eq!(
        engine_at(&url).await.traces().last_event_seq(&id).await.unwrap(),
        all.len() as u64,
        "read back from the database"
    );
    assert_eq!(all[before.len()].kind.name(), "tool_call.updated", "the decision, numbered after the pause");
}

/// The events of a paused run, up to its `run.status` → paused.
async fn drain_until_paused(engine: &Engine, id: &str) -> Vec<Event> {
    let mut events = engine.traces().run_events(id, 0).await.unwrap();
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

/// The real event log of a SQLite store whose writes fail while `failing`
/// is set (a full disk, a locked file), counting the attempts.
struct FlakyLog {
    inner: StoreLog,
    failing: AtomicBool,
    attempts: AtomicU32,
}

impl FlakyLog {
    fn new(store: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(FlakyLog { inner: StoreLog(store), failing: AtomicBool::new(true), attempts: AtomicU32::new(0) })
    }
}

#[async_trait]
impl EventLog for FlakyLog {
    async fn append_events(&self, events: &[Arc<Event>]) -> EngineResult<()> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        if self.failing.load(Ordering::SeqCst) {
            return Err(EngineError::Store(sqlx::Error::Protocol("disk I/O error".into())));
        }
        self.inner.append_events(events).await
    }
    async fn events_after(&self, run_id: &str, after: u64, limit: u32) -> EngineResult<Vec<Event>> {
        self.inner.events_after(run_id, after, limit).await
    }
    async fn last_event(&self, run_id: &str) -> EngineResult<Option<(u64, String)>> {
        self.inner.last_event(run_id).await
    }
}

/// Waits (a hang guard, no timing) until the log has failed `n` times.
async fn until_attempts(log: &FlakyLog, n: u32) {
    tokio::time::timeout(SETTLE, async {
        while log.attempts.load(Ordering::SeqCst) < n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the writer never retried");
}

fn delta(i: u32) -> EventKind {
    EventKind::MessageDelta { step_index: 0, text: format!("piece {i} ") }
}

#[tokio::test]
async fn nothing_is_shown_before_it_is_stored_and_a_failing_log_is_retried_loudly() {
    let dir = crate::support::test_db();
    let store: Arc<dyn Store> = crate::support::open_store(&db_url(&dir)).await;
    // Two events are stored before the log starts failing.
    let first = EventBus::new(64, Some(store.clone()));
    first.publish("r1", delta(0));
    first.publish("r1", delta(1));
    first.flush().await;
    drop(first);

    let log = FlakyLog::new(store.clone());
    let bus = EventBus::with_log(64, Some(log.clone()), 64);
    let mut all = bus.subscribe();
    let mut one = bus.run_events("r1", 2, false).await.unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let reader = {
        let seen = seen.clone();
        tokio::spawn(async move {
            while let Some(Ok(e)) = one.next().await {
                seen.lock().unwrap().push(e.seq);
                if e.seq == 5 {
                    break;
                }
            }
        })
    };
    for i in 2..5 {
        bus.publish("r1", delta(i));
    }
    until_attempts(&log, LOUD_AFTER + 1).await;
    // Not stored: nobody sees them (a crash now would hand their numbers
    // out again), and the bus says why.
    assert!(matches!(all.try_recv(), Err(tokio::sync::broadcast::error::TryRecvError::Empty)), "shown before stored");
    assert!(seen.lock().unwrap().is_empty(), "the run's stream showed an unstored event");
    let why = bus.health().expect_err("a failing log is reported");
    assert!(why.contains("disk I/O error") && why.contains("3 events wait"), "{why}");
    assert_eq!(bus.last_seq("r1"), Some(2), "only stored numbers are handed to pages");
    assert_eq!(store.events_after("r1", 0, 100).await.unwrap().len(), 2);

    // The log comes back: the held events are stored in order, then shown.
    log.failing.store(false, Ordering::SeqCst);
    bus.flush().await;
    assert_eq!(bus.health(), Ok(()));
    let shown: Vec<u64> = (0..3).map(|_| all.try_recv().unwrap().seq).collect();
    assert_eq!(shown, [3, 4, 5]);
    tokio::time::timeout(SETTLE, reader).await.unwrap().unwrap();
    assert_eq!(*seen.lock().unwrap(), [3, 4, 5]);
    let stored = store.events_after("r1", 0, 100).await.unwrap();
    assert_numbered(&stored, 1);
    assert_eq!(stored.len(), 5, "nothing dropped");
}

#[tokio::test]
async fn a_full_queue_makes_async_publishers_wait() {
    let dir = crate::support::test_db();
    let store: Arc<dyn Store> = crate::support::open_store(&db_url(&dir)).await;
    let log = FlakyLog::new(store.clone());
    let bus = EventBus::with_log(64, Some(log.clone()), 8);
    bus.publish_async("r1", delta(0)).await;
    // The writer holds that batch while the log fails; the queue fills up.
    until_attempts(&log, 1).await;
    let mut published = 1;
    while bus.publish_async("r1", delta(published)).now_or_never().is_some() {
        published += 1;
        assert!(published <= 9, "the queue takes more than its limit");
    }
    assert_eq!(bus.queued(), 8);
    let waiting = bus.publish_async("r1", delta(published));
    log.failing.store(false, Ordering::SeqCst);
    tokio::time::timeout(SETTLE, waiting).await.expect("a publisher waits for room, then goes on");
    bus.flush().await;
    let stored = store.events_after("r1", 0, 100).await.unwrap();
    assert_numbered(&stored, 1);
    assert_eq!(stored.len() as u32, published + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_makes_the_synchronous_publish_wait() {
    let dir = crate::support::test_db();
    let store: Arc<dyn Store> = crate::support::open_store(&db_url(&dir)).await;
    let log = FlakyLog::new(store.clone());
    let bus = EventBus::with_log(64, Some(log.clone()), 8);
    let publisher = {
        let bus = bus.clone();
        // A run loop: a task that publishes synchronously.
        tokio::spawn(async move {
            for i in 0..40 {
                bus.publish("r1", delta(i));
            }
        })
    };
    until_attempts(&log, 1).await;
    tokio::time::timeout(SETTLE, async {
        while bus.queued() < 8 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    // The writer holds at most one batch and the queue 8 events: the
    // publisher of 40 is held, with the queue at its limit.
    assert_eq!(bus.queued(), 8);
    assert!(!publisher.is_finished());
    log.failing.store(false, Ordering::SeqCst);
    tokio::time::timeout(SETTLE, publisher).await.unwrap().unwrap();
    bus.flush().await;
    let stored = store.events_after("r1", 0, 100).await.unwrap();
    assert_numbered(&stored, 1);
    assert_eq!(stored.len(), 40);
}

/// A run whose one `send_email` waits for an approval nobody gives, with a
/// timeout of an hour (the tests jump the clock instead of waiting).
fn timing_out() -> CreateRun {
    let email = json!({"name": "send_email", "arguments": {"to": "t@example.com", "subject": "s", "body": "b"}});
    let mut req = scripted(json!([{"tool_calls": [email]}, {"text": "after the timeout, streamed word by word"}]));
    req.tools = Some(vec!["send_email".into()]);
    req.approval = Some(ApprovalRequest::tools(["send_email"]).with_timeout_s(3600));
    req
}

/// Jumps the tokio clock past the approval timeout of [`timing_out`].
async fn past_the_timeout() {
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(3601)).await;
    tokio::time::resume();
}

#[tokio::test]
async fn a_watcher_of_a_paused_run_sees_the_approval_timeout_resume_it_to_the_end() {
    let (engine, _dir) = engine().await;
    // One run watched all along, one watched only once paused.
    let (watched, _) = engine.runs().create_run(timing_out()).await.unwrap();
    let from_start = engine.traces().run_events(&watched.id, 0).await.unwrap();
    let (unwatched, _) = engine.runs().create_run(timing_out()).await.unwrap();
    wait_for_status(&engine, &watched.id, RunStatus::Paused).await;
    wait_for_status(&engine, &unwatched.id, RunStatus::Paused).await;
    engine.traces().flush_events().await;
    // Another run's events let the writer evict the resting run nobody watches.
    run_to_end(&engine, counting(2, 0)).await;
    let once_paused = engine.traces().run_events(&unwatched.id, 0).await.unwrap();
    past_the_timeout().await;
    let (a, b) = tokio::join!(drain(from_start), drain(once_paused));
    for events in [a, b] {
        assert_numbered(&events, 1);
        assert_eq!(events.last().unwrap().kind.name(), "run.finished");
        assert!(events.len() > 20, "the answer after the timeout streamed too: {events:?}");
    }
}

#[tokio::test]
async fn after_a_restart_a_watcher_of_a_paused_run_sees_the_approval_timeout_resume_it_to_the_end() {
    let dir = crate::support::test_db();
    let url = db_url(&dir);
    // The first engine runs on its own runtime, which ends with it: its
    // timer and tasks die as a killed process's do (in this runtime they
    // would live on, and that engine's timer could resume the run itself).
    let first = url.clone();
    let id = std::thread::spawn(move || {
        tokio::runtime::Runtime::new().unwrap().block_on(async {
            let engine = engine_at(&first).await;
            let (run, _) = engine.runs().create_run(timing_out()).await.unwrap();
            wait_for_status(&engine, &run.id, RunStatus::Paused).await;
            engine.traces().flush_events().await;
            run.id
        })
    })
    .join()
    .unwrap();
    let engine = engine_at(&url).await;
    engine.recover().await.unwrap();
    let watcher = engine.traces().run_events(&id, 0).await.unwrap();
    run_to_end(&engine, counting(2, 0)).await;
    past_the_timeout().await;
    let all = drain(watcher).await;
    assert_numbered(&all, 1);
    assert_eq!(all.last().unwrap().kind.name(), "run.finished");
}
