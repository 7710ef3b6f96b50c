//! Unit tests of the wire format: settings, request mapping, chunk reading,
//! error messages and key scrubbing. (HTTP behaviour is tested against a
//! mock server in `tests/engine/openai`.)

use chrono::Utc;
use serde_json::{json, Value};

use super::wire::{error_message, StreamChunk};
use super::*;
use crate::llm::ModelChunk;
use crate::model::{Invocation, Message, MessageBody, ResultType, ToolInfo, Usage};

fn msg(seq: u64, body: MessageBody) -> std::sync::Arc<Message> {
    Message { id: format!("m{seq}"), run_id: "r".into(), seq, step_index: None, created_at: Utc::now(), body }.into()
}

fn chunks(data: Value) -> Result<Vec<ModelChunk>, String> {
    let chunk: StreamChunk = serde_json::from_value(data).unwrap();
    let mut out = Vec::new();
    chunk.into_chunks(&mut out).map(|()| out)
}

#[test]
fn settings_are_checked() {
    assert!(validate_settings(&Value::Null, None).is_ok());
    assert!(
        validate_settings(&json!({"temperature": 0.2, "top_p": 1, "max_tokens": 100, "seed": -7}), Some(1000)).is_ok()
    );
    let err = |v: Value| validate_settings(&v, Some(1000)).unwrap_err();
    assert!(err(json!({"temperature": 3})).contains("temperature must be a number from 0 to 2"));
    assert!(err(json!({"top_p": "high"})).contains("top_p must be"));
    assert!(err(json!({"max_tokens": 0})).contains("max_tokens"));
    assert!(err(json!({"max_tokens": 5000})).contains("context window (1000)"));
    assert!(err(json!({"seed": 1.5})).contains("seed must be an integer"));
    assert!(err(json!({"script": []})).contains("accepts temperature, max_tokens, top_p, seed"));
    // A run's own context window is accepted (for the runner) and bounds max_tokens.
    assert!(validate_settings(&json!({"context_window": 4096, "max_tokens": 2000}), Some(1000)).is_ok());
    assert!(err(json!({"context_window": 4096, "max_tokens": 5000})).contains("context window (4096)"));
    assert!(err(json!({"context_window": 10})).contains("from 256 to 10000000"));
    assert!(err(json!({"context_window": 10_000_001})).contains("from 256 to 10000000"));
    assert!(err(json!({"temperature": 1e300})).contains("temperature must be a number from 0 to 2, not"));
    assert!(err(json!({"top_p": -0.5})).contains("top_p must be a number from 0 to 1"));
    assert!(err(json!({"seed": u64::MAX})).contains("seed must be an integer from"));
    // Without any window, max_tokens is bounded by the largest one.
    assert!(validate_settings(&json!({"max_tokens": 10_000_000, "seed": null}), None).is_ok());
    assert!(validate_settings(&json!({"max_tokens": 10_000_001}), None).unwrap_err().contains("1 to 10000000"));
    assert!(err(json!([1])).contains("JSON object"));
}

#[test]
fn the_transcript_maps_onto_chat_messages() {
    let req = ModelRequest {
        run_id: "r".into(),
        system_prompt: Some("Be brief.".into()),
        messages: vec![
            msg(0, MessageBody::Human { message: "6*7 and 1+?".into() }),
            msg(
                1,
                MessageBody::Agent {
                    message: None,
                    result: None,
                    invocations: vec![
                        Invocation {
                            id: "c1".into(),
                            tool_name: "calculator".into(),
                            reasoning: None,
                            input: json!({"expression": "6*7"}),
                        },
                        Invocation {
                            id: "c2".into(),
                            tool_name: "calculator".into(),
                            reasoning: None,
                            input: json!("{\"expression\": 1+"),
                        },
                    ],
                },
            ),
            msg(
                2,
                MessageBody::InvocationResult {
                    id: "c1".into(),
                    tool_name: "calculator".into(),
                    result_type: ResultType::Resolution,
                    result: json!({"value": 42}),
                },
            ),
            msg(
                3,
                MessageBody::InvocationResult {
                    id: "c2".into(),
                    tool_name: "calculator".into(),
                    result_type: ResultType::Rejection,
                    result: json!({"error": "not valid JSON"}),
                },
            ),
            msg(4, MessageBody::Agent { message: Some("42".into()), result: Some(json!("42")), invocations: vec![] }),
        ],
        tools: vec![ToolInfo {
            name: "calculator".into(),
            description: "Maths.".into(),
            schema: json!({"type": "object"}),
            requires_approval: false,
            source: "builtin".into(),
            idempotent: true,
        }],
        settings: json!({"temperature": 0.5, "seed": 3, "latency_ms": 9, "context_window": 4096}).into(),
        ..ModelRequest::default()
    };
    let body = request_body("gpt-test", &req, true);
    assert_eq!(body["model"], "gpt-test");
    let roles: Vec<&str> = body["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "tool", "assistant"]);
    let m = &body["messages"];
    assert_eq!(m[2]["content"], Value::Null);
    assert_eq!(
        m[2]["tool_calls"][0],
        json!({"id": "c1", "type": "function",
        "function": {"name": "calculator", "arguments": "{\"expression\":\"6*7\"}"}})
    );
    assert_eq!(m[2]["tool_calls"][1]["function"]["arguments"], "{\"expression\": 1+", "raw text goes back verbatim");
    assert_eq!(m[3], json!({"role": "tool", "tool_call_id": "c1", "content": "{\"value\":42}"}));
    assert_eq!(m[4]["tool_call_id"], "c2");
    assert_eq!(m[5], json!({"role": "assistant", "content": "42"}));
    assert_eq!(
        body["tools"][0],
        json!({"type": "function", "function": {"name": "calculator",
        "description": "Maths.", "parameters": {"type": "object"}}})
    );
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!((body["temperature"].clone(), body["seed"].clone()), (json!(0.5), json!(3)));
    assert!(
        body.get("latency_ms").is_none() && body.get("max_tokens").is_none() && body.get("context_window").is_none()
    );

    let plain = request_body("m", &ModelRequest { tools: vec![], system_prompt: None, ..req }, false);
    assert!(plain.get("stream").is_none() && plain.get("stream_options").is_none() && plain.get("tools").is_none());
    assert_eq!(plain["messages"][0]["role"], "user");
}

#[test]
fn stream_chunks_become_model_chunks() {
    let got = chunks(
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}, "finish_reason": null}]}),
    );
    assert_eq!(got.unwrap(), [ModelChunk::TextDelta("Hi".into())]);
    let got = chunks(json!({"choices": [{"delta": {"tool_calls": [
        {"index": 1, "id": "c2", "type": "function", "function": {"name": "wait", "arguments": ""}}]}}]}));
    assert_eq!(
        got.unwrap(),
        [ModelChunk::ToolCallDelta {
            index: 1,
            id: Some("c2".into()),
            name: Some("wait".into()),
            arguments: String::new()
        }]
    );
    let got =
        chunks(json!({"choices": [{"delta": {"tool_calls": [{"index": 1, "function": {"arguments": "{\"s\":"}}]}}]}));
    assert_eq!(
        got.unwrap(),
        [ModelChunk::ToolCallDelta { index: 1, id: None, name: None, arguments: "{\"s\":".into() }]
    );
    let got = chunks(json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14,
        "prompt_tokens_details": {"cached_tokens": 6}, "completion_tokens_details": {"reasoning_tokens": 2}}}));
    let usage = Usage {
        input_tokens: 10,
        output_tokens: 4,
        cache_read_tokens: 6,
        reasoning_tokens: 2,
        total_tokens: 14,
        requests: 1,
    };
    assert_eq!(got.unwrap(), [ModelChunk::Usage(usage)]);
    let got = chunks(json!({"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": null}));
    assert_eq!(got.unwrap(), [ModelChunk::Finish("stop".into())]);
    let got = chunks(json!({"error": {"message": "overloaded", "code": 503}}));
    assert_eq!(got.unwrap_err(), "overloaded");
}

#[test]
fn a_whole_answer_becomes_model_chunks() {
    let got =
        chunks(json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "calculator", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "wait", "arguments": {"seconds": 1}}}]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2}}))
        .unwrap();
    assert_eq!(
        got[0],
        ModelChunk::ToolCallDelta {
            index: 0,
            id: Some("a".into()),
            name: Some("calculator".into()),
            arguments: "{}".into()
        }
    );
    assert_eq!(
        got[1],
        ModelChunk::ToolCallDelta {
            index: 1,
            id: Some("b".into()),
            name: Some("wait".into()),
            arguments: "{\"seconds\":1}".into()
        }
    );
    assert_eq!(got[2], ModelChunk::Finish("tool_calls".into()));
    assert!(matches!(got[3], ModelChunk::Usage(Usage { total_tokens: 5, .. })));
}

#[test]
fn provider_errors_are_read_from_their_many_shapes() {
    assert_eq!(
        error_message(r#"{"error": {"message": "Rate limit reached", "type": "requests"}}"#),
        "Rate limit reached"
    );
    assert_eq!(error_message(r#"{"error": "model not found"}"#), "model not found");
    assert_eq!(error_message(r#"{"detail": "Not Found"}"#), "Not Found");
    assert_eq!(error_message("<html>Bad Gateway</html>\n"), "<html>Bad Gateway</html>");
    assert_eq!(error_message(""), "(empty body)");
    assert_eq!(error_message(&"x".repeat(600)).chars().count(), 501);
}

#[test]
fn errors_never_carry_the_key_and_debug_redacts_it() {
    let ctx = Ctx { label: "openai/gpt".into(), key: Some(ApiKey::new("sk-secret-123")) };
    let e =
        ctx.error(ProviderFailure::Status { status: 401, message: "Incorrect API key provided: sk-secret-123".into() });
    assert_eq!(
        e.to_string(),
        "openai/gpt: the provider answered 401 Unauthorized: Incorrect API key provided: [redacted]"
    );
    let mut config = ProviderConfig::new("http://127.0.0.1:1/v1", &["m"]);
    config.api_key = Some(ApiKey::new("sk-secret-123"));
    let provider = Arc::new(OpenAiProvider::new("p", &config).unwrap());
    for shown in [format!("{config:?}"), format!("{provider:?}"), format!("{:?}", provider.model("m"))] {
        assert!(!shown.contains("sk-secret"), "{shown}");
        assert!(shown.contains("redacted"), "{shown}");
    }
}
