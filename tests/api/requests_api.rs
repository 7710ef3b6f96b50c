//! Approvals and questions for agents runlens does not run, over the API:
//! an operator key asks (201, a retry 200 with the same request, another
//! body with the key 409), a long-poll answers as soon as an approver
//! decides (edited arguments, a reason), a timeout rejects with "timed out",
//! a viewer cannot ask and an operator cannot decide (403), another
//! project's key gets 404 for everything, bad input is a 400 that stores
//! nothing, lists page, the badge counts requests, and the SSE stream ends
//! with the decision.

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use runlens_engine::model::{Actor, Role};
use serde_json::{json, Value};

use crate::support::{app, App, Reply};

async fn key(app: &App, project: &str, role: Role) -> String {
    let name = format!("{project} {role}");
    let (_, secret) = app.engine.identity().create_key(&name, Some(project), role, &Actor::system()).await.unwrap();
    format!("Bearer {secret}")
}

async fn as_key(app: &App, key: &str, method: Method, uri: &str, body: Option<&Value>) -> Reply {
    let body = body.map(Value::to_string);
    app.send_with(method, uri, body.as_deref(), "application/json", &[("authorization", key)]).await
}

fn error(reply: &Reply, status: StatusCode) -> String {
    assert_eq!(reply.status, status, "{}", reply.text);
    reply.json()["error"].as_str().unwrap().to_owned()
}

fn ask(key: &str) -> Value {
    json!({"tool": "send_email", "arguments": {"to": "ada@example.com", "subject": "Refund"},
           "context": "order 1042", "run": {"external_id": "conv-7", "name": "Support agent"},
           "idempotency_key": key})
}

#[tokio::test]
async fn an_agent_asks_waits_and_receives_the_edited_decision() {
    let app = Arc::new(app().await);
    let agent = key(&app, "default", Role::Operator).await;
    let approver = key(&app, "default", Role::Approver).await;
    let created = as_key(&app, &agent, Method::POST, "/api/approval-requests", Some(&ask("k1"))).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let r = created.json();
    let id = r["id"].as_str().unwrap().to_owned();
    assert_eq!((r["status"].as_str(), r["requested_by"].as_str()), (Some("pending"), Some("default operator")));
    // A retry is the same request.
    let again = as_key(&app, &agent, Method::POST, "/api/approval-requests", Some(&ask("k1"))).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.json()["id"], json!(id));
    let mut changed = ask("k1");
    changed["arguments"]["to"] = json!("eve@example.com");
    let conflict = as_key(&app, &agent, Method::POST, "/api/approval-requests", Some(&changed)).await;
    assert!(error(&conflict, StatusCode::CONFLICT).contains("different body"));
    // The badge counts it.
    let count = app.get("/api/approvals/count").await.json();
    assert_eq!(count["requests"], json!(1));
    // Long-poll, then decide.
    let poll = {
        let app = app.clone();
        let agent = agent.clone();
        let uri = format!("/api/approval-requests/{id}?wait=30");
        tokio::spawn(async move { as_key(&app, &agent, Method::GET, &uri, None).await })
    };
    let body = json!({"arguments": {"to": "ada@example.org", "subject": "Refund"}, "comment": "fixed the domain"});
    let decided =
        as_key(&app, &approver, Method::POST, &format!("/api/approval-requests/{id}/approve"), Some(&body)).await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.text);
    let seen = poll.await.unwrap();
    assert_eq!(seen.status, StatusCode::OK);
    let seen = seen.json();
    assert_eq!(seen["status"], "approved");
    assert_eq!(seen["decision"]["arguments"]["to"], "ada@example.org");
    assert_eq!(seen["decision"]["edited"], json!(true));
    assert_eq!(seen["decision"]["decided_by"], "default approver");
    // A second decision is a 409 naming the first.
    let late = as_key(&app, &approver, Method::POST, &format!("/api/approval-requests/{id}/reject"), None).await;
    assert!(error(&late, StatusCode::CONFLICT).contains("already approved by default approver"));
    assert_eq!(app.get("/api/approvals/count").await.json()["requests"], json!(0));
    // The decision is audited with who made it.
    let audit = app.get("/api/audit").await.json();
    assert!(audit.to_string().contains(&id), "{audit}");
}

#[tokio::test]
async fn a_rejection_reaches_the_agent_with_its_reason_and_a_timeout_with_timed_out() {
    let app = app().await;
    let agent = key(&app, "default", Role::Operator).await;
    let r = as_key(&app, &agent, Method::POST, "/api/approval-requests", Some(&ask("r1"))).await.json();
    let id = r["id"].as_str().unwrap();
    let reason = json!({"reason": "not this customer"});
    let rejected = app.post_json(&format!("/api/approval-requests/{id}/reject"), &reason.to_string()).await;
    assert_eq!(rejected.status, StatusCode::OK, "{}", rejected.text);
    let seen = as_key(&app, &agent, Method::GET, &format!("/api/approval-requests/{id}?wait=5"), None).await.json();
    assert_eq!(
        (seen["status"].as_str(), seen["decision"]["reason"].as_str()),
        (Some("rejected"), Some("not this customer"))
    );

    let mut timed = ask("t1");
    timed["timeout_s"] = json!(1);
    let r = as_key(&app, &agent, Method::POST, "/api/approval-requests", Some(&timed)).await.json();
    let id = r["id"].as_str().unwrap();
    let seen = as_key(&app, &agent, Method::GET, &format!("/api/approval-requests/{id}?wait=30"), None).await.json();
    assert_eq!(seen["status"], "rejected");
    assert_eq!(seen["decision"]["reason"], "timed out");
    assert_eq!(seen["decision"]["decided_by"], "runlens");
}

#[tokio::test]
async fn roles_and_projects_are_enforced() {
    let app = app().await;
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let viewer = key(&app, "default", Role::Viewer).await;
    let operator = key(&app, "default", Role::Operator).await;
    let stranger = key(&app, "other", Role::Admin).await;
    let refused = as_key(&app, &viewer, Method::POST, "/api/approval-requests", Some(&ask("v"))).await;
    assert!(error(&refused, StatusCode::FORBIDDEN).contains("operator"));
    let r = as_key(&app, &operator, Method::POST, "/api/approval-requests", Some(&ask("o"))).await.json();
    let id = r["id"].as_str().unwrap();
    // The operator that asked cannot decide its own request.
    let own = as_key(&app, &operator, Method::POST, &format!("/api/approval-requests/{id}/approve"), None).await;
    assert!(error(&own, StatusCode::FORBIDDEN).contains("approver"));
    // A viewer reads it.
    let read = as_key(&app, &viewer, Method::GET, &format!("/api/approval-requests/{id}"), None).await;
    assert_eq!(read.status, StatusCode::OK);
    // Another project's key: not found, whatever it tries; its list is empty.
    for (method, uri) in [
        (Method::GET, format!("/api/approval-requests/{id}")),
        (Method::GET, format!("/api/approval-requests/{id}/events")),
        (Method::POST, format!("/api/approval-requests/{id}/approve")),
        (Method::POST, format!("/api/approval-requests/{id}/reject")),
    ] {
        let reply = as_key(&app, &stranger, method, &uri, None).await;
        assert!(error(&reply, StatusCode::NOT_FOUND).contains("not found"), "{uri}");
    }
    let list = as_key(&app, &stranger, Method::GET, "/api/approval-requests", None).await.json();
    assert_eq!(list["requests"], json!([]));
    // A question id on an approval path, and the other way round: not found.
    let wrong = app.get(&format!("/api/questions/{id}")).await;
    assert_eq!(wrong.status, StatusCode::NOT_FOUND);
    assert_eq!(app.get("/api/approval-requests/apr_nope").await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn bad_input_is_a_400_and_stores_nothing() {
    let app = app().await;
    let cases = [
        (json!({"tool": "x", "arguments": [], "run": {"name": "a"}, "idempotency_key": "k"}), "arguments"),
        (json!({"tool": "x", "arguments": {}, "run": {"name": "a"}}), "idempotency_key"),
        (json!({"tool": "", "arguments": {}, "run": {"name": "a"}, "idempotency_key": "k"}), "tool"),
        (
            json!({"tool": "x", "arguments": {}, "run": {"name": "a"}, "idempotency_key": "k", "timeout_s": 0}),
            "timeout_s",
        ),
        (
            json!({"tool": "x", "arguments": {}, "run": {"name": "a", "trace_id": "xyz"}, "idempotency_key": "k"}),
            "trace_id",
        ),
        (
            json!({"tool": "x", "arguments": {}, "run": {"name": "a"}, "idempotency_key": "k", "callback_url": "http://127.0.0.1/x"}),
            "callback_url",
        ),
        (json!({"tool": "x", "arguments": {}, "run": {"name": "a"}, "idempotency_key": "k", "extra": 1}), "extra"),
    ];
    for (body, field) in cases {
        let reply = app.post_json("/api/approval-requests", &body.to_string()).await;
        assert!(error(&reply, StatusCode::BAD_REQUEST).contains(field), "{field}: {}", reply.text);
    }
    let q = app.post_json("/api/questions", &json!({"question": "?", "choices": ["a"]}).to_string()).await;
    assert!(error(&q, StatusCode::BAD_REQUEST).contains("choices"));
    assert_eq!(app.get("/api/approval-requests").await.json()["requests"], json!([]));
    assert_eq!(app.get("/api/questions").await.json()["requests"], json!([]));
    assert_eq!(app.get("/api/approval-requests?wait=1").await.status, StatusCode::BAD_REQUEST);
    let r = app.post_json("/api/approval-requests", &ask("w").to_string()).await.json();
    let id = r["id"].as_str().unwrap();
    assert_eq!(app.get(&format!("/api/approval-requests/{id}?wait=31")).await.status, StatusCode::BAD_REQUEST);
    let bad_edit = app.post_json(&format!("/api/approval-requests/{id}/approve"), r#"{"arguments": [1]}"#).await;
    assert!(error(&bad_edit, StatusCode::BAD_REQUEST).contains("arguments"));
    assert_eq!(app.get(&format!("/api/approval-requests/{id}")).await.json()["status"], "pending");
}

#[tokio::test]
async fn questions_are_answered_and_lists_page() {
    let app = app().await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let body = json!({"question": format!("Plan {i}?"), "choices": ["Team", "Enterprise"], "idempotency_key": format!("q{i}")});
        let reply = app.post_json("/api/questions", &body.to_string()).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
        ids.push(reply.json()["id"].as_str().unwrap().to_owned());
    }
    let first = app.get("/api/questions?limit=2").await.json();
    let page: Vec<&str> = first["requests"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(page, [ids[0].as_str(), ids[1].as_str()], "oldest first");
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = app.get(&format!("/api/questions?limit=2&cursor={cursor}")).await.json();
    assert_eq!(second["requests"][0]["id"], json!(ids[2]));
    assert_eq!(second["next_cursor"], Value::Null);
    let not_a_choice = app.post_json(&format!("/api/questions/{}/answer", ids[0]), r#"{"answer": "Free"}"#).await;
    assert!(error(&not_a_choice, StatusCode::BAD_REQUEST).contains("one of the choices"));
    let answered = app.post_json(&format!("/api/questions/{}/answer", ids[0]), r#"{"answer": "Team"}"#).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    let seen = app.get(&format!("/api/questions/{}?wait=1", ids[0])).await.json();
    assert_eq!((seen["status"].as_str(), seen["decision"]["answer"].as_str()), (Some("answered"), Some("Team")));
    let decided = app.get("/api/questions?status=decided").await.json();
    assert_eq!(decided["requests"][0]["id"], json!(ids[0]));
    // The SSE stream of a decided question sends it once and ends.
    let stream = app.get(&format!("/api/questions/{}/events", ids[0])).await;
    assert_eq!(stream.status, StatusCode::OK);
    assert!(stream.text.contains("event: request") && stream.text.contains("\"answered\""), "{}", stream.text);
}

#[tokio::test]
async fn the_event_stream_sends_the_request_then_its_decision_and_ends() {
    let app = Arc::new(app().await);
    let r = app.post_json("/api/approval-requests", &ask("sse").to_string()).await.json();
    let id = r["id"].as_str().unwrap().to_owned();
    let stream = {
        let app = app.clone();
        let uri = format!("/api/approval-requests/{id}/events");
        tokio::spawn(async move { app.get(&uri).await })
    };
    // Whether the stream opened before or after this decision, it ends with it.
    let reply = app.post_json(&format!("/api/approval-requests/{id}/approve"), "{}").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let body = stream.await.unwrap();
    let datas: Vec<Value> =
        body.text.lines().filter_map(|l| l.strip_prefix("data: ")).map(|d| serde_json::from_str(d).unwrap()).collect();
    assert_eq!(datas.last().unwrap()["status"], "approved", "{}", body.text);
}
