//! OTLP/HTTP request bodies in: protobuf or JSON, plain or gzip, read with
//! hard bounds, and flattened into the spans the store keeps.

use std::io::Read;

use chrono::{DateTime, Utc};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::{Map, Value};

use super::limits::{
    MAX_ATTRIBUTES, MAX_ATTRIBUTE_KEY_CHARS, MAX_ATTRIBUTE_VALUE_BYTES, MAX_EVENTS, MAX_NAME_CHARS, MAX_REQUEST_SPANS,
    MAX_SPAN_JSON_BYTES, MAX_VALUE_DEPTH,
};
use crate::otel::attrs;
use crate::store::{StoredSpan, StoredSpanEvent};

/// Why a request body was refused, and so its HTTP status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// 415: a content type or encoding OTLP/HTTP does not use.
    Unsupported(String),
    /// 413: the body inflates past the bound, or holds too many spans.
    TooLarge(String),
    /// 400: the body is not an OTLP trace export request.
    Invalid(String),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unsupported(m) | Self::TooLarge(m) | Self::Invalid(m) => f.write_str(m),
        }
    }
}

/// The wire format of a request (and of its answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Protobuf,
    Json,
}

impl Format {
    /// The format a `Content-Type` names: `application/x-protobuf` (or
    /// `application/protobuf`) and `application/json`, parameters ignored.
    pub fn of(content_type: &str) -> Result<Self, DecodeError> {
        let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        match essence.as_str() {
            "application/x-protobuf" | "application/protobuf" => Ok(Self::Protobuf),
            "application/json" => Ok(Self::Json),
            _ => Err(DecodeError::Unsupported(format!(
                "OTLP/HTTP takes Content-Type application/x-protobuf or application/json, not `{}`",
                content_type.chars().take(100).collect::<String>()
            ))),
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Self::Protobuf => "application/x-protobuf",
            Self::Json => "application/json",
        }
    }
}

/// Decodes an OTLP/HTTP trace export body: `content_type` is
/// `application/x-protobuf` or `application/json`, `content_encoding`
/// `gzip` or none (`identity`); a gzip body is inflated to at most
/// `max_inflated` bytes, past which it is refused whole.
pub fn decode(
    content_type: &str,
    content_encoding: Option<&str>,
    body: &[u8],
    max_inflated: usize,
) -> Result<ExportTraceServiceRequest, DecodeError> {
    let format = Format::of(content_type)?;
    let inflated;
    let bytes = match content_encoding.map(|e| e.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") | Some("identity") => body,
        Some("gzip") | Some("x-gzip") => {
            inflated = inflate(body, max_inflated)?;
            &inflated[..]
        }
        Some(other) => {
            return Err(DecodeError::Unsupported(format!(
                "Content-Encoding `{}` is not supported (gzip or none)",
                other.chars().take(100).collect::<String>()
            )))
        }
    };
    if bytes.len() > max_inflated {
        return Err(DecodeError::TooLarge(format!("the body is over {max_inflated} bytes")));
    }
    let request = match format {
        Format::Protobuf => ExportTraceServiceRequest::decode(bytes)
            .map_err(|e| DecodeError::Invalid(format!("the body is not an OTLP ExportTraceServiceRequest: {e}")))?,
        Format::Json => serde_json::from_slice(bytes)
            .map_err(|e| DecodeError::Invalid(format!("the body is not OTLP/JSON of a trace export: {e}")))?,
    };
    let spans: usize = request.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
    if spans > MAX_REQUEST_SPANS {
        return Err(DecodeError::TooLarge(format!(
            "the request holds {spans} spans; the limit is {MAX_REQUEST_SPANS} a request"
        )));
    }
    Ok(request)
}

/// Inflates a gzip body, reading at most one byte past `max`: a bomb costs
/// no more memory than the bound.
fn inflate(body: &[u8], max: usize) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::new();
    let mut reader = flate2::read::MultiGzDecoder::new(body).take(max as u64 + 1);
    reader.read_to_end(&mut out).map_err(|e| DecodeError::Invalid(format!("the gzip body does not inflate: {e}")))?;
    if out.len() > max {
        return Err(DecodeError::TooLarge(format!("the gzip body inflates to over {max} bytes")));
    }
    Ok(out)
}

/// The spans of a request as the store keeps them, and the ones refused
/// (with the first reasons).
#[derive(Debug, Default)]
pub struct Flattened {
    pub spans: Vec<StoredSpan>,
    pub rejected: u64,
    pub problems: Vec<String>,
}

impl Flattened {
    fn reject(&mut self, why: String) {
        self.rejected += 1;
        if self.problems.len() < 5 {
            self.problems.push(why);
        }
    }
}

/// Flattens a request into stored spans: ids as hex, attribute values as
/// JSON (strings cut at [`MAX_ATTRIBUTE_VALUE_BYTES`], NUL characters
/// dropped), the resource's `service.name` on each. A span with invalid ids
/// or times, or whose attributes are too large, is refused.
pub fn flatten(request: ExportTraceServiceRequest, received_at: DateTime<Utc>) -> Flattened {
    let mut out = Flattened::default();
    for resource in request.resource_spans {
        let service = resource.resource.as_ref().and_then(|r| {
            r.attributes.iter().find(|kv| kv.key == attrs::SERVICE_NAME).and_then(|kv| match &kv.value {
                Some(AnyValue { value: Some(any_value::Value::StringValue(s)) }) => Some(clean(s, MAX_NAME_CHARS)),
                _ => None,
            })
        });
        for scope in resource.scope_spans {
            let scope_name = scope.scope.as_ref().map(|s| clean(&s.name, MAX_NAME_CHARS)).filter(|s| !s.is_empty());
            for span in scope.spans {
                match stored_span(span, service.clone(), scope_name.clone(), received_at) {
                    Ok(s) => out.spans.push(s),
                    Err(why) => out.reject(why),
                }
            }
        }
    }
    out
}

fn stored_span(
    span: Span,
    service_name: Option<String>,
    scope_name: Option<String>,
    received_at: DateTime<Utc>,
) -> Result<StoredSpan, String> {
    let trace_id = id_hex(&span.trace_id, 16).ok_or("a span has no valid trace id (16 bytes, not all zero)")?;
    let span_id = id_hex(&span.span_id, 8).ok_or("a span has no valid span id (8 bytes, not all zero)")?;
    let parent_span_id = match span.parent_span_id.len() {
        0 => None,
        _ if span.parent_span_id.iter().all(|b| *b == 0) => None,
        _ => Some(id_hex(&span.parent_span_id, 8).ok_or_else(|| format!("span {span_id} has an invalid parent id"))?),
    };
    let start_ns = i64::try_from(span.start_time_unix_nano)
        .ok()
        .filter(|t| *t > 0)
        .ok_or_else(|| format!("span {span_id} has no valid start time"))?;
    let end_ns = i64::try_from(span.end_time_unix_nano).unwrap_or(start_ns).max(start_ns);
    let attributes = attributes_of(&span.attributes);
    let mut events = Vec::new();
    for e in span.events.iter().take(MAX_EVENTS) {
        events.push(StoredSpanEvent {
            name: clean(&e.name, MAX_NAME_CHARS),
            time_ns: i64::try_from(e.time_unix_nano).unwrap_or(start_ns),
            attributes: attributes_of(&e.attributes),
        });
    }
    let size = crate::model::limits::json_size(&Value::Object(attributes.clone()))
        + events.iter().map(|e| crate::model::limits::json_size(&Value::Object(e.attributes.clone()))).sum::<usize>();
    if size > MAX_SPAN_JSON_BYTES {
        return Err(format!(
            "span {span_id}'s attributes and events are {size} bytes of JSON; the limit is {MAX_SPAN_JSON_BYTES}"
        ));
    }
    let status = span.status.unwrap_or_default();
    Ok(StoredSpan {
        trace_id,
        span_id,
        parent_span_id,
        name: clean(&span.name, MAX_NAME_CHARS),
        kind: span.kind.clamp(0, 5),
        start_ns,
        end_ns,
        attributes,
        events,
        status_code: status.code.clamp(0, 2),
        status_message: Some(clean(&status.message, MAX_ATTRIBUTE_VALUE_BYTES)).filter(|m| !m.is_empty()),
        service_name,
        scope_name,
        received_at,
    })
}

/// At most [`MAX_ATTRIBUTES`] attributes, as JSON (the first of a repeated key wins).
fn attributes_of(kvs: &[KeyValue]) -> Map<String, Value> {
    let mut map = Map::new();
    for kv in kvs.iter().take(MAX_ATTRIBUTES) {
        let key = clean(&kv.key, MAX_ATTRIBUTE_KEY_CHARS);
        if key.is_empty() || map.contains_key(&key) {
            continue;
        }
        map.insert(key, kv.value.as_ref().map_or(Value::Null, |v| json_value(v, 0)));
    }
    map
}

/// An OTLP value as JSON: bytes as hex, a kvlist as an object, nesting
/// past [`MAX_VALUE_DEPTH`] as null.
fn json_value(v: &AnyValue, depth: usize) -> Value {
    use any_value::Value as V;
    if depth > MAX_VALUE_DEPTH {
        return Value::Null;
    }
    match &v.value {
        None | Some(V::StringValueStrindex(_)) => Value::Null,
        Some(V::StringValue(s)) => Value::String(clean(s, MAX_ATTRIBUTE_VALUE_BYTES)),
        Some(V::BoolValue(b)) => Value::Bool(*b),
        Some(V::IntValue(i)) => Value::from(*i),
        Some(V::DoubleValue(d)) => serde_json::Number::from_f64(*d).map_or(Value::Null, Value::Number),
        Some(V::BytesValue(b)) => Value::String(hex(&b[..b.len().min(MAX_ATTRIBUTE_VALUE_BYTES / 2)])),
        Some(V::ArrayValue(a)) => {
            Value::Array(a.values.iter().take(MAX_ATTRIBUTES).map(|v| json_value(v, depth + 1)).collect())
        }
        Some(V::KvlistValue(l)) => {
            let mut map = Map::new();
            for kv in l.values.iter().take(MAX_ATTRIBUTES) {
                let value = kv.value.as_ref().map_or(Value::Null, |v| json_value(v, depth + 1));
                map.insert(clean(&kv.key, MAX_ATTRIBUTE_KEY_CHARS), value);
            }
            Value::Object(map)
        }
    }
}

fn id_hex(bytes: &[u8], len: usize) -> Option<String> {
    (bytes.len() == len && bytes.iter().any(|b| *b != 0)).then(|| hex(bytes))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `text` without NUL characters (PostgreSQL refuses them), cut to at most
/// `max` bytes at a character boundary.
pub(crate) fn clean(text: &str, max: usize) -> String {
    let mut out: String = if text.contains('\0') { text.replace('\0', "") } else { text.to_owned() };
    if out.len() > max {
        let mut cut = max;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
    }
    out
}

/// OTLP's `ExportTraceServiceResponse` in `format`: empty when every span
/// was kept, else `partialSuccess` with how many were refused and why.
pub fn encode_response(format: Format, rejected: u64, message: Option<String>) -> Vec<u8> {
    use opentelemetry_proto::tonic::collector::trace::v1::{ExportTracePartialSuccess, ExportTraceServiceResponse};
    let answer = ExportTraceServiceResponse {
        partial_success: (rejected > 0).then(|| ExportTracePartialSuccess {
            rejected_spans: i64::try_from(rejected).unwrap_or(i64::MAX),
            error_message: message.unwrap_or_default(),
        }),
    };
    match format {
        Format::Protobuf => answer.encode_to_vec(),
        // Written by hand: proto3's JSON mapping leaves an unset message out
        // (the generated mapping writes `null`) and writes an int64 as a string.
        Format::Json => {
            let body = match answer.partial_success {
                None => serde_json::json!({}),
                Some(p) => serde_json::json!({"partialSuccess": {
                    "rejectedSpans": p.rejected_spans.to_string(),
                    "errorMessage": p.error_message,
                }}),
            };
            body.to_string().into_bytes()
        }
    }
}
