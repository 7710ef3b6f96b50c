//! OpenTelemetry in and out: runs exported as OTLP traces with the GenAI
//! semantic conventions ([`export`]), and OTLP traces of agents runlens does
//! not run assembled into read-only runs ([`ingest`]).
//!
//! Both sides speak OTLP/HTTP through the generated messages of
//! `opentelemetry-proto` (protobuf with `prost`, JSON with its serde mapping);
//! [`attrs`] names the attributes both sides read and write.

pub mod attrs;
mod config;
pub mod export;
pub mod ingest;

pub use config::{OtelConfig, OtelTarget};
