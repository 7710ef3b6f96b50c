//! Runs runlens did not run: recorded from OpenTelemetry spans another
//! agent sent (`POST /v1/traces`, see `otel::ingest`). Such a run carries
//! its [`RunSource`] and is read-only; the spans that are neither the agent,
//! a model call nor a tool call are kept as [`SpanNode`]s for the trace page.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The `kind` of a run recorded from OTLP spans.
pub const SOURCE_OTLP: &str = "otlp";

/// Where a run runlens did not run came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunSource {
    /// `otlp`: assembled from OpenTelemetry spans.
    pub kind: String,
    /// The `service.name` of the resource that sent the spans.
    #[serde(default)]
    pub service: Option<String>,
    /// The trace the run was assembled from (32 hex digits).
    pub trace_id: String,
}

impl RunSource {
    /// A short label: `otlp · service`.
    pub fn label(&self) -> String {
        match &self.service {
            Some(s) => format!("{} · {s}", self.kind),
            None => self.kind.clone(),
        }
    }

    /// Why a run from this source cannot be `what` (resumed, forked…).
    pub fn refusal(&self, run_id: &str, what: &str) -> String {
        let by = match &self.service {
            Some(s) => format!("sent by service `{s}`"),
            None => "sent by an unnamed service".to_owned(),
        };
        format!(
            "run `{run_id}` was recorded from OpenTelemetry spans {by}; runlens did not run it, so it cannot be {what}"
        )
    }
}

/// A span kept as it came: anything that is not the run's agent span, a
/// model call (a step) or a tool call, with its events.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SpanNode {
    pub span_id: String,
    #[serde(default)]
    pub parent_span_id: Option<String>,
    pub name: String,
    /// `internal`, `server`, `client`, `producer`, `consumer` or `unspecified`.
    pub kind: String,
    pub started_at: DateTime<Utc>,
    #[serde(default)]
    pub ended_at: Option<DateTime<Utc>>,
    /// `ok`, `error` or `unset`.
    pub status: String,
    #[serde(default)]
    pub status_message: Option<String>,
    /// The span's attributes (OTLP values as JSON).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub attributes: Map<String, Value>,
    #[serde(default)]
    pub events: Vec<SpanEventNode>,
}

impl SpanNode {
    /// From start to end, when it ended.
    pub fn duration_ms(&self) -> Option<i64> {
        Some((self.ended_at? - self.started_at).num_milliseconds().max(0))
    }
}

/// An event of a span (an exception, a log line, a captured message).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SpanEventNode {
    pub name: String,
    pub at: DateTime<Utc>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub attributes: Map<String, Value>,
}
