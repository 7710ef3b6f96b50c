//! `GET /api/exports/runs`: the runs a list's filters select, with their
//! steps and tool calls, streamed as JSON lines.
//!
//! The filters are the runs list's (`GET /api/runs`), checked before the
//! first byte, so a bad one is a 400. The body is then written a page at a
//! time as the client reads it: one line per run, newest first (or in a
//! search's order), at most `limit` (or [`MAX_EXPORT_RUNS`]) runs and
//! [`MAX_EXPORT_BYTES`] bytes and one page; a cut export ends with a line
//! holding the `next_cursor` to go on from. A client that goes away stops
//! it at the next page.

use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use runlens_engine::cost::Pricing;
use runlens_engine::model::{Role, RunFilter, RunPage, Step};
use runlens_engine::Engine;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::extract::AppQuery;
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::runs::{ListRunsQuery, PricedRun};
use super::ProjectHeader;

/// The most runs one export writes.
pub const MAX_EXPORT_RUNS: usize = 10_000;
/// The most bytes one export writes (then it ends with its cursor).
pub const MAX_EXPORT_BYTES: usize = 256 * 1024 * 1024;
/// Runs read per page.
const PAGE: u32 = 50;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(export_runs))
}

/// One line of an export.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExportLine {
    /// A run with its cost, and its steps with their tool calls.
    Run { run: Box<PricedRun>, steps: Vec<Step> },
    /// The last line of an export cut at its limits: pass `cursor` to go on.
    More { next_cursor: String },
}

/// Export runs as JSON lines (`application/x-ndjson`).
///
/// The runs `GET /api/runs` would list with the same filters (all pages), each line
/// `{"type": "run", "run": {…}, "steps": [{… "tool_calls": […]}]}`; at most `limit` runs (by default 10,000) or
/// 256 MiB, after which the last line is `{"type": "more", "next_cursor": "…"}` (pass it as `cursor` to go on).
/// `offset` passes over runs before the first line.
#[utoipa::path(
    get,
    path = "/api/exports/runs",
    tag = "runs",
    params(ProjectHeader, ListRunsQuery),
    responses(
        (status = 200, description = "The runs, one JSON object per line", content_type = "application/x-ndjson", body = ExportLine),
        (status = 400, response = BadRequest),
        (status = 500, response = Internal),
    )
)]
async fn export_runs(
    State(engine): State<Engine>,
    caller: Caller,
    AppQuery(q): AppQuery<ListRunsQuery>,
) -> Result<Response, AppError> {
    let project = caller.require_current(Role::Viewer)?.to_owned();
    let mut filter = q.into_filter(&project);
    let max_runs = filter.limit.map_or(MAX_EXPORT_RUNS, |l| l as usize);
    filter.limit = Some(PAGE.min(max_runs as u32));
    // The first page is read before the response starts: a bad filter is a 400.
    let first = engine.runs().list_runs(&filter).await?;
    let pricing = engine.traces().pricing(&project).await?;
    let export =
        Export { engine, pricing, filter, page: Some(first), max_runs, sent_runs: 0, sent_bytes: 0, done: false };
    let body = Body::from_stream(futures::stream::unfold(export, |mut e| async move {
        let chunk = e.next_chunk().await?;
        Some((chunk, e))
    }));
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-ndjson"),
            (header::CONTENT_DISPOSITION, "attachment; filename=\"runs.jsonl\""),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response())
}

/// An export under way: the page being written and what was sent.
struct Export {
    engine: Engine,
    pricing: Pricing,
    filter: RunFilter,
    page: Option<RunPage>,
    /// `limit`, or [`MAX_EXPORT_RUNS`].
    max_runs: usize,
    sent_runs: usize,
    sent_bytes: usize,
    done: bool,
}

impl Export {
    /// The next page's lines, or `None` at the end. The limits are checked
    /// between pages (of 50 runs, or `limit`): past them, the last line names the
    /// next page's cursor. An error after the response started ends the body
    /// early (the client sees a stream without its last line).
    async fn next_chunk(&mut self) -> Option<Result<Vec<u8>, std::io::Error>> {
        if self.done {
            return None;
        }
        if self.sent_runs >= self.max_runs || self.sent_bytes >= MAX_EXPORT_BYTES {
            self.done = true;
            let next_cursor = self.filter.cursor.clone()?;
            return Some(line(&ExportLine::More { next_cursor }));
        }
        let page = match self.page.take() {
            Some(page) => page,
            None => match self.engine.runs().list_runs(&self.filter).await {
                Ok(page) => page,
                Err(e) => return Some(Err(std::io::Error::other(e.to_string()))),
            },
        };
        let mut out = Vec::new();
        for run in page.runs {
            let steps = match self.engine.runs().steps(&run.id).await {
                Ok(steps) => steps,
                Err(e) => return Some(Err(std::io::Error::other(e.to_string()))),
            };
            let run = Box::new(PricedRun::new(run, &self.pricing));
            match line(&ExportLine::Run { run, steps }) {
                Ok(bytes) => out.extend_from_slice(&bytes),
                Err(e) => return Some(Err(e)),
            }
            self.sent_runs += 1;
        }
        self.sent_bytes += out.len();
        match page.next_cursor {
            Some(cursor) => {
                // The offset placed the first page; the cursor places the rest.
                self.filter.cursor = Some(cursor);
                self.filter.offset = None;
            }
            None => self.done = true,
        }
        Some(Ok(out))
    }
}

/// `value` as one JSON line.
fn line(value: &ExportLine) -> Result<Vec<u8>, std::io::Error> {
    let mut out = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    out.push(b'\n');
    Ok(out)
}
