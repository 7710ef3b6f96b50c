//! OTLP export: a real collector endpoint (an axum server on 127.0.0.1 that
//! decodes each request with the generated OTLP messages) receives the runs
//! an engine finishes, as GenAI-convention spans.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use runlens_engine::model::{CreateRun, DecisionRequest, RunStatus};
use runlens_engine::otel::OtelConfig;
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::support::{engine, scripted, wait_for_status, SETTLE};

#[derive(Default)]
struct Shared {
    requests: Mutex<Vec<(HeaderMap, ExportTraceServiceRequest)>>,
    /// Answer 503 to this many requests first.
    failures: AtomicU32,
    /// Answer with this status instead (0: 200).
    status: AtomicU32,
    /// While set, requests wait for `release` before answering.
    hold: Mutex<bool>,
    release: Notify,
    arrived: Notify,
}

struct Collector {
    url: String,
    shared: Arc<Shared>,
}

impl Collector {
    async fn start() -> Collector {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let shared = Arc::new(Shared::default());
        let app = Router::new().route("/v1/traces", post(receive)).with_state(shared.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Collector { url, shared }
    }

    fn config(&self, capture_content: bool) -> OtelConfig {
        OtelConfig {
            endpoint: self.url.clone(),
            headers: [("authorization".to_owned(), "Bearer ${COLLECTOR_TOKEN}".to_owned())].into(),
            service_name: Some("runlens-test".into()),
            capture_content,
            ..Default::default()
        }
    }

    fn spans(&self) -> Vec<Span> {
        let requests = self.shared.requests.lock().unwrap();
        requests
            .iter()
            .flat_map(|(_, r)| &r.resource_spans)
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| s.spans.clone())
            .collect()
    }

    /// Waits (polling, at most 2,000 times) until `n` spans arrived.
    async fn wait_for_spans(&self, n: usize) -> Vec<Span> {
        for _ in 0..2000 {
            let spans = self.spans();
            if spans.len() >= n {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the collector got {} spans, not {n}", self.spans().len());
    }
}

async fn receive(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> (StatusCode, Vec<u8>) {
    let request = ExportTraceServiceRequest::decode(body.as_ref()).expect("the body is an OTLP protobuf request");
    if shared.failures.load(Ordering::SeqCst) > 0 {
        shared.failures.fetch_sub(1, Ordering::SeqCst);
        return (StatusCode::SERVICE_UNAVAILABLE, Vec::new());
    }
    let status = shared.status.load(Ordering::SeqCst);
    if status != 0 {
        return (StatusCode::from_u16(status as u16).unwrap(), Vec::new());
    }
    shared.requests.lock().unwrap().push((headers, request));
    shared.arrived.notify_one();
    if *shared.hold.lock().unwrap() {
        shared.release.notified().await;
    }
    (StatusCode::OK, ExportTraceServiceResponse::default().encode_to_vec())
}

fn env(k: &str) -> Option<String> {
    (k == "COLLECTOR_TOKEN").then(|| "collector-secret-token".to_owned())
}

fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a any_value::Value> {
    span.attributes.iter().find(|kv: &&KeyValue| kv.key == key).and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn text(span: &Span, key: &str) -> String {
    match attr(span, key) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        other => panic!("{}: {key} is {other:?}", span.name),
    }
}

fn int(span: &Span, key: &str) -> i64 {
    match attr(span, key) {
        Some(any_value::Value::IntValue(n)) => *n,
        other => panic!("{}: {key} is {other:?}", span.name),
    }
}

/// Runs `req` to its end and waits until this engine's event writer has
/// handled its `run.finished` (what hands the run to the exporter).
async fn run_to_export(engine: &runlens_engine::Engine, req: CreateRun) -> String {
    let mut events = engine.subscribe();
    let (run, _) = engine.runs().create_run(req).await.unwrap();
    loop {
        let event = events.recv().await.expect("the bus is open");
        if event.run_id == run.id && matches!(event.kind, runlens_engine::events::EventKind::RunFinished { .. }) {
            break;
        }
    }
    // The writer hands a batch's finished runs over right after broadcasting
    // it; a flush is answered after that batch.
    engine.traces().flush_events().await;
    run.id
}

fn calc_then_answer() -> CreateRun {
    let mut req = scripted(json!([
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
        {"text": "It is 42."}
    ]));
    req.approval = Some(runlens_engine::model::ApprovalRequest::tools(["calculator"]));
    req
}

#[tokio::test]
async fn a_finished_run_is_one_trace_of_genai_spans_with_its_approval_wait() {
    let collector = Collector::start().await;
    let (engine, _db) = engine().await;
    let exporter = engine.start_otel_export(collector.config(false).resolve(env).unwrap());

    let (run, _) = engine.runs().create_run(calc_then_answer()).await.unwrap();
    let paused = wait_for_status(&engine, &run.id, RunStatus::Paused).await;
    let call_id = paused.interruptions[0].call_id.clone();
    engine
        .approvals()
        .approve(&run.id, &call_id, DecisionRequest::default(), &crate::support::approver(&engine, "ada").await)
        .await
        .unwrap();
    let done = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);

    let spans = collector.wait_for_spans(4).await;
    assert_eq!(spans.len(), 4, "{:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>());
    let (headers, request) = collector.shared.requests.lock().unwrap()[0].clone();
    assert_eq!(headers["authorization"], "Bearer collector-secret-token");
    assert_eq!(headers["content-type"], "application/x-protobuf");
    let resource = request.resource_spans[0].resource.as_ref().unwrap();
    assert!(resource.attributes.iter().any(|kv| kv.key == "service.name"
        && matches!(kv.value.as_ref().and_then(|v| v.value.as_ref()), Some(any_value::Value::StringValue(s)) if s == "runlens-test")));

    let trace_id = &spans[0].trace_id;
    assert!(spans.iter().all(|s| &s.trace_id == trace_id && s.trace_id.len() == 16 && s.span_id.len() == 8));
    let root = spans.iter().find(|s| s.parent_span_id.is_empty()).expect("a root span");
    assert!(root.name.starts_with("invoke_agent "), "{}", root.name);
    assert_eq!(text(root, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(text(root, "gen_ai.conversation.id"), run.id);
    assert_eq!(text(root, "openinference.span.kind"), "AGENT");
    assert_eq!(text(root, "gen_ai.provider.name"), "runlens");
    assert_eq!(int(root, "gen_ai.usage.input_tokens") as u64, done.usage.input_tokens);
    assert_eq!(int(root, "gen_ai.usage.output_tokens") as u64, done.usage.output_tokens);
    assert_eq!(root.status.as_ref().unwrap().code, 1, "a done run is OK");

    let steps = engine.runs().steps(&run.id).await.unwrap();
    let chats: Vec<&Span> = spans.iter().filter(|s| s.name.starts_with("chat ")).collect();
    assert_eq!(chats.len(), steps.len());
    for (chat, step) in chats.iter().zip(&steps) {
        assert_eq!(chat.name, "chat builtin");
        assert_eq!(chat.parent_span_id, root.span_id);
        assert_eq!(text(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(text(chat, "gen_ai.request.model"), "builtin");
        assert_eq!(text(chat, "openinference.span.kind"), "LLM");
        assert_eq!(int(chat, "gen_ai.usage.input_tokens") as u64, step.usage.input_tokens);
        assert_eq!(int(chat, "gen_ai.usage.output_tokens") as u64, step.usage.output_tokens);
        assert_eq!(int(chat, "llm.token_count.prompt") as u64, step.usage.input_tokens);
        match attr(chat, "gen_ai.response.finish_reasons") {
            Some(any_value::Value::ArrayValue(a)) => assert_eq!(a.values.len(), 1),
            other => panic!("finish reasons: {other:?}"),
        }
        assert!(chat.start_time_unix_nano <= chat.end_time_unix_nano);
    }

    let tool = spans.iter().find(|s| s.name == "execute_tool calculator").expect("the tool span");
    assert_eq!(tool.parent_span_id, root.span_id);
    assert_eq!(text(tool, "gen_ai.tool.name"), "calculator");
    assert_eq!(text(tool, "gen_ai.tool.call.id"), call_id);
    assert_eq!(text(tool, "openinference.span.kind"), "TOOL");
    let events: Vec<&str> = tool.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(events, ["approval.requested", "approval.decided"], "the approval wait is visible");
    assert!(tool.events[0].time_unix_nano <= tool.events[1].time_unix_nano);
    assert!(tool.start_time_unix_nano <= tool.events[0].time_unix_nano);
    assert_eq!(tool.status.as_ref().unwrap().code, 1);

    for span in &spans {
        for key in ["input.value", "output.value", "gen_ai.input.messages", "gen_ai.tool.call.arguments"] {
            assert!(attr(span, key).is_none(), "{}: {key} without capture_content", span.name);
        }
    }
    assert_eq!(exporter.stats().runs_sent, 1);
    assert_eq!(exporter.stats().spans_sent, 4);
}

#[tokio::test]
async fn contents_go_out_only_when_captured() {
    let collector = Collector::start().await;
    let (engine, _db) = engine().await;
    engine.start_otel_export(collector.config(true).resolve(env).unwrap());
    let mut req = calc_then_answer();
    req.approval = None;
    req.initial_prompt = "What is six times seven?".into();
    let (run, _) = engine.runs().create_run(req).await.unwrap();
    engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();

    let spans = collector.wait_for_spans(4).await;
    let tool = spans.iter().find(|s| s.name == "execute_tool calculator").unwrap();
    let args: Value = serde_json::from_str(&text(tool, "gen_ai.tool.call.arguments")).unwrap();
    assert_eq!(args, json!({"expression": "6*7"}));
    assert!(text(tool, "gen_ai.tool.call.result").contains("42"));
    let chats: Vec<&Span> = spans.iter().filter(|s| s.name.starts_with("chat ")).collect();
    let first_input: Value = serde_json::from_str(&text(chats[0], "gen_ai.input.messages")).unwrap();
    assert_eq!(first_input[0]["role"], "user");
    assert_eq!(first_input[0]["parts"][0]["content"], "What is six times seven?");
    let second_output: Value = serde_json::from_str(&text(chats[1], "gen_ai.output.messages")).unwrap();
    assert_eq!(second_output[0]["parts"][0]["content"], "It is 42.");
    let root = spans.iter().find(|s| s.parent_span_id.is_empty()).unwrap();
    assert_eq!(text(root, "input.value"), "What is six times seven?");
}

#[tokio::test]
async fn retryable_answers_are_retried_and_refusals_are_not() {
    let collector = Collector::start().await;
    let (engine, _db) = engine().await;
    collector.shared.failures.store(2, Ordering::SeqCst);
    let exporter = engine.start_otel_export(collector.config(false).resolve(env).unwrap());
    let (run, _) = engine.runs().create_run(calc_then_answer()).await.unwrap();
    let paused = wait_for_status(&engine, &run.id, RunStatus::Paused).await;
    engine
        .approvals()
        .reject(
            &run.id,
            &paused.interruptions[0].call_id,
            DecisionRequest::default(),
            &crate::support::approver(&engine, "ada").await,
        )
        .await
        .unwrap();
    engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    let spans = collector.wait_for_spans(4).await;
    assert_eq!(spans.len(), 4, "sent once, after two 503s");
    let tool = spans.iter().find(|s| s.name == "execute_tool calculator").unwrap();
    assert_eq!(tool.status.as_ref().unwrap().code, 2, "a rejected call is an error span");
    // The collector holds the spans a moment before the exporter reads its answer.
    for _ in 0..2000 {
        if exporter.stats().runs_sent == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!((exporter.stats().retries, exporter.stats().runs_sent), (2, 1));

    collector.shared.status.store(400, Ordering::SeqCst);
    let (second, _) = engine.runs().create_run(scripted(json!([{"text": "hi"}]))).await.unwrap();
    engine.runs().wait_until_settled(&second.id, SETTLE).await.unwrap();
    for _ in 0..2000 {
        if exporter.stats().runs_failed == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!((exporter.stats().runs_failed, exporter.stats().retries), (1, 2), "a 400 is not retried");
}

#[tokio::test]
async fn a_full_queue_drops_runs_and_counts_them_instead_of_waiting() {
    let collector = Collector::start().await;
    let (engine, _db) = engine().await;
    let mut config = collector.config(false);
    config.queue = Some(1);
    config.batch = Some(1);
    *collector.shared.hold.lock().unwrap() = true;
    let exporter = engine.start_otel_export(config.resolve(env).unwrap());
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(run_to_export(&engine, scripted(json!([{"text": format!("run {i}")}]))).await);
        if i == 0 {
            // The worker holds the first run's request open at the collector.
            collector.shared.arrived.notified().await;
        }
    }
    // One waits in the queue; the other two found it full.
    for _ in 0..2000 {
        if exporter.stats().runs_dropped == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(exporter.stats().runs_dropped, 2);
    *collector.shared.hold.lock().unwrap() = false;
    collector.shared.release.notify_one();
    let spans = collector.wait_for_spans(4).await;
    let conversations: std::collections::BTreeSet<String> =
        spans.iter().filter(|s| s.parent_span_id.is_empty()).map(|s| text(s, "gen_ai.conversation.id")).collect();
    assert_eq!(conversations, [ids[0].clone(), ids[1].clone()].into(), "the first two runs, once each");
    assert_eq!(exporter.stats().runs_sent, 2);
}

#[tokio::test]
async fn a_flush_returns_once_every_finished_run_is_sent_or_says_how_many_wait() {
    let collector = Collector::start().await;
    let (engine, _db) = engine().await;
    let exporter = engine.start_otel_export(collector.config(false).resolve(env).unwrap());
    run_to_export(&engine, scripted(json!([{"text": "bye"}]))).await;
    assert_eq!(exporter.flush(Duration::from_secs(60)).await, Ok(()));
    assert_eq!(collector.spans().len(), 2, "sent before the flush returned: the agent span and one turn");

    *collector.shared.hold.lock().unwrap() = true;
    run_to_export(&engine, scripted(json!([{"text": "held"}]))).await;
    collector.shared.arrived.notified().await;
    assert_eq!(exporter.flush(Duration::from_millis(100)).await, Err(1), "the held run is still on its way");
    *collector.shared.hold.lock().unwrap() = false;
    collector.shared.release.notify_one();
    assert_eq!(exporter.flush(Duration::from_secs(60)).await, Ok(()));
    assert_eq!(exporter.stats().runs_sent, 2);
}

#[tokio::test]
async fn a_large_run_goes_out_in_several_requests_none_over_the_bound() {
    let collector = Collector::start().await;
    let (engine, _db) = engine().await;
    let exporter = engine.start_otel_export(collector.config(true).resolve(env).unwrap());
    // 60 calls, each result 30,000 characters, captured twice (GenAI and OpenInference keys): ~3.6 MB of spans.
    let calls: Vec<Value> = (0..60).map(|_| json!({"name": "big_result", "arguments": {"chars": 30_000}})).collect();
    run_to_export(&engine, scripted(json!([{"tool_calls": calls}, {"text": "done"}]))).await;
    assert_eq!(exporter.flush(Duration::from_secs(60)).await, Ok(()));
    // The collector keeps axum's default body limit (2 MiB): a single request would be refused.
    assert_eq!(exporter.stats().runs_failed, 0);
    let requests = collector.shared.requests.lock().unwrap().clone();
    assert!(requests.len() >= 2, "{} requests", requests.len());
    for (_, request) in &requests {
        let len = request.encoded_len();
        assert!(len <= runlens_engine::otel::export::MAX_REQUEST_BYTES + 4096, "a request of {len} bytes");
    }
    let spans = collector.spans();
    assert_eq!(spans.len(), 1 + 2 + 60, "every span once");
    assert!(spans.iter().all(|s| s.trace_id == spans[0].trace_id));
    assert_eq!(exporter.stats().runs_sent, 1);
}
