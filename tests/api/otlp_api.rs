//! `POST /v1/traces`: OTLP/HTTP in (protobuf, JSON, gzip), authenticated
//! like the API, every bad body a 4xx that stores nothing, and the runs it
//! makes read-only (409 on every change). Replays the recorded fixtures of
//! real instrumentation (tests/fixtures/otlp/).

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use http_body_util::BodyExt;
use runlens_engine::model::{Actor, Role};
use runlens_engine::otel::ingest::wire::flate2;
use runlens_engine::otel::ingest::wire::opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use runlens_engine::otel::ingest::wire::prost::Message as _;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::support::{app, App, Reply};

pub(crate) fn fixture_bodies(name: &str) -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/otlp").join(name);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pb"))
        .collect();
    files.sort();
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

async fn post(app: &App, body: Vec<u8>, headers: &[(&str, &str)]) -> Reply {
    let mut req = Request::builder().method(Method::POST).uri("/v1/traces");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let res = app.router.clone().oneshot(req.body(Body::from(body)).unwrap()).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    Reply { status, headers, text: String::from_utf8_lossy(&bytes).into_owned() }
}

/// POSTs an OTLP protobuf body with the admin key.
pub(crate) async fn send_protobuf(app: &App, body: Vec<u8>) -> Reply {
    send(app, body, "application/x-protobuf").await
}

/// POSTs with the admin key and `content_type`.
async fn send(app: &App, body: Vec<u8>, content_type: &str) -> Reply {
    let auth = app.bearer();
    post(app, body, &[("authorization", &auth), ("content-type", content_type)]).await
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

async fn runs(app: &App) -> Vec<Value> {
    let page = app.get("/api/runs?all=true").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    page.json()["runs"].as_array().unwrap().clone()
}

/// A small hand-made GenAI trace as OTLP/JSON: an agent that called one tool.
pub(crate) fn json_trace(trace_id: &str) -> Value {
    let span = |id: &str, parent: Option<&str>, name: &str, start: u64, end: u64, attrs: Value| {
        let attributes: Vec<Value> = attrs
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| match v {
                Value::Number(n) => json!({"key": k, "value": {"intValue": n.to_string()}}),
                v => json!({"key": k, "value": {"stringValue": v.as_str().unwrap()}}),
            })
            .collect();
        let mut s = json!({
            "traceId": trace_id, "spanId": id, "name": name, "kind": 1,
            "startTimeUnixNano": (1_760_000_000_000_000_000u64 + start * 1_000_000).to_string(),
            "endTimeUnixNano": (1_760_000_000_000_000_000u64 + end * 1_000_000).to_string(),
            "attributes": attributes, "status": {"code": 1}
        });
        if let Some(p) = parent {
            s["parentSpanId"] = json!(p);
        }
        s
    };
    json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "json-bot"}}]},
        "scopeSpans": [{"scope": {"name": "hand"}, "spans": [
            span("1111111111111111", None, "invoke_agent helper", 0, 50,
                json!({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"})),
            span("2222222222222222", Some("1111111111111111"), "chat m", 1, 10, json!({
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "m-1",
                "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 2})),
            span("3333333333333333", Some("1111111111111111"), "execute_tool add", 11, 12, json!({
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add", "gen_ai.tool.call.id": "c1",
                "gen_ai.tool.call.arguments": "{\"a\":1}", "gen_ai.tool.call.result": "2"})),
        ]}]
    }]})
}

#[tokio::test]
async fn recorded_spans_arrive_as_protobuf_json_and_gzip_and_make_read_only_runs() {
    let app = app().await;
    // The openai-agents recording, as it was sent: protobuf, one span a request.
    for body in fixture_bodies("openai-agents") {
        let reply = send(&app, body, "application/x-protobuf").await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        assert_eq!(reply.headers[header::CONTENT_TYPE], "application/x-protobuf");
        let answer = ExportTraceServiceResponse::decode(reply.text.as_bytes()).unwrap();
        assert_eq!(answer.partial_success, None);
    }
    let listed = runs(&app).await;
    assert_eq!(listed.len(), 2, "{listed:#?}");
    for run in &listed {
        assert_eq!(run["source"]["kind"], "otlp");
        assert_eq!(run["source"]["service"], "support-bot");
        assert_eq!(run["status"], "done");
        assert_eq!(run["step_count"], 2);
    }
    // Sent again, gzipped: the same two runs, unchanged.
    let before = runs(&app).await;
    for body in fixture_bodies("openai-agents") {
        let auth = app.bearer();
        let headers = [
            ("authorization", auth.as_str()),
            ("content-type", "application/x-protobuf"),
            ("content-encoding", "gzip"),
        ];
        let reply = post(&app, gzip(&body), &headers).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    }
    assert_eq!(runs(&app).await, before);

    // OTLP/JSON, answered in JSON.
    let trace_id = "0123456789abcdef0123456789abcdef";
    let reply = send(&app, json_trace(trace_id).to_string().into_bytes(), "application/json").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(reply.json(), json!({}));
    let id = format!("default~trace~{trace_id}");
    let run = app.get(&format!("/api/runs/{id}")).await.json();
    assert_eq!((run["name"].as_str(), run["status"].as_str()), (Some("helper"), Some("done")));
    assert_eq!(run["source"], json!({"kind": "otlp", "service": "json-bot", "trace_id": trace_id}));
    let steps = app.get(&format!("/api/runs/{id}/steps")).await.json();
    let call = &steps["steps"][0]["tool_calls"][0];
    assert_eq!(
        (call["tool_name"].as_str(), &call["arguments"], &call["result"]),
        (Some("add"), &json!({"a": 1}), &json!(2))
    );

    // Read-only: every change is a 409 saying why.
    let conflict = |reply: Reply, what: &str| {
        assert_eq!(reply.status, StatusCode::CONFLICT, "{what}: {}", reply.text);
        let message = reply.json()["error"].as_str().unwrap().to_owned();
        assert!(message.contains("recorded from OpenTelemetry spans sent by service `json-bot`"), "{message}");
    };
    conflict(app.post_json(&format!("/api/runs/{id}/messages"), r#"{"message": "more"}"#).await, "follow-up");
    conflict(app.send(Method::POST, &format!("/api/runs/{id}/cancel"), None, "").await, "cancel");
    let first = app.get(&format!("/api/runs/{id}/messages")).await.json();
    let first_id = first["messages"][0]["id"].as_str().map(str::to_owned).unwrap_or_default();
    let edit = app.post_json(&format!("/api/runs/{id}/messages/{first_id}/edit"), r#"{"message": "x"}"#).await;
    conflict(edit, "fork");
    conflict(app.post_json(&format!("/api/runs/{id}/tool-calls/c1/approve"), "{}").await, "approve");
    conflict(app.post_json(&format!("/api/runs/{id}/tool-calls/c1/reject"), "{}").await, "reject");
}

/// Request headers as `(name, value)`.
type Headers<'h> = Vec<(&'h str, &'h str)>;

#[tokio::test]
async fn bad_bodies_are_refused_and_store_nothing() {
    let app = app().await;
    let good = json_trace("00000000000000000000000000000001").to_string().into_bytes();
    let cases: Vec<(Vec<u8>, Headers, StatusCode)> = vec![
        (good.clone(), vec![("content-type", "text/plain")], StatusCode::UNSUPPORTED_MEDIA_TYPE),
        (good.clone(), vec![], StatusCode::UNSUPPORTED_MEDIA_TYPE),
        (
            good.clone(),
            vec![("content-type", "application/json"), ("content-encoding", "br")],
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (b"{\"resourceSpans\": 7}".to_vec(), vec![("content-type", "application/json")], StatusCode::BAD_REQUEST),
        (b"not json".to_vec(), vec![("content-type", "application/json")], StatusCode::BAD_REQUEST),
        (vec![0xff; 64], vec![("content-type", "application/x-protobuf")], StatusCode::BAD_REQUEST),
        (
            b"not gzip".to_vec(),
            vec![("content-type", "application/json"), ("content-encoding", "gzip")],
            StatusCode::BAD_REQUEST,
        ),
        // A gzip bomb: 64 MiB of zeros in about 64 KiB.
        (
            gzip(&vec![0u8; 64 << 20]),
            vec![("content-type", "application/x-protobuf"), ("content-encoding", "gzip")],
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
        // Over 4 MiB as sent.
        (vec![b' '; 5 << 20], vec![("content-type", "application/json")], StatusCode::PAYLOAD_TOO_LARGE),
    ];
    for (body, mut headers, status) in cases {
        let auth = app.bearer();
        headers.push(("authorization", &auth));
        let reply = post(&app, body, &headers).await;
        assert_eq!(reply.status, status, "{headers:?}: {}", reply.text);
        assert!(reply.json()["error"].is_string(), "{}", reply.text);
    }
    // Without credentials, or with a key that may not create runs.
    let reply = post(&app, good.clone(), &[("content-type", "application/json")]).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text);
    let (_, viewer) =
        app.engine.identity().create_key("viewer", Some("default"), Role::Viewer, &Actor::system()).await.unwrap();
    let auth = format!("Bearer {viewer}");
    let reply = post(&app, good, &[("content-type", "application/json"), ("authorization", &auth)]).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.text);
    assert_eq!(runs(&app).await, Vec::<Value>::new());
    // Spans with invalid ids are counted as rejected, not stored.
    let bad = json!({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "", "spanId": "", "name": "x"}]}]}]});
    let reply = send(&app, bad.to_string().into_bytes(), "application/json").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.json()["partialSuccess"]["rejectedSpans"], "1");
    assert_eq!(runs(&app).await, Vec::<Value>::new());
}

#[tokio::test]
async fn runs_land_in_the_callers_project_and_other_projects_do_not_see_them() {
    let app = app().await;
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let (_, other) =
        app.engine.identity().create_key("other-op", Some("other"), Role::Operator, &Actor::system()).await.unwrap();
    let (_, mine) = app
        .engine
        .identity()
        .create_key("default-op", Some("default"), Role::Operator, &Actor::system())
        .await
        .unwrap();
    let trace_id = "abcdefabcdefabcdefabcdefabcdef01";
    let body = json_trace(trace_id).to_string().into_bytes();
    let auth = format!("Bearer {other}");
    let reply = post(&app, body, &[("content-type", "application/json"), ("authorization", &auth)]).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let id = format!("other~trace~{trace_id}");
    assert_eq!(app.engine.runs().get_run(&id).await.unwrap().project, "other");
    let mine = format!("Bearer {mine}");
    let seen = app.send_with(Method::GET, &format!("/api/runs/{id}"), None, "", &[("authorization", &mine)]).await;
    assert_eq!(seen.status, StatusCode::NOT_FOUND, "{}", seen.text);
    let list = app.send_with(Method::GET, "/api/runs", None, "", &[("authorization", &mine)]).await.json();
    assert_eq!(list["runs"], json!([]));
    let theirs = app.send_with(Method::GET, &format!("/api/runs/{id}"), None, "", &[("authorization", &auth)]).await;
    assert_eq!(theirs.status, StatusCode::OK);
    // A protobuf request the other way round: JSON transcoded back to protobuf works too.
    let req: ExportTraceServiceRequest =
        serde_json::from_value(json_trace("abcdefabcdefabcdefabcdefabcdef02")).unwrap();
    let reply =
        post(&app, req.encode_to_vec(), &[("content-type", "application/x-protobuf"), ("authorization", &mine)]).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(
        app.engine.runs().get_run("default~trace~abcdefabcdefabcdefabcdefabcdef02").await.unwrap().project,
        "default"
    );
    // The trace id the other project sent first is still this project's own trace.
    let body = json_trace(trace_id).to_string().into_bytes();
    let reply = post(&app, body, &[("content-type", "application/json"), ("authorization", &mine)]).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(app.engine.runs().get_run(&format!("default~trace~{trace_id}")).await.unwrap().project, "default");
    assert_eq!(app.engine.runs().get_run(&id).await.unwrap().project, "other");
}

#[tokio::test]
async fn pages_show_the_source_and_no_controls_for_recorded_runs() {
    let app = app().await;
    for body in fixture_bodies("openai-agents") {
        assert_eq!(send(&app, body, "application/x-protobuf").await.status, StatusCode::OK);
    }
    let list = app.get("/runs").await;
    assert_eq!(list.status, StatusCode::OK);
    assert!(list.text.contains(r#"data-testid="run-source""#), "{}", list.text);
    assert!(list.text.contains("otlp · support-bot"));
    // The trace whose agent looked an order up (the recording's first).
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/otlp/openai-agents");
    let expected: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let id = format!("default~trace~{}", expected["trace_ids"][0].as_str().unwrap());
    let page = app.get(&format!("/runs/{id}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(page.text.contains(r#"data-testid="run-source-notice""#), "{}", page.text);
    assert!(page.text.contains("runlens did not run it"));
    for control in ["cancel-run", "edit-message", "follow-up", "Re-run in playground"] {
        assert!(!page.text.contains(control), "a recorded run's page offers `{control}`");
    }
    assert!(page.text.contains(r#"data-testid="other-spans""#));
    assert!(page.text.contains("Agent workflow"));
    assert!(page.text.contains("get_order_status"));
}
