//! The REST contract: status codes, error bodies, and the shapes clients use.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use serde_json::json;

use crate::support::app;

#[tokio::test]
async fn create_get_steps_messages() {
    let app = app().await;
    let run = app.finished_run(r#"{"initial_prompt": "What is (12 + 30) * 2?", "tags": {"team": "qa"}}"#).await;
    assert_eq!(run["status"], "done");
    assert!(run["result"].as_str().unwrap().contains("84"));
    assert!(run["usage"]["total_tokens"].as_u64().unwrap() > 0);
    assert_eq!(run["usage"]["requests"], 2);
    let id = run["id"].as_str().unwrap();

    let steps = app.get(&format!("/api/runs/{id}/steps")).await.json();
    let steps = steps["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0]["tool_calls"][0]["tool_name"], "calculator");
    assert_eq!(steps[0]["tool_calls"][0]["result"]["value"], 84);
    assert!(steps[0]["usage"]["input_tokens"].as_u64().unwrap() > 0);

    let messages = app.get(&format!("/api/runs/{id}/messages")).await.json();
    let types: Vec<&str> =
        messages["messages"].as_array().unwrap().iter().map(|m| m["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["human", "agent", "invocation-result", "agent"]);
    assert_eq!(messages["messages"][2]["data"]["resultType"], "resolution");

    let listed = app.get("/api/runs?tag=team:qa&status=done").await.json();
    assert_eq!(listed["runs"][0]["id"], id);
    assert!(listed["next_cursor"].is_null());
}

#[tokio::test]
async fn a_client_id_returns_the_existing_run_with_200() {
    let app = app().await;
    let body = r#"{"id": "ticket-7", "initial_prompt": "hello"}"#;
    assert_eq!(app.post_json("/api/runs", body).await.status, StatusCode::CREATED);
    let again = app.post_json("/api/runs", body).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.json()["id"], "ticket-7");
}

#[tokio::test]
async fn bad_input_is_a_400_with_a_message() {
    let app = app().await;
    let cases = [
        ("{not json", "invalid request body"),
        (r#"{"initial_prompt": ""}"#, "initial_prompt must not be empty"),
        (r#"{"initial_prompt": "x", "tools": ["teleport"]}"#, "unknown tool `teleport`"),
        (r#"{"initial_prompt": "x", "model": "gpt-x"}"#, "unknown model `gpt-x`"),
        (r#"{"initial_prompt": "x", "colour": "red"}"#, "unknown field `colour`"),
        (r#"{"initial_prompt": 5}"#, "invalid type"),
    ];
    for (body, expected) in cases {
        let reply = app.post_json("/api/runs", body).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}");
        let error = reply.json()["error"].as_str().unwrap().to_owned();
        assert!(error.contains(expected), "{error} / {expected}");
    }
    for uri in ["/api/runs?status=sleeping", "/api/runs?limit=0", "/api/runs?cursor=zzz", "/api/runs?tag=novalue"] {
        let reply = app.get(uri).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{uri}: {}", reply.text);
        assert!(reply.json()["error"].is_string());
    }
    assert!(app.get("/api/runs").await.json()["runs"].as_array().unwrap().is_empty(), "nothing was stored");
}

#[tokio::test]
async fn unknown_runs_are_404() {
    let app = app().await;
    for uri in ["/api/runs/nope", "/api/runs/nope/steps", "/api/runs/nope/messages"] {
        let reply = app.get(uri).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{uri}");
        assert_eq!(reply.json()["error"], "run `nope` not found");
    }
    assert_eq!(app.post_json("/api/runs/nope/cancel", "").await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn cancel_then_cancel_again_is_409() {
    let app = app().await;
    let body = json!({"initial_prompt": "wait", "model_settings": {"script": [
        {"tool_calls": [{"name": "wait", "arguments": {"seconds": 60}}]}, {"text": "late"}]}});
    let reply = app.post_json("/api/runs", &body.to_string()).await;
    let id = reply.json()["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cancelled = app.post_json(&format!("/api/runs/{id}/cancel"), "").await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.text);
    assert_eq!(cancelled.json()["status"], "cancelled");
    let again = app.post_json(&format!("/api/runs/{id}/cancel"), "").await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(again.json()["error"].as_str().unwrap().contains("already cancelled"));
}

#[tokio::test]
async fn tools_models_health_and_openapi() {
    let app = app().await;
    let tools = app.get("/api/tools").await.json();
    let names: Vec<&str> = tools["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["calculator", "current_time", "send_email", "wait"]);
    assert_eq!(tools["tools"][0]["schema"]["required"][0], "expression");
    assert_eq!(app.get("/api/models").await.json()["models"][0], "builtin");
    assert_eq!(app.get("/healthz").await.status, StatusCode::OK);
    let doc = app.get("/api/openapi.json").await.json();
    assert!(doc["paths"]["/api/runs/{id}/cancel"]["post"].is_object());
}

#[tokio::test]
async fn oversized_bodies_are_refused() {
    let app = app().await;
    let huge = format!(r#"{{"initial_prompt": "{}"}}"#, "a".repeat(3 * 1024 * 1024));
    let reply = app.send(Method::POST, "/api/runs", Some(&huge), "application/json").await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
}

/// `/healthz` answers 503 while events cannot be stored (they wait in memory
/// and are stored, in order, once the database takes them again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_degraded_while_the_event_log_cannot_be_written() {
    let app = app().await;
    assert_eq!(app.get("/healthz").await.status, StatusCode::OK);
    crate::support::sql(&app.db_url, &["ALTER TABLE run_events RENAME TO run_events_away"]).await;
    let run = app.post_json("/api/runs", r#"{"initial_prompt": "What is 6*7?"}"#).await;
    assert_eq!(run.status, StatusCode::CREATED);
    let mut degraded = None;
    for _ in 0..300 {
        let reply = app.get("/healthz").await;
        if reply.status == StatusCode::SERVICE_UNAVAILABLE {
            degraded = Some(reply);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let degraded = degraded.expect("/healthz never reported the failing event log");
    assert!(degraded.json()["error"].as_str().unwrap().contains("event log"), "{}", degraded.text);

    crate::support::sql(&app.db_url, &["ALTER TABLE run_events_away RENAME TO run_events"]).await;
    app.engine.traces().flush_events().await;
    assert_eq!(app.get("/healthz").await.status, StatusCode::OK);
    let id = run.json()["id"].as_str().unwrap().to_owned();
    let stored = app.engine.store().events_after(&id, 0, 100).await.unwrap();
    assert_eq!(stored.first().map(|e| e.seq), Some(1), "the held events were stored in order");
}

#[tokio::test]
async fn another_projects_run_id_answers_as_an_absent_one() {
    use runlens_engine::model::{Actor, CreateRun, Role};
    let app = app().await;
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let theirs = CreateRun { id: Some("their-run".into()), initial_prompt: "hi".into(), ..CreateRun::default() };
    app.engine.runs().create_run_in(theirs, "other", None).await.unwrap();
    app.user("dora", Some(("default", Role::Operator)), false).await;
    let cookie = app.session("dora").await;
    let headers = [("cookie", cookie.as_str()), ("origin", crate::support::ORIGIN), ("host", crate::support::HOST)];
    let as_dora = |method: Method, uri: String, body: Option<String>| {
        let app = &app;
        async move { app.send_with(method, &uri, body.as_deref(), "application/json", &headers).await }
    };
    // Read: the other project's run and a run no project has answer alike.
    for id in ["their-run", "no-run"] {
        let reply = as_dora(Method::GET, format!("/api/runs/{id}"), None).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{id}: {}", reply.text);
        assert_eq!(reply.json()["error"], format!("run `{id}` not found"));
    }
    // Create: the id is refused without a word of a run having it, and
    // the other project's run is left as it was.
    let body = json!({"id": "their-run", "initial_prompt": "mine"}).to_string();
    let reply = as_dora(Method::POST, "/api/runs".into(), Some(body)).await;
    assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.text);
    let error = reply.json()["error"].as_str().unwrap().to_owned();
    assert_eq!(error, "the run id `their-run` cannot be used: choose another, or leave `id` out");
    let run = app.engine.runs().get_run("their-run").await.unwrap();
    assert_eq!((run.project.as_str(), run.initial_prompt.as_str()), ("other", "hi"));
    // An id no run has is created in the caller's project.
    let body = json!({"id": "dora-run", "initial_prompt": "mine"}).to_string();
    let reply = as_dora(Method::POST, "/api/runs".into(), Some(body)).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    assert_eq!(reply.json()["project"], "default");
}

/// `GET /api/runs/{id}/steps/{step}/model-call`: the messages as sent and
/// the raw bodies; bounded by `messages`; a bad bound is a 400; another
/// project's run, an unknown step or a bad step reference a 404.
#[tokio::test]
async fn a_steps_model_call_over_the_api() {
    use runlens_engine::model::{Actor, CreateRun};
    let app = app().await;
    let run = app
        .finished_run(r#"{"initial_prompt": "What is 6 * 7?", "system_prompt": "Be exact.", "tools": ["calculator"]}"#)
        .await;
    let id = run["id"].as_str().unwrap();
    let call = app.get(&format!("/api/runs/{id}/steps/1/model-call")).await;
    assert_eq!(call.status, StatusCode::OK, "{}", call.text);
    let call = call.json();
    assert_eq!(call["system_prompt"], "Be exact.");
    assert_eq!(call["messages"].as_array().unwrap().len(), 3);
    assert_eq!(call["omitted_messages"], 0);
    assert_eq!(call["request_body"]["system_prompt"], "Be exact.");
    assert_eq!(call["request_body"]["messages"].as_array().unwrap().len(), 3);
    assert_eq!(call["tools"][0]["name"], "calculator");
    assert!(call["response_body"]["text"].as_str().unwrap().contains("42"), "{call}");

    let by_id = app.get(&format!("/api/runs/{id}/steps/{id}:s1/model-call?messages=1")).await.json();
    assert_eq!((by_id["messages"].as_array().unwrap().len(), by_id["omitted_messages"].as_u64()), (1, Some(2)));
    for bad in ["0", "10001", "x", "-1"] {
        let reply = app.get(&format!("/api/runs/{id}/steps/1/model-call?messages={bad}")).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "messages={bad}: {}", reply.text);
    }
    for step in ["9", "007", "other:s1"] {
        let reply = app.get(&format!("/api/runs/{id}/steps/{step}/model-call")).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{step}: {}", reply.text);
    }
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let theirs = CreateRun { id: Some("their-run".into()), initial_prompt: "hi".into(), ..CreateRun::default() };
    app.engine.runs().create_run_in(theirs, "other", None).await.unwrap();
    app.user("dora", Some(("default", runlens_engine::model::Role::Viewer)), false).await;
    let cookie = app.session("dora").await;
    for run in ["their-run", "no-run"] {
        let uri = format!("/api/runs/{run}/steps/0/model-call");
        let reply = app.send_with(Method::GET, &uri, None, "", &[("cookie", cookie.as_str())]).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{run}: {}", reply.text);
        assert_eq!(reply.json()["error"], format!("run `{run}` not found"));
    }
}
