//! State export and import: round trips, continuation, and strict refusals.

use runlens_engine::model::{DecisionRequest, FollowUp, RunStatus};
use runlens_engine::{EngineError, ImportOptions};
use serde_json::{json, Value};

use crate::support::*;

/// The document with the run id (and what embeds it) blanked out.
fn normalized(doc: &Value, id: &str) -> String {
    doc.to_string().replace(id, "RUN")
}

#[tokio::test]
async fn export_import_export_is_lossless_apart_from_ids() {
    let (engine, _dir) = engine().await;
    let run = run_to_end(
        &engine,
        scripted(json!([
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "2+2"}},
                        {"name": "big_result", "arguments": {"chars": 600000}}]},
        {"text": "{\"ok\": true}"}])),
    )
    .await;
    let first = engine.export_document(&run.id).await.unwrap();
    assert_eq!(first["$schemaVersion"], "runlens.run-state.v1");
    let imported = engine.import_state(&first, ImportOptions::default()).await.unwrap();
    assert_ne!(imported.id, run.id);
    let second = engine.export_document(&imported.id).await.unwrap();
    assert_eq!(normalized(&first, &run.id), normalized(&second, &imported.id));
}

#[tokio::test]
async fn an_imported_run_can_be_followed_up_or_approved() {
    let (engine, _dir) = engine().await;
    let done = run_to_end(&engine, scripted(json!([{"text": "first"}, {"text": "second"}]))).await;
    let doc = serde_json::to_value(engine.export_state(&done.id).await.unwrap()).unwrap();
    let copy = engine.import_state(&doc, ImportOptions::default()).await.unwrap();
    engine.follow_up(&copy.id, FollowUp { message: "again".into(), ..Default::default() }).await.unwrap();
    let copy = wait_for_status(&engine, &copy.id, RunStatus::Done).await;
    assert_eq!(copy.result, Some(json!("second")));

    let email = json!({"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}});
    let (paused, _) = engine.create_run(scripted(json!([{"tool_calls": [email]}, {"text": "sent"}]))).await.unwrap();
    let paused = engine.wait_until_settled(&paused.id, SETTLE).await.unwrap();
    let doc = serde_json::to_value(engine.export_state(&paused.id).await.unwrap()).unwrap();
    let copy = engine.import_state(&doc, ImportOptions::default()).await.unwrap();
    assert_eq!(copy.status, RunStatus::Paused);
    let call = copy.interruptions[0].call_id.clone();
    engine.approve(&copy.id, &call, DecisionRequest::default(), "web").await.unwrap();
    let copy = wait_for_status(&engine, &copy.id, RunStatus::Done).await;
    assert_eq!(copy.result, Some(json!("sent")));
    assert_eq!(engine.get_run(&paused.id).await.unwrap().status, RunStatus::Paused, "the original still waits");
}

#[tokio::test]
async fn bad_documents_are_refused_whole() {
    let (engine, _dir) = engine().await;
    let run = run_to_end(
        &engine,
        scripted(json!([
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}]}, {"text": "2"}])),
    )
    .await;
    let good = engine.export_document(&run.id).await.unwrap();
    let mutate = |f: &dyn Fn(&mut Value)| {
        let mut d = good.clone();
        f(&mut d);
        d
    };
    let cases: Vec<(Value, &str)> = vec![
        (mutate(&|d| d["$schemaVersion"] = json!("runlens.run-state.v9")), "unsupported $schemaVersion"),
        (
            mutate(&|d| {
                d.as_object_mut().unwrap().remove("$schemaVersion");
            }),
            "missing field `$schemaVersion`",
        ),
        (
            mutate(&|d| {
                d["run"].as_object_mut().unwrap().remove("max_turns");
            }),
            "missing field `run.max_turns`",
        ),
        (
            mutate(&|d| {
                d.as_object_mut().unwrap().remove("steps");
            }),
            "missing field `steps`",
        ),
        (mutate(&|d| d["messages"][2]["data"]["id"] = json!("call_ghost")), "dangling reference"),
        (mutate(&|d| d["run"]["tools"] = json!(["teleport"])), "unknown tool `teleport`"),
        (mutate(&|d| d["run"]["status"] = json!("paused")), "awaiting approval"),
        (mutate(&|d| d["steps"][1]["index"] = json!(7)), "steps[1]"),
        (mutate(&|d| d["messages"][1]["seq"] = json!(5)), "messages[1]"),
        (mutate(&|d| d["extra"] = json!(1)), "unknown field"),
    ];
    for (doc, expected) in cases {
        match engine.import_state(&doc, ImportOptions::default()).await {
            Err(EngineError::Invalid(m)) => assert!(m.contains(expected), "{m} / {expected}"),
            other => panic!("expected Invalid({expected}), got {other:?}"),
        }
    }
    let runs = engine.list_runs(&Default::default()).await.unwrap().runs;
    assert_eq!(runs.len(), 1, "no partial import");
    let keep = ImportOptions { keep_id: true, ..Default::default() };
    assert!(matches!(engine.import_state(&good, keep).await, Err(EngineError::Conflict(_))));
}

#[tokio::test]
async fn a_20_turn_state_is_small_and_linear() {
    let (engine, _dir) = engine().await;
    let mut sizes = Vec::new();
    for turns in [10usize, 20] {
        let mut script: Vec<Value> = (0..turns - 1)
            .map(|i| json!({"tool_calls": [{"name": "calculator", "arguments": {"expression": format!("{i} * 3")}}]}))
            .collect();
        script.push(json!({"text": "done"}));
        let mut req = scripted(json!(script));
        req.max_turns = Some(turns as u32);
        let run = run_to_end(&engine, req).await;
        sizes.push(engine.export_document(&run.id).await.unwrap().to_string().len());
        // Full documents import too.
        let full = serde_json::to_value(engine.export_state(&run.id).await.unwrap()).unwrap();
        engine.import_state(&full, ImportOptions::default()).await.unwrap();
    }
    println!("exported state: 10 turns {} bytes, 20 turns {} bytes", sizes[0], sizes[1]);
    assert!(sizes[1] <= 20 * 1024, "20-turn state is {} bytes", sizes[1]);
    let per_turn = (sizes[1] - sizes[0]) / 10;
    assert!(sizes[1] < sizes[0] + 12 * per_turn, "grows linearly: {sizes:?}");
}
