//! Forks from a step over the API: 201 with the fork (its parent and step),
//! which runs on from the replaced result; a step out of range or an unknown
//! call is a 400 that creates nothing; a viewer gets 403 and another
//! project's key 404.

use axum::http::{Method, StatusCode};
use runlens_engine::model::{Actor, Role};
use serde_json::{json, Value};

use crate::support::{app, App};

async fn finished_run(app: &App) -> (String, Vec<Value>) {
    let script = json!([
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "2+2"}}]},
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "3+3"}}]},
        {"text": "Both added."}
    ]);
    let body = json!({"initial_prompt": "Add", "tools": ["calculator"], "model_settings": {"script": script}});
    let created = app.post_json("/api/runs", &body.to_string()).await.json();
    let id = created["id"].as_str().unwrap().to_owned();
    loop {
        let run = app.get(&format!("/api/runs/{id}")).await.json();
        if run["status"] == "done" {
            break;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let steps = app.get(&format!("/api/runs/{id}/steps")).await.json()["steps"].as_array().unwrap().clone();
    (id, steps)
}

async fn key(app: &App, project: &str, role: Role) -> String {
    let (_, secret) = app
        .engine
        .identity()
        .create_key(&format!("{project} {role}"), Some(project), role, &Actor::system())
        .await
        .unwrap();
    format!("Bearer {secret}")
}

#[tokio::test]
async fn a_fork_from_a_step_is_created_and_runs_on_from_the_replaced_result() {
    let app = app().await;
    let (id, steps) = finished_run(&app).await;
    let call = steps[0]["tool_calls"][0]["id"].as_str().unwrap();
    let body = json!({"from_step": 0, "tool_results": {call: 41}, "model_settings": {}});
    let reply = app.post_json(&format!("/api/runs/{id}/fork"), &body.to_string()).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    let fork = reply.json();
    assert_eq!((fork["parent_run_id"].as_str(), fork["forked_from_step"].as_u64()), (Some(id.as_str()), Some(0)));
    let fork_id = fork["id"].as_str().unwrap();
    let run = loop {
        let run = app.get(&format!("/api/runs/{fork_id}")).await.json();
        if run["status"] == "done" {
            break run;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(run["summary"].as_str().unwrap_or_default().contains("41"), "{run}");
    let family = app.get(&format!("/api/runs/{id}/family")).await.json();
    assert!(family["runs"].as_array().unwrap().iter().any(|r| r["id"] == json!(fork_id)));
}

#[tokio::test]
async fn a_recorded_replay_is_created_and_finishes_identical() {
    let app = app().await;
    let (id, _) = finished_run(&app).await;
    let reply = app.post_json(&format!("/api/runs/{id}/replay"), r#"{"mode": "recorded"}"#).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    let replay = reply.json();
    assert_eq!(replay["replay"], json!({"of": id, "mode": "recorded"}));
    let replay_id = replay["id"].as_str().unwrap();
    let run = loop {
        let run = app.get(&format!("/api/runs/{replay_id}")).await.json();
        if run["status"] == "done" {
            break run;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(run["replay"]["diverged_at"], Value::Null, "{run}");
    assert_eq!(run["step_count"], json!(3));
    let bad = app.post_json(&format!("/api/runs/{id}/replay"), r#"{"mode": "again"}"#).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.text);
}

#[tokio::test]
async fn bad_forks_are_400s_and_roles_and_projects_hold() {
    let app = app().await;
    let (id, _) = finished_run(&app).await;
    let runs_before = app.get("/api/runs?all=true").await.json()["runs"].as_array().unwrap().len();
    for (body, what) in [
        (json!({"from_step": 3}), "steps 0 to 2"),
        (json!({"from_step": 0, "tool_results": {"nope": 1}}), "no call `nope`"),
        (json!({"from_step": 0, "model_output": {}}), "text or tool_calls"),
        (json!({"from_step": 0, "model": "no/such"}), "unknown model"),
        (json!({"step": 0}), "unknown field"),
    ] {
        let reply = app.post_json(&format!("/api/runs/{id}/fork"), &body.to_string()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}: {}", reply.text);
        assert!(reply.json()["error"].as_str().unwrap().contains(what), "{what}: {}", reply.text);
    }
    assert_eq!(app.get("/api/runs?all=true").await.json()["runs"].as_array().unwrap().len(), runs_before);
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let uri = format!("/api/runs/{id}/fork");
    let body = r#"{"from_step": 0}"#;
    let viewer = key(&app, "default", Role::Viewer).await;
    let reply = app.send_with(Method::POST, &uri, Some(body), "application/json", &[("authorization", &viewer)]).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text);
    let stranger = key(&app, "other", Role::Admin).await;
    let reply =
        app.send_with(Method::POST, &uri, Some(body), "application/json", &[("authorization", &stranger)]).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.text);
}
