//! Identity and access through the API: every operation of the OpenAPI
//! document called by every kind of caller (the role matrix), cross-site
//! request forgery, sign-in limits, the setup link, signing out, and
//! secrets that never come back out.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use http_body_util::BodyExt;
use runlens_engine::cost::PriceInput;
use runlens_engine::model::{Actor, NewApprovalRequest, NewHttpTool, NewQuestion, NewWebhook, Role};
use runlens_engine::store::Blob;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::support::{app, session_cookie, urlencode, App, Reply, HOST, ORIGIN, PASSWORD};

/// What an operation needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Need {
    /// Nothing: served without credentials.
    Public,
    /// Any valid credentials.
    SignedIn,
    /// At least this role in the project.
    Role(Role),
    /// An instance admin.
    InstanceAdmin,
}

/// Which project an operation is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// A thing of `default` named in the path (a run, a key, the project):
    /// a caller with no role in `default` gets 404.
    Default,
    /// The caller's current project (its own, for a key of another project).
    Current,
    /// No project.
    Instance,
}

use Need::*;
use Scope::{Current, Default as Dflt, Instance};

/// The spec: what each operation needs. Viewers read; operators create,
/// cancel, follow up, edit and import runs, and save agents; approvers decide; admins manage
/// keys, members, prices and read the audit log; instance admins create
/// projects and users and list the servers. An operation missing here fails the test.
const RULES: &[(&str, &str, Need, Scope)] = &[
    ("get", "/healthz", Public, Instance),
    ("get", "/api/openapi.json", Public, Instance),
    ("get", "/api/docs", Public, Instance),
    ("get", "/api/me", SignedIn, Instance),
    ("get", "/api/tools", Role(Role::Viewer), Current),
    ("get", "/api/mcp/servers", Role(Role::Viewer), Current),
    ("get", "/api/models", SignedIn, Instance),
    ("get", "/api/projects", SignedIn, Instance),
    ("post", "/api/projects", InstanceAdmin, Instance),
    ("get", "/api/users", InstanceAdmin, Instance),
    ("post", "/api/users", InstanceAdmin, Instance),
    ("get", "/api/servers", InstanceAdmin, Instance),
    ("get", "/api/runs", Role(Role::Viewer), Current),
    ("post", "/api/runs", Role(Role::Operator), Current),
    ("post", "/api/agui", Role(Role::Operator), Current),
    ("post", "/api/runs/import", Role(Role::Operator), Current),
    ("post", "/api/runs/batch", Role(Role::Operator), Current),
    ("post", "/v1/traces", Role(Role::Operator), Current),
    ("get", "/api/approvals", Role(Role::Viewer), Current),
    ("get", "/api/approvals/count", Role(Role::Viewer), Current),
    ("post", "/api/runs/{id}/fork", Role(Role::Operator), Dflt),
    ("post", "/api/runs/{id}/replay", Role(Role::Operator), Dflt),
    ("post", "/api/approval-requests", Role(Role::Operator), Current),
    ("get", "/api/approval-requests", Role(Role::Viewer), Current),
    ("get", "/api/approval-requests/{id}", Role(Role::Viewer), Dflt),
    ("get", "/api/approval-requests/{id}/events", Role(Role::Viewer), Dflt),
    ("post", "/api/approval-requests/{id}/approve", Role(Role::Approver), Dflt),
    ("post", "/api/approval-requests/{id}/reject", Role(Role::Approver), Dflt),
    ("post", "/api/questions", Role(Role::Operator), Current),
    ("get", "/api/questions", Role(Role::Viewer), Current),
    ("get", "/api/questions/{id}", Role(Role::Viewer), Dflt),
    ("get", "/api/questions/{id}/events", Role(Role::Viewer), Dflt),
    ("post", "/api/questions/{id}/answer", Role(Role::Approver), Dflt),
    ("get", "/api/events", Role(Role::Viewer), Current),
    ("get", "/api/outbox", Role(Role::Viewer), Current),
    ("get", "/api/prices", Role(Role::Viewer), Current),
    ("get", "/api/prices/{model}", Role(Role::Viewer), Current),
    ("put", "/api/prices/{model}", Role(Role::Admin), Current),
    ("delete", "/api/prices/{model}", Role(Role::Admin), Current),
    ("get", "/api/retention", Role(Role::Admin), Current),
    ("put", "/api/retention", Role(Role::Admin), Current),
    ("get", "/api/keys", Role(Role::Admin), Current),
    ("post", "/api/keys", Role(Role::Admin), Current),
    ("get", "/api/audit", Role(Role::Admin), Current),
    ("delete", "/api/keys/{id}", Role(Role::Admin), Dflt),
    ("get", "/api/projects/{project}/members", Role(Role::Admin), Dflt),
    ("put", "/api/projects/{project}/members/{user}", Role(Role::Admin), Dflt),
    ("delete", "/api/projects/{project}/members/{user}", Role(Role::Admin), Dflt),
    ("get", "/api/runs/{id}", Role(Role::Viewer), Dflt),
    ("get", "/api/sessions/{id}", Role(Role::Viewer), Current),
    ("get", "/api/exports/runs", Role(Role::Viewer), Current),
    ("get", "/api/runs/{id}/events", Role(Role::Viewer), Dflt),
    ("get", "/api/runs/{id}/family", Role(Role::Viewer), Dflt),
    ("get", "/api/runs/{id}/messages", Role(Role::Viewer), Dflt),
    ("get", "/api/runs/{id}/outline", Role(Role::Viewer), Dflt),
    ("get", "/api/runs/{id}/state", Role(Role::Viewer), Dflt),
    ("get", "/api/runs/{id}/steps", Role(Role::Viewer), Dflt),
    ("get", "/api/runs/{id}/tool-calls/{call_id}", Role(Role::Viewer), Dflt),
    ("get", "/api/runs/{id}/steps/{step}", Role(Role::Viewer), Dflt),
    ("get", "/api/runs/{id}/steps/{step}/model-call", Role(Role::Viewer), Dflt),
    ("get", "/api/runs/{id}/children", Role(Role::Viewer), Dflt),
    ("get", "/api/runs/{id}/tree", Role(Role::Viewer), Dflt),
    ("get", "/api/compare", Role(Role::Viewer), Dflt),
    ("get", "/api/compare/groups/{id}", Role(Role::Viewer), Dflt),
    ("get", "/api/agents", Role(Role::Viewer), Current),
    ("post", "/api/agents", Role(Role::Operator), Current),
    ("get", "/api/agents/{id}", Role(Role::Viewer), Dflt),
    ("put", "/api/agents/{id}", Role(Role::Operator), Dflt),
    ("get", "/api/agents/{id}/versions", Role(Role::Viewer), Dflt),
    ("get", "/api/agents/{id}/versions/{version}", Role(Role::Viewer), Dflt),
    ("get", "/api/blobs/{id}", Role(Role::Viewer), Dflt),
    ("post", "/api/runs/{id}/cancel", Role(Role::Operator), Dflt),
    ("post", "/api/runs/{id}/messages", Role(Role::Operator), Dflt),
    ("post", "/api/runs/{id}/messages/{message_id}/edit", Role(Role::Operator), Dflt),
    ("post", "/api/runs/{id}/tool-calls/{call_id}/approve", Role(Role::Approver), Dflt),
    ("post", "/api/runs/{id}/tool-calls/{call_id}/reject", Role(Role::Approver), Dflt),
    ("get", "/api/tools/http", Role(Role::Viewer), Current),
    ("post", "/api/tools/http", Role(Role::Admin), Current),
    ("get", "/api/tools/http/{name}", Role(Role::Viewer), Current),
    ("put", "/api/tools/http/{name}", Role(Role::Admin), Current),
    ("delete", "/api/tools/http/{name}", Role(Role::Admin), Current),
    ("post", "/api/tools/http/{name}/secret", Role(Role::Admin), Current),
    ("get", "/api/runs/{id}/deliveries", Role(Role::Viewer), Dflt),
    ("get", "/api/webhooks", Role(Role::Admin), Current),
    ("post", "/api/webhooks", Role(Role::Admin), Current),
    ("post", "/api/webhooks/secret", Role(Role::Admin), Current),
    ("get", "/api/webhooks/{id}", Role(Role::Admin), Dflt),
    ("delete", "/api/webhooks/{id}", Role(Role::Admin), Dflt),
    ("post", "/api/webhooks/{id}/rotate", Role(Role::Admin), Dflt),
    ("post", "/api/scores", Role(Role::Operator), Dflt),
    ("get", "/api/runs/{id}/scores", Role(Role::Viewer), Dflt),
    ("post", "/api/runs/{id}/evaluate", Role(Role::Operator), Dflt),
    // Its author too, an operator (scores_api tests that); the matrix's scores are another's.
    ("delete", "/api/scores/{id}", Role(Role::Admin), Dflt),
    ("get", "/api/datasets", Role(Role::Viewer), Current),
    ("post", "/api/datasets", Role(Role::Operator), Current),
    ("get", "/api/datasets/{id}", Role(Role::Viewer), Dflt),
    ("put", "/api/datasets/{id}", Role(Role::Operator), Dflt),
    ("delete", "/api/datasets/{id}", Role(Role::Admin), Dflt),
    ("get", "/api/datasets/{id}/items", Role(Role::Viewer), Dflt),
    ("post", "/api/datasets/{id}/items", Role(Role::Operator), Dflt),
    ("put", "/api/datasets/{id}/items/{item_id}", Role(Role::Operator), Dflt),
    ("delete", "/api/datasets/{id}/items/{item_id}", Role(Role::Operator), Dflt),
    ("post", "/api/datasets/{id}/upload", Role(Role::Operator), Dflt),
    ("post", "/api/runs/{id}/dataset-items", Role(Role::Operator), Dflt),
    ("get", "/api/experiments", Role(Role::Viewer), Current),
    ("post", "/api/experiments", Role(Role::Operator), Current),
    ("get", "/api/experiments/{id}", Role(Role::Viewer), Dflt),
    ("get", "/api/experiments/{id}/rows", Role(Role::Viewer), Dflt),
    ("get", "/api/experiments/{id}/compare", Role(Role::Viewer), Dflt),
    ("post", "/api/experiments/{id}/cancel", Role(Role::Operator), Dflt),
    ("post", "/api/experiment-sets", Role(Role::Operator), Current),
    ("get", "/api/experiment-sets/{id}", Role(Role::Viewer), Dflt),
    ("get", "/api/review-queues", Role(Role::Viewer), Current),
    ("post", "/api/review-queues", Role(Role::Operator), Current),
    ("get", "/api/review-queues/{id}", Role(Role::Viewer), Dflt),
    ("delete", "/api/review-queues/{id}", Role(Role::Operator), Dflt),
    ("get", "/api/review-queues/{id}/items", Role(Role::Viewer), Dflt),
    ("post", "/api/review-queues/{id}/items", Role(Role::Operator), Dflt),
    ("post", "/api/review-queues/{id}/items/{item_id}/review", Role(Role::Operator), Dflt),
    ("get", "/api/evaluators", Role(Role::Viewer), Current),
    ("post", "/api/evaluators", Role(Role::Operator), Current),
    ("get", "/api/evaluators/{id}", Role(Role::Viewer), Dflt),
    ("put", "/api/evaluators/{id}", Role(Role::Operator), Dflt),
    ("delete", "/api/evaluators/{id}", Role(Role::Operator), Dflt),
];

/// Who calls.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Nobody,
    RevokedKey,
    /// A member of `default` with this role (by key or signed in).
    Member(Role),
    /// An admin key of the project `other`.
    OtherAdmin,
    InstanceAdmin,
}

struct Who {
    label: String,
    kind: Kind,
    headers: Vec<(String, String)>,
}

/// The answer's class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Unauthorized,
    Forbidden,
    NotFound,
    /// The handler ran: 2xx, or an input error (400, 409).
    Allowed,
}

fn class_of(status: StatusCode) -> Class {
    match status {
        StatusCode::UNAUTHORIZED => Class::Unauthorized,
        StatusCode::FORBIDDEN => Class::Forbidden,
        StatusCode::NOT_FOUND => Class::NotFound,
        s if s.is_success() || s == StatusCode::BAD_REQUEST || s == StatusCode::CONFLICT => Class::Allowed,
        s => panic!("unexpected status {s}"),
    }
}

fn expected(need: Need, scope: Scope, who: &Kind) -> Class {
    match (need, who) {
        (_, Kind::RevokedKey) => Class::Unauthorized,
        (Public, _) => Class::Allowed,
        (_, Kind::Nobody) => Class::Unauthorized,
        (_, Kind::InstanceAdmin) | (SignedIn, _) => Class::Allowed,
        (InstanceAdmin, _) => Class::Forbidden,
        (Role(_), Kind::OtherAdmin) if scope == Dflt => Class::NotFound,
        (Role(_), Kind::OtherAdmin) => Class::Allowed,
        (Role(need), Kind::Member(role)) if *role >= need => Class::Allowed,
        (Role(_), Kind::Member(_)) => Class::Forbidden,
    }
}

/// Sends a request; a 200 event stream's body is not read (it stays open).
async fn call(app: &App, method: &Method, uri: &str, body: Option<&str>, headers: &[(String, String)]) -> Reply {
    let mut req = Request::builder().method(method.clone()).uri(uri);
    for (name, value) in headers {
        req = req.header(name.as_str(), value.as_str());
    }
    if body.is_some() {
        req = req.header(header::CONTENT_TYPE, "application/json");
    }
    let req = req.body(body.map(|b| Body::from(b.to_owned())).unwrap_or_else(Body::empty)).unwrap();
    let res = tokio::time::timeout(Duration::from_secs(30), app.router.clone().oneshot(req))
        .await
        .unwrap_or_else(|_| panic!("{method} {uri} timed out"))
        .unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let streams = headers.get(header::CONTENT_TYPE).is_some_and(|t| t == "text/event-stream");
    let text = if streams {
        String::new()
    } else {
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Reply { status, headers, text }
}

fn bearer(key: &str) -> Vec<(String, String)> {
    vec![("authorization".into(), format!("Bearer {key}"))]
}

/// A signed-in browser's headers: the session cookie, from this app's origin.
fn browser(cookie: &str) -> Vec<(String, String)> {
    vec![("cookie".into(), cookie.into()), ("origin".into(), ORIGIN.into()), ("host".into(), HOST.into())]
}

async fn key(app: &App, name: &str, project: Option<&str>, role: Role) -> (String, String) {
    let (key, secret) = app.engine.identity().create_key(name, project, role, &Actor::system()).await.unwrap();
    (key.id, secret)
}

/// Starts a run that pauses on a send_email call; returns (run id, call id).
async fn paused_run(app: &App) -> (String, String) {
    let body = json!({"initial_prompt": "mail", "model_settings": {"script": [
        {"tool_calls": [{"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}}]},
        {"text": "done"}]}});
    let reply = app.post_json("/api/runs", &body.to_string()).await;
    let id = reply.json()["id"].as_str().unwrap().to_owned();
    let run = app.engine.runs().wait_until_settled(&id, Duration::from_secs(20)).await.unwrap();
    assert_eq!(run.status.as_str(), "paused");
    (id.clone(), run.interruptions[0].call_id.clone())
}

/// The things of `default` the matrix's paths name.
struct Fixtures {
    paused: (String, String),
    finished: String,
    first_message: String,
    blob: String,
    state: String,
    /// An agent of `default`.
    agent: String,
    /// A webhook of `default`, made again once a call deleted it.
    webhook: Option<String>,
    /// A comparison group of `default`.
    group: String,
    counter: usize,
}

impl Fixtures {
    async fn new(app: &App) -> Fixtures {
        let paused = paused_run(app).await;
        let run = app.finished_run(r#"{"initial_prompt": "What is 6 * 7?"}"#).await;
        let finished = run["id"].as_str().unwrap().to_owned();
        let messages = app.get(&format!("/api/runs/{finished}/messages")).await.json();
        let first_message = messages["messages"][0]["id"].as_str().unwrap().to_owned();
        let blob = format!("blob-{finished}");
        let stored = Blob {
            id: blob.clone(),
            run_id: finished.clone(),
            call_id: None,
            content_type: "application/json".into(),
            data: b"{\"big\": true}".to_vec(),
            created_at: chrono::Utc::now(),
        };
        app.engine.store().insert_blob(&stored).await.unwrap();
        let state = app.get(&format!("/api/runs/{finished}/state")).await.text;
        app.user("member-x", Some(("default", Role::Viewer)), false).await;
        let agent = app.post_json("/api/agents", r#"{"id": "matrix-agent", "name": "matrix_agent"}"#).await;
        assert_eq!(agent.status, StatusCode::CREATED, "{}", agent.text);
        let agent = agent.json()["id"].as_str().unwrap().to_owned();
        let batch = runlens_engine::model::BatchRuns {
            run: runlens_engine::model::CreateRun { initial_prompt: "hi".into(), ..Default::default() },
            models: vec!["builtin".into()],
        };
        let group = app.engine.comparisons().create_batch("default", batch, None).await.unwrap().group_id;
        Fixtures { paused, finished, first_message, blob, state, agent, webhook: None, group, counter: 0 }
    }

    /// The request for operation `(method, path)`: its URI and body; makes
    /// what a destructive call uses up first (a key, a price, a membership).
    async fn request(&mut self, app: &App, method: &str, path: &str) -> (String, Option<String>) {
        self.counter += 1;
        let n = self.counter;
        let (run, call) = (&self.paused.0, &self.paused.1);
        let finished = &self.finished;
        let uri = match path {
            "/api/runs/{id}/tool-calls/{call_id}"
            | "/api/runs/{id}/tool-calls/{call_id}/approve"
            | "/api/runs/{id}/tool-calls/{call_id}/reject" => path.replace("{id}", run).replace("{call_id}", call),
            "/api/blobs/{id}" => path.replace("{id}", &self.blob),
            // A fresh request of `default` for each call (a decision uses one up).
            p if p.starts_with("/api/approval-requests/{id}") => {
                let ask: NewApprovalRequest = serde_json::from_value(json!({"tool": "send_email",
                    "arguments": {}, "run": {"name": "matrix"}, "idempotency_key": format!("matrix-{n}")}))
                .unwrap();
                let made =
                    app.engine.requests().create_approval_request("default", ask, &Actor::system()).await.unwrap();
                path.replace("{id}", &made.request.id)
            }
            p if p.starts_with("/api/questions/{id}") => {
                let ask: NewQuestion = serde_json::from_value(json!({"question": "Which?"})).unwrap();
                let made = app.engine.requests().create_question("default", ask, &Actor::system()).await.unwrap();
                path.replace("{id}", &made.request.id)
            }
            "/api/compare" => format!("{path}?a={finished}&b={finished}"),
            "/api/compare/groups/{id}" => path.replace("{id}", &self.group),
            p if p.starts_with("/api/webhooks/{id}") => {
                let alive = match &self.webhook {
                    Some(id) => app.engine.webhooks().webhook(id).await.is_ok(),
                    None => false,
                };
                if !alive {
                    let hook = NewWebhook { url: format!("https://example.com/matrix/{n}"), ..NewWebhook::default() };
                    let made = app.engine.webhooks().create_webhook("default", hook, &Actor::system()).await.unwrap();
                    self.webhook = Some(made.webhook.id);
                }
                path.replace("{id}", self.webhook.as_deref().unwrap_or_default())
            }
            "/api/scores/{id}" => {
                // A fresh score of `default` for each call (a deletion uses one up).
                let new = serde_json::from_value(json!({"run_id": finished, "name": "matrix", "value": n})).unwrap();
                let score = app
                    .engine
                    .scores()
                    .add("default", new, runlens_engine::model::ScoreSource::Api, None, &Actor::system())
                    .await
                    .unwrap();
                path.replace("{id}", &score.id)
            }
            p if p.starts_with("/api/datasets/{id}") => {
                // A fresh dataset for each deletion, the matrix's own for the rest; a
                // fresh item for each call on one (a deletion uses one up).
                let id = match (method, p) {
                    ("delete", "/api/datasets/{id}") => {
                        let new = serde_json::from_value(json!({"name": format!("doomed {n}")})).unwrap();
                        app.engine.datasets().create("default", new, &Actor::system()).await.unwrap().id
                    }
                    _ => matrix_dataset(app).await,
                };
                let uri = path.replace("{id}", &id);
                if p.contains("{item_id}") {
                    let new = serde_json::from_value(json!({"input": {"prompt": format!("item {n}")}})).unwrap();
                    let added = app.engine.datasets().add_items("default", &id, vec![new], &Actor::system()).await;
                    uri.replace("{item_id}", &added.unwrap().item_ids[0])
                } else if p.ends_with("/upload") {
                    format!("{uri}?format=jsonl")
                } else {
                    uri
                }
            }
            p if p.starts_with("/api/review-queues/{id}") => {
                // A queue of its own for each deletion and each review (a review uses its item up).
                let fresh = method == "delete" || p.contains("{item_id}");
                let name = if fresh { format!("matrix {n}") } else { "matrix".to_owned() };
                let have = app.engine.reviews().list("default").await.unwrap();
                let id = match have.into_iter().find(|q| q.name == name) {
                    Some(q) => q.id,
                    None => {
                        let new = serde_json::from_value(review_queue_body(&name)).unwrap();
                        app.engine.reviews().create("default", new, &Actor::system()).await.unwrap().id
                    }
                };
                let uri = path.replace("{id}", &id);
                if p.contains("{item_id}") {
                    let add = serde_json::from_value(json!({"run_ids": [finished]})).unwrap();
                    app.engine.reviews().add_items("default", &id, add, &Actor::system()).await.unwrap();
                    let items = app.engine.reviews().items("default", &id, None, None, 1).await.unwrap();
                    uri.replace("{item_id}", &items.items[0].id)
                } else {
                    uri
                }
            }
            "/api/evaluators/{id}" => {
                // A deletion uses one up: it has one of its own.
                let name = if method == "delete" { format!("doomed {n}") } else { "matrix".to_owned() };
                let have = app.engine.evaluators().list("default").await.unwrap();
                let id = match have.into_iter().find(|e| e.name == name || e.name.starts_with("changed ")) {
                    Some(e) if method != "delete" => e.id,
                    _ => {
                        let new = serde_json::from_value(evaluator_body(&name)).unwrap();
                        app.engine.evaluators().create("default", new, &Actor::system()).await.unwrap().id
                    }
                };
                path.replace("{id}", &id)
            }
            "/api/experiment-sets/{id}" => path.replace("{id}", &matrix_experiment_set(app).await),
            p if p.starts_with("/api/experiments/{id}") => {
                let id = matrix_experiment(app).await;
                let uri = path.replace("{id}", &id);
                if p.ends_with("/compare") {
                    format!("{uri}?with={id}")
                } else {
                    uri
                }
            }
            p if p.starts_with("/api/agents/{id}") => path.replace("{id}", &self.agent).replace("{version}", "1"),
            "/api/keys/{id}" => {
                let (id, _) = key(app, &format!("doomed {n}"), Some("default"), Role::Viewer).await;
                path.replace("{id}", &id)
            }
            "/api/prices/{model}" => {
                let price =
                    PriceInput { input: 1.0, output: 2.0, cache_read: None, cache_write: None, reasoning: None };
                app.engine.traces().set_price("default", "matrix/model", price.clone()).await.unwrap();
                // The key of `other` reaches its own project's price.
                let _ = app.engine.traces().set_price("other", "matrix/model", price).await;
                path.replace("{model}", "matrix/model")
            }
            p if p.starts_with("/api/tools/http/{name}") => {
                // In both projects: the key of `other` reaches its own project's tool.
                for project in ["default", "other"] {
                    let tool = NewHttpTool {
                        name: "matrix_tool".into(),
                        description: "A tool of the matrix".into(),
                        schema: json!({"type": "object"}),
                        url: "https://tools.example.com/matrix".into(),
                        ..NewHttpTool::default()
                    };
                    let _ = app.engine.http_tools().create_http_tool(project, tool, &Actor::system()).await;
                }
                path.replace("{name}", "matrix_tool")
            }
            "/api/projects/{project}/members/{user}" => {
                let user = app.engine.directory().user_by_name("member-x").await.unwrap().unwrap().0;
                app.engine.directory().set_member("default", &user.id, Role::Viewer).await.unwrap();
                path.replace("{project}", "default").replace("{user}", "member-x")
            }
            _ => path
                .replace("{project}", "default")
                .replace("{message_id}", &self.first_message)
                .replace("{step}", "0")
                .replace("{id}", finished),
        };
        let body = match (method, path) {
            ("post", "/api/projects") => Some(json!({"name": format!("p{n}")}).to_string()),
            ("post", "/api/users") => Some(json!({"name": format!("u{n}"), "password": PASSWORD}).to_string()),
            ("post", "/api/keys") => Some(json!({"name": format!("k{n}"), "role": "viewer"}).to_string()),
            ("post", "/api/runs") => Some(r#"{"initial_prompt": "hi"}"#.into()),
            ("post", "/api/approval-requests") => Some(
                json!({"tool": "send_email", "arguments": {}, "run": {"name": "matrix"},
                       "idempotency_key": format!("matrix-post-{n}")})
                .to_string(),
            ),
            ("post", "/api/runs/{id}/fork") => Some(r#"{"from_step": 0}"#.into()),
            ("post", "/api/runs/{id}/replay") => Some(r#"{"mode": "recorded"}"#.into()),
            ("post", "/api/questions") => Some(json!({"question": format!("Which {n}?")}).to_string()),
            ("post", "/api/questions/{id}/answer") => Some(r#"{"answer": "this one"}"#.into()),
            ("post", "/api/runs/batch") => Some(r#"{"initial_prompt": "hi", "models": ["builtin"]}"#.into()),
            ("post", "/api/agui") => Some(
                json!({"threadId": format!("matrix-agui-{n}"), "runId": "r",
                       "messages": [{"id": "m", "role": "user", "content": "hi"}]})
                .to_string(),
            ),
            ("post", "/api/webhooks") => Some(json!({"url": format!("https://example.com/matrix/{n}")}).to_string()),
            ("post", "/api/agents") => Some(json!({"name": format!("agent_{n}")}).to_string()),
            ("put", "/api/agents/{id}") => Some(r#"{"name": "matrix_agent", "description": "again"}"#.into()),
            ("post", "/api/tools/http") => Some(
                json!({"name": format!("matrix_tool_{n}"), "description": "d", "schema": {"type": "object"},
                       "url": "https://tools.example.com/m"})
                .to_string(),
            ),
            ("put", "/api/tools/http/{name}") => Some(
                json!({"description": "again", "schema": {"type": "object"}, "url": "https://tools.example.com/m2"})
                    .to_string(),
            ),
            ("post", "/api/runs/import") => Some(self.state.clone()),
            ("post", "/v1/traces") => Some(r#"{"resourceSpans": []}"#.into()),
            ("post", "/api/runs/{id}/evaluate") => {
                Some(r#"{"scorers": [{"scorer": {"kind": "bounds", "max_turns": 9}}]}"#.into())
            }
            ("post", "/api/scores") => Some(json!({"run_id": finished, "name": "matrix", "value": n}).to_string()),
            ("post", "/api/datasets") => Some(json!({"name": format!("matrix {n}")}).to_string()),
            ("put", "/api/datasets/{id}") => Some(r#"{"description": "again"}"#.into()),
            ("post", "/api/datasets/{id}/items") => Some(r#"{"items": [{"input": {"prompt": "hi"}}]}"#.into()),
            ("put", "/api/datasets/{id}/items/{item_id}") => Some(r#"{"tags": ["matrix"]}"#.into()),
            ("post", "/api/datasets/{id}/upload") => {
                Some(json!({"content": "{\"input\": {\"prompt\": \"hi\"}}\n"}).to_string())
            }
            ("post", "/api/evaluators") => Some(evaluator_body(&format!("made {n}")).to_string()),
            ("post", "/api/review-queues") => Some(review_queue_body(&format!("made {n}")).to_string()),
            ("post", "/api/review-queues/{id}/items") => Some(json!({"run_ids": [finished]}).to_string()),
            ("post", "/api/review-queues/{id}/items/{item_id}/review") => Some(r#"{"scores": {"ok": true}}"#.into()),
            ("put", "/api/evaluators/{id}") => Some(evaluator_body(&format!("changed {n}")).to_string()),
            // Refused for want of a model (400) once the caller may start one.
            ("post", "/api/experiments") => Some(r#"{"dataset_id": "matrix"}"#.into()),
            // Refused for a model given twice (400) once the caller may start a set.
            ("post", "/api/experiment-sets") => {
                Some(r#"{"models": ["builtin", "builtin"], "experiment": {"dataset_id": "matrix"}}"#.into())
            }
            ("post", "/api/runs/{id}/dataset-items") => {
                Some(json!({"dataset_id": matrix_dataset(app).await}).to_string())
            }
            ("post", "/api/runs/{id}/messages") => Some(r#"{"message": "and then?"}"#.into()),
            ("post", "/api/runs/{id}/messages/{message_id}/edit") => Some(r#"{"message": "What is 7 * 7?"}"#.into()),
            ("put", "/api/prices/{model}") => Some(r#"{"input": 1, "output": 2}"#.into()),
            ("put", "/api/retention") => Some(r#"{"max_age_days": 3650}"#.into()),
            ("put", "/api/projects/{project}/members/{user}") => Some(r#"{"role": "operator"}"#.into()),
            ("post", _) => Some(String::new()),
            _ => None,
        };
        (uri, body)
    }
}

/// A review queue named `name` of the matrix: one yes/no field.
fn review_queue_body(name: &str) -> Value {
    json!({"name": name, "fields": [{"name": "ok"}]})
}

/// An evaluator named `name` of the matrix, scoring nothing (0 %).
fn evaluator_body(name: &str) -> Value {
    json!({"name": name, "sample_percent": 0, "scorers": [{"scorer": {"kind": "bounds", "max_turns": 9}}]})
}

/// The matrix's dataset of `default` (made again once a call deleted it).
async fn matrix_dataset(app: &App) -> String {
    let datasets = app.engine.datasets().list("default", None, 0, 200).await.unwrap().datasets;
    if let Some(d) = datasets.into_iter().find(|d| d.name == "matrix dataset") {
        return d.id;
    }
    let new = serde_json::from_value(json!({"name": "matrix dataset"})).unwrap();
    app.engine.datasets().create("default", new, &Actor::system()).await.unwrap().id
}

/// The matrix's experiment of `default` (over a dataset of its own).
async fn matrix_experiment(app: &App) -> String {
    let page = app.engine.experiments().list("default", None, None, 1).await.unwrap();
    if let Some(e) = page.experiments.into_iter().next() {
        return e.id;
    }
    let new = serde_json::from_value(json!({"name": "matrix experiments"})).unwrap();
    let dataset = app.engine.datasets().create("default", new, &Actor::system()).await.unwrap().id;
    let item = serde_json::from_value(json!({"input": {"prompt": "hi"}})).unwrap();
    app.engine.datasets().add_items("default", &dataset, vec![item], &Actor::system()).await.unwrap();
    let req = serde_json::from_value(json!({"dataset_id": dataset, "model": "builtin"})).unwrap();
    app.engine.experiments().start("default", req, &Actor::system()).await.unwrap().id
}

/// The matrix's set of experiments of `default`: the built-in model and
/// the same model under another name, over the matrix experiment's dataset.
async fn matrix_experiment_set(app: &App) -> String {
    let page = app.engine.experiments().list("default", None, None, 200).await.unwrap();
    if let Some(set) = page.experiments.into_iter().find_map(|e| e.set_id) {
        return set;
    }
    let one = app.engine.experiments().get("default", &matrix_experiment(app).await).await.unwrap();
    let experiment = json!({"dataset_id": one.dataset_id, "tools": []});
    let req = serde_json::from_value(json!({"models": crate::groups_api::MODELS[..2], "experiment": experiment}));
    app.engine.experiments().start_set("default", req.unwrap(), &Actor::system()).await.unwrap().set_id
}

/// The operations of the served document, as `(method, path)`.
async fn operations(app: &App) -> Vec<(String, String)> {
    let doc = app.get("/api/openapi.json").await.json();
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            ops.push((method.clone(), path.clone()));
        }
    }
    ops
}

/// Every caller of the matrix: none, a revoked key, each role of `default`
/// as a key and as a signed-in user, an admin key of another project, and an
/// instance admin.
async fn callers(app: &App) -> Vec<Who> {
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let mut who = vec![Who { label: "no credentials".into(), kind: Kind::Nobody, headers: Vec::new() }];
    let (revoked_id, revoked) = key(app, "revoked", Some("default"), Role::Admin).await;
    app.engine.identity().revoke_key(&revoked_id, &Actor::system()).await.unwrap();
    who.push(Who { label: "a revoked key".into(), kind: Kind::RevokedKey, headers: bearer(&revoked) });
    for role in Role::ALL {
        let (_, secret) = key(app, &format!("{role} key"), Some("default"), role).await;
        who.push(Who { label: format!("a {role} key"), kind: Kind::Member(role), headers: bearer(&secret) });
        let name = format!("{role}-user");
        app.user(&name, Some(("default", role)), false).await;
        let cookie = app.session(&name).await;
        who.push(Who { label: format!("a signed-in {role}"), kind: Kind::Member(role), headers: browser(&cookie) });
    }
    let (_, other) = key(app, "other admin", Some("other"), Role::Admin).await;
    who.push(Who { label: "an admin key of `other`".into(), kind: Kind::OtherAdmin, headers: bearer(&other) });
    who.push(Who {
        label: "the instance admin key".into(),
        kind: Kind::InstanceAdmin,
        headers: bearer(&app.admin_key),
    });
    app.user("root", None, true).await;
    let cookie = app.session("root").await;
    who.push(Who { label: "a signed-in instance admin".into(), kind: Kind::InstanceAdmin, headers: browser(&cookie) });
    who
}

#[tokio::test]
async fn every_operation_answers_each_caller_as_its_role_allows() {
    let app = crate::groups_api::three_model_app().await;
    let ops = operations(&app).await;
    let rules: BTreeMap<(&str, &str), (Need, Scope)> =
        RULES.iter().map(|(m, p, need, scope)| ((*m, *p), (*need, *scope))).collect();
    for (method, path) in &ops {
        assert!(rules.contains_key(&(method.as_str(), path.as_str())), "{method} {path} is missing from RULES");
    }
    assert_eq!(rules.len(), ops.len(), "RULES names an operation the API does not have");
    let mut fixtures = Fixtures::new(&app).await;
    let who = callers(&app).await;
    let mut wrong = Vec::new();
    let mut calls = 0;
    for (method, path) in &ops {
        let (need, scope) = rules[&(method.as_str(), path.as_str())];
        let verb = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        for w in &who {
            let (uri, body) = fixtures.request(&app, method, path).await;
            let reply = call(&app, &verb, &uri, body.as_deref(), &w.headers).await;
            calls += 1;
            let want = expected(need, scope, &w.kind);
            let got = class_of(reply.status);
            if got != want {
                wrong.push(format!("{verb} {uri} by {}: {want:?} expected, {} {}", w.label, reply.status, reply.text));
            }
            if got == Class::Unauthorized {
                assert_eq!(reply.headers[header::WWW_AUTHENTICATE], "Bearer", "{verb} {uri}");
            }
            if got == Class::Forbidden && matches!(w.kind, Kind::Member(_)) {
                if let Role(need) = need {
                    let message = reply.json()["error"].as_str().unwrap().to_owned();
                    assert!(message.contains(&format!("`{need}`")), "{verb} {uri}: the 403 names the role: {message}");
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{} of {calls} answers were wrong:\n{}", wrong.len(), wrong.join("\n"));
    assert!(calls >= ops.len() * 13);

    // A project named in X-Runlens-Project that the caller has no role in
    // is "not found", for every operation on the current project.
    let other = who.iter().find(|w| w.kind == Kind::OtherAdmin).unwrap();
    let viewer = who.iter().find(|w| w.kind == Kind::Member(Role::Viewer)).unwrap();
    let root = who.iter().find(|w| w.kind == Kind::InstanceAdmin).unwrap();
    for (method, path) in &ops {
        if rules[&(method.as_str(), path.as_str())].1 != Current {
            continue;
        }
        let verb = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        for (w, project) in
            [(other, "default"), (viewer, "other"), (viewer, "no-such-project"), (root, "no-such-project")]
        {
            let (uri, body) = fixtures.request(&app, method, path).await;
            let mut headers = w.headers.clone();
            headers.push(("x-runlens-project".into(), project.into()));
            let reply = call(&app, &verb, &uri, body.as_deref(), &headers).await;
            assert_eq!(reply.status, StatusCode::NOT_FOUND, "{verb} {uri} by {} in {project}: {}", w.label, reply.text);
        }
    }
    // The key of `other` lists its own project's runs (those it made), none of `default`'s.
    let runs = call(&app, &Method::GET, "/api/runs?limit=200", None, &other.headers).await.json();
    let runs = runs["runs"].as_array().unwrap();
    assert!(
        !runs.is_empty() && runs.iter().all(|r| r["project"] == "other" && r["created_by"]["name"] == "other admin")
    );
    let inbox = call(&app, &Method::GET, "/api/approvals", None, &other.headers).await.json();
    assert_eq!(inbox["approvals"], json!([]));
}

#[tokio::test]
async fn me_projects_members_keys_and_audit() {
    let app = app().await;
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    app.user("ada", Some(("default", Role::Admin)), false).await;
    app.user("bob", Some(("other", Role::Viewer)), false).await;
    let ada = browser(&app.session("ada").await);

    let me = call(&app, &Method::GET, "/api/me", None, &ada).await.json();
    assert_eq!(me["actor"]["name"], "ada");
    assert!(me["actor"]["id"].as_str().unwrap().starts_with("user:"));
    assert_eq!((me["via"].as_str(), me["instance_admin"].as_bool()), (Some("session"), Some(false)));
    assert_eq!((me["project"].as_str(), me["role"].as_str()), (Some("default"), Some("admin")));
    assert_eq!(me["projects"], json!([{"project": "default", "role": "admin"}]));
    let me = app.get("/api/me").await.json();
    assert_eq!((me["via"].as_str(), me["instance_admin"].as_bool()), (Some("key"), Some(true)));
    assert_eq!(me["projects"].as_array().unwrap().len(), 2, "an instance admin has every project");

    // Projects: ada sees hers; the instance admin all, in pages.
    let mine = call(&app, &Method::GET, "/api/projects", None, &ada).await.json();
    let names: Vec<&str> = mine["projects"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["default"]);
    let created = app.post_json("/api/projects", r#"{"name": "zeta"}"#).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(app.post_json("/api/projects", r#"{"name": "zeta"}"#).await.status, StatusCode::CONFLICT);
    for bad in [r#"{"name": "Bad Name"}"#, r#"{"name": "ok", "extra": 1}"#, "{}"] {
        assert_eq!(app.post_json("/api/projects", bad).await.status, StatusCode::BAD_REQUEST, "{bad}");
    }
    let first = app.get("/api/projects?limit=2").await.json();
    assert_eq!(first["projects"].as_array().unwrap().len(), 2);
    let cursor = first["next_cursor"].as_str().unwrap();
    let rest = app.get(&format!("/api/projects?limit=2&cursor={cursor}")).await.json();
    assert_eq!(rest["projects"][0]["name"], "zeta");
    assert!(rest["next_cursor"].is_null());
    assert_eq!(app.get("/api/projects?limit=0").await.status, StatusCode::BAD_REQUEST);
    assert_eq!(app.get("/api/projects?limit=201").await.status, StatusCode::BAD_REQUEST);

    // Members: ada manages `default`'s; `other` is not hers to know of.
    let put = |who: &'static str, role: &'static str| {
        let headers = ada.clone();
        let app = &app;
        async move {
            let body = json!({ "role": role }).to_string();
            call(app, &Method::PUT, &format!("/api/projects/default/members/{who}"), Some(&body), &headers).await
        }
    };
    let set = put("bob", "approver").await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text);
    assert_eq!((set.json()["user_name"].as_str(), set.json()["role"].as_str()), (Some("bob"), Some("approver")));
    assert_eq!(put("nobody", "viewer").await.status, StatusCode::NOT_FOUND);
    assert_eq!(put("bob", "owner").await.status, StatusCode::BAD_REQUEST);
    let members = call(&app, &Method::GET, "/api/projects/default/members", None, &ada).await.json();
    let listed: Vec<(&str, &str)> = members["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["user_name"].as_str().unwrap(), m["role"].as_str().unwrap()))
        .collect();
    assert_eq!(listed, [("ada", "admin"), ("bob", "approver")]);
    let others = call(&app, &Method::GET, "/api/projects/other/members", None, &ada).await;
    assert_eq!(others.status, StatusCode::NOT_FOUND);
    assert_eq!(app.get("/api/projects/nope/members").await.status, StatusCode::NOT_FOUND);
    let removed = call(&app, &Method::DELETE, "/api/projects/default/members/bob", None, &ada).await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT, "{}", removed.text);
    let again = call(&app, &Method::DELETE, "/api/projects/default/members/bob", None, &ada).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);

    // Keys: created with the secret shown once, listed without it, revoked.
    let body = r#"{"name": "ci", "role": "operator", "project": "default"}"#;
    let created = call(&app, &Method::POST, "/api/keys", Some(body), &ada).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let key = created.json();
    let secret = key["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("rl_") && secret.len() == 67, "{secret}");
    assert_eq!((key["project"].as_str(), key["role"].as_str()), (Some("default"), Some("operator")));
    let id = key["id"].as_str().unwrap().to_owned();
    let listed = call(&app, &Method::GET, "/api/keys", None, &ada).await;
    assert!(listed.text.contains(&id) && !listed.text.contains(&secret), "{}", listed.text);
    let by_key = call(&app, &Method::GET, "/api/me", None, &bearer(&secret)).await.json();
    assert_eq!((by_key["actor"]["name"].as_str(), by_key["role"].as_str()), (Some("ci"), Some("operator")));
    // An instance-admin key needs an instance admin; another project's key is hidden.
    let instance = r#"{"name": "root", "role": "admin", "project": null}"#;
    assert_eq!(call(&app, &Method::POST, "/api/keys", Some(instance), &ada).await.status, StatusCode::FORBIDDEN);
    let weak = r#"{"name": "root", "role": "viewer", "project": null}"#;
    assert_eq!(app.post_json("/api/keys", weak).await.status, StatusCode::BAD_REQUEST);
    let made = app.post_json("/api/keys", instance).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    assert!(made.json()["project"].is_null());
    let elsewhere = r#"{"name": "x", "role": "viewer", "project": "other"}"#;
    assert_eq!(call(&app, &Method::POST, "/api/keys", Some(elsewhere), &ada).await.status, StatusCode::NOT_FOUND);
    let other_key = app.post_json("/api/keys", elsewhere).await.json();
    let other_id = other_key["id"].as_str().unwrap();
    let hidden = call(&app, &Method::DELETE, &format!("/api/keys/{other_id}"), None, &ada).await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND, "{}", hidden.text);
    let root_id = made.json()["id"].as_str().unwrap().to_owned();
    let hidden = call(&app, &Method::DELETE, &format!("/api/keys/{root_id}"), None, &ada).await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND, "an instance key is not a project admin's");
    assert_eq!(call(&app, &Method::GET, "/api/keys?scope=instance", None, &ada).await.status, StatusCode::FORBIDDEN);
    let all = app.get("/api/keys?scope=instance&limit=200").await.json();
    assert!(all["keys"].as_array().unwrap().iter().any(|k| k["id"] == root_id.as_str() && k["project"].is_null()));
    let revoked = call(&app, &Method::DELETE, &format!("/api/keys/{id}"), None, &ada).await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.text);
    assert!(revoked.json()["revoked_at"].is_string());
    assert_eq!(call(&app, &Method::GET, "/api/me", None, &bearer(&secret)).await.status, StatusCode::UNAUTHORIZED);
    let again = call(&app, &Method::DELETE, &format!("/api/keys/{id}"), None, &ada).await;
    assert_eq!(again.status, StatusCode::CONFLICT);

    // Users: instance admins only; the password never comes back.
    let body = json!({"name": "cy", "password": "a long enough secret", "instance_admin": false}).to_string();
    assert_eq!(call(&app, &Method::POST, "/api/users", Some(&body), &ada).await.status, StatusCode::FORBIDDEN);
    let made = app.post_json("/api/users", &body).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    assert!(!made.text.contains("a long enough secret"));
    assert_eq!(app.post_json("/api/users", &body).await.status, StatusCode::CONFLICT);
    let short = json!({"name": "dee", "password": "short"}).to_string();
    let refused = app.post_json("/api/users", &short).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(!refused.text.contains("short\""), "{}", refused.text);
    let users = app.get("/api/users?limit=2").await.json();
    assert_eq!(users["users"].as_array().unwrap().len(), 2);
    assert!(users["next_cursor"].is_string());

    // The audit log: newest first, paged with `before`.
    let audit = call(&app, &Method::GET, "/api/audit", None, &ada).await.json();
    let actions: Vec<&str> =
        audit["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    for action in ["member_set", "member_removed", "key_created", "key_revoked"] {
        assert!(actions.contains(&action), "{action} in {actions:?}");
    }
    let seqs: Vec<i64> = audit["entries"].as_array().unwrap().iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] > w[1]), "newest first: {seqs:?}");
    assert!(actions.iter().position(|a| *a == "key_revoked") < actions.iter().position(|a| *a == "key_created"));
    let removal = audit["entries"].as_array().unwrap().iter().find(|e| e["action"] == "member_removed").unwrap();
    assert_eq!((removal["actor"]["name"].as_str(), removal["target"].as_str()), (Some("ada"), Some("bob")));
    let page = call(&app, &Method::GET, "/api/audit?limit=1", None, &ada).await.json();
    let before = page["next_before"].as_i64().unwrap();
    let next = call(&app, &Method::GET, &format!("/api/audit?limit=1&before={before}"), None, &ada).await.json();
    assert!(next["entries"][0]["seq"].as_i64().unwrap() < before);
    let instance = app.get("/api/audit?scope=instance").await.json();
    let actions: Vec<&str> =
        instance["entries"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert!(actions.contains(&"sign_in") && actions.contains(&"user_created"), "{actions:?}");
}

/// A signed-in browser's unsafe requests must come from the app's own
/// pages: REST, the page forms and the server functions alike.
#[tokio::test]
async fn a_session_request_from_another_origin_is_refused_everywhere() {
    use leptos::server_fn::ServerFn;

    let app = app().await;
    app.user("ada", Some(("default", Role::Admin)), false).await;
    let cookie = app.session("ada").await;
    let run = app.finished_run(r#"{"initial_prompt": "hi"}"#).await;
    let id = run["id"].as_str().unwrap();
    let cancel = runlens::api::CancelRun::PATH;
    let cancel_form = format!("id={id}");
    let cases: [(&str, &str, &str); 3] = [
        ("/api/runs", "application/json", r#"{"initial_prompt": "hi"}"#),
        ("/playground", "application/x-www-form-urlencoded", "prompt=hi&model=builtin"),
        (cancel, "application/x-www-form-urlencoded", &cancel_form),
    ];
    let runs_before = app.get("/api/runs").await.json()["runs"].as_array().unwrap().len();
    for (path, content_type, body) in cases {
        let evil = [("cookie", cookie.as_str()), ("origin", "http://evil.example"), ("host", HOST)];
        let reply = app.send_with(Method::POST, path, Some(body), content_type, &evil).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path}: {}", reply.text);
        assert!(reply.json()["error"].as_str().unwrap().contains("evil.example"), "{path}: {}", reply.text);
        let cross_site = [("cookie", cookie.as_str()), ("sec-fetch-site", "cross-site"), ("host", HOST)];
        let reply = app.send_with(Method::POST, path, Some(body), content_type, &cross_site).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path}");
        let nothing = [("cookie", cookie.as_str()), ("host", HOST)];
        let reply = app.send_with(Method::POST, path, Some(body), content_type, &nothing).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path}: no evidence of the origin");
    }
    assert_eq!(app.get("/api/runs").await.json()["runs"].as_array().unwrap().len(), runs_before, "nothing created");
    // The same requests from the app's own pages work.
    let own = [("cookie", cookie.as_str()), ("origin", ORIGIN), ("host", HOST)];
    let created = app.send_with(Method::POST, "/api/runs", Some(cases[0].2), cases[0].1, &own).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.json()["created_by"]["name"], "ada");
    let posted = app.send_with(Method::POST, "/playground", Some(cases[1].2), cases[1].1, &own).await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", posted.text);
    let referer = [("cookie", cookie.as_str()), ("referer", "http://localhost:3000/runs"), ("host", HOST)];
    let cancelled = app.send_with(Method::POST, cancel, Some(&cancel_form), cases[2].1, &referer).await;
    assert_ne!(cancelled.status, StatusCode::FORBIDDEN, "{}", cancelled.text);
    assert_ne!(cancelled.status, StatusCode::UNAUTHORIZED, "{}", cancelled.text);
    // Safe requests need no evidence; keys need none at all.
    let read = app.send_with(Method::GET, "/api/runs", None, "", &[("cookie", cookie.as_str())]).await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(app.post_json("/api/runs", cases[0].2).await.status, StatusCode::CREATED);
}

async fn login_form(app: &App, name: &str, password: &str) -> Reply {
    app.login(name, password).await.0
}

fn location(reply: &Reply) -> &str {
    reply.headers.get(header::LOCATION).and_then(|l| l.to_str().ok()).unwrap_or("")
}

#[tokio::test]
async fn sign_in_is_limited_setup_links_work_once_and_sign_out_ends_the_session() {
    let app = app().await;
    // The first start: a setup link makes the first admin, once.
    let token = app.engine.identity().issue_setup_token().await.unwrap().expect("no user yet: a link");
    let form = format!("token={token}&username=first&password={}", urlencode(PASSWORD));
    let headers = [("origin", ORIGIN), ("host", HOST)];
    let content_type = "application/x-www-form-urlencoded";
    let done = app.send_with(Method::POST, "/setup", Some(&form), content_type, &headers).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.text);
    assert_eq!(location(&done), "/");
    let cookie = session_cookie(&done).expect("signed in");
    let me = app.send_with(Method::GET, "/api/me", None, "", &[("cookie", cookie.as_str())]).await.json();
    assert_eq!((me["actor"]["name"].as_str(), me["instance_admin"].as_bool()), (Some("first"), Some(true)));
    let form = format!("token={token}&username=second&password={}", urlencode(PASSWORD));
    let again = app.send_with(Method::POST, "/setup", Some(&form), content_type, &headers).await;
    assert!(location(&again).starts_with("/setup?") && location(&again).contains("error="), "{:?}", again.headers);
    assert!(app.engine.directory().user_by_name("second").await.unwrap().is_none());
    assert!(app.engine.identity().issue_setup_token().await.unwrap().is_none(), "no link once a user exists");

    // Five wrong passwords for one account; the sixth try is refused even
    // with the right password, and sets no session.
    app.user("bob", Some(("default", Role::Viewer)), false).await;
    for _ in 0..runlens::server::auth::login::MAX_FAILURES_PER_ACCOUNT {
        let reply = login_form(&app, "bob", "wrong password").await;
        assert!(location(&reply).starts_with("/login?error=invalid"), "{:?}", reply.headers);
    }
    let (reply, cookie) = app.login("bob", PASSWORD).await;
    assert!(location(&reply).starts_with("/login?error=throttled"), "{:?}", reply.headers);
    if let Some(cookie) = cookie {
        let me = app.send_with(Method::GET, "/api/me", None, "", &[("cookie", cookie.as_str())]).await;
        assert_eq!(me.status, StatusCode::UNAUTHORIZED, "a throttled sign-in signs nobody in");
    }
    // Another account is not affected.
    app.user("cy", Some(("default", Role::Viewer)), false).await;
    let cy = app.session("cy").await;

    // Signing out ends the session: the cookie no longer works.
    let me = app.send_with(Method::GET, "/api/me", None, "", &[("cookie", cy.as_str())]).await;
    assert_eq!(me.status, StatusCode::OK);
    let out = app
        .send_with(Method::POST, "/logout", None, "", &[("cookie", cy.as_str()), ("origin", ORIGIN), ("host", HOST)])
        .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER, "{}", out.text);
    assert_eq!(location(&out), "/login");
    let me = app.send_with(Method::GET, "/api/me", None, "", &[("cookie", cy.as_str())]).await;
    assert_eq!(me.status, StatusCode::UNAUTHORIZED);
    let page = app.send_with(Method::GET, "/runs", None, "", &[("cookie", cy.as_str())]).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert!(location(&page).starts_with("/login?next="), "pages send the signed-out to the sign-in page");
}

/// A `MakeWriter` collecting everything logged.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

#[tokio::test]
async fn passwords_keys_and_session_ids_never_come_back_out() {
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);

    let app = app().await;
    let password = "Xyzzy-p4ssphrase-never-shown";
    let mut bodies: Vec<(String, String)> = Vec::new();
    let mut keep = |what: &str, reply: &Reply| bodies.push((what.to_owned(), reply.text.clone()));

    let body = json!({"name": "eve", "password": password, "instance_admin": false}).to_string();
    let made = app.post_json("/api/users", &body).await;
    assert_eq!(made.status, StatusCode::CREATED);
    keep("create user", &made);
    let put = app
        .send(Method::PUT, "/api/projects/default/members/eve", Some(r#"{"role": "admin"}"#), "application/json")
        .await;
    keep("set member", &put);
    let key = app.post_json("/api/keys", r#"{"name": "eve's key", "role": "admin", "project": "default"}"#).await;
    let secret = key.json()["secret"].as_str().unwrap().to_owned();
    let (login, cookie) = app.login("eve", password).await;
    keep("sign in", &login);
    let cookie = cookie.unwrap();
    let session_id = cookie.split_once('=').unwrap().1.to_owned();
    let eve = browser(&cookie);
    let with_key = bearer(&secret);

    let run = call(&app, &Method::POST, "/api/runs", Some(r#"{"initial_prompt": "What is 1 + 1?"}"#), &eve).await;
    keep("create run", &run);
    let id = run.json()["id"].as_str().unwrap().to_owned();
    app.engine.runs().wait_until_settled(&id, Duration::from_secs(20)).await.unwrap();
    for (uri, headers) in [
        (format!("/api/runs/{id}/state"), &eve),
        (format!("/api/runs/{id}/state"), &with_key),
        (format!("/api/runs/{id}"), &with_key),
        ("/api/keys".to_owned(), &eve),
        ("/api/audit".to_owned(), &eve),
        ("/api/me".to_owned(), &eve),
        ("/api/me".to_owned(), &with_key),
        ("/api/approvals?status=decided".to_owned(), &eve),
        ("/runs".to_owned(), &eve),
        (format!("/runs/{id}"), &with_key),
        ("/settings".to_owned(), &eve),
    ] {
        let reply = call(&app, &Method::GET, &uri, None, headers).await;
        assert!(reply.status.is_success(), "{uri}: {}", reply.status);
        keep(&uri, &reply);
    }
    let instance_audit = app.get("/api/audit?scope=instance").await;
    keep("instance audit", &instance_audit);
    // Errors: a wrong password, a bad key, bad bodies with the secrets in them.
    keep("wrong password", &app.login("eve", &format!("{password}!")).await.0);
    let almost = format!("{}0", &secret[..secret.len() - 1]);
    keep("unknown key", &call(&app, &Method::GET, "/api/me", None, &bearer(&almost)).await);
    keep("garbled key", &call(&app, &Method::GET, "/api/me", None, &bearer(&format!("{secret} extra"))).await);
    let bad = json!({"name": "eve", "password": password, "unexpected": secret}).to_string();
    keep("bad user body", &app.post_json("/api/users", &bad).await);
    let taken = json!({"name": "eve", "password": password}).to_string();
    keep("taken name", &app.post_json("/api/users", &taken).await);
    keep(
        "bad key body",
        &call(&app, &Method::POST, "/api/keys", Some(&format!("{{\"name\": \"{secret}\"}}")), &eve).await,
    );
    keep("unknown run", &call(&app, &Method::GET, &format!("/api/runs/{secret}"), None, &eve).await);
    let out = call(&app, &Method::POST, "/logout", None, &eve).await;
    keep("sign out", &out);
    keep("after sign out", &call(&app, &Method::GET, "/api/me", None, &eve).await);

    for (what, text) in &bodies {
        assert!(!text.contains(password), "{what}: the password is in the answer");
        assert!(!text.contains(&session_id), "{what}: the session id is in the answer");
        if what != "unknown run" {
            assert!(!text.contains(&secret), "{what}: the key's secret is in the answer");
        }
    }
    drop(_logging);
    let logged = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(logged.contains("eve") || logged.len() > 100, "the log was captured: {logged:.400}");
    assert!(!logged.contains(password), "the password is in the log");
    assert!(!logged.contains(&session_id), "the session id is in the log");
    // The secret was sent as a path and a body (a client's mistake), which
    // the request log may show; what the server itself logs never has it.
    let own_lines: Vec<&str> =
        logged.lines().filter(|l| l.contains(&secret[..20]) && !l.contains("/api/runs/rl_")).collect();
    assert!(own_lines.is_empty(), "the key's secret is in the log:\n{}", own_lines.join("\n"));
}
