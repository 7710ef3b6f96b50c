//! Sessions over HTTP: `session_id` and `user_id` at create, the runs
//! list's `session_id` and `user` filters, `GET /api/sessions/{id}`, and the
//! session an ingested trace names; bad ids are a 400 that stores nothing.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::otlp_api::fixture_bodies;
use crate::support::app;

fn prompts(runs: &Value) -> Vec<String> {
    runs.as_array().unwrap().iter().map(|r| r["initial_prompt"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn a_sessions_runs_are_listed_oldest_first_with_their_totals() {
    let app = app().await;
    for (prompt, session, user) in
        [("first", "chat-7", "ada"), ("other chat", "chat-8", "ada"), ("second", "chat-7", "bob")]
    {
        let body = json!({"initial_prompt": prompt, "session_id": session, "user_id": user}).to_string();
        app.finished_run(&body).await;
    }
    let run = app.get("/api/runs?session_id=chat-7").await;
    assert_eq!(run.status, StatusCode::OK, "{}", run.text);
    assert_eq!(prompts(&run.json()["runs"]), ["second", "first"], "newest first, as every list");
    assert_eq!(run.json()["runs"][0]["session_id"], "chat-7");
    assert_eq!(run.json()["runs"][0]["end_user"], "bob");
    assert_eq!(prompts(&app.get("/api/runs?user=ada").await.json()["runs"]), ["other chat", "first"]);
    assert_eq!(prompts(&app.get("/api/runs?session_id=chat-7&user=ada").await.json()["runs"]), ["first"]);
    assert!(prompts(&app.get("/api/runs?session_id=&user=").await.json()["runs"]).len() == 3, "empty is no filter");

    let session = app.get("/api/sessions/chat-7").await;
    assert_eq!(session.status, StatusCode::OK, "{}", session.text);
    let s = session.json();
    assert_eq!(s["session_id"], "chat-7");
    assert_eq!(prompts(&s["runs"]), ["first", "second"], "oldest first");
    assert_eq!(s["costs_usd"].as_array().unwrap().len(), 2);
    assert_eq!(s["truncated"], false);
    assert_eq!(s["totals"]["runs"], 2);
    assert_eq!(s["totals"]["statuses"], json!({"done": 2}));
    assert_eq!(s["totals"]["end_users"], json!(["ada", "bob"]));
    let tokens: u64 = s["runs"].as_array().unwrap().iter().map(|r| r["usage"]["total_tokens"].as_u64().unwrap()).sum();
    assert_eq!(s["totals"]["usage"]["total_tokens"], tokens);

    // A session no run has is empty, not absent.
    let none = app.get("/api/sessions/no-such-chat").await;
    assert_eq!(none.status, StatusCode::OK);
    assert_eq!((none.json()["runs"].as_array().unwrap().len(), none.json()["totals"]["runs"].as_u64()), (0, Some(0)));
}

#[tokio::test]
async fn bad_session_ids_are_a_400_that_stores_nothing() {
    let app = app().await;
    let long = "s".repeat(129);
    for body in [
        json!({"initial_prompt": "x", "session_id": ""}),
        json!({"initial_prompt": "x", "session_id": long}),
        json!({"initial_prompt": "x", "session_id": "a\u{7}b"}),
        json!({"initial_prompt": "x", "user_id": " "}),
        json!({"initial_prompt": "x", "session_id": 7}),
    ] {
        let reply = app.post_json("/api/runs", &body.to_string()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}: {}", reply.text);
    }
    assert!(app.get("/api/runs").await.json()["runs"].as_array().unwrap().is_empty(), "nothing was created");
    for uri in
        [format!("/api/runs?session_id={long}"), format!("/api/runs?user={long}"), format!("/api/sessions/{long}")]
    {
        let reply = app.get(&uri).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{uri}: {}", reply.text);
    }
    let control = app.get("/api/sessions/a%07b").await;
    assert_eq!(control.status, StatusCode::BAD_REQUEST, "{}", control.text);
}

#[tokio::test]
async fn an_ingested_trace_joins_the_session_its_spans_name() {
    let app = app().await;
    for body in fixture_bodies("vercel-ai") {
        let reply = crate::otlp_api::send_protobuf(&app, body).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    }
    let s = app.get("/api/sessions/session-42").await.json();
    let names: Vec<&str> = s["runs"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["weather-agent", "weather-summary"], "both calls of the recording, oldest first");
    assert_eq!(s["totals"]["end_users"], json!(["user-7"]));
    assert_eq!(s["totals"]["usage"]["input_tokens"], 43 + 20);
    let by_user = app.get("/api/runs?user=user-7").await.json();
    assert_eq!(by_user["runs"].as_array().unwrap().len(), 2);
}

/// The session page and the runs list's session chips, rendered on the
/// server: runs oldest first, ids escaped, the filters kept by the form.
#[tokio::test]
async fn the_session_page_lists_its_runs_and_the_list_links_to_it() {
    let app = app().await;
    let session = "chat <b>9</b>";
    for prompt in ["opening question", "follow-up question"] {
        let body = json!({"initial_prompt": prompt, "session_id": session, "user_id": "ada"}).to_string();
        app.finished_run(&body).await;
    }
    let page = app.get("/sessions/chat%20%3Cb%3E9%3C%2Fb%3E").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(page.text.contains("chat &lt;b&gt;9&lt;/b&gt;"), "the id is escaped");
    assert!(!page.text.contains("<b>9</b>"));
    let (first, second) = (page.text.find("opening question").unwrap(), page.text.find("follow-up question").unwrap());
    assert!(first < second, "oldest first");
    assert!(page.text.contains(r#"data-testid="session-runs">2<"#), "{}", page.text);
    assert!(page.text.contains(r#"data-testid="session-users">ada<"#));

    let list = app.get("/runs").await;
    assert!(list.text.contains(r#"href="/sessions/chat%20%3Cb%3E9%3C%2Fb%3E""#), "the chip links the session");
    assert!(list.text.contains(r#"href="/runs?user=ada""#), "the chip links the user's runs");
    let filtered = app.get("/runs?user=ada&status=done").await;
    assert!(filtered.text.contains(r#"type="hidden" name="user" value="ada""#), "the form keeps the filter");
    assert!(filtered.text.contains(r#"href="/runs?status=done""#), "× drops only that filter");

    let grouped = app.get("/runs?group=session").await;
    assert!(grouped.text.contains(r#"data-session="chat &lt;b&gt;9&lt;/b&gt;""#), "{}", grouped.text);
    assert!(grouped.text.contains(r#"<option value="session" selected"#));

    let empty = app.get("/sessions/nobody").await;
    assert!(empty.text.contains(r#"data-testid="session-empty""#));
}
