//! Approvals: pause, approve/reject (always, edited arguments, reasons),
//! mixed steps, timeouts, restarts while paused, cancel, and conflicts.

use std::time::Duration;

use runlens_engine::model::{
    ApprovalRequest, CreateRun, Decision, DecisionRequest, MessageBody, ResultType, RunStatus, ToolCallStatus,
};
use runlens_engine::{Engine, EngineError};
use serde_json::{json, Value};

use crate::support::*;

fn email(to: &str) -> Value {
    json!({"name": "send_email", "arguments": {"to": to, "subject": "Status", "body": "All good."}})
}

async fn paused(engine: &Engine, req: CreateRun) -> runlens_engine::model::Run {
    let (run, _) = engine.runs().create_run(req).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(run.status, RunStatus::Paused, "{:?}", run.failure_reason);
    run
}

fn rejection_texts(messages: &[runlens_engine::model::Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match &m.body {
            MessageBody::InvocationResult { result_type: ResultType::Rejection, result, .. } => {
                Some(result.to_string())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_paused_run_resumes_after_approval() {
    let (engine, _dir) = engine().await;
    let run = paused(&engine, scripted(json!([{"tool_calls": [email("a@example.com")]}, {"text": "sent"}]))).await;
    assert_eq!(run.interruptions.len(), 1);
    let i = &run.interruptions[0];
    assert_eq!((i.tool_name.as_str(), i.arguments["to"].as_str()), ("send_email", Some("a@example.com")));
    assert_eq!(engine.approvals().pending_approvals(None).await.unwrap().len(), 1);
    assert!(engine.outbox(10).await.unwrap().is_empty(), "nothing is sent before approval");

    let call = engine
        .approvals()
        .approve(&run.id, &i.call_id, DecisionRequest::default(), &crate::support::approver(&engine, "web").await)
        .await
        .unwrap();
    assert_eq!(call.approval.as_ref().unwrap().decided_by, "web");
    let done = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    assert_eq!(engine.outbox(10).await.unwrap().len(), 1);
    let step = &engine.runs().steps(&run.id).await.unwrap()[0];
    assert_eq!(step.tool_calls[0].status, ToolCallStatus::Succeeded);
    assert_eq!(step.tool_calls[0].approval.as_ref().unwrap().decision, Decision::Approved);
    assert!(engine.approvals().pending_approvals(None).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_rejection_reason_reaches_the_model() {
    let (engine, _dir) = engine().await;
    let run = paused(&engine, scripted(json!([{"tool_calls": [email("b@example.com")]}, {"text": "ok"}]))).await;
    let req = DecisionRequest { reason: Some("wrong recipient".into()), ..Default::default() };
    engine
        .approvals()
        .reject(&run.id, &run.interruptions[0].call_id, req, &crate::support::approver(&engine, "api").await)
        .await
        .unwrap();
    let done = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    let rejections = rejection_texts(&engine.runs().messages(&run.id).await.unwrap());
    assert_eq!(rejections.len(), 1);
    assert!(rejections[0].contains("rejected by api: wrong recipient"), "{}", rejections[0]);
    assert!(engine.outbox(10).await.unwrap().is_empty());
}

#[tokio::test]
async fn always_approve_skips_the_next_pause_for_that_tool() {
    let (engine, _dir) = engine().await;
    let script = json!([{"tool_calls": [email("c@example.com")]}, {"tool_calls": [email("d@example.com")]}, {"text": "two sent"}]);
    let run = paused(&engine, scripted(script)).await;
    let req = DecisionRequest { always: true, ..Default::default() };
    engine
        .approvals()
        .approve(&run.id, &run.interruptions[0].call_id, req, &crate::support::approver(&engine, "web").await)
        .await
        .unwrap();
    let done = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(done.status, RunStatus::Done, "no second pause");
    assert_eq!(done.always_approve, ["send_email"]);
    assert_eq!(engine.outbox(10).await.unwrap().len(), 2);
}

#[tokio::test]
async fn edited_arguments_run_and_both_versions_are_recorded() {
    let (engine, _dir) = engine().await;
    let run = paused(&engine, scripted(json!([{"tool_calls": [email("typo@exmaple.com")]}, {"text": "ok"}]))).await;
    let call_id = run.interruptions[0].call_id.clone();
    let bad = DecisionRequest { arguments: Some(json!({"to": "x"})), ..Default::default() };
    let err = engine
        .approvals()
        .approve(&run.id, &call_id, bad, &crate::support::approver(&engine, "web").await)
        .await
        .unwrap_err();
    assert!(matches!(&err, EngineError::Invalid(m) if m.contains("invalid arguments")), "{err}");

    let fixed = json!({"to": "ops@example.com", "subject": "Status", "body": "All good."});
    let req = DecisionRequest {
        arguments: Some(fixed.clone()),
        comment: Some("fixed the domain".into()),
        ..Default::default()
    };
    engine.approvals().approve(&run.id, &call_id, req, &crate::support::approver(&engine, "web").await).await.unwrap();
    engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(engine.outbox(10).await.unwrap()[0].to, "ops@example.com");
    let call = engine.runs().steps(&run.id).await.unwrap()[0].tool_calls[0].clone();
    assert_eq!(call.arguments, fixed);
    let decision = call.approval.unwrap();
    assert_eq!(decision.original_arguments["to"], "typo@exmaple.com");
    assert_eq!(decision.edited_arguments, Some(fixed.clone()));
    assert_eq!(decision.comment.as_deref(), Some("fixed the domain"));
    let messages = engine.runs().messages(&run.id).await.unwrap();
    let MessageBody::Agent { invocations, .. } = &messages[1].body else { panic!() };
    assert_eq!(invocations[0].input, fixed, "the model's history shows what ran");
}

#[tokio::test]
async fn in_a_mixed_step_the_free_call_runs_before_the_pause() {
    let (engine, _dir) = engine().await;
    let calc = json!({"name": "calculator", "arguments": {"expression": "20 + 22"}});
    let run = paused(&engine, scripted(json!([{"tool_calls": [calc, email("e@example.com")]}, {"text": "ok"}]))).await;
    let calls = &engine.runs().steps(&run.id).await.unwrap()[0].tool_calls;
    assert_eq!(calls[0].status, ToolCallStatus::Succeeded);
    assert_eq!(calls[1].status, ToolCallStatus::AwaitingApproval);
    engine
        .approvals()
        .approve(&run.id, &calls[1].id, DecisionRequest::default(), &crate::support::approver(&engine, "web").await)
        .await
        .unwrap();
    let done = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
    let calls = &engine.runs().steps(&run.id).await.unwrap()[0].tool_calls;
    assert_eq!(calls[0].result.as_ref().unwrap()["value"], 42, "not run twice or lost");
}

#[tokio::test]
async fn a_run_policy_can_require_approval_for_any_tool() {
    let (engine, _dir) = engine().await;
    let mut req =
        scripted(json!([{"tool_calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}]}, {"text": "ok"}]));
    req.approval = Some(ApprovalRequest::tools(["calculator"]));
    let run = paused(&engine, req).await;
    assert_eq!(run.interruptions[0].tool_name, "calculator");
    let mut bad = CreateRun { initial_prompt: "x".into(), ..Default::default() };
    bad.approval = Some(ApprovalRequest::tools(["nope"]));
    assert!(matches!(engine.runs().create_run(bad).await, Err(EngineError::Invalid(_))));
}

#[tokio::test]
async fn undecided_calls_time_out_as_rejections() {
    let (engine, _dir) = engine().await;
    let mut req = scripted(json!([{"tool_calls": [email("f@example.com")]}, {"text": "ok"}]));
    req.approval = Some(ApprovalRequest::timeout_s(3600));
    let run = paused(&engine, req).await;
    assert!(run.interruptions[0].deadline.is_some());
    // Jump the tokio clock past the hour instead of waiting for it.
    tokio::time::pause();
    tokio::time::advance(Duration::from_secs(3601)).await;
    tokio::time::resume();
    wait_for_status(&engine, &run.id, RunStatus::Done).await;
    let call = &engine.runs().steps(&run.id).await.unwrap()[0].tool_calls[0];
    assert_eq!(call.status, ToolCallStatus::Rejected);
    let decision = call.approval.as_ref().unwrap();
    assert_eq!((decision.decided_by.as_str(), decision.comment.as_deref()), ("runlens", Some("approval timed out")));
}

#[tokio::test]
async fn a_paused_run_survives_a_restart_and_resumes_on_approval() {
    let dir = crate::support::test_db();
    let url = db_url(&dir);
    let (run_id, call_id) = {
        let engine = engine_at(&url).await;
        let run =
            paused(&engine, scripted(json!([{"tool_calls": [email("g@example.com")]}, {"text": "after restart"}])))
                .await;
        (run.id, run.interruptions[0].call_id.clone())
    };
    let engine = engine_at(&url).await;
    engine.recover().await.unwrap();
    let run = engine.runs().get_run(&run_id).await.unwrap();
    assert_eq!(run.status, RunStatus::Paused);
    assert_eq!(run.interruptions[0].call_id, call_id);
    engine
        .approvals()
        .approve(&run_id, &call_id, DecisionRequest::default(), &crate::support::approver(&engine, "web").await)
        .await
        .unwrap();
    let done = engine.runs().wait_until_settled(&run_id, SETTLE).await.unwrap();
    assert_eq!(done.result, Some(json!("after restart")));
}

#[tokio::test]
async fn cancel_ends_a_paused_run_and_its_pending_calls() {
    let (engine, _dir) = engine().await;
    let run = paused(&engine, scripted(json!([{"tool_calls": [email("h@example.com")]}, {"text": "never"}]))).await;
    let cancelled = engine.runs().cancel(&run.id).await.unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    let call = &engine.runs().steps(&run.id).await.unwrap()[0].tool_calls[0];
    assert_eq!(call.status, ToolCallStatus::Cancelled);
    assert!(engine.approvals().pending_approvals(None).await.unwrap().is_empty());
    let err = engine
        .approvals()
        .approve(&run.id, &call.id, DecisionRequest::default(), &crate::support::approver(&engine, "web").await)
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::AlreadyDecided { .. }), "{err}");
}

#[tokio::test]
async fn a_second_decision_or_an_unknown_call_is_refused() {
    let (engine, _dir) = engine().await;
    let run = paused(&engine, scripted(json!([{"tool_calls": [email("i@example.com")]}, {"text": "ok"}]))).await;
    let call_id = run.interruptions[0].call_id.clone();
    engine
        .approvals()
        .approve(&run.id, &call_id, DecisionRequest::default(), &crate::support::approver(&engine, "web").await)
        .await
        .unwrap();
    match engine
        .approvals()
        .reject(&run.id, &call_id, DecisionRequest::default(), &crate::support::approver(&engine, "api").await)
        .await
    {
        Err(EngineError::AlreadyDecided { decision: Some(d), message }) => {
            assert_eq!(d.decision, Decision::Approved);
            assert!(message.contains("already approved by web"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        engine
            .approvals()
            .approve(&run.id, "nope", Default::default(), &crate::support::approver(&engine, "web").await)
            .await,
        Err(EngineError::NotFound(_))
    ));
    assert!(matches!(
        engine
            .approvals()
            .approve("nope", &call_id, Default::default(), &crate::support::approver(&engine, "web").await)
            .await,
        Err(EngineError::NotFound(_))
    ));
}
