//! A small receiver of HTTP tool calls: a real axum server on 127.0.0.1
//! that checks each call's `runlens-signature` on its own (HMAC-SHA256 of
//! `"<t>.<body>"` computed here, not with runlens's code) against the
//! secret it was given, records what it received, and answers by path:
//!
//! - `/order`: 401 unless the signature verifies, else `{"order": <id>, "status": "shipped"}`
//! - `/flaky/NAME`: 503 to the first two calls of NAME, then `{"ok": true, "attempt": n}`
//! - `/status/CODE`: that status, with the body `boom CODE`
//! - `/slow`: never answers (the caller's timeout ends it)
//! - `/hang-once/NAME`: never answers the first call of NAME, then `{"ok": true, "attempt": n}`
//! - `/text`: `200 text/plain` "plain words"
//! - `/redirect`: `302` to another URL

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
    /// Whether the signature matched the receiver's secret (and why not).
    pub verified: Result<(), String>,
}

#[derive(Default)]
struct Shared {
    secret: Mutex<Option<String>>,
    seen: Mutex<Vec<Seen>>,
    calls: Mutex<HashMap<String, u32>>,
}

pub struct Receiver {
    base: String,
    shared: Arc<Shared>,
}

impl Receiver {
    /// Starts the receiver on a free port of 127.0.0.1.
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let shared = Arc::new(Shared::default());
        let app = Router::new().fallback(answer).with_state(shared.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { base, shared }
    }

    /// The receiver's URL for `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The secret signatures are checked with (the one registration showed).
    pub fn trust(&self, secret: &str) {
        *self.shared.secret.lock().unwrap() = Some(secret.to_owned());
    }

    /// Every request so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }
}

/// Checks a `runlens-signature` value the way the README tells a receiver
/// to: `t` within five minutes, and a `v1` equal to the HMAC-SHA256 of
/// `"<t>.<body>"` under the secret.
pub fn verify(secret: &str, header: Option<&str>, body: &[u8]) -> Result<(), String> {
    let header = header.ok_or("no runlens-signature header")?;
    let mut t = None;
    let mut v1 = Vec::new();
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", value)) => t = value.parse::<i64>().ok(),
            Some(("v1", value)) => v1.push(value.to_owned()),
            _ => {}
        }
    }
    let t = t.ok_or("no t=")?;
    if (chrono::Utc::now().timestamp() - t).abs() > 300 {
        return Err(format!("t={t} is too old"));
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    let expected: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    if v1.contains(&expected) {
        Ok(())
    } else {
        Err("bad signature".into())
    }
}

async fn answer(State(shared): State<Arc<Shared>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_owned();
    let secret = shared.secret.lock().unwrap().clone();
    let signature = headers.get("runlens-signature").and_then(|v| v.to_str().ok());
    let verified = match secret {
        Some(secret) => verify(&secret, signature, &body),
        None => Err("the receiver has no secret yet".into()),
    };
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let seen = Seen { path: path.clone(), headers, body: parsed.clone(), verified: verified.clone() };
    shared.seen.lock().unwrap().push(seen);
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["order"] => match verified {
            Ok(()) => {
                let id = parsed["arguments"]["id"].clone();
                axum::Json(json!({"order": id, "status": "shipped"})).into_response()
            }
            Err(why) => (StatusCode::UNAUTHORIZED, axum::Json(json!({"error": why}))).into_response(),
        },
        ["flaky", name] => {
            let n = {
                let mut calls = shared.calls.lock().unwrap();
                let n = calls.entry((*name).to_owned()).or_default();
                *n += 1;
                *n
            };
            if n <= 2 {
                (StatusCode::SERVICE_UNAVAILABLE, "try again later").into_response()
            } else {
                axum::Json(json!({"ok": true, "attempt": n})).into_response()
            }
        }
        ["status", code] => {
            let status =
                code.parse().ok().and_then(|c| StatusCode::from_u16(c).ok()).unwrap_or(StatusCode::IM_A_TEAPOT);
            (status, format!("boom {code}")).into_response()
        }
        ["hang-once", name] => {
            let n = {
                let mut calls = shared.calls.lock().unwrap();
                let n = calls.entry(format!("hang-once/{name}")).or_default();
                *n += 1;
                *n
            };
            if n == 1 {
                std::future::pending::<()>().await;
            }
            axum::Json(json!({"ok": true, "attempt": n})).into_response()
        }
        ["slow"] => {
            std::future::pending::<()>().await;
            StatusCode::OK.into_response()
        }
        ["text"] => ([(header::CONTENT_TYPE, "text/plain")], "plain words").into_response(),
        ["redirect"] => (StatusCode::FOUND, [(header::LOCATION, "http://example.com/elsewhere")]).into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}
