//! Run outcomes: what a run came to beside its status (`done · 1 call
//! rejected`), the same in every read (one run, the list, a fork, an
//! import) and as a list filter.

use runlens_engine::model::{
    ApprovalRequest, DecisionRequest, ForkFromStep, OutcomeFilter, OutcomeTone, Run, RunFilter, RunStatus,
};
use runlens_engine::Engine;
use serde_json::{json, Value};

use crate::support::*;

fn email() -> Value {
    json!({"name": "send_email", "arguments": {"to": "a@example.com", "subject": "Hi", "body": "Hello."}})
}

/// A run whose `send_email` a person rejected: it ends `done`.
async fn rejected_run(engine: &Engine) -> Run {
    let mut req = scripted(json!([{"tool_calls": [email()]}, {"text": "ok"}]));
    req.approval = Some(ApprovalRequest::tools(["send_email"]));
    let (run, _) = engine.runs().create_run(req).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(run.status, RunStatus::Paused);
    let who = approver(engine, "ada").await;
    let call = run.interruptions[0].call_id.clone();
    engine.approvals().reject(&run.id, &call, DecisionRequest::default(), &who).await.unwrap();
    engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap()
}

async fn listed(engine: &Engine, outcome: OutcomeFilter) -> Vec<String> {
    let f = RunFilter { outcome: Some(outcome), ..RunFilter::default() };
    engine.runs().list_runs(&f).await.unwrap().runs.into_iter().map(|r| r.id).collect()
}

#[tokio::test]
async fn outcomes_say_what_the_status_does_not_in_every_read_and_filter() {
    let (engine, _dir) = engine().await;
    let clean = run_to_end(&engine, scripted(json!([{"text": "fine"}]))).await;
    assert_eq!((clean.outcome.label.as_str(), clean.outcome.tone), ("done", OutcomeTone::Clean));

    let rejected = rejected_run(&engine).await;
    assert_eq!(rejected.status, RunStatus::Done);
    assert_eq!(rejected.outcome.label, "done · 1 call rejected");
    assert_eq!((rejected.outcome.tone, rejected.outcome.rejected_calls), (OutcomeTone::Warning, 1));

    let errored = run_to_end(
        &engine,
        scripted(json!([{"tool_calls": [{"name": "explode", "arguments": {}}]}, {"text": "it broke"}])),
    )
    .await;
    assert_eq!(errored.outcome.label, "done · 1 tool error");
    assert_eq!(errored.outcome.failed_calls, 1);

    let mut req = scripted(json!([{"tool_calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}]}]));
    req.max_turns = Some(1);
    let stopped = run_to_end(&engine, req).await;
    assert_eq!(stopped.outcome.label, "done · max turns");

    let (slow, _) = engine
        .runs()
        .create_run(scripted(json!([{"tool_calls": [{"name": "wait", "arguments": {"seconds": 5}}]}])))
        .await
        .unwrap();
    wait_for_status(&engine, &slow.id, RunStatus::Running).await;
    engine.runs().cancel(&slow.id).await.unwrap();
    let cancelled = engine.runs().wait_until_settled(&slow.id, SETTLE).await.unwrap();
    assert_eq!((cancelled.outcome.label.as_str(), cancelled.outcome.tone), ("cancelled", OutcomeTone::Warning));

    // The list reads the same outcome as the run's own read.
    let page = engine.runs().list_runs(&RunFilter::default()).await.unwrap();
    for run in &page.runs {
        let one = engine.runs().get_run(&run.id).await.unwrap();
        assert_eq!(run.outcome, one.outcome, "{}", run.id);
    }

    // Filters.
    assert_eq!(listed(&engine, OutcomeFilter::Clean).await, vec![clean.id.clone()]);
    assert_eq!(listed(&engine, OutcomeFilter::Rejected).await, vec![rejected.id.clone()]);
    assert_eq!(listed(&engine, OutcomeFilter::ToolError).await, vec![errored.id.clone()]);
    let mut issues = listed(&engine, OutcomeFilter::Issues).await;
    issues.sort();
    let mut expected = vec![rejected.id.clone(), errored.id.clone(), stopped.id.clone(), cancelled.id.clone()];
    expected.sort();
    assert_eq!(issues, expected);
    let status_and_outcome =
        RunFilter { status: Some(RunStatus::Cancelled), outcome: Some(OutcomeFilter::Issues), ..RunFilter::default() };
    let page = engine.runs().list_runs(&status_and_outcome).await.unwrap();
    assert_eq!(page.runs.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), vec![cancelled.id.clone()]);
}

#[tokio::test]
async fn a_fork_and_an_import_count_the_calls_they_carry() {
    let (engine, _dir) = engine().await;
    let rejected = rejected_run(&engine).await;

    // A fork from the step whose call was rejected carries that call: the
    // run it returns says so, as every later read does.
    let fork = engine
        .conversation()
        .fork_from_step(&rejected.id, ForkFromStep { from_step: 0, ..ForkFromStep::default() }, None)
        .await
        .unwrap();
    assert_eq!(fork.outcome.rejected_calls, 1, "{:?}", fork.outcome);
    let settled = engine.runs().wait_until_settled(&fork.id, SETTLE).await.unwrap();
    assert_eq!(settled.outcome.rejected_calls, 1);
    assert_eq!(settled.outcome.label, format!("{} · 1 call rejected", settled.status));

    // An import recounts; an `outcome` in the document is not believed.
    let mut doc = serde_json::to_value(engine.snapshots().export_state(&rejected.id).await.unwrap()).unwrap();
    assert_eq!(doc["run"]["outcome"]["label"], "done · 1 call rejected");
    doc["run"]["outcome"] =
        json!({"label": "done", "note": "", "tone": "clean", "rejected_calls": 0, "failed_calls": 0});
    let imported = engine.snapshots().import_state(&doc, Default::default()).await.unwrap();
    assert_eq!(imported.outcome.label, "done · 1 call rejected");
    assert_eq!(engine.runs().get_run(&imported.id).await.unwrap().outcome, imported.outcome);
}
