//! The loop's rules: tool turn then answer, failures go back to the model,
//! max_turns, script exhaustion, model errors, concurrency and cancellation.

use std::time::Duration;

use runlens_engine::model::{CreateRun, MessageBody, ResultType, RunStatus, StepStatus, ToolCallStatus};
use runlens_engine::EngineError;
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn scripted_tool_turn_then_final_answer() {
    let (engine, _dir) = engine().await;
    let run = run_to_end(
        &engine,
        scripted(json!([
            {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]},
            {"text": "The answer is 42."}
        ])),
    )
    .await;
    assert_eq!(run.status, RunStatus::Done);
    assert_eq!(run.result, Some(json!("The answer is 42.")));
    assert_eq!(run.summary.as_deref(), Some("The answer is 42."));
    assert_eq!(run.step_count, 2);
    assert!(run.usage.input_tokens > 0 && run.usage.output_tokens > 0);
    assert_eq!(run.usage.requests, 2);

    let steps = engine.runs().steps(&run.id).await.unwrap();
    assert_eq!(steps.iter().map(|s| s.index).collect::<Vec<_>>(), [0, 1]);
    assert!(steps.iter().all(|s| s.status == StepStatus::Completed && s.usage.total_tokens > 0));
    assert_eq!(run.usage.total_tokens, steps.iter().map(|s| s.usage.total_tokens).sum::<u64>());
    let call = &steps[0].tool_calls[0];
    assert_eq!((call.tool_name.as_str(), call.status), ("calculator", ToolCallStatus::Succeeded));
    assert_eq!(call.result, Some(json!({"expression": "6 * 7", "value": 42})));
    assert!(call.started_at.is_some() && call.completed_at.is_some());

    let kinds: Vec<&str> = engine.runs().messages(&run.id).await.unwrap().iter().map(|m| m.body.kind()).collect();
    assert_eq!(kinds, ["human", "agent", "invocation-result", "agent"]);
}

#[tokio::test]
async fn the_planner_uses_the_calculator() {
    let (engine, _dir) = engine().await;
    let req = CreateRun { initial_prompt: "What is (12 + 30) * 2?".into(), ..CreateRun::default() };
    let run = run_to_end(&engine, req).await;
    assert_eq!(run.status, RunStatus::Done);
    let text = run.result.unwrap().as_str().unwrap().to_owned();
    assert!(text.contains("(12 + 30) * 2 = 84"), "{text}");
    assert_eq!(run.name, "What is (12 + 30) * 2?");
}

#[tokio::test]
async fn tool_errors_and_panics_go_back_to_the_model() {
    let (engine, _dir) = engine().await;
    let run = run_to_end(
        &engine,
        scripted(json!([
            {"tool_calls": [
                {"name": "calculator", "arguments": {"expression": "1 / 0"}},
                {"name": "explode", "arguments": {}},
                {"name": "calculator", "arguments": {"expr": "oops"}},
                {"name": "no_such_tool", "arguments": {}}
            ]},
            {"text": "Those failed."}
        ])),
    )
    .await;
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    let calls = &engine.runs().steps(&run.id).await.unwrap()[0].tool_calls;
    let errors: Vec<&str> = calls.iter().map(|c| c.error.as_deref().unwrap()).collect();
    assert_eq!(errors[0], "division by zero");
    assert!(errors[1].contains("panicked: kaboom"), "{}", errors[1]);
    assert!(errors[2].contains("invalid arguments"), "{}", errors[2]);
    assert!(errors[3].contains("unknown tool `no_such_tool`"), "{}", errors[3]);
    assert!(calls.iter().all(|c| c.status == ToolCallStatus::Failed));
    let rejections = engine
        .runs()
        .messages(&run.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| matches!(m.body, MessageBody::InvocationResult { result_type: ResultType::Rejection, .. }))
        .count();
    assert_eq!(rejections, 4);
}

#[tokio::test]
async fn max_turns_ends_done_with_a_null_result() {
    let (engine, _dir) = engine().await;
    let turn = json!({"tool_calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}]});
    let mut req = scripted(json!([turn, turn, turn, turn]));
    req.max_turns = Some(3);
    let run = run_to_end(&engine, req).await;
    assert_eq!(run.status, RunStatus::Done);
    assert_eq!(run.result, None);
    assert!(run.summary.unwrap().contains("max_turns (3)"));
    assert_eq!(run.step_count, 3);
}

#[tokio::test]
async fn an_exhausted_script_or_a_model_error_fails_the_run() {
    let (engine, _dir) = engine().await;
    let run = run_to_end(
        &engine,
        scripted(json!([
            {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}]}
        ])),
    )
    .await;
    assert_eq!(run.status, RunStatus::Failed);
    assert!(run.failure_reason.unwrap().contains("script ran out"));

    let run = run_to_end(&engine, scripted(json!([{"error": "HTTP 503 from the provider"}]))).await;
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.failure_reason.as_deref(), Some("model error: HTTP 503 from the provider"));
    let steps = engine.runs().steps(&run.id).await.unwrap();
    assert_eq!(steps[0].status, StepStatus::Interrupted);
}

#[tokio::test]
async fn several_calls_of_one_step_run_concurrently() {
    let (engine, _dir) = engine().await;
    let wait = json!({"name": "wait", "arguments": {"seconds": 0.3}});
    let run = run_to_end(&engine, scripted(json!([{"tool_calls": [wait, wait]}, {"text": "ok"}]))).await;
    let calls = &engine.runs().steps(&run.id).await.unwrap()[0].tool_calls;
    let (a, b) = (&calls[0], &calls[1]);
    // Each started before the other finished.
    assert!(a.started_at.unwrap() < b.completed_at.unwrap());
    assert!(b.started_at.unwrap() < a.completed_at.unwrap());
}

#[tokio::test]
async fn cancel_interrupts_a_wait_and_cannot_be_repeated() {
    let (engine, _dir) = engine().await;
    let (run, _) = engine
        .runs()
        .create_run(scripted(json!([
            {"tool_calls": [{"name": "wait", "arguments": {"seconds": 60}}]},
            {"text": "never"}
        ])))
        .await
        .unwrap();
    for _ in 0..200 {
        let steps = engine.runs().steps(&run.id).await.unwrap();
        if steps.first().is_some_and(|s| s.tool_calls[0].status == ToolCallStatus::Running) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let cancelled = tokio::time::timeout(Duration::from_secs(5), engine.runs().cancel(&run.id)).await.unwrap().unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    let call = &engine.runs().steps(&run.id).await.unwrap()[0].tool_calls[0];
    assert_eq!(call.status, ToolCallStatus::Cancelled);
    assert!(matches!(engine.runs().cancel(&run.id).await, Err(EngineError::Conflict(_))));
    assert!(matches!(engine.runs().cancel("missing").await, Err(EngineError::NotFound(_))));
}

/// A cancel that lands while the run changes hands (a pending run being
/// claimed and started) still ends it cancelled.
#[tokio::test]
async fn a_run_cancelled_as_it_starts_ends_cancelled() {
    let (engine, _dir) = engine().await;
    for _ in 0..40 {
        let (run, _) = engine
            .runs()
            .create_run(scripted(
                json!([{"tool_calls": [{"name": "wait", "arguments": {"seconds": 30}}]}, {"text": "x"}]),
            ))
            .await
            .unwrap();
        let cancelled = engine.runs().cancel(&run.id).await.expect("a run that has not finished can be cancelled");
        assert_eq!(cancelled.status, RunStatus::Cancelled);
    }
}

#[tokio::test]
async fn context_reaches_tools_but_not_the_model() {
    let (engine, _dir) = engine().await;
    let mut req = scripted(json!([{"tool_calls": [{"name": "current_time", "arguments": {}}]}, {"text": "ok"}]));
    req.context = Some(json!({"timezone": "Asia/Tokyo", "secret": "s3cr3t"}));
    let run = run_to_end(&engine, req).await;
    let call = &engine.runs().steps(&run.id).await.unwrap()[0].tool_calls[0];
    assert_eq!(call.result.as_ref().unwrap()["timezone"], "Asia/Tokyo");
    let transcript = serde_json::to_string(&engine.runs().messages(&run.id).await.unwrap()).unwrap();
    assert!(!transcript.contains("s3cr3t"));
}

#[tokio::test]
async fn send_email_writes_the_outbox() {
    let (engine, _dir) = engine().await;
    let args = json!({"to": "ops@example.com", "subject": "Hi", "body": "Report attached."});
    let mut req = scripted(json!([
        {"tool_calls": [{"name": "send_email", "arguments": args}]}, {"text": "sent"}
    ]));
    // Approval for send_email is covered in `approvals`; here it is pre-approved.
    req.approval = None;
    let (run, _) = engine.runs().create_run(req).await.unwrap();
    let paused = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    let call_id = paused.interruptions[0].call_id.clone();
    engine
        .approvals()
        .approve(&run.id, &call_id, Default::default(), &crate::support::approver(&engine, "test").await)
        .await
        .unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(run.status, RunStatus::Done);
    let outbox = engine.outbox(10).await.unwrap();
    assert_eq!(outbox.len(), 1);
    assert_eq!((outbox[0].run_id.as_str(), outbox[0].to.as_str()), (run.id.as_str(), "ops@example.com"));
}
