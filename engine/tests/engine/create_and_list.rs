//! Creating runs (validation, idempotent ids) and listing them (filters, keyset pages).

use std::collections::BTreeMap;

use runlens_engine::model::{CreateRun, RunFilter, RunStatus};
use runlens_engine::EngineError;
use serde_json::json;

use crate::support::*;

fn prompt(p: &str) -> CreateRun {
    CreateRun { initial_prompt: p.into(), ..CreateRun::default() }
}

#[tokio::test]
async fn a_client_id_is_idempotent() {
    let (engine, _dir) = engine().await;
    let mut req = prompt("What is 1 + 1?");
    req.id = Some("order-42".into());
    let (first, created) = engine.runs().create_run(req.clone()).await.unwrap();
    assert!(created);
    req.initial_prompt = "something else".into();
    let (again, created) = engine.runs().create_run(req).await.unwrap();
    assert!(!created);
    assert_eq!(again.id, "order-42");
    assert_eq!(again.initial_prompt, first.initial_prompt);
    let page = engine.runs().list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(page.runs.len(), 1);
}

#[tokio::test]
async fn an_invalid_request_is_refused_even_when_its_id_exists() {
    let (engine, _dir) = engine().await;
    let mut req = prompt("What is 1 + 1?");
    req.id = Some("order-43".into());
    engine.runs().create_run(req.clone()).await.unwrap();
    req.max_turns = Some(0);
    let err = engine.runs().create_run(req).await.unwrap_err();
    assert!(matches!(&err, EngineError::Invalid(m) if m.contains("max_turns")), "{err:?}");
}

#[tokio::test]
async fn bad_requests_are_rejected_before_anything_is_stored() {
    let (engine, _dir) = engine().await;
    let cases = [
        (prompt("  "), "initial_prompt must not be empty"),
        (CreateRun { tools: Some(vec!["nope".into()]), ..prompt("x") }, "unknown tool `nope`"),
        (CreateRun { model: Some("gpt-9".into()), ..prompt("x") }, "unknown model `gpt-9`"),
        (CreateRun { max_turns: Some(0), ..prompt("x") }, "max_turns"),
        (CreateRun { context: Some(json!([1])), ..prompt("x") }, "context must be a JSON object"),
        (CreateRun { model_settings: Some(json!({"script": [{}]})), ..prompt("x") }, "script[0]"),
        (CreateRun { id: Some("bad id".into()), ..prompt("x") }, "id must be"),
    ];
    for (req, expected) in cases {
        match engine.runs().create_run(req).await {
            Err(EngineError::Invalid(msg)) => assert!(msg.contains(expected), "{msg} / {expected}"),
            other => panic!("expected Invalid({expected}), got {other:?}"),
        }
    }
    assert!(engine.runs().list_runs(&RunFilter::default()).await.unwrap().runs.is_empty());
}

#[tokio::test]
async fn lists_filter_by_status_tag_and_text_and_page_newest_first() {
    let (engine, _dir) = engine().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let mut req = prompt(&format!("What is {i} + 1?"));
        req.tags = BTreeMap::from([("batch".into(), if i % 2 == 0 { "even" } else { "odd" }.into())]);
        let run = run_to_end(&engine, req).await;
        ids.push(run.id);
    }
    let failing = run_to_end(&engine, scripted(json!([{"error": "down"}]))).await;

    let all = engine.runs().list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(all.runs.len(), 6);
    assert_eq!(all.runs[0].id, failing.id, "newest first");

    let failed = RunFilter { status: Some(RunStatus::Failed), ..RunFilter::default() };
    assert_eq!(engine.runs().list_runs(&failed).await.unwrap().runs.len(), 1);

    let even = RunFilter { tag: Some("batch:even".into()), ..RunFilter::default() };
    let even_ids: Vec<String> = engine.runs().list_runs(&even).await.unwrap().runs.into_iter().map(|r| r.id).collect();
    assert_eq!(even_ids, [ids[4].clone(), ids[2].clone(), ids[0].clone()]);

    let text = RunFilter { q: Some("3 + 1".into()), ..RunFilter::default() };
    assert_eq!(engine.runs().list_runs(&text).await.unwrap().runs[0].id, ids[3]);

    // Keyset pages of 2 visit every run exactly once.
    let mut seen = Vec::new();
    let mut filter = RunFilter { limit: Some(2), ..RunFilter::default() };
    loop {
        let page = engine.runs().list_runs(&filter).await.unwrap();
        seen.extend(page.runs.into_iter().map(|r| r.id));
        match page.next_cursor {
            Some(c) => filter.cursor = Some(c),
            None => break,
        }
    }
    let listed: Vec<String> = all.runs.into_iter().map(|r| r.id).collect();
    assert_eq!(seen, listed);

    let bad = RunFilter { cursor: Some("garbage".into()), ..RunFilter::default() };
    assert!(matches!(engine.runs().list_runs(&bad).await, Err(EngineError::Invalid(_))));
}

#[tokio::test]
async fn illegal_transitions_are_errors() {
    let (engine, _dir) = engine().await;
    let run = run_to_end(&engine, prompt("What is 2 * 2?")).await;
    let store = engine.store();
    let err = store.transition(&run.id, RunStatus::Done, RunStatus::Paused, Default::default()).await.unwrap_err();
    assert!(err.to_string().contains("a done run cannot become paused"), "{err}");
    // A stale expectation (pending → running, while it is done) loses the
    // compare-and-set instead of overwriting.
    let err = store.transition(&run.id, RunStatus::Pending, RunStatus::Running, Default::default()).await.unwrap_err();
    assert!(matches!(err, EngineError::Conflict(_)), "{err}");
    assert_eq!(engine.runs().get_run(&run.id).await.unwrap().status, RunStatus::Done);
}

/// Ids that would name another endpoint or a path step are refused, at
/// creation and when an import keeps the document's id.
#[tokio::test]
async fn reserved_ids_are_refused() {
    let (engine, _dir) = engine().await;
    for id in ["import", ".", ".."] {
        let req = CreateRun { id: Some(id.into()), ..scripted(json!([{"text": "hi"}])) };
        match engine.runs().create_run(req).await {
            Err(EngineError::Invalid(m)) => assert!(m.contains("reserved"), "{id}: {m}"),
            other => panic!("{id}: expected Invalid, got {other:?}"),
        }
    }
    let run = run_to_end(&engine, scripted(json!([{"text": "hi"}]))).await;
    let mut doc = engine.snapshots().export_document(&run.id).await.unwrap();
    doc["run"]["id"] = json!("import");
    let keep = runlens_engine::ImportOptions { keep_id: true, ..Default::default() };
    match engine.snapshots().import_state(&doc, keep).await {
        Err(EngineError::Invalid(m)) => assert!(m.contains("reserved"), "{m}"),
        other => panic!("expected Invalid, got {other:?}"),
    }
}
