//! Comparison groups over the API: `POST /api/runs/batch` answers 201 with
//! the group id and one run per model in order; a bad batch is a 400 naming
//! the problem and creates nothing; a viewer cannot start one; the group
//! endpoint returns every member, and a group of another project is a 404.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use runlens_engine::llm::{BuiltinModel, ModelRegistry};
use runlens_engine::model::{Actor, Role};
use serde_json::{json, Value};

use crate::support::{app_with_models, App, Reply};

/// The models of these tests: `builtin` and the built-in model registered
/// again under two more names.
pub const MODELS: [&str; 3] = ["builtin", "local/small", "local/large"];

pub async fn three_model_app() -> App {
    let mut models = ModelRegistry::with_builtin();
    models.register(MODELS[1], Arc::new(BuiltinModel));
    models.register(MODELS[2], Arc::new(BuiltinModel));
    app_with_models(models).await
}

/// A key of `project` with `role`, as an `Authorization` header value.
async fn key(app: &App, project: &str, role: Role) -> String {
    let name = format!("{project} {role}");
    let (_, secret) = app.engine.identity().create_key(&name, Some(project), role, &Actor::system()).await.unwrap();
    format!("Bearer {secret}")
}

async fn as_key(app: &App, key: &str, method: Method, uri: &str, body: Option<&str>) -> Reply {
    app.send_with(method, uri, body, "application/json", &[("authorization", key)]).await
}

fn error(reply: &Reply, status: StatusCode) -> String {
    assert_eq!(reply.status, status, "{}", reply.text);
    reply.json()["error"].as_str().unwrap().to_owned()
}

/// Every run of the admin's current project, children included.
async fn runs(app: &App) -> Vec<Value> {
    app.get("/api/runs?all=true").await.json()["runs"].as_array().unwrap().clone()
}

async fn batch(app: &App) -> Value {
    let body = json!({"initial_prompt": "What is 6 * 7?", "name": "answer", "tools": ["calculator"], "models": MODELS});
    let reply = app.post_json("/api/runs/batch", &body.to_string()).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    reply.json()
}

#[tokio::test]
async fn a_batch_is_one_run_per_model_and_the_group_returns_every_member() {
    let app = three_model_app().await;
    let created = batch(&app).await;
    let group = created["group_id"].as_str().unwrap().to_owned();
    let created_runs = created["runs"].as_array().unwrap();
    assert_eq!(created_runs.iter().map(|r| r["model"].as_str().unwrap()).collect::<Vec<_>>(), MODELS);
    for (run, model) in created_runs.iter().zip(MODELS) {
        assert_eq!(run["group_id"], group);
        assert_eq!(run["name"], format!("answer · {model}"));
        assert_eq!(run["tools"], json!(["calculator"]));
    }
    let ids: Vec<&str> = created_runs.iter().map(|r| r["id"].as_str().unwrap()).collect();
    for id in &ids {
        app.engine.runs().wait_until_settled(id, Duration::from_secs(20)).await.unwrap();
        assert_eq!(app.get(&format!("/api/runs/{id}")).await.json()["group_id"], group);
    }

    let reply = app.get(&format!("/api/compare/groups/{group}")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let read = reply.json();
    assert_eq!((read["id"].as_str(), read["project"].as_str()), (Some(group.as_str()), Some("default")));
    assert_eq!(read["created_at"], created_runs[0]["created_at"]);
    let members = read["members"].as_array().unwrap();
    assert_eq!(
        members.iter().map(|m| m["run_id"].as_str().unwrap()).collect::<Vec<_>>(),
        ids,
        "every member, in order"
    );
    for (m, model) in members.iter().zip(MODELS) {
        assert_eq!((m["model"].as_str(), m["status"].as_str()), (Some(model), Some("done")), "{m}");
        assert_eq!(m["name"], format!("answer · {model}"));
        assert!(m["result"].as_str().is_some_and(|r| r.contains("42")), "{m}");
        assert!(m["step_count"].as_u64() >= Some(2), "a calculator call, then the answer: {m}");
        assert!(m["usage"]["total_tokens"].as_u64() > Some(0), "{m}");
        assert!(m["duration_ms"].is_u64(), "{m}");
    }
    assert_eq!(members[0]["cost_usd"], json!(0.0), "the built-in model is priced at 0");
    assert!(members[1].get("cost_usd").is_none(), "an unpriced model has no cost: {}", members[1]);

    // A run started alone is in no group.
    let alone = app.finished_run(r#"{"initial_prompt": "Hi"}"#).await;
    assert!(alone.get("group_id").is_none(), "{alone}");
}

#[tokio::test]
async fn a_bad_batch_is_a_400_naming_the_problem_and_creates_nothing() {
    let app = three_model_app().await;
    let nine: Vec<String> = (0..9).map(|i| format!("m{i}")).collect();
    let cases = [
        (json!({"initial_prompt": "hi", "models": nine}), "at most 8"),
        (json!({"initial_prompt": "hi", "models": []}), "models must name 1 to 8 models"),
        (json!({"initial_prompt": "hi", "models": ["builtin", "builtin"]}), "models[1]: `builtin` is named twice"),
        (json!({"initial_prompt": "hi", "models": ["builtin", "gpt-9"]}), "unknown model `gpt-9` (models[1])"),
        (json!({"initial_prompt": "hi", "id": "mine", "models": ["builtin"]}), "id must be absent"),
        (json!({"initial_prompt": "hi", "model": "builtin", "models": ["builtin"]}), "model must be absent"),
        (json!({"initial_prompt": "hi", "colour": "red", "models": ["builtin"]}), "unknown field `colour`"),
        (json!({"initial_prompt": "hi"}), "missing field `models`"),
        (json!({"initial_prompt": "hi", "models": "builtin"}), "models: invalid type"),
        (json!({"initial_prompt": "  ", "models": MODELS}), "initial_prompt must not be empty"),
        (json!({"initial_prompt": "hi", "tools": ["nope"], "models": MODELS}), "nope"),
    ];
    for (body, says) in cases {
        let reply = app.post_json("/api/runs/batch", &body.to_string()).await;
        let why = error(&reply, StatusCode::BAD_REQUEST);
        assert!(why.contains(says), "{body}: {why:?} should say {says:?}");
        assert_eq!(runs(&app).await, Vec::<Value>::new(), "{body}: nothing is created");
    }
    // `batch` is the endpoint's name, never a run's.
    let reserved = app.post_json("/api/runs", r#"{"id": "batch", "initial_prompt": "hi"}"#).await;
    assert!(error(&reserved, StatusCode::BAD_REQUEST).contains("`batch` is reserved"));
}

#[tokio::test]
async fn viewers_read_groups_of_their_project_only_and_cannot_start_one() {
    let app = three_model_app().await;
    let body = json!({"initial_prompt": "What is 6 * 7?", "models": ["builtin", "local/small"]}).to_string();
    let viewer = key(&app, "default", Role::Viewer).await;
    let refused = as_key(&app, &viewer, Method::POST, "/api/runs/batch", Some(&body)).await;
    assert!(error(&refused, StatusCode::FORBIDDEN).contains("operator"));
    assert_eq!(runs(&app).await, Vec::<Value>::new());

    let operator = key(&app, "default", Role::Operator).await;
    let created = as_key(&app, &operator, Method::POST, "/api/runs/batch", Some(&body)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let group = created.json()["group_id"].as_str().unwrap().to_owned();
    let uri = format!("/api/compare/groups/{group}");
    let read = as_key(&app, &viewer, Method::GET, &uri, None).await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.text);
    assert_eq!(read.json()["members"].as_array().unwrap().len(), 2);

    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let outsider = key(&app, "other", Role::Admin).await;
    let hidden = as_key(&app, &outsider, Method::GET, &uri, None).await;
    assert_eq!(error(&hidden, StatusCode::NOT_FOUND), format!("comparison group `{group}` not found"));
    let unknown = app.get("/api/compare/groups/no-such-group").await;
    assert_eq!(error(&unknown, StatusCode::NOT_FOUND), "comparison group `no-such-group` not found");
    // A batch goes to the caller's current project.
    let theirs = as_key(&app, &outsider, Method::POST, "/api/runs/batch", Some(&body)).await;
    assert_eq!(theirs.status, StatusCode::CREATED, "{}", theirs.text);
    assert!(theirs.json()["runs"].as_array().unwrap().iter().all(|r| r["project"] == "other"));
}
