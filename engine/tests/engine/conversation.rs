//! Conversation control: follow-ups, edit-and-fork, structured results,
//! context limits and large results.

use runlens_engine::model::{CreateRun, FollowUp, MessageBody, RunStatus};
use runlens_engine::EngineError;
use serde_json::{json, Value};

use crate::support::*;

fn ask(prompt: &str) -> CreateRun {
    CreateRun { initial_prompt: prompt.into(), ..CreateRun::default() }
}

#[tokio::test]
async fn a_follow_up_continues_the_step_numbering() {
    let (engine, _dir) = engine().await;
    let first = run_to_end(&engine, ask("What is 2 + 3?")).await;
    assert_eq!(first.step_count, 2);
    let reopened = engine
        .conversation()
        .follow_up(&first.id, FollowUp { message: "And 5 * 5?".into(), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(reopened.status, RunStatus::Running);
    let done = wait_for_status(&engine, &first.id, RunStatus::Done).await;
    assert!(done.result.unwrap().as_str().unwrap().contains("5 * 5 = 25"));
    let steps = engine.runs().steps(&first.id).await.unwrap();
    assert_eq!(steps.iter().map(|s| s.index).collect::<Vec<_>>(), [0, 1, 2, 3]);
    // Each result is kept on the step that produced it.
    assert!(steps[1].response.result().and_then(Value::as_str).unwrap().contains("2 + 3 = 5"));
    assert!(steps[3].response.result().and_then(Value::as_str).unwrap().contains("25"));
    assert_eq!(done.usage.requests, 4);
}

#[tokio::test]
async fn follow_ups_are_refused_when_they_cannot_apply() {
    let (engine, _dir) = engine().await;
    let mut closed = ask("What is 1 + 1?");
    closed.interactive = Some(false);
    let closed = run_to_end(&engine, closed).await;
    let msg = FollowUp { message: "more".into(), ..Default::default() };
    assert!(
        matches!(engine.conversation().follow_up(&closed.id, msg.clone()).await, Err(EngineError::Conflict(m)) if m.contains("interactive"))
    );
    let (running, _) = engine
        .runs()
        .create_run(scripted(json!([
        {"tool_calls": [{"name": "wait", "arguments": {"seconds": 30}}]}, {"text": "x"}])))
        .await
        .unwrap();
    assert!(matches!(engine.conversation().follow_up(&running.id, msg.clone()).await, Err(EngineError::Conflict(_))));
    engine.runs().cancel(&running.id).await.unwrap();
    let open = run_to_end(&engine, ask("hello")).await;
    assert!(matches!(
        engine.conversation().follow_up(&open.id, FollowUp::default()).await,
        Err(EngineError::Invalid(_))
    ));
    let bad_model = FollowUp { message: "x".into(), model: Some("nope".into()), ..Default::default() };
    assert!(matches!(engine.conversation().follow_up(&open.id, bad_model).await, Err(EngineError::Invalid(_))));
    assert!(matches!(engine.conversation().follow_up("missing", msg).await, Err(EngineError::NotFound(_))));
}

#[tokio::test]
async fn editing_a_message_forks_and_leaves_the_parent_unchanged() {
    let (engine, _dir) = engine().await;
    let parent = run_to_end(&engine, ask("What is 2 + 3?")).await;
    engine
        .conversation()
        .follow_up(&parent.id, FollowUp { message: "And 4 * 4?".into(), ..Default::default() })
        .await
        .unwrap();
    let parent = wait_for_status(&engine, &parent.id, RunStatus::Done).await;
    let before = engine.runs().trace(&parent.id).await.unwrap();
    let second_human = before.messages.iter().filter(|m| m.body.kind() == "human").nth(1).unwrap().clone();

    let fork = engine.conversation().edit_message(&parent.id, &second_human.id, "And 9 * 9?").await.unwrap();
    assert_eq!(fork.parent_run_id.as_deref(), Some(parent.id.as_str()));
    assert_eq!(fork.forked_from_message_id.as_deref(), Some(second_human.id.as_str()));
    let fork = engine.runs().wait_until_settled(&fork.id, SETTLE).await.unwrap();
    assert!(fork.result.unwrap().as_str().unwrap().contains("9 * 9 = 81"));
    let fork_trace = engine.runs().trace(&fork.id).await.unwrap();
    assert_eq!(fork_trace.steps.len(), 4, "2 copied + 2 new");
    assert_eq!(fork_trace.messages[..second_human.seq as usize].len(), second_human.seq as usize);
    let MessageBody::Human { message } = &fork_trace.messages[second_human.seq as usize].body else { panic!() };
    assert_eq!(message, "And 9 * 9?");

    let after = engine.runs().trace(&parent.id).await.unwrap();
    assert_eq!(after, before, "the parent is untouched");
    let family = engine.conversation().family(&fork.id).await.unwrap();
    let ids: Vec<&str> = family.runs.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, [parent.id.as_str(), fork.id.as_str()]);
    assert_eq!(family.runs[1].forked_message.as_deref(), Some("And 9 * 9?"));

    let agent = &before.messages[1].id;
    assert!(matches!(engine.conversation().edit_message(&parent.id, agent, "x").await, Err(EngineError::Invalid(_))));
    assert!(matches!(engine.conversation().edit_message(&parent.id, "nope", "x").await, Err(EngineError::NotFound(_))));
}

#[tokio::test]
async fn structured_results_are_validated_with_one_repair() {
    let (engine, _dir) = engine().await;
    let schema = json!({"type": "object", "required": ["total"], "properties": {"total": {"type": "number"}}});
    let mut planned = ask("What is 6 * 7?");
    planned.result_schema = Some(schema.clone());
    let run = run_to_end(&engine, planned).await;
    assert_eq!(run.result, Some(json!({"total": 42})), "the built-in model fills a simple schema");

    let mut repaired = scripted(json!([{"text": "forty-two"}, {"text": "{\"total\": 42}"}]));
    repaired.result_schema = Some(schema.clone());
    let run = run_to_end(&engine, repaired).await;
    assert_eq!(run.result, Some(json!({"total": 42})));
    let repair = &engine.runs().messages(&run.id).await.unwrap()[2];
    assert!(matches!(&repair.body, MessageBody::Human { message } if message.contains("did not match")));

    let mut hopeless = scripted(json!([{"text": "nope"}, {"text": "{\"total\": \"many\"}"}]));
    hopeless.result_schema = Some(schema);
    let run = run_to_end(&engine, hopeless).await;
    assert_eq!((run.status, run.result), (RunStatus::Done, None));
    assert!(run.summary.unwrap().contains("did not match result_schema"));

    let mut bad = ask("x");
    bad.result_schema = Some(json!({"type": 12}));
    assert!(matches!(engine.runs().create_run(bad).await, Err(EngineError::Invalid(m)) if m.contains("result_schema")));
}

#[tokio::test]
async fn an_overflowing_history_drops_the_oldest_messages_sent() {
    let (engine, _dir) = engine().await;
    let call = json!({"tool_calls": [{"name": "big_result", "arguments": {"chars": 1200}}]});
    let mut req = scripted(json!([call, call, call, call, {"text": "done"}]));
    req.model_settings = Some(json!({"context_window": 1024, "script": req.model_settings.unwrap()["script"]}));
    let run = run_to_end(&engine, req).await;
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    let steps = engine.runs().steps(&run.id).await.unwrap();
    let dropped: Vec<u64> = steps.iter().map(|s| s.request.dropped_messages.unwrap_or(0)).collect();
    assert_eq!(dropped[0], 0);
    assert!(dropped[4] > 0, "{dropped:?}");
    assert_eq!(engine.runs().messages(&run.id).await.unwrap().len(), 10, "the stored transcript keeps everything");
}

#[tokio::test]
async fn a_600_kb_result_becomes_a_blob_with_a_preview() {
    let (engine, _dir) = engine().await;
    let run = run_to_end(
        &engine,
        scripted(json!([
        {"tool_calls": [{"name": "big_result", "arguments": {"chars": 600_000}}]}, {"text": "ok"}])),
    )
    .await;
    let call = engine.runs().steps(&run.id).await.unwrap()[0].tool_calls[0].clone();
    let result = call.result.unwrap();
    assert_eq!(result["too_large"], true);
    assert!(result["size_bytes"].as_u64().unwrap() > 600_000);
    assert_eq!(result["preview"].as_str().unwrap().chars().count(), 500);
    let blob = engine.conversation().blob(result["blob_id"].as_str().unwrap()).await.unwrap();
    assert!(blob.data.len() > 600_000);
    let seen = engine.runs().messages(&run.id).await.unwrap()[2].clone();
    let MessageBody::InvocationResult { result, .. } = seen.body else { panic!() };
    assert!(result["note"].as_str().unwrap().contains("too large"));
}

#[tokio::test]
async fn call_summarization_replaces_long_results_with_a_summary() {
    let (engine, _dir) = engine().await;
    let mut req =
        scripted(json!([{"tool_calls": [{"name": "big_result", "arguments": {"chars": 20_000}}]}, {"text": "ok"}]));
    req.call_summarization = Some(true);
    let run = run_to_end(&engine, req).await;
    let step = engine.runs().steps(&run.id).await.unwrap()[0].clone();
    let result = step.tool_calls[0].result.clone().unwrap();
    assert!(result["summary"].as_str().unwrap().contains("characters"));
    assert!(engine.conversation().blob(result["blob_id"].as_str().unwrap()).await.is_ok(), "the original is kept");
    assert_eq!(step.usage.requests, 2, "one extra model call");
    assert_eq!(run.usage.requests, 3);
}

#[tokio::test]
async fn a_follow_up_leaves_the_idle_gap_out_of_the_duration_and_compare() {
    let (engine, _dir) = engine().await;
    let first = run_to_end(&engine, ask("What is 2 + 3?")).await;
    assert_eq!(first.idle_ms, 0);
    let before = first.duration_ms(chrono::Utc::now()).unwrap();
    let twin = run_to_end(&engine, ask("What is 2 + 3?")).await;

    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let reopened = engine
        .conversation()
        .follow_up(&first.id, FollowUp { message: "And 5 * 5?".into(), ..Default::default() })
        .await
        .unwrap();
    assert!(reopened.idle_ms >= 600, "the gap is recorded when the run restarts: {}", reopened.idle_ms);
    let done = wait_for_status(&engine, &first.id, RunStatus::Done).await;
    let now = chrono::Utc::now();
    let (active, wall) = (done.duration_ms(now).unwrap(), done.wall_ms(now).unwrap());
    assert!(wall >= active + 600, "wall {wall} ms, active {active} ms");
    assert_eq!(wall - active, done.idle_ms as i64);
    assert!(active >= before, "the second segment adds its own time");
    assert!(active < 600, "two quick segments take well under the gap: {active} ms");

    // Compare weighs what the runs did, not how long one sat finished.
    let cmp = engine
        .comparisons()
        .compare(&runlens_engine::model::CompareQuery { a: twin.id.clone(), b: first.id.clone(), ..Default::default() })
        .await
        .unwrap();
    let b = cmp.totals.b.duration_ms.unwrap();
    assert_eq!(b, active as u64);
    assert!(cmp.totals.delta.duration_ms.unwrap() < 600, "{:?}", cmp.totals.delta);

    // Another follow-up adds its own gap; the idle time is a sum.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    engine
        .conversation()
        .follow_up(&first.id, FollowUp { message: "And 1 + 1?".into(), ..Default::default() })
        .await
        .unwrap();
    let again = wait_for_status(&engine, &first.id, RunStatus::Done).await;
    assert!(again.idle_ms >= done.idle_ms + 300, "{} then {}", done.idle_ms, again.idle_ms);
}
