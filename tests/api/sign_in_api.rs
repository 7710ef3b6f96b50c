//! Signing in under attack: concurrent wrong passwords are checked at most
//! as often as the limit allows, on one server or on two sharing the
//! database, and the page a sign-in sends the browser to stays on this site.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use futures::future::join_all;
use http_body_util::BodyExt;
use runlens::server::auth::login::MAX_FAILURES_PER_ACCOUNT;
use runlens_engine::model::Role;
use tower::ServiceExt;

use crate::support::{app, open_store, session_cookie, urlencode, App, HOST, ORIGIN, PASSWORD};

/// Posts the sign-in form to `router`; the `Location` it answers with, and
/// the session cookie it set.
async fn sign_in(router: &Router, name: &str, password: String, next: Option<&str>) -> (String, Option<String>) {
    let mut form = format!("username={}&password={}", urlencode(name), urlencode(&password));
    if let Some(next) = next {
        form.push_str(&format!("&next={}", urlencode(next)));
    }
    let req = Request::builder()
        .method(Method::POST)
        .uri("/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header("origin", ORIGIN)
        .header("host", HOST)
        .body(Body::from(form))
        .unwrap();
    let res = router.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let location = res.headers()[header::LOCATION].to_str().unwrap().to_owned();
    let headers = res.headers().clone();
    let _ = res.into_body().collect().await;
    let reply = crate::support::Reply { status: StatusCode::SEE_OTHER, headers, text: String::new() };
    (location, session_cookie(&reply))
}

/// A second server on `app`'s database: its own engine and router.
async fn second_server(app: &App) -> Router {
    let store = open_store(&app.db_url).await;
    let engine = runlens_engine::Engine::with_parts(
        store,
        runlens_engine::tools::ToolRegistry::with_builtins(),
        runlens_engine::llm::ModelRegistry::with_builtin(),
        runlens_engine::EngineConfig::default(),
    );
    let options = leptos::config::LeptosOptions::builder().output_name("runlens").build();
    runlens::server::router(runlens::server::AppState::new(engine, options, None))
}

/// How many of the sign-ins answered with `Location`s were checked
/// (`invalid`) and how many refused unchecked (`throttled`).
fn tally(locations: &[String]) -> (usize, usize) {
    let checked = locations.iter().filter(|l| l.starts_with("/login?error=invalid")).count();
    let refused = locations.iter().filter(|l| l.starts_with("/login?error=throttled")).count();
    assert_eq!(checked + refused, locations.len(), "{locations:?}");
    (checked, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_concurrent_wrong_passwords_are_checked_at_most_the_limit() {
    let app = app().await;
    app.user("bob", Some(("default", Role::Viewer)), false).await;
    let tries = (0..60).map(|i| sign_in(&app.router, "bob", format!("wrong password {i}"), None));
    let locations: Vec<String> = join_all(tries).await.into_iter().map(|(l, _)| l).collect();
    let (checked, refused) = tally(&locations);
    eprintln!(
        "sign-in race: 60 concurrent wrong passwords for one account: {checked} checked, {refused} refused \
         (limit {MAX_FAILURES_PER_ACCOUNT})"
    );
    assert_eq!(checked, MAX_FAILURES_PER_ACCOUNT as usize, "exactly the limit is checked");
    // Each checked attempt is in the audit log; the refused ones were never checked.
    let audit = app.engine.directory().audit(None, None, 0, 200).await.unwrap();
    let failed = audit.iter().filter(|e| e.action == "sign_in_failed").count();
    assert_eq!(failed, checked, "{audit:?}");
    // The right password is refused too now, and signs nobody in.
    let (location, cookie) = sign_in(&app.router, "bob", PASSWORD.into(), None).await;
    assert!(location.starts_with("/login?error=throttled"), "{location}");
    assert_eq!(cookie, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_database_share_one_budget() {
    let app = app().await;
    let other = second_server(&app).await;
    app.user("bob", Some(("default", Role::Viewer)), false).await;
    app.user("cy", Some(("default", Role::Viewer)), false).await;
    // Three wrong passwords on the first server leave two for the second.
    for i in 0..3 {
        let (location, _) = sign_in(&app.router, "bob", format!("wrong {i}"), None).await;
        assert!(location.starts_with("/login?error=invalid"), "{location}");
    }
    let on_other: Vec<String> = join_all((0..5).map(|i| sign_in(&other, "bob", format!("again {i}"), None)))
        .await
        .into_iter()
        .map(|(l, _)| l)
        .collect();
    assert_eq!(tally(&on_other), (2, 3), "the second server counts the first one's failures: {on_other:?}");

    // Sixty at once, half on each server: the limit holds for both together.
    let first = (0..30).map(|i| sign_in(&app.router, "cy", format!("wrong {i}"), None));
    let second = (0..30).map(|i| sign_in(&other, "cy", format!("wrong {i}"), None));
    let (a, b) = tokio::join!(join_all(first), join_all(second));
    let locations: Vec<String> = a.into_iter().chain(b).map(|(l, _)| l).collect();
    let (checked, refused) = tally(&locations);
    eprintln!(
        "sign-in race on two servers: 60 concurrent wrong passwords (30 on each): {checked} checked, \
         {refused} refused (limit {MAX_FAILURES_PER_ACCOUNT})"
    );
    assert_eq!(checked, MAX_FAILURES_PER_ACCOUNT as usize);

    // A success clears the account's budget on every server.
    app.user("di", Some(("default", Role::Viewer)), false).await;
    for i in 0..4 {
        sign_in(&app.router, "di", format!("wrong {i}"), None).await;
    }
    let (location, cookie) = sign_in(&other, "di", PASSWORD.into(), None).await;
    assert_eq!(location, "/");
    assert!(cookie.is_some());
    for i in 0..MAX_FAILURES_PER_ACCOUNT {
        let (location, _) = sign_in(&app.router, "di", format!("later {i}"), None).await;
        assert!(location.starts_with("/login?error=invalid"), "{location}");
    }
}

#[tokio::test]
async fn a_sign_in_only_ever_sends_the_browser_to_a_path_of_this_site() {
    let app = app().await;
    app.user("bob", Some(("default", Role::Viewer)), false).await;
    let (location, cookie) = sign_in(&app.router, "bob", PASSWORD.into(), Some("/runs?status=running")).await;
    assert_eq!(location, "/runs?status=running");
    assert!(cookie.is_some());
    // Each of these is `//evil.example` or another site to some browser or
    // to a page that decodes it once more.
    let tricks = [
        "/\t/evil.example",
        "/%09/evil.example",
        "/\n/evil.example",
        "/%0d%0a/evil.example",
        "//evil.example",
        "/\\evil.example",
        "/%5c/evil.example",
        "/%2f%2fevil.example",
        "/%252f%252fevil.example",
        "https://evil.example/",
        "javascript:alert(1)",
        " /evil",
    ];
    for next in tricks {
        let (location, cookie) = sign_in(&app.router, "bob", PASSWORD.into(), Some(next)).await;
        assert_eq!(location, "/", "next={next:?}");
        assert!(cookie.is_some(), "still signed in: {next:?}");
        // A failed sign-in keeps `next` only as a query parameter of the sign-in page.
        let (location, _) = sign_in(&app.router, "bob", "wrong".into(), Some(next)).await;
        assert_eq!(location, "/login?error=invalid&next=%2F", "next={next:?}");
    }
    // Switching project goes back to a page of this site only, too.
    let cookie = app.session("bob").await;
    let form = format!("project=default&next={}", urlencode("/%09/evil.example"));
    let headers = [("cookie", cookie.as_str()), ("origin", ORIGIN), ("host", HOST)];
    let content_type = "application/x-www-form-urlencoded";
    let switched = app.send_with(Method::POST, "/session/project", Some(&form), content_type, &headers).await;
    assert_eq!(switched.status, StatusCode::SEE_OTHER, "{}", switched.text);
    assert_eq!(switched.headers[header::LOCATION], "/");
}
