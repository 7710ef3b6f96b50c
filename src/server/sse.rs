//! Server-Sent Events: one run's events with replay, and every run's
//! status changes.
//!
//! `GET /api/runs/{id}/events` sends each event as
//! `id: <seq>` / `event: <type>` / `data: <JSON of the event>`. It starts
//! after the `Last-Event-ID` header (what a reconnecting `EventSource`
//! sends), else after `?after=N`, else from the first event; it replays what
//! is stored, then goes live, with no gap and no duplicate (see
//! `runlens_engine::events`). It ends after `run.finished`; a request for a
//! finished run whose `run.finished` the client already has gets
//! `204 No Content`, which tells `EventSource` to stop reconnecting.
//!
//! A client that reads too slowly falls behind the run's bounded channel and
//! is dropped: the stream just ends, and the client reconnects with
//! `Last-Event-ID`. The engine never waits for a client.
//!
//! Every stream ends when the server starts shutting down (see
//! [`Closing`]), so open pages never hold a shutdown up; a browser then
//! reconnects to the restarted server with `Last-Event-ID`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures::stream::{self, Stream, StreamExt};
use runlens_engine::events::{Event, EventKind};
use runlens_engine::Engine;

use super::error::AppError;
use super::state::{AppState, Closing};

/// A comment line is sent this often on an idle stream, so proxies and
/// browsers keep the connection open.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/runs/{id}/events", get(run_events)).route("/api/events", get(all_events))
}

/// One event as an SSE message.
pub fn sse_event(e: &Event, with_id: bool) -> SseEvent {
    let msg = SseEvent::default().event(e.kind.name()).data(e.to_json());
    if with_id {
        msg.id(e.seq.to_string())
    } else {
        msg
    }
}

/// Where to resume: `Last-Event-ID` wins over `?after=` (a reconnecting
/// `EventSource` sends the header but repeats the original URL).
fn resume_after(headers: &HeaderMap, query: &HashMap<String, String>) -> Result<u64, AppError> {
    let header = headers.get("last-event-id").map(|v| v.to_str().unwrap_or("?").trim().to_owned());
    match header.filter(|h| !h.is_empty()).or_else(|| query.get("after").cloned()) {
        None => Ok(0),
        Some(v) => v
            .parse()
            .map_err(|_| AppError::BadRequest(format!("the event id to resume after must be a number, not `{v}`"))),
    }
}

async fn run_events(
    State(engine): State<Engine>,
    closing: Option<Extension<Closing>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, AppError> {
    let after = resume_after(&headers, &query)?;
    let events = engine.run_events(&id, after).await?;
    if events.is_over() {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let stream = stream::unfold(events, move |mut events| async move {
        match events.next().await? {
            Ok(e) => Some((Ok::<_, Infallible>(sse_event(&e, true)), events)),
            Err(end) => {
                tracing::info!(after = events.last_seq(), %end, "event stream dropped");
                None
            }
        }
    });
    Ok(sse(stream, closing))
}

/// Whether the all-runs stream carries this event: status changes, finishes,
/// and updates of calls that needed an approval (the approvals badge).
fn for_all_runs(kind: &EventKind) -> bool {
    match kind {
        EventKind::RunStatus { .. } | EventKind::RunFinished { .. } => true,
        EventKind::ToolCallUpdated { tool_call } => tool_call.requested_at.is_some(),
        _ => false,
    }
}

/// `GET /api/events`: live only — there is no replay across runs (a client
/// that (re)connects reloads the list, then applies what streams in). Messages
/// carry no `id:` for the same reason.
async fn all_events(State(engine): State<Engine>, closing: Option<Extension<Closing>>) -> Response {
    let stream = stream::unfold(engine.subscribe(), |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(e) if for_all_runs(&e.kind) => return Some((Ok::<_, Infallible>(sse_event(&e, false)), rx)),
                Ok(_) => continue,
                Err(e) => {
                    tracing::info!(error = %e, "all-runs event stream dropped");
                    return None;
                }
            }
        }
    });
    sse(stream, closing)
}

/// The SSE response of `stream`, which ends when the server starts shutting down.
fn sse(
    stream: impl Stream<Item = Result<SseEvent, Infallible>> + Send + 'static,
    closing: Option<Extension<Closing>>,
) -> Response {
    let closed = async move {
        match closing {
            Some(Extension(closing)) => closing.closed().await,
            None => std::future::pending().await,
        }
    };
    let mut res = Sse::new(stream.take_until(closed)).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response();
    // Reverse proxies (nginx) must not buffer a live stream.
    res.headers_mut().insert("x-accel-buffering", HeaderValue::from_static("no"));
    res
}
