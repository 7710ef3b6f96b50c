//! Saved agents through the API: versions and overrides, input schemas,
//! child runs and their tree, project isolation and roles. (The run fields
//! that came with them are in `run_fields_api.rs`.)

use axum::http::{Method, StatusCode};
use runlens_engine::model::{Actor, AgentInput, AgentSpec, Role};
use serde_json::{json, Value};

use crate::support::{app, App, Reply};

impl App {
    async fn put_json(&self, uri: &str, body: &str) -> Reply {
        self.send(Method::PUT, uri, Some(body), "application/json").await
    }

    /// Saves an agent through the API; its JSON.
    pub(crate) async fn agent(&self, body: Value) -> Value {
        let reply = self.post_json("/api/agents", &body.to_string()).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
        reply.json()
    }

    /// Creates a run that must be accepted, and waits for it to settle.
    pub(crate) async fn settled(&self, body: Value) -> Value {
        self.finished_run(&body.to_string()).await
    }

    /// A key of `default` with `role`, as the headers of [`App::send_with`].
    pub(crate) async fn key_of(&self, project: &str, role: Role) -> String {
        let name = format!("{project} {role} {}", uuid_like());
        let (_, secret) =
            self.engine.identity().create_key(&name, Some(project), role, &Actor::system()).await.unwrap();
        format!("Bearer {secret}")
    }

    pub(crate) async fn as_key(&self, key: &str, method: Method, uri: &str, body: Option<&str>) -> Reply {
        self.send_with(method, uri, body, "application/json", &[("authorization", key)]).await
    }
}

fn uuid_like() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

/// The error message of a reply that must have `status`.
pub(crate) fn refusal(reply: &Reply, status: StatusCode) -> String {
    assert_eq!(reply.status, status, "{}", reply.text);
    reply.json()["error"].as_str().unwrap().to_owned()
}

pub(crate) fn ids(list: &Value, key: &str) -> Vec<String> {
    list[key].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn each_save_is_a_new_version_and_older_ones_stay_readable() {
    let app = app().await;
    let created =
        app.agent(json!({"id": "math", "name": "math_helper", "description": "Adds", "tools": ["calculator"]})).await;
    assert_eq!((created["id"].as_str(), created["version"].as_u64()), (Some("math"), Some(1)));
    assert_eq!(created["project"], "default");
    assert_eq!(created["updated_by"]["name"], "tests");

    let updated =
        app.put_json("/api/agents/math", r#"{"name": "math_helper", "description": "Adds, carefully"}"#).await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text);
    let updated = updated.json();
    assert_eq!((updated["version"].as_u64(), updated["description"].as_str()), (Some(2), Some("Adds, carefully")));
    assert_eq!(updated["tools"], json!([]), "a save is the whole spec");
    app.put_json("/api/agents/math", r#"{"name": "math_helper", "description": "Third"}"#).await;

    let detail = app.get("/api/agents/math").await.json();
    assert_eq!((detail["version"].as_u64(), detail["description"].as_str()), (Some(3), Some("Third")));
    let stats: Vec<u64> = detail["stats"].as_array().unwrap().iter().map(|s| s["version"].as_u64().unwrap()).collect();
    assert_eq!(stats, [3, 2, 1], "every version, newest first, runs or not");
    assert_eq!(detail["stats"][0]["runs"], 0);
    assert!(detail["stats"][0]["success_rate"].is_null());

    let v1 = app.get("/api/agents/math/versions/1").await.json();
    assert_eq!((v1["version"].as_u64(), v1["description"].as_str()), (Some(1), Some("Adds")));
    assert_eq!(v1["tools"], json!(["calculator"]));
    assert_eq!(app.get("/api/agents/math/versions/4").await.status, StatusCode::NOT_FOUND);
    let message = refusal(&app.get("/api/agents/math/versions/zero").await, StatusCode::BAD_REQUEST);
    assert!(message.starts_with("version must be a version number"), "{message}");

    // Versions, newest first: whole, by cursor, by offset.
    let versions = |list: &Value| -> Vec<u64> {
        list["versions"].as_array().unwrap().iter().map(|v| v["version"].as_u64().unwrap()).collect()
    };
    let all = app.get("/api/agents/math/versions").await.json();
    assert_eq!((versions(&all), all["next_cursor"].is_null()), (vec![3, 2, 1], true));
    let first = app.get("/api/agents/math/versions?limit=2").await.json();
    assert_eq!((versions(&first), first["next_cursor"].as_str()), (vec![3, 2], Some("2")));
    let rest = app.get("/api/agents/math/versions?limit=2&cursor=2").await.json();
    assert_eq!((versions(&rest), rest["next_cursor"].is_null()), (vec![1], true));
    let skipped = app.get("/api/agents/math/versions?limit=1&offset=1").await.json();
    assert_eq!((versions(&skipped), skipped["next_cursor"].as_str()), (vec![2], Some("2")));
    assert_eq!(versions(&app.get("/api/agents/math/versions?offset=3").await.json()), Vec::<u64>::new());
    let both = app.get("/api/agents/math/versions?offset=1&cursor=2").await;
    assert_eq!(refusal(&both, StatusCode::BAD_REQUEST), "offset and cursor cannot be combined");

    // The list, by name.
    app.agent(json!({"name": "alpha"})).await;
    let list = app.get("/api/agents").await.json();
    let names: Vec<&str> = list["agents"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["alpha", "math_helper"]);
    assert_eq!(list["agents"][1]["version"], 3, "each at its current version");
    let page = app.get("/api/agents?limit=1").await.json();
    assert_eq!((page["agents"][0]["name"].as_str(), page["next_cursor"].as_str()), (Some("alpha"), Some("alpha")));
    let next = app.get("/api/agents?limit=1&cursor=alpha").await.json();
    assert_eq!((next["agents"][0]["name"].as_str(), next["next_cursor"].is_null()), (Some("math_helper"), true));
    let by_offset = app.get("/api/agents?limit=1&offset=1").await.json();
    assert_eq!(by_offset["agents"][0]["name"], "math_helper");
}

#[tokio::test]
async fn conflicts_are_409_and_bad_specs_400_naming_the_field() {
    let app = app().await;
    app.agent(json!({"id": "helper", "name": "helper", "tools": ["calculator"]})).await;
    app.agent(json!({"id": "other", "name": "other"})).await;

    let taken_name = app.post_json("/api/agents", r#"{"name": "helper"}"#).await;
    assert!(refusal(&taken_name, StatusCode::CONFLICT).contains("named `helper`"));
    let taken_id = app.post_json("/api/agents", r#"{"id": "helper", "name": "fresh"}"#).await;
    assert!(refusal(&taken_id, StatusCode::CONFLICT).contains("`helper` is taken"));
    let renamed = app.put_json("/api/agents/other", r#"{"name": "helper"}"#).await;
    assert!(refusal(&renamed, StatusCode::CONFLICT).contains("named `helper`"));

    let cases = [
        (json!({"name": "Bad Name"}), "name must be"),
        (json!({"name": "calculator"}), "name `calculator` is taken by a tool"),
        (json!({"name": "x", "tools": ["teleport"]}), "tools: unknown tool `teleport`"),
        (json!({"name": "x", "input_schema": {"type": 5}}), "input_schema is not a valid JSON Schema"),
        (json!({"name": "x", "input_schema": "a string"}), "input_schema must be a JSON Schema"),
        (json!({"name": "x", "agents": ["ghost"]}), "agents: no agent `ghost` in this project"),
        (json!({"name": "x", "handoffs": ["ghost"]}), "handoffs: no agent `ghost` in this project"),
        (json!({"name": "x", "agents": ["helper", "helper"]}), "agents: `helper` is listed twice"),
        (json!({"name": "x", "model": "gpt-x"}), "unknown model `gpt-x`"),
        (json!({"name": "x", "colour": "red"}), "unknown field `colour`"),
        (json!({"name": "x", "max_turns": "many"}), "invalid type"),
    ];
    for (body, expected) in &cases {
        let message = refusal(&app.post_json("/api/agents", &body.to_string()).await, StatusCode::BAD_REQUEST);
        assert!(message.contains(expected), "{body}: {message} / {expected}");
        let message = refusal(&app.put_json("/api/agents/other", &body.to_string()).await, StatusCode::BAD_REQUEST);
        assert!(message.contains(expected), "PUT {body}: {message} / {expected}");
    }
    let with_id = app.put_json("/api/agents/other", r#"{"id": "other", "name": "other"}"#).await;
    assert!(refusal(&with_id, StatusCode::BAD_REQUEST).contains("unknown field `id`"), "the id is the path's");

    // Nothing changed.
    let list = app.get("/api/agents").await.json();
    assert_eq!(list["agents"].as_array().unwrap().len(), 2);
    assert_eq!(app.get("/api/agents/other").await.json()["version"], 1);
    assert_eq!(app.get("/api/agents/missing").await.status, StatusCode::NOT_FOUND);
    let message = refusal(&app.put_json("/api/agents/missing", r#"{"name": "y"}"#).await, StatusCode::NOT_FOUND);
    assert_eq!(message, "agent `missing` not found");
}

#[tokio::test]
async fn a_cycle_of_sub_agent_calls_is_400_naming_it_unless_the_agent_sets_a_tree_budget() {
    let app = app().await;
    app.agent(json!({"id": "alpha", "name": "alpha"})).await;
    app.agent(json!({"id": "beta", "name": "beta", "agents": ["alpha"]})).await;
    for body in [json!({"name": "alpha", "agents": ["alpha"]}), json!({"name": "alpha", "agents": ["beta"]})] {
        let message = refusal(&app.put_json("/api/agents/alpha", &body.to_string()).await, StatusCode::BAD_REQUEST);
        assert!(message.contains("is a cycle of sub-agent calls"), "{body}: {message}");
        assert!(message.contains("tree_budget"), "{message}");
    }
    let refused = app.put_json("/api/agents/alpha", r#"{"name": "alpha", "agents": ["beta"]}"#).await;
    assert!(refusal(&refused, StatusCode::BAD_REQUEST).contains("`alpha` → `beta` → `alpha`"));
    assert_eq!(app.get("/api/agents/alpha").await.json()["version"], 1, "nothing saved");
    let bad = r#"{"name": "alpha", "tree_budget": {"runs": 0}}"#;
    let message = refusal(&app.put_json("/api/agents/alpha", bad).await, StatusCode::BAD_REQUEST);
    assert!(message.contains("tree_budget.runs must be between 1 and"), "{message}");
    let unknown = r#"{"name": "alpha", "tree_budget": {"children": 3}}"#;
    assert!(refusal(&app.put_json("/api/agents/alpha", unknown).await, StatusCode::BAD_REQUEST).contains("children"));

    // With a budget the cycle is saved, and the budget read back.
    let body = json!({"name": "alpha", "agents": ["beta"], "tree_budget": {"runs": 12, "turns": 40}});
    let reply = app.put_json("/api/agents/alpha", &body.to_string()).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.json()["tree_budget"], json!({"runs": 12, "turns": 40}));
    assert_eq!(app.get("/api/agents/alpha").await.json()["tree_budget"], json!({"runs": 12, "turns": 40}));
}

#[tokio::test]
async fn a_run_starts_from_the_agents_version_and_records_its_overrides() {
    let app = app().await;
    let script = |text: &str| json!({"script": [{"text": text}]});
    app.agent(json!({"id": "greeter", "name": "greeter", "system_prompt": "Greet.", "tools": ["calculator"],
        "max_turns": 3, "model_settings": script("hello from v1")}))
        .await;
    app.put_json(
        "/api/agents/greeter",
        &json!({"name": "greeter", "system_prompt": "Greet warmly.", "tools": ["calculator"], "max_turns": 3,
            "model_settings": script("hello from v2")})
        .to_string(),
    )
    .await;

    let current = app.settled(json!({"agent_id": "greeter", "initial_prompt": "hi"})).await;
    assert_eq!(current["status"], "done", "{current}");
    assert_eq!((current["agent_id"].as_str(), current["agent_version"].as_u64()), (Some("greeter"), Some(2)));
    assert_eq!(current["summary"], "hello from v2");
    assert_eq!((current["system_prompt"].as_str(), current["max_turns"].as_u64()), (Some("Greet warmly."), Some(3)));
    assert_eq!(current["tools"], json!(["calculator"]));
    assert_eq!(current["agent_overrides"], json!([]));
    assert_eq!(
        (current["current_agent"].as_str(), current["current_agent_version"].as_u64()),
        (Some("greeter"), Some(2))
    );

    let older = app.settled(json!({"agent_id": "greeter", "agent_version": 1, "initial_prompt": "hi"})).await;
    assert_eq!((older["agent_version"].as_u64(), older["summary"].as_str()), (Some(1), Some("hello from v1")));
    assert_eq!(older["system_prompt"], "Greet.");

    let overridden = app
        .settled(json!({"agent_id": "greeter", "initial_prompt": "hi", "max_turns": 7, "tools": [],
            "model_settings": script("my own words")}))
        .await;
    assert_eq!(overridden["summary"], "my own words");
    assert_eq!((overridden["max_turns"].as_u64(), overridden["tools"].clone()), (Some(7), json!([])));
    assert_eq!(overridden["system_prompt"], "Greet warmly.", "what the request leaves out is the agent's");
    assert_eq!(overridden["agent_overrides"], json!(["model_settings", "tools", "max_turns"]));

    let missing = app.post_json("/api/runs", r#"{"agent_id": "greeter", "agent_version": 9, "initial_prompt": "x"}"#);
    let message = refusal(&missing.await, StatusCode::BAD_REQUEST);
    assert!(message.contains("agent_version: agent `greeter` has no version 9"), "{message}");
    let unsaved = app.post_json("/api/runs", r#"{"agent_id": "nobody", "initial_prompt": "x"}"#).await;
    assert!(refusal(&unsaved, StatusCode::BAD_REQUEST).contains("agent_id: no agent `nobody` in this project"));
    let alone = app.post_json("/api/runs", r#"{"agent_version": 1, "initial_prompt": "x"}"#).await;
    assert_eq!(refusal(&alone, StatusCode::BAD_REQUEST), "agent_version needs agent_id");

    // The agent's page counts its runs per version.
    let detail = app.get("/api/agents/greeter").await.json();
    let v2 = &detail["stats"][0];
    assert_eq!((v2["version"].as_u64(), v2["runs"].as_u64(), v2["done"].as_u64()), (Some(2), Some(2), Some(2)));
    assert_eq!(v2["success_rate"], 1.0);
    assert!(v2["usage"]["total_tokens"].as_u64().unwrap() > 0);
    assert_eq!((detail["stats"][1]["version"].as_u64(), detail["stats"][1]["runs"].as_u64()), (Some(1), Some(1)));
    // And the runs list filters by agent.
    let listed = app.get("/api/runs?agent_id=greeter").await.json();
    assert_eq!(listed["runs"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn input_is_checked_against_the_agents_input_schema() {
    let app = app().await;
    let schema = json!({"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]});
    app.agent(json!({"id": "counter", "name": "counter", "input_schema": schema,
        "model_settings": {"script": [{"text": "counted"}]}}))
        .await;
    let wrong =
        app.post_json("/api/runs", r#"{"agent_id": "counter", "initial_prompt": "x", "input": {"count": "x"}}"#);
    let message = refusal(&wrong.await, StatusCode::BAD_REQUEST);
    assert!(message.starts_with("input/count:"), "{message}");
    let none = app.post_json("/api/runs", r#"{"agent_id": "counter", "initial_prompt": "x"}"#).await;
    let message = refusal(&none, StatusCode::BAD_REQUEST);
    assert_eq!(message, r#"input: null is not of type "object""#, "an absent input is null");
    let empty = app.post_json("/api/runs", r#"{"agent_id": "counter", "initial_prompt": "x", "input": {}}"#).await;
    let message = refusal(&empty, StatusCode::BAD_REQUEST);
    assert!(message.starts_with("input:") && message.contains("\"count\" is a required property"), "{message}");
    assert!(app.get("/api/runs").await.json()["runs"].as_array().unwrap().is_empty(), "nothing was stored");
    let run = app.settled(json!({"agent_id": "counter", "initial_prompt": "x", "input": {"count": 3}})).await;
    assert_eq!((run["status"].as_str(), run["input"].clone()), (Some("done"), json!({"count": 3})));
}

/// `parent` calls `helper` as a tool: a child run of `helper` answers it.
async fn parent_and_child(app: &App) -> (Value, Value) {
    app.agent(json!({"id": "helper-id", "name": "helper", "description": "Does sums", "tools": ["calculator"]})).await;
    app.agent(json!({"id": "parent-id", "name": "parent", "agents": ["helper-id"], "tools": [],
        "model_settings": {"script": [
            {"tool_calls": [{"name": "helper", "arguments": {"input": "2+3"}}]}, {"text": "done"}]}}))
        .await;
    let parent = app.settled(json!({"agent_id": "parent-id", "initial_prompt": "Ask the helper"})).await;
    assert_eq!(parent["status"], "done", "{parent}");
    let id = parent["id"].as_str().unwrap();
    let children = app.get(&format!("/api/runs/{id}/children")).await;
    assert_eq!(children.status, StatusCode::OK, "{}", children.text);
    let children = children.json();
    assert_eq!(children["runs"].as_array().unwrap().len(), 1, "{children}");
    (parent, children["runs"][0].clone())
}

#[tokio::test]
async fn an_agent_call_starts_a_child_run_listed_under_its_parent() {
    let app = app().await;
    let (parent, child) = parent_and_child(&app).await;
    let id = parent["id"].as_str().unwrap();
    let child_id = child["id"].as_str().unwrap();
    assert_eq!(parent["child_count"], 1);
    assert_eq!(parent["sub_agents"][0]["tool"], "helper");
    assert_eq!((parent["depth"].as_u64(), parent["root_run_id"].as_str()), (Some(0), Some(id)));
    assert_eq!((child["status"].as_str(), child["agent_id"].as_str()), (Some("done"), Some("helper-id")));
    assert_eq!((child["parent_run_id"].as_str(), child["root_run_id"].as_str()), (Some(id), Some(id)));
    assert_eq!(child["depth"], 1);
    assert_eq!(child["initial_prompt"], "2+3");
    assert!(child["result"].to_string().contains('5'), "{child}");
    assert!(child.get("cost_usd").is_some(), "priced like the runs list");

    // The parent's call names the child, and got its answer.
    let steps = app.get(&format!("/api/runs/{id}/steps")).await.json();
    let call = &steps["steps"][0]["tool_calls"][0];
    assert_eq!((call["tool_name"].as_str(), call["child_run_id"].as_str()), (Some("helper"), Some(child_id)));
    assert_eq!(child["parent_call_id"], call["id"]);
    assert!(call["result"].to_string().contains('5'), "{call}");

    // The tree's usage is the parent's and the child's.
    let tree = app.get(&format!("/api/runs/{id}/tree")).await.json();
    assert_eq!(tree["runs"], 2);
    let sum = parent["usage"]["total_tokens"].as_u64().unwrap() + child["usage"]["total_tokens"].as_u64().unwrap();
    assert_eq!(tree["usage"]["total_tokens"].as_u64(), Some(sum));
    let leaf = app.get(&format!("/api/runs/{child_id}/tree")).await.json();
    assert_eq!(
        (leaf["runs"].as_u64(), leaf["usage"]["total_tokens"].clone()),
        (Some(1), child["usage"]["total_tokens"].clone())
    );
    let none = app.get(&format!("/api/runs/{child_id}/children")).await.json();
    assert_eq!(none["runs"], json!([]));

    // The runs list shows root runs; `all=true` children too.
    assert_eq!(ids(&app.get("/api/runs").await.json(), "runs"), [id]);
    assert_eq!(ids(&app.get("/api/runs?all=true").await.json(), "runs"), [child_id, id]);
    assert_eq!(ids(&app.get("/api/runs?all=false").await.json(), "runs"), [id]);
    let flag = refusal(&app.get("/api/runs?all=maybe").await, StatusCode::BAD_REQUEST);
    assert_eq!(flag, "all must be true or false, not `maybe`");

    for uri in ["/api/runs/nope/children", "/api/runs/nope/tree"] {
        assert_eq!(refusal(&app.get(uri).await, StatusCode::NOT_FOUND), "run `nope` not found");
    }
}

#[tokio::test]
async fn another_projects_agents_are_not_found_and_cannot_be_used() {
    let app = app().await;
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let spec = AgentSpec { name: "secret".into(), tools: vec!["calculator".into()], ..AgentSpec::default() };
    let input = AgentInput { id: Some("theirs".into()), spec };
    app.engine.agents().create_agent("other", input, &Actor::system()).await.unwrap();
    let ours = app.key_of("default", Role::Admin).await;

    for uri in ["/api/agents/theirs", "/api/agents/theirs/versions", "/api/agents/theirs/versions/1"] {
        let reply = app.as_key(&ours, Method::GET, uri, None).await;
        assert_eq!(refusal(&reply, StatusCode::NOT_FOUND), "agent `theirs` not found", "{uri}");
    }
    let put = app.as_key(&ours, Method::PUT, "/api/agents/theirs", Some(r#"{"name": "mine"}"#)).await;
    assert_eq!(refusal(&put, StatusCode::NOT_FOUND), "agent `theirs` not found");
    let listed = app.as_key(&ours, Method::GET, "/api/agents", None).await.json();
    assert_eq!(listed["agents"], json!([]));
    let run = r#"{"agent_id": "theirs", "initial_prompt": "x"}"#;
    let used = app.as_key(&ours, Method::POST, "/api/runs", Some(run)).await;
    assert!(refusal(&used, StatusCode::BAD_REQUEST).contains("no agent `theirs` in this project"));
    let linked = app.as_key(&ours, Method::POST, "/api/agents", Some(r#"{"name": "mine", "agents": ["theirs"]}"#));
    assert!(refusal(&linked.await, StatusCode::BAD_REQUEST).contains("agents: no agent `theirs` in this project"));
    // The same name is free in another project.
    let same = app.as_key(&ours, Method::POST, "/api/agents", Some(r#"{"name": "secret"}"#)).await;
    assert_eq!(same.status, StatusCode::CREATED, "{}", same.text);
    // Still version 1, still theirs.
    let theirs = app.engine.agents().agent_in("other", "theirs").await.unwrap();
    assert_eq!((theirs.version, theirs.spec.name.as_str()), (1, "secret"));
    // And another project's runs' children and trees are not found either.
    let (parent, _) = parent_and_child(&app).await;
    let other = app.key_of("other", Role::Admin).await;
    let id = parent["id"].as_str().unwrap();
    for uri in [format!("/api/runs/{id}/children"), format!("/api/runs/{id}/tree"), format!("/api/runs/{id}/steps/0")] {
        let reply = app.as_key(&other, Method::GET, &uri, None).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{uri}");
    }
}

#[tokio::test]
async fn viewers_read_agents_and_operators_write_them() {
    let app = app().await;
    app.agent(json!({"id": "a1", "name": "first"})).await;
    let viewer = app.key_of("default", Role::Viewer).await;
    let operator = app.key_of("default", Role::Operator).await;
    for uri in ["/api/agents", "/api/agents/a1", "/api/agents/a1/versions", "/api/agents/a1/versions/1"] {
        assert_eq!(app.as_key(&viewer, Method::GET, uri, None).await.status, StatusCode::OK, "{uri}");
    }
    let create = app.as_key(&viewer, Method::POST, "/api/agents", Some(r#"{"name": "second"}"#)).await;
    assert!(refusal(&create, StatusCode::FORBIDDEN).contains("`operator`"));
    let update = app.as_key(&viewer, Method::PUT, "/api/agents/a1", Some(r#"{"name": "renamed"}"#)).await;
    assert!(refusal(&update, StatusCode::FORBIDDEN).contains("`operator`"));
    assert_eq!(app.get("/api/agents/a1").await.json()["version"], 1, "nothing changed");

    let created = app.as_key(&operator, Method::POST, "/api/agents", Some(r#"{"name": "second"}"#)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let created = created.json();
    assert!(created["updated_by"]["id"].as_str().unwrap().starts_with("key:"), "{created}");
    let updated = app.as_key(&operator, Method::PUT, "/api/agents/a1", Some(r#"{"name": "renamed"}"#)).await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text);
    assert_eq!(updated.json()["version"], 2);
}

#[tokio::test]
async fn an_agents_page_has_each_versions_scores() {
    let app = app().await;
    app.agent(json!({"id": "scored", "name": "scored", "description": "Answers"})).await;
    let score = |run: &str, value: Value| {
        let body = json!({"run_id": run, "name": "correct", "value": value}).to_string();
        let app = &app;
        async move { assert_eq!(app.post_json("/api/scores", &body).await.status, StatusCode::CREATED) }
    };
    for value in [json!(true), json!(true), json!(false)] {
        let run = app.settled(json!({"agent_id": "scored", "initial_prompt": "hi"})).await;
        score(run["id"].as_str().unwrap(), value).await;
    }
    app.put_json("/api/agents/scored", r#"{"name": "scored", "description": "Answers, again"}"#).await;
    let run = app.settled(json!({"agent_id": "scored", "initial_prompt": "hi"})).await;
    score(run["id"].as_str().unwrap(), json!(0.25)).await;
    let tone = json!({"run_id": run["id"], "name": "tone", "value": "kind"}).to_string();
    app.post_json("/api/scores", &tone).await;

    let detail = app.get("/api/agents/scored").await.json();
    let stats = detail["stats"].as_array().unwrap();
    let (v2, v1) = (&stats[0], &stats[1]);
    assert_eq!((v2["version"].clone(), v1["version"].clone()), (json!(2), json!(1)));
    let v1_scores = v1["scores"].as_array().unwrap();
    assert_eq!(v1_scores.len(), 1, "{v1}");
    assert_eq!((v1_scores[0]["name"].clone(), v1_scores[0]["count"].clone()), (json!("correct"), json!(3)));
    assert!((v1_scores[0]["mean"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9, "{v1}");
    let v2_scores: Vec<(Value, Value)> =
        v2["scores"].as_array().unwrap().iter().map(|s| (s["name"].clone(), s["mean"].clone())).collect();
    assert_eq!(v2_scores, [(json!("correct"), json!(0.25)), (json!("tone"), Value::Null)]);
}
