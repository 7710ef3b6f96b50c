//! A project's retention over HTTP: admins read and set it (audited), the
//! job's pass deletes what it no longer keeps, and a bad policy is a 400
//! that changes nothing.

use axum::http::{Method, StatusCode};
use runlens_engine::model::Role;
use serde_json::{json, Value};

use crate::agents_api::refusal;
use crate::support::app;

fn put(body: Value) -> (Method, &'static str, Option<String>) {
    (Method::PUT, "/api/retention", Some(body.to_string()))
}

#[tokio::test]
async fn an_admin_sets_the_policy_and_a_pass_deletes_what_it_no_longer_keeps() {
    let app = app().await;
    let none = app.get("/api/retention").await;
    assert_eq!((none.status, none.json()), (StatusCode::OK, json!({"max_age_days": null, "max_runs": null})));
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(app.finished_run(&json!({"initial_prompt": format!("run {i}")}).to_string()).await["id"].clone());
    }
    let (method, uri, body) = put(json!({"max_runs": 1}));
    let set = app.send(method, uri, body.as_deref(), "application/json").await;
    assert_eq!(
        (set.status, set.json()),
        (StatusCode::OK, json!({"max_age_days": null, "max_runs": 1})),
        "{}",
        set.text
    );
    assert_eq!(app.get("/api/retention").await.json()["max_runs"], 1);

    let later = chrono::Utc::now() + chrono::Duration::minutes(2);
    app.engine.traces().flush_events().await;
    let report = app.engine.prune_as_of("default", later).await.unwrap();
    assert_eq!(report.runs_deleted, 2);
    let runs = app.get("/api/runs").await.json();
    assert_eq!(runs["runs"].as_array().unwrap().iter().map(|r| r["id"].clone()).collect::<Vec<_>>(), [ids[2].clone()]);
    assert_eq!(app.get(&format!("/api/runs/{}", ids[0].as_str().unwrap())).await.status, StatusCode::NOT_FOUND);
    let audit = app.get("/api/audit").await.json();
    let actions: Vec<&str> =
        audit["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert!(actions.contains(&"retention_set") && actions.contains(&"runs_pruned"), "{actions:?}");

    // Nulls: nothing is deleted any more.
    let (method, uri, body) = put(json!({}));
    assert_eq!(app.send(method, uri, body.as_deref(), "application/json").await.json()["max_runs"], Value::Null);
}

#[tokio::test]
async fn a_bad_policy_is_a_400_and_only_admins_set_one() {
    let app = app().await;
    for (body, expected) in [
        (json!({"max_runs": 0}), "max_runs must be 1 to"),
        (json!({"max_age_days": 36501}), "max_age_days must be 1 to 36500"),
        (json!({"max_age_days": "30"}), "expected u32"),
        (json!({"max_age_days": -1}), "expected u32"),
        (json!({"keep": 3}), "keep"),
    ] {
        let (method, uri, text) = put(body.clone());
        let reply = app.send(method, uri, text.as_deref(), "application/json").await;
        assert!(refusal(&reply, StatusCode::BAD_REQUEST).contains(expected), "{body}: {}", reply.text);
    }
    assert_eq!(app.get("/api/retention").await.json(), json!({"max_age_days": null, "max_runs": null}));
    let operator = app.key_of("default", Role::Operator).await;
    let (method, uri, text) = put(json!({"max_runs": 5}));
    assert_eq!(app.as_key(&operator, method, uri, text.as_deref()).await.status, StatusCode::FORBIDDEN);
    assert_eq!(app.as_key(&operator, Method::GET, "/api/retention", None).await.status, StatusCode::FORBIDDEN);
}
