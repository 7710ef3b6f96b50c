//! The spans part of the store: OpenTelemetry spans other agents sent
//! (`POST /v1/traces`), kept as they came, and the read-only runs assembled
//! from them (see `otel::ingest`).
//!
//! A trace's spans are stored and its run re-derived from all of them in one
//! transaction, under a lock on the trace (the write lock in SQLite, an
//! advisory lock in PostgreSQL), so however the spans are batched, ordered or
//! raced, the run ends up derived from every span stored.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::Result;
use crate::model::{Message, Run, Step};

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

/// Derives a trace's run from all its stored spans (`None`: no run yet).
pub type Derive<'a> = &'a (dyn Fn(&[StoredSpan]) -> Option<DerivedRun> + Send + Sync);

/// What [`SpanStore::ingest_trace`] did.
#[derive(Debug, PartialEq)]
pub enum TraceIngest {
    /// The spans are stored; the run derived from the trace, if any.
    Stored(Option<Box<Run>>),
    /// Nothing was stored: the trace would hold more than the bound of spans.
    Full { stored: u64 },
    /// Nothing was stored: the derived run's id is taken by a run of another
    /// project or one runlens ran.
    RunTaken(String),
}

#[async_trait]
pub trait SpanStore: Send + Sync {
    /// Stores `spans` of trace `trace_id` in `project` (a span stored
    /// already is replaced), then derives the trace's run from every stored
    /// span of the trace with `derive` and writes it over the previous one
    /// (run row, steps, tool calls and transcript), all in one transaction
    /// under a lock on the trace. Refused whole when the trace would hold
    /// more than `max_spans` spans.
    async fn ingest_trace(
        &self,
        project: &str,
        trace_id: &str,
        spans: &[StoredSpan],
        max_spans: u64,
        derive: Derive<'_>,
    ) -> Result<TraceIngest>;
    /// The stored spans of a trace (at most `limit`), by start time.
    async fn trace_spans(&self, project: &str, trace_id: &str, limit: u32) -> Result<Vec<StoredSpan>>;
}
