//! Comparison groups: a batch starts one run configuration on several real
//! registered models (the built-in one and two models of an
//! OpenAI-compatible provider served by the in-process mock) as one group,
//! in the order of `models`; the group reads back every member with its
//! outcome, usage and cost; a bad batch creates nothing; forks and imports
//! are in no group. A batch is stored in one write of the store, which is
//! all or nothing: a taken or repeated id, or an error midway, stores none
//! of its runs, also among concurrent batches (on SQLite, several share one
//! commit).

use std::collections::BTreeMap;
use std::sync::Arc;

use runlens_engine::cost::PriceInput;
use runlens_engine::llm::{ApiKey, ProviderConfig};
use runlens_engine::model::{BatchRuns, CreateRun, Message, MessageBody, Run, RunFilter, RunStatus, MAX_BATCH_MODELS};
use runlens_engine::store::Store;
use runlens_engine::RunlensConfig;
use runlens_engine::{Engine, EngineConfig, EngineError, ImportOptions};
use serde_json::{json, Value};

use crate::openai::mock::{Mock, Reply};
use crate::probe::{Faults, Probe};
use crate::support::{by, db_url, open_store, sql_rows, test_db, test_tools, TestDb, SETTLE};

const MODELS: [&str; 3] = ["builtin", "mock/gpt-a", "mock/gpt-b"];

/// A whole (not streamed) answer of `text` using 5 input and 2 output tokens.
fn answer(text: &str) -> Reply {
    let body = json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}});
    Reply::Json { status: 200, headers: vec![], body }
}

/// An engine whose models are `builtin` and the mock's `gpt-a` and `gpt-b`
/// (as `mock/gpt-a`, `mock/gpt-b`).
async fn engine_with(mock: &Mock) -> (Engine, TestDb) {
    let db = test_db();
    let store = open_store(&db_url(&db)).await;
    (engine_on(mock, store), db)
}

/// [`engine_with`] on `store`.
fn engine_on(mock: &Mock, store: Arc<dyn Store>) -> Engine {
    let mut provider = ProviderConfig::new(&mock.base_url, &["gpt-a", "gpt-b"]);
    provider.api_key = Some(ApiKey::new("sk-test-0123456789abcdef"));
    provider.stream = false;
    provider.backoff_initial_ms = 1;
    provider.backoff_max_ms = 4;
    let mut config = RunlensConfig::default();
    config.providers.insert("mock".into(), provider);
    let models = config.registry(|_| None).unwrap();
    Engine::with_parts(store, test_tools(), models, EngineConfig::default())
}

fn batch(models: &[&str]) -> BatchRuns {
    let run = CreateRun {
        initial_prompt: "What is 2+2?".into(),
        tools: Some(vec!["calculator".into()]),
        tags: BTreeMap::from([("suite".to_string(), "groups".to_string())]),
        ..CreateRun::default()
    };
    BatchRuns { run, models: models.iter().map(|m| m.to_string()).collect() }
}

/// Every run of project `default`, children included.
async fn run_count(engine: &Engine) -> usize {
    let filter =
        RunFilter { project: Some("default".into()), all: Some(true), limit: Some(200), ..RunFilter::default() };
    engine.runs().list_runs(&filter).await.unwrap().runs.len()
}

#[tokio::test]
async fn a_batch_starts_one_run_per_model_as_one_group() {
    let mock = Mock::start(vec![answer("It is 4."), answer("It is 4.")]).await;
    let (engine, _db) = engine_with(&mock).await;
    let ada = by("ada");
    let created = engine.comparisons().create_batch("default", batch(&MODELS), Some(&ada)).await.unwrap();

    assert_eq!(created.runs.iter().map(|r| r.model.as_str()).collect::<Vec<_>>(), MODELS);
    for (run, model) in created.runs.iter().zip(MODELS) {
        assert_eq!(run.group_id.as_deref(), Some(created.group_id.as_str()));
        assert_eq!(run.name, format!("What is 2+2? · {model}"));
        assert_eq!((run.project.as_str(), run.created_by.as_ref()), ("default", Some(&ada)));
        assert_eq!((run.tools.clone(), run.tags["suite"].as_str()), (vec!["calculator".to_string()], "groups"));
    }
    let ids: Vec<&str> = created.runs.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids.iter().collect::<std::collections::HashSet<_>>().len(), 3, "three distinct runs");
    for id in &ids {
        let run = engine.runs().wait_until_settled(id, SETTLE).await.unwrap();
        assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
        assert_eq!(run.group_id.as_deref(), Some(created.group_id.as_str()), "stored with its group");
    }
    assert_eq!(mock.requests().len(), 2, "one request for each provider model");

    let price = PriceInput { input: 1_000.0, output: 2_000.0, ..PriceInput::default() };
    engine.traces().set_price("default", "mock/gpt-a", price).await.unwrap();
    let group = engine.comparisons().compare_group(&created.group_id).await.unwrap();
    assert_eq!((group.id.as_str(), group.project.as_str()), (created.group_id.as_str(), "default"));
    assert_eq!(group.created_at, created.runs[0].created_at);
    assert_eq!(group.members.iter().map(|m| m.run_id.as_str()).collect::<Vec<_>>(), ids, "every member, in order");
    assert_eq!(group.members.iter().map(|m| m.model.as_str()).collect::<Vec<_>>(), MODELS);
    for m in &group.members {
        assert_eq!(m.status, RunStatus::Done);
        assert!(m.step_count >= 1 && m.usage.total_tokens > 0, "{m:?}");
        assert!(m.result.is_some() && m.failure_reason.is_none(), "{m:?}");
        assert!(m.duration_ms.is_some(), "a finished run has a duration");
    }
    let (a, b) = (&group.members[1], &group.members[2]);
    assert_eq!((a.usage.input_tokens, a.usage.output_tokens), (5, 2));
    assert_eq!((a.result.clone(), b.result.clone()), (Some(json!("It is 4.")), Some(json!("It is 4."))));
    // 5 input tokens at $1,000 and 2 output tokens at $2,000 per million.
    let cost = a.cost_usd.expect("gpt-a has a price");
    assert!((cost - 0.009).abs() < 1e-9, "{cost}");
    assert_eq!(b.cost_usd, None, "gpt-b has no price");
}

#[tokio::test]
async fn a_bad_batch_creates_nothing() {
    let mock = Mock::start(vec![]).await;
    let (engine, _db) = engine_with(&mock).await;
    let nine: Vec<String> = (0..=MAX_BATCH_MODELS).map(|i| format!("m{i}")).collect();
    let nine: Vec<&str> = nine.iter().map(String::as_str).collect();
    let with = |change: fn(&mut BatchRuns)| {
        let mut b = batch(&MODELS);
        change(&mut b);
        b
    };
    let cases = [
        (batch(&nine), "at most 8".to_string()),
        (batch(&[]), "models must name 1 to 8 models".to_string()),
        (batch(&["builtin", "mock/gpt-a", "builtin"]), "models[2]: `builtin` is named twice".to_string()),
        (batch(&["builtin", "mock/gpt-c"]), "unknown model `mock/gpt-c` (models[1])".to_string()),
        (with(|b| b.run.id = Some("mine".into())), "id must be absent".to_string()),
        (with(|b| b.run.model = Some("builtin".into())), "model must be absent".to_string()),
        // Valid for the built-in model, not for the provider's.
        (
            with(|b| b.run.model_settings = Some(json!({"script": []}))),
            "context_window (for models[1], `mock/gpt-a`)".to_string(),
        ),
        // Checked as create-run checks it, before any run is stored.
        (with(|b| b.run.initial_prompt = " ".into()), "initial_prompt must not be empty".to_string()),
        (with(|b| b.run.tools = Some(vec!["no_such_tool".into()])), "no_such_tool".to_string()),
        (with(|b| b.run.name = Some("n".repeat(201))), "name".to_string()),
    ];
    for (bad, says) in cases {
        match engine.comparisons().create_batch("default", bad, None).await {
            Err(EngineError::Invalid(why)) => assert!(why.contains(&says), "{why:?} should say {says:?}"),
            other => panic!("{says}: {other:?}"),
        }
        assert_eq!(run_count(&engine).await, 0, "{says}: nothing is created");
    }
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn an_unknown_group_is_not_found() {
    let mock = Mock::start(vec![]).await;
    let (engine, _db) = engine_with(&mock).await;
    for id in ["0190aaaa-0000-7000-8000-000000000000", "", &"g".repeat(500)] {
        match engine.comparisons().compare_group(id).await {
            Err(EngineError::NotFound(what)) => assert!(what.starts_with("comparison group"), "{what}"),
            other => panic!("{other:?}"),
        }
    }
    // A run started alone is in no group.
    let (run, _) =
        engine.runs().create_run(CreateRun { initial_prompt: "Hi".into(), ..CreateRun::default() }).await.unwrap();
    assert_eq!(run.group_id, None);
    assert_eq!(engine.runs().get_run(&run.id).await.unwrap().group_id, None);
}

#[tokio::test]
async fn forks_and_imports_are_in_no_group() {
    let mock = Mock::start(vec![]).await;
    let (engine, _db) = engine_with(&mock).await;
    let created = engine.comparisons().create_batch("default", batch(&["builtin"]), None).await.unwrap();
    let member = engine.runs().wait_until_settled(&created.runs[0].id, SETTLE).await.unwrap();
    assert_eq!(member.group_id.as_deref(), Some(created.group_id.as_str()));

    let fork =
        engine.conversation().edit_message(&member.id, &format!("{}-m0", member.id), "What is 3+3?").await.unwrap();
    assert_eq!(fork.group_id, None);
    assert_eq!(engine.runs().get_run(&fork.id).await.unwrap().group_id, None);

    let mut doc: Value = engine.snapshots().export_document(&member.id).await.unwrap();
    assert!(doc["run"].get("group_id").is_none(), "group membership is not exported");
    doc["run"]["group_id"] = json!(created.group_id);
    let imported = engine.snapshots().import_state(&doc, ImportOptions::default()).await.unwrap();
    assert_eq!(imported.group_id, None, "an imported run joins no group");

    let group = engine.comparisons().compare_group(&created.group_id).await.unwrap();
    assert_eq!(group.members.iter().map(|m| m.run_id.as_str()).collect::<Vec<_>>(), [member.id.as_str()]);
}

/// Stored rows: runs, messages and run tags, in the whole database.
async fn row_counts(url: &str) -> [usize; 3] {
    let mut counts = [0; 3];
    for (count, table) in counts.iter_mut().zip(["runs", "messages", "run_tags"]) {
        let rows = sql_rows(url, &format!("SELECT CAST(COUNT(*) AS TEXT) FROM {table}")).await;
        *count = rows[0][0].parse().unwrap();
    }
    counts
}

/// Runs as `template` under `ids`, each with its first message: a batch for
/// the store.
fn batch_of(template: &Run, ids: &[String]) -> Vec<(Run, Vec<Message>)> {
    (ids.iter())
        .map(|id| {
            let first = Message {
                id: format!("{id}-m0"),
                run_id: id.clone(),
                seq: 0,
                step_index: None,
                created_at: template.created_at,
                body: MessageBody::Human { message: "What is 2+2?".into() },
            };
            (Run { id: id.clone(), ..template.clone() }, vec![first])
        })
        .collect()
}

/// A store with one settled batch run (tagged, in a group) to copy and whose id is taken.
async fn store_with_a_run() -> (Arc<dyn Store>, Run, String, TestDb) {
    let mock = Mock::start(vec![]).await;
    let db = test_db();
    let url = db_url(&db);
    let store = open_store(&url).await;
    let engine = engine_on(&mock, store.clone());
    let created = engine.comparisons().create_batch("default", batch(&["builtin"]), None).await.unwrap();
    let run = engine.runs().wait_until_settled(&created.runs[0].id, SETTLE).await.unwrap();
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    (store, created.runs[0].clone(), url, db)
}

#[tokio::test]
async fn storing_a_batch_is_all_or_nothing() {
    let (store, template, url, _db) = store_with_a_run().await;
    let taken = template.id.clone();
    let new = |name: &str| format!("{taken}-{name}");
    let before = row_counts(&url).await;
    assert_eq!(before[0], 1);

    // The third run's id exists: none of the three is stored.
    let ids = [new("a"), new("b"), taken.clone()];
    assert!(!store.insert_runs(&batch_of(&template, &ids)).await.unwrap());
    assert_eq!(row_counts(&url).await, before, "a taken id stores nothing");
    // An id twice in one batch.
    let ids = [new("c"), new("d"), new("c")];
    assert!(!store.insert_runs(&batch_of(&template, &ids)).await.unwrap());
    assert_eq!(row_counts(&url).await, before, "a repeated id stores nothing");
    // An error midway: the third run's two messages share a position.
    let ids = [new("e"), new("f"), new("g")];
    let mut runs = batch_of(&template, &ids);
    let again = runs[2].1[0].clone();
    runs[2].1.push(Message { id: format!("{}-again", again.id), ..again });
    assert!(store.insert_runs(&runs).await.is_err(), "the message's key is taken");
    assert_eq!(row_counts(&url).await, before, "an error midway stores nothing");
    for id in ["a", "b", "c", "d", "e", "f", "g"] {
        assert_eq!(store.get_run(&new(id)).await.unwrap(), None, "{id}");
    }

    // A good batch: every run, with its message and tags.
    let ids = [new("h"), new("i"), new("j")];
    assert!(store.insert_runs(&batch_of(&template, &ids)).await.unwrap());
    let tags = template.tags.len();
    assert_eq!(row_counts(&url).await, [before[0] + 3, before[1] + 3, before[2] + 3 * tags]);
    for id in &ids {
        let run = store.get_run(id).await.unwrap().expect("stored");
        assert_eq!((run.group_id, run.tags), (template.group_id.clone(), template.tags.clone()));
        assert_eq!(store.messages(id).await.unwrap().len(), 1, "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_batches_are_each_whole_or_absent() {
    let (store, template, url, _db) = store_with_a_run().await;
    let before = row_counts(&url).await;
    // Half of them end with the taken id; on SQLite they share commits, each in a savepoint.
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let (store, template) = (store.clone(), template.clone());
            tokio::spawn(async move {
                let mut ids: Vec<String> = (0..3).map(|j| format!("{}-{i}-{j}", template.id)).collect();
                if i % 2 == 1 {
                    ids[2] = template.id.clone();
                }
                let stored = store.insert_runs(&batch_of(&template, &ids)).await.unwrap();
                (i, stored)
            })
        })
        .collect();
    for task in tasks {
        let (i, stored) = task.await.unwrap();
        assert_eq!(stored, i % 2 == 0, "batch {i}");
    }
    let tags = template.tags.len();
    assert_eq!(row_counts(&url).await, [before[0] + 24, before[1] + 24, before[2] + 24 * tags]);
    for i in 0..16 {
        let stored = store.get_run(&format!("{}-{i}-0", template.id)).await.unwrap().is_some();
        assert_eq!(stored, i % 2 == 0, "batch {i}'s first run");
    }
}

#[tokio::test]
async fn a_batch_is_one_store_write_and_a_failed_one_starts_nothing() {
    let mock = Mock::start(vec![answer("It is 4."), answer("It is 4.")]).await;
    let db = test_db();
    let faults = Faults { fail_insert_runs: true, ..Faults::default() };
    let probe = Arc::new(Probe::new(open_store(&db_url(&db)).await, faults));
    let engine = engine_on(&mock, probe.clone());
    let err = engine.comparisons().create_batch("default", batch(&MODELS), None).await.unwrap_err();
    assert!(matches!(err, EngineError::Internal(_)), "{err:?}");
    let calls = probe.take();
    assert_eq!(calls.iter().filter(|c| c.starts_with("insert_run")).collect::<Vec<_>>(), ["insert_runs"], "{calls:?}");
    assert_eq!(run_count(&engine).await, 0, "nothing is stored");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(mock.requests().is_empty(), "nothing is started");

    let probe = Arc::new(Probe::new(open_store(&db_url(&db)).await, Faults::default()));
    let engine = engine_on(&mock, probe.clone());
    let created = engine.comparisons().create_batch("default", batch(&MODELS), None).await.unwrap();
    let calls = probe.take();
    let inserts: Vec<&String> = calls.iter().filter(|c| c.starts_with("insert_run")).collect();
    assert_eq!(inserts, ["insert_runs"], "the whole batch in one write: {calls:?}");
    for run in &created.runs {
        let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
        assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    }
}
