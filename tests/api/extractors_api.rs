//! The typed extractors over HTTP: JSON bodies and query strings refused as
//! `{"error"}` answers that name what was wrong, with the statuses the API
//! has always given (400, 413, 415; never axum's 422).

use axum::http::{Method, StatusCode};

use crate::support::app;

fn error(reply: &crate::support::Reply) -> String {
    reply.json()["error"].as_str().unwrap_or_else(|| panic!("no error message: {}", reply.text)).to_owned()
}

#[tokio::test]
async fn json_bodies_are_refused_with_serdes_explanation() {
    let app = app().await;
    let cases = [
        ("/api/runs", "{oops", "invalid request body: key must be a string"),
        ("/api/runs", r#"{"initial_prompt": ["x"]}"#, "invalid request body: invalid type: sequence"),
        ("/api/runs/nope/messages", r#"{"message": "hi", "extra": 1}"#, "invalid request body: unknown field `extra`"),
        ("/api/runs/nope/messages/m/edit", r#"{}"#, "invalid request body: missing field `message`"),
        ("/api/runs/nope/tool-calls/c/approve", r#"{"always": "yes"}"#, "invalid request body: invalid type: string"),
    ];
    for (uri, body, expected) in cases {
        let reply = app.post_json(uri, body).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{uri} {body}: {}", reply.text);
        assert!(error(&reply).starts_with(expected), "{uri} {body}: {}", reply.text);
    }
    let reply = app.send(Method::PUT, "/api/prices/m", Some(r#"{"input": 1}"#), "application/json").await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(error(&reply).contains("missing field `output`"), "{}", reply.text);
}

#[tokio::test]
async fn optional_bodies_may_be_empty_but_not_another_type() {
    let app = app().await;
    // An empty body is no body: the call is looked up (and not found).
    for body in ["", "  \n"] {
        let reply = app.post_json("/api/runs/nope/tool-calls/c/reject", body).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{body:?}: {}", reply.text);
    }
    let reply = app.send(Method::POST, "/api/runs/nope/tool-calls/c/reject", Some("{}"), "text/plain").await;
    assert_eq!(reply.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(error(&reply).contains("application/json"), "{}", reply.text);
}

#[tokio::test]
async fn bodies_over_the_limit_are_a_413_naming_it() {
    let app = app().await;
    let big = format!(r#"{{"message": "{}"}}"#, "x".repeat(runlens::server::MAX_BODY_BYTES));
    let reply = app.post_json("/api/runs/nope/messages", &big).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(error(&reply).contains(&runlens::server::MAX_BODY_BYTES.to_string()), "{}", reply.text);
}

#[tokio::test]
async fn query_strings_are_typed_and_name_the_bad_parameter() {
    let app = app().await;
    let run = app.finished_run(r#"{"initial_prompt": "hi", "model_settings": {"script": [{"text": "one"}]}}"#).await;
    let id = run["id"].as_str().unwrap();
    let cases = [
        ("/api/runs?limit=0".to_owned(), "limit must be a number from 1 to 200, not `0`"),
        ("/api/runs?limit=ten".to_owned(), "limit must be a number from 1 to 200, not `ten`"),
        (
            "/api/runs?status=sleeping".to_owned(),
            "status must be one of pending, running, paused, done, failed, cancelled, not `sleeping`",
        ),
        (format!("/api/runs/{id}/steps?limit=10001"), "limit must be a number from 1 to 10000, not `10001`"),
        (format!("/api/runs/{id}/steps?payloads=maybe"), "payloads must be true or false, not `maybe`"),
        (format!("/api/runs/{id}/messages?tail=0"), "tail must be a number from 1 to 10000, not `0`"),
        (format!("/api/runs/{id}/messages?tail=2&from=0"), "`tail` cannot be combined with `from` or `limit`"),
        ("/api/approvals?status=done".to_owned(), "status must be `pending` or `decided`, not `done`"),
        (format!("/api/runs/{id}/events?after=x"), "the event id to resume after must be a number, not `x`"),
    ];
    for (uri, expected) in cases {
        let reply = app.get(&uri).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{uri}: {}", reply.text);
        assert_eq!(error(&reply), expected, "{uri}");
    }
    // Empty values are absent ones, as an untouched form field sends them.
    for uri in [
        "/api/runs?status=&limit=&tag=&q=&cursor=&agent_id=".to_owned(),
        format!("/api/runs/{id}/steps?from=&limit=&payloads="),
        format!("/api/runs/{id}/messages?tail=&from=&limit="),
        "/api/approvals?status=".to_owned(),
    ] {
        let reply = app.get(&uri).await;
        assert_eq!(reply.status, StatusCode::OK, "{uri}: {}", reply.text);
    }
    let page = app.get(&format!("/api/runs/{id}/steps?limit=1&payloads=0")).await.json();
    assert_eq!(page["steps"].as_array().unwrap().len(), 1);
    assert!(page["steps"][0]["cost_usd"].is_number(), "the built-in model's price: {page}");
}
