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
        let (run, _) = engine.runs().create_run(req).await.unwrap();
        for _ in 0..500 {
            let steps = engine.runs().steps(&run.id).await.unwrap();
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
    let before = engine.runs().get_run(&id).await.unwrap();
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
    let run = engine.runs().wait_until_settled(&id, settle).await.unwrap();
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    assert_eq!(run.result, Some(json!("finished after restart")));

    let calls = &engine.runs().steps(&id).await.unwrap()[0].tool_calls;
    // The idempotent calls ran again; the one with side effects that was
    // under way was reported as interrupted, not repeated.
    assert_eq!(calls[0].result, Some(json!({"expression": "2 + 2", "value": 4})));
    assert_eq!(calls[0].status, ToolCallStatus::Succeeded);
    assert_eq!(calls[1].status, ToolCallStatus::Succeeded);
    assert_eq!(calls[2].status, ToolCallStatus::Failed);
    assert!(calls[2].error.as_deref().unwrap().contains("interrupted by a server restart"));

    let messages = engine.runs().messages(&id).await.unwrap();
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
    let (run, _) = engine.runs().create_run(scripted(json!([{"text": "hello"}]))).await.unwrap();
    engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
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
    let done = fresh.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
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
        engine.traces().flush_events().await;
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
    engine.traces().flush_events().await;
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
    engine.traces().flush_events().await;
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
    req.approval = Some(runlens_engine::model::ApprovalRequest::tools(["send_email"]).with_timeout_s(2));
    let u = url.clone();
    let id = tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let id = rt.block_on(async {
            let engine = engine_at(&u).await;
            let (run, _) = engine.runs().create_run(req).await.unwrap();
            let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
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
    let run = engine.runs().wait_until_settled(&id, SETTLE).await.unwrap();
    let run = if run.status == RunStatus::Paused {
        // Settled means "not pending or running": wait for the timeout.
        let deadline = std::time::Instant::now() + SETTLE;
        loop {
            let run = engine.runs().get_run(&id).await.unwrap();
            if run.status != RunStatus::Paused || std::time::Instant::now() > deadline {
                break engine.runs().wait_until_settled(&id, SETTLE).await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    } else {
        run
    };
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    assert_eq!(run.result, Some(json!("went on")));
    let call = &engine.runs().steps(&id).await.unwrap()[0].tool_calls[0];
    assert_eq!(call.status, ToolCallStatus::Rejected);
    assert_eq!(call.approval.as_ref().unwrap().comment.as_deref(), Some("approval timed out"));
    assert!(engine.outbox(10).await.unwrap().is_empty(), "the email was never sent");
}

fn email_call(to: &str) -> serde_json::Value {
    json!({"name": "send_email", "arguments": {"to": to, "subject": "Status", "body": "All good."}})
}

/// A run paused on one `send_email` awaiting approval, with an hour's timeout.
async fn paused_with_timeout(engine: &runlens_engine::Engine, to: &str) -> (String, String) {
    let mut req = scripted(json!([{"tool_calls": [email_call(to)]}, {"text": "went on"}]));
    req.approval = Some(runlens_engine::model::ApprovalRequest::tools(["send_email"]).with_timeout_s(3600));
    let (run, _) = engine.runs().create_run(req).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(run.status, RunStatus::Paused, "{:?}", run.failure_reason);
    (run.id, run.interruptions[0].call_id.clone())
}

fn emails_of(outbox: &[runlens_engine::model::Email], run_id: &str) -> usize {
    outbox.iter().filter(|e| e.run_id == run_id).count()
}

/// Recovery goes on while requests are served. Held at each of its stops
/// (before it starts; after it read the calls with deadlines, before it
/// queued them; after it listed the paused runs to resume, before it
/// resumed them), requests about paused runs are answered as if it had
/// finished: a read shows the run paused with its call and deadline, an
/// approval resumes the run exactly once, a cancel cancels it — and what
/// recovery then does with what it read before does not undo or repeat
/// any of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_about_paused_runs_recovery_has_not_reached_are_answered_right() {
    use runlens_engine::model::DecisionRequest;
    use runlens_engine::RecoveryPace;

    let dir = crate::support::test_db();
    let url = db_url(&dir);
    let sqlite = !on_postgres();
    let (approved, cancelled, read, stranded, late_decided, late) = {
        let engine = engine_at(&url).await;
        let approved = paused_with_timeout(&engine, "approved@example.com").await;
        let cancelled = paused_with_timeout(&engine, "cancelled@example.com").await;
        let read = paused_with_timeout(&engine, "read@example.com").await;
        let stranded = paused_with_timeout(&engine, "stranded@example.com").await;
        let late_decided = paused_with_timeout(&engine, "late-decided@example.com").await;
        let late = paused_with_timeout(&engine, "late@example.com").await;
        engine.traces().flush_events().await;
        (approved, cancelled, read, stranded, late_decided, late)
    };
    // The previous server stopped. One run's only call was decided (rejected)
    // right before, with the run left paused: nothing awaits it any more.
    let mut damage = vec![format!(
        "UPDATE tool_calls SET status = 'rejected', error = 'rejected by ada: no' WHERE run_id = '{}'",
        stranded.0
    )];
    if sqlite {
        // Two calls whose deadline passed while no server ran. (On a shared
        // store the other servers' sweep would reject them at any moment.)
        for (run, _) in [&late_decided, &late] {
            damage.push(format!("UPDATE tool_calls SET requested_at = requested_at - 7200000 WHERE run_id = '{run}'"));
        }
    }
    sql(&url, &damage.iter().map(String::as_str).collect::<Vec<_>>()).await;

    let engine = engine_at(&url).await;
    let (pace, mut control) = RecoveryPace::new();
    let recovery = tokio::spawn({
        let engine = engine.clone();
        async move { engine.recover_runs_paced(Some(&pace)).await }
    });
    assert_eq!(control.reached.recv().await, Some("start"));

    // Recovery has reached nothing yet.
    let run = engine.runs().get_run(&read.0).await.unwrap();
    assert_eq!(run.status, RunStatus::Paused);
    assert_eq!(run.interruptions.len(), 1);
    assert_eq!(run.interruptions[0].call_id, read.1);
    assert!(run.interruptions[0].deadline.is_some());
    let inbox = engine.approvals().pending_approvals(None).await.unwrap();
    assert!(inbox.iter().any(|i| i.run_id == read.0 && i.call_id == read.1));

    engine
        .approvals()
        .approve(&approved.0, &approved.1, DecisionRequest::default(), &crate::support::approver(&engine, "ada").await)
        .await
        .unwrap();
    let done = engine.runs().wait_until_settled(&approved.0, SETTLE).await.unwrap();
    assert_eq!((done.status, done.result), (RunStatus::Done, Some(json!("went on"))));
    let again = engine
        .approvals()
        .approve(&approved.0, &approved.1, DecisionRequest::default(), &crate::support::approver(&engine, "bob").await)
        .await;
    assert!(again.is_err(), "decided once: {again:?}");

    let run = engine.runs().cancel(&cancelled.0).await.unwrap();
    assert_eq!(run.status, RunStatus::Cancelled);

    control.go.send(()).unwrap();
    // The calls with deadlines are read (the late ones among them), not queued yet.
    assert_eq!(control.reached.recv().await, Some("deadlines"));
    if sqlite {
        engine
            .approvals()
            .approve(
                &late_decided.0,
                &late_decided.1,
                DecisionRequest::default(),
                &crate::support::approver(&engine, "ada").await,
            )
            .await
            .unwrap();
        let done = engine.runs().wait_until_settled(&late_decided.0, SETTLE).await.unwrap();
        assert_eq!(done.status, RunStatus::Done);
    }
    control.go.send(()).unwrap();

    // The run nothing awaits is listed to resume, not resumed yet: a cancel gets there first.
    assert_eq!(control.reached.recv().await, Some("decided"));
    let run = engine.runs().cancel(&stranded.0).await.unwrap();
    assert_eq!(run.status, RunStatus::Cancelled);
    // No more stops.
    drop(control.go);
    let done = recovery.await.unwrap().unwrap();
    assert_eq!(done.resumed, 0, "the cancel came first");
    assert_eq!(done.failed, 0);

    // The late call nobody decided times out now, and its run goes on.
    if sqlite {
        let run = wait_for_status(&engine, &late.0, RunStatus::Done).await;
        assert_eq!(run.result, Some(json!("went on")));
        let call = &engine.runs().steps(&late.0).await.unwrap()[0].tool_calls[0];
        assert_eq!(call.status, ToolCallStatus::Rejected);
        assert_eq!(call.approval.as_ref().unwrap().comment.as_deref(), Some("approval timed out"));
        // The one decided meanwhile kept its decision; its deadline did nothing.
        let call = &engine.runs().steps(&late_decided.0).await.unwrap()[0].tool_calls[0];
        assert_eq!(call.approval.as_ref().unwrap().decided_by, "ada");
        assert_eq!(call.status, ToolCallStatus::Succeeded);
    }
    engine.traces().flush_events().await;
    let outbox = engine.outbox(100).await.unwrap();
    assert_eq!(emails_of(&outbox, &approved.0), 1, "approved once, sent once");
    assert_eq!(emails_of(&outbox, &cancelled.0), 0);
    assert_eq!(emails_of(&outbox, &stranded.0), 0);
    assert_eq!(emails_of(&outbox, &late.0), 0);
    if sqlite {
        assert_eq!(emails_of(&outbox, &late_decided.0), 1);
    }
    for (id, status) in [(&approved.0, RunStatus::Done), (&cancelled.0, RunStatus::Cancelled)] {
        assert_eq!(engine.runs().get_run(id).await.unwrap().status, status);
    }
    let run = engine.runs().get_run(&stranded.0).await.unwrap();
    assert_eq!((run.status, run.step_count), (RunStatus::Cancelled, 1), "never driven again");
    assert_eq!(engine.runs().steps(&approved.0).await.unwrap().len(), 2, "resumed once");
    // The run nobody touched waits, with its deadline queued (one entry);
    // on a shared store the late ones were never made late.
    let run = engine.runs().get_run(&read.0).await.unwrap();
    assert_eq!((run.status, run.interruptions.len()), (RunStatus::Paused, 1));
    let waiting = if sqlite { 1 } else { 3 };
    assert_eq!(engine.queued_deadlines(), waiting);
}

/// Recovery's bulk reads walk every paused run in pages, whatever the page
/// size: each call with a deadline once, the runs nothing awaits, and the
/// undecodable records among the paused runs.
#[tokio::test]
async fn recovery_reads_walk_every_paused_run_in_pages() {
    use runlens_engine::store::recovery::{CallCursor, RunCursor};

    let dir = crate::support::test_db();
    let url = db_url(&dir);
    let engine = engine_at(&url).await;
    let mut with_timeout = Vec::new();
    for i in 0..5 {
        with_timeout.push(paused_with_timeout(&engine, &format!("t{i}@example.com")).await);
    }
    // Two calls in one step, and a run without a timeout (no deadline).
    let mut req = scripted(json!([{"tool_calls": [email_call("x@example.com"), email_call("y@example.com")]}]));
    req.approval = Some(runlens_engine::model::ApprovalRequest::tools(["send_email"]).with_timeout_s(60));
    let (two, _) = engine.runs().create_run(req).await.unwrap();
    let two = engine.runs().wait_until_settled(&two.id, SETTLE).await.unwrap();
    let (untimed, _) =
        engine.runs().create_run(scripted(json!([{"tool_calls": [email_call("z@example.com")]}]))).await.unwrap();
    let untimed = engine.runs().wait_until_settled(&untimed.id, SETTLE).await.unwrap();
    assert_eq!((two.status, untimed.status), (RunStatus::Paused, RunStatus::Paused));
    engine.traces().flush_events().await;
    let store = engine.store().clone();

    let mut seen = Vec::new();
    let mut after: Option<CallCursor> = None;
    let mut pages = 0;
    loop {
        let (calls, next) = store.call_deadlines(after.as_ref(), 2).await.unwrap();
        assert!(calls.len() <= 2);
        pages += 1;
        seen.extend(calls.into_iter().map(|c| (c.run_id, c.call_id, c.deadline.is_some())));
        match next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert!(pages >= 4, "{pages} pages");
    let mut expected: Vec<(String, String, bool)> =
        with_timeout.iter().map(|(run, call)| (run.clone(), call.clone(), true)).collect();
    expected.extend(two.interruptions.iter().map(|i| (two.id.clone(), i.call_id.clone(), true)));
    expected.sort();
    seen.sort();
    assert_eq!(seen, expected, "each call with a deadline once; none of the run without a timeout");

    assert!(store.paused_runs_awaiting_nothing().await.unwrap().is_empty());
    sql(&url, &[&format!("UPDATE tool_calls SET status = 'rejected' WHERE run_id = '{}'", untimed.id)]).await;
    assert_eq!(store.paused_runs_awaiting_nothing().await.unwrap(), vec![untimed.id.clone()]);

    let (bad_run, _) = &with_timeout[3];
    sql(&url, &[&format!("UPDATE runs SET always_reject = '{{\"x\": 1}}' WHERE id = '{bad_run}'")]).await;
    let mut bad = Vec::new();
    let mut after: Option<RunCursor> = None;
    let mut walked = 0;
    loop {
        let (found, next) = store.undecodable_paused_runs(after.as_ref(), 2).await.unwrap();
        walked += 1;
        bad.extend(found);
        match next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert!(walked >= 4, "7 paused runs in pages of 2: {walked}");
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(&bad[0].run_id, bad_run);
    assert!(bad[0].problem.contains("always_reject"), "{}", bad[0].problem);
}

/// Approves a `send_email` call in an engine on its own runtime and kills
/// that runtime once the email is in the outbox, before the call's end is
/// recorded (the store holds it `running`). Returns the run and call ids.
fn crash_after_the_email_is_written(url: &str) -> (String, String) {
    use crate::probe::{Faults, Probe};
    use runlens_engine::llm::ModelRegistry;
    use runlens_engine::model::DecisionRequest;
    use runlens_engine::Engine;
    use std::sync::Arc;
    use tokio::sync::Notify;

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let ids = rt.block_on(async {
        let (written, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let faults = Faults { email_gate: Some((written.clone(), release)), ..Faults::default() };
        let probe = Arc::new(Probe::new(open_store(url).await, faults));
        let engine = Engine::with_parts(probe, test_tools(), ModelRegistry::with_builtin(), EngineConfig::default());
        let email =
            json!({"name": "send_email", "arguments": {"to": "a@example.com", "subject": "Hi", "body": "Once."}});
        let (run, _) =
            engine.runs().create_run(scripted(json!([{"tool_calls": [email]}, {"text": "sent"}]))).await.unwrap();
        let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
        assert_eq!(run.status, RunStatus::Paused, "{:?}", run.failure_reason);
        let call_id = run.interruptions[0].call_id.clone();
        engine
            .approvals()
            .approve(&run.id, &call_id, DecisionRequest::default(), &crate::support::approver(&engine, "web").await)
            .await
            .unwrap();
        written.notified().await;
        (run.id, call_id)
    });
    rt.shutdown_background();
    ids
}

/// `send_email` after a crash mid-call ends as the outbox says: the email
/// written before the crash makes the call succeeded without a second email;
/// an email that was never written is sent once, now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_email_ends_as_the_outbox_says_and_is_sent_exactly_once() {
    for written in [true, false] {
        let dir = crate::support::test_db();
        let url = db_url(&dir);
        let u = url.clone();
        let (run_id, call_id) =
            tokio::task::spawn_blocking(move || crash_after_the_email_is_written(&u)).await.unwrap();
        if !written {
            // The crash came after the call was recorded `running` but before
            // the email's commit.
            sql(&url, &["DELETE FROM outbox"]).await;
        }

        let engine = engine_at(&url).await;
        let call = &engine.runs().steps(&run_id).await.unwrap()[0].tool_calls[0];
        assert_eq!(call.status, ToolCallStatus::Running, "the crash left the call running");
        let settle = if crate::support::on_postgres() {
            SETTLE + EngineConfig::default().lease
        } else {
            assert_eq!(engine.recover().await.unwrap(), 1);
            SETTLE
        };
        let run = engine.runs().wait_until_settled(&run_id, settle).await.unwrap();
        assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);

        let outbox = engine.outbox(10).await.unwrap();
        assert_eq!(outbox.len(), 1, "exactly one email (written before the crash: {written})");
        assert_eq!(outbox[0].id, format!("{run_id}-{call_id}"));
        let call = &engine.runs().steps(&run_id).await.unwrap()[0].tool_calls[0];
        assert_eq!(call.status, ToolCallStatus::Succeeded, "{:?}", call.error);
        assert_eq!(call.result.as_ref().unwrap()["id"], json!(outbox[0].id));
        let told = engine.runs().messages(&run_id).await.unwrap().iter().any(|m| {
            matches!(&m.body, MessageBody::InvocationResult { result_type: ResultType::Resolution, result, .. }
                if result.to_string().contains(&outbox[0].id))
        });
        assert!(told, "the model is told the email was sent");
    }
}
