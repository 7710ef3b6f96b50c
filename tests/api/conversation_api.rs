//! Follow-ups, edit-and-fork, family, state export/import and blobs over HTTP.

use axum::http::{header, StatusCode};
use serde_json::json;

use crate::support::app;

#[tokio::test]
async fn follow_up_then_fork_then_family() {
    let app = app().await;
    let run = app.finished_run(r#"{"initial_prompt": "What is 2 + 2?"}"#).await;
    let id = run["id"].as_str().unwrap();
    let reply = app.post_json(&format!("/api/runs/{id}/messages"), r#"{"message": "And 3 * 3?"}"#).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let done = app.engine.wait_until_settled(id, std::time::Duration::from_secs(20)).await.unwrap();
    assert!(done.result.unwrap().as_str().unwrap().contains("3 * 3 = 9"));
    let busy = app.post_json(&format!("/api/runs/{id}/messages"), r#"{"message": ""}"#).await;
    assert_eq!(busy.status, StatusCode::BAD_REQUEST);

    let messages = app.get(&format!("/api/runs/{id}/messages")).await.json();
    let first = messages["messages"][0]["id"].as_str().unwrap().to_owned();
    let fork =
        app.post_json(&format!("/api/runs/{id}/messages/{first}/edit"), r#"{"message": "What is 5 + 5?"}"#).await;
    assert_eq!(fork.status, StatusCode::CREATED, "{}", fork.text);
    let fork_id = fork.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(fork.json()["parent_run_id"], id);
    let family = app.get(&format!("/api/runs/{fork_id}/family")).await.json();
    assert_eq!(family["runs"].as_array().unwrap().len(), 2);
    let agent = messages["messages"][1]["id"].as_str().unwrap();
    let bad = app.post_json(&format!("/api/runs/{id}/messages/{agent}/edit"), r#"{"message": "x"}"#).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        app.post_json(&format!("/api/runs/{id}/messages/nope/edit"), r#"{"message": "x"}"#).await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn non_interactive_runs_refuse_follow_ups() {
    let app = app().await;
    let run = app.finished_run(r#"{"initial_prompt": "hi", "interactive": false}"#).await;
    let id = run["id"].as_str().unwrap();
    let reply = app.post_json(&format!("/api/runs/{id}/messages"), r#"{"message": "more"}"#).await;
    assert_eq!(reply.status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn state_export_import_and_blob_download() {
    let app = app().await;
    let run = app.finished_run(r#"{"initial_prompt": "What is 7 * 6?", "tags": {"k": "v"}}"#).await;
    let id = run["id"].as_str().unwrap();
    let export = app.get(&format!("/api/runs/{id}/state?download=1")).await;
    assert_eq!(export.status, StatusCode::OK);
    assert!(export.headers[header::CONTENT_DISPOSITION].to_str().unwrap().starts_with("attachment"));
    let doc = export.json();
    assert_eq!(doc["$schemaVersion"], "runlens.run-state.v1");

    let imported = app.post_json("/api/runs/import?max_turns=3", &doc.to_string()).await;
    assert_eq!(imported.status, StatusCode::CREATED, "{}", imported.text);
    assert_eq!(imported.json()["max_turns"], 3);
    assert_eq!(imported.json()["result"], run["result"]);

    let mut bad = doc.clone();
    bad["$schemaVersion"] = json!("nope");
    let refused = app.post_json("/api/runs/import", &bad.to_string()).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(refused.json()["error"].as_str().unwrap().contains("$schemaVersion"));
    let kept = app.post_json("/api/runs/import?keep_id=true", &doc.to_string()).await;
    assert_eq!(kept.status, StatusCode::CONFLICT);
    assert_eq!(app.get("/api/blobs/nope").await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.get("/api/runs/nope/state").await.status, StatusCode::NOT_FOUND);
}
