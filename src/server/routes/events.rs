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
//! Every stream is opened through `server::live`: it counts against the
//! caller's open streams, ends within seconds once the caller's key is
//! revoked, session ended or role in the project lost, and ends when the
//! server starts shutting down, so open pages never hold a shutdown up; a
//! browser then reconnects to the restarted server with `Last-Event-ID`.
//!
//! The document describes each message of a stream ([`RunStreamMessage`],
//! [`AllRunsStreamMessage`]): its `data` is an [`Event`] as JSON.

use std::convert::Infallible;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::Event as SseEvent;
use axum::response::{IntoResponse, Response};
use futures::stream;
use runlens_engine::model::{Event, EventKind};
use runlens_engine::Engine;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::AppQuery;
use super::super::live::Live;
use super::super::openapi::responses::*;
use super::super::openapi::{AllRunsStreamMessage, RunStreamMessage};
use super::super::state::AppState;
use super::{ProjectHeader, RunPath};
use runlens_engine::model::Role;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(run_events)).routes(routes!(all_events))
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

/// Where a run's stream resumes, unless `Last-Event-ID` says.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ResumeAt {
    /// Resume after this event seq. Read only without `Last-Event-ID` (which wins over it).
    #[param(value_type = Option<EventSeq>, inline)]
    pub after: Option<String>,
}

/// An event seq's schema (not empty: `?after=` is a 400).
struct EventSeq;

impl utoipa::PartialSchema for EventSeq {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        let seq = serde_json::json!({ "type": "integer", "minimum": 0, "maximum": u64::MAX });
        utoipa::openapi::RefOr::T(runlens_engine::openapi::raw(seq))
    }
}

/// Where to resume: `Last-Event-ID` wins over `?after=` (a reconnecting
/// `EventSource` sends the header but repeats the original URL).
fn resume_after(headers: &HeaderMap, query: ResumeAt) -> Result<u64, AppError> {
    let header = headers.get("last-event-id").map(|v| v.to_str().unwrap_or("?").trim().to_owned());
    match header.filter(|h| !h.is_empty()).or(query.after) {
        None => Ok(0),
        Some(v) => v
            .parse()
            .map_err(|_| AppError::BadRequest(format!("the event id to resume after must be a number, not `{v}`"))),
    }
}

/// The run's events as Server-Sent Events: what is stored after the resume point, then live; ends after
/// `run.finished`.
///
/// No gap and no duplicate between the replay and the live part. A client that falls behind is dropped and
/// reconnects with `Last-Event-ID`.
#[utoipa::path(
    get,
    path = "/api/runs/{id}/events",
    tag = "events",
    params(
        RunPath,
        ResumeAt,
        ("Last-Event-ID" = Option<String>, Header, nullable = false, pattern = r"^\s*([0-9]{1,19})?\s*$",
            description = "Resume after this event seq (what a reconnecting `EventSource` sends); wins over `after`"),
    ),
    responses(
        (status = 200, description = "The stream; each message is one event", body = RunStreamMessage,
            content_type = "text/event-stream"),
        (status = 204, description = "The run has finished and the client has its run.finished already: stop reconnecting"),
        QueryErrors,
        (status = 429, response = TooManyStreams),
    )
)]
async fn run_events(
    State(engine): State<Engine>,
    caller: Caller,
    live: Live,
    Path(RunPath { id }): Path<RunPath>,
    headers: HeaderMap,
    AppQuery(resume): AppQuery<ResumeAt>,
) -> Result<Response, AppError> {
    let head = caller.run(&engine, &id, Role::Viewer).await?;
    let after = resume_after(&headers, resume)?;
    let events = engine.traces().run_events(&id, after).await?;
    if events.is_over() {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let live = live.open(&head.project, Role::Viewer)?;
    let stream = stream::unfold(events, move |mut events| async move {
        match events.next().await? {
            Ok(e) => Some((Ok::<_, Infallible>(sse_event(&e, true)), events)),
            Err(end) => {
                tracing::info!(after = events.last_seq(), %end, "event stream dropped");
                None
            }
        }
    });
    Ok(live.sse(stream))
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

/// Live status changes of every run as Server-Sent Events; no replay and no ids.
///
/// `run.status`, `run.finished`, and `tool_call.updated` of calls that needed an approval. A client that
/// (re)connects reloads what it shows, then applies what streams in.
#[utoipa::path(
    get,
    path = "/api/events",
    tag = "events",
    params(ProjectHeader),
    responses(
        (status = 200, description = "The stream; each message is one event", body = AllRunsStreamMessage,
            content_type = "text/event-stream"),
        (status = 429, response = TooManyStreams),
        (status = 500, response = Internal),
    )
)]
async fn all_events(State(engine): State<Engine>, caller: Caller, live: Live) -> Result<Response, AppError> {
    let project = caller.require_current(Role::Viewer)?.to_owned();
    let live = live.open(&project, Role::Viewer)?;
    let runs = ProjectRuns { engine: engine.clone(), project, known: std::collections::HashMap::new() };
    let stream = stream::unfold((engine.subscribe(), runs), |(mut rx, mut runs)| async move {
        loop {
            match rx.recv().await {
                Ok(e) if for_all_runs(&e.kind) && runs.contains(&e.run_id).await => {
                    return Some((Ok::<_, Infallible>(sse_event(&e, false)), (rx, runs)))
                }
                Ok(_) => continue,
                Err(e) => {
                    tracing::info!(error = %e, "all-runs event stream dropped");
                    return None;
                }
            }
        }
    });
    Ok(live.sse(stream))
}

/// Which runs belong to the stream's project, remembered for the runs
/// seen (at most [`KNOWN_RUNS`], then forgotten and looked up again).
struct ProjectRuns {
    engine: Engine,
    project: String,
    known: std::collections::HashMap<String, bool>,
}

const KNOWN_RUNS: usize = 4096;

impl ProjectRuns {
    async fn contains(&mut self, run_id: &str) -> bool {
        if let Some(ours) = self.known.get(run_id) {
            return *ours;
        }
        let ours = matches!(self.engine.runs().run_head(run_id).await, Ok(head) if head.project == self.project);
        if self.known.len() >= KNOWN_RUNS {
            self.known.clear();
        }
        self.known.insert(run_id.to_owned(), ours);
        ours
    }
}
