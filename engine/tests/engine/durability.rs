//! The run loop keeps its promise under faults and hostile stored values:
//! checked date arithmetic, per-run recovery of undecodable records, one
//! transaction for a final answer and `done`, no side effect without its
//! record, an effect that happened is recorded as succeeded, message numbers
//! from the store, unique call ids whatever a provider sends, and approvals
//! and resumes that read only what they need.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::{self, StreamExt};
use runlens_engine::llm::{Model, ModelChunk, ModelError, ModelRegistry, ModelRequest, ModelStream};
use runlens_engine::model::{CreateRun, DecisionRequest, FollowUp, MessageBody, Run, RunStatus, ToolCallStatus, Usage};
use runlens_engine::{Engine, EngineConfig};
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::probe::{Faults, Probe};
use crate::support::*;

fn email(to: &str) -> Value {
    json!({"name": "send_email", "arguments": {"to": to, "subject": "Status", "body": "All good."}})
}

async fn probed(url: &str, faults: Faults) -> (Engine, Arc<Probe>) {
    probed_with(url, faults, ModelRegistry::with_builtin()).await
}

async fn probed_with(url: &str, faults: Faults, models: ModelRegistry) -> (Engine, Arc<Probe>) {
    let probe = Arc::new(Probe::new(open_store(url).await, faults));
    let engine = Engine::with_parts(probe.clone(), test_tools(), models, EngineConfig::default());
    (engine, probe)
}

async fn paused(engine: &Engine, req: CreateRun) -> Run {
    let (run, _) = engine.runs().create_run(req).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(run.status, RunStatus::Paused, "{:?}", run.failure_reason);
    run
}

/// An approval timeout far beyond the calendar, stored as is, must not make
/// reads of the paused run, the inbox or recovery panic: the deadline is
/// simply "never".
#[tokio::test]
async fn a_timeout_beyond_the_calendar_breaks_no_read_and_no_recovery() {
    let dir = crate::support::test_db();
    let url = db_url(&dir);
    let engine = engine_at(&url).await;
    let run = paused(&engine, scripted(json!([{"tool_calls": [email("a@example.com")]}, {"text": "sent"}]))).await;
    for timeout in ["10000000000000", "18446744073709551615", "9223372036854775807"] {
        sql(&url, &[&format!("UPDATE runs SET approval = '{{\"timeout_s\": {timeout}}}'")]).await;
        let read = engine.runs().get_run(&run.id).await.unwrap();
        assert_eq!(read.interruptions.len(), 1);
        assert_eq!(read.interruptions[0].deadline, None, "timeout {timeout}: no representable deadline");
        assert_eq!(engine.approvals().pending_approvals(None).await.unwrap().len(), 1);

        let fresh = engine_at(&url).await;
        assert_eq!(fresh.recover().await.unwrap(), 0, "still paused, nothing resumed");
        assert_eq!(fresh.runs().get_run(&run.id).await.unwrap().status, RunStatus::Paused);
    }
    // A timeout that fits still has its deadline.
    sql(&url, &["UPDATE runs SET approval = '{\"timeout_s\": 3600}'"]).await;
    let read = engine.runs().get_run(&run.id).await.unwrap();
    let i = &read.interruptions[0];
    assert_eq!(i.deadline, Some(i.requested_at + chrono::Duration::seconds(3600)));
}

/// A record that cannot be decoded fails its run with a reason at start-up;
/// the other runs recover as usual.
#[tokio::test]
async fn an_undecodable_run_fails_with_a_reason_and_the_others_recover() {
    let dir = crate::support::test_db();
    let url = db_url(&dir);
    let engine = engine_at(&url).await;
    let mut ids = Vec::new();
    for text in ["garbage settings", "healthy", "bad time", "wrong type"] {
        let run = run_to_end(&engine, scripted(json!([{"text": text}]))).await;
        ids.push(run.id);
    }
    let paused_bad = paused(&engine, scripted(json!([{"tool_calls": [email("a@example.com")]}]))).await;
    let paused_good = paused(&engine, scripted(json!([{"tool_calls": [email("b@example.com")]}]))).await;
    // The state a crash leaves (runs still to drive), then damage to three.
    let (garbage, healthy, bad_time, wrong_type) = (&ids[0], &ids[1], &ids[2], &ids[3]);
    let mut damage = vec![
        "UPDATE runs SET status = 'pending', step_count = 0, result = NULL, finished_at = NULL
         WHERE status = 'done'"
            .to_owned(),
        "DELETE FROM steps WHERE run_id IN (SELECT id FROM runs WHERE status = 'pending')".into(),
        "DELETE FROM messages WHERE seq > 0 AND run_id IN (SELECT id FROM runs WHERE status = 'pending')".into(),
        format!("UPDATE runs SET started_at = 9223372036854775807 WHERE id = '{bad_time}'"),
        format!("UPDATE runs SET always_reject = '{{\"x\": 1}}' WHERE id = '{}'", paused_bad.id),
    ];
    // Text that is not JSON, and text in an integer column: PostgreSQL's
    // column types refuse both at write, so only SQLite can hold them.
    let mut damaged = vec![(bad_time, "started_at")];
    if !on_postgres() {
        damage.push(format!("UPDATE runs SET model_settings = '{{not json' WHERE id = '{garbage}'"));
        damage.push(format!("UPDATE runs SET max_turns = 'ten' WHERE id = '{wrong_type}'"));
        damaged.extend([(garbage, "model_settings"), (wrong_type, "max_turns")]);
    }
    sql(&url, &damage.iter().map(String::as_str).collect::<Vec<_>>()).await;

    let fresh = engine_at(&url).await;
    fresh.recover().await.expect("recovery goes on past damaged runs");
    for (id, column) in damaged {
        // Read by its head only: a full read of `wrong_type` fails to decode.
        let mut head = fresh.runs().run_head(id).await.unwrap();
        for _ in 0..2000 {
            if head.status != RunStatus::Pending && head.status != RunStatus::Running {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            head = fresh.runs().run_head(id).await.unwrap();
        }
        assert_eq!(head.status, RunStatus::Failed, "{id}");
        let reason = sql_rows(&url, &format!("SELECT failure_reason FROM runs WHERE id = '{id}'")).await[0][0].clone();
        assert!(reason.contains("could not be read") && reason.contains(column), "{reason}");
    }
    let run = fresh.runs().get_run(&paused_bad.id).await.unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    assert!(run.failure_reason.unwrap().contains("always_reject"));
    assert!(fresh.approvals().pending_approvals(None).await.unwrap().iter().all(|i| i.run_id != paused_bad.id));

    let run = fresh.runs().wait_until_settled(healthy, SETTLE).await.unwrap();
    assert_eq!((run.status, run.result), (RunStatus::Done, Some(json!("healthy"))));
    let run = fresh.runs().get_run(&paused_good.id).await.unwrap();
    assert_eq!((run.status, run.interruptions.len()), (RunStatus::Paused, 1), "untouched, still waiting");
}

/// The final answer and `done` are one transaction: a crash while the run
/// is being finished never leaves an answer saved on a running run, so
/// recovery does not ask the model again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_while_finishing_never_asks_the_model_again() {
    let dir = crate::support::test_db();
    let url = db_url(&dir);
    let u = url.clone();
    let id = tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let id = rt.block_on(async {
            let faults = Faults { hang_transition_to: Some(RunStatus::Done), ..Faults::default() };
            let (engine, probe) = probed(&u, faults).await;
            let (run, _) = engine.runs().create_run(scripted(json!([{"text": "the answer"}]))).await.unwrap();
            // Either the run finishes, or its move to `done` is under way
            // (and hangs) when the process dies.
            tokio::select! {
                _ = probe.hung.notified() => {}
                r = engine.runs().wait_until_settled(&run.id, SETTLE) => assert_eq!(r.unwrap().status, RunStatus::Done),
            }
            run.id
        });
        rt.shutdown_background();
        id
    })
    .await
    .unwrap();

    let engine = engine_at(&url).await;
    engine.recover().await.unwrap();
    let run = engine.runs().wait_until_settled(&id, SETTLE).await.unwrap();
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    assert_eq!(run.result, Some(json!("the answer")));
    let agents = engine
        .runs()
        .messages(&id)
        .await
        .unwrap()
        .iter()
        .filter(|m| matches!(m.body, MessageBody::Agent { .. }))
        .count();
    assert_eq!(agents, 1, "the model answered once");
    assert_eq!(engine.runs().steps(&id).await.unwrap().len(), 1);
}

/// When a side-effecting call cannot be recorded as `running`, it does not
/// run: the model is told, and the outbox stays empty.
#[tokio::test]
async fn a_side_effect_whose_start_cannot_be_recorded_never_happens() {
    let dir = crate::support::test_db();
    let (engine, _probe) = probed(&db_url(&dir), Faults { fail_running_record: true, ..Faults::default() }).await;
    let run = paused(&engine, scripted(json!([{"tool_calls": [email("a@example.com")]}, {"text": "gave up"}]))).await;
    let run = crate::support::approve_first(&engine, &run, "web").await;

    assert!(engine.outbox(10).await.unwrap().is_empty(), "no record, no email");
    assert_eq!(run.status, RunStatus::Done, "the run goes on: {:?}", run.failure_reason);
    let call = &engine.runs().steps(&run.id).await.unwrap()[0].tool_calls[0];
    assert_eq!(call.status, ToolCallStatus::Failed);
    assert!(call.error.as_deref().unwrap().contains("not run"), "{:?}", call.error);
    let told = engine.runs().messages(&run.id).await.unwrap().iter().any(
        |m| matches!(&m.body, MessageBody::InvocationResult { result, .. } if result.to_string().contains("not run")),
    );
    assert!(told, "the model learns the call did not happen");
}

/// A cancel that arrives while `send_email` is under way, after the email
/// was written, records the call as succeeded: record and outbox agree.
#[tokio::test]
async fn cancelling_after_the_email_was_written_records_it_as_sent() {
    let dir = crate::support::test_db();
    let (written, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let faults = Faults { email_gate: Some((written.clone(), release.clone())), ..Faults::default() };
    let (engine, _probe) = probed(&db_url(&dir), faults).await;
    let run = paused(&engine, scripted(json!([{"tool_calls": [email("a@example.com")]}, {"text": "sent"}]))).await;
    let call_id = run.interruptions[0].call_id.clone();
    engine
        .approvals()
        .approve(&run.id, &call_id, DecisionRequest::default(), &crate::support::approver(&engine, "web").await)
        .await
        .unwrap();
    written.notified().await;

    let canceller = engine.clone();
    let id = run.id.clone();
    let cancel = tokio::spawn(async move { canceller.runs().cancel(&id).await });
    // Gives the cancel time to reach the run before the tool returns (an
    // ordering aid only: the assertions hold whichever comes first).
    tokio::time::sleep(Duration::from_millis(200)).await;
    release.notify_one();
    let _ = cancel.await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();

    let outbox = engine.outbox(10).await.unwrap();
    assert_eq!(outbox.len(), 1, "the email was written");
    let call = &engine.runs().steps(&run.id).await.unwrap()[0].tool_calls[0];
    assert_eq!(call.status, ToolCallStatus::Succeeded, "{:?}", call.error);
    assert_eq!(call.result.as_ref().unwrap()["id"], json!(outbox[0].id));
    assert!(matches!(run.status, RunStatus::Cancelled | RunStatus::Done), "{}", run.status);
}

/// New messages are numbered after the store's last one, even when an
/// earlier message cannot be decoded: none is silently dropped.
#[tokio::test]
async fn messages_are_numbered_after_the_store_s_last() {
    let dir = crate::support::test_db();
    let url = db_url(&dir);
    let engine = engine_at(&url).await;
    let run = paused(&engine, scripted(json!([{"tool_calls": [email("a@example.com")]}, {"text": "done"}]))).await;
    // The first message (the prompt) becomes unreadable.
    sql(&url, &["UPDATE messages SET type = 'unknown_kind' WHERE seq = 0"]).await;
    let call_id = run.interruptions[0].call_id.clone();
    let req = DecisionRequest { reason: Some("not now".into()), ..Default::default() };
    engine.approvals().reject(&run.id, &call_id, req, &crate::support::approver(&engine, "web").await).await.unwrap();
    engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();

    let rows = sql_rows(
        &url,
        &format!("SELECT CAST(seq AS TEXT), type FROM messages WHERE run_id = '{}' ORDER BY seq", run.id),
    )
    .await;
    let kinds: Vec<&str> = rows.iter().map(|r| r[1].as_str()).collect();
    assert_eq!(kinds, ["unknown_kind", "agent", "invocation-result", "agent"], "the rejection is in the transcript");
    assert_eq!(rows.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(), ["0", "1", "2", "3"]);
}

/// A provider that sends no tool-call ids (or repeats them), played by a
/// test model: each turn asks for one email, the same id every time.
struct NoIds {
    /// The id it sends (`None`: none at all).
    id: Option<&'static str>,
    turns: usize,
}

#[async_trait]
impl Model for NoIds {
    async fn stream(&self, req: ModelRequest) -> Result<ModelStream, ModelError> {
        let mut chunks = Vec::new();
        if req.turns_taken < self.turns {
            let args = json!({"to": format!("n{}@example.com", req.turns_taken), "subject": "s", "body": "b"});
            for index in 0..2 {
                chunks.push(ModelChunk::ToolCallDelta {
                    index,
                    id: self.id.map(str::to_owned),
                    name: Some(if index == 0 { "send_email" } else { "calculator" }.into()),
                    arguments: if index == 0 { args.to_string() } else { json!({"expression": "1+1"}).to_string() },
                });
            }
        } else {
            chunks.push(ModelChunk::TextDelta("all sent".into()));
        }
        chunks.push(ModelChunk::Usage(Usage { input_tokens: 1, output_tokens: 1, ..Usage::default() }));
        Ok(stream::iter(chunks.into_iter().map(Ok)).boxed())
    }
}

async fn run_without_ids(id: Option<&'static str>) {
    let dir = crate::support::test_db();
    let mut models = ModelRegistry::with_builtin();
    models.register("noids", Arc::new(NoIds { id, turns: 3 }));
    let (engine, _probe) = probed_with(&db_url(&dir), Faults::default(), models).await;
    let req = CreateRun {
        initial_prompt: "send three emails".into(),
        model: Some("noids".into()),
        tools: Some(vec!["send_email".into(), "calculator".into()]),
        ..CreateRun::default()
    };
    let mut run = paused(&engine, req).await;
    while run.status == RunStatus::Paused {
        let call_id = run.interruptions[0].call_id.clone();
        engine
            .approvals()
            .approve(&run.id, &call_id, DecisionRequest::default(), &crate::support::approver(&engine, "web").await)
            .await
            .expect("the decision is applied");
        run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    }
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    assert_eq!(engine.outbox(10).await.unwrap().len(), 3, "one email a turn, none lost to an id collision");

    let ids: Vec<String> = engine
        .runs()
        .steps(&run.id)
        .await
        .unwrap()
        .iter()
        .flat_map(|s| s.tool_calls.iter().map(|c| c.id.clone()))
        .collect();
    let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!((ids.len(), unique.len()), (6, 6), "{ids:?}");
    match id {
        Some(sent) if !sent.contains('/') => assert_eq!(ids[0], sent, "the provider's id is kept where it is unique"),
        _ => assert!(ids.iter().all(|i| i.starts_with("call_") && !i.contains('/')), "{ids:?}"),
    }
    // The transcript pairs each invocation with its result by the same id.
    let messages = engine.runs().messages(&run.id).await.unwrap();
    let invoked: Vec<String> = messages
        .iter()
        .flat_map(|m| match &m.body {
            MessageBody::Agent { invocations, .. } => invocations.iter().map(|i| i.id.clone()).collect(),
            _ => Vec::new(),
        })
        .collect();
    let answered: Vec<String> = messages
        .iter()
        .filter_map(|m| match &m.body {
            MessageBody::InvocationResult { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(invoked, ids);
    assert_eq!(answered, ids);
}

#[tokio::test]
async fn call_ids_are_unique_in_a_run_when_the_provider_sends_none() {
    run_without_ids(None).await;
}

#[tokio::test]
async fn call_ids_are_unique_in_a_run_when_the_provider_repeats_one() {
    run_without_ids(Some("same")).await;
}

#[tokio::test]
async fn call_ids_that_would_break_the_approval_url_are_replaced() {
    run_without_ids(Some("../approve?all")).await;
}

/// Approving reads the call (and its step for "always"), never every step;
/// resuming reads the open step, not the run's whole history of steps.
#[tokio::test]
async fn approving_and_resuming_read_only_what_they_need() {
    let dir = crate::support::test_db();
    let (engine, probe) = probed(&db_url(&dir), Faults::default()).await;
    let turns = 6;
    let mut script: Vec<Value> =
        (0..turns).map(|i| json!({"tool_calls": [email(&format!("n{i}@example.com"))]})).collect();
    script.push(json!({"text": "all sent"}));
    let mut run = paused(&engine, scripted(Value::Array(script))).await;
    let mut turn = 0;
    while run.status == RunStatus::Paused {
        probe.take();
        let call_id = run.interruptions[0].call_id.clone();
        let always = turn == 2;
        let req = DecisionRequest { always, ..Default::default() };
        engine
            .approvals()
            .approve(&run.id, &call_id, req, &crate::support::approver(&engine, "web").await)
            .await
            .unwrap();
        run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
        let calls = probe.take();
        for whole in ["steps", "messages", "step_outline"] {
            assert!(!calls.iter().any(|c| c == whole), "turn {turn}: no `{whole}` read: {calls:?}");
        }
        let open = format!("steps_page({turn},1)");
        for c in calls.iter().filter(|c| c.starts_with("steps_page")) {
            assert_eq!(c, &open, "turn {turn}: only the open step is read");
        }
        assert!(calls.contains(&open), "turn {turn}: {calls:?}");
        turn += 1;
    }
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    assert_eq!(turn, 3, "after the third approval said always, no further pause");
    assert_eq!(engine.outbox(10).await.unwrap().len(), turns);
}

/// Resuming a long conversation reads its recent transcript (the context
/// window and the turns since the person's latest message), not all of it,
/// and the model still gets exactly the turn count and window it would have.
#[tokio::test]
async fn resuming_a_long_conversation_reads_only_its_recent_transcript() {
    let dir = crate::support::test_db();
    let (engine, probe) = probed(&db_url(&dir), Faults::default()).await;
    let follow_ups = 100;
    let mut script: Vec<Value> = (0..=follow_ups).map(|i| json!({"text": format!("answer {i}")})).collect();
    script.push(json!({"tool_calls": [email("a@example.com")]}));
    script.push(json!({"text": "sent"}));
    let req = CreateRun {
        tools: Some(vec!["send_email".into()]),
        model_settings: Some(json!({"script": script, "context_window": 1024})),
        ..scripted(json!(null))
    };
    let run = run_to_end(&engine, req).await;
    for i in 0..=follow_ups {
        let message = if i < follow_ups { format!("question {i}: {}", "words ".repeat(30)) } else { "send it".into() };
        engine.conversation().follow_up(&run.id, FollowUp { message, ..FollowUp::default() }).await.unwrap();
        engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    }
    let run = engine.runs().get_run(&run.id).await.unwrap();
    assert_eq!(run.status, RunStatus::Paused, "{:?}", run.failure_reason);
    let total = engine.runs().messages(&run.id).await.unwrap().len() as u64;

    probe.take();
    let run = crate::support::approve_first(&engine, &run, "web").await;
    assert_eq!((run.status, run.result.clone()), (RunStatus::Done, Some(json!("sent"))), "the script stayed in step");
    let calls = probe.take();
    assert!(!calls.iter().any(|c| c == "messages"), "the whole transcript is never read: {calls:?}");
    let pages: Vec<u64> =
        calls.iter().filter_map(|c| c.strip_prefix("messages_page(")?.split(',').next()?.parse().ok()).collect();
    let earliest = *pages.iter().min().expect("the transcript's tail was read");
    assert!(earliest > total / 2, "read from seq {earliest} of {total}: {calls:?}");

    // The last request dropped what the window could not hold, counted on the whole transcript.
    let steps = engine.runs().steps(&run.id).await.unwrap();
    let last = steps.last().unwrap();
    let sent = last.request.messages;
    let dropped = last.request.dropped_messages.unwrap();
    assert_eq!(sent + dropped, total + 1, "every message is either sent or counted as dropped");
}
