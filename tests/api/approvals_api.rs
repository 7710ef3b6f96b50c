//! The approvals API: decisions, conflicts, the inbox, and a race of 100
//! concurrent decisions on one call.

use axum::http::StatusCode;
use futures::future::join_all;
use serde_json::json;

use crate::support::{app, App};

/// Starts a run that pauses on a send_email call; returns (run id, call id).
pub(crate) async fn paused_run(app: &App) -> (String, String) {
    let body = json!({"initial_prompt": "mail", "model_settings": {"script": [
        {"tool_calls": [{"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}}]},
        {"text": "done"}]}});
    let reply = app.post_json("/api/runs", &body.to_string()).await;
    let id = reply.json()["id"].as_str().unwrap().to_owned();
    let run = app.engine.wait_until_settled(&id, std::time::Duration::from_secs(20)).await.unwrap();
    assert_eq!(run.status.as_str(), "paused");
    let got = app.get(&format!("/api/runs/{id}")).await.json();
    let call = got["interruptions"][0]["call_id"].as_str().unwrap().to_owned();
    assert_eq!(got["interruptions"][0]["tool_name"], "send_email");
    (id, call)
}

#[tokio::test]
async fn approve_reject_and_the_inbox() {
    let app = app().await;
    let (id, call) = paused_run(&app).await;
    let (id2, call2) = paused_run(&app).await;
    let inbox = app.get("/api/approvals?status=pending").await.json();
    let listed: Vec<&str> =
        inbox["approvals"].as_array().unwrap().iter().map(|a| a["run_id"].as_str().unwrap()).collect();
    assert_eq!(listed, [id.as_str(), id2.as_str()], "oldest first");
    assert!(inbox["approvals"][0]["age_s"].is_number());

    let ok = app.post_json(&format!("/api/runs/{id}/tool-calls/{call}/approve"), "").await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    assert_eq!(ok.json()["approval"]["decided_by"], "tests", "the key's name");
    assert!(ok.json()["approval"]["decided_by_id"].as_str().unwrap().starts_with("key:key_"), "{}", ok.text);
    let body = r#"{"reason": "not today"}"#;
    let no = app.post_json(&format!("/api/runs/{id2}/tool-calls/{call2}/reject"), body).await;
    assert_eq!(no.json()["approval"]["comment"], "not today");

    let again = app.post_json(&format!("/api/runs/{id}/tool-calls/{call}/reject"), "").await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_eq!(again.json()["decision"]["decision"], "approved");

    let bad = app.post_json(&format!("/api/runs/{id}/tool-calls/{call}/approve"), "{oops").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        app.post_json(&format!("/api/runs/{id}/tool-calls/nope/approve"), "").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(app.post_json("/api/runs/nope/tool-calls/x/approve", "").await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.get("/api/approvals?status=done").await.status, StatusCode::BAD_REQUEST);

    // The decisions made, newest first, with who made them, in pages.
    let decided = app.get("/api/approvals?status=decided").await.json();
    let decisions = decided["decisions"].as_array().unwrap();
    let order: Vec<(&str, &str)> =
        decisions.iter().map(|d| (d["run_id"].as_str().unwrap(), d["decision"].as_str().unwrap())).collect();
    assert_eq!(order, [(id2.as_str(), "rejected"), (id.as_str(), "approved")], "newest first");
    assert_eq!(decisions[0]["call_id"], call2.as_str());
    assert_eq!(decisions[0]["decided_by"], "tests");
    assert!(decisions[0]["decided_by_id"].as_str().unwrap().starts_with("key:"));
    assert_eq!(decisions[0]["comment"], "not today");
    assert!(decided["next_cursor"].is_null());
    let first = app.get("/api/approvals?status=decided&limit=1").await.json();
    assert_eq!(first["decisions"][0]["run_id"], id2.as_str());
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let uri = format!("/api/approvals?status=decided&limit=1&cursor={}", crate::support::urlencode(cursor));
    let second = app.get(&uri).await.json();
    assert_eq!(second["decisions"][0]["run_id"], id.as_str());
    assert!(second["next_cursor"].is_null(), "{second}");
    for bad in ["limit=0", "limit=201", "cursor=nonsense"] {
        let reply = app.get(&format!("/api/approvals?status=decided&{bad}")).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{bad}: {}", reply.text);
    }
    // The inbox is empty now.
    assert_eq!(app.get("/api/approvals").await.json()["approvals"], serde_json::json!([]));
}

#[tokio::test]
async fn deciding_a_call_of_a_run_that_is_not_paused_is_409() {
    let app = app().await;
    let run = app.finished_run(r#"{"initial_prompt": "What is 1 + 2?"}"#).await;
    let id = run["id"].as_str().unwrap();
    let steps = app.get(&format!("/api/runs/{id}/steps")).await.json();
    let call = steps["steps"][0]["tool_calls"][0]["id"].as_str().unwrap().to_owned();
    let reply = app.post_json(&format!("/api/runs/{id}/tool-calls/{call}/approve"), "").await;
    assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_100_concurrent_decisions_exactly_one_wins() {
    let app = std::sync::Arc::new(app().await);
    let (id, call) = paused_run(&app).await;
    let requests = (0..100).map(|i| {
        let verb = if i % 2 == 0 { "approve" } else { "reject" };
        let uri = format!("/api/runs/{id}/tool-calls/{call}/{verb}");
        let app = app.clone();
        tokio::spawn(async move { app.post_json(&uri, "").await })
    });
    let replies: Vec<_> = join_all(requests).await.into_iter().map(Result::unwrap).collect();
    let ok = replies.iter().filter(|r| r.status == StatusCode::OK).count();
    let conflicts = replies.iter().filter(|r| r.status == StatusCode::CONFLICT).count();
    assert_eq!((ok, conflicts), (1, 99), "{:?}", replies.iter().map(|r| r.status).collect::<Vec<_>>());
    let winner = replies.iter().find(|r| r.status == StatusCode::OK).unwrap().json();
    for loser in replies.iter().filter(|r| r.status == StatusCode::CONFLICT) {
        assert_eq!(loser.json()["decision"]["decision"], winner["approval"]["decision"]);
    }
    let stored = crate::support::sql_rows(&app.db_url, "SELECT run_id FROM approval_decisions").await;
    assert_eq!(stored.len(), 1);
}
