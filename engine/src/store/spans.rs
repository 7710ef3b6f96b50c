//! The spans part of the store: OpenTelemetry spans other agents sent
//! (`POST /v1/traces`), kept as they came, and the read-only runs assembled
//! from them (see `otel::ingest`).
//!
//! A trace's spans are stored and folded into its run in one transaction,
//! under a lock on the trace (the write lock in SQLite, an advisory lock in
//! PostgreSQL), so however the spans are batched, ordered or raced, the run
//! ends up derived from every span stored. The fold is kept between
//! requests by its caller; a version per trace, bumped by every ingest,
//! tells whether it still holds what the store holds (another server may
//! have ingested since), else it is read again from the stored spans.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::Result;
use crate::model::{Message, Run, RunStatus, Step};

/// One received span as stored: ids in lowercase hex, times in Unix
/// nanoseconds, attributes as a JSON object.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredSpan {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub name: String,
    /// The OTLP `SpanKind` number (0 unspecified, 1 internal, 2 server, 3 client…).
    pub kind: i32,
    pub start_ns: i64,
    pub end_ns: i64,
    pub attributes: Map<String, Value>,
    pub events: Vec<StoredSpanEvent>,
    /// The OTLP `StatusCode` number (0 unset, 1 ok, 2 error).
    pub status_code: i32,
    pub status_message: Option<String>,
    /// The `service.name` of the resource that sent it.
    pub service_name: Option<String>,
    /// The instrumentation scope that made it.
    pub scope_name: Option<String>,
    pub received_at: DateTime<Utc>,
}

/// An event of a stored span.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredSpanEvent {
    pub name: String,
    pub time_ns: i64,
    #[serde(default)]
    pub attributes: Map<String, Value>,
}

/// A run derived from a trace's spans: written over the trace's previous one.
#[derive(Clone, Debug, PartialEq)]
pub struct DerivedRun {
    pub run: Run,
    pub steps: Vec<Step>,
    pub messages: Vec<Message>,
}

/// What folding spans into a trace changed in its run: the run row, the
/// steps from `from_step` on and the transcript entries from `from_seq`
/// on (those stored from there on are replaced), and entry 0 when it
/// changed and `from_seq` is past it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunChange {
    pub run: Run,
    pub from_step: u32,
    pub steps: Vec<Step>,
    pub from_seq: u64,
    pub messages: Vec<Message>,
    pub head: Option<Message>,
}

/// A trace's run as assembled so far, folding in new spans (see
/// `otel::ingest::Assembly`).
pub trait TraceFold: Send {
    /// The version of the trace it holds (`None`: nothing yet).
    fn version(&self) -> Option<i64>;
    /// Spans it would hold with `spans` folded in.
    fn held_with(&self, spans: &[StoredSpan]) -> u64;
    /// Starts again from every stored span of the trace, at `version`.
    fn reset(&mut self, spans: Vec<StoredSpan>, version: i64);
    /// Folds `spans` in, at `version`: what changed in the run (`None`: the
    /// trace is no run).
    fn fold(&mut self, spans: &[StoredSpan], version: i64) -> Option<RunChange>;
    /// The whole run, as if the store held none of it (`None`: no run).
    fn whole(&mut self) -> Option<RunChange>;
    /// Forgets everything (what it folded was not stored).
    fn forget(&mut self);
}

/// A run an ingest wrote, with the status it had before (`None`: it is new),
/// read in the same transaction.
#[derive(Debug, PartialEq)]
pub struct IngestedRun {
    pub run: Run,
    pub before: Option<RunStatus>,
}

/// What [`SpanStore::ingest_trace`] did.
#[derive(Debug, PartialEq)]
pub enum TraceIngest {
    /// The spans are stored; the run derived from the trace, if any.
    Stored(Option<Box<IngestedRun>>),
    /// Nothing was stored: the trace would hold more than the bound of spans.
    Full { stored: u64 },
    /// Nothing was stored: the derived run's id is taken by a run of another
    /// project or one runlens ran.
    RunTaken(String),
}

#[async_trait]
pub trait SpanStore: Send + Sync {
    /// Stores `spans` of trace `trace_id` in `project` (a span stored
    /// already is replaced), folds them into the trace's run with `fold`
    /// (first read again from every stored span when it does not hold the
    /// trace's current version) and writes what changed over the previous
    /// run (run row, steps, tool calls and transcript), all in one
    /// transaction under a lock on the trace. Refused whole when the trace
    /// would hold more than `max_spans` spans. When the result is not
    /// `Stored`, or an error, `fold` may hold what was not stored: forget it.
    async fn ingest_trace(
        &self,
        project: &str,
        trace_id: &str,
        spans: &[StoredSpan],
        max_spans: u64,
        fold: &mut dyn TraceFold,
    ) -> Result<TraceIngest>;
    /// The stored spans of a trace (at most `limit`), by start time.
    async fn trace_spans(&self, project: &str, trace_id: &str, limit: u32) -> Result<Vec<StoredSpan>>;
}
