//! Issue 34 figures for OTLP ingest of one long trace, printed beside their
//! targets (never asserted):
//! - one 10,000-span trace (alternating GenAI model and tool spans, then
//!   the agent span that is its root) sent one span per request through
//!   `Engine::ingest_otlp`, in the order spans end (as OpenTelemetry SDKs
//!   export them): the median time of one request around span 100, 1,000
//!   and 9,000 (target: span 9,000 within 1.5× of span 100);
//! - the median latency of ordinary runs (3 scripted turns, created and
//!   waited for one after another) while that trace is sent, against the
//!   same runs on an idle engine (target: within 1.5×).
//!
//! `cargo bench -p runlens-engine --bench otlp_trace`, on a SQLite file.
//! `RUNLENS_BENCH_BUDGET_S` (default 300) stops the trace early when it
//! takes longer; the figures then say how far it got.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};
use runlens_engine::events::EventKind;
use runlens_engine::model::{CreateRun, RunStatus};
use runlens_engine::{Engine, EngineConfig};
use serde_json::json;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SPANS: usize = 10_000;
const MS: u64 = 1_000_000;
const T0: u64 = 1_760_000_000_000_000_000;

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), key_strindex: 0 }
}

fn s(v: &str) -> any_value::Value {
    any_value::Value::StringValue(v.into())
}

/// Span `i` of the trace (0-based): the last is the agent span, the root;
/// before it model spans (even `i`) and the tool span each asked for (odd).
fn span(i: usize) -> Span {
    let id = (i as u64 + 1).to_be_bytes().to_vec();
    let root = (SPANS as u64).to_be_bytes().to_vec();
    let t = T0 + 10 * MS * i as u64;
    let (name, start, end, parent, attributes) = if i + 1 == SPANS {
        let attrs = vec![kv("gen_ai.operation.name", s("invoke_agent")), kv("gen_ai.agent.name", s("bench agent"))];
        ("agent", T0 - MS, t + MS, Vec::new(), attrs)
    } else if i.is_multiple_of(2) {
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
        ("chat gpt-bench", t, t + 5 * MS, root.clone(), attrs)
    } else {
        let attrs = vec![
            kv("gen_ai.operation.name", s("execute_tool")),
            kv("gen_ai.tool.name", s("calculator")),
            kv("gen_ai.tool.call.id", s(&format!("call_{}", i - 1))),
            kv("gen_ai.tool.call.result", s(&i.to_string())),
        ];
        ("execute_tool calculator", t - 4 * MS, t + 3 * MS, root.clone(), attrs)
    };
    Span {
        trace_id: vec![0x5a; 16],
        span_id: id,
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

fn request(span: Span) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: vec![kv("service.name", s("bench"))], ..Resource::default() }),
            scope_spans: vec![ScopeSpans { spans: vec![span], ..ScopeSpans::default() }],
            ..ResourceSpans::default()
        }],
    }
}

fn ordinary() -> CreateRun {
    let script = json!([
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1 + 1"}}]},
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "2 + 1"}}]},
        {"text": "done"}
    ]);
    CreateRun {
        initial_prompt: "bench".into(),
        tools: Some(vec!["calculator".into()]),
        max_turns: Some(4),
        model_settings: Some(json!({ "script": script })),
        ..CreateRun::default()
    }
}

/// Creates an ordinary run and waits for it to finish: its latency.
async fn ordinary_run(engine: &Engine) -> Duration {
    let mut events = engine.subscribe();
    let start = Instant::now();
    let (run, _) = engine.runs().create_run(ordinary()).await.unwrap();
    loop {
        let e = tokio::time::timeout(Duration::from_secs(120), events.recv()).await.unwrap().unwrap();
        if e.run_id == run.id && matches!(e.kind, EventKind::RunFinished { status: RunStatus::Done, .. }) {
            return start.elapsed();
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Median of the requests sending spans `at - 10 ..= at + 10` (1-based).
fn around(times: &[Duration], at: usize) -> Option<Duration> {
    (times.len() > at + 10).then(|| median(times[at - 10..=at + 10].to_vec()))
}

fn main() {
    let budget =
        Duration::from_secs(std::env::var("RUNLENS_BENCH_BUDGET_S").ok().and_then(|v| v.parse().ok()).unwrap_or(300));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("otlp.db").display());
        let engine = Engine::open(&url, EngineConfig::default()).await.unwrap();
        for _ in 0..5 {
            ordinary_run(&engine).await; // warm-up
        }
        let mut idle = Vec::new();
        for _ in 0..40 {
            idle.push(ordinary_run(&engine).await);
        }

        let done = Arc::new(AtomicBool::new(false));
        let busy = {
            let (engine, done) = (engine.clone(), done.clone());
            tokio::spawn(async move {
                let mut times = Vec::new();
                while !done.load(Ordering::Relaxed) {
                    times.push(ordinary_run(&engine).await);
                }
                times
            })
        };
        let mut order: Vec<usize> = (0..SPANS).collect();
        // Spans are exported as they end: the agent (root) span last.
        order.sort_by_key(|i| span(*i).end_time_unix_nano);
        let mut times = Vec::new();
        let start = Instant::now();
        let mut stopped = None;
        for i in order {
            let t = Instant::now();
            let report = engine.otel().ingest_otlp("default", request(span(i))).await.unwrap();
            times.push(t.elapsed());
            if report.rejected > 0 {
                stopped = Some(format!("refused at span {}: {:?}", times.len(), report.message));
                break;
            }
            if start.elapsed() > budget {
                stopped = Some(format!("stopped after {:.0} s at span {}", budget.as_secs_f64(), times.len()));
                break;
            }
        }
        let total = start.elapsed();
        done.store(true, Ordering::Relaxed);
        let busy = busy.await.unwrap();

        println!("OTLP ingest of one {SPANS}-span trace, one span per request (SQLite):");
        if let Some(why) = &stopped {
            println!("  {why}");
        }
        println!("  {} requests in {:.1} s", times.len(), total.as_secs_f64());
        let at = |n| around(&times, n).map_or("not reached".to_owned(), |d| format!("{:.2} ms", ms(d)));
        for n in [100, 1_000, 3_000, 9_000] {
            println!("  one request at span {n:>5}: {} median of 21", at(n));
        }
        if let (Some(a), Some(b)) = (around(&times, 100), around(&times, 9_000)) {
            println!("  span 9,000 / span 100: {:.2}× (target ≤ 1.5×)", b.as_secs_f64() / a.as_secs_f64());
        }
        let (idle_m, busy_m) = (median(idle), median(busy.clone()));
        println!(
            "ordinary 3-turn runs: {:.2} ms median idle, {:.2} ms median during the trace ({} runs): {:.2}× (target ≤ 1.5×)",
            ms(idle_m),
            ms(busy_m),
            busy.len(),
            busy_m.as_secs_f64() / idle_m.as_secs_f64()
        );
    });
}
