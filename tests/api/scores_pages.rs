//! Scores on the trace page, server side: the section lists each score with
//! who gave it and its comment escaped, a summary per name, and the
//! operator's form (on the run, or on a step it names); the form's server
//! function as a plain form post and as a hydrated call; a viewer sees the
//! scores but no form.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use http_body_util::BodyExt;
use leptos::server_fn::ServerFn;
use runlens::api::scores::{AddRunScore, ScoreError};
use runlens_engine::model::{Actor, Role};
use serde_json::json;
use tower::ServiceExt;

use crate::support::{app, App, Reply};

async fn post_form(app: &App, form: &str, accept: &str, referer: &str, auth: &str) -> Reply {
    let req = Request::builder()
        .method(Method::POST)
        .uri(AddRunScore::PATH)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::ACCEPT, accept)
        .header(header::REFERER, referer)
        .header(header::HOST, "localhost")
        .header(header::AUTHORIZATION, auth)
        .body(Body::from(form.to_owned()))
        .unwrap();
    let res = app.router.clone().oneshot(req).await.unwrap();
    let (status, headers) = (res.status(), res.headers().clone());
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    Reply { status, headers, text: String::from_utf8_lossy(&bytes).into_owned() }
}

#[tokio::test]
async fn the_trace_page_lists_scores_escaped_and_its_form_adds_one() {
    let app = app().await;
    let run = app.finished_run(r#"{"initial_prompt": "What is 2 + 3?"}"#).await;
    let id = run["id"].as_str().unwrap();
    let empty = app.get(&format!("/runs/{id}")).await.text;
    assert!(empty.contains("data-testid=\"scores-empty\"") && empty.contains("data-testid=\"score-form\""));

    let comment = "<script>alert(1)</script>";
    let body = json!({"run_id": id, "name": "correct", "value": true, "comment": comment}).to_string();
    assert_eq!(app.post_json("/api/scores", &body).await.status, StatusCode::CREATED);

    // A plain form post (no JavaScript) keeps the score and goes back to the page.
    let referer = format!("http://localhost/runs/{id}");
    let form = format!("run_id={id}&name=tone&value=kind&comment=");
    let reply = post_form(&app, &form, "text/html", &referer, &app.bearer()).await;
    assert!(reply.status.is_redirection(), "{}: {}", reply.status, reply.text);

    // On a step: the form's `on` names it.
    let form = format!("run_id={id}&name=first-step&value=yes&comment=&on=step%200");
    let reply = post_form(&app, &form, "text/html", &referer, &app.bearer()).await;
    assert!(reply.status.is_redirection(), "{}: {}", reply.status, reply.text);
    let scores = app.get(&format!("/api/runs/{id}/scores")).await.json();
    let on_step = scores["scores"].as_array().unwrap().iter().find(|s| s["name"] == "first-step").unwrap().clone();
    assert_eq!(on_step["step_index"], 0, "{scores}");

    let html = app.get(&format!("/runs/{id}")).await.text;
    assert_eq!(html.matches("data-testid=\"score-row\"").count(), 3, "{html}");
    assert!(html.contains("href=\"#step-0\""), "the row links to its step");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && !html.contains(comment), "escaped");
    assert!(html.contains("data-testid=\"score-chip\" data-name=\"correct\""));
    assert!(html.contains("kind ×1"), "a label's summary counts it");

    // A hydrated call gets the REST API's status and a ScoreError; nothing is kept.
    for (form, status, says) in [
        (format!("run_id={id}&name=a%2Fb&value=1"), StatusCode::BAD_REQUEST, "name:"),
        (format!("run_id={id}&name=ok&value=%20"), StatusCode::BAD_REQUEST, "value:"),
        ("run_id=nope&name=ok&value=1".to_owned(), StatusCode::NOT_FOUND, "not found"),
        (format!("run_id={id}&name=ok&value=1&on=step%2099"), StatusCode::BAD_REQUEST, "step_index:"),
        (format!("run_id={id}&name=ok&value=1&on=no-such-call"), StatusCode::BAD_REQUEST, "call_id:"),
    ] {
        let reply = post_form(&app, &form, "application/json", "", &app.bearer()).await;
        assert_eq!(reply.status, status, "{form}: {}", reply.text);
        let err: ScoreError = serde_json::from_str(&reply.text).expect("a ScoreError");
        assert!(err.message.contains(says), "{}", err.message);
    }
    assert_eq!(app.get(&format!("/api/runs/{id}/scores")).await.json()["scores"].as_array().unwrap().len(), 3);

    // A viewer reads the scores but has no form, and cannot post one.
    let (_, viewer) =
        app.engine.identity().create_key("viewer", Some("default"), Role::Viewer, &Actor::system()).await.unwrap();
    let auth = format!("Bearer {viewer}");
    let page = app.send_with(Method::GET, &format!("/runs/{id}"), None, "", &[("authorization", &auth)]).await;
    assert!(page.text.contains("data-testid=\"score-row\""));
    assert!(!page.text.contains("data-testid=\"score-form\""));
    let refused = post_form(&app, &format!("run_id={id}&name=ok&value=1"), "application/json", "", &auth).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);
}
