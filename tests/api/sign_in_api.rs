//! Signing in under attack: the page a sign-in sends the browser to stays
//! on this site.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use runlens_engine::model::Role;
use tower::ServiceExt;

use crate::support::{app, session_cookie, urlencode, HOST, ORIGIN, PASSWORD};

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
