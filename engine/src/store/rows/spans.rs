//! Rows of `otlp_spans` (see `store::spans`).

use serde_json::{Map, Value};

use crate::store::spans::{StoredSpan, StoredSpanEvent};
use crate::store::{from_ms, json_text};

#[derive(sqlx::FromRow)]
pub struct SpanRow {
    trace_id: String,
    span_id: String,
    parent_span_id: Option<String>,
    name: String,
    kind: i64,
    start_ns: i64,
    end_ns: i64,
    attributes: String,
    events: String,
    status_code: i64,
    status_message: Option<String>,
    service_name: Option<String>,
    scope_name: Option<String>,
    received_at: i64,
}

impl From<SpanRow> for StoredSpan {
    fn from(r: SpanRow) -> StoredSpan {
        StoredSpan {
            trace_id: r.trace_id,
            span_id: r.span_id,
            parent_span_id: r.parent_span_id,
            name: r.name,
            kind: i32::try_from(r.kind).unwrap_or_default(),
            start_ns: r.start_ns,
            end_ns: r.end_ns,
            attributes: serde_json::from_str::<Map<String, Value>>(&r.attributes).unwrap_or_default(),
            events: serde_json::from_str::<Vec<StoredSpanEvent>>(&r.events).unwrap_or_default(),
            status_code: i32::try_from(r.status_code).unwrap_or_default(),
            status_message: r.status_message,
            service_name: r.service_name,
            scope_name: r.scope_name,
            received_at: from_ms(r.received_at),
        }
    }
}

/// The JSON text of a span's attributes and of its events.
pub fn span_payloads(s: &StoredSpan) -> (String, String) {
    (json_text(&s.attributes), json_text(&s.events))
}
