//! OpenTelemetry figures, printed (issue 16 sets no target; these say what
//! the export and the ingest cost):
//! - export: building and encoding the OTLP request of a 2,000-step run
//!   (with and without message contents), and its size;
//! - ingest: the recorded OpenAI Agents fixture (17 one-span requests, two
//!   traces, children first) replayed as 100 distinct copies through
//!   `Engine::ingest_otlp` on SQLite and PostgreSQL: spans per second and
//!   the cost of one request (each re-derives its trace's run from every
//!   span stored so far, in one transaction).
//!
//! `cargo bench -p runlens-engine --bench otel`; PostgreSQL at
//! `RUNLENS_TEST_POSTGRES` (default postgres://postgres@127.0.0.1:5432/test,
//! a schema of its own, dropped after), skipped when unreachable.

use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use runlens_engine::otel::export::requests;
use runlens_engine::otel::OtelConfig;
use runlens_engine::{Engine, EngineConfig};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const COPIES: u32 = 100;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn fixture() -> Vec<ExportTraceServiceRequest> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/otlp/openai-agents");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pb"))
        .collect();
    files.sort();
    files.iter().map(|f| ExportTraceServiceRequest::decode(std::fs::read(f).unwrap().as_slice()).unwrap()).collect()
}

/// `request` with every trace id made copy `copy`'s own.
fn copy_of(request: &ExportTraceServiceRequest, copy: u32) -> ExportTraceServiceRequest {
    let mut request = request.clone();
    for rs in &mut request.resource_spans {
        for ss in &mut rs.scope_spans {
            for span in &mut ss.spans {
                span.trace_id[12..16].copy_from_slice(&copy.to_be_bytes());
            }
        }
    }
    request
}

async fn export(engine: &Engine) {
    let run = engine.runs().generate_trace(2_000).await.unwrap();
    let trace = engine.runs().trace(&run.id).await.unwrap();
    for capture_content in [false, true] {
        let config = OtelConfig { endpoint: "http://127.0.0.1:4318".into(), capture_content, ..Default::default() };
        let target = config.resolve(|_| None).unwrap();
        let mut times = Vec::new();
        let (mut bytes, mut count) = (0, 0);
        for _ in 0..11 {
            let start = Instant::now();
            let built = requests(&target, std::slice::from_ref(&trace));
            count = built.len();
            bytes = built.iter().map(|r| r.encode_to_vec().len()).sum::<usize>();
            times.push(start.elapsed());
        }
        times.sort();
        println!(
            "export, 2,000-step run: {:>7.2} ms median to build and encode {} spans, {:.0} KiB in {count} requests (capture_content = {capture_content})",
            ms(times[5]),
            1 + 2_000 + trace.steps.iter().map(|s| s.tool_calls.len()).sum::<usize>(),
            bytes as f64 / 1024.0
        );
    }
}

async fn ingest(engine: &Engine, store: &str) {
    let batches = fixture();
    let spans: usize =
        batches.iter().flat_map(|r| &r.resource_spans).flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
    let mut per_request = Vec::new();
    let start = Instant::now();
    for copy in 0..COPIES {
        for batch in &batches {
            let request = copy_of(batch, copy);
            let t = Instant::now();
            let report = engine.otel().ingest_otlp("default", request).await.unwrap();
            per_request.push(t.elapsed());
            assert_eq!(report.rejected, 0);
        }
    }
    let total = start.elapsed();
    per_request.sort();
    let n = per_request.len();
    println!(
        "ingest on {store}: {:>7.0} spans/s ({} spans in {n} one-span requests, {COPIES} copies of 2 traces); one request {:.2} ms median, {:.2} ms p99",
        (spans as f64 * f64::from(COPIES)) / total.as_secs_f64(),
        spans * COPIES as usize,
        ms(per_request[n / 2]),
        ms(per_request[n * 99 / 100])
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("otel.db").display());
        let engine = Engine::open(&url, EngineConfig::default()).await.unwrap();
        export(&engine).await;
        ingest(&engine, "SQLite").await;

        let base =
            std::env::var("RUNLENS_TEST_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let schema = format!("bench_otel_{}", std::process::id());
        let pg = format!("{base}?options[search_path]={schema}");
        match Engine::open(&pg, EngineConfig::default()).await {
            Ok(engine) => {
                ingest(&engine, "PostgreSQL").await;
                let pool = sqlx::PgPool::connect(&base).await.unwrap();
                sqlx::query(&format!("DROP SCHEMA {schema} CASCADE")).execute(&pool).await.unwrap();
            }
            Err(e) => println!("ingest on PostgreSQL: skipped ({e})"),
        }
    });
}
