//! `POST /runs/import`: the runs list's Import control, a plain multipart
//! form post (no JavaScript needed).
//!
//! The `file` field holds a run state document (as `GET
//! /api/runs/{id}/state` exports it). On success the browser is sent to the
//! new run's trace with a `303 See Other`; on any error — no file, not JSON,
//! a document the engine refuses — back to `/runs?import_error=<message>`,
//! which the runs page shows. Nothing is stored for a refused document.

use axum::body::Bytes;
use axum::extract::multipart::{Multipart, MultipartRejection};
use axum::extract::State;
use axum::response::{IntoResponse, Redirect, Response};
use runlens_engine::{Engine, EngineError, ImportOptions};
use serde::de::IgnoredAny;

use super::rest_conversation::{import_permit, MAX_CONCURRENT_IMPORTS};
use crate::format::{query_string, url_encode};

/// Imports the uploaded document and redirects (see the module docs). It
/// shares the REST import's places ([`MAX_CONCURRENT_IMPORTS`]); when all
/// are taken the upload is not read and the page says to try again.
pub async fn import_submit(State(engine): State<Engine>, multipart: Result<Multipart, MultipartRejection>) -> Response {
    let Some(_permit) = import_permit() else {
        return back_to_runs(&format!(
            "The server is importing {MAX_CONCURRENT_IMPORTS} runs already; try again in a moment."
        ));
    };
    let doc = match multipart {
        Ok(form) => read_document(form).await,
        Err(e) => Err(format!("The upload could not be read: {}.", e.body_text())),
    };
    let doc = match doc {
        Ok(doc) => doc,
        Err(msg) => return back_to_runs(&msg),
    };
    match engine.import_bytes(&doc, ImportOptions::default()).await {
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

/// The `file` field, checked to be JSON; `Err` is a message for the user.
async fn read_document(mut form: Multipart) -> Result<Bytes, String> {
    let mut file = None;
    loop {
        let field = form.next_field().await.map_err(|e| format!("The upload could not be read: {}.", e.body_text()))?;
        let Some(field) = field else { break };
        if field.name() == Some("file") {
            let bytes = field.bytes().await.map_err(|e| format!("The upload could not be read: {}.", e.body_text()))?;
            file = Some(bytes);
        }
    }
    let file = file.ok_or_else(no_file)?;
    check_document(&file)?;
    Ok(file)
}

fn no_file() -> String {
    "Choose a run state file (.json, from a run's Export) to import.".into()
}

/// Checks that an uploaded file is there and is JSON (without building it).
fn check_document(file: &[u8]) -> Result<(), String> {
    if file.iter().all(u8::is_ascii_whitespace) {
        return Err(no_file());
    }
    serde_json::from_slice::<IgnoredAny>(file).map(|_| ()).map_err(|e| format!("The file is not valid JSON: {e}."))
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
        assert!(no_file().contains("Choose a run state file"));
        assert!(check_document(b" \n").unwrap_err().contains("Choose"));
        let err = check_document(b"{broken").unwrap_err();
        assert!(err.starts_with("The file is not valid JSON"), "{err}");
        assert_eq!(check_document(br#"{"a": 1}"#), Ok(()));
    }

    #[test]
    fn errors_go_back_to_the_runs_page() {
        let resp = back_to_runs("bad & wrong");
        assert_eq!(resp.status(), StatusCode::SEE_OTHER);
        assert_eq!(resp.headers()[header::LOCATION], "/runs?import_error=bad%20%26%20wrong");
    }
}
