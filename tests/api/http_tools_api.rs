//! HTTP tools through the API: registration and its bounds, secrets never
//! read back, paging, roles and project isolation, and a run that calls a
//! registered tool on a receiver this test starts (a real axum server on
//! 127.0.0.1, which the app may reach because the test allows private
//! networks, as the config file's `[http] allow_private_networks` does).

use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, Method, StatusCode};
use runlens_engine::model::{Actor, Role};
use runlens_engine::EngineConfig;
use serde_json::{json, Value};

use crate::agents_api::refusal;
use crate::support::{app, app_with_config, App, Reply};

const TOKEN: &str = "Bearer very-secret-token";

fn tool(name: &str, url: &str) -> Value {
    json!({
        "name": name,
        "description": "Looks an order up by its id",
        "schema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        "url": url,
        "headers": {"Authorization": TOKEN},
        "idempotent": true,
        "requires_approval": false,
    })
}

async fn send(app: &App, method: Method, uri: &str, body: Option<Value>, key: Option<&str>) -> Reply {
    let body = body.map(|b| b.to_string());
    let auth = key.map_or_else(|| app.bearer(), str::to_owned);
    app.send_with(method, uri, body.as_deref(), "application/json", &[("authorization", auth.as_str())]).await
}

/// A `Bearer` key of `project` with `role`.
async fn key(app: &App, project: &str, role: Role) -> String {
    let name = format!("{project}-{role}");
    let (_, secret) = app.engine.identity().create_key(&name, Some(project), role, &Actor::system()).await.unwrap();
    format!("Bearer {secret}")
}

#[tokio::test]
async fn tools_are_registered_edited_and_deleted_and_their_secrets_are_never_read_back() {
    let app = app().await;
    let created =
        send(&app, Method::POST, "/api/tools/http", Some(tool("lookup_order", "https://tools.example.com/o")), None)
            .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let created = created.json();
    let secret = created["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_") && secret.len() == 70, "{secret}");
    let shown = &created["tool"];
    assert_eq!(shown["header_names"], json!(["Authorization"]));
    assert_eq!((shown["timeout_ms"].as_u64(), shown["project"].as_str()), (Some(10_000), Some("default")));
    assert!(!created.to_string().contains("very-secret-token"), "header values are never shown");

    let reads = [
        send(&app, Method::GET, "/api/tools/http", None, None).await,
        send(&app, Method::GET, "/api/tools/http/lookup_order", None, None).await,
        send(&app, Method::GET, "/api/tools", None, None).await,
    ];
    for read in &reads {
        assert_eq!(read.status, StatusCode::OK, "{}", read.text);
        assert!(!read.text.contains(&secret) && !read.text.contains("very-secret-token"), "{}", read.text);
    }
    assert_eq!(reads[1].json()["url"], "https://tools.example.com/o");
    let listed = reads[2].json();
    let info = listed["tools"].as_array().unwrap().iter().find(|t| t["name"] == "lookup_order").unwrap().clone();
    assert_eq!((info["source"].as_str(), info["idempotent"].as_bool()), (Some("http"), Some(true)));

    // An edit without headers keeps them; the secret is kept too.
    let mut spec = tool("x", "https://tools.example.com/v2");
    let spec = spec.as_object_mut().map(|o| {
        o.remove("name");
        o.remove("headers");
        json!(o)
    });
    let edited = send(&app, Method::PUT, "/api/tools/http/lookup_order", spec, None).await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.text);
    let edited = edited.json();
    assert_eq!(
        (edited["url"].as_str(), edited["header_names"].clone()),
        (Some("https://tools.example.com/v2"), json!(["Authorization"]))
    );
    assert_eq!(edited["secret_created_at"], shown["secret_created_at"]);

    let rotated = send(&app, Method::POST, "/api/tools/http/lookup_order/secret", None, None).await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.text);
    let new_secret = rotated.json()["secret"].as_str().unwrap().to_owned();
    assert_ne!(new_secret, secret);
    let audit = send(&app, Method::GET, "/api/audit", None, None).await;
    assert!(audit.text.contains("http_tool_secret_rotated"), "{}", audit.text);
    for text in [&audit.text, &send(&app, Method::GET, "/api/tools/http/lookup_order", None, None).await.text] {
        assert!(!text.contains(&new_secret) && !text.contains(&secret) && !text.contains("very-secret"), "{text}");
    }

    let again =
        send(&app, Method::POST, "/api/tools/http", Some(tool("lookup_order", "https://x.example.com")), None).await;
    assert!(refusal(&again, StatusCode::CONFLICT).contains("another HTTP tool of the project is named `lookup_order`"));
    let deleted = send(&app, Method::DELETE, "/api/tools/http/lookup_order", None, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.text);
    for (method, uri) in [
        (Method::GET, "/api/tools/http/lookup_order"),
        (Method::DELETE, "/api/tools/http/lookup_order"),
        (Method::POST, "/api/tools/http/lookup_order/secret"),
    ] {
        let gone = send(&app, method, uri, None, None).await;
        assert_eq!(refusal(&gone, StatusCode::NOT_FOUND), "HTTP tool `lookup_order` not found");
    }
    let tools = send(&app, Method::GET, "/api/tools", None, None).await.text;
    assert!(!tools.contains("lookup_order"), "deleted from the live registry");
}

#[tokio::test]
async fn bad_registrations_are_refused_with_the_reason_and_change_nothing() {
    let app = app().await;
    let with = |f: &dyn Fn(&mut Value)| {
        let mut body = tool("lookup", "https://tools.example.com/o");
        f(&mut body);
        body
    };
    let cases: Vec<(Value, &str)> = vec![
        (with(&|b| b["extra"] = json!(1)), "unknown field `extra`"),
        (with(&|b| b["name"] = json!("a__b")), "must not contain `__`"),
        (with(&|b| b["name"] = json!("calculator")), "name `calculator` is taken by a tool"),
        (with(&|b| b["name"] = json!("x".repeat(65))), "name must be 1-64 characters"),
        (with(&|b| b["url"] = json!("http://127.0.0.1:8080/hook")), "url: `http://127.0.0.1:8080/hook` is a loopback"),
        (with(&|b| b["url"] = json!("http://169.254.169.254/latest")), "allow_private_networks"),
        (with(&|b| b["url"] = json!("ftp://example.com/x")), "url: `ftp://example.com/x` must start with http"),
        (with(&|b| b["schema"] = json!({"type": "string"})), "schema must be a JSON Schema of an object"),
        (
            with(&|b| b["schema"] = json!({"type": "object", "properties": {"a": {"type": "nope"}}})),
            "schema is not a valid JSON Schema",
        ),
        (with(&|b| b["timeout_ms"] = json!(50)), "timeout_ms must be between 100 and 120000"),
        (with(&|b| b["headers"] = json!({"Content-Type": "text/plain"})), "`Content-Type` is set by runlens"),
        (with(&|b| b["headers"] = json!({"X-Key": "a\nb"})), "the value of `X-Key` must be printable ASCII"),
        (with(&|b| b["description"] = json!("d".repeat(4001))), "description is longer than 4000 characters"),
        (with(&|b| b["description"] = json!("  ")), "description must not be empty"),
    ];
    for (body, says) in cases {
        let reply = send(&app, Method::POST, "/api/tools/http", Some(body), None).await;
        let error = refusal(&reply, StatusCode::BAD_REQUEST);
        assert!(error.contains(says), "{says}: {error}");
        assert!(!error.contains("a\nb"), "a header value is never quoted");
    }
    for uri in ["/api/tools/http?foo=1", "/api/tools/http?limit=0", "/api/tools/http?offset=1&cursor=a"] {
        refusal(&send(&app, Method::GET, uri, None, None).await, StatusCode::BAD_REQUEST);
    }
    assert_eq!(send(&app, Method::GET, "/api/tools/http", None, None).await.json()["tools"], json!([]));
    // An edit is checked the same way, and an unknown tool is a 404 first.
    let put = |name: &str, url: &str| {
        let mut body = tool(name, url);
        body.as_object_mut().unwrap().remove("name");
        body
    };
    let missing = send(&app, Method::PUT, "/api/tools/http/nope", Some(put("nope", "http://10.0.0.1/")), None).await;
    refusal(&missing, StatusCode::NOT_FOUND);
    send(&app, Method::POST, "/api/tools/http", Some(tool("lookup", "https://tools.example.com/o")), None).await;
    let bad = send(&app, Method::PUT, "/api/tools/http/lookup", Some(put("lookup", "http://10.0.0.1/")), None).await;
    assert!(refusal(&bad, StatusCode::BAD_REQUEST).starts_with("url: "));
    let named =
        send(&app, Method::PUT, "/api/tools/http/lookup", Some(tool("lookup", "https://a.example.com")), None).await;
    assert!(refusal(&named, StatusCode::BAD_REQUEST).contains("unknown field `name`"), "the path names the tool");
    assert_eq!(
        send(&app, Method::GET, "/api/tools/http/lookup", None, None).await.json()["url"],
        "https://tools.example.com/o"
    );
}

#[tokio::test]
async fn pages_roles_and_projects() {
    let app = app().await;
    for name in ["c_tool", "a_tool", "b_tool"] {
        let reply =
            send(&app, Method::POST, "/api/tools/http", Some(tool(name, "https://tools.example.com")), None).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    }
    let names = |page: &Value| {
        page["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
    };
    let first = send(&app, Method::GET, "/api/tools/http?limit=2", None, None).await.json();
    assert_eq!(
        (names(&first), first["next_cursor"].as_str()),
        (vec!["a_tool".to_owned(), "b_tool".into()], Some("b_tool"))
    );
    let rest = send(&app, Method::GET, "/api/tools/http?limit=2&cursor=b_tool", None, None).await.json();
    assert_eq!((names(&rest), rest["next_cursor"].clone()), (vec!["c_tool".to_owned()], Value::Null));
    let skipped = send(&app, Method::GET, "/api/tools/http?offset=2", None, None).await.json();
    assert_eq!(names(&skipped), ["c_tool"]);

    // Viewers and operators read; only admins write.
    for role in [Role::Viewer, Role::Operator, Role::Approver] {
        let k = key(&app, "default", role).await;
        assert_eq!(send(&app, Method::GET, "/api/tools/http/a_tool", None, Some(&k)).await.status, StatusCode::OK);
        let writes = [
            send(&app, Method::POST, "/api/tools/http", Some(tool("z_tool", "https://e.example.com")), Some(&k)).await,
            send(&app, Method::DELETE, "/api/tools/http/a_tool", None, Some(&k)).await,
            send(&app, Method::POST, "/api/tools/http/a_tool/secret", None, Some(&k)).await,
        ];
        for reply in writes {
            assert!(refusal(&reply, StatusCode::FORBIDDEN).contains("needs the `admin` role"), "{}", reply.text);
        }
    }
    // Another project's admin sees none of them: 404, not 403.
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let other = key(&app, "other", Role::Admin).await;
    for (method, uri) in [
        (Method::GET, "/api/tools/http/a_tool"),
        (Method::DELETE, "/api/tools/http/a_tool"),
        (Method::POST, "/api/tools/http/a_tool/secret"),
    ] {
        refusal(&send(&app, method, uri, None, Some(&other)).await, StatusCode::NOT_FOUND);
    }
    assert_eq!(send(&app, Method::GET, "/api/tools/http", None, Some(&other)).await.json()["tools"], json!([]));
    assert!(!send(&app, Method::GET, "/api/tools", None, Some(&other)).await.text.contains("a_tool"));
    let as_default = app
        .send_with(
            Method::GET,
            "/api/tools/http/a_tool",
            None,
            "",
            &[("authorization", &other), ("x-runlens-project", "default")],
        )
        .await;
    refusal(&as_default, StatusCode::NOT_FOUND);
    // The same name is free in another project.
    let mine =
        send(&app, Method::POST, "/api/tools/http", Some(tool("a_tool", "https://o.example.com")), Some(&other)).await;
    assert_eq!(mine.status, StatusCode::CREATED, "{}", mine.text);
    assert_eq!(
        send(&app, Method::GET, "/api/tools/http/a_tool", None, None).await.json()["url"],
        "https://tools.example.com"
    );
}

/// What the receiver got: each call's signature check, headers and body.
type Received = Arc<Mutex<Vec<(Result<(), String>, HeaderMap, Value)>>>;

#[tokio::test]
async fn a_run_calls_a_registered_tool_and_the_receiver_verifies_the_signature() {
    let app = app_with_config(EngineConfig { allow_private_networks: true, ..EngineConfig::default() }).await;
    let secret: Arc<Mutex<String>> = Arc::default();
    let received: Received = Arc::default();
    let (s, r) = (secret.clone(), received.clone());
    let receiver = axum::Router::new().fallback(move |headers: HeaderMap, body: axum::body::Bytes| {
        let (secret, received) = (s.clone(), r.clone());
        async move {
            let signature = headers.get("runlens-signature").and_then(|v| v.to_str().ok()).unwrap_or_default();
            let now = chrono::Utc::now().timestamp();
            let verified = runlens_engine::net::verify(&secret.lock().unwrap(), signature, &body, now, 300);
            let call: Value = serde_json::from_slice(&body).unwrap_or_default();
            received.lock().unwrap().push((verified.clone(), headers, call.clone()));
            match verified {
                Ok(()) => (StatusCode::OK, axum::Json(json!({"order": call["arguments"]["id"], "status": "shipped"}))),
                Err(e) => (StatusCode::UNAUTHORIZED, axum::Json(json!({"error": e}))),
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/orders", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, receiver).await });

    let created = send(&app, Method::POST, "/api/tools/http", Some(tool("lookup_order", &url)), None).await;
    assert_eq!(created.status, StatusCode::CREATED, "a loopback URL is fine when allowed: {}", created.text);
    *secret.lock().unwrap() = created.json()["secret"].as_str().unwrap().to_owned();

    let run = app
        .finished_run(
            &json!({"initial_prompt": "lookup_order {\"id\": \"A-7\"}", "tools": ["lookup_order"]}).to_string(),
        )
        .await;
    assert_eq!(run["status"], "done", "{run}");
    let steps = send(&app, Method::GET, &format!("/api/runs/{}/steps", run["id"].as_str().unwrap()), None, None).await;
    let steps = steps.json();
    let call = &steps["steps"][0]["tool_calls"][0];
    assert_eq!((call["tool_name"].as_str(), call["status"].as_str()), (Some("lookup_order"), Some("succeeded")));
    assert_eq!(call["result"], json!({"order": "A-7", "status": "shipped"}));
    let received = received.lock().unwrap().clone();
    assert_eq!(received.len(), 1);
    let (verified, headers, body) = &received[0];
    assert_eq!(verified, &Ok(()));
    assert_eq!(headers["authorization"], TOKEN);
    assert_eq!((body["run_id"].clone(), body["call_id"].clone()), (run["id"].clone(), call["id"].clone()));
    // The trace never shows the header value or the secret.
    let trace = send(&app, Method::GET, &format!("/api/runs/{}/state", run["id"].as_str().unwrap()), None, None).await;
    assert_eq!(trace.status, StatusCode::OK);
    assert!(!trace.text.contains("very-secret-token") && !trace.text.contains(&*secret.lock().unwrap()));
}

#[tokio::test]
async fn the_page_lists_the_tools_without_their_secrets_and_offers_the_forms_to_admins() {
    let app = app().await;
    let created =
        send(&app, Method::POST, "/api/tools/http", Some(tool("lookup_order", "https://tools.example.com/o")), None)
            .await;
    let secret = created.json()["secret"].as_str().unwrap().to_owned();
    let page = app.get("/tools/http").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(page.text.contains(r#"data-testid="http-tool-row" data-tool="lookup_order""#), "{}", page.text);
    assert!(page.text.contains("https://tools.example.com/o") && page.text.contains("Authorization"));
    assert!(page.text.contains(r#"data-testid="new-http-tool""#), "an admin gets the registration form");
    assert!(!page.text.contains(&secret) && !page.text.contains("very-secret-token"), "no secret on the page");
    let viewer = key(&app, "default", Role::Viewer).await;
    let page = app.send_with(Method::GET, "/tools/http", None, "", &[("authorization", viewer.as_str())]).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains("lookup_order") && page.text.contains(r#"data-testid="http-tools-read-only""#));
    assert!(!page.text.contains(r#"data-testid="new-http-tool""#) && !page.text.contains("http-tool-delete"));
}
