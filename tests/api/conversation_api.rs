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
    let done = app.engine.runs().wait_until_settled(id, std::time::Duration::from_secs(20)).await.unwrap();
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

#[tokio::test]
async fn an_imported_email_waits_for_approval() {
    let app = app().await;
    let body = r#"{"initial_prompt": "send email please", "tools": ["send_email"],
                   "model_settings": {"script": [{"tool_calls": [{"name": "send_email",
                       "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}}]}, {"text": "sent"}]}}"#;
    let paused = app.finished_run(body).await;
    assert_eq!(paused["status"], "paused", "{paused}");
    let id = paused["id"].as_str().unwrap();
    let mut doc = app.get(&format!("/api/runs/{id}/state")).await.json();
    doc["run"]["status"] = json!("running");
    doc["steps"][0]["tool_calls"][0]["status"] = json!("pending");
    let imported = app.post_json("/api/runs/import", &doc.to_string()).await;
    assert_eq!(imported.status, StatusCode::CREATED, "{}", imported.text);
    let copy = imported.json();
    assert_eq!(copy["status"], "paused");
    assert_eq!(copy["interruptions"].as_array().unwrap().len(), 1);
    let outbox = app.get("/api/outbox").await.json();
    assert_eq!(outbox["emails"].as_array().map_or(0, Vec::len), 0, "{outbox}");
}

#[tokio::test]
async fn concurrent_imports_are_bounded() {
    use axum::body::Body;
    use axum::http::Request;
    use runlens::server::routes::conversation::{IMPORT_RETRY_AFTER_S, MAX_CONCURRENT_IMPORTS};
    use tower::ServiceExt;

    let app = app().await;
    let run = app.finished_run(r#"{"initial_prompt": "What is 7 * 6?"}"#).await;
    let doc = app.get(&format!("/api/runs/{}/state", run["id"].as_str().unwrap())).await.json();
    // Imports whose bodies are still arriving hold every place.
    let mut senders = Vec::new();
    let mut holders = Vec::new();
    for _ in 0..MAX_CONCURRENT_IMPORTS {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<axum::body::Bytes, std::io::Error>>(1);
        let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (b, rx)) });
        let req = Request::post("/api/runs/import")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::AUTHORIZATION, app.bearer())
            .body(Body::from_stream(stream))
            .unwrap();
        holders.push(tokio::spawn(app.router.clone().oneshot(req)));
        senders.push(tx);
    }
    let mut busy = None;
    for _ in 0..10_000 {
        let probe = app.post_json("/api/runs/import", "{}").await;
        if probe.status != StatusCode::BAD_REQUEST {
            busy = Some(probe);
            break;
        }
        tokio::task::yield_now().await;
    }
    let busy = busy.expect("the holders took every place");
    assert_eq!(busy.status, StatusCode::SERVICE_UNAVAILABLE, "{}", busy.text);
    assert_eq!(busy.headers[header::RETRY_AFTER], IMPORT_RETRY_AFTER_S.to_string());
    assert!(busy.json()["error"].as_str().unwrap().contains("importing"));
    // Their bodies end: each import answers, and its place is free again.
    for tx in &senders {
        tx.send(Ok(doc.to_string().into())).await.unwrap();
    }
    drop(senders);
    for h in holders {
        assert_eq!(h.await.unwrap().unwrap().status(), StatusCode::CREATED);
    }
    let after = app.post_json("/api/runs/import", &doc.to_string()).await;
    assert_eq!(after.status, StatusCode::CREATED, "{}", after.text);
}

#[tokio::test]
async fn an_import_over_the_limit_is_a_json_413() {
    let app = app().await;
    let body = format!("{{\"pad\": \"{}\"}}", "x".repeat(runlens::server::routes::conversation::MAX_IMPORT_BYTES));
    let reply = app.post_json("/api/runs/import", &body).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(reply.json()["error"].as_str().unwrap().contains("64 MiB"));
}
