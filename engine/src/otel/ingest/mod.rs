//! OTLP traces in (`POST /v1/traces`), assembled into read-only runs.
//!
//! Any agent instrumented with OpenTelemetry can send its spans here; those
//! carrying the GenAI semantic conventions or OpenInference attributes
//! become runs: the top agent span the run, each model span a step (model,
//! usage, timings, answer), each tool span a tool call on the step of the
//! model turn that asked for it, and every other span a generic node of the
//! trace page.
//!
//! - [`decode`]: the request body (protobuf or JSON, gzip or not), read
//!   with hard bounds, then [`flatten`]ed into the spans the store keeps.
//! - [`assemble`]: a trace's run derived from all its stored spans. A
//!   trace may arrive in many batches and in any order: each batch is
//!   folded into the trace's [`Assembly`] (in the store's transaction, see
//!   `store::SpanStore::ingest_trace`), which derives again only the steps
//!   from the first one the batch changes, so the result is the same as if
//!   all spans had come at once and a span costs the same whatever its
//!   place in a long trace; `captured` reads what a span recorded
//!   (attributes, captured messages) for it. [`Assemblies`] keeps the
//!   assemblies of the traces sent to lately, within a memory bound.
//!
//! Such a run carries its [`RunSource`](crate::model::RunSource) and is
//! never driven: it cannot be resumed, approved, forked or followed up.

pub mod assemble;
mod cache;
mod captured;
mod decode;
mod finish;
mod fold;
mod placeholder;
mod unit;

pub use assemble::{derive, other_spans, run_id_for};
pub use cache::Assemblies;
pub use decode::{decode, encode_response, flatten, DecodeError, Flattened, Format};
pub use fold::Assembly;
pub use placeholder::placeholder;

/// The bounds of what `POST /v1/traces` accepts.
pub mod limits {
    /// A request body as sent (compressed or not): bytes.
    pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
    /// A gzip body once inflated: bytes (a bomb is refused at this size).
    pub const MAX_INFLATED_BYTES: usize = 16 * 1024 * 1024;
    /// Spans in one request.
    pub const MAX_REQUEST_SPANS: usize = 5_000;
    /// Spans kept of one trace (a batch folded in costs the steps from the
    /// first one it changes: at most this many).
    pub const MAX_TRACE_SPANS: u64 = 20_000;
    /// What the assemblies kept between requests may hold together, about:
    /// bytes (the least recently sent to are dropped past it, and read
    /// again from the store when their trace is sent to again).
    pub const MAX_ASSEMBLY_BYTES: usize = 256 * 1024 * 1024;
    /// Traces whose assemblies are kept between requests.
    pub const MAX_ASSEMBLIES: usize = 256;
    /// Attributes kept of a span or event (and items of an array value).
    pub const MAX_ATTRIBUTES: usize = 256;
    /// Events kept of a span.
    pub const MAX_EVENTS: usize = 128;
    /// An attribute's key: bytes.
    pub const MAX_ATTRIBUTE_KEY_CHARS: usize = 256;
    /// A string value (a prompt, an answer, tool arguments): bytes; longer
    /// ones are cut.
    pub const MAX_ATTRIBUTE_VALUE_BYTES: usize = crate::model::limits::MAX_PROMPT_BYTES;
    /// A span's or service's name: bytes; longer ones are cut.
    pub const MAX_NAME_CHARS: usize = 1024;
    /// A span's attributes and its events' together: bytes of JSON; a
    /// larger span is refused.
    pub const MAX_SPAN_JSON_BYTES: usize = 1024 * 1024;
    /// Nesting of array and kvlist values.
    pub const MAX_VALUE_DEPTH: usize = 16;
}

/// The crates of the wire format, for callers that build or read OTLP
/// bodies without depending on them (the server's API tests).
pub mod wire {
    pub use flate2;
    pub use opentelemetry_proto;
    pub use prost;
}
