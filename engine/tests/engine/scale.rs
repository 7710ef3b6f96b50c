//! Huge traces and long run lists: pages of steps, one tool call by id,
//! the generated trace fixture, index use of every runs-list filter, and
//! prices with costs.

use std::collections::BTreeMap;

use runlens_engine::cost::PriceInput;
use runlens_engine::model::{OutcomeFilter, RunFilter, RunStatus};
use runlens_engine::store::SqliteStore;
use runlens_engine::EngineError;

use crate::support::{engine, sqlite_url};

#[tokio::test]
async fn steps_come_in_pages_through_the_run_key() {
    let (engine, _dir) = engine().await;
    let run = engine.runs().generate_trace(25).await.unwrap();
    assert_eq!((run.status, run.step_count), (RunStatus::Done, 25));
    assert_eq!(run.tags.get("fixture").map(String::as_str), Some("trace"));
    let page = engine.traces().steps_page(&run.id, 0, 10).await.unwrap();
    assert_eq!(page.steps.iter().map(|s| s.index).collect::<Vec<_>>(), (0..10).collect::<Vec<_>>());
    assert_eq!(page.next_from, Some(10));
    assert!(page.steps.iter().take(9).all(|s| s.tool_calls.len() == 1));
    let last = engine.traces().steps_page(&run.id, 20, 10).await.unwrap();
    assert_eq!((last.steps.len(), last.next_from), (5, None));
    let exact = engine.traces().steps_page(&run.id, 15, 10).await.unwrap();
    assert_eq!((exact.steps.len(), exact.next_from), (10, None), "no empty page after an exact fit");
    let all = engine.runs().steps(&run.id).await.unwrap();
    assert_eq!(all.len(), 25);
    assert_eq!(all[..10], page.steps[..]);

    let call = &all[17].tool_calls[0];
    let got = engine.traces().tool_call(&run.id, &call.id).await.unwrap();
    assert_eq!(&got, call);
    assert_eq!(got.arguments["expression"], "17 + 1");
    assert!(matches!(engine.traces().tool_call(&run.id, "nope").await, Err(EngineError::NotFound(_))));
    assert!(matches!(engine.traces().steps_page("nope", 0, 10).await, Err(EngineError::NotFound(_))));
}

#[tokio::test]
async fn messages_come_in_pages_and_as_a_tail() {
    let (engine, _dir) = engine().await;
    let run = engine.runs().generate_trace(25).await.unwrap();
    let all = engine.runs().messages(&run.id).await.unwrap();
    assert!(all.len() > 40, "a human message, then an agent message and a result per step");
    let seqs = |ms: &[runlens_engine::model::Message]| ms.iter().map(|m| m.seq).collect::<Vec<_>>();

    let (first, next) = engine.traces().messages_page(&run.id, 0, 10).await.unwrap();
    assert_eq!((seqs(&first), next), ((0..10).collect(), Some(10)));
    let (rest, next) = engine.traces().messages_page(&run.id, 10, 10_000).await.unwrap();
    assert_eq!((rest.len() + 10, next), (all.len(), None));
    assert_eq!(rest, all[10..].to_vec(), "a page is exactly that part of the transcript");
    let (exact, next) = engine.traces().messages_page(&run.id, 0, all.len() as u32).await.unwrap();
    assert_eq!((exact.len(), next), (all.len(), None), "a page that ends with the transcript says no more follow");

    let (tail, total) = engine.traces().messages_tail(&run.id, 5).await.unwrap();
    assert_eq!(total, all.len() as u64);
    assert_eq!(tail, all[all.len() - 5..].to_vec(), "the last five, oldest first");
    let (short, _) = engine.traces().messages_tail(&run.id, 1000).await.unwrap();
    assert_eq!(short.len(), all.len());
    assert!(matches!(engine.traces().messages_tail("nope", 5).await, Err(EngineError::NotFound(_))));
    assert!(matches!(engine.traces().messages_page("nope", 0, 5).await, Err(EngineError::NotFound(_))));
}

#[tokio::test]
async fn every_runs_list_filter_reads_an_index_in_order() {
    let dir = crate::support::test_db();
    let store = SqliteStore::open(&sqlite_url(&dir)).await.unwrap();
    let filters = [
        ("none", RunFilter::default()),
        ("status", RunFilter { status: Some(RunStatus::Failed), ..RunFilter::default() }),
        ("tag", RunFilter { tag: Some("env:prod".into()), ..RunFilter::default() }),
        ("agent", RunFilter { agent_id: Some("a1".into()), ..RunFilter::default() }),
        ("outcome", RunFilter { outcome: Some(OutcomeFilter::Rejected), ..RunFilter::default() }),
        (
            "status+outcome",
            RunFilter { status: Some(RunStatus::Done), outcome: Some(OutcomeFilter::Clean), ..RunFilter::default() },
        ),
        (
            "status+cursor",
            RunFilter { status: Some(RunStatus::Done), cursor: Some("1700000000000_x".into()), ..RunFilter::default() },
        ),
        (
            "tag+cursor",
            RunFilter { tag: Some("env:prod".into()), cursor: Some("1700000000000_x".into()), ..RunFilter::default() },
        ),
    ];
    // And the same within one project, as the server asks.
    let in_project = filters.clone().map(|(name, f)| (name, RunFilter { project: Some("p".into()), ..f }));
    for (name, filter) in filters.into_iter().chain(in_project) {
        let lines = store.explain_list_runs(&filter).await.unwrap();
        let plan = lines.join(" | ");
        assert!(!plan.contains("TEMP B-TREE"), "{name} sorts instead of reading in order: {plan}");
        for line in lines.iter().filter(|l| !l.starts_with("CORRELATED SCALAR SUBQUERY")) {
            assert!(line.contains("INDEX"), "{name} reads a table without an index: {plan}");
        }
        // Each run's outcome counts its rejected and failed calls from the
        // partial indexes of only such calls: one probe, however long the run.
        for line in lines.iter().filter(|l| l.contains(" oc ")) {
            assert!(
                line.contains("tool_calls_rejected (run_id=? AND status=?)")
                    || line.contains("tool_calls_failed (run_id=? AND status=?)"),
                "{name} counts a run's calls without the partial indexes: {plan}"
            );
        }
        assert!(plan.contains("tool_calls_rejected") && plan.contains("tool_calls_failed"), "{name}: {plan}");
    }
}

#[tokio::test]
async fn tag_filters_page_newest_first() {
    let (engine, _dir) = engine().await;
    let mut ids = Vec::new();
    for i in 0..7 {
        let mut req = crate::support::scripted(serde_json::json!([{"text": "hi"}]));
        req.tags = BTreeMap::from([("env".to_owned(), if i % 2 == 0 { "prod" } else { "dev" }.to_owned())]);
        ids.push(engine.runs().create_run(req).await.unwrap().0.id);
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let f = RunFilter { tag: Some("env:prod".into()), limit: Some(2), cursor, ..RunFilter::default() };
        let page = engine.runs().list_runs(&f).await.unwrap();
        seen.extend(page.runs.iter().map(|r| r.id.clone()));
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    let expected: Vec<String> = ids.iter().step_by(2).rev().cloned().collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn prices_are_stored_and_price_runs_and_steps() {
    let (engine, _dir) = engine().await;
    let pricing = engine.traces().pricing("default").await.unwrap();
    assert_eq!(pricing.price("builtin").map(|p| p.input), Some(0.0), "builtin is free by default");
    let run = engine.runs().generate_trace(3).await.unwrap();
    assert_eq!(engine.traces().run_cost(&run).await.unwrap(), Some(0.0));

    let set = engine
        .traces()
        .set_price("default", "builtin", PriceInput { input: 1.0, output: 2.0, ..PriceInput::default() })
        .await
        .unwrap();
    assert_eq!((set.cache_read, set.reasoning), (1.0, 2.0));
    assert!(set.updated_at.is_some());
    let expected = (run.usage.input_tokens as f64 + 2.0 * run.usage.output_tokens as f64) / 1e6;
    let cost = engine.traces().run_cost(&run).await.unwrap().unwrap();
    assert!((cost - expected).abs() < 1e-12, "{cost} vs {expected}");
    let pricing = engine.traces().pricing("default").await.unwrap();
    let steps = engine.runs().steps(&run.id).await.unwrap();
    let sum: f64 = steps.iter().map(|s| pricing.step_cost_usd(&run.model, s).unwrap()).sum();
    assert!((sum - cost).abs() < 1e-12, "steps add up to the run");

    let bad = engine.traces().set_price("default", "x", PriceInput { input: -1.0, ..PriceInput::default() }).await;
    assert!(matches!(bad, Err(EngineError::Invalid(_))));
    engine.traces().delete_price("default", "builtin").await.unwrap();
    assert_eq!(engine.traces().run_cost(&run).await.unwrap(), None, "no price, no cost");
    assert!(matches!(engine.traces().delete_price("default", "builtin").await, Err(EngineError::NotFound(_))));
}

/// A database made before the outline indexes (migration 0006) keeps every
/// step's recorded model: the migration copies it out of the stored request,
/// and the outline, which reads only the new column, shows it.
#[tokio::test]
async fn the_outline_migration_keeps_older_steps_models() {
    use sqlx::migrate::Migrator;
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
    use std::str::FromStr;

    let dir = crate::support::test_db();
    let url = sqlite_url(&dir);
    let all = sqlx::migrate!("../migrations/sqlite");
    let before = Migrator { migrations: all.migrations.iter().filter(|m| m.version < 6).cloned().collect(), ..all };
    let options = SqliteConnectOptions::from_str(&url).unwrap().create_if_missing(true);
    let pool = SqlitePoolOptions::new().max_connections(1).connect_with(options).await.unwrap();
    before.run(&pool).await.unwrap();
    sqlx::query(
        "INSERT INTO runs (id, name, status, model, model_settings, initial_prompt, tools, tags, context,
            max_turns, created_at, updated_at) VALUES ('old', 'old', 'done', 'm-1', '{}', 'hi', '[]', '{}', 'null', 5, 1, 1)",
    )
    .execute(&pool)
    .await
    .unwrap();
    for (idx, request) in [(0, r#"{"messages":1,"model":"m-1"}"#), (1, r#"{"messages":3}"#), (2, r#"{"model":"m-2"}"#)]
    {
        sqlx::query(
            "INSERT INTO steps (run_id, idx, kind, status, request, response, input_tokens, output_tokens,
                cache_read_tokens, reasoning_tokens, total_tokens, requests, started_at)
             VALUES ('old', ?, 'model', 'completed', ?, '{}', 1, 2, 0, 0, 3, 1, 1000)",
        )
        .bind(idx)
        .bind(request)
        .execute(&pool)
        .await
        .unwrap();
    }
    pool.close().await;

    let store = SqliteStore::open(&url).await.unwrap();
    let outline = runlens_engine::store::StepStore::step_outline(&store, "old").await.unwrap();
    let models: Vec<_> = outline.iter().map(|s| s.model.as_deref()).collect();
    assert_eq!(models, [Some("m-1"), None, Some("m-2")]);
    assert_eq!(outline[2].usage.total_tokens, 3);
}

/// A generated trace longer than a request's 1,000 turns (its run keeps
/// its 1,500-turn script and `max_turns` 1,500) is exported, imported and
/// forked from a late step.
#[tokio::test]
async fn a_generated_trace_over_1000_turns_is_imported_and_forked_back() {
    use runlens_engine::model::ForkFromStep;
    use runlens_engine::ImportOptions;
    let (engine, _dir) = engine().await;
    let run = engine.runs().generate_trace(1_500).await.unwrap();
    assert_eq!((run.status, run.step_count, run.max_turns), (RunStatus::Done, 1_500, 1_500));
    let doc = engine.snapshots().export_document(&run.id).await.unwrap();
    let copy = engine.snapshots().import_state(&doc, ImportOptions::default()).await.unwrap();
    assert_eq!((copy.status, copy.step_count, copy.max_turns), (RunStatus::Done, 1_500, 1_500));
    assert_eq!(engine.runs().steps(&copy.id).await.unwrap(), {
        let mut steps = engine.runs().steps(&run.id).await.unwrap();
        for s in &mut steps {
            s.run_id.clone_from(&copy.id);
            s.id = runlens_engine::model::Step::id_for(&copy.id, s.index);
            s.tool_calls.iter_mut().for_each(|c| c.run_id.clone_from(&copy.id));
        }
        steps
    });
    // Forked from step 1,400: the script's turns after it play again.
    let fork = engine
        .conversation()
        .fork_from_step(&copy.id, ForkFromStep { from_step: 1_400, ..ForkFromStep::default() }, None)
        .await
        .unwrap();
    assert_eq!(fork.forked_from_step, Some(1_400));
    let done = crate::support::wait_for_status(&engine, &fork.id, RunStatus::Done).await;
    assert_eq!((done.status, done.step_count), (RunStatus::Done, 1_500), "{:?}", done.failure_reason);
    // A document asking for more turns than it has steps (past 1,000) is refused.
    let mut bigger = doc.clone();
    bigger["run"]["max_turns"] = serde_json::json!(1_501);
    let err = engine.snapshots().import_state(&bigger, ImportOptions::default()).await.unwrap_err();
    assert!(err.to_string().contains("run.max_turns must be between 1 and 1500"), "{err}");
}

/// Past the steps the loop makes, the fixture is written directly after a
/// two-step run the loop made: the same shapes, every step its own.
#[tokio::test]
async fn a_fixture_past_the_loop_is_written_as_the_loop_writes_one() {
    use runlens_engine::LOOP_STEPS;

    let (engine, _dir) = engine().await;
    let steps = LOOP_STEPS + 3;
    let run = engine.runs().generate_trace(steps).await.unwrap();
    assert_eq!((run.status, run.step_count, run.max_turns), (RunStatus::Done, steps, steps));
    assert_eq!(run.name, format!("Generated trace ({steps} steps)"));
    assert_eq!(run.tags.get("fixture").map(String::as_str), Some("trace"));
    let made = engine.runs().generate_trace(3).await.unwrap();
    let looped = engine.runs().steps(&made.id).await.unwrap();

    let page = engine.traces().steps_page(&run.id, 0, 2).await.unwrap();
    let tail = engine.traces().steps_page(&run.id, steps - 2, 2).await.unwrap();
    for (written, like) in [(&page.steps[0], &looped[0]), (&page.steps[1], &looped[1]), (&tail.steps[1], &looped[2])] {
        assert_eq!((&written.kind, written.status), (&like.kind, like.status));
        assert_eq!(written.tool_calls.len(), like.tool_calls.len());
        assert_eq!(written.usage.requests, like.usage.requests);
    }
    let step = &tail.steps[0];
    let i = steps - 2;
    assert_eq!(step.index, i);
    assert_eq!(step.response.text(), Some(format!("Step {i}: adding one to {i}.").as_str()));
    let call = &step.tool_calls[0];
    assert_eq!(
        (call.id.as_str(), call.run_id.as_str(), call.step_index),
        (format!("call_{i}_0").as_str(), run.id.as_str(), i)
    );
    assert_eq!(call.arguments["expression"], format!("{i} + 1"));
    assert_eq!(call.result.as_ref().unwrap()["value"], i + 1);
    assert_eq!(engine.traces().tool_call(&run.id, &call.id).await.unwrap(), *call);
    assert_eq!(tail.steps[1].response.text(), Some(format!("Done after {steps} steps.").as_str()));
    assert!(step.completed_at.unwrap() > step.started_at && tail.steps[1].started_at >= step.completed_at.unwrap());

    // The transcript: the prompt, then the model's message and the call's
    // result per step, then the answer — message for message like the loop's.
    let (last, total) = engine.traces().messages_tail(&run.id, 3).await.unwrap();
    assert_eq!(total, 2 * u64::from(steps));
    let kinds: Vec<&str> = last.iter().map(|m| m.body.kind()).collect();
    let looped_messages = engine.runs().messages(&made.id).await.unwrap();
    let like: Vec<&str> = looped_messages[looped_messages.len() - 3..].iter().map(|m| m.body.kind()).collect();
    assert_eq!(kinds, like);
    assert_eq!(last.iter().map(|m| m.step_index).collect::<Vec<_>>(), [Some(i), Some(i), Some(i + 1)]);
    let outline = engine.traces().step_outline(&run.id).await.unwrap().1;
    assert_eq!(outline.len(), steps as usize);
    let tokens: u64 = outline.iter().map(|s| s.usage.total_tokens).sum();
    assert_eq!(run.usage.total_tokens, tokens, "the run's usage is its steps'");
}
