//! The webhook outbox: every status change of a run with a hook (or in a
//! project with a subscription) is captured by the database in the
//! transaction that makes it, whichever code path made it (the runner's
//! transitions, a decision resuming a run, a follow-up reopening it, a
//! cancel), and nothing is captured for runs nobody listens to. The worker
//! is not started here, so the captured changes stay in the outbox.

use runlens_engine::model::{
    Actor, CreateRun, DecisionRequest, FollowUp, NewWebhook, OnStatusChange, RunStatus, RunStatus::*,
};
use runlens_engine::store::StatusChange;
use runlens_engine::EngineError;
use serde_json::json;

use crate::support::*;

fn hooked(script: serde_json::Value) -> CreateRun {
    let hook = OnStatusChange { url: "https://example.com/hook".into(), statuses: None };
    CreateRun { on_status_change: Some(hook), ..scripted(script) }
}

fn changes_of(all: &[StatusChange], run: &str) -> Vec<(RunStatus, RunStatus)> {
    all.iter().filter(|c| c.run_id == run).map(|c| (c.old_status, c.new_status)).collect()
}

#[tokio::test]
async fn every_status_change_is_captured_whatever_code_path_made_it() {
    let (engine, _dir) = engine().await;
    let system = Actor::system();
    let refused = engine.runs().create_run(hooked(json!([{"text": "hi"}]))).await.unwrap_err();
    assert!(matches!(&refused, EngineError::Invalid(m) if m.contains("no run webhook secret")), "{refused}");
    engine.webhooks().rotate_run_webhook_secret("default", None, &system).await.unwrap();

    // The runner's transitions, then a follow-up reopening the run.
    let answered = run_to_end(&engine, hooked(json!([{"text": "one"}, {"text": "two"}]))).await;
    engine
        .conversation()
        .follow_up(&answered.id, FollowUp { message: "again".into(), ..Default::default() })
        .await
        .unwrap();
    wait_for_status(&engine, &answered.id, Done).await;
    // A decision resuming a paused run.
    let email = json!({"to": "a@example.com", "subject": "s", "body": "b"});
    let mut mail = hooked(json!([{"tool_calls": [{"name": "send_email", "arguments": email}]}, {"text": "sent"}]));
    mail.tools = Some(vec!["send_email".into()]);
    let paused = run_to_end(&engine, mail).await;
    assert_eq!(paused.status, Paused);
    let call = paused.interruptions[0].call_id.clone();
    let boss = crate::support::approver(&engine, "boss").await;
    engine.approvals().approve(&paused.id, &call, DecisionRequest::default(), &boss).await.unwrap();
    wait_for_status(&engine, &paused.id, Done).await;
    // A cancel of a running run.
    let mut waiting = hooked(json!([{"tool_calls": [{"name": "wait", "arguments": {"seconds": 3600}}]}]));
    waiting.tools = Some(vec!["wait".into()]);
    let (waiting, _) = engine.runs().create_run(waiting).await.unwrap();
    wait_for_status(&engine, &waiting.id, Running).await;
    engine.runs().cancel(&waiting.id).await.unwrap();
    // A run nobody listens to.
    let quiet = run_to_end(&engine, scripted(json!([{"text": "shh"}]))).await;

    let all = engine.store().webhooks().status_changes(1000).await.unwrap();
    assert_eq!(changes_of(&all, &answered.id), [(Pending, Running), (Running, Done), (Done, Running), (Running, Done)]);
    assert_eq!(
        changes_of(&all, &paused.id),
        [(Pending, Running), (Running, Paused), (Paused, Running), (Running, Done)]
    );
    assert_eq!(changes_of(&all, &waiting.id), [(Pending, Running), (Running, Cancelled)]);
    assert!(changes_of(&all, &quiet.id).is_empty(), "no hook, no subscription: nothing captured");
    assert!(all.windows(2).all(|w| w[0].seq < w[1].seq), "in the order they happened");
    // What the payloads are built from, captured with the change.
    let pause = all.iter().find(|c| c.run_id == paused.id && c.new_status == Paused).unwrap();
    let calls: serde_json::Value = serde_json::from_str(pause.interruptions.as_deref().unwrap()).unwrap();
    assert_eq!(
        (calls[0]["call_id"].as_str(), calls[0]["tool_name"].as_str()),
        (Some(call.as_str()), Some("send_email"))
    );
    assert_eq!(calls[0]["arguments"], email);
    let done = all.iter().rfind(|c| c.run_id == paused.id).unwrap();
    assert_eq!(done.summary.as_deref(), Some("sent"));
    assert!(done.interruptions.is_none());

    // A project subscription makes every run of the project heard.
    let sub = NewWebhook { url: "https://example.com/all".into(), ..NewWebhook::default() };
    engine.webhooks().create_webhook("default", sub, &system).await.unwrap();
    let heard = run_to_end(&engine, scripted(json!([{"text": "heard"}]))).await;
    let all = engine.store().webhooks().status_changes(1000).await.unwrap();
    assert_eq!(changes_of(&all, &heard.id), [(Pending, Running), (Running, Done)]);
}
