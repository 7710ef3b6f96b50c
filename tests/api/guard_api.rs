//! The router's guards: cross-origin unsafe requests are refused, the REST
//! API takes JSON bodies only, every API error is `{"error"}` JSON, and a
//! panicking handler or page render answers a 500 while the rest works.
//!
//! These requests carry an API key (or, where said, a session cookie):
//! without credentials a request is refused before any of this matters. An
//! explicit foreign `Origin`, `Referer` or `Sec-Fetch-Site: cross-site` is
//! refused even with a key (the outer guard); a session request must also
//! show it comes from this app (see `identity_api` for that rule).

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::routing::get;
use http_body_util::BodyExt;
use leptos::prelude::*;
use leptos::server_fn::ServerFn;
use runlens::api::{CancelRun, GetPlaygroundOptions};
use runlens::server::guard::Origins;
use runlens::server::{guarded, router, routes, AppState};
use serde_json::Value;
use tower::ServiceExt;

use crate::support::{app, App, Reply};

const RUN: &str = r#"{"initial_prompt": "hello"}"#;

/// Sends `body` with the given headers (no `Host` unless one is given).
async fn send(app: &App, method: Method, uri: &str, body: &str, headers: &[(&str, &str)]) -> Reply {
    let mut req = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let res = app.router.clone().oneshot(req.body(Body::from(body.to_owned())).unwrap()).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    Reply { status, headers, text: String::from_utf8_lossy(&bytes).into_owned() }
}

/// [`send`] with the app's admin key besides `headers`.
async fn send_keyed(app: &App, method: Method, uri: &str, body: &str, headers: &[(&str, &str)]) -> Reply {
    let auth = app.bearer();
    let mut all = headers.to_vec();
    all.push(("authorization", auth.as_str()));
    send(app, method, uri, body, &all).await
}

async fn run_count(app: &App) -> usize {
    app.get("/api/runs").await.json()["runs"].as_array().unwrap().len()
}

fn error_of(reply: &Reply) -> String {
    assert_eq!(reply.headers[header::CONTENT_TYPE], "application/json", "{}", reply.text);
    reply.json()["error"].as_str().unwrap_or_else(|| panic!("no error: {}", reply.text)).to_owned()
}

#[tokio::test]
async fn a_cross_origin_text_plain_post_is_refused_and_creates_nothing() {
    let app = app().await;
    let evil = [("content-type", "text/plain"), ("origin", "http://evil.example"), ("host", "localhost:3000")];
    let reply = send_keyed(&app, Method::POST, "/api/runs", RUN, &evil).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert!(error_of(&reply).contains("http://evil.example"), "{}", reply.text);
    // Even as JSON, and with only a foreign Referer, or only Sec-Fetch-Site.
    let cases: [&[(&str, &str)]; 4] = [
        &[("content-type", "application/json"), ("origin", "http://evil.example"), ("host", "localhost:3000")],
        &[("content-type", "application/json"), ("referer", "https://evil.example/page"), ("host", "localhost:3000")],
        &[("content-type", "application/json"), ("sec-fetch-site", "cross-site")],
        &[("content-type", "application/json"), ("origin", "null"), ("host", "localhost:3000")],
    ];
    for headers in cases {
        let reply = send_keyed(&app, Method::POST, "/api/runs", RUN, headers).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{headers:?}");
        error_of(&reply);
        // Without credentials, too: the origin is checked first.
        let reply = send(&app, Method::POST, "/api/runs", RUN, headers).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{headers:?}");
    }
    assert_eq!(run_count(&app).await, 0, "nothing was created");
    assert!(reply.headers.get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn same_origin_and_originless_requests_work() {
    let app = app().await;
    let same = [
        ("content-type", "application/json; charset=utf-8"),
        ("origin", "http://localhost:3000"),
        ("referer", "http://localhost:3000/playground"),
        ("host", "localhost:3000"),
        ("sec-fetch-site", "same-origin"),
    ];
    assert_eq!(send_keyed(&app, Method::POST, "/api/runs", RUN, &same).await.status, StatusCode::CREATED);
    let referer_only =
        [("content-type", "application/json"), ("referer", "http://127.0.0.1:3000/x"), ("host", "127.0.0.1:3000")];
    assert_eq!(send_keyed(&app, Method::POST, "/api/runs", RUN, &referer_only).await.status, StatusCode::CREATED);
    // Behind a TLS proxy that says so.
    let proxied = [
        ("content-type", "application/json"),
        ("origin", "https://runs.example"),
        ("host", "runs.example"),
        ("x-forwarded-proto", "https"),
    ];
    assert_eq!(send_keyed(&app, Method::POST, "/api/runs", RUN, &proxied).await.status, StatusCode::CREATED);
    // curl and scripts send no Origin at all.
    assert_eq!(app.post_json("/api/runs", RUN).await.status, StatusCode::CREATED);
    // A signed-in browser's page, with the session cookie instead of a key.
    app.user("ada", Some(("default", runlens_engine::model::Role::Operator)), false).await;
    let cookie = app.session("ada").await;
    let browser = [("cookie", cookie.as_str()), same[0], same[1], same[3]];
    assert_eq!(send(&app, Method::POST, "/api/runs", RUN, &browser).await.status, StatusCode::CREATED);
    let fetch_metadata = [("cookie", cookie.as_str()), same[0], ("sec-fetch-site", "same-origin")];
    assert_eq!(send(&app, Method::POST, "/api/runs", RUN, &fetch_metadata).await.status, StatusCode::CREATED);
    // …but a session request naming no origin at all may be a forgery.
    let bare = [("cookie", cookie.as_str()), same[0]];
    let reply = send(&app, Method::POST, "/api/runs", RUN, &bare).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text);
    assert_eq!(run_count(&app).await, 6);
}

#[tokio::test]
async fn the_public_origin_is_allowed_behind_a_proxy() {
    let app = app().await;
    let leptos_options = leptos::config::LeptosOptions::builder().output_name("runlens").build();
    let state = AppState::new(app.engine.clone(), leptos_options, Some("https://runlens.example.com".into()));
    let proxied = router(state);
    let auth = app.bearer();
    let post = |origin: &'static str| {
        let req = Request::post("/api/runs")
            .header("content-type", "application/json")
            .header("authorization", &auth)
            .header("origin", origin)
            .header("host", "127.0.0.1:3000")
            .body(Body::from(RUN))
            .unwrap();
        proxied.clone().oneshot(req)
    };
    assert_eq!(post("https://runlens.example.com").await.unwrap().status(), StatusCode::CREATED);
    assert_eq!(post("http://127.0.0.1:3000").await.unwrap().status(), StatusCode::CREATED, "its Host still works");
    assert_eq!(post("https://evil.example").await.unwrap().status(), StatusCode::FORBIDDEN);
    assert_eq!(run_count(&app).await, 2);
}

#[tokio::test]
async fn rest_bodies_must_be_json() {
    let app = app().await;
    for content_type in [Some("text/plain"), Some("application/x-www-form-urlencoded"), None] {
        let headers: Vec<(&str, &str)> = content_type.map(|t| ("content-type", t)).into_iter().collect();
        let reply = send_keyed(&app, Method::POST, "/api/runs", RUN, &headers).await;
        assert_eq!(reply.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{content_type:?}");
        assert!(error_of(&reply).contains("application/json"), "{}", reply.text);
    }
    let text = [("content-type", "text/plain")];
    let reply = send_keyed(&app, Method::PUT, "/api/prices/builtin", r#"{"input_per_mtok": 1}"#, &text).await;
    assert_eq!(reply.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let reply = send_keyed(&app, Method::POST, "/api/runs/import", "{}", &text).await;
    assert_eq!(reply.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(run_count(&app).await, 0, "nothing was created");

    // A bodiless action needs no content type.
    let run = app.post_json("/api/runs", RUN).await.json();
    let id = run["id"].as_str().unwrap();
    let reply = send_keyed(&app, Method::POST, &format!("/api/runs/{id}/cancel"), "", &[]).await;
    assert_ne!(reply.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{}", reply.text);
    assert_ne!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text);
}

#[tokio::test]
async fn form_posts_and_server_functions_from_another_origin_are_refused() {
    let app = app().await;
    app.user("ada", Some(("default", runlens_engine::model::Role::Operator)), false).await;
    let cookie = app.session("ada").await;
    let auth = app.bearer();
    // With a key (the outer guard) and with the session cookie (forgery).
    for credential in [("authorization", auth.as_str()), ("cookie", cookie.as_str())] {
        let foreign = [
            ("content-type", "application/x-www-form-urlencoded"),
            ("origin", "http://evil.example"),
            ("host", "localhost:3000"),
            credential,
        ];
        let reply = send(&app, Method::POST, "/playground", "prompt=hi&model=builtin", &foreign).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{credential:?}");
        error_of(&reply);
        let multipart = [
            ("content-type", "multipart/form-data; boundary=X"),
            ("origin", "http://evil.example"),
            ("host", "localhost:3000"),
            credential,
        ];
        let upload = "--X\r\nContent-Disposition: form-data; name=\"file\"; filename=\"r.json\"\r\n\r\n{}\r\n--X--\r\n";
        assert_eq!(
            send(&app, Method::POST, "/runs/import", upload, &multipart).await.status,
            StatusCode::FORBIDDEN,
            "{credential:?}"
        );
    }
    assert_eq!(run_count(&app).await, 0);

    // A server function: refused from elsewhere, working from the app's page.
    let run = app.post_json("/api/runs", RUN).await.json();
    let id = run["id"].as_str().unwrap();
    let body = format!("id={id}");
    for credential in [("authorization", auth.as_str()), ("cookie", cookie.as_str())] {
        let foreign = [
            ("content-type", "application/x-www-form-urlencoded"),
            ("origin", "http://evil.example"),
            ("host", "localhost:3000"),
            credential,
        ];
        let reply = send(&app, Method::POST, CancelRun::PATH, &body, &foreign).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{credential:?}: {}", reply.text);
    }
    let own = [
        ("content-type", "application/x-www-form-urlencoded"),
        ("origin", "http://localhost:3000"),
        ("host", "localhost:3000"),
        ("cookie", cookie.as_str()),
    ];
    let reply = send(&app, Method::POST, GetPlaygroundOptions::PATH, "", &own).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert!(reply.text.contains("calculator"));
    let reply = send(&app, Method::POST, "/playground", "prompt=hi&model=builtin", &own).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.text);
    assert_eq!(run_count(&app).await, 2);
}

#[tokio::test]
async fn every_api_error_is_json() {
    let app = app().await;
    let big = format!(r#"{{"initial_prompt": "{}"}}"#, "x".repeat(runlens::server::MAX_BODY_BYTES + 1));
    let reply = app.post_json("/api/runs", &big).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(error_of(&reply).contains(&runlens::server::MAX_BODY_BYTES.to_string()), "{}", reply.text);

    for (method, uri, allowed) in [
        (Method::DELETE, "/api/runs", "GET,POST"),
        (Method::PATCH, "/api/runs/r1", "GET"),
        (Method::PUT, "/api/runs/r1/cancel", "POST"),
    ] {
        let reply = app.send(method.clone(), uri, None, "").await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{method} {uri}");
        let message = error_of(&reply);
        let header = reply.headers[header::ALLOW].to_str().unwrap().to_owned();
        assert!(message.contains(method.as_str()), "{message}");
        // The message names what is allowed, as the Allow header does.
        let listed: Vec<&str> = header.split(',').map(str::trim).collect();
        for m in allowed.split(',') {
            assert!(listed.contains(&m), "{uri}: Allow {header}");
            assert!(message.contains(m), "{uri}: {message}");
        }
    }

    for uri in ["/api/nope", "/api/runs/x/nothing/here", "/api"] {
        let reply = app.get(uri).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{uri}");
        assert!(error_of(&reply).contains("no API endpoint"), "{uri}: {}", reply.text);
    }
    // axum's own rejections: a path that is not UTF-8, a query that is not.
    for uri in ["/api/runs/%FF", "/api/runs?limit=%FF%FE"] {
        let reply = app.get(uri).await;
        assert!(reply.status.is_client_error(), "{uri}: {}", reply.status);
        error_of(&reply);
    }
    // Pages keep their HTML 404.
    let page = app.get("/no-such-page").await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(!page.headers[header::CONTENT_TYPE].to_str().unwrap().contains("json"));
}

/// A server function with a bug; registered with the app's own (server
/// functions are collected from the whole binary), so the real router serves it.
#[server]
async fn explode(after_await: bool) -> Result<String, ServerFnError> {
    if after_await {
        tokio::task::yield_now().await;
    }
    Ok(broken("a server function panicked"))
}

#[tokio::test]
async fn a_panicking_server_function_answers_500_through_the_real_router() {
    let app = app().await;
    for form in ["after_await=false", "after_await=true"] {
        let reply = app.send(Method::POST, Explode::PATH, Some(form), "application/x-www-form-urlencoded").await;
        assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR, "{form}: {}", reply.text);
        assert_eq!(app.post_json("/api/runs", RUN).await.status, StatusCode::CREATED, "the API still works");
    }
    assert_eq!(app.get("/runs").await.status, StatusCode::OK, "pages still work");
}

/// Stands for a bug somewhere in rendering.
fn broken(what: &str) -> String {
    panic!("{what}")
}

async fn boom() -> &'static str {
    panic!("a REST handler panicked")
}

#[component]
fn Boom() -> impl IntoView {
    view! { <p>{broken("a page render panicked")}</p> }
}

/// A page whose data load panics (in a task of its own).
#[component]
fn BoomData() -> impl IntoView {
    let data = Resource::new(
        || (),
        |_| async move {
            // After an await, as a real load: the rest runs in a task of its own.
            tokio::task::yield_now().await;
            broken("a page's data load panicked").len()
        },
    );
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move { data.await.to_string() })}
        </Suspense>
    }
}

/// The router's own guards (what `router` puts around every route) catch a
/// panic in a REST handler and in a page render; both answer 500 and the
/// app keeps serving.
#[tokio::test]
async fn a_panic_answers_500_and_the_rest_keeps_working() {
    let app = app().await;
    let leptos_options = leptos::config::LeptosOptions::builder()
        .output_name("runlens")
        .site_root(app.site_root().to_string_lossy().into_owned())
        .build();
    let state = AppState::new(app.engine.clone(), leptos_options, None);
    let boom_page = leptos_axum::render_app_async_with_context(|| (), || view! { <Boom/> });
    let boom_data = leptos_axum::render_app_async_with_context(|| (), || view! { <BoomData/> });
    let routes = routes(state.clone())
        .route("/api/boom", get(boom))
        .route("/boom", get(move |req: Request<Body>| boom_page(req)))
        .route("/boom-data", get(move |req: Request<Body>| boom_data(req)))
        .layer(axum::middleware::from_fn_with_state(state, runlens::server::auth::authenticate))
        .layer(runlens::server::auth::sessions::layer(app.engine.clone(), false));
    let guarded = guarded(routes, Origins::default());
    let auth = app.bearer();
    let fetch = |uri: &'static str| {
        let req = Request::get(uri).header("authorization", &auth).body(Body::empty()).unwrap();
        guarded.clone().oneshot(req)
    };

    let res = fetch("/api/boom").await.unwrap();
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let body: Value = serde_json::from_slice(&res.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert!(body["error"].as_str().unwrap().contains("internal error"), "{body}");

    for uri in ["/boom", "/boom-data"] {
        let res = fetch(uri).await.unwrap();
        assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR, "{uri}");
    }

    for uri in ["/api/runs", "/runs", "/playground"] {
        assert_eq!(fetch(uri).await.unwrap().status(), StatusCode::OK, "{uri} still works");
    }
}
