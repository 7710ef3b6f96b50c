//! Runs out as OTLP traces (OTLP/HTTP, protobuf): [`spans`] maps a run to
//! spans; [`OtelExporter`] sends the runs this server finishes.
//!
//! When a run ends, its id goes into a bounded queue (a full queue drops it
//! and counts the drop, logged, rather than holding up the engine); one
//! worker takes up to `batch` runs at a time, reads each run's trace from
//! the store, and POSTs them as one `ExportTraceServiceRequest`, retrying
//! what OTLP calls retryable (connection errors, 429, 502, 503, 504, with
//! `Retry-After` honoured) with exponential backoff. Runs that ended before
//! the exporter was configured are sent by `runlens otel-export`, through
//! [`send`].

mod spans;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};
use prost::Message as _;
use tokio::sync::mpsc;

pub use spans::{provider_and_model, run_spans, span_id, trace_id, MAX_CONTENT_BYTES};

use super::OtelTarget;
use crate::model::RunTrace;
use crate::store::Store;

/// Attempts of one request, the first included.
pub const MAX_ATTEMPTS: u32 = 5;

/// Counters of an exporter since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Runs the endpoint accepted.
    pub runs_sent: u64,
    pub spans_sent: u64,
    /// Runs not queued because the queue was full.
    pub runs_dropped: u64,
    /// Runs given up on after the last attempt (or refused by the endpoint).
    pub runs_failed: u64,
    /// Requests sent again after a retryable failure.
    pub retries: u64,
}

#[derive(Default)]
struct Counters {
    runs_sent: AtomicU64,
    spans_sent: AtomicU64,
    runs_dropped: AtomicU64,
    runs_failed: AtomicU64,
    retries: AtomicU64,
    /// Runs queued or being sent.
    pending: AtomicU64,
}

/// Sends the runs this server finishes (see the module docs). Cheap to clone.
#[derive(Clone)]
pub struct OtelExporter {
    tx: mpsc::Sender<String>,
    counters: Arc<Counters>,
    queue: usize,
}

impl OtelExporter {
    /// Starts the worker sending to `target`, reading runs from `store`.
    pub fn start(store: Arc<dyn Store>, target: OtelTarget) -> Self {
        let (tx, rx) = mpsc::channel(target.queue);
        let counters = Arc::new(Counters::default());
        let exporter = Self { tx, counters: counters.clone(), queue: target.queue };
        tracing::info!(url = %target.url, "exporting finished runs as OpenTelemetry traces");
        tokio::spawn(worker(store, target, rx, counters));
        exporter
    }

    /// Queues run `run_id` for sending; never waits. A full queue drops the
    /// run and counts it (logged at the 1st, 2nd, 4th, 8th… drop).
    pub fn offer(&self, run_id: &str) {
        self.counters.pending.fetch_add(1, Ordering::SeqCst);
        if let Err(e) = self.tx.try_send(run_id.to_owned()) {
            self.counters.pending.fetch_sub(1, Ordering::SeqCst);
            let mpsc::error::TrySendError::Full(_) = e else { return };
            let dropped = self.counters.runs_dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() {
                tracing::warn!(
                    "OpenTelemetry export queue is full ({} runs waiting): {dropped} finished runs dropped so far",
                    self.queue
                );
            }
        }
    }

    /// Waits until every run queued so far has been sent (or given up on),
    /// for at most `bound` (a shutdown calls it); `Err` with the number of
    /// runs still waiting when the bound ran out.
    pub async fn flush(&self, bound: Duration) -> Result<(), u64> {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let pending = self.counters.pending.load(Ordering::SeqCst);
            if pending == 0 {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(pending);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn stats(&self) -> ExportStats {
        let c = &self.counters;
        ExportStats {
            runs_sent: c.runs_sent.load(Ordering::Relaxed),
            spans_sent: c.spans_sent.load(Ordering::Relaxed),
            runs_dropped: c.runs_dropped.load(Ordering::Relaxed),
            runs_failed: c.runs_failed.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
        }
    }
}

async fn worker(store: Arc<dyn Store>, target: OtelTarget, mut rx: mpsc::Receiver<String>, counters: Arc<Counters>) {
    let client = client(&target);
    let mut ids = Vec::with_capacity(target.batch);
    while rx.recv_many(&mut ids, target.batch).await > 0 {
        // Runs often end together (a burst of short runs): a short linger
        // fills the request instead of sending one run per request.
        if ids.len() < target.batch {
            tokio::time::sleep(Duration::from_millis(100)).await;
            while ids.len() < target.batch {
                match rx.try_recv() {
                    Ok(id) => ids.push(id),
                    Err(_) => break,
                }
            }
        }
        let taken = ids.len() as u64;
        ids.sort();
        ids.dedup();
        let mut traces = Vec::with_capacity(ids.len());
        for id in ids.drain(..) {
            match read(store.as_ref(), &id, target.capture_content).await {
                Ok(trace) if exportable(&trace) => traces.push(trace),
                Ok(_) => {}
                Err(e) => {
                    counters.runs_failed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(run = %id, "OpenTelemetry export: cannot read the run: {e}");
                }
            }
        }
        let runs = traces.len() as u64;
        if runs > 0 {
            match send(&client, &target, &traces, &counters.retries).await {
                Ok(spans) => {
                    counters.runs_sent.fetch_add(runs, Ordering::Relaxed);
                    counters.spans_sent.fetch_add(spans as u64, Ordering::Relaxed);
                }
                Err(e) => {
                    counters.runs_failed.fetch_add(runs, Ordering::Relaxed);
                    tracing::warn!("OpenTelemetry export: {runs} runs not sent: {e}");
                }
            }
        }
        counters.pending.fetch_sub(taken, Ordering::SeqCst);
    }
}

/// A run as its spans need it: the transcript only when contents are
/// captured (a run's end should not read its whole transcript for nothing).
async fn read(store: &dyn Store, id: &str, capture_content: bool) -> crate::error::Result<RunTrace> {
    let run = store.get_run(id).await?.ok_or_else(|| crate::error::EngineError::NotFound(format!("run `{id}`")))?;
    let steps = store.steps(id).await?;
    let messages = if capture_content { store.messages(id).await? } else { Vec::new() };
    // Only runs runlens ran go out (see `exportable`): they have no received spans.
    Ok(RunTrace { run, steps, messages, spans: Vec::new() })
}

/// Whether runlens ran the run itself (runs recorded from spans it
/// received are not sent back out) and it has ended.
pub fn exportable(trace: &RunTrace) -> bool {
    trace.run.status.is_terminal() && trace.run.source.is_none()
}

/// The HTTP client for `target` (its timeout per request).
pub fn client(target: &OtelTarget) -> reqwest::Client {
    crate::net::http_builder().timeout(target.timeout).build().unwrap_or_default()
}

/// A request carries at most this many bytes of spans; a larger run goes
/// out in several (receivers refuse bodies over a limit of their own, often
/// 2 or 4 MiB).
pub const MAX_REQUEST_BYTES: usize = 1536 * 1024;

/// The requests carrying `traces`: every run's spans under one resource and
/// scope, split so no request holds more than [`MAX_REQUEST_BYTES`] of spans.
pub fn requests(target: &OtelTarget, traces: &[RunTrace]) -> Vec<ExportTraceServiceRequest> {
    let mut out = Vec::new();
    let mut spans = Vec::new();
    let mut bytes = 0;
    for span in traces.iter().flat_map(|t| run_spans(t, target.capture_content)) {
        let len = span.encoded_len();
        if !spans.is_empty() && bytes + len > MAX_REQUEST_BYTES {
            out.push(request(target, std::mem::take(&mut spans)));
            bytes = 0;
        }
        bytes += len;
        spans.push(span);
    }
    if !spans.is_empty() {
        out.push(request(target, spans));
    }
    out
}

fn request(target: &OtelTarget, spans: Vec<opentelemetry_proto::tonic::trace::v1::Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    spans::kv(crate::otel::attrs::SERVICE_NAME, &target.service_name),
                    spans::kv("service.version", env!("CARGO_PKG_VERSION")),
                    spans::kv("telemetry.sdk.name", "runlens"),
                ],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "runlens".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// POSTs `traces` to `target` (in several requests when large), retrying
/// what is retryable; `Ok` = spans sent. Errors never show a header value.
pub async fn send(
    client: &reqwest::Client,
    target: &OtelTarget,
    traces: &[RunTrace],
    retries: &AtomicU64,
) -> Result<usize, String> {
    let mut sent = 0;
    for request in requests(target, traces) {
        sent += send_one(client, target, &request, retries).await?;
    }
    Ok(sent)
}

/// POSTs one request, retrying what is retryable; `Ok` = spans accepted.
async fn send_one(
    client: &reqwest::Client,
    target: &OtelTarget,
    request: &ExportTraceServiceRequest,
    retries: &AtomicU64,
) -> Result<usize, String> {
    let spans: usize = request.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
    let body = request.encode_to_vec();
    let mut wait = Duration::from_millis(500);
    for attempt in 1..=MAX_ATTEMPTS {
        let mut post =
            client.post(&target.url).header(reqwest::header::CONTENT_TYPE, "application/x-protobuf").body(body.clone());
        for (name, value) in &target.headers {
            post = post.header(name, value);
        }
        let why = match post.send().await {
            Ok(response) if response.status().is_success() => {
                let bytes = response.bytes().await.unwrap_or_default();
                if let Ok(answer) = ExportTraceServiceResponse::decode(bytes.as_ref()) {
                    if let Some(partial) = answer.partial_success.filter(|p| p.rejected_spans > 0) {
                        let message = target.secrets.redact(&partial.error_message);
                        tracing::warn!("OpenTelemetry export: {} spans rejected: {message}", partial.rejected_spans);
                        return Ok(spans.saturating_sub(partial.rejected_spans.max(0) as usize));
                    }
                }
                return Ok(spans);
            }
            Ok(response) => {
                let status = response.status();
                if !matches!(status.as_u16(), 429 | 502 | 503 | 504) {
                    return Err(format!("{} answered {status}", target.url));
                }
                if let Some(after) = retry_after(&response) {
                    wait = after;
                }
                format!("{} answered {status}", target.url)
            }
            Err(e) => target.secrets.redact(&format!("cannot reach {}: {}", target.url, without_url(e))),
        };
        if attempt == MAX_ATTEMPTS {
            return Err(format!("{why} (after {MAX_ATTEMPTS} attempts)"));
        }
        retries.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(30));
    }
    unreachable!("the last attempt returns")
}

fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let secs: u64 = response.headers().get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()?;
    Some(Duration::from_secs(secs.min(60)))
}

fn without_url(e: reqwest::Error) -> String {
    let timeout = e.is_timeout();
    let mut text = e.without_url().to_string();
    if timeout && !text.contains("timed out") {
        text.push_str(" (timed out)");
    }
    text
}

/// What [`export_runs`] sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sent {
    pub runs: usize,
    pub spans: usize,
    /// Runs still active (sent when they end, by the server driving them)
    /// and runs recorded from spans runlens received (never sent back out).
    pub skipped: usize,
}

/// Sends runs `ids` to `target` now, `batch` runs a request (the
/// `runlens otel-export` command). An unknown run or a failed request stops
/// it with the error; what was sent before stays sent.
pub async fn export_runs(store: &dyn Store, target: &OtelTarget, ids: &[String]) -> Result<Sent, String> {
    let client = client(target);
    let retries = AtomicU64::new(0);
    let mut sent = Sent::default();
    for chunk in ids.chunks(target.batch) {
        let mut traces = Vec::with_capacity(chunk.len());
        for id in chunk {
            let trace = read(store, id, target.capture_content).await.map_err(|e| format!("run `{id}`: {e}"))?;
            if exportable(&trace) {
                traces.push(trace);
            } else {
                sent.skipped += 1;
            }
        }
        if traces.is_empty() {
            continue;
        }
        sent.spans += send(&client, target, &traces, &retries).await?;
        sent.runs += traces.len();
    }
    Ok(sent)
}
