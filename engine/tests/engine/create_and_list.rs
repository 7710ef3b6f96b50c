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

/// Sessions: a run's `session_id` and `user_id` are kept, listed by the
/// runs list's filters (newest first, paged like any list), kept by a fork,
/// and bounded; another project's session is absent from this one's list.
#[tokio::test]
async fn runs_of_a_session_and_of_an_end_user_are_listed_together() {
    let (engine, _dir) = engine().await;
    let in_session = |p: &str, session: &str, user: &str| CreateRun {
        session_id: Some(session.into()),
        user_id: Some(user.into()),
        ..prompt(p)
    };
    let (first, _) = engine.runs().create_run(in_session("one", "chat-1", "ada")).await.unwrap();
    assert_eq!((first.session_id.as_deref(), first.end_user.as_deref()), (Some("chat-1"), Some("ada")));
    engine.runs().create_run(in_session("two", "chat-2", "ada")).await.unwrap();
    engine.runs().create_run(in_session("three", "chat-1", "bob")).await.unwrap();
    engine.runs().create_run(prompt("no session")).await.unwrap();
    engine.runs().create_run_in(in_session("other project", "chat-1", "ada"), "other", None).await.unwrap();

    let list = |f: RunFilter| {
        let engine = engine.clone();
        async move {
            let f = RunFilter { project: Some("default".into()), ..f };
            let page = engine.runs().list_runs(&f).await.unwrap();
            page.runs.iter().map(|r| r.initial_prompt.clone()).collect::<Vec<_>>()
        }
    };
    assert_eq!(list(RunFilter { session_id: Some("chat-1".into()), ..RunFilter::default() }).await, ["three", "one"]);
    assert_eq!(list(RunFilter { user: Some("ada".into()), ..RunFilter::default() }).await, ["two", "one"]);
    let both = RunFilter { session_id: Some("chat-1".into()), user: Some("bob".into()), ..RunFilter::default() };
    assert_eq!(list(both).await, ["three"]);
    let paged = RunFilter { session_id: Some("chat-1".into()), limit: Some(1), ..RunFilter::default() };
    let page = engine.runs().list_runs(&RunFilter { project: Some("default".into()), ..paged.clone() }).await.unwrap();
    assert_eq!(page.runs.len(), 1);
    let next = RunFilter { cursor: page.next_cursor.clone(), ..paged };
    assert_eq!(list(next).await, ["one"]);
    assert!(list(RunFilter { session_id: Some("none".into()), ..RunFilter::default() }).await.is_empty());

    // The session: its runs oldest first, with their totals; another
    // project's runs of the same id are that project's session.
    let runs = engine.runs().list_runs(&RunFilter { all: Some(true), ..RunFilter::default() }).await.unwrap().runs;
    for r in &runs {
        wait_for_status(&engine, &r.id, RunStatus::Done).await;
    }
    let session = engine.runs().session("default", "chat-1").await.unwrap();
    let prompts: Vec<&str> = session.runs.iter().map(|r| r.initial_prompt.as_str()).collect();
    assert_eq!(prompts, ["one", "three"]);
    assert_eq!((session.totals.runs, session.truncated), (2, false));
    assert_eq!(session.totals.end_users, ["ada", "bob"]);
    assert_eq!(session.totals.statuses.get("done"), Some(&2));
    let tokens: u64 = session.runs.iter().map(|r| r.usage.total_tokens).sum();
    assert!(tokens > 0);
    assert_eq!(session.totals.usage.total_tokens, tokens);
    assert_eq!(session.costs_usd.len(), 2);
    assert!(session.totals.duration_ms >= 0 && session.totals.first_at <= session.totals.last_at);
    assert_eq!(engine.runs().session("other", "chat-1").await.unwrap().totals.runs, 1);
    assert!(engine.runs().session("default", "no-such-session").await.unwrap().runs.is_empty());
    let err = engine.runs().session("default", "bad\u{0}id").await.unwrap_err();
    assert!(matches!(err, EngineError::Invalid(_)), "{err:?}");

    // A fork stays in its run's session.
    let done = wait_for_status(&engine, &first.id, RunStatus::Done).await;
    let req = runlens_engine::model::ForkFromStep { from_step: 0, ..Default::default() };
    let fork = engine.conversation().fork_from_step(&done.id, req, None).await.unwrap();
    assert_eq!((fork.session_id.as_deref(), fork.end_user.as_deref()), (Some("chat-1"), Some("ada")));

    // Bounds: 1-128 characters, no control characters; nothing is stored.
    for (session, user) in [("", "ada"), (&*"s".repeat(129), "ada"), ("chat\n1", "ada"), ("chat-1", " ")] {
        let err = engine.runs().create_run(in_session("bad", session, user)).await.unwrap_err();
        assert!(matches!(&err, EngineError::Invalid(m) if m.contains("_id must be 1-128")), "{err:?}");
    }
    assert_eq!(list(RunFilter::default()).await.len(), 5, "4 runs and the fork, nothing more");
    let long = RunFilter { session_id: Some("s".repeat(5_000)), ..RunFilter::default() };
    assert!(long.check_bounds().is_err());
}
