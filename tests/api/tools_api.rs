//! The tools API: `GET /api/tools` in pages, filtered by source and text,
//! each tool with its source, a project's HTTP tools listed to it alone;
//! `GET /api/mcp/servers`; their bounds; viewers read both; and runs that
//! attach tools by source or `all` through the API.

use std::sync::Arc;

use async_trait::async_trait;
use axum::http::{Method, StatusCode};
use runlens_engine::model::{Actor, McpServerStatus, McpState, Role};
use runlens_engine::tools::{Tool, ToolContext, ToolError};
use serde_json::{json, Value};

use crate::support::{app, App, Reply};

struct Fake(String, &'static str, &'static str);

#[async_trait]
impl Tool for Fake {
    fn name(&self) -> &str {
        &self.0
    }
    fn description(&self) -> &str {
        self.1
    }
    fn schema(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}}})
    }
    fn source(&self) -> String {
        self.2.to_owned()
    }
    async fn call(&self, _: Value, _: &ToolContext) -> Result<Value, ToolError> {
        Ok(json!({}))
    }
}

/// The built-ins, 120 tools of an MCP server `big` (`big__t000`…), a
/// configured server `down` listing none, and `default`'s HTTP tool `lookup`.
async fn tool_app() -> App {
    let app = app().await;
    let reg = app.engine.tool_registry();
    let big: Vec<Arc<dyn Tool>> = (0..120)
        .map(|i| {
            let description = if i == 7 { "Fetches the WEATHER forecast." } else { "Does a numbered thing." };
            Arc::new(Fake(format!("big__t{i:03}"), description, "mcp:big")) as Arc<dyn Tool>
        })
        .collect();
    assert!(reg.replace_source("mcp:big", big).is_empty());
    reg.put_project_tool("default", Arc::new(Fake("lookup".into(), "Looks up an order.", "http"))).unwrap();
    reg.set_mcp_status(McpServerStatus {
        name: "big".into(),
        transport: "stdio".into(),
        state: McpState::Ready,
        tools: 120,
        restarts: 0,
        last_error: None,
        connected_at: Some(chrono::Utc::now()),
        retry_at: None,
    });
    reg.set_mcp_status(McpServerStatus {
        name: "down".into(),
        transport: "http".into(),
        state: McpState::Down,
        tools: 0,
        restarts: 3,
        last_error: Some("connection refused".into()),
        connected_at: None,
        retry_at: Some(chrono::Utc::now()),
    });
    app
}

fn names(reply: &Reply) -> Vec<String> {
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    reply.json()["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

async fn key(app: &App, project: &str, role: Role) -> String {
    let name = format!("{project}-{role}");
    let (_, secret) = app.engine.identity().create_key(&name, Some(project), role, &Actor::system()).await.unwrap();
    format!("Bearer {secret}")
}

async fn get_as(app: &App, key: &str, uri: &str) -> Reply {
    app.send_with(Method::GET, uri, None, "", &[("authorization", key)]).await
}

#[tokio::test]
async fn tools_are_listed_in_pages_with_their_sources_and_filters() {
    let app = tool_app().await;
    let first = app.get("/api/tools").await;
    let body = first.json();
    assert_eq!(body["total"], 125, "4 built-ins, 120 MCP tools and the project's HTTP tool");
    assert_eq!(body["tools"].as_array().unwrap().len(), 50, "50 by default");
    assert_eq!(body["next_offset"], 50);
    assert_eq!(body["tools"][0]["name"], "big__t000");
    assert_eq!(body["tools"][0]["source"], "mcp:big");
    assert_eq!(body["tools"][0]["schema"]["properties"]["text"]["type"], "string");

    // Every tool once over the pages, by name.
    let mut all = Vec::new();
    let mut offset = 0;
    loop {
        let page = app.get(&format!("/api/tools?limit=40&offset={offset}")).await;
        all.extend(names(&page));
        match page.json()["next_offset"].as_u64() {
            Some(next) => offset = next,
            None => break,
        }
    }
    assert_eq!(all.len(), 125);
    let mut sorted = all.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(all, sorted);

    let builtin = app.get("/api/tools?source=builtin").await;
    assert_eq!(names(&builtin), ["calculator", "current_time", "send_email", "wait"]);
    assert!(builtin.json()["tools"].as_array().unwrap().iter().all(|t| t["source"] == "builtin"));
    assert_eq!(names(&app.get("/api/tools?source=http").await), ["lookup"]);
    assert_eq!(app.get("/api/tools?source=mcp%3Abig&limit=1").await.json()["total"], 120);
    assert!(names(&app.get("/api/tools?source=mcp%3Anone").await).is_empty());
    assert_eq!(names(&app.get("/api/tools?q=weather").await), ["big__t007"], "any case");
    assert_eq!(names(&app.get("/api/tools?q=ORDER&source=http").await), ["lookup"]);
    assert_eq!(names(&app.get("/api/tools?q=email").await), ["send_email"], "names too");
    let past = app.get("/api/tools?offset=500").await;
    assert!(names(&past).is_empty() && past.json()["next_offset"].is_null());
    assert_eq!(names(&app.get("/api/tools?source=&q=").await).len(), 50, "blank filters are none");
}

#[tokio::test]
async fn bad_pages_and_filters_are_400() {
    let app = tool_app().await;
    let long = "x".repeat(1001);
    for uri in [
        "/api/tools?limit=0".to_owned(),
        "/api/tools?limit=201".to_owned(),
        "/api/tools?limit=99999999999999999999".to_owned(),
        "/api/tools?offset=-1".to_owned(),
        "/api/tools?offset=100001".to_owned(),
        "/api/tools?source=agent".to_owned(),
        "/api/tools?source=mcp%3A".to_owned(),
        "/api/tools?source=all".to_owned(),
        format!("/api/tools?q={long}"),
        "/api/tools?project=other".to_owned(),
        "/api/mcp/servers?limit=0".to_owned(),
        "/api/mcp/servers?state=down".to_owned(),
    ] {
        let reply = app.get(&uri).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{uri}: {}", reply.text);
        assert!(reply.json()["error"].is_string(), "{uri}");
    }
    assert_eq!(app.get("/api/tools?limit=200").await.json()["tools"].as_array().unwrap().len(), 125);
}

#[tokio::test]
async fn mcp_servers_show_their_health() {
    let app = tool_app().await;
    let reply = app.get("/api/mcp/servers").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let body = reply.json();
    assert_eq!((body["total"].as_u64(), body["next_offset"].is_null()), (Some(2), true));
    let big = &body["servers"][0];
    assert_eq!(
        (big["name"].as_str(), big["state"].as_str(), big["tools"].as_u64()),
        (Some("big"), Some("ready"), Some(120))
    );
    assert!(big["connected_at"].is_string() && big.get("last_error").is_none() && big.get("retry_at").is_none());
    let down = &body["servers"][1];
    assert_eq!(down["state"], "down");
    assert_eq!(down["transport"], "http");
    assert_eq!(down["restarts"], 3);
    assert_eq!(down["last_error"], "connection refused");
    assert!(down["retry_at"].is_string());
    let page = app.get("/api/mcp/servers?limit=1&offset=1").await.json();
    assert_eq!((page["servers"][0]["name"].as_str(), page["next_offset"].is_null()), (Some("down"), true));
    let first = app.get("/api/mcp/servers?limit=1").await.json();
    assert_eq!(first["next_offset"], 1);
}

#[tokio::test]
async fn viewers_read_tools_of_their_own_project_only() {
    let app = tool_app().await;
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let viewer = key(&app, "default", Role::Viewer).await;
    let theirs = key(&app, "other", Role::Viewer).await;
    assert!(names(&get_as(&app, &viewer, "/api/tools?source=http").await).contains(&"lookup".to_owned()));
    assert!(names(&get_as(&app, &theirs, "/api/tools?source=http").await).is_empty(), "another project's HTTP tools");
    assert_eq!(get_as(&app, &theirs, "/api/tools").await.json()["total"], 124);
    let servers = get_as(&app, &theirs, "/api/mcp/servers").await;
    assert_eq!(servers.status, StatusCode::OK);
    assert_eq!(servers.json()["total"], 2, "MCP servers are the instance's");
    // A project the caller has no role in is not found.
    let asked = [("authorization", theirs.as_str()), ("x-runlens-project", "default")];
    let reply = app.send_with(Method::GET, "/api/tools", None, "", &asked).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.text);
    let nobody = app.send_with(Method::GET, "/api/mcp/servers", None, "", &[]).await;
    assert_eq!(nobody.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn runs_attach_tools_by_source_or_all() {
    let app = tool_app().await;
    let created = app.post_json("/api/runs", r#"{"initial_prompt": "x", "tools": ["builtin", "http", "wait"]}"#).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.json()["tools"], json!(["calculator", "current_time", "send_email", "wait", "lookup"]));
    let all = app.post_json("/api/runs", r#"{"initial_prompt": "x", "tools": ["all"]}"#).await.json();
    assert_eq!(all["tools"].as_array().unwrap().len(), 125);
    let down = app.post_json("/api/runs", r#"{"initial_prompt": "x", "tools": ["mcp:down", "wait"]}"#).await;
    assert_eq!(down.json()["tools"], json!(["wait"]));
    let bad = app.post_json("/api/runs", r#"{"initial_prompt": "x", "tools": ["mcp:nope"]}"#).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let error = bad.json()["error"].as_str().unwrap().to_owned();
    assert!(error.starts_with("unknown tool source `mcp:nope`; sources: builtin, http, mcp:big, mcp:down"), "{error}");
    let agent = app.post_json("/api/agents", r#"{"name": "bigger", "tools": ["mcp:big"]}"#).await;
    assert_eq!(agent.status, StatusCode::CREATED, "{}", agent.text);
    assert_eq!(agent.json()["tools"], json!(["mcp:big"]), "kept as written");
    let lost = app.post_json("/api/agents", r#"{"name": "lost", "tools": ["mcp:gone"]}"#).await;
    assert_eq!(lost.status, StatusCode::BAD_REQUEST);
    assert!(lost.json()["error"].as_str().unwrap().starts_with("tools: unknown tool source `mcp:gone`"));
}

#[tokio::test]
async fn the_tools_page_and_playground_render_large_tool_sets_escaped() {
    let app = tool_app().await;
    let hostile = Fake("hostile".into(), "<img src=x onerror=alert(1)> cleans up", "http");
    app.engine.tool_registry().put_project_tool("default", Arc::new(hostile)).unwrap();
    let page = app.get("/tools").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(page.text.contains(r#"data-tool="big__t000""#) && page.text.contains("1–50 of 126"), "the first page");
    assert!(page.text.contains(r#"data-source="mcp:big""#) && page.text.contains(r#"data-source="mcp:down""#));
    assert!(page.text.contains(r#"data-name="down" data-state="down""#), "the servers' health");
    assert!(page.text.contains("connection refused"));
    let found = app.get("/tools?source=http&q=CLEANS").await;
    assert!(found.text.contains(r#"data-tool="hostile""#) && !found.text.contains(r#"data-tool="lookup""#));
    assert!(found.text.contains("&lt;img src=x onerror=alert(1)&gt;") && !found.text.contains("<img src=x"), "escaped");
    let last = app.get("/tools?offset=100").await;
    assert!(last.text.contains("101–126 of 126") && !last.text.contains(r#"data-testid="tools-next""#));

    // The playground attaches `all` by default; a large source starts folded.
    let playground = app.get("/playground").await;
    assert_eq!(playground.status, StatusCode::OK);
    let all = playground.text.split(r#"value="all""#).nth(1).unwrap_or_default();
    assert!(all.split('>').next().unwrap_or_default().contains("checked"), "all is checked");
    assert!(playground.text.contains(r#"value="mcp:big""#), "a box per source");
    let group = playground.text.split(r#"data-testid="tool-group" data-source="mcp:big""#).next().unwrap_or_default();
    assert!(!group.rsplit("<details").next().unwrap_or_default().contains("open"), "120 tools start folded");
}
