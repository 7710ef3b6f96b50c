//! The generated OpenAPI document: served as committed, every operation
//! routed and described with its answers, and the reference page.

use axum::http::{header, Method, StatusCode};
use serde_json::Value;

use crate::support::app;

/// The served document is the committed copy (`docs/openapi.json`).
/// `RUNLENS_BLESS=1` rewrites the copy from what the server serves.
#[tokio::test]
async fn the_served_document_is_the_committed_copy() {
    let app = app().await;
    let reply = app.get("/api/openapi.json").await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers[header::CONTENT_TYPE], "application/json");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(runlens::server::openapi::COMMITTED_COPY);
    if std::env::var("RUNLENS_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &reply.text).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let same = serde_json::from_str::<Value>(&committed).ok() == Some(reply.json());
    assert!(
        same,
        "the served OpenAPI document differs from {}; if the API change is intended, regenerate the copy with \
         `RUNLENS_BLESS=1 cargo test --no-default-features --features ssr --test api openapi` and commit it",
        path.display()
    );
    assert_eq!(committed, reply.text, "the committed copy is the served text (keys sorted, final newline)");
}

/// Every operation of the document, as `(method, path)`.
fn operations(doc: &Value) -> Vec<(String, String)> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            ops.push((method.clone(), path.clone()));
        }
    }
    ops
}

/// The document is made from the router's own route list, so every route
/// of the API is documented; this checks the other way round: every
/// documented operation is served (by the real router, guards and all),
/// and says what it answers, errors included.
#[tokio::test]
async fn every_documented_operation_is_served_and_describes_its_answers() {
    let app = app().await;
    let doc = app.get("/api/openapi.json").await.json();
    assert_eq!(doc["openapi"], "3.1.0");
    let ops = operations(&doc);
    assert!(ops.len() >= 29, "{ops:?}");
    for (method, path) in &ops {
        let op = &doc["paths"][path][method];
        assert!(op["summary"].as_str().is_some_and(|s| !s.is_empty()), "{method} {path} has a summary");
        assert!(op["tags"][0].is_string(), "{method} {path} has a resource tag");
        let responses = op["responses"].as_object().unwrap();
        assert!(responses.keys().any(|s| s.starts_with('2')), "{method} {path} has a success answer");
        assert!(responses.contains_key("500"), "{method} {path} documents its internal error");
        for (status, response) in responses.iter().filter(|(s, _)| s.starts_with('4') || s.as_str() == "500") {
            let reference = response["$ref"].as_str().unwrap_or_else(|| panic!("{method} {path} {status}"));
            let name = reference.rsplit('/').next().unwrap();
            let schema = &doc["components"]["responses"][name]["content"]["application/json"]["schema"]["$ref"];
            assert_eq!(schema, "#/components/schemas/Error", "{method} {path} {status} answers {{\"error\"}}");
        }
        if method != "get" {
            for status in ["403", "413", "415"] {
                assert!(responses.contains_key(status), "{method} {path}: the guards' {status} is documented");
            }
        }
        if path.ends_with("/events") {
            continue; // streams; served as shown by the events tests
        }
        let uri = path
            .replace("{id}", "nope")
            .replace("{call_id}", "nope")
            .replace("{message_id}", "nope")
            .replace("{version}", "1")
            .replace("{step}", "0")
            .replace("{model}", "some/model");
        let verb = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let body = (verb != Method::GET && verb != Method::DELETE).then_some("{}");
        let reply = app.send(verb.clone(), &uri, body, "application/json").await;
        assert_ne!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{verb} {uri}");
        let status = reply.status.as_str().to_owned();
        assert!(responses.contains_key(&status), "{verb} {uri} answered {status}, which is not documented");
        if reply.status == StatusCode::NOT_FOUND {
            assert!(!reply.json()["error"].as_str().unwrap().starts_with("no API endpoint"), "{verb} {uri} is routed");
        }
    }
    // Nothing undocumented below the documented paths.
    for (_, path) in &ops {
        let below = format!("{}/undocumented", path.replace(['{', '}'], ""));
        let documented = ops.iter().any(|(_, template)| matches(template, &below));
        if documented || path.starts_with("/api/prices") || !path.starts_with("/api/") {
            continue; // a model name may contain `/`; pages answer their own 404
        }
        let reply = app.get(&below).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{below}");
        assert!(reply.json()["error"].as_str().unwrap().starts_with("no API endpoint"), "{below}: {}", reply.text);
    }
}

/// Whether `path` is an instance of the document's path `template`.
fn matches(template: &str, path: &str) -> bool {
    let (template, path): (Vec<&str>, Vec<&str>) = (template.split('/').collect(), path.split('/').collect());
    template.len() == path.len() && template.iter().zip(&path).all(|(t, p)| t.starts_with('{') || t == p)
}

/// The document states the bounds the engine enforces (`limits.rs`), and
/// the registered tools.
#[tokio::test]
async fn the_document_states_the_engines_bounds_and_tools() {
    use runlens_engine::model::limits::*;

    let app = app().await;
    let doc = app.get("/api/openapi.json").await.json();
    let schemas = &doc["components"]["schemas"];
    let create = &schemas["CreateRun"]["properties"];
    assert_eq!(create["name"]["maxLength"], MAX_NAME_CHARS);
    assert_eq!(create["initial_prompt"]["maxLength"], MAX_PROMPT_BYTES);
    assert_eq!(create["tools"]["maxItems"], MAX_TOOL_NAMES);
    assert_eq!(create["tags"]["maxProperties"], MAX_TAGS);
    assert_eq!(create["max_turns"]["maximum"], MAX_TURNS);
    assert_eq!(schemas["CreateRun"]["required"], serde_json::json!(["initial_prompt"]));
    assert_eq!(schemas["ApproveRequest"]["properties"]["comment"]["maxLength"], MAX_DECISION_TEXT_CHARS);
    assert_eq!(schemas["RejectRequest"]["properties"]["reason"]["maxLength"], MAX_DECISION_TEXT_CHARS);
    assert_eq!(schemas["PriceInput"]["properties"]["input"]["maximum"], MAX_PRICE);
    let limit =
        doc["paths"]["/api/runs"]["get"]["parameters"].as_array().unwrap().iter().find(|p| p["name"] == "limit");
    assert_eq!(limit.unwrap()["schema"]["maximum"], MAX_LIST_LIMIT);
    let tools: Vec<String> =
        app.engine.tools(runlens_engine::model::DEFAULT_PROJECT).into_iter().map(|t| t.name).collect();
    // The built-in tools by name; MCP and HTTP tools (known at run time only) by pattern.
    assert_eq!(schemas["ToolName"]["anyOf"][0]["enum"], serde_json::json!(tools));
    assert_eq!(schemas["ToolName"]["anyOf"][1]["pattern"], "^[A-Za-z0-9_-]{1,64}$");
    let stream = &doc["paths"]["/api/runs/{id}/events"]["get"]["responses"]["200"]["content"]["text/event-stream"];
    assert_eq!(stream["schema"]["$ref"], "#/components/schemas/RunStreamMessage");
    let data = &schemas["RunStreamMessage"]["properties"]["data"];
    assert_eq!(data["contentSchema"]["$ref"], "#/components/schemas/Event", "each message's data is an Event");
}

/// `/api/docs`: the reference page, whole from the server.
#[tokio::test]
async fn the_reference_page_lists_every_operation_and_loads_nothing() {
    let app = app().await;
    let doc = app.get("/api/openapi.json").await.json();
    let page = app.get("/api/docs").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.headers[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/html"));
    let html = &page.text;
    assert!(html.starts_with("<!DOCTYPE html>"), "{:.100}", html);
    for (method, path) in operations(&doc) {
        let shown = format!("<span class=\"method {method}\">{method}</span> <code>{path}</code></h3>");
        assert!(html.contains(&shown), "{method} {path} is on the page");
    }
    for name in doc["components"]["schemas"].as_object().unwrap().keys() {
        assert!(html.contains(&format!("<article id=\"schema-{name}\">")), "schema {name} is on the page");
    }
    // Nothing is fetched: no script at all, and no tag loads from a URL.
    assert!(!html.contains("<script"), "no script");
    for tag in html.split('<').skip(1) {
        let name = tag.split([' ', '>']).next().unwrap_or("");
        if ["link", "img", "iframe", "source", "object", "embed"].contains(&name) {
            panic!("the page loads something: <{tag:.80}");
        }
        assert!(!tag.contains("src="), "no src attributes: <{tag:.80}");
    }
    assert!(!html.contains("@import") && !html.contains("url("), "the style sheet loads nothing");
    // The settings page links to it.
    let settings = app.get("/settings").await;
    assert!(settings.text.contains("href=\"/api/docs\""), "the settings page links the reference");
}

/// Every operation but the public ones requires the bearer key and says it
/// answers 401 (with `WWW-Authenticate: Bearer`) and 403; the operations on
/// "the current project" document the header that names it. That they
/// really answer so is the role matrix's business (`identity_api`).
#[tokio::test]
async fn every_protected_operation_states_its_credentials_and_refusals() {
    use runlens::server::openapi::{BEARER, PUBLIC_PATHS};

    let app = app().await;
    let doc = app.get("/api/openapi.json").await.json();
    let scheme = &doc["components"]["securitySchemes"][BEARER];
    assert_eq!((scheme["type"].as_str(), scheme["scheme"].as_str()), (Some("http"), Some("bearer")));
    let unauthorized = &doc["components"]["responses"]["Unauthorized"];
    assert!(unauthorized["headers"]["WWW-Authenticate"].is_object(), "{unauthorized}");
    let project_scoped = [
        ("get", "/api/runs"),
        ("post", "/api/runs"),
        ("get", "/api/agents"),
        ("post", "/api/agents"),
        ("post", "/api/runs/import"),
        ("get", "/api/approvals"),
        ("get", "/api/approvals/count"),
        ("get", "/api/events"),
        ("get", "/api/outbox"),
        ("get", "/api/prices"),
        ("put", "/api/prices/{model}"),
        ("get", "/api/keys"),
        ("post", "/api/keys"),
        ("get", "/api/audit"),
        ("get", "/api/me"),
    ];
    let mut public = 0;
    for (method, path) in operations(&doc) {
        let op = &doc["paths"][&path][&method];
        let responses = &op["responses"];
        if PUBLIC_PATHS.contains(&path.as_str()) {
            public += 1;
            assert!(op.get("security").is_none(), "{method} {path} is public");
            assert!(responses.get("401").is_none(), "{method} {path} is public");
            continue;
        }
        assert_eq!(op["security"], serde_json::json!([{ BEARER: [] }]), "{method} {path}");
        assert_eq!(responses["401"]["$ref"], "#/components/responses/Unauthorized", "{method} {path}");
        assert_eq!(responses["403"]["$ref"], "#/components/responses/Forbidden", "{method} {path}");
        let header = op["parameters"].as_array().into_iter().flatten().find(|p| p["name"] == "X-Runlens-Project");
        if project_scoped.contains(&(method.as_str(), path.as_str())) {
            let header = header.unwrap_or_else(|| panic!("{method} {path} documents X-Runlens-Project"));
            assert_eq!(header["in"], "header");
            assert!(responses.get("404").is_some(), "{method} {path}: an unknown project is a 404");
        }
        if path.contains("{id}") && (path.starts_with("/api/runs/") || path.starts_with("/api/agents/")) {
            assert!(header.is_none(), "{method} {path}: a run's or agent's project is its own");
        }
    }
    assert_eq!(public, PUBLIC_PATHS.len());
}

/// No value can match an `allOf` with a part closed to other properties
/// (each part is checked alone): a response type that flattens a request
/// type refusing unknown fields (`Agent` flattens `AgentSpec`) is written
/// out as one closed object instead. And every operation but the public ones
/// documents the 400 of a query parameter it does not list.
#[tokio::test]
async fn compositions_can_be_matched_and_unknown_parameters_are_documented() {
    use runlens::server::openapi::PUBLIC_PATHS;

    let app = app().await;
    let doc = app.get("/api/openapi.json").await.json();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let closed = |name: &str| schemas[name]["additionalProperties"] == Value::Bool(false);
    for (name, schema) in schemas {
        for part in schema["allOf"].as_array().into_iter().flatten() {
            if let Some(reference) = part["$ref"].as_str() {
                let target = reference.rsplit('/').next().unwrap();
                assert!(!closed(target), "{name} is an allOf with the closed {target}: no value matches it");
            }
        }
    }
    let agent = &schemas["Agent"];
    assert_eq!(agent["additionalProperties"], false);
    for field in ["id", "version", "project", "name", "tools", "agents", "handoffs"] {
        assert!(agent["properties"][field].is_object(), "Agent has {field}");
    }
    assert!(schemas["AgentDetail"]["properties"]["stats"].is_object());
    assert!(schemas["AgentDetail"]["properties"]["name"].is_object());
    for (method, path) in operations(&doc) {
        let has_400 = doc["paths"][&path][&method]["responses"].get("400").is_some();
        assert_eq!(has_400, !PUBLIC_PATHS.contains(&path.as_str()), "{method} {path}");
    }
}
