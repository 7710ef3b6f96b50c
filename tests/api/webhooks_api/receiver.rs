//! A webhook receiver started by a test: axum on a free port of 127.0.0.1
//! that records every request (path, signature, idempotency key, body) and
//! answers as the test planned (a status, or never).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode, Uri};
use runlens_engine::model::{RunStatus, StatusChangePayload};
use runlens_engine::net;

use super::HANG;

/// One request the receiver got.
#[derive(Clone, Debug)]
pub(crate) struct Received {
    pub path: String,
    pub signature: String,
    pub key: String,
    pub content_type: String,
    pub body: String,
    /// The status the receiver answered with.
    pub answered: u16,
}

impl Received {
    pub fn payload(&self) -> StatusChangePayload {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not a payload ({e}): {}", self.body))
    }

    /// Whether the signature verifies with `secret` (and a timestamp near now).
    pub fn signed_with(&self, secret: &str) -> bool {
        net::verify(secret, &self.signature, self.body.as_bytes(), chrono::Utc::now().timestamp(), 300).is_ok()
    }

    pub fn change(&self) -> (RunStatus, RunStatus) {
        let p = self.payload();
        (p.old_status, p.new_status)
    }
}

/// A planned "answer" that never comes: the request is held open.
pub(crate) const STALL: u16 = 0;

#[derive(Default)]
struct Shared {
    log: Mutex<Vec<Received>>,
    /// Statuses to answer with next, per path (then 200).
    plan: Mutex<HashMap<String, VecDeque<u16>>>,
}

/// A webhook receiver on a free port of 127.0.0.1: records every request
/// and answers as planned.
pub(crate) struct Receiver {
    pub base: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Receiver {
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let shared = Arc::new(Shared::default());
        let state = shared.clone();
        let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: String| {
            let state = state.clone();
            async move {
                let path = uri.path().to_owned();
                let answered = state.plan.lock().unwrap().get_mut(&path).and_then(VecDeque::pop_front).unwrap_or(200);
                let header =
                    |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
                state.log.lock().unwrap().push(Received {
                    path,
                    signature: header("runlens-signature"),
                    key: header("runlens-idempotency-key"),
                    content_type: header("content-type"),
                    body,
                    answered,
                });
                if answered == STALL {
                    std::future::pending::<()>().await;
                }
                (StatusCode::from_u16(answered).unwrap(), "receiver says so")
            }
        });
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Receiver { base, shared, task }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The next requests to `path` are answered with `codes`, in order
    /// ([`STALL`]: not answered at all).
    pub fn answer_next(&self, path: &str, codes: &[u16]) {
        self.shared.plan.lock().unwrap().entry(path.to_owned()).or_default().extend(codes);
    }

    /// The requests to `path` are answered with 200 from now on.
    pub fn answer_ok(&self, path: &str) {
        self.shared.plan.lock().unwrap().remove(path);
    }

    /// The requests to `path` so far, in arrival order.
    pub fn received(&self, path: &str) -> Vec<Received> {
        self.shared.log.lock().unwrap().iter().filter(|r| r.path == path).cloned().collect()
    }

    /// Waits until the requests to `path` satisfy `done`; panics (with them) on a hang.
    pub async fn wait_for(&self, path: &str, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + HANG;
        loop {
            let got = self.received(path);
            if done(&got) {
                return got;
            }
            assert!(tokio::time::Instant::now() < deadline, "waiting for {what} on {path}: {got:#?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Requests to `path` answered with a 2xx.
pub(crate) fn delivered(got: &[Received]) -> Vec<&Received> {
    got.iter().filter(|r| (200..300).contains(&r.answered)).collect()
}
