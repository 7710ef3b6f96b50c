//! State export and import: round trips, continuation, and strict refusals.

use runlens_engine::model::{ApprovalRequest, DecisionRequest, FollowUp, RunStatus};
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
    let first = engine.snapshots().export_document(&run.id).await.unwrap();
    assert_eq!(first["$schemaVersion"], "runlens.run-state.v1");
    let imported = engine.snapshots().import_state(&first, ImportOptions::default()).await.unwrap();
    assert_ne!(imported.id, run.id);
    let second = engine.snapshots().export_document(&imported.id).await.unwrap();
    assert_eq!(normalized(&first, &run.id), normalized(&second, &imported.id));
}

#[tokio::test]
async fn an_imported_run_can_be_followed_up_or_approved() {
    let (engine, _dir) = engine().await;
    let done = run_to_end(&engine, scripted(json!([{"text": "first"}, {"text": "second"}]))).await;
    let doc = serde_json::to_value(engine.snapshots().export_state(&done.id).await.unwrap()).unwrap();
    let copy = engine.snapshots().import_state(&doc, ImportOptions::default()).await.unwrap();
    engine
        .conversation()
        .follow_up(&copy.id, FollowUp { message: "again".into(), ..Default::default() })
        .await
        .unwrap();
    let copy = wait_for_status(&engine, &copy.id, RunStatus::Done).await;
    assert_eq!(copy.result, Some(json!("second")));

    let email = json!({"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}});
    let (paused, _) =
        engine.runs().create_run(scripted(json!([{"tool_calls": [email]}, {"text": "sent"}]))).await.unwrap();
    let paused = engine.runs().wait_until_settled(&paused.id, SETTLE).await.unwrap();
    let doc = serde_json::to_value(engine.snapshots().export_state(&paused.id).await.unwrap()).unwrap();
    let copy = engine.snapshots().import_state(&doc, ImportOptions::default()).await.unwrap();
    assert_eq!(copy.status, RunStatus::Paused);
    let call = copy.interruptions[0].call_id.clone();
    engine
        .approvals()
        .approve(&copy.id, &call, DecisionRequest::default(), &crate::support::approver(&engine, "web").await)
        .await
        .unwrap();
    let copy = wait_for_status(&engine, &copy.id, RunStatus::Done).await;
    assert_eq!(copy.result, Some(json!("sent")));
    assert_eq!(engine.runs().get_run(&paused.id).await.unwrap().status, RunStatus::Paused, "the original still waits");
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
    let good = engine.snapshots().export_document(&run.id).await.unwrap();
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
        match engine.snapshots().import_state(&doc, ImportOptions::default()).await {
            Err(EngineError::Invalid(m)) => assert!(m.contains(expected), "{m} / {expected}"),
            other => panic!("expected Invalid({expected}), got {other:?}"),
        }
    }
    let runs = engine.runs().list_runs(&Default::default()).await.unwrap().runs;
    assert_eq!(runs.len(), 1, "no partial import");
    let keep = ImportOptions { keep_id: true, ..Default::default() };
    assert!(matches!(engine.snapshots().import_state(&good, keep).await, Err(EngineError::Conflict(_))));
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
        sizes.push(engine.snapshots().export_document(&run.id).await.unwrap().to_string().len());
        // Full documents import too.
        let full = serde_json::to_value(engine.snapshots().export_state(&run.id).await.unwrap()).unwrap();
        engine.snapshots().import_state(&full, ImportOptions::default()).await.unwrap();
    }
    println!("exported state: 10 turns {} bytes, 20 turns {} bytes", sizes[0], sizes[1]);
    assert!(sizes[1] <= 20 * 1024, "20-turn state is {} bytes", sizes[1]);
    let per_turn = (sizes[1] - sizes[0]) / 10;
    assert!(sizes[1] < sizes[0] + 12 * per_turn, "grows linearly: {sizes:?}");
}

/// A paused run waiting on `send_email`, exported as a full document.
async fn paused_email_doc(engine: &runlens_engine::Engine) -> (String, Value) {
    let email = json!({"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}});
    let (paused, _) =
        engine.runs().create_run(scripted(json!([{"tool_calls": [email]}, {"text": "sent"}]))).await.unwrap();
    let paused = engine.runs().wait_until_settled(&paused.id, SETTLE).await.unwrap();
    assert_eq!(paused.status, RunStatus::Paused);
    (paused.id.clone(), engine.snapshots().export_document(&paused.id).await.unwrap())
}

#[tokio::test]
async fn an_import_never_runs_a_call_that_needs_approval_without_a_decision() {
    let (engine, _dir) = engine().await;
    let (_, doc) = paused_email_doc(&engine).await;
    let mut forged = doc.clone();
    forged["run"]["status"] = json!("running");
    forged["steps"][0]["tool_calls"][0]["status"] = json!("pending");
    let copy = engine.snapshots().import_state(&forged, ImportOptions::default()).await.unwrap();
    assert_eq!(copy.status, RunStatus::Paused, "the call waits for a decision instead of running");
    assert_eq!(copy.interruptions.len(), 1);
    let call = &engine.runs().steps(&copy.id).await.unwrap()[0].tool_calls[0];
    assert_eq!(call.status, runlens_engine::model::ToolCallStatus::AwaitingApproval);
    assert!(engine.outbox(10).await.unwrap().is_empty(), "no email without a decision");

    // An "always approve" in a document grants nothing: it is emptied, whoever imports.
    let mut unbacked = forged.clone();
    unbacked["run"]["always_approve"] = json!(["send_email"]);
    let emptied = engine.snapshots().import_state(&unbacked, ImportOptions::default()).await.unwrap();
    assert!(emptied.always_approve.is_empty());
    assert_eq!(engine.runs().wait_until_settled(&emptied.id, SETTLE).await.unwrap().status, RunStatus::Paused);

    // A decision in the run it was made in: the call runs once.
    let web = crate::support::approver(&engine, "web").await;
    engine.approvals().approve(&copy.id, &call.id, DecisionRequest::default(), &web).await.unwrap();
    wait_for_status(&engine, &copy.id, RunStatus::Done).await;
    assert_eq!(engine.outbox(10).await.unwrap().len(), 1);

    // Its document, the call set back to pending with the decision kept (and
    // an "always" forged on it), imports as a run whose call waits again:
    // a recorded approval is history, not a grant, whoever imports it.
    let approved = engine.snapshots().export_document(&copy.id).await.unwrap();
    let mut resumed = approved.clone();
    resumed["run"]["status"] = json!("running");
    resumed["run"]["always_approve"] = json!(["send_email"]);
    resumed["steps"][0]["tool_calls"][0]["status"] = json!("pending");
    resumed["steps"][0]["tool_calls"][0]["approval"]["always"] = json!(true);
    resumed["steps"][0]["status"] = json!("running");
    resumed["steps"].as_array_mut().unwrap().truncate(1);
    resumed["messages"].as_array_mut().unwrap().truncate(2);
    let waiting = engine.snapshots().import_state(&resumed, ImportOptions::default()).await.unwrap();
    assert_eq!(waiting.status, RunStatus::Paused);
    assert!(waiting.always_approve.is_empty());
    let call = &engine.runs().steps(&waiting.id).await.unwrap()[0].tool_calls[0];
    assert_eq!(call.status, runlens_engine::model::ToolCallStatus::AwaitingApproval);
    assert!(call.approval.is_none(), "the document's decision is not kept on the open call");
    assert_eq!(engine.outbox(10).await.unwrap().len(), 1, "nothing more was sent");

    // Decided in the import, it runs once there.
    engine.approvals().approve(&waiting.id, &call.id, DecisionRequest::default(), &web).await.unwrap();
    assert_eq!(engine.runs().wait_until_settled(&waiting.id, SETTLE).await.unwrap().status, RunStatus::Done);
    assert_eq!(engine.outbox(10).await.unwrap().len(), 2, "approved once in each run, sent once in each");
}

#[tokio::test]
async fn an_import_rechecks_tools_and_arguments_of_unfinished_calls() {
    let (engine, _dir) = engine().await;
    let (_, doc) = paused_email_doc(&engine).await;
    let mutate = |f: &dyn Fn(&mut Value)| {
        let mut d = doc.clone();
        f(&mut d);
        d
    };
    let cases: Vec<(Value, &str)> = vec![
        (mutate(&|d| d["run"]["tools"] = json!(["calculator"])), "not attached"),
        (mutate(&|d| d["steps"][0]["tool_calls"][0]["tool_name"] = json!("teleport")), "unknown tool `teleport`"),
        (mutate(&|d| d["steps"][0]["tool_calls"][0]["arguments"] = json!({"to": 5})), "invalid arguments"),
        (mutate(&|d| d["steps"][0]["status"] = json!("completed")), "unfinished"),
    ];
    for (doc, expected) in cases {
        match engine.snapshots().import_state(&doc, ImportOptions::default()).await {
            Err(EngineError::Invalid(m)) => assert!(m.contains(expected), "{m} / {expected}"),
            other => panic!("expected Invalid({expected}), got {other:?}"),
        }
    }
    let tools = ImportOptions { tools: Some(vec!["calculator".into()]), ..Default::default() };
    assert!(
        matches!(engine.snapshots().import_state(&doc, tools).await, Err(EngineError::Invalid(m)) if m.contains("not attached"))
    );
    assert_eq!(engine.runs().list_runs(&Default::default()).await.unwrap().runs.len(), 1, "nothing stored");
}

#[tokio::test]
async fn an_import_is_one_transaction_with_its_blobs() {
    let (engine, _dir) = engine().await;
    let run = run_to_end(
        &engine,
        scripted(json!([
        {"tool_calls": [{"name": "big_result", "arguments": {"chars": 600000}}]}, {"text": "ok"}])),
    )
    .await;
    let doc = engine.snapshots().export_document(&run.id).await.unwrap();
    let store = engine.store().clone();
    let before = store.run_blobs(&run.id).await.unwrap();
    assert_eq!(before.len(), 1);

    // Fails late: the second blob repeats the first one's id, after the run,
    // its messages and steps were written.
    let mut twice = doc.clone();
    let blob = twice["blobs"][0].clone();
    twice["blobs"].as_array_mut().unwrap().push(blob);
    match engine.snapshots().import_state(&twice, ImportOptions::default()).await {
        Err(EngineError::Invalid(m)) => assert!(m.contains("appears twice"), "{m}"),
        other => panic!("expected Invalid, got {other:?}"),
    }
    assert_eq!(engine.runs().list_runs(&Default::default()).await.unwrap().runs.len(), 1, "no run stored");

    // Another run's blob id in a document: namespaced by the new run, never overwritten.
    let mut hostile = doc.clone();
    let victim = before[0].id.clone();
    hostile["blobs"][0]["data"] = json!({"data": "forged"});
    hostile["blobs"][0]["content_type"] = json!("text/html");
    hostile["run"]["id"] = json!("someone-else");
    let copy = engine.snapshots().import_state(&hostile, ImportOptions::default()).await.unwrap();
    assert_eq!(store.get_blob(&victim).await.unwrap().unwrap(), before[0], "the other run's blob is untouched");
    let mine = store.run_blobs(&copy.id).await.unwrap();
    assert_eq!(mine.len(), 1);
    assert!(mine[0].id.starts_with(&format!("{}-", copy.id)), "{}", mine[0].id);
    assert_eq!(mine[0].content_type, "application/json", "derived, not taken from the document");

    // A kept id is namespaced the same way.
    let mut keep = doc.clone();
    keep["run"]["id"] = json!(format!("{}x", run.id));
    let keep_opts = ImportOptions { keep_id: true, ..Default::default() };
    let kept = engine.snapshots().import_state(&keep, keep_opts).await.unwrap();
    let kept_blobs = store.run_blobs(&kept.id).await.unwrap();
    assert_eq!(kept_blobs.len(), 1);
    assert!(kept_blobs[0].id.starts_with(&format!("{}-", kept.id)));
    assert_eq!(store.get_blob(&victim).await.unwrap().unwrap(), before[0]);
}

#[tokio::test]
async fn an_imported_paused_run_times_out_without_a_restart() {
    let (engine, _dir) = engine().await;
    let email = json!({"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}});
    let mut req = scripted(json!([{"tool_calls": [email]}, {"text": "gave up"}]));
    req.approval = Some(ApprovalRequest::timeout_s(3600));
    let (paused, _) = engine.runs().create_run(req).await.unwrap();
    let paused = engine.runs().wait_until_settled(&paused.id, SETTLE).await.unwrap();
    assert_eq!(paused.status, RunStatus::Paused);
    let mut doc = engine.snapshots().export_document(&paused.id).await.unwrap();
    // Requested two hours ago: the deadline has passed.
    let ago = chrono::Utc::now().timestamp_millis() - 2 * 3600 * 1000;
    doc["steps"][0]["tool_calls"][0]["requested_at"] = json!(ago);
    let copy = engine.snapshots().import_state(&doc, ImportOptions::default()).await.unwrap();
    assert_eq!(copy.status, RunStatus::Paused);
    let done = wait_for_status(&engine, &copy.id, RunStatus::Done).await;
    assert_eq!(done.result, Some(json!("gave up")));
    let call = &engine.runs().steps(&copy.id).await.unwrap()[0].tool_calls[0];
    assert_eq!(call.status, runlens_engine::model::ToolCallStatus::Rejected);
    assert_eq!(call.approval.as_ref().unwrap().decided_by, "runlens");
    assert!(engine.outbox(10).await.unwrap().is_empty());
}

/// The kinds of run a state document can hold.
#[derive(Clone, Copy, Debug)]
enum Kind {
    DoneWithBlob,
    Failed,
    CancelledWhilePaused,
    CancelledMidCall,
    Paused,
    Running,
    Pending,
    ForkWithBlob,
}

/// Makes a run of `kind`; returns its exported document, its id, and whether
/// the imported copy goes on running (`false`: it is stored as exported).
async fn source(engine: &runlens_engine::Engine, kind: Kind) -> (Value, String, bool) {
    let wait = json!({"tool_calls": [{"name": "wait", "arguments": {"seconds": 30}}]});
    let big = json!({"tool_calls": [{"name": "calculator", "arguments": {"expression": "2+2"}},
                                    {"name": "big_result", "arguments": {"chars": 600000}}]});
    let started = |script: Value| {
        let engine = engine.clone();
        async move {
            let (run, _) = engine.runs().create_run(scripted(script)).await.unwrap();
            for _ in 0..2000 {
                if !engine.runs().steps(&run.id).await.unwrap().is_empty() {
                    return run.id;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            panic!("the run never recorded its first step");
        }
    };
    let id = match kind {
        Kind::DoneWithBlob => run_to_end(engine, scripted(json!([big, {"text": "{\"ok\": true}"}]))).await.id,
        Kind::Failed => run_to_end(engine, scripted(json!([{"error": "the provider is down"}]))).await.id,
        Kind::CancelledWhilePaused => {
            let (id, _) = paused_email_doc(engine).await;
            engine.runs().cancel(&id).await.unwrap().id
        }
        Kind::CancelledMidCall => {
            let id = started(json!([wait, {"text": "x"}])).await;
            engine.runs().cancel(&id).await.unwrap().id
        }
        Kind::Paused => paused_email_doc(engine).await.0,
        Kind::Running | Kind::Pending => {
            let id = started(json!([wait, {"text": "x"}])).await;
            let mut doc = engine.snapshots().export_document(&id).await.unwrap();
            assert_eq!(doc["run"]["status"], "running");
            if let Kind::Pending = kind {
                doc["run"]["status"] = json!("pending");
            }
            engine.runs().cancel(&id).await.unwrap();
            return (doc, id, true);
        }
        Kind::ForkWithBlob => {
            let parent = run_to_end(engine, scripted(json!([big, {"text": "ok"}, {"text": "again"}]))).await;
            engine
                .conversation()
                .follow_up(&parent.id, FollowUp { message: "more".into(), ..Default::default() })
                .await
                .unwrap();
            wait_for_status(engine, &parent.id, RunStatus::Done).await;
            let messages = engine.runs().messages(&parent.id).await.unwrap();
            let second = messages.into_iter().rfind(|m| m.body.kind() == "human").unwrap();
            let fork = engine.conversation().edit_message(&parent.id, &second.id, "more, edited").await.unwrap();
            let fork = engine.runs().wait_until_settled(&fork.id, SETTLE).await.unwrap();
            assert_eq!(fork.status, RunStatus::Done);
            let blobs = engine.store().run_blobs(&fork.id).await.unwrap();
            assert_eq!(blobs.len(), 1, "the fork has its own copy of the kept blob");
            assert!(blobs[0].id.starts_with(&fork.id));
            fork.id
        }
    };
    (engine.snapshots().export_document(&id).await.unwrap(), id, false)
}

#[tokio::test]
async fn every_kind_of_run_round_trips() {
    let (engine, _dir) = engine().await;
    let kinds = [
        Kind::DoneWithBlob,
        Kind::Failed,
        Kind::CancelledWhilePaused,
        Kind::CancelledMidCall,
        Kind::Paused,
        Kind::Running,
        Kind::Pending,
        Kind::ForkWithBlob,
    ];
    for kind in kinds {
        let (first, id, continues) = source(&engine, kind).await;
        let copy = engine.snapshots().import_state(&first, ImportOptions::default()).await;
        let copy = copy.unwrap_or_else(|e| panic!("{kind:?}: import refused: {e}"));
        let first = if continues {
            // It picks up where the export left off; once cancelled, its state round-trips.
            assert!(matches!(copy.status, RunStatus::Pending | RunStatus::Running), "{kind:?}: {:?}", copy.status);
            assert_eq!(engine.runs().steps(&copy.id).await.unwrap().len(), 1, "{kind:?}");
            engine.runs().cancel(&copy.id).await.unwrap();
            engine.snapshots().export_document(&copy.id).await.unwrap()
        } else {
            let second = engine.snapshots().export_document(&copy.id).await.unwrap();
            assert_eq!(normalized(&first, &id), normalized(&second, &copy.id), "{kind:?}");
            second
        };
        let id = first["run"]["id"].as_str().unwrap().to_owned();
        let again = engine.snapshots().import_state(&first, ImportOptions::default()).await;
        let again = again.unwrap_or_else(|e| panic!("{kind:?}: re-import refused: {e}"));
        let third = engine.snapshots().export_document(&again.id).await.unwrap();
        assert_eq!(normalized(&first, &id), normalized(&third, &again.id), "{kind:?}: second round");
    }
}

/// Every node of a document, as JSON pointers.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            m.iter().for_each(|(k, v)| pointers(v, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out))
        }
        Value::Array(a) => a.iter().enumerate().for_each(|(i, v)| pointers(v, format!("{at}/{i}"), out)),
        _ => {}
    }
    out.push(at);
}

/// Values that break assumptions: wrong types, huge and negative numbers,
/// statuses, and times out of range (as text and as Unix milliseconds).
fn hostile(i: usize) -> Value {
    let values = [
        json!(null),
        json!(true),
        json!(-1),
        json!(0),
        json!(1e308),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(""),
        json!("x"),
        json!([]),
        json!({}),
        json!("pending"),
        json!("running"),
        json!("awaiting_approval"),
        json!("paused"),
        json!("done"),
        json!("send_email"),
        json!("+262142-12-31T23:59:59Z"),
        json!("9999-12-31T23:59:59Z"),
        json!(8_640_000_000_000_000i64),
        json!(-8_640_000_000_000_000i64),
        json!(4_294_967_296u64),
        json!({"blob_id": "x"}),
        json!({"decision": "approved", "decided_by": "x", "decided_at": "2026-01-01T00:00:00Z",
               "always": true, "original_arguments": {}}),
    ];
    values[i % values.len()].clone()
}

/// Applies mutation `op` at the `at`-th node of `doc`.
fn mutate(doc: &mut Value, paths: &[String], at: usize, op: usize, pick: usize) {
    let path = &paths[at % paths.len()];
    let (parent, key) = path.rsplit_once('/').unwrap_or(("", ""));
    match op % 4 {
        0 => {
            if let Some(node) = doc.pointer_mut(path) {
                *node = hostile(pick);
            }
        }
        1 => match doc.pointer_mut(parent) {
            Some(Value::Object(m)) => {
                m.remove(key);
            }
            Some(Value::Array(a)) => {
                if let Ok(i) = key.parse::<usize>() {
                    if i < a.len() {
                        a.remove(i);
                    }
                }
            }
            _ => {}
        },
        2 => {
            // A duplicate: repeated ids, repeated calls, repeated blobs.
            if let Some(Value::Array(a)) = doc.pointer_mut(parent) {
                if let Some(v) = key.parse::<usize>().ok().and_then(|i| a.get(i).cloned()) {
                    a.push(v);
                }
            }
        }
        _ => {
            if let Some(Value::Object(m)) = doc.pointer_mut(path) {
                m.insert(format!("unexpected_{pick}"), hostile(pick));
            }
        }
    }
}

/// The outcome every document must have: a run, or `Invalid` (a 400), in bounded time.
/// (`imported` counts the documents that gave a run.)
fn imports_or_refuses(
    rt: &tokio::runtime::Runtime,
    engine: &runlens_engine::Engine,
    bytes: &[u8],
    imported: &std::cell::Cell<u32>,
) -> Result<(), proptest::test_runner::TestCaseError> {
    let import = engine.snapshots().import_bytes(bytes, ImportOptions::default());
    match rt.block_on(async { tokio::time::timeout(std::time::Duration::from_secs(60), import).await }) {
        Err(_) => Err(proptest::test_runner::TestCaseError::fail("the import hung")),
        Ok(Ok(_)) => {
            imported.set(imported.get() + 1);
            Ok(())
        }
        Ok(Err(EngineError::Invalid(_))) => Ok(()),
        Ok(Err(other)) => Err(proptest::test_runner::TestCaseError::fail(format!("not a 400: {other:?}"))),
    }
}

#[test]
fn random_and_adversarial_documents_give_a_run_or_a_400() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (engine, _dir) = rt.block_on(engine());
    let (compact, full) = rt.block_on(async {
        let email = json!({"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}});
        let calc = json!({"name": "calculator", "arguments": {"expression": "1+1"}});
        let big = json!({"name": "big_result", "arguments": {"chars": 510000}});
        let req = scripted(json!([{"tool_calls": [calc, big]}, {"tool_calls": [email]}, {"text": "sent"}]));
        let (run, _) = engine.runs().create_run(req).await.unwrap();
        let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
        assert_eq!(run.status, RunStatus::Paused);
        let compact = engine.snapshots().export_document(&run.id).await.unwrap();
        let full = serde_json::to_value(engine.snapshots().export_state(&run.id).await.unwrap()).unwrap();
        (compact, full)
    });
    let docs = [compact, full];
    let paths: Vec<Vec<String>> = docs
        .iter()
        .map(|d| {
            let mut p = Vec::new();
            pointers(d, String::new(), &mut p);
            p
        })
        .collect();
    let config = Config { cases: 200, failure_persistence: None, ..Config::default() };
    let imported = std::cell::Cell::new(0);

    // Mutations of a real document.
    let mutations = (any::<bool>(), prop::collection::vec((any::<usize>(), 0usize..4, any::<usize>()), 1..5));
    TestRunner::new(config.clone())
        .run(&mutations, |(full, ops)| {
            let which = usize::from(full);
            let mut doc = docs[which].clone();
            for (at, op, pick) in ops {
                mutate(&mut doc, &paths[which], at, op, pick);
            }
            imports_or_refuses(&rt, &engine, doc.to_string().as_bytes(), &imported)
        })
        .unwrap();
    println!("mutated documents: {} of 200 imported, the others refused with Invalid", imported.get());
    assert!(imported.get() > 0, "some mutations leave a valid document");

    // Random JSON that claims the right version, and random bytes.
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-z_]{0,8}".prop_map(Value::from),
    ];
    let tree = leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::from),
            prop::collection::btree_map("[a-z_$]{1,8}", inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    TestRunner::new(config.clone())
        .run(&tree, |mut v| {
            if let Value::Object(m) = &mut v {
                m.insert("$schemaVersion".into(), json!("runlens.run-state.v1"));
            }
            imports_or_refuses(&rt, &engine, v.to_string().as_bytes(), &imported)
        })
        .unwrap();
    TestRunner::new(config)
        .run(&prop::collection::vec(any::<u8>(), 0..512), |bytes| imports_or_refuses(&rt, &engine, &bytes, &imported))
        .unwrap();

    let outbox = rt.block_on(engine.outbox(10)).unwrap();
    assert!(outbox.is_empty(), "no document without a decision sent an email: {outbox:?}");
}

/// The process's resident memory, current and peak (kB), from /proc.
fn memory_kb() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
    };
    (field("VmRSS:").unwrap_or(0), field("VmHWM:").unwrap_or(0))
}

/// Prints what importing a large document costs in memory: a 60 MB blob of
/// text (`string`) or of 30 million numbers (`array`), or 2 million values
/// in the run's input (`values`, near the limit). Run alone, one shape per
/// process: `IMPORT_SHAPE=… cargo test … -- --ignored --exact
/// state::import_memory_figures --nocapture`.
#[tokio::test]
#[ignore]
async fn import_memory_figures() {
    let (engine, _dir) = engine().await;
    let run = run_to_end(&engine, scripted(json!([{"text": "ok"}]))).await;
    let doc = engine.snapshots().export_document(&run.id).await.unwrap().to_string();
    let shape = std::env::var("IMPORT_SHAPE").unwrap_or_default();
    let data = match shape.as_str() {
        "array" | "values" => format!("[{}0]", "0,".repeat(if shape == "array" { 30_000_000 } else { 1_999_000 })),
        _ => format!("\"{}\"", "x".repeat(60_000_000)),
    };
    let bytes = if shape == "values" {
        doc.replace(r#""input":null"#, &format!(r#""input":{data}"#)).into_bytes()
    } else {
        let blob = format!(r#""blobs":[{{"id":"b","call_id":null,"content_type":"application/json","data":{data}}}]"#);
        doc.replace(r#""blobs":[]"#, &blob).into_bytes()
    };
    drop(data);
    let (before, _) = memory_kb();
    engine.snapshots().import_bytes(&bytes, ImportOptions::default()).await.unwrap();
    let (_, peak) = memory_kb();
    println!(
        "document {} MB; peak over the resident set before the import: {} MB",
        bytes.len() / 1_000_000,
        peak.saturating_sub(before) / 1000
    );
}

#[tokio::test]
async fn a_document_with_too_many_values_is_refused_before_it_is_built() {
    let (engine, _dir) = engine().await;
    let run = run_to_end(&engine, scripted(json!([{"text": "ok"}]))).await;
    let doc = engine.snapshots().export_document(&run.id).await.unwrap().to_string();
    let many = format!("[{}0]", "0,".repeat(2_000_000));
    let input = doc.replace(r#""input":null"#, &format!(r#""input":{many}"#));
    match engine.snapshots().import_bytes(input.as_bytes(), ImportOptions::default()).await {
        Err(EngineError::Invalid(m)) => assert!(m.contains("more than 2000000 JSON values"), "{m}"),
        other => panic!("expected Invalid, got {other:?}"),
    }
    // Blob data is kept as text, so it does not count.
    let blob = format!(r#""blobs":[{{"id":"b","call_id":null,"content_type":"text/html","data":{many}}}]"#);
    let copy =
        engine.snapshots().import_bytes(doc.replace(r#""blobs":[]"#, &blob).as_bytes(), ImportOptions::default()).await;
    let copy = copy.unwrap();
    let blobs = engine.store().run_blobs(&copy.id).await.unwrap();
    assert_eq!(blobs[0].id, format!("{}-b", copy.id));
    assert_eq!(blobs[0].data, many.as_bytes(), "the data as compact JSON");
    assert_eq!(blobs[0].content_type, "application/json");
}
