//! Server-rendered pages and the playground form post.

use axum::http::{header, Method, StatusCode};

use crate::support::app;

#[tokio::test]
async fn runs_and_trace_pages_render_the_run() {
    let app = app().await;
    let run = app.finished_run(r#"{"initial_prompt": "What is 6 * 7?", "name": "answer <b>check</b>"}"#).await;
    let id = run["id"].as_str().unwrap();

    let list = app.get("/runs").await;
    assert_eq!(list.status, StatusCode::OK);
    assert!(list.text.contains(&format!("data-run-id=\"{id}\"")), "{}", list.text);
    assert!(list.text.contains("answer &lt;b&gt;check&lt;/b&gt;"), "names are escaped");
    assert!(!list.text.contains("<b>check</b>"));
    let cost = list.text.split(r#"data-testid="run-row-cost""#).nth(1).and_then(|t| t.split("</td>").next());
    assert!(cost.is_some_and(|c| c.ends_with(">$0.00")), "the built-in model is priced at 0: {cost:?}");

    let trace = app.get(&format!("/runs/{id}")).await;
    assert_eq!(trace.status, StatusCode::OK);
    assert!(trace.text.contains("data-tool=\"calculator\""));
    assert!(trace.text.contains("42"));
}

#[tokio::test]
async fn the_playground_form_starts_a_run_or_explains_the_error() {
    let app = app().await;
    let form =
        "prompt=What+is+2%2B3%3F&model=builtin&tools_present=1&tools=calculator&max_turns=5&tags=team%3Dqa&context=";
    let reply = app.send(Method::POST, "/playground", Some(form), "application/x-www-form-urlencoded").await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.text);
    let location = reply.headers[header::LOCATION].to_str().unwrap();
    assert!(location.starts_with("/runs/"), "{location}");

    let bad = "prompt=keep+me&model=builtin&context=%7Bnot+json";
    let reply = app.send(Method::POST, "/playground", Some(bad), "application/x-www-form-urlencoded").await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    let location = reply.headers[header::LOCATION].to_str().unwrap();
    assert!(location.starts_with("/playground?") && location.contains("error="), "{location}");
    assert!(location.contains("prompt=keep"), "the prompt is kept: {location}");

    let page = app.get("/playground").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains("value=\"calculator\""));
}

/// The browser bundle goes out gzipped to browsers that accept it (the build
/// writes a `.gz` beside each file) and plain to the rest; an unknown file
/// is a 404.
#[tokio::test]
async fn the_bundle_is_served_gzipped_when_accepted() {
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    let app = app().await;
    let pkg = app.site_root().join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("runlens.js"), "plain script").unwrap();
    std::fs::write(pkg.join("runlens.js.gz"), b"\x1f\x8bgzipped bytes").unwrap();
    std::fs::write(pkg.join("runlens.css"), "body {}").unwrap();

    let get = |uri: &str, gzip: bool| {
        let mut req = Request::builder().uri(uri);
        if gzip {
            req = req.header(header::ACCEPT_ENCODING, "gzip, deflate, br");
        }
        app.router.clone().oneshot(req.body(Body::empty()).unwrap())
    };
    let res = get("/pkg/runlens.js", true).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()[header::CONTENT_ENCODING], "gzip");
    assert!(res.headers()[header::CONTENT_TYPE].to_str().unwrap().contains("javascript"));
    assert_eq!(&res.into_body().collect().await.unwrap().to_bytes()[..], b"\x1f\x8bgzipped bytes");

    let res = get("/pkg/runlens.js", false).await.unwrap();
    assert!(res.headers().get(header::CONTENT_ENCODING).is_none());
    assert_eq!(&res.into_body().collect().await.unwrap().to_bytes()[..], b"plain script");

    let res = get("/pkg/runlens.css", true).await.unwrap();
    assert!(res.headers().get(header::CONTENT_ENCODING).is_none(), "no .gz: the plain file");
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(get("/pkg/nothing.wasm", true).await.unwrap().status(), StatusCode::NOT_FOUND);
}
