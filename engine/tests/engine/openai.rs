//! The OpenAI-compatible provider against an in-process server that speaks
//! the real wire format (see `openai/mock.rs`): how streamed and whole
//! answers are read, retries, timeouts and failures without the key. Whole
//! runs through the engine are in `openai/runs.rs`, the config in `openai/config.rs`.

mod config;
mod ids;
mod judge;
/// Also serves the comparison-group tests (`crate::groups`).
pub(crate) mod mock;
mod runs;

use std::sync::Arc;
use std::time::{Duration, Instant};

use runlens_engine::llm::{collect, ApiKey, Model, ModelRegistry, ModelRequest, ModelResponse, ProviderConfig};
use runlens_engine::model::{CreateRun, Message, MessageBody, Usage};
use runlens_engine::RunlensConfig;
use runlens_engine::{Engine, EngineConfig};
use serde_json::{json, Value};

use crate::support::{db_url, test_tools};
use mock::{Mock, Reply};

const KEY: &str = "sk-test-0123456789abcdef";
const MODEL: &str = "mock/gpt-test";

/// The mock as provider `mock` with the key and tiny backoffs.
fn provider(mock: &Mock) -> ProviderConfig {
    let mut p = ProviderConfig::new(&mock.base_url, &["gpt-test"]);
    p.api_key = Some(ApiKey::new(KEY));
    p.backoff_initial_ms = 1;
    p.backoff_max_ms = 4;
    p
}

fn registry(p: ProviderConfig) -> ModelRegistry {
    let mut config = RunlensConfig::default();
    config.providers.insert("mock".into(), p);
    config.registry(|_| None).unwrap()
}

fn model(p: ProviderConfig) -> Arc<dyn Model> {
    registry(p).get(MODEL).unwrap()
}

async fn engine_with(p: ProviderConfig) -> (Engine, crate::support::TestDb) {
    let dir = crate::support::test_db();
    let store = crate::support::open_store(&db_url(&dir)).await;
    (Engine::with_parts(store, test_tools(), registry(p), EngineConfig::default()), dir)
}

fn request(prompt: &str) -> ModelRequest {
    let message = Message {
        id: "r-m0".into(),
        run_id: "r".into(),
        seq: 0,
        step_index: None,
        created_at: chrono::Utc::now(),
        body: MessageBody::Human { message: prompt.into() },
    };
    ModelRequest { run_id: "r".into(), messages: vec![message.into()], ..ModelRequest::default() }
}

fn run_of(prompt: &str, settings: Value) -> CreateRun {
    CreateRun {
        initial_prompt: prompt.into(),
        system_prompt: Some("Be brief.".into()),
        model: Some(MODEL.into()),
        model_settings: Some(settings),
        tools: Some(vec!["calculator".into()]),
        ..CreateRun::default()
    }
}

fn text(t: &str) -> Value {
    json!({"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": t}, "finish_reason": null}]})
}

fn call_start(index: usize, id: &str, name: &str, args: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": args}}]}}]})
}

fn call_args(index: usize, args: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "function": {"arguments": args}}]}}]})
}

fn finish(reason: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

fn usage(prompt: u64, completion: u64, cached: u64, reasoning: u64) -> Value {
    json!({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt + completion, "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning}}})
}

async fn ask(model: &Arc<dyn Model>, req: ModelRequest) -> Result<(ModelResponse, Vec<String>), String> {
    let stream = model.stream(req).await.map_err(|e| e.to_string())?;
    let mut deltas = Vec::new();
    let r = collect(stream, |d| deltas.push(d.to_owned())).await.map_err(|e| e.to_string())?;
    Ok((r, deltas))
}

#[tokio::test]
async fn streamed_tool_calls_split_across_chunks_are_reassembled() {
    let events = [
        text("Two calls: "),
        call_start(0, "c0", "calculator", ""),
        call_start(1, "c1", "wait", "{\"sec"),
        call_args(0, "{\"expression\""),
        call_args(1, "onds\": 0.1}"),
        call_args(0, ": \"1 + 1\"}"),
        finish("tool_calls"),
        usage(11, 7, 4, 2),
    ];
    let mock = Mock::start(vec![Reply::sse(&events, 5)]).await;
    let (r, deltas) = ask(&model(provider(&mock)), request("go")).await.unwrap();
    assert_eq!(deltas, ["Two calls: "]);
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!((r.tool_calls[0].id.as_str(), r.tool_calls[0].name.as_str()), ("c0", "calculator"));
    assert_eq!(r.tool_calls[0].arguments, Ok(json!({"expression": "1 + 1"})));
    assert_eq!(r.tool_calls[1].arguments, Ok(json!({"seconds": 0.1})));
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    let expected = Usage {
        input_tokens: 11,
        output_tokens: 7,
        cache_read_tokens: 4,
        reasoning_tokens: 2,
        total_tokens: 18,
        requests: 1,
    };
    assert_eq!(r.usage, expected);
    assert!(mock.requests()[0].body.get("tools").is_none(), "no tools offered, none sent");
}

#[tokio::test]
async fn a_whole_json_answer_is_read_with_or_without_streaming() {
    let completion = json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "Hello."}}], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}});
    let ok = || Reply::Json { status: 200, headers: vec![], body: completion.clone() };
    let mock = Mock::start(vec![ok(), ok()]).await;

    let mut p = provider(&mock);
    p.stream = false;
    let (r, deltas) = ask(&model(p), request("hi")).await.unwrap();
    assert_eq!(
        (r.text.as_deref(), r.finish_reason.as_deref(), r.usage.total_tokens),
        (Some("Hello."), Some("stop"), 7)
    );
    assert_eq!(deltas, ["Hello."]);
    let body = &mock.requests()[0].body;
    assert!(body.get("stream").is_none() && body.get("stream_options").is_none());

    // A server that ignores `stream: true` and answers whole is understood too.
    let (r, _) = ask(&model(provider(&mock)), request("hi")).await.unwrap();
    assert_eq!(r.text.as_deref(), Some("Hello."));
    assert_eq!(mock.requests()[1].body["stream"], true);
}

#[tokio::test]
async fn rate_limited_then_success_honours_retry_after() {
    let limited = Reply::Json {
        status: 429,
        headers: vec![("retry-after", "1".into())],
        body: json!({"error": {"message": "Rate limit reached", "type": "requests"}}),
    };
    let mock = Mock::start(vec![limited, Reply::sse(&[text("ok"), finish("stop")], 64)]).await;
    let started = Instant::now();
    let (r, _) = ask(&model(provider(&mock)), request("hi")).await.unwrap();
    let waited = started.elapsed();
    assert_eq!(r.text.as_deref(), Some("ok"));
    assert_eq!(mock.requests().len(), 2);
    // The configured backoff is a few ms: only Retry-After explains a second.
    assert!(waited >= Duration::from_millis(950) && waited < Duration::from_secs(5), "{waited:?}");
}

#[tokio::test]
async fn a_retry_after_longer_than_allowed_fails_at_once() {
    let limited = Reply::Json {
        status: 429,
        headers: vec![("retry-after", "3600".into())],
        body: json!({"error": {"message": "Quota exceeded"}}),
    };
    let mock = Mock::start(vec![limited]).await;
    let err = ask(&model(provider(&mock)), request("hi")).await.unwrap_err();
    assert_eq!(mock.requests().len(), 1);
    assert!(err.contains("429 Too Many Requests: Quota exceeded"), "{err}");
    assert!(err.contains("asked to retry after 3600s"), "{err}");
}

#[tokio::test]
async fn a_client_error_is_not_retried_and_the_key_is_scrubbed() {
    let echo = format!("Incorrect API key provided: {KEY}. You can find your API key at …");
    let mock = Mock::start(vec![Reply::error(401, &echo)]).await;
    let err = ask(&model(provider(&mock)), request("hi")).await.unwrap_err();
    assert_eq!(mock.requests().len(), 1);
    assert!(
        err.starts_with(
            "mock/gpt-test: the provider answered 401 Unauthorized: Incorrect API key provided: [redacted]"
        ),
        "{err}"
    );
    assert!(!err.contains(KEY));
}

#[tokio::test]
async fn connection_errors_are_retried_then_reported() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener); // nothing listens there now
    let mut p = ProviderConfig::new(base_url, &["gpt-test"]);
    p.max_retries = 1;
    p.backoff_initial_ms = 1;
    let err = ask(&model(p), request("hi")).await.unwrap_err();
    assert!(err.starts_with("mock/gpt-test: could not get an answer: error sending request"), "{err}");
    assert!(err.to_lowercase().contains("connect"), "{err}");
    assert!(err.ends_with("(gave up after 2 attempts)"), "{err}");
}

#[tokio::test]
async fn a_request_timeout_is_retried_then_reported() {
    let mock = Mock::start(vec![Reply::Stall(Duration::from_secs(10)), Reply::Stall(Duration::from_secs(10))]).await;
    let mut p = provider(&mock);
    p.request_timeout_secs = 1;
    p.max_retries = 1;
    // Each attempt stalls for 10 s: "timed out" on both shows the 1 s
    // request timeout cut them short.
    let err = ask(&model(p), request("hi")).await.unwrap_err();
    assert!(err.contains("timed out") && err.contains("gave up after 2 attempts"), "{err}");
}

#[tokio::test]
async fn a_broken_stream_fails_the_turn() {
    let cut = Reply::Stream {
        pieces: vec![mock::sse_body(&[text("half")]).replace("data: [DONE]\n\n", "").into()],
        delay: Duration::ZERO,
    };
    let error_event = Reply::sse(&[text("a"), json!({"error": {"message": "model crashed"}})], 1000);
    let garbage = Reply::Stream { pieces: vec!["data: {not json\n\n".into()], delay: Duration::ZERO };
    let mock = Mock::start(vec![cut, error_event, garbage]).await;
    let model = model(provider(&mock));
    let err = ask(&model, request("hi")).await.unwrap_err();
    assert_eq!(err, "mock/gpt-test: the stream ended before the answer was complete");
    let err = ask(&model, request("hi")).await.unwrap_err();
    assert_eq!(err, "mock/gpt-test: the provider reported an error mid-stream: model crashed");
    let err = ask(&model, request("hi")).await.unwrap_err();
    assert!(err.contains("not a Chat Completions chunk"), "{err}");
    assert_eq!(mock.requests().len(), 3, "a stream that started is not retried");
}
