//! OTLP ingest: `POST /v1/traces` takes OpenTelemetry spans from any agent
//! (OTLP/HTTP: protobuf or JSON, gzip or not) and assembles the traces that
//! carry GenAI or OpenInference attributes into read-only runs of the
//! caller's current project (see `runlens_engine::otel::ingest`).
//!
//! Authenticated like the rest of the API, with the role that creates runs
//! (`operator`). A body that cannot be read is a JSON 4xx and stores
//! nothing: 415 for a content type or encoding OTLP/HTTP does not use, 413
//! past the size bounds (a gzip body is inflated with a hard bound), 400
//! for one that does not decode. Spans that cannot be kept (invalid ids, a
//! full trace, a run id taken) are counted in the answer's
//! `partialSuccess`, as OTLP asks; the answer is protobuf or JSON, as the
//! request was.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use runlens_engine::model::Role;
use runlens_engine::openapi::raw;
use runlens_engine::otel::ingest::{self, limits, DecodeError, Format};
use runlens_engine::Engine;
use serde_json::json;
use utoipa::openapi::{RefOr, Schema};
use utoipa::PartialSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::auth::Caller;
use super::super::error::AppError;
use super::super::openapi::responses::*;
use super::super::state::AppState;
use super::ProjectHeader;

/// The path OTLP/HTTP exporters send traces to.
pub const PATH: &str = "/v1/traces";

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(export_traces))
}

/// An OTLP `ExportTraceServiceRequest` as protobuf.
pub struct ProtobufRequest;

impl utoipa::ToSchema for ProtobufRequest {
    fn name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("OtlpProtobufRequest")
    }
}

impl PartialSchema for ProtobufRequest {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({"type": "string", "format": "binary"})))
    }
}

/// An OTLP `ExportTraceServiceRequest` as OTLP/JSON.
pub struct JsonRequest;

impl utoipa::ToSchema for JsonRequest {
    fn name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("OtlpJsonRequest")
    }
}

impl PartialSchema for JsonRequest {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({
            "type": "object",
            "description": "OTLP/JSON: `resourceSpans`, each with its `resource` and `scopeSpans` of `spans` \
                (ids as hex, times as strings of Unix nanoseconds).",
            "properties": {"resourceSpans": {"type": "array", "items": {"type": "object"}}},
        })))
    }
}

/// OTLP's `ExportTraceServiceResponse` (as OTLP/JSON; protobuf when the request was).
pub struct ExportResponse;

impl utoipa::ToSchema for ExportResponse {
    fn name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("OtlpExportResponse")
    }
}

impl PartialSchema for ExportResponse {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({
            "type": "object",
            "properties": {"partialSuccess": {
                "type": "object",
                "description": "Present when some spans were refused: how many, and why.",
                "properties": {
                    "rejectedSpans": {"type": ["string", "integer"]},
                    "errorMessage": {"type": "string"},
                },
            }},
        })))
    }
}

/// Send OpenTelemetry spans (OTLP/HTTP).
///
/// Spans of agents instrumented with OpenTelemetry's GenAI semantic conventions, with OpenInference or by the
/// Vercel AI SDK (`ai.*`) become read-only runs of the current project (`source.kind` `otlp`): the agent span the
/// run, model spans its steps (model, usage, answer), tool spans its tool calls, every other span a generic node
/// of the trace page. A trace may arrive in many requests and in any order (up to 20,000 spans a trace): each
/// request's spans are folded into the run assembled so far, which is always the run all the spans received give,
/// and a span sent again replaces itself. Such runs cannot be resumed, approved, forked or followed up (409).
///
/// The body is an OTLP `ExportTraceServiceRequest`, as protobuf (`application/x-protobuf`) or OTLP/JSON
/// (`application/json`), optionally `Content-Encoding: gzip`: at most 4 MiB as sent, 16 MiB inflated, 5,000 spans.
/// Spans that cannot be kept are counted in `partialSuccess`.
#[utoipa::path(
    post,
    path = "/v1/traces",
    tag = "otlp",
    params(ProjectHeader),
    request_body(content(
        (inline(ProtobufRequest) = "application/x-protobuf"),
        (inline(JsonRequest) = "application/json"),
    )),
    responses(
        (status = 200, description = "Received; `partialSuccess` counts the spans refused",
            content((inline(ExportResponse) = "application/json"), (inline(ProtobufRequest) = "application/x-protobuf"))),
        (status = 400, response = BadRequest),
        (status = 403, response = Forbidden),
        (status = 413, response = OtlpTooLarge),
        (status = 415, response = OtlpUnsupported),
        (status = 500, response = Internal),
    )
)]
async fn export_traces(
    State(engine): State<Engine>,
    caller: Caller,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, AppError> {
    let project = caller.require_current(Role::Operator)?.to_owned();
    let text = |name: header::HeaderName| headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let content_type = text(header::CONTENT_TYPE).unwrap_or("");
    let format = Format::of(content_type).map_err(decode_error)?;
    let bytes: Bytes = axum::body::to_bytes(body, limits::MAX_BODY_BYTES).await.map_err(|_| {
        AppError::PayloadTooLarge(format!(
            "the request body is larger than the limit of {} bytes",
            limits::MAX_BODY_BYTES
        ))
    })?;
    let encoding = text(header::CONTENT_ENCODING);
    let request = ingest::decode(content_type, encoding, &bytes, limits::MAX_INFLATED_BYTES).map_err(decode_error)?;
    drop(bytes);
    let report = engine.otel().ingest_otlp(&project, request).await?;
    let body = ingest::encode_response(format, report.rejected, report.message);
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, format.content_type())], body).into_response())
}

fn decode_error(e: DecodeError) -> AppError {
    match e {
        DecodeError::Unsupported(m) => AppError::UnsupportedMediaType(m),
        DecodeError::TooLarge(m) => AppError::PayloadTooLarge(m),
        DecodeError::Invalid(m) => AppError::BadRequest(m),
    }
}
