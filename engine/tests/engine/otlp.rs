//! OTLP ingest: spans other agents send become read-only runs, assembled the
//! same however the spans are batched and ordered; replayed from hand-built
//! traces and from the recorded fixtures of real instrumentation
//! (tests/fixtures/otlp/, see `fixtures` below).

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{span, ResourceSpans, ScopeSpans, Span, Status};
use runlens_engine::model::{
    CreateRun, DecisionRequest, FollowUp, MessageBody, RunFilter, RunStatus, RunTrace, ToolCallStatus,
};
use runlens_engine::otel::ingest::{self, DecodeError};
use runlens_engine::{Engine, EngineError, ImportOptions};
use serde_json::{json, Value};

use crate::support::engine;

pub const TRACE: [u8; 16] = [0xab; 16];
const T0: u64 = 1_760_000_000_000_000_000;
const MS: u64 = 1_000_000;

pub fn kv(key: &str, value: Value) -> KeyValue {
    let value = match value {
        Value::String(s) => any_value::Value::StringValue(s),
        Value::Bool(b) => any_value::Value::BoolValue(b),
        Value::Number(n) if n.is_i64() => any_value::Value::IntValue(n.as_i64().unwrap()),
        Value::Number(n) => any_value::Value::DoubleValue(n.as_f64().unwrap()),
        other => any_value::Value::StringValue(other.to_string()),
    };
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), key_strindex: 0 }
}

/// A span of trace `trace`: id `id` (one byte repeated), parent `parent`,
/// from `start` to `end` ms after T0, with `attrs`.
pub fn span(trace: [u8; 16], id: u8, parent: Option<u8>, name: &str, start: u64, end: u64, attrs: Value) -> Span {
    Span {
        trace_id: trace.to_vec(),
        span_id: vec![id; 8],
        parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
        name: name.into(),
        kind: 1,
        start_time_unix_nano: T0 + start * MS,
        end_time_unix_nano: T0 + end * MS,
        attributes: attrs.as_object().unwrap().iter().map(|(k, v)| kv(k, v.clone())).collect(),
        status: Some(Status { code: 1, message: String::new() }),
        ..Span::default()
    }
}

pub fn request(service: &str, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource { attributes: vec![kv("service.name", json!(service))], ..Resource::default() }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope { name: "test".into(), ..InstrumentationScope::default() }),
                spans,
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
}

/// An OpenInference agent: it asks for `get_weather`, gets it, answers;
/// plus a guardrail span with an event (neither model nor tool).
pub fn openinference_trace(trace: [u8; 16]) -> Vec<Span> {
    let mut guard = span(trace, 6, Some(1), "guardrail", 1, 2, json!({"openinference.span.kind": "GUARDRAIL"}));
    guard.events.push(span::Event {
        time_unix_nano: T0 + 2 * MS,
        name: "checked".into(),
        attributes: vec![kv("verdict", json!("pass"))],
        dropped_attributes_count: 0,
    });
    vec![
        span(
            trace,
            1,
            None,
            "Weather agent",
            0,
            100,
            json!({
                "openinference.span.kind": "AGENT", "input.value": "What's the weather in Paris?",
                "output.value": "It is sunny in Paris."
            }),
        ),
        span(
            trace,
            2,
            Some(1),
            "response",
            5,
            40,
            json!({
                "openinference.span.kind": "LLM", "llm.model_name": "gpt-4.1-mini",
                "llm.token_count.prompt": 120, "llm.token_count.completion": 15, "llm.token_count.total": 135,
                "llm.input_messages.0.message.role": "system", "llm.input_messages.0.message.content": "Be brief.",
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.content": "What's the weather in Paris?",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": "{\"city\":\"Paris\"}",
            }),
        ),
        span(
            trace,
            3,
            Some(1),
            "get_weather",
            41,
            50,
            json!({
                "openinference.span.kind": "TOOL", "tool.name": "get_weather", "tool_call.id": "call_1",
                "input.value": "{\"city\":\"Paris\"}", "output.value": "sunny, 24°C",
            }),
        ),
        span(
            trace,
            4,
            Some(1),
            "response",
            51,
            90,
            json!({
                "openinference.span.kind": "LLM", "llm.model_name": "gpt-4.1-mini",
                "llm.token_count.prompt": 160, "llm.token_count.completion": 8,
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": "What's the weather in Paris?",
                "llm.input_messages.1.message.role": "assistant",
                "llm.input_messages.2.message.role": "tool", "llm.input_messages.2.message.content": "sunny, 24°C",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "It is sunny in Paris.",
            }),
        ),
        guard,
    ]
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn run_id(trace: [u8; 16]) -> String {
    run_id_in("default", trace)
}

/// The run trace `trace` is assembled into in `project`.
fn run_id_in(project: &str, trace: [u8; 16]) -> String {
    format!("{project}~trace~{}", hex(&trace))
}

/// A trace as JSON with its trace id written out, to compare traces of different ids.
fn normalized(trace: &RunTrace, id: [u8; 16]) -> String {
    serde_json::to_string(trace).unwrap().replace(&hex(&id), "TRACE")
}

#[tokio::test]
async fn an_openinference_agent_becomes_a_read_only_run() {
    let (engine, _db) = engine().await;
    let report =
        engine.otel().ingest_otlp("default", request("weather-bot", openinference_trace(TRACE))).await.unwrap();
    assert_eq!((report.accepted, report.rejected), (5, 0), "{report:?}");
    let id = run_id(TRACE);
    assert_eq!(report.runs, vec![id.clone()]);
    let trace = engine.runs().trace(&id).await.unwrap();
    let run = &trace.run;
    assert_eq!(run.status, RunStatus::Done);
    assert_eq!(run.name, "Weather agent");
    let source = run.source.as_ref().unwrap();
    assert_eq!((source.kind.as_str(), source.service.as_deref()), ("otlp", Some("weather-bot")));
    assert_eq!(source.trace_id, hex(&TRACE));
    assert_eq!(run.model, "gpt-4.1-mini");
    assert_eq!(run.step_count, 2);
    assert_eq!((run.usage.input_tokens, run.usage.output_tokens, run.usage.requests), (280, 23, 2));
    assert_eq!(run.system_prompt.as_deref(), Some("Be brief."));
    assert_eq!(run.initial_prompt, "What's the weather in Paris?");
    assert_eq!(run.summary.as_deref(), Some("It is sunny in Paris."));
    assert_eq!(run.tools, vec!["get_weather".to_owned()]);
    assert!(run.finished_at.is_some() && run.started_at.is_some());

    let steps = &trace.steps;
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].usage.total_tokens, 135);
    assert_eq!(steps[0].recorded_model(), Some("gpt-4.1-mini"));
    let call = &steps[0].tool_calls[0];
    assert_eq!((call.id.as_str(), call.tool_name.as_str()), ("call_1", "get_weather"));
    assert_eq!(call.arguments, json!({"city": "Paris"}));
    assert_eq!(call.result, Some(json!("sunny, 24°C")));
    assert_eq!(call.status, ToolCallStatus::Succeeded);
    assert!(steps[1].tool_calls.is_empty());
    assert_eq!(steps[1].response.text(), Some("It is sunny in Paris."));

    let kinds: Vec<&str> = trace.messages.iter().map(|m| m.body.kind()).collect();
    assert_eq!(kinds, ["human", "agent", "invocation-result", "agent"]);
    match &trace.messages[1].body {
        MessageBody::Agent { invocations, .. } => assert_eq!(invocations[0].tool_name, "get_weather"),
        other => panic!("{other:?}"),
    }
    // The agent span and the guardrail are kept as generic spans, with events.
    let names: Vec<&str> = trace.spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["Weather agent", "guardrail"]);
    assert_eq!(trace.spans[1].events[0].name, "checked");
    assert_eq!(trace.spans[1].events[0].attributes["verdict"], json!("pass"));
    // It is listed like any run, with its cost from the price table.
    let page = engine.runs().list_runs(&Default::default()).await.unwrap();
    assert_eq!(page.runs[0].id, id);
    assert_eq!(page.runs[0].source, run.source);
    let price = serde_json::from_value(json!({"input": 2.0, "output": 8.0})).unwrap();
    engine.traces().set_price("default", "gpt-4.1-mini", price).await.unwrap();
    let cost = engine.traces().run_cost(run).await.unwrap().unwrap();
    assert!((cost - (280.0 * 2.0 + 23.0 * 8.0) / 1e6).abs() < 1e-12, "{cost}");
    assert_read_only(&engine, &id).await;
}

/// Every way to change the run is refused with why.
pub async fn assert_read_only(engine: &Engine, id: &str) {
    let conflict = |r: Result<(), EngineError>, what: &str| match r {
        Err(EngineError::Conflict(m)) => {
            assert!(m.contains("recorded from OpenTelemetry spans") && m.contains("runlens did not run it"), "{m}");
            assert!(m.contains(what), "{m}");
        }
        other => panic!("{what}: {other:?}"),
    };
    let follow = FollowUp { message: "and tomorrow?".into(), ..FollowUp::default() };
    conflict(engine.conversation().follow_up(id, follow).await.map(drop), "followed up");
    let first = engine.runs().messages(id).await.unwrap()[0].id.clone();
    conflict(engine.conversation().edit_message(id, &first, "other").await.map(drop), "forked");
    conflict(engine.runs().cancel(id).await.map(drop), "cancelled");
    let call = engine.runs().steps(id).await.unwrap().iter().flat_map(|s| s.tool_calls.clone()).next();
    let call_id = call.map_or("none".to_owned(), |c| c.id);
    let decided = engine
        .approvals()
        .approve(id, &call_id, DecisionRequest::default(), &crate::support::approver(engine, "ann").await)
        .await;
    conflict(decided.map(drop), "approved");
    let doc = engine.snapshots().export_document(id).await.unwrap();
    let opts = ImportOptions { keep_id: true, ..ImportOptions::default() };
    conflict(engine.snapshots().import_state(&doc, opts).await.map(drop), "import");
    conflict(engine.snapshots().import_state(&doc, ImportOptions::default()).await.map(drop), "imported");
}

#[tokio::test]
async fn batches_in_any_order_assemble_the_same_run() {
    let (engine, _db) = engine().await;
    let whole = engine.otel().ingest_otlp("default", request("svc", openinference_trace(TRACE))).await.unwrap();
    assert_eq!(whole.rejected, 0);
    let expected = normalized(&engine.runs().trace(&run_id(TRACE)).await.unwrap(), TRACE);
    // Every order of the five spans, one span a batch (120 traces).
    let mut orders = Vec::new();
    permutations(&mut (0..5).collect(), 0, &mut orders);
    assert_eq!(orders.len(), 120);
    for (n, order) in orders.iter().enumerate() {
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&(n as u64 + 1).to_be_bytes());
        id[15] = 0x77;
        let spans = openinference_trace(id);
        for (k, i) in order.iter().enumerate() {
            let r = engine.otel().ingest_otlp("default", request("svc", vec![spans[*i].clone()])).await.unwrap();
            assert_eq!((r.accepted, r.rejected), (1, 0));
            // No run while only the guardrail (span 4) has come; then
            // running until the root (the agent, span 0) has.
            let Ok(run) = engine.runs().get_run(&run_id(id)).await else {
                assert_eq!(&order[..=k], &[4], "order {order:?} after {k}");
                continue;
            };
            let root_came = order[..=k].contains(&0);
            assert_eq!(run.status == RunStatus::Running, !root_came, "order {order:?} after {k}");
        }
        let got = normalized(&engine.runs().trace(&run_id(id)).await.unwrap(), id);
        assert_eq!(got, expected, "order {order:?}");
    }
    // A span sent again changes nothing.
    engine.otel().ingest_otlp("default", request("svc", openinference_trace(TRACE))).await.unwrap();
    assert_eq!(normalized(&engine.runs().trace(&run_id(TRACE)).await.unwrap(), TRACE), expected);
}

fn permutations(items: &mut Vec<usize>, k: usize, out: &mut Vec<Vec<usize>>) {
    if k == items.len() {
        out.push(items.clone());
        return;
    }
    for i in k..items.len() {
        items.swap(k, i);
        permutations(items, k + 1, out);
        items.swap(k, i);
    }
}

#[tokio::test]
async fn genai_spans_without_an_agent_span_make_a_run_of_the_whole_trace() {
    let (engine, _db) = engine().await;
    let trace = [0x42; 16];
    let mut failing = span(
        trace,
        3,
        Some(1),
        "execute_tool lookup",
        30,
        35,
        json!({
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup", "gen_ai.tool.call.id": "c9",
            "gen_ai.tool.call.arguments": "{\"q\":1}"
        }),
    );
    failing.status = Some(Status { code: 2, message: "lookup timed out".into() });
    let spans = vec![
        span(trace, 1, None, "main", 0, 80, json!({})),
        span(
            trace,
            2,
            Some(1),
            "chat gpt-4o",
            10,
            29,
            json!({
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o-2024",
                "gen_ai.usage.input_tokens": 50, "gen_ai.usage.output_tokens": 7, "gen_ai.request.temperature": 0.5,
                "gen_ai.input.messages": json!([{"role": "user", "parts": [{"type": "text", "content": "Find 1"}]}]).to_string(),
                "gen_ai.output.messages": json!([{"role": "assistant", "parts": [{"type": "tool_call", "id": "c9", "name": "lookup", "arguments": {"q": 1}}], "finish_reason": "tool_calls"}]).to_string(),
            }),
        ),
        failing,
        span(
            trace,
            4,
            Some(1),
            "chat gpt-4o",
            40,
            70,
            json!({
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 70, "gen_ai.usage.output_tokens": 9,
            }),
        ),
    ];
    let report = engine.otel().ingest_otlp("default", request("client", spans)).await.unwrap();
    assert_eq!(report.rejected, 0);
    let t = engine.runs().trace(&run_id(trace)).await.unwrap();
    assert_eq!((t.run.name.as_str(), t.run.status), ("main", RunStatus::Done));
    assert_eq!(t.run.model, "gpt-4o");
    assert_eq!(t.steps.len(), 2);
    assert_eq!(t.steps[0].recorded_model(), Some("gpt-4o-2024"));
    assert_eq!(t.steps[0].response.finish_reason(), Some("tool_calls"));
    assert_eq!(t.steps[0].request.settings.as_ref().unwrap()["temperature"], json!(0.5));
    let call = &t.steps[0].tool_calls[0];
    assert_eq!(
        (call.id.as_str(), call.status, call.error.as_deref()),
        ("c9", ToolCallStatus::Failed, Some("lookup timed out"))
    );
    assert_eq!(call.arguments, json!({"q": 1}));
    assert_eq!(t.run.initial_prompt, "Find 1");
    // The second call captured no contents: the transcript says so.
    match &t.messages.last().unwrap().body {
        MessageBody::Agent { message: Some(m), .. } => assert!(m.contains("not captured"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!((t.run.usage.input_tokens, t.run.usage.output_tokens), (120, 16));
}

#[tokio::test]
async fn a_failed_agent_span_fails_the_run_and_plain_spans_make_no_run() {
    let (engine, _db) = engine().await;
    let trace = [0x51; 16];
    let mut agent = span(
        trace,
        1,
        None,
        "invoke_agent planner",
        0,
        10,
        json!({
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"
        }),
    );
    agent.status = Some(Status { code: 2, message: "max turns exceeded".into() });
    engine.otel().ingest_otlp("p1", request("svc", vec![agent])).await.unwrap();
    let run = engine.runs().get_run(&run_id_in("p1", trace)).await.unwrap();
    assert_eq!((run.name.as_str(), run.status), ("planner", RunStatus::Failed));
    assert_eq!(run.failure_reason.as_deref(), Some("max turns exceeded"));
    assert_eq!(run.project, "p1");
    // The same trace id sent to another project is that project's own run.
    let other = span(trace, 9, None, "x", 0, 1, json!({"gen_ai.operation.name": "invoke_agent"}));
    let again = engine.otel().ingest_otlp("p2", request("svc", vec![other])).await;
    let again = again.unwrap();
    assert_eq!((again.accepted, again.rejected), (1, 0), "{again:?}");
    assert_eq!(again.runs, vec![run_id_in("p2", trace)]);
    let now = engine.runs().get_run(&run_id_in("p1", trace)).await.unwrap();
    assert_eq!(serde_json::to_value(now).unwrap(), serde_json::to_value(&run).unwrap(), "p1's run is untouched");
    // Spans with no agent, model or tool attributes are kept but make no run.
    let plain = [0x61; 16];
    let r = engine.otel().ingest_otlp("p1", request("svc", vec![span(plain, 1, None, "GET /", 0, 1, json!({}))])).await;
    assert_eq!(r.unwrap().runs, Vec::<String>::new());
    assert!(matches!(engine.runs().get_run(&run_id_in("p1", plain)).await, Err(EngineError::NotFound(_))));
    // Invalid spans are counted, not stored.
    let mut bad = span(plain, 2, None, "bad", 0, 1, json!({}));
    bad.trace_id = vec![1, 2, 3];
    let r = engine.otel().ingest_otlp("p1", request("svc", vec![bad])).await.unwrap();
    assert_eq!((r.accepted, r.rejected), (0, 1));
}

#[tokio::test]
async fn a_trace_id_another_project_used_first_is_still_this_projects_run() {
    let (engine, _db) = engine().await;
    // Another project sends spans of the trace first, and creates a run
    // under the id the trace's run had before ids were scoped.
    let first = span(TRACE, 9, None, "x", 0, 1, json!({"gen_ai.operation.name": "invoke_agent"}));
    let report = engine.otel().ingest_otlp("p2", request("svc", vec![first])).await.unwrap();
    assert_eq!((report.accepted, report.rejected), (1, 0), "{report:?}");
    let squat =
        CreateRun { id: Some(format!("otlp-{}", hex(&TRACE))), initial_prompt: "hi".into(), ..Default::default() };
    engine.runs().create_run_in(squat, "p2", None).await.unwrap();
    // This project's spans of that trace still become this project's run.
    let report =
        engine.otel().ingest_otlp("default", request("weather-bot", openinference_trace(TRACE))).await.unwrap();
    assert_eq!((report.accepted, report.rejected), (5, 0), "{report:?}");
    let run = engine.runs().get_run(&run_id(TRACE)).await.unwrap();
    assert_eq!((run.project.as_str(), run.status), ("default", RunStatus::Done));
    assert_eq!(engine.runs().get_run(&run_id_in("p2", TRACE)).await.unwrap().project, "p2");
    // The scoped id is the server's: no client can choose it for a run.
    let taken = CreateRun { id: Some(run_id_in("p3", [9; 16])), initial_prompt: "hi".into(), ..Default::default() };
    assert!(matches!(engine.runs().create_run_in(taken, "p2", None).await, Err(EngineError::Invalid(_))));
}

#[tokio::test]
async fn a_running_recorded_run_is_never_driven_or_recovered() {
    let (engine, _db) = engine().await;
    let spans = openinference_trace(TRACE);
    engine.otel().ingest_otlp("default", request("svc", spans[1..].to_vec())).await.unwrap();
    let id = run_id(TRACE);
    let before = engine.runs().trace(&id).await.unwrap();
    assert_eq!(before.run.status, RunStatus::Running);
    assert_eq!(engine.recover().await.unwrap(), 0);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(engine.runs().trace(&id).await.unwrap(), before);
    assert_read_only(&engine, &id).await;
}

#[test]
fn bodies_are_decoded_with_bounds() {
    use prost::Message as _;
    let req = request("svc", openinference_trace(TRACE));
    let pb = req.encode_to_vec();
    let max = ingest::limits::MAX_INFLATED_BYTES;
    assert_eq!(ingest::decode("application/x-protobuf", None, &pb, max).unwrap(), req);
    let json_body = serde_json::to_vec(&req).unwrap();
    assert_eq!(ingest::decode("application/json; charset=utf-8", None, &json_body, max).unwrap(), req);
    let gz = gzip(&pb);
    assert_eq!(ingest::decode("application/x-protobuf", Some("gzip"), &gz, max).unwrap(), req);
    // A bomb: 64 MiB of zeros in a few KiB.
    let bomb = gzip(&vec![0u8; 64 << 20]);
    assert!(bomb.len() < 128 << 10);
    assert!(matches!(
        ingest::decode("application/x-protobuf", Some("gzip"), &bomb, max),
        Err(DecodeError::TooLarge(_))
    ));
    assert!(matches!(ingest::decode("text/plain", None, &pb, max), Err(DecodeError::Unsupported(_))));
    assert!(matches!(ingest::decode("application/x-protobuf", Some("br"), &pb, max), Err(DecodeError::Unsupported(_))));
    assert!(matches!(
        ingest::decode("application/x-protobuf", None, b"\xff\xff\xff", max),
        Err(DecodeError::Invalid(_))
    ));
    assert!(matches!(
        ingest::decode("application/json", None, b"{\"resourceSpans\": 5}", max),
        Err(DecodeError::Invalid(_))
    ));
    assert!(matches!(
        ingest::decode("application/x-protobuf", Some("gzip"), b"not gzip", max),
        Err(DecodeError::Invalid(_))
    ));
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// The recorded fixtures: OTLP protobuf bodies real instrumentation sent
/// (tests/fixtures/otlp/<name>/NNN.pb, in arrival order: one span a batch,
/// children before parents) and expected.json describing every span.
pub mod fixtures {
    use std::path::PathBuf;

    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message as _;
    use serde_json::Value;

    pub fn dir(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/otlp").join(name)
    }

    /// The request bodies, in arrival order.
    pub fn bodies(name: &str) -> Vec<Vec<u8>> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir(name))
            .unwrap_or_else(|e| panic!("fixtures {name}: {e}"))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "pb"))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "fixtures {name} hold no .pb files");
        files.iter().map(|f| std::fs::read(f).unwrap()).collect()
    }

    pub fn requests(name: &str) -> Vec<ExportTraceServiceRequest> {
        bodies(name).iter().map(|b| ExportTraceServiceRequest::decode(&b[..]).unwrap()).collect()
    }

    pub fn expected(name: &str) -> Value {
        let path = dir(name).join("expected.json");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap()
    }

    fn attr<'v>(span: &'v Value, key: &str) -> Option<&'v Value> {
        span["attributes"].get(key).filter(|v| !v.is_null())
    }

    pub fn text<'v>(span: &'v Value, keys: &[&str]) -> Option<&'v str> {
        keys.iter().find_map(|k| attr(span, k)?.as_str())
    }

    pub fn number(span: &Value, keys: &[&str]) -> u64 {
        keys.iter()
            .find_map(|k| match attr(span, k)? {
                Value::Number(n) => n.as_u64(),
                Value::String(s) => s.parse().ok(),
                _ => None,
            })
            .unwrap_or(0)
    }

    fn kind(span: &Value) -> &str {
        let oi = text(span, &["openinference.span.kind"]).unwrap_or("");
        let op = text(span, &["gen_ai.operation.name"]).unwrap_or("");
        match (oi, op) {
            ("AGENT", _) | (_, "invoke_agent" | "create_agent") => "agent",
            ("LLM", _) | (_, "chat" | "text_completion" | "generate_content") => "model",
            ("TOOL", _) | (_, "execute_tool") => "tool",
            _ => "other",
        }
    }

    /// The spans of one trace that `kind` names (`model`, `tool`…), by start.
    pub fn spans_of<'v>(expected: &'v Value, trace_id: &str, want: &str) -> Vec<&'v Value> {
        let mut spans: Vec<&Value> = expected["spans"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["trace_id"] == trace_id && kind(s) == want)
            .collect();
        spans.sort_by_key(|s| s["start_time_unix_nano"].as_u64());
        spans
    }

    /// A payload attribute as the run shows it: the JSON a string holds, else the string.
    pub fn payload(span: &Value, keys: &[&str]) -> Option<Value> {
        let t = text(span, keys)?;
        Some(serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.to_owned())))
    }
}

/// Replays a fixture (every batch, in `order`) into a fresh engine and
/// checks each trace's run against what expected.json says its spans hold.
async fn replay_and_check(name: &str, batches: Vec<ExportTraceServiceRequest>) -> Vec<RunTrace> {
    let (engine, _db) = engine().await;
    for (i, batch) in batches.into_iter().enumerate() {
        let report = engine.otel().ingest_otlp("default", batch).await.unwrap();
        assert_eq!(report.rejected, 0, "{name} batch {i}: {report:?}");
    }
    let expected = fixtures::expected(name);
    let mut traces = Vec::new();
    for trace_id in expected["trace_ids"].as_array().unwrap() {
        let trace_id = trace_id.as_str().unwrap();
        let trace = engine.runs().trace(&format!("default~trace~{trace_id}")).await.unwrap();
        check_against_expected(name, &expected, trace_id, &trace);
        traces.push(trace);
    }
    traces
}

fn check_against_expected(name: &str, expected: &Value, trace_id: &str, trace: &RunTrace) {
    use fixtures::{number, payload, spans_of, text};
    let run = &trace.run;
    let at = format!("{name} trace {trace_id}");
    assert_eq!(run.status, RunStatus::Done, "{at}");
    let source = run.source.as_ref().unwrap();
    assert_eq!(source.service.as_deref(), expected["service_name"].as_str(), "{at}");
    assert_eq!(source.trace_id, trace_id);
    // One step per model span, in start order, with its model and usage.
    let models = spans_of(expected, trace_id, "model");
    assert!(!models.is_empty(), "{at}: no model spans");
    let model_steps: Vec<_> = trace.steps.iter().filter(|s| s.kind == "model_turn").collect();
    assert_eq!(model_steps.len(), models.len(), "{at}");
    let model_keys = ["gen_ai.response.model", "gen_ai.request.model", "llm.model_name"];
    let input_keys = ["gen_ai.usage.input_tokens", "llm.token_count.prompt"];
    let output_keys = ["gen_ai.usage.output_tokens", "llm.token_count.completion"];
    for (step, span) in model_steps.iter().zip(&models) {
        assert_eq!(step.recorded_model(), text(span, &model_keys), "{at} step {}", step.index);
        assert_eq!(step.usage.input_tokens, number(span, &input_keys), "{at} step {}", step.index);
        assert_eq!(step.usage.output_tokens, number(span, &output_keys), "{at} step {}", step.index);
    }
    let inputs: u64 = models.iter().map(|s| number(s, &input_keys)).sum();
    let outputs: u64 = models.iter().map(|s| number(s, &output_keys)).sum();
    assert_eq!((run.usage.input_tokens, run.usage.output_tokens), (inputs, outputs), "{at}");
    assert!(inputs > 0, "{at}: the fixture records usage");
    assert_eq!(Some(run.model.as_str()), text(models.last().unwrap(), &model_keys), "{at}");
    // Each tool span is a tool call with its name, arguments and result.
    let calls: Vec<_> = trace.steps.iter().flat_map(|s| &s.tool_calls).collect();
    let tools = spans_of(expected, trace_id, "tool");
    assert_eq!(calls.len(), tools.len(), "{at}");
    for (call, span) in calls.iter().zip(&tools) {
        let name = text(span, &["gen_ai.tool.name", "tool.name"]).or(span["name"].as_str());
        assert_eq!(Some(call.tool_name.as_str()), name, "{at}");
        let args = payload(span, &["gen_ai.tool.call.arguments", "input.value"]);
        assert_eq!(call.arguments, args.unwrap_or(Value::Null), "{at} {name:?}");
        assert_eq!(call.result, payload(span, &["gen_ai.tool.call.result", "output.value"]), "{at} {name:?}");
        assert_eq!(call.status, ToolCallStatus::Succeeded, "{at}");
    }
    // Everything else is kept as generic spans.
    let others = spans_of(expected, trace_id, "other").len() + spans_of(expected, trace_id, "agent").len();
    assert_eq!(trace.spans.len(), others, "{at}");
}

#[tokio::test]
async fn recorded_openai_agents_spans_replay_in_any_order_and_as_json() {
    let name = "openai-agents";
    let forward = replay_and_check(name, fixtures::requests(name)).await;
    let backward = replay_and_check(name, fixtures::requests(name).into_iter().rev().collect()).await;
    assert_eq!(forward, backward);
    // The same bodies transcoded to OTLP/JSON (hex ids, string numbers) and decoded back.
    let max = ingest::limits::MAX_INFLATED_BYTES;
    let as_json: Vec<ExportTraceServiceRequest> = fixtures::requests(name)
        .iter()
        .map(|r| ingest::decode("application/json", None, &serde_json::to_vec(r).unwrap(), max).unwrap())
        .collect();
    assert_eq!(replay_and_check(name, as_json).await, forward);

    // Facts of this recording: a support agent looked up order A-1001 with
    // a function tool, then a second conversation handed off to Billing.
    let lookup = &forward[0];
    assert_eq!(lookup.steps.len(), 2);
    let call = &lookup.steps[0].tool_calls[0];
    assert_eq!(call.tool_name, "get_order_status");
    assert_eq!(call.id, "call_order_1", "the call id is the one the model asked for");
    assert_eq!(call.arguments, json!({"order_id": "A-1001"}));
    assert!(call.result.as_ref().unwrap().as_str().unwrap().contains("shipped on 2024-05-02"));
    assert_eq!(lookup.run.model, "gpt-4o-mini-2024-07-18");
    assert_eq!(lookup.run.initial_prompt, "Where is my order A-1001?");
    assert!(lookup.run.summary.as_deref().unwrap().contains("1Z999AA10123456784"));
    let kinds: Vec<&str> = lookup.messages.iter().map(|m| m.body.kind()).collect();
    assert_eq!(kinds, ["human", "agent", "invocation-result", "agent"]);
    let handoff = &forward[1];
    assert_eq!(handoff.steps[0].tool_calls[0].tool_name, "handoff to Billing");
    assert!(handoff.run.summary.as_deref().unwrap().contains("refund request R-77"));
    let (engine, _db) = engine().await;
    for batch in fixtures::requests(name) {
        engine.otel().ingest_otlp("default", batch).await.unwrap();
    }
    assert_read_only(&engine, &lookup.run.id).await;
}

#[tokio::test]
async fn recorded_genai_client_spans_replay_in_any_order_and_as_json() {
    let name = "genai-client";
    let forward = replay_and_check(name, fixtures::requests(name)).await;
    let backward = replay_and_check(name, fixtures::requests(name).into_iter().rev().collect()).await;
    assert_eq!(forward, backward);
    let max = ingest::limits::MAX_INFLATED_BYTES;
    let as_json: Vec<ExportTraceServiceRequest> = fixtures::requests(name)
        .iter()
        .map(|r| ingest::decode("application/json", None, &serde_json::to_vec(r).unwrap(), max).unwrap())
        .collect();
    assert_eq!(replay_and_check(name, as_json).await, forward);

    // Facts of this recording: a GenAI-instrumented client asked for the
    // weather in Paris with one tool call, then answered.
    let t = &forward[0];
    assert_eq!(t.run.name, "weather-agent");
    assert_eq!(t.run.model, "gpt-4o-mini-2024-07-18");
    assert_eq!(t.run.system_prompt.as_deref(), Some("You are a weather assistant. Use tools when needed."));
    assert_eq!(t.run.initial_prompt, "What's the weather in Paris?");
    assert_eq!(t.steps[0].response.finish_reason(), Some("tool_calls"));
    let call = &t.steps[0].tool_calls[0];
    assert_eq!((call.id.as_str(), call.tool_name.as_str()), ("call_wx_9f3a1c", "get_weather"));
    assert_eq!(call.arguments, json!({"city": "Paris", "unit": "celsius"}));
    assert_eq!(call.result.as_ref().unwrap()["temperature"], json!(18));
    assert_eq!(t.steps[1].response.finish_reason(), Some("stop"));
    assert!(t.run.summary.is_some());
}

/// A small deterministic generator for the orders and shapes below.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n.max(1)
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.next(i as u64 + 1) as usize);
        }
    }
}

/// A trace of every shape assembly knows, drawn from `seed`: a root agent
/// span with a nested agent, model spans (OpenInference and GenAI, some
/// overlapping, some failed, some without captured messages), tool spans
/// asked for by them (with and without call ids, ids used twice), tool
/// spans before any model span ended, and plain spans.
fn generated_trace(trace: [u8; 16], seed: u64) -> Vec<Span> {
    let mut rng = Lcg(seed);
    let mut spans = vec![
        span(trace, 1, None, "root agent", 0, 2_000, json!({"openinference.span.kind": "AGENT", "input.value": "go"})),
        span(trace, 2, Some(1), "helper", 3, 1_900, json!({"gen_ai.operation.name": "invoke_agent"})),
        span(trace, 3, Some(2), "early tool", 1, 4, json!({"openinference.span.kind": "TOOL", "tool.name": "probe"})),
    ];
    let mut t: u64 = 10;
    let mut id = 10u8;
    for turn in 0..12 {
        let len = 5 + rng.next(30);
        let mut attrs = match rng.next(4) {
            0 => json!({"openinference.span.kind": "LLM", "llm.model_name": "m1",
                "llm.input_messages.0.message.role": "system", "llm.input_messages.0.message.content": "Be brief.",
                "llm.input_messages.1.message.role": "user", "llm.input_messages.1.message.content": format!("ask {turn}"),
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.tool_calls.0.tool_call.id": format!("c{turn}"),
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "lookup",
                "llm.token_count.prompt": 10 + turn, "llm.token_count.completion": 3}),
            1 => json!({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m2",
                "gen_ai.usage.input_tokens": 7, "gen_ai.usage.output_tokens": 2,
                "gen_ai.output.messages": json!([{"role": "assistant", "parts": [{"type": "text", "content": format!("answer {turn}")}]}]).to_string()}),
            2 => json!({"gen_ai.operation.name": "chat"}),
            _ => json!({"openinference.span.kind": "LLM", "llm.model_name": "m3",
                "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "again",
                "llm.input_messages.1.message.role": "assistant",
                "llm.input_messages.2.message.role": "user", "llm.input_messages.2.message.content": format!("more {turn}"),
                "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": format!("done {turn}")}),
        };
        let overlap = rng.next(5) == 0;
        let start = if overlap { t.saturating_sub(8) } else { t };
        let mut model = span(trace, id, Some(2), "model", start, start + len, attrs.take());
        if rng.next(6) == 0 {
            model.status = Some(Status { code: 2, message: "rate limited".into() });
        }
        spans.push(model);
        id += 1;
        t = start + len + 1;
        for k in 0..rng.next(3) {
            let tool_attrs = match rng.next(3) {
                0 => {
                    json!({"openinference.span.kind": "TOOL", "tool.name": "lookup", "input.value": "{\"q\":1}", "output.value": "ok"})
                }
                1 => {
                    json!({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch", "gen_ai.tool.call.id": "same-id", "gen_ai.tool.call.result": "r"})
                }
                _ => {
                    json!({"openinference.span.kind": "TOOL", "tool.name": format!("t{k}"), "tool_call.id": format!("x{turn}")})
                }
            };
            let len = 1 + rng.next(6);
            let mut tool = span(trace, id, Some(2), "tool", t + k, t + k + len, tool_attrs);
            if rng.next(5) == 0 {
                tool.status = Some(Status { code: 2, message: "boom".into() });
            }
            spans.push(tool);
            id += 1;
        }
        if rng.next(4) == 0 {
            spans.push(span(trace, id, Some(2), "plain", t, t + 1, json!({"k": turn})));
            id += 1;
        }
        t += 8;
    }
    spans
}

fn stored_spans(trace: [u8; 16], spans: Vec<Span>) -> Vec<runlens_engine::store::StoredSpan> {
    let flat = ingest::flatten(request("svc", spans), chrono::DateTime::<chrono::Utc>::UNIX_EPOCH);
    assert_eq!(flat.rejected, 0, "{:?} of {}", flat.problems, hex(&trace));
    flat.spans
}

/// What a store holds of a trace's run after the changes folded so far.
#[derive(Default)]
struct Held {
    run: Option<runlens_engine::model::Run>,
    steps: Vec<runlens_engine::model::Step>,
    messages: Vec<runlens_engine::model::Message>,
}

impl Held {
    fn apply(&mut self, c: runlens_engine::store::RunChange) {
        self.run = Some(c.run);
        self.steps.truncate(c.from_step as usize);
        self.steps.extend(c.steps);
        self.messages.retain(|m| m.seq < c.from_seq);
        if let Some(head) = c.head {
            self.messages.retain(|m| m.seq != 0);
            self.messages.insert(0, head);
        }
        self.messages.extend(c.messages);
    }
}

/// Spans folded one by one, in random orders and sometimes sent twice
/// (first with other times and attributes), give after every span exactly
/// the run, steps and transcript that deriving the whole batch gives, and
/// the changes each fold reports, applied in turn, leave what a store holds
/// equal to it too.
#[test]
fn spans_folded_one_by_one_in_any_order_give_the_whole_batch_run() {
    use runlens_engine::store::TraceFold;
    let mut checked = 0;
    for seed in 0..150u64 {
        let mut id = [0x3c; 16];
        id[..8].copy_from_slice(&seed.to_be_bytes());
        let spans = stored_spans(id, generated_trace(id, seed));
        let mut rng = Lcg(seed ^ 0x9e37);
        let mut order: Vec<usize> = (0..spans.len()).collect();
        rng.shuffle(&mut order);
        let mut fold = ingest::Assembly::new("default", &spans[0].trace_id);
        let mut sent: Vec<runlens_engine::store::StoredSpan> = Vec::new();
        let mut held = Held::default();
        for (version, i) in order.into_iter().enumerate() {
            if rng.next(6) == 0 {
                // An earlier version of the span first (as a partial export).
                let mut early = spans[i].clone();
                early.end_ns += 3_000_000;
                early.start_ns -= 2_000_000 * rng.next(4) as i64;
                early.attributes.insert("draft".into(), json!(true));
                if let Some(c) = fold.fold(std::slice::from_ref(&early), 2 * version as i64) {
                    held.apply(c);
                }
                sent.retain(|s| s.span_id != early.span_id);
                sent.push(early);
            }
            if let Some(c) = fold.fold(std::slice::from_ref(&spans[i]), 2 * version as i64 + 1) {
                held.apply(c);
            }
            sent.retain(|s| s.span_id != spans[i].span_id);
            sent.push(spans[i].clone());
            let expected = ingest::derive("default", &sent);
            match expected {
                None => assert!(held.run.is_none(), "seed {seed}"),
                Some(d) => {
                    assert_eq!(held.run.as_ref(), Some(&d.run), "run, seed {seed} after {} spans", sent.len());
                    assert_eq!(held.steps, d.steps, "steps, seed {seed} after {} spans", sent.len());
                    assert_eq!(held.messages, d.messages, "messages, seed {seed} after {} spans", sent.len());
                    checked += 1;
                }
            }
        }
        let whole = ingest::derive("default", &spans).unwrap();
        assert_eq!(held.steps.len(), whole.steps.len());
        assert_eq!(held.run.as_ref(), Some(&whole.run), "seed {seed}");
        assert_eq!(held.messages, whole.messages, "seed {seed}");
    }
    assert!(checked > 3_000, "{checked}");
}

/// One span a request, in random order, through the store (SQLite or
/// PostgreSQL): the same run as the whole trace in one request; and a
/// fresh engine (another server) folding on where the first left off.
#[tokio::test]
async fn a_trace_sent_span_by_span_in_random_order_is_stored_as_the_whole_batch() {
    let (engine, db) = engine().await;
    for seed in 0..4u64 {
        let mut whole_id = [0x4d; 16];
        whole_id[0] = seed as u8;
        let r = engine.otel().ingest_otlp("default", request("svc", generated_trace(whole_id, seed))).await.unwrap();
        assert_eq!(r.rejected, 0);
        let expected = normalized(&engine.runs().trace(&run_id(whole_id)).await.unwrap(), whole_id);

        let mut id = [0x4e; 16];
        id[0] = seed as u8;
        let mut spans = generated_trace(id, seed);
        Lcg(seed + 7).shuffle(&mut spans);
        let other = Engine::new(engine.store().clone(), Default::default());
        for (n, s) in spans.into_iter().enumerate() {
            // Every third span through another server sharing the store.
            let via = if n % 3 == 2 { &other } else { &engine };
            let r = via.otel().ingest_otlp("default", request("svc", vec![s])).await.unwrap();
            assert_eq!((r.accepted, r.rejected), (1, 0));
        }
        assert_eq!(normalized(&engine.runs().trace(&run_id(id)).await.unwrap(), id), expected, "seed {seed}");
    }
    drop(db);
}

/// Replays a recorded fixture forward, backward and as OTLP/JSON: the same
/// runs every time (one per trace, in expected.json's order).
async fn replay_three_ways(name: &str) -> Vec<RunTrace> {
    async fn replay(name: &str, batches: Vec<ExportTraceServiceRequest>) -> Vec<RunTrace> {
        let (engine, _db) = engine().await;
        for (i, batch) in batches.into_iter().enumerate() {
            let report = engine.otel().ingest_otlp("default", batch).await.unwrap();
            assert_eq!(report.rejected, 0, "{name} batch {i}: {report:?}");
        }
        let mut traces = Vec::new();
        for trace_id in fixtures::expected(name)["trace_ids"].as_array().unwrap() {
            traces.push(engine.runs().trace(&format!("default~trace~{}", trace_id.as_str().unwrap())).await.unwrap());
        }
        // Search finds each run by the words of its steps' answers and its
        // tool calls, however the spans came (steps rewritten as later
        // spans arrive leave nothing stale behind).
        for t in &traces {
            let texts = t.steps.iter().flat_map(|s| {
                let calls = s.tool_calls.iter().map(|c| format!("{} {}", c.tool_name, c.arguments));
                s.response.text().map(str::to_owned).into_iter().chain(calls)
            });
            for text in texts {
                let Some(word) = text.split(|c: char| !c.is_alphanumeric()).max_by_key(|w| w.len()) else { continue };
                if word.is_empty() {
                    continue;
                }
                let filter = RunFilter { q: Some(word.into()), limit: Some(200), ..RunFilter::default() };
                let page = engine.runs().list_runs(&filter).await.unwrap();
                assert!(page.runs.iter().any(|r| r.id == t.run.id), "{name}: `{word}` of {text:?} finds {}", t.run.id);
            }
        }
        traces
    }
    let forward = replay(name, fixtures::requests(name)).await;
    let backward = replay(name, fixtures::requests(name).into_iter().rev().collect()).await;
    assert_eq!(forward, backward, "{name}: backward");
    let max = ingest::limits::MAX_INFLATED_BYTES;
    let as_json: Vec<ExportTraceServiceRequest> = fixtures::requests(name)
        .iter()
        .map(|r| ingest::decode("application/json", None, &serde_json::to_vec(r).unwrap(), max).unwrap())
        .collect();
    assert_eq!(replay(name, as_json).await, forward, "{name}: as JSON");
    forward
}

fn kinds(t: &RunTrace) -> Vec<&str> {
    t.messages.iter().map(|m| m.body.kind()).collect()
}

/// LangGraph's prebuilt ReAct agent under OpenInference's LangChain
/// instrumentation (tests/fixtures/otlp/langgraph): the tool call takes the
/// JSON arguments the model wrote (the tool span records only `"Paris"`)
/// and the content of the `ToolMessage` as its result; the graph's CHAIN
/// spans and its two `agent` node spans are kept as spans, not steps, and
/// the run is the graph's.
#[tokio::test]
async fn recorded_langgraph_spans_replay_with_the_models_arguments_and_the_tools_content() {
    let traces = replay_three_ways("langgraph").await;
    let t = &traces[0];
    assert_eq!(t.run.status, RunStatus::Done);
    assert_eq!(t.run.name, "LangGraph");
    assert_eq!(t.run.source.as_ref().unwrap().service.as_deref(), Some("langgraph-fixture"));
    assert_eq!(t.run.model, "fake-gpt");
    assert_eq!(t.run.system_prompt.as_deref(), Some("You are a weather assistant."));
    assert_eq!(t.run.initial_prompt, "What is the weather in Paris?");
    assert_eq!(t.run.summary.as_deref(), Some("It is sunny in Paris."));
    assert_eq!((t.run.usage.input_tokens, t.run.usage.output_tokens), (32, 15));
    assert_eq!(t.steps.len(), 2, "one step per LLM span");
    assert_eq!(t.steps[0].response.finish_reason(), Some("tool_calls"));
    assert_eq!(t.steps[1].response.finish_reason(), Some("stop"));
    let call = &t.steps[0].tool_calls[0];
    assert_eq!((call.id.as_str(), call.tool_name.as_str()), ("call_weather_1", "get_weather"));
    assert_eq!(call.arguments, json!({"city": "Paris"}));
    assert_eq!(call.result, Some(json!({"city": "Paris", "forecast": "sunny", "temperature_c": 21})));
    assert_eq!(kinds(t), ["human", "agent", "invocation-result", "agent"]);
    // 15 spans: 2 LLM and 1 TOOL made steps; the 10 CHAIN and 2 AGENT spans stay.
    assert_eq!(t.spans.len(), 12);
    assert_eq!(t.spans.iter().filter(|s| s.name == "agent").count(), 2);
    // Who and which conversation: OpenInference's session.id / user.id, and
    // LangChain's run metadata (its thread id).
    assert_eq!(t.run.session_id.as_deref(), Some("session-42"));
    assert_eq!(t.run.end_user.as_deref(), Some("user-7"));
    assert_eq!(t.run.metadata["thread_id"], "thread-42");
}

/// The Vercel AI SDK's own `ai.*` spans (tests/fixtures/otlp/vercel-ai,
/// `ai` 6): `generateText` with a tool, then `streamText`. Each call is a
/// run named by its telemetry function id; each `doGenerate` / `doStream`
/// a step with its own usage (the call's span totals them: not counted
/// again); `ai.toolCall` the call with its id, arguments and result.
#[tokio::test]
async fn recorded_vercel_ai_sdk_spans_replay_as_runs_with_steps_and_tool_calls() {
    let traces = replay_three_ways("vercel-ai").await;
    let by_name = |n: &str| traces.iter().find(|t| t.run.name == n).unwrap_or_else(|| panic!("no run {n}"));
    let t = by_name("weather-agent");
    assert_eq!(t.run.status, RunStatus::Done);
    assert_eq!(t.run.source.as_ref().unwrap().service.as_deref(), Some("vercel-ai-fixture"));
    assert_eq!(t.run.model, "gpt-4o-mini-2024-07-18");
    assert_eq!(t.run.system_prompt.as_deref(), Some("You are a weather assistant."));
    assert_eq!(t.run.initial_prompt, "What is the weather in Paris?");
    assert_eq!(t.run.summary.as_deref(), Some("It is sunny in Paris."));
    assert_eq!((t.run.usage.input_tokens, t.run.usage.output_tokens), (43, 16), "12+31 / 7+9, once");
    assert_eq!(t.steps.len(), 2);
    assert_eq!((t.steps[0].usage.input_tokens, t.steps[1].usage.input_tokens), (12, 31));
    assert_eq!(t.steps[0].response.finish_reason(), Some("tool-calls"));
    assert_eq!(t.steps[1].response.finish_reason(), Some("stop"));
    assert_eq!(t.steps[0].request.settings.as_ref().unwrap()["temperature"], json!(0.2));
    let call = &t.steps[0].tool_calls[0];
    assert_eq!((call.id.as_str(), call.tool_name.as_str()), ("call_wx_1", "get_weather"));
    assert_eq!(call.arguments, json!({"city": "Paris"}));
    assert_eq!(call.result, Some(json!({"city": "Paris", "forecast": "sunny", "temperature_c": 21})));
    assert_eq!(kinds(t), ["human", "agent", "invocation-result", "agent"]);
    assert_eq!(t.spans.len(), 1, "the generateText span itself");
    // The telemetry metadata names the session and the end user.
    assert_eq!(t.run.session_id.as_deref(), Some("session-42"));
    assert_eq!(t.run.end_user.as_deref(), Some("user-7"));
    assert!(t.run.metadata.is_empty(), "{:?}", t.run.metadata);

    let s = by_name("weather-summary");
    assert_eq!(s.run.status, RunStatus::Done);
    assert_eq!(s.steps.len(), 1);
    assert!(s.steps[0].tool_calls.is_empty());
    assert_eq!((s.run.usage.input_tokens, s.run.usage.output_tokens), (20, 6));
    assert_eq!(s.run.initial_prompt, "Summarise the Paris forecast in one line.");
    assert_eq!(s.run.summary.as_deref(), Some("Sunny, 21 °C in Paris."));
}

/// Pydantic AI's own GenAI spans (tests/fixtures/otlp/pydantic-ai,
/// pydantic-ai-slim 2.68, instrumentation version 6): the root's
/// `gen_ai.aggregated_usage.*` is not counted again beside its chat spans.
#[tokio::test]
async fn recorded_pydantic_ai_spans_replay_without_counting_the_aggregate_twice() {
    let traces = replay_three_ways("pydantic-ai").await;
    let t = &traces[0];
    assert_eq!(t.run.status, RunStatus::Done);
    assert_eq!(t.run.name, "weather_agent");
    assert_eq!(t.run.source.as_ref().unwrap().service.as_deref(), Some("pydantic-ai-fixture"));
    assert_eq!(t.run.model, "scripted-gpt");
    assert_eq!(t.run.system_prompt.as_deref(), Some("You are a weather assistant."));
    assert_eq!(t.run.initial_prompt, "What is the weather in Paris?");
    assert_eq!(t.run.summary.as_deref(), Some("It is sunny in Paris."));
    assert_eq!((t.run.usage.input_tokens, t.run.usage.output_tokens), (43, 16), "12+31 / 7+9, once");
    assert_eq!(t.steps.len(), 2);
    assert_eq!(t.steps[0].response.finish_reason(), Some("tool_call"));
    let call = &t.steps[0].tool_calls[0];
    assert_eq!((call.id.as_str(), call.tool_name.as_str()), ("call_pyd_1", "get_weather"));
    assert_eq!(call.arguments, json!({"city": "Paris"}));
    assert_eq!(call.result, Some(json!({"city": "Paris", "forecast": "sunny", "temperature_c": 21})));
    assert_eq!(kinds(t), ["human", "agent", "invocation-result", "agent"]);
    assert_eq!(t.spans.len(), 1, "the invoke_agent span");
    assert!(t.run.session_id.as_ref().is_some_and(|s| !s.is_empty()), "gen_ai.conversation.id");
}

/// The Anthropic SDK under OpenInference (tests/fixtures/otlp/anthropic,
/// anthropic 2.14, openinference-instrumentation-anthropic 3.1), with the
/// agent and tool spans its user made: `tool_use` blocks are the calls the
/// model asked for; cache reads are counted.
#[tokio::test]
async fn recorded_anthropic_spans_replay_with_tool_use_and_cache_reads() {
    let traces = replay_three_ways("anthropic").await;
    let t = &traces[0];
    assert_eq!(t.run.status, RunStatus::Done);
    assert_eq!(t.run.name, "weather_agent");
    assert_eq!(t.run.model, "claude-sonnet-4-5-20250929");
    assert_eq!(t.run.system_prompt.as_deref(), Some("You are a weather assistant."));
    assert_eq!(t.run.initial_prompt, "What is the weather in Paris?");
    assert_eq!(t.run.summary.as_deref(), Some("It is sunny in Paris."));
    assert_eq!(t.steps.len(), 2);
    assert_eq!(t.steps[0].response.finish_reason(), Some("tool_use"));
    assert_eq!(t.steps[0].response.text(), Some("Let me check."));
    assert_eq!(t.steps[1].response.finish_reason(), Some("end_turn"));
    assert_eq!((t.steps[1].usage.input_tokens, t.steps[1].usage.cache_read_tokens), (36, 5));
    let call = &t.steps[0].tool_calls[0];
    assert_eq!((call.id.as_str(), call.tool_name.as_str()), ("toolu_01", "get_weather"));
    assert_eq!(call.arguments, json!({"city": "Paris"}));
    assert_eq!(call.result, Some(json!({"city": "Paris", "forecast": "sunny", "temperature_c": 21})));
    assert_eq!(t.spans.len(), 1, "the agent span");
}

/// LlamaIndex's `FunctionAgent` under OpenInference
/// (tests/fixtures/otlp/llamaindex, llama-index-core 0.14): the LLM span
/// that only prepares each request is no step, the tool call takes the
/// model's call id and arguments (its span holds `{"kwargs": …}`) and the
/// tool's raw output, and the workflow's CHAIN steps stay spans.
#[tokio::test]
async fn recorded_llamaindex_spans_replay_with_one_step_per_model_call() {
    let traces = replay_three_ways("llamaindex").await;
    let t = &traces[0];
    assert_eq!(t.run.status, RunStatus::Done);
    assert_eq!(t.run.name, "FunctionAgent.run");
    assert_eq!(t.run.model, "scripted-gpt");
    assert_eq!(t.run.system_prompt.as_deref(), Some("You are a weather assistant."));
    assert_eq!(t.run.initial_prompt, "What is the weather in Paris?");
    assert_eq!(t.run.summary.as_deref(), Some("It is sunny in Paris."));
    assert_eq!((t.run.usage.input_tokens, t.run.usage.output_tokens), (43, 16));
    assert_eq!(t.steps.len(), 2, "two model calls, not four LLM spans");
    let call = &t.steps[0].tool_calls[0];
    assert_eq!((call.id.as_str(), call.tool_name.as_str()), ("call_li_1", "get_weather"));
    assert_eq!(call.arguments, json!({"city": "Paris"}));
    assert_eq!(call.result, Some(json!({"city": "Paris", "forecast": "sunny", "temperature_c": 21})));
    assert_eq!(kinds(t), ["human", "agent", "invocation-result", "agent"]);
    assert_eq!(t.spans.len(), 12, "10 CHAIN spans and the 2 that prepared requests");
}

/// CrewAI 1.15 under OpenInference (tests/fixtures/otlp/crewai): the LLM
/// spans come from the OpenAI instrumentation its provider uses, the tool
/// span takes the model's call id, the agent span (named by its graph node)
/// is the run, and the crew's kickoff span stays a span.
#[tokio::test]
async fn recorded_crewai_spans_replay_as_the_agents_run() {
    let traces = replay_three_ways("crewai").await;
    let t = &traces[0];
    assert_eq!(t.run.status, RunStatus::Done);
    assert_eq!(t.run.name, "Weather assistant");
    assert_eq!(t.run.model, "gpt-4o-mini-2024-07-18");
    assert!(t.run.initial_prompt.contains("What is the weather in Paris?"), "{}", t.run.initial_prompt);
    assert_eq!(t.run.summary.as_deref(), Some("It is sunny in Paris."));
    assert_eq!((t.run.usage.input_tokens, t.run.usage.output_tokens), (43, 16));
    assert_eq!(t.steps.len(), 2);
    let call = &t.steps[0].tool_calls[0];
    assert_eq!((call.id.as_str(), call.tool_name.as_str()), ("call_crew_1", "get_weather"));
    assert_eq!(call.arguments, json!({"city": "Paris"}));
    assert_eq!(call.result, Some(json!({"city": "Paris", "forecast": "sunny", "temperature_c": 21})));
    assert_eq!(kinds(t), ["human", "agent", "invocation-result", "agent"]);
    assert_eq!(t.spans.len(), 2, "the crew's kickoff and the agent's span");
}

/// Mastra 0.24's AI tracing (tests/fixtures/otlp/mastra, all spans in one
/// request): the agent run is the run; its one `chat` span, which covers
/// both model calls and carries their summed usage, one step; the tool's
/// span a call with its input and output. Mastra records the call id only
/// in chunk payloads, and the per-call steps without usage: the call keeps
/// its span id and a step of its own.
#[tokio::test]
async fn recorded_mastra_spans_replay_with_the_generations_usage_and_the_tool() {
    let traces = replay_three_ways("mastra").await;
    let t = &traces[0];
    assert_eq!(t.run.status, RunStatus::Done);
    assert_eq!(t.run.name, "weather-agent");
    assert_eq!(t.run.model, "gpt-4o-mini");
    assert_eq!(t.run.system_prompt.as_deref(), Some("You are a weather assistant."));
    assert_eq!(t.run.initial_prompt, "What is the weather in Paris?");
    assert_eq!(t.run.summary.as_deref(), Some("It is sunny in Paris."));
    assert_eq!((t.run.usage.input_tokens, t.run.usage.output_tokens), (43, 16));
    let calls: Vec<_> = t.steps.iter().flat_map(|s| &s.tool_calls).collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].tool_name, "get_weather");
    assert_eq!(calls[0].arguments, json!({"city": "Paris"}));
    assert_eq!(calls[0].result, Some(json!({"city": "Paris", "forecast": "sunny", "temperature_c": 21})));
    assert_eq!(t.run.session_id.as_deref(), Some("session-42"), "Mastra's threadId");
    assert_eq!(t.run.end_user.as_deref(), Some("user-7"), "Mastra's resourceId");
}
