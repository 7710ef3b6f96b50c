//! Builds the app on a temporary store (a SQLite file, or a PostgreSQL schema
//! with `RUNLENS_TEST_STORE=postgres`, see `test_db`) and sends requests to it.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use leptos::config::LeptosOptions;
use runlens::server::{router, AppState};
use runlens_engine::model::{Actor, Role, User};
use runlens_engine::{Engine, EngineConfig};
use serde_json::Value;
use tower::ServiceExt;

#[path = "../../engine/tests/engine/test_db.rs"]
mod test_db;
pub use test_db::*;

pub struct App {
    pub router: Router,
    /// An instance-admin key every request of [`App::send`] carries.
    pub admin_key: String,
    pub engine: Engine,
    pub db_url: String,
    _db: TestDb,
    _one_at_a_time: tokio::sync::OwnedMutexGuard<()>,
}

/// Held by each test's [`App`] for the whole test.
///
/// Every `#[tokio::test]` runs on its own runtime, and Leptos server renders
/// running at the same time on two runtimes of one process can hang (a page
/// request then never completes; reproduced with nothing but parallel GETs
/// of `/outbox`). The server itself runs one runtime, where concurrent
/// renders are fine, so the tests take turns instead.
static ONE_AT_A_TIME: std::sync::LazyLock<std::sync::Arc<tokio::sync::Mutex<()>>> =
    std::sync::LazyLock::new(Default::default);

pub async fn app() -> App {
    app_with_models(runlens_engine::llm::ModelRegistry::with_builtin()).await
}

/// The password of every user [`App::user`] creates.
pub const PASSWORD: &str = "correct horse battery staple";
/// The `Host` the tests' browser requests are sent to, and its origin.
pub const HOST: &str = "localhost:3000";
pub const ORIGIN: &str = "http://localhost:3000";

pub fn urlencode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The `name=value` of the session cookie a reply sets, if it sets one.
pub fn session_cookie(reply: &Reply) -> Option<String> {
    reply
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("runlens_session="))
        .map(|v| v.split(';').next().unwrap_or(v).to_owned())
}

/// A reqwest client that sends `key` as `Authorization: Bearer` with every request.
pub fn client_with_key(builder: reqwest::ClientBuilder, key: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {key}")).unwrap();
    value.set_sensitive(true);
    headers.insert(reqwest::header::AUTHORIZATION, value);
    builder.default_headers(headers).build().unwrap()
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }
}

impl App {
    pub async fn send(&self, method: Method, uri: &str, body: Option<&str>, content_type: &str) -> Reply {
        let auth = format!("Bearer {}", self.admin_key);
        self.send_with(method, uri, body, content_type, &[(header::AUTHORIZATION.as_str(), auth.as_str())]).await
    }

    /// [`App::send`] with exactly these extra headers (no key unless one is among them).
    pub async fn send_with(
        &self,
        method: Method,
        uri: &str,
        body: Option<&str>,
        content_type: &str,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut req = Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if body.is_some() {
            req = req.header(header::CONTENT_TYPE, content_type);
        }
        let req = req.body(body.map(|b| Body::from(b.to_owned())).unwrap_or_else(Body::empty)).unwrap();
        let res = self.router.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        Reply { status, headers, text: String::from_utf8_lossy(&bytes).into_owned() }
    }

    /// The secret of a new API key of `project` with `role`.
    pub async fn key(&self, project: &str, role: Role) -> String {
        let name = format!("{project} {role}");
        self.engine.identity().create_key(&name, Some(project), role, &Actor::system()).await.unwrap().1
    }

    /// Sends a request with API key `key` (a JSON body when given).
    pub async fn with_key(&self, key: &str, method: Method, uri: &str, body: Option<Value>) -> Reply {
        let auth = format!("Bearer {key}");
        let body = body.map(|b| b.to_string());
        self.send_with(method, uri, body.as_deref(), "application/json", &[("authorization", &auth)]).await
    }

    /// The `Authorization` header of [`App::admin_key`].
    pub fn bearer(&self) -> String {
        format!("Bearer {}", self.admin_key)
    }

    /// Creates a user with [`PASSWORD`] (an instance admin, or a member of
    /// `project` with `role`).
    pub async fn user(&self, name: &str, member_of: Option<(&str, Role)>, instance_admin: bool) -> User {
        let user = self.engine.identity().create_user(name, PASSWORD, instance_admin, &Actor::system()).await.unwrap();
        if let Some((project, role)) = member_of {
            self.engine.directory().set_member(project, &user.id, role).await.unwrap();
        }
        user
    }

    /// Signs `name` in with `password` through `POST /login` from this
    /// app's own origin; the reply (a 303) and the session cookie, as a
    /// `Cookie` header value, when it set one.
    pub async fn login(&self, name: &str, password: &str) -> (Reply, Option<String>) {
        let form = format!("username={}&password={}", urlencode(name), urlencode(password));
        let reply = self
            .send_with(
                Method::POST,
                "/login",
                Some(&form),
                "application/x-www-form-urlencoded",
                &[("origin", ORIGIN), ("host", HOST)],
            )
            .await;
        let cookie = session_cookie(&reply);
        (reply, cookie)
    }

    /// A session cookie of `name` signed in with [`PASSWORD`].
    pub async fn session(&self, name: &str) -> String {
        let (reply, cookie) = self.login(name, PASSWORD).await;
        assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.text);
        assert!(!reply.headers[header::LOCATION].to_str().unwrap().starts_with("/login"), "{:?}", reply.headers);
        cookie.expect("signing in sets the session cookie")
    }

    /// The site root the app serves static files from (empty at first).
    pub fn site_root(&self) -> std::path::PathBuf {
        self._db.path().join("site")
    }

    pub async fn get(&self, uri: &str) -> Reply {
        self.send(Method::GET, uri, None, "").await
    }

    pub async fn post_json(&self, uri: &str, body: &str) -> Reply {
        self.send(Method::POST, uri, Some(body), "application/json").await
    }

    /// A run paused on a `send_email` call, waiting for a person; its id.
    pub async fn paused_run(&self) -> String {
        let body = serde_json::json!({"initial_prompt": "mail", "model_settings": {"script": [{"tool_calls": [
            {"name": "send_email", "arguments": {"to": "a@example.com", "subject": "s", "body": "b"}}]}]}});
        let reply = self.post_json("/api/runs", &body.to_string()).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
        let id = reply.json()["id"].as_str().unwrap().to_owned();
        self.engine.runs().wait_until_settled(&id, Duration::from_secs(20)).await.unwrap();
        id
    }

    /// Creates a run through the API and waits for it to settle.
    pub async fn finished_run(&self, body: &str) -> Value {
        let reply = self.post_json("/api/runs", body).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
        let id = reply.json()["id"].as_str().unwrap().to_owned();
        self.engine.runs().wait_until_settled(&id, Duration::from_secs(20)).await.unwrap();
        self.get(&format!("/api/runs/{id}")).await.json()
    }
}

/// [`app`] with the built-in tools and the models `models` (a test's own).
pub async fn app_with_models(models: runlens_engine::llm::ModelRegistry) -> App {
    app_with(models, EngineConfig::default()).await
}

/// [`app`] with the engine settings `config` (`allow_private_networks`…).
pub async fn app_with_config(config: EngineConfig) -> App {
    app_with(runlens_engine::llm::ModelRegistry::with_builtin(), config).await
}

async fn app_with(models: runlens_engine::llm::ModelRegistry, config: EngineConfig) -> App {
    let turn = ONE_AT_A_TIME.clone().lock_owned().await;
    let dir = test_db();
    let url = db_url(&dir);
    let store = open_store(&url).await;
    let tools = runlens_engine::tools::ToolRegistry::with_builtins();
    let engine = Engine::with_parts(store, tools, models, config);
    let leptos_options = LeptosOptions::builder()
        .output_name("runlens")
        .site_root(dir.path().join("site").to_string_lossy().into_owned())
        .build();
    let router = router(AppState::new(engine.clone(), leptos_options, None));
    let system = runlens_engine::model::Actor::system();
    let (_, admin_key) =
        engine.identity().create_key("tests", None, runlens_engine::model::Role::Admin, &system).await.unwrap();
    App { router, admin_key, engine, db_url: url, _db: dir, _one_at_a_time: turn }
}
