//! Input bounds over HTTP: one table of requests just past a bound, each a
//! 400 whose `{"error"}` names the field and the bound, with nothing stored;
//! and the same requests at the bound accepted.

use axum::http::{Method, StatusCode};
use runlens_engine::model::limits::*;
use runlens_engine::model::RunFilter;
use serde_json::{json, Value};

use crate::support::*;

/// (case, method, uri, body at the bound, body past it, what the error names)
type Case = (&'static str, Method, String, String, String, Vec<String>);

fn create(patch: Value) -> String {
    let mut body = json!({"initial_prompt": "bounded", "tools": ["calculator"]});
    for (k, v) in patch.as_object().unwrap() {
        body[k] = v.clone();
    }
    body.to_string()
}

#[tokio::test]
async fn every_bound_is_a_400_naming_the_field_and_the_bound() {
    let app = app().await;
    let ms = |v: Value| json!({"model_settings": v});
    let settled =
        app.finished_run(r#"{"initial_prompt": "hi", "model_settings": {"script": [{"text": "one"}]}}"#).await;
    let id = settled["id"].as_str().unwrap().to_owned();
    let first = app.get(&format!("/api/runs/{id}/messages")).await.json();
    let first = first["messages"].get(0).or_else(|| first.get(0)).unwrap()["id"].as_str().unwrap().to_owned();
    let prompt = |n: usize| "a".repeat(n);
    let follow = format!("/api/runs/{id}/messages");
    let edit = format!("/api/runs/{id}/messages/{first}/edit");

    let table: Vec<Case> = vec![
        (
            "timeout_s",
            Method::POST,
            "/api/runs".into(),
            create(json!({"approval": {"tools": ["calculator"], "timeout_s": MAX_APPROVAL_TIMEOUT_S}})),
            create(json!({"approval": {"tools": ["calculator"], "timeout_s": 10_000_000_000_000u64}})),
            vec!["approval.timeout_s".into(), MAX_APPROVAL_TIMEOUT_S.to_string()],
        ),
        (
            "approval's form",
            Method::POST,
            "/api/runs".into(),
            create(json!({"approval": "all"})),
            create(json!({"approval": 5})),
            vec!["approval".into(), r#"must be "all" or an object"#.into()],
        ),
        (
            "approval's tools",
            Method::POST,
            "/api/runs".into(),
            create(json!({"approval": {"tools": "all", "timeout_s": 60}})),
            create(json!({"approval": {"tools": "some"}})),
            vec!["approval".into()],
        ),
        (
            "latency_ms",
            Method::POST,
            "/api/runs".into(),
            create(ms(json!({"latency_ms": 0}))),
            create(ms(json!({"latency_ms": MAX_LATENCY_MS + 1}))),
            vec!["model_settings.latency_ms".into(), MAX_LATENCY_MS.to_string()],
        ),
        (
            "temperature",
            Method::POST,
            "/api/runs".into(),
            create(ms(json!({"temperature": 2}))),
            create(ms(json!({"temperature": 1e300}))),
            vec!["model_settings.temperature".into(), "0 to 2".into()],
        ),
        (
            "unknown setting",
            Method::POST,
            "/api/runs".into(),
            create(ms(json!({"seed": 7}))),
            create(ms(json!({"bogus": 1}))),
            vec!["model_settings.bogus".into()],
        ),
        (
            "max_turns",
            Method::POST,
            "/api/runs".into(),
            create(json!({"max_turns": MAX_TURNS})),
            create(json!({"max_turns": MAX_TURNS + 1})),
            vec!["max_turns".into(), MAX_TURNS.to_string()],
        ),
        (
            "initial_prompt",
            Method::POST,
            "/api/runs".into(),
            create(json!({"initial_prompt": prompt(MAX_PROMPT_BYTES)})),
            create(json!({"initial_prompt": prompt(1_900_000)})),
            vec!["initial_prompt".into(), MAX_PROMPT_BYTES.to_string()],
        ),
        (
            "result_schema",
            Method::POST,
            "/api/runs".into(),
            create(json!({"result_schema": {"type": "object"}})),
            create(json!({"result_schema": {"type": "object", "description": prompt(MAX_RESULT_SCHEMA_BYTES)}})),
            vec!["result_schema".into(), MAX_RESULT_SCHEMA_BYTES.to_string()],
        ),
        (
            "tags",
            Method::POST,
            "/api/runs".into(),
            create(
                json!({"tags": (0..MAX_TAGS).map(|i| (format!("k{i}"), json!("v"))).collect::<serde_json::Map<_, _>>()}),
            ),
            create(
                json!({"tags": (0..=MAX_TAGS).map(|i| (format!("k{i}"), json!("v"))).collect::<serde_json::Map<_, _>>()}),
            ),
            vec!["tags".into(), MAX_TAGS.to_string()],
        ),
        (
            "edit message",
            Method::POST,
            edit,
            json!({"message": prompt(MAX_PROMPT_BYTES)}).to_string(),
            json!({"message": prompt(MAX_PROMPT_BYTES + 1)}).to_string(),
            vec!["message".into(), MAX_PROMPT_BYTES.to_string()],
        ),
        (
            "price",
            Method::PUT,
            "/api/prices/some-model".into(),
            json!({"input": MAX_PRICE, "output": 1}).to_string(),
            json!({"input": 1, "output": MAX_PRICE * 10.0}).to_string(),
            vec!["output".into(), MAX_PRICE.to_string()],
        ),
    ];
    for (case, method, uri, ok, bad, names) in table {
        let runs_before = app.engine.runs().list_runs(&RunFilter::default()).await.unwrap().runs.len();
        let reply = app.send(method.clone(), &uri, Some(&bad), "application/json").await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{case}: {:.300}", reply.text);
        let error = reply.json()["error"].as_str().unwrap_or_else(|| panic!("{case}: {}", reply.text)).to_owned();
        for name in &names {
            assert!(error.contains(name.as_str()), "{case}: `{error}` should name `{name}`");
        }
        let runs_after = app.engine.runs().list_runs(&RunFilter::default()).await.unwrap().runs.len();
        assert_eq!(runs_after, runs_before, "{case}: a refused request stores nothing");

        let reply = app.send(method, &uri, Some(&ok), "application/json").await;
        assert!(reply.status.is_success(), "{case} at the bound: {} {:.300}", reply.status, reply.text);
        if let Some(id) = reply.json()["id"].as_str() {
            let _ = app.engine.runs().cancel(id).await;
        }
    }

    // A follow-up past the bound is refused and leaves the run done.
    let reply = app.post_json(&follow, &json!({"message": prompt(MAX_PROMPT_BYTES + 1)}).to_string()).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{:.300}", reply.text);
    assert!(reply.json()["error"].as_str().unwrap().contains("message is 262145 bytes"), "{}", reply.text);
    assert_eq!(app.get(&format!("/api/runs/{id}")).await.json()["status"], "done");
}
