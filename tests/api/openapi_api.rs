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
