//! Input bounds: every numeric and size bound of the public API accepts a
//! value at the bound and refuses one just past it with `Invalid` naming the
//! field and the bound, before anything is stored.

use runlens_engine::cost::PriceInput;
use runlens_engine::model::limits::*;
use runlens_engine::model::{CreateRun, DecisionRequest, FollowUp, MessageBody, RunFilter, RunStatus};
use runlens_engine::{Engine, EngineError};
use serde_json::{json, Value};

use crate::support::*;

/// A create-run request: a short prompt plus `patch`'s fields.
fn request(patch: Value) -> CreateRun {
    let mut body = json!({"initial_prompt": "bounded", "tools": ["calculator"]});
    for (k, v) in patch.as_object().unwrap() {
        body[k] = v.clone();
    }
    serde_json::from_value(body).expect("a well-formed request")
}

/// A JSON string whose compact encoding is exactly `size` bytes.
fn json_string_of(size: usize) -> Value {
    Value::String("x".repeat(size - 2))
}

/// `{"k": "xxx"}` of exactly `size` bytes.
fn object_of(size: usize) -> Value {
    json!({"k": "x".repeat(size - 8)})
}

async fn runs_in(engine: &Engine) -> usize {
    engine
        .runs()
        .list_runs(&RunFilter { limit: Some(MAX_LIST_LIMIT), ..RunFilter::default() })
        .await
        .unwrap()
        .runs
        .len()
}

/// Accepts `ok`, refuses `bad` naming every one of `names`; returns after
/// cancelling the accepted run, so nothing keeps running.
async fn at_and_past(engine: &Engine, case: &str, ok: Value, bad: Value, names: &[&str]) {
    let (run, created) =
        engine.runs().create_run(request(ok)).await.unwrap_or_else(|e| panic!("{case}: at the bound: {e}"));
    assert!(created, "{case}");
    let _ = engine.runs().cancel(&run.id).await;
    let before = runs_in(engine).await;
    match engine.runs().create_run(request(bad)).await {
        Err(EngineError::Invalid(msg)) => {
            for name in names {
                assert!(msg.contains(name), "{case}: `{msg}` should name `{name}`");
            }
        }
        other => panic!("{case}: past the bound: expected Invalid, got {other:?}"),
    }
    assert_eq!(runs_in(engine).await, before, "{case}: a refused request stores nothing");
}

#[tokio::test]
async fn the_reproduced_requests_are_refused() {
    let (engine, _dir) = engine().await;
    let cases = [
        json!({"initial_prompt": "send email please", "tools": ["send_email"],
               "approval": {"tools": ["send_email"], "timeout_s": 10_000_000_000_000u64}}),
        json!({"initial_prompt": "hi", "model_settings": {"latency_ms": 1_000_000_000_000_000u64}}),
        json!({"initial_prompt": "hi", "model_settings": {"temperature": 1e300}}),
        json!({"initial_prompt": "hi", "model_settings": {"bogus": 1}}),
        json!({"initial_prompt": "a".repeat(1_900_000)}),
    ];
    for case in cases {
        let req: CreateRun = serde_json::from_value(case.clone()).unwrap();
        match engine.runs().create_run(req).await {
            Err(EngineError::Invalid(_)) => {}
            other => panic!("{case:.80}: expected Invalid, got {:?}", other.map(|(r, _)| r.status)),
        }
    }
    assert_eq!(runs_in(&engine).await, 0);
}

#[tokio::test]
async fn every_create_run_bound_is_checked_at_and_past_it() {
    let (engine, _dir) = engine().await;
    let e = &engine;
    let tags = |n: usize| Value::Object((0..n).map(|i| (format!("k{i}"), json!("v"))).collect());
    let script = |n: usize| json!({"script": vec![json!({"text": "t"}); n]});
    let tools = |n: usize| json!(vec!["calculator"; n]);
    let prompt = |n: usize| json!("a".repeat(n));
    let p = MAX_PROMPT_BYTES;
    at_and_past(
        e,
        "prompt",
        json!({"initial_prompt": prompt(p)}),
        json!({"initial_prompt": prompt(p + 1)}),
        &["initial_prompt", &p.to_string()],
    )
    .await;
    let s = MAX_SYSTEM_PROMPT_BYTES;
    at_and_past(
        e,
        "system",
        json!({"system_prompt": prompt(s)}),
        json!({"system_prompt": prompt(s + 1)}),
        &["system_prompt", &s.to_string()],
    )
    .await;
    let name = |n: usize| json!("é".repeat(n));
    at_and_past(
        e,
        "name",
        json!({"name": name(MAX_NAME_CHARS)}),
        json!({"name": name(MAX_NAME_CHARS + 1)}),
        &["name", &MAX_NAME_CHARS.to_string()],
    )
    .await;
    let agent = |n: usize| json!("a".repeat(n));
    // `agent_id` names a saved agent: one with the longest id there can be.
    let spec = runlens_engine::model::AgentSpec { name: "bounded".into(), ..Default::default() };
    let input = runlens_engine::model::AgentInput { id: Some("a".repeat(MAX_ID_CHARS)), spec };
    e.agents().create_agent("default", input, &crate::support::by("ada")).await.unwrap();
    at_and_past(
        e,
        "agent",
        json!({"agent_id": agent(MAX_ID_CHARS)}),
        json!({"agent_id": agent(MAX_ID_CHARS + 1)}),
        &["agent_id", &MAX_ID_CHARS.to_string()],
    )
    .await;
    at_and_past(
        e,
        "tags",
        json!({"tags": tags(MAX_TAGS)}),
        json!({"tags": tags(MAX_TAGS + 1)}),
        &["tags", &MAX_TAGS.to_string()],
    )
    .await;
    let key = |n: usize| json!({ "k".repeat(n): "v" });
    at_and_past(
        e,
        "tag key",
        json!({"tags": key(MAX_TAG_KEY_CHARS)}),
        json!({"tags": key(MAX_TAG_KEY_CHARS + 1)}),
        &["tag key", &MAX_TAG_KEY_CHARS.to_string()],
    )
    .await;
    let value = |n: usize| json!({"k": "v".repeat(n)});
    let (ok, bad) = (value(MAX_TAG_VALUE_CHARS), value(MAX_TAG_VALUE_CHARS + 1));
    at_and_past(e, "tag value", json!({"tags": ok}), json!({"tags": bad}), &["tag `k`", "256"]).await;
    let i = MAX_INPUT_BYTES;
    at_and_past(
        e,
        "input",
        json!({"input": json_string_of(i)}),
        json!({"input": json_string_of(i + 1)}),
        &["input", &i.to_string()],
    )
    .await;
    let c = MAX_CONTEXT_BYTES;
    at_and_past(
        e,
        "context",
        json!({"context": object_of(c)}),
        json!({"context": object_of(c + 1)}),
        &["context", &c.to_string()],
    )
    .await;
    let schema = |n: usize| json!({"description": "x".repeat(n - r#"{"description":""}"#.len())});
    let r = MAX_RESULT_SCHEMA_BYTES;
    at_and_past(
        e,
        "schema",
        json!({"result_schema": schema(r)}),
        json!({"result_schema": schema(r + 1)}),
        &["result_schema", &r.to_string()],
    )
    .await;
    let settings = |n: usize| json!({"script": [{"text": "x".repeat(n - r#"{"script":[{"text":""}]}"#.len())}]});
    let m = MAX_MODEL_SETTINGS_BYTES;
    at_and_past(
        e,
        "settings",
        json!({"model_settings": settings(m)}),
        json!({"model_settings": settings(m + 1)}),
        &["model_settings", &m.to_string()],
    )
    .await;
    at_and_past(
        e,
        "tools",
        json!({"tools": tools(MAX_TOOL_NAMES)}),
        json!({"tools": tools(MAX_TOOL_NAMES + 1)}),
        &["tools", &MAX_TOOL_NAMES.to_string()],
    )
    .await;
    at_and_past(
        e,
        "max_turns",
        json!({"max_turns": MAX_TURNS}),
        json!({"max_turns": MAX_TURNS + 1}),
        &["max_turns", "1000"],
    )
    .await;
    at_and_past(e, "max_turns 0", json!({"max_turns": 1}), json!({"max_turns": 0}), &["max_turns", "1000"]).await;
    let timeout = |t: u64| json!({"approval": {"tools": ["calculator"], "timeout_s": t}});
    at_and_past(
        e,
        "timeout",
        timeout(MAX_APPROVAL_TIMEOUT_S),
        timeout(MAX_APPROVAL_TIMEOUT_S + 1),
        &["approval.timeout_s", &MAX_APPROVAL_TIMEOUT_S.to_string()],
    )
    .await;
    at_and_past(e, "timeout 0", timeout(1), timeout(0), &["approval.timeout_s"]).await;
    let listed = |n: usize| json!({"approval": {"tools": vec!["calculator"; n]}});
    at_and_past(
        e,
        "approval tools",
        listed(MAX_TOOL_NAMES),
        listed(MAX_TOOL_NAMES + 1),
        &["approval.tools", &MAX_TOOL_NAMES.to_string()],
    )
    .await;
    let ms = |v: Value| json!({"model_settings": v});
    let l = MAX_LATENCY_MS;
    at_and_past(
        e,
        "latency",
        ms(json!({"latency_ms": l})),
        ms(json!({"latency_ms": l + 1})),
        &["model_settings.latency_ms", &l.to_string()],
    )
    .await;
    at_and_past(
        e,
        "script",
        ms(script(MAX_SCRIPT_TURNS)),
        ms(script(MAX_SCRIPT_TURNS + 1)),
        &["model_settings.script", &MAX_SCRIPT_TURNS.to_string()],
    )
    .await;
    let w = |n: u64| ms(json!({"context_window": n}));
    at_and_past(
        e,
        "window",
        w(MAX_CONTEXT_WINDOW),
        w(MAX_CONTEXT_WINDOW + 1),
        &["model_settings.context_window", &MAX_CONTEXT_WINDOW.to_string()],
    )
    .await;
    at_and_past(
        e,
        "window min",
        w(MIN_CONTEXT_WINDOW),
        w(MIN_CONTEXT_WINDOW - 1),
        &["model_settings.context_window", &MIN_CONTEXT_WINDOW.to_string()],
    )
    .await;
    at_and_past(
        e,
        "temperature",
        ms(json!({"temperature": 2.0})),
        ms(json!({"temperature": 2.000001})),
        &["model_settings.temperature", "0 to 2"],
    )
    .await;
    at_and_past(
        e,
        "temperature min",
        ms(json!({"temperature": 0})),
        ms(json!({"temperature": -0.1})),
        &["model_settings.temperature"],
    )
    .await;
    at_and_past(e, "top_p", ms(json!({"top_p": 1})), ms(json!({"top_p": 1.01})), &["model_settings.top_p", "0 to 1"])
        .await;
    let tokens = |n: u64| ms(json!({"max_tokens": n}));
    at_and_past(
        e,
        "max_tokens",
        tokens(MAX_CONTEXT_WINDOW),
        tokens(MAX_CONTEXT_WINDOW + 1),
        &["model_settings.max_tokens", &MAX_CONTEXT_WINDOW.to_string()],
    )
    .await;
    let fitted = |n: u64| ms(json!({"max_tokens": n, "context_window": 4096}));
    at_and_past(e, "max_tokens in window", fitted(4096), fitted(4097), &["model_settings.max_tokens", "4096"]).await;
    let seed = |v: Value| ms(json!({ "seed": v }));
    at_and_past(e, "seed", seed(json!(i64::MAX)), seed(json!(i64::MAX as u64 + 1)), &["model_settings.seed"]).await;
    at_and_past(
        e,
        "unknown key",
        ms(json!({"seed": 1})),
        ms(json!({"temprature": 1})),
        &["model_settings.temprature", "accepts script, latency_ms"],
    )
    .await;
}

#[tokio::test]
async fn follow_ups_and_edits_are_bounded() {
    let (engine, _dir) = engine().await;
    let run = run_to_end(&engine, scripted(json!([{"text": "one"}, {"text": "two"}]))).await;
    assert_eq!(run.status, RunStatus::Done);
    let first = engine.runs().messages(&run.id).await.unwrap()[0].id.clone();
    let too_long = "a".repeat(MAX_PROMPT_BYTES + 1);
    let refused = [
        (FollowUp { message: too_long.clone(), ..FollowUp::default() }, "message"),
        (FollowUp { message: "more".into(), max_turns: Some(MAX_TURNS + 1), ..FollowUp::default() }, "max_turns"),
        (
            FollowUp {
                message: "more".into(),
                tools: Some(vec!["wait".into(); MAX_TOOL_NAMES + 1]),
                ..FollowUp::default()
            },
            "tools",
        ),
    ];
    for (req, field) in refused {
        match engine.conversation().follow_up(&run.id, req).await {
            Err(EngineError::Invalid(msg)) => assert!(msg.contains(field), "{msg} / {field}"),
            other => panic!("{field}: expected Invalid, got {other:?}"),
        }
    }
    match engine.conversation().edit_message(&run.id, &first, &too_long).await {
        Err(EngineError::Invalid(msg)) => assert!(msg.contains("message") && msg.contains("262144"), "{msg}"),
        other => panic!("edit: expected Invalid, got {other:?}"),
    }
    assert_eq!(engine.runs().get_run(&run.id).await.unwrap().status, RunStatus::Done, "nothing changed");
    assert_eq!(runs_in(&engine).await, 1, "no fork was made");

    let at_bound = "a".repeat(MAX_PROMPT_BYTES);
    let reopened =
        engine.conversation().follow_up(&run.id, FollowUp { message: at_bound.clone(), ..FollowUp::default() }).await;
    assert_eq!(reopened.unwrap().status, RunStatus::Running);
    let done = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    let fork = engine.conversation().edit_message(&done.id, &first, &at_bound).await.unwrap();
    let forked = engine.runs().messages(&fork.id).await.unwrap();
    assert!(matches!(&forked[0].body, MessageBody::Human { message } if message.len() == MAX_PROMPT_BYTES));
    let _ = engine.runs().cancel(&fork.id).await;
}

#[tokio::test]
async fn decisions_are_bounded() {
    let (engine, _dir) = engine().await;
    let email = json!({"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}});
    let (run, _) =
        engine.runs().create_run(scripted(json!([{"tool_calls": [email]}, {"text": "sent"}]))).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(run.status, RunStatus::Paused);
    let call = run.interruptions[0].call_id.clone();
    let text = |n: usize| Some("é".repeat(n));
    let big_args = json!({"to": "a@example.com", "subject": "s", "body": "x".repeat(MAX_DECISION_ARGUMENTS_BYTES)});
    let approvals = [
        (DecisionRequest { comment: text(MAX_DECISION_TEXT_CHARS + 1), ..Default::default() }, "comment"),
        (DecisionRequest { arguments: Some(big_args), ..Default::default() }, "arguments"),
    ];
    for (req, field) in approvals {
        match engine.approvals().approve(&run.id, &call, req, &crate::support::approver(&engine, "api").await).await {
            Err(EngineError::Invalid(msg)) => assert!(msg.contains(field), "{msg} / {field}"),
            other => panic!("{field}: expected Invalid, got {other:?}"),
        }
    }
    let reason = DecisionRequest { reason: text(MAX_DECISION_TEXT_CHARS + 1), ..Default::default() };
    match engine.approvals().reject(&run.id, &call, reason, &crate::support::approver(&engine, "api").await).await {
        Err(EngineError::Invalid(msg)) => assert!(msg.contains("reason") && msg.contains("4000"), "{msg}"),
        other => panic!("reason: expected Invalid, got {other:?}"),
    }
    assert_eq!(engine.runs().get_run(&run.id).await.unwrap().status, RunStatus::Paused, "no decision was recorded");
    let ok = DecisionRequest { comment: text(MAX_DECISION_TEXT_CHARS), ..Default::default() };
    let decided =
        engine.approvals().approve(&run.id, &call, ok, &crate::support::approver(&engine, "api").await).await.unwrap();
    assert_eq!(decided.approval.unwrap().comment.unwrap().chars().count(), MAX_DECISION_TEXT_CHARS);
}

#[tokio::test]
async fn prices_are_bounded() {
    let (engine, _dir) = engine().await;
    let price = |v: f64| PriceInput { input: v, output: 1.0, ..PriceInput::default() };
    let seeded = engine.traces().pricing("default").await.unwrap().prices.len();
    engine.traces().set_price("default", "m", price(MAX_PRICE)).await.unwrap();
    for bad in [MAX_PRICE + 0.01, -0.01, f64::NAN, f64::INFINITY] {
        match engine.traces().set_price("default", "m", price(bad)).await {
            Err(EngineError::Invalid(msg)) => assert!(msg.contains("`input`"), "{msg}"),
            other => panic!("{bad}: expected Invalid, got {other:?}"),
        }
    }
    engine.traces().set_price("default", &"m".repeat(MAX_PRICE_MODEL_CHARS), price(1.0)).await.unwrap();
    match engine.traces().set_price("default", &"m".repeat(MAX_PRICE_MODEL_CHARS + 1), price(1.0)).await {
        Err(EngineError::Invalid(msg)) => assert!(msg.contains("200"), "{msg}"),
        other => panic!("expected Invalid, got {other:?}"),
    }
    assert_eq!(
        engine.traces().pricing("default").await.unwrap().prices.len(),
        seeded + 2,
        "refused prices store nothing"
    );
}

#[tokio::test]
async fn list_queries_are_bounded() {
    let (engine, _dir) = engine().await;
    let ok =
        RunFilter { limit: Some(MAX_LIST_LIMIT), q: Some("q".repeat(MAX_QUERY_TEXT_CHARS)), ..RunFilter::default() };
    assert!(engine.runs().list_runs(&ok).await.unwrap().runs.is_empty());
    let refused = [
        (RunFilter { limit: Some(MAX_LIST_LIMIT + 1), ..RunFilter::default() }, "limit"),
        (RunFilter { limit: Some(0), ..RunFilter::default() }, "limit"),
        (RunFilter { q: Some("q".repeat(MAX_QUERY_TEXT_CHARS + 1)), ..RunFilter::default() }, "q is longer"),
        (RunFilter { tag: Some("t".repeat(MAX_QUERY_TEXT_CHARS + 1)), ..RunFilter::default() }, "tag is longer"),
    ];
    for (filter, field) in refused {
        match engine.runs().list_runs(&filter).await {
            Err(EngineError::Invalid(msg)) => assert!(msg.contains(field), "{msg} / {field}"),
            other => panic!("{field}: expected Invalid, got {other:?}"),
        }
    }
}
