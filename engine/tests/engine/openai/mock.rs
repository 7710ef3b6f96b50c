//! An in-process OpenAI-compatible server for the provider tests (CI has no
//! network): it plays scripted replies in order, records every request it
//! receives, and counts streamed answers whose connection went away.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use futures::stream;
use serde_json::{json, Value};

/// What the server answers to one request.
pub enum Reply {
    /// A whole JSON answer (a completion or an error) with extra headers.
    Json { status: u16, headers: Vec<(&'static str, String)>, body: Value },
    /// `text/event-stream` written in these pieces, `delay` before each.
    Stream { pieces: Vec<Bytes>, delay: Duration },
    /// Answers nothing for this long (then a 500).
    Stall(Duration),
}

impl Reply {
    /// A streamed answer of these `data:` events then `[DONE]`, written in
    /// pieces of `piece` bytes (so events and lines are split on the wire).
    pub fn sse(events: &[Value], piece: usize) -> Self {
        let body = sse_body(events);
        Reply::Stream {
            pieces: body.as_bytes().chunks(piece).map(Bytes::copy_from_slice).collect(),
            delay: Duration::ZERO,
        }
    }

    /// An error answer in OpenAI's shape.
    pub fn error(status: u16, message: &str) -> Self {
        Reply::Json { status, headers: vec![], body: json!({"error": {"message": message, "type": "server_error"}}) }
    }
}

pub fn sse_body(events: &[Value]) -> String {
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    body
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<Seen>>,
    pieces_sent: AtomicUsize,
    streams_dropped: AtomicUsize,
}

pub struct Mock {
    /// `http://127.0.0.1:PORT/v1`
    pub base_url: String,
    shared: Arc<Shared>,
}

impl Mock {
    pub async fn start(replies: Vec<Reply>) -> Mock {
        let shared = Arc::new(Shared { replies: Mutex::new(replies.into()), ..Shared::default() });
        let app = Router::new().route("/v1/chat/completions", post(answer)).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Mock { base_url, shared }
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    pub fn pieces_sent(&self) -> usize {
        self.shared.pieces_sent.load(Ordering::SeqCst)
    }

    /// Streamed answers whose body the server stopped writing (finished or
    /// abandoned by the client).
    pub fn streams_dropped(&self) -> usize {
        self.shared.streams_dropped.load(Ordering::SeqCst)
    }
}

struct DropCount(Arc<Shared>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.streams_dropped.fetch_add(1, Ordering::SeqCst);
    }
}

async fn answer(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.seen.lock().unwrap().push(Seen { headers, body });
    let reply = shared.replies.lock().unwrap().pop_front();
    match reply {
        None => (StatusCode::INTERNAL_SERVER_ERROR, "mock: no reply scripted").into_response(),
        Some(Reply::Json { status, headers, body }) => {
            let mut response = (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response();
            for (name, value) in headers {
                response.headers_mut().insert(name, value.parse().unwrap());
            }
            response
        }
        Some(Reply::Stall(wait)) => {
            tokio::time::sleep(wait).await;
            (StatusCode::INTERNAL_SERVER_ERROR, "mock: stalled").into_response()
        }
        Some(Reply::Stream { pieces, delay }) => {
            let state = (pieces.into_iter(), DropCount(shared.clone()), shared);
            let body = stream::unfold(state, move |(mut pieces, guard, shared)| async move {
                let piece = pieces.next()?;
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                shared.pieces_sent.fetch_add(1, Ordering::SeqCst);
                Some((Ok::<_, Infallible>(piece), (pieces, guard, shared)))
            });
            ([(header::CONTENT_TYPE, "text/event-stream")], Body::from_stream(body)).into_response()
        }
    }
}
