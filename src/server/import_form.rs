//! `POST /runs/import`: the runs list's Import control, a plain multipart
//! form post (no JavaScript needed).
//!
//! The `file` field holds a run state document (as `GET
//! /api/runs/{id}/state` exports it). On success the browser is sent to the
//! new run's trace with a `303 See Other`; on any error — no file, not JSON,
//! a document the engine refuses — back to `/runs?import_error=<message>`,
//! which the runs page shows. Nothing is stored for a refused document.

use axum::extract::multipart::{Multipart, MultipartRejection};
use axum::extract::State;
use axum::response::{IntoResponse, Redirect, Response};
use runlens_engine::{Engine, EngineError, ImportOptions};
use serde_json::Value;

use crate::components::format::{query_string, url_encode};

/// Imports the uploaded document and redirects (see the module docs).
pub async fn import_submit(State(engine): State<Engine>, multipart: Result<Multipart, MultipartRejection>) -> Response {
    let doc = match multipart {
        Ok(form) => read_document(form).await,
        Err(e) => Err(format!("The upload could not be read: {}.", e.body_text())),
    };
    let doc = match doc {
        Ok(doc) => doc,
        Err(msg) => return back_to_runs(&msg),
    };
    match engine.import_state(&doc, ImportOptions::default()).await {
        Ok(run) => Redirect::to(&format!("/runs/{}", url_encode(&run.id))).into_response(),
        Err(err) => {
            let msg = match err {
                EngineError::Invalid(_) | EngineError::NotFound(_) | EngineError::Conflict(_) => err.to_string(),
                other => {
                    tracing::error!(error = %other, "importing a run from the runs page failed");
                    "internal error (details are in the server log)".to_string()
                }
            };
            back_to_runs(&msg)
        }
    }
}

/// The `file` field, parsed as JSON; `Err` is a message for the user.
async fn read_document(mut form: Multipart) -> Result<Value, String> {
    let mut file = None;
    loop {
        let field = form.next_field().await.map_err(|e| format!("The upload could not be read: {}.", e.body_text()))?;
        let Some(field) = field else { break };
        if field.name() == Some("file") {
            let bytes = field.bytes().await.map_err(|e| format!("The upload could not be read: {}.", e.body_text()))?;
            file = Some(bytes);
        }
    }
    parse_document(file.as_deref())
}

/// Checks that an uploaded file is there and is JSON.
fn parse_document(file: Option<&[u8]>) -> Result<Value, String> {
    let bytes = file
        .filter(|b| !b.iter().all(u8::is_ascii_whitespace))
        .ok_or("Choose a run state file (.json, from a run's Export) to import.")?;
    serde_json::from_slice(bytes).map_err(|e| format!("The file is not valid JSON: {e}."))
}

/// `303` to `/runs?import_error=<msg>`.
fn back_to_runs(msg: &str) -> Response {
    Redirect::to(&format!("/runs?{}", query_string([("import_error", msg)]))).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{header, StatusCode};

    #[test]
    fn the_file_must_be_there_and_be_json() {
        assert!(parse_document(None).unwrap_err().contains("Choose a run state file"));
        assert!(parse_document(Some(b" \n")).unwrap_err().contains("Choose"));
        let err = parse_document(Some(b"{broken")).unwrap_err();
        assert!(err.starts_with("The file is not valid JSON"), "{err}");
        assert_eq!(parse_document(Some(br#"{"a": 1}"#)), Ok(serde_json::json!({"a": 1})));
    }

    #[test]
    fn errors_go_back_to_the_runs_page() {
        let resp = back_to_runs("bad & wrong");
        assert_eq!(resp.status(), StatusCode::SEE_OTHER);
        assert_eq!(resp.headers()[header::LOCATION], "/runs?import_error=bad%20%26%20wrong");
    }
}
