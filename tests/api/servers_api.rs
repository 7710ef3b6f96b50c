//! `GET /api/servers`: the servers sharing the database, for instance
//! admins only. On SQLite the list is this server alone; on PostgreSQL this
//! server is listed as it registered itself (its address).

use std::time::Duration;

use axum::http::{header, Method, StatusCode};
use runlens_engine::model::Role;
use runlens_engine::EngineConfig;
use serde_json::Value;

use crate::support::{app_with_config, on_postgres, App, HOST, ORIGIN};

const ADDRESS: &str = "10.20.30.40:3000";

async fn servers(app: &App) -> Vec<Value> {
    let reply = app.get("/api/servers").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let list = reply.json();
    assert_eq!(list.as_object().unwrap().len(), 1, "only `servers`: {list}");
    list["servers"].as_array().unwrap().clone()
}

/// The servers listed once this one registered (on PostgreSQL its first
/// heartbeat does that, just after start).
async fn registered(app: &App) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let list = servers(app).await;
        if !list.is_empty() || tokio::time::Instant::now() >= deadline {
            return list;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_instance_admin_lists_the_servers_with_this_one_marked_alive() {
    let config = EngineConfig { server_address: Some(ADDRESS.into()), ..EngineConfig::default() };
    let app = app_with_config(config).await;
    let list = registered(&app).await;
    let this: Vec<&Value> = list.iter().filter(|s| s["this"] == true).collect();
    assert_eq!(this.len(), 1, "one server is this one: {list:?}");
    let me = this[0];
    assert_eq!(me["alive"], true, "{me}");
    assert_eq!(me["version"], env!("CARGO_PKG_VERSION"), "{me}");
    assert!(me["max_runs"].as_u64().is_some_and(|n| n >= 1), "{me}");
    assert_eq!(me["runs_held"], 0, "{me}");
    for field in ["started_at", "heartbeat_at"] {
        let at = me[field].as_str().unwrap_or_default();
        assert!(chrono::DateTime::parse_from_rfc3339(at).is_ok(), "{field} is a date-time: {me}");
    }
    if on_postgres() {
        assert_eq!(me["address"], ADDRESS, "{me}");
        assert!(me["id"].as_str().is_some_and(|id| id.len() == 36), "a UUID: {me}");
    } else {
        assert_eq!(list.len(), 1, "SQLite: this server alone: {list:?}");
        assert_eq!((me["id"].as_str(), me["address"].as_str()), (Some("local"), Some("local")), "{me}");
    }
    // Its start is when it started, not when it was asked.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let again = registered(&app).await;
    let again = again.iter().find(|s| s["this"] == true).unwrap();
    assert_eq!(again["started_at"], me["started_at"], "{again}");
    // The `default` project dates from this database, not from 1970.
    let projects = app.get("/api/projects").await.json();
    let default = projects["projects"].as_array().unwrap().iter().find(|p| p["name"] == "default").unwrap().clone();
    let created = chrono::DateTime::parse_from_rfc3339(default["created_at"].as_str().unwrap()).unwrap();
    assert!(created.timestamp() > chrono::Utc::now().timestamp() - 3600, "{default}");
}

#[tokio::test]
async fn others_are_refused_and_an_unknown_parameter_is_a_400() {
    let app = app_with_config(EngineConfig::default()).await;
    let refused = |reply: crate::support::Reply, who: &str| {
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{who}: {}", reply.text);
        let message = reply.json()["error"].as_str().unwrap_or_default().to_owned();
        assert!(message.contains("instance admin"), "{who}: {message}");
        assert!(!reply.text.contains("local"), "{who}: no server is shown: {}", reply.text);
    };
    // A project admin's key (of `default`) is no instance admin.
    let (_, key) = app
        .engine
        .identity()
        .create_key("project admin", Some("default"), Role::Admin, &runlens_engine::model::Actor::system())
        .await
        .unwrap();
    let bearer = format!("Bearer {key}");
    let reply =
        app.send_with(Method::GET, "/api/servers", None, "", &[(header::AUTHORIZATION.as_str(), &bearer)]).await;
    refused(reply, "a project admin key");
    // Nor is a signed-in member of the project.
    app.user("ada", Some(("default", Role::Admin)), false).await;
    let cookie = app.session("ada").await;
    let browser = [("cookie", cookie.as_str()), ("origin", ORIGIN), ("host", HOST)];
    refused(app.send_with(Method::GET, "/api/servers", None, "", &browser).await, "a signed-in project admin");
    // Without credentials: 401.
    let anonymous = app.send_with(Method::GET, "/api/servers", None, "", &[]).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED, "{}", anonymous.text);

    // The operation takes no query parameters.
    let unknown = app.get("/api/servers?tenant_id=x").await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST, "{}", unknown.text);
    assert_eq!(unknown.json()["error"], "unknown query parameter `tenant_id`: this operation takes none");
    assert_eq!(app.get("/api/servers").await.status, StatusCode::OK);
}

#[tokio::test]
async fn the_settings_page_shows_the_servers_to_instance_admins_only() {
    let app = app_with_config(EngineConfig::default()).await;
    assert_eq!(registered(&app).await.len(), 1);
    let page = app.get("/settings").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains(r#"data-testid="servers-panel""#), "{}", page.text);
    assert_eq!(page.text.matches(r#"data-testid="server-row""#).count(), 1, "{}", page.text);
    assert!(page.text.contains(r#"data-alive="true""#) && page.text.contains(r#"data-this="true""#));
    assert!(page.text.contains("(this server)"));

    let (_, key) = app
        .engine
        .identity()
        .create_key("project admin", Some("default"), Role::Admin, &runlens_engine::model::Actor::system())
        .await
        .unwrap();
    let bearer = format!("Bearer {key}");
    let page = app.send_with(Method::GET, "/settings", None, "", &[(header::AUTHORIZATION.as_str(), &bearer)]).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains(r#"data-testid="price-table""#), "the page itself is shown");
    assert!(!page.text.contains("servers-panel") && !page.text.contains("server-row"), "{}", page.text);
}
