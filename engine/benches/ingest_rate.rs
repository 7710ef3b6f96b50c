//! OTLP ingest throughput, printed beside its targets (never asserted):
//! - batched: 4 concurrent clients send 512-span requests (8 whole traces of
//!   64 spans each: an agent span, and model and tool spans in turn, as the
//!   GenAI conventions describe them) through `Engine::ingest_otlp`; spans
//!   per second until every request has answered, so every span is stored
//!   and its run readable (target ≥ 20,000 spans/s on SQLite);
//! - one span per request, spans in the order they end, from one client
//!   (each request waits for the one before) and from 4 (target ≥ 3,000
//!   spans/s on SQLite);
//!
//! on SQLite, then on PostgreSQL beside it (at `RUNLENS_TEST_POSTGRES`,
//! default postgres://postgres@127.0.0.1:5432/test, a schema of its own,
//! dropped after; skipped when unreachable).
//!
//! `cargo bench -p runlens-engine --bench ingest_rate`.

use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use runlens_engine::{Engine, EngineConfig};
use serde_json::json;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Spans in one trace: the agent span, then 63 model and tool spans.
const TRACE_SPANS: usize = 64;
/// Spans in one batched request (8 traces).
const BATCH: usize = 512;
const CLIENTS: usize = 4;
/// Batched requests each client sends.
const BATCHES_PER_CLIENT: usize = 25;
/// Traces sent one span per request.
const SINGLE_TRACES: usize = 40;
const MS: u64 = 1_000_000;
const T0: u64 = 1_760_000_000_000_000_000;

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), key_strindex: 0 }
}

fn s(v: &str) -> any_value::Value {
    any_value::Value::StringValue(v.into())
}

/// Span `i` of trace number `trace`: span 0 is the agent span (the root);
/// after it model spans (odd `i`) each followed by the tool span it asked for.
fn span(trace: u64, i: usize) -> Span {
    let mut trace_id = [0x7au8; 16];
    trace_id[8..].copy_from_slice(&trace.to_be_bytes());
    let id = |n: usize| ((trace << 16) | (n as u64 + 1)).to_be_bytes().to_vec();
    let t = T0 + 10 * MS * i as u64;
    let (name, start, end, parent, attributes) = if i == 0 {
        let attrs = vec![kv("gen_ai.operation.name", s("invoke_agent")), kv("gen_ai.agent.name", s("bench agent"))];
        ("invoke_agent bench", T0, T0 + 10 * MS * TRACE_SPANS as u64, Vec::new(), attrs)
    } else if i % 2 == 1 {
        let attrs = vec![
            kv("gen_ai.operation.name", s("chat")),
            kv("gen_ai.request.model", s("gpt-bench")),
            kv("gen_ai.usage.input_tokens", any_value::Value::IntValue(100 + i as i64)),
            kv("gen_ai.usage.output_tokens", any_value::Value::IntValue(10)),
            kv(
                "gen_ai.input.messages",
                s(&json!([{"role": "user", "parts": [{"type": "text", "content": "add one"}]}]).to_string()),
            ),
            kv(
                "gen_ai.output.messages",
                s(&json!([{"role": "assistant", "parts": [{"type": "tool_call", "id": format!("call_{i}"),
                    "name": "calculator", "arguments": {"expression": format!("{i} + 1")}}]}])
                .to_string()),
            ),
        ];
        ("chat gpt-bench", t, t + 5 * MS, id(0), attrs)
    } else {
        let attrs = vec![
            kv("gen_ai.operation.name", s("execute_tool")),
            kv("gen_ai.tool.name", s("calculator")),
            kv("gen_ai.tool.call.id", s(&format!("call_{}", i - 1))),
            kv("gen_ai.tool.call.result", s(&i.to_string())),
        ];
        ("execute_tool calculator", t - 4 * MS, t + 3 * MS, id(0), attrs)
    };
    Span {
        trace_id: trace_id.to_vec(),
        span_id: id(i),
        parent_span_id: parent,
        name: name.into(),
        kind: 1,
        start_time_unix_nano: start,
        end_time_unix_nano: end,
        attributes,
        status: Some(Status { code: 1, message: String::new() }),
        ..Span::default()
    }
}

fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: vec![kv("service.name", s("bench"))], ..Resource::default() }),
            scope_spans: vec![ScopeSpans { spans, ..ScopeSpans::default() }],
            ..ResourceSpans::default()
        }],
    }
}

/// Batched requests of client `client`: whole traces, 8 a request.
fn batches(client: usize, base: u64) -> Vec<ExportTraceServiceRequest> {
    let traces_per_batch = (BATCH / TRACE_SPANS) as u64;
    (0..BATCHES_PER_CLIENT as u64)
        .map(|b| {
            let first = base + (client as u64 * BATCHES_PER_CLIENT as u64 + b) * traces_per_batch;
            let spans = (first..first + traces_per_batch).flat_map(|t| (0..TRACE_SPANS).map(move |i| span(t, i)));
            request(spans.collect())
        })
        .collect()
}

fn per_s(spans: usize, d: Duration) -> f64 {
    spans as f64 / d.as_secs_f64()
}

async fn measure(engine: &Engine, store: &str) {
    // Batched, from 4 clients at once (requests made before the clock starts).
    let work: Vec<Vec<ExportTraceServiceRequest>> = (0..CLIENTS).map(|c| batches(c, 0)).collect();
    let start = Instant::now();
    let clients: Vec<_> = work
        .into_iter()
        .map(|requests| {
            let engine = engine.clone();
            tokio::spawn(async move {
                for r in requests {
                    let report = engine.otel().ingest_otlp("default", r).await.unwrap();
                    assert_eq!(report.rejected, 0, "{report:?}");
                }
            })
        })
        .collect();
    for c in clients {
        c.await.unwrap();
    }
    let batched = start.elapsed();
    let spans = CLIENTS * BATCHES_PER_CLIENT * BATCH;
    println!(
        "ingest on {store}, batched: {:>7.0} spans/s ({spans} spans, {CLIENTS} clients × {BATCHES_PER_CLIENT} requests of {BATCH} spans, {} traces, in {:.2} s){}",
        per_s(spans, batched),
        spans / TRACE_SPANS,
        batched.as_secs_f64(),
        if store == "SQLite" { "; target ≥ 20,000 spans/s" } else { "" }
    );

    // One span per request, in the order spans end (children first, the
    // agent span last): from one client, each request waiting for the one
    // before; then from 4 clients at once, each sending its own traces.
    for (clients, base) in [(1, 1u64 << 20), (CLIENTS, 1 << 21)] {
        let mut order: Vec<usize> = (1..TRACE_SPANS).collect();
        order.push(0);
        let work: Vec<Vec<ExportTraceServiceRequest>> = (0..clients as u64)
            .map(|c| {
                let traces = (SINGLE_TRACES / clients) as u64;
                (c * traces..(c + 1) * traces)
                    .flat_map(|t| order.iter().map(move |i| request(vec![span(base + t, *i)])))
                    .collect()
            })
            .collect();
        let n: usize = work.iter().map(Vec::len).sum();
        let start = Instant::now();
        let tasks: Vec<_> = work
            .into_iter()
            .map(|requests| {
                let engine = engine.clone();
                tokio::spawn(async move {
                    for r in requests {
                        let report = engine.otel().ingest_otlp("default", r).await.unwrap();
                        assert_eq!(report.rejected, 0);
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let took = start.elapsed();
        println!(
            "ingest on {store}, one span a request, {clients} client{}: {:>7.0} spans/s ({n} requests, {SINGLE_TRACES} traces of {TRACE_SPANS} spans){}",
            if clients == 1 { "" } else { "s" },
            per_s(n, took),
            if store == "SQLite" { "; target ≥ 3,000 spans/s" } else { "" }
        );
        let last = engine.runs().trace(&format!("default~trace~{}", hex(base + SINGLE_TRACES as u64 - 1))).await;
        assert_eq!(last.unwrap().steps.len(), TRACE_SPANS / 2, "the last trace is a whole run");
    }
}

fn hex(trace: u64) -> String {
    let mut trace_id = [0x7au8; 16];
    trace_id[8..].copy_from_slice(&trace.to_be_bytes());
    trace_id.iter().map(|b| format!("{b:02x}")).collect()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("ingest.db").display());
        let engine = Engine::open(&url, EngineConfig::default()).await.unwrap();
        measure(&engine, "SQLite").await;

        let base =
            std::env::var("RUNLENS_TEST_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let schema = format!("bench_ingest_{}", std::process::id());
        let pg = format!("{base}?options[search_path]={schema}");
        match Engine::open(&pg, EngineConfig::default()).await {
            Ok(engine) => {
                measure(&engine, "PostgreSQL").await;
                let pool = sqlx::PgPool::connect(&base).await.unwrap();
                sqlx::query(&format!("DROP SCHEMA {schema} CASCADE")).execute(&pool).await.unwrap();
            }
            Err(e) => println!("ingest on PostgreSQL: skipped ({e})"),
        }
    });
}
