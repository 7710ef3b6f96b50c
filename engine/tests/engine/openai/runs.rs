//! Whole runs through the OpenAI-compatible provider, driven by the engine
//! against the mock server: a tool call then an answer, failures recorded on
//! the run without the key, malformed tool arguments, cancellation, settings.

use std::time::Duration;

use runlens_engine::events::EventKind;
use runlens_engine::llm::{ApiKey, ProviderConfig};
use runlens_engine::model::{RunStatus, ToolCallStatus, Usage};
use runlens_engine::RunlensConfig;
use runlens_engine::{Engine, EngineConfig};
use serde_json::{json, Value};

use super::mock::{Mock, Reply};
use super::*;
use crate::support::{db_url, test_tools, SETTLE};

#[tokio::test]
async fn a_whole_run_goes_through_the_provider() {
    let mock = Mock::start(vec![
        Reply::sse(
            &[
                text("Let me compute."),
                call_start(0, "call_a", "calculator", "{\"expre"),
                call_args(0, "ssion\": \"6 * 7\"}"),
                finish("tool_calls"),
                usage(20, 5, 0, 0),
            ],
            9,
        ),
        Reply::sse(&[text("The answer "), text("is 42."), finish("stop"), usage(40, 8, 16, 3)], 13),
    ])
    .await;
    let (engine, _dir) = engine_with(provider(&mock)).await;
    let mut events = engine.subscribe();
    let settings = json!({"temperature": 0.2, "max_tokens": 256, "top_p": 0.9, "seed": 7});
    let (run, _) = engine.runs().create_run(run_of("What is 6 * 7?", settings.clone())).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();

    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    assert_eq!(run.result, Some(json!("The answer is 42.")));
    let expected = Usage {
        input_tokens: 60,
        output_tokens: 13,
        cache_read_tokens: 16,
        reasoning_tokens: 3,
        total_tokens: 73,
        requests: 2,
    };
    assert_eq!(run.usage, expected);

    let steps = engine.runs().steps(&run.id).await.unwrap();
    assert_eq!(steps.len(), 2);
    let call = &steps[0].tool_calls[0];
    assert_eq!(
        (call.id.as_str(), call.tool_name.as_str(), call.status),
        ("call_a", "calculator", ToolCallStatus::Succeeded)
    );
    assert_eq!(call.result.as_ref().unwrap()["value"], 42);
    assert_eq!(steps[0].response.finish_reason(), Some("tool_calls"));
    assert_eq!(steps[1].response.finish_reason(), Some("stop"));
    assert_eq!(steps[1].usage.cache_read_tokens, 16);
    assert_eq!(
        steps[0].request.settings.clone().map(Value::Object),
        Some(settings),
        "the passed-through settings are recorded on the step"
    );
    assert_eq!(steps[0].request.model.as_deref(), Some(MODEL));

    // What the client sent.
    let sent = mock.requests();
    assert_eq!(sent.len(), 2);
    for seen in &sent {
        assert_eq!(seen.headers["authorization"], format!("Bearer {KEY}").as_str());
        assert_eq!(seen.headers["content-type"], "application/json");
        let b = &seen.body;
        assert_eq!((b["model"].clone(), b["stream"].clone()), (json!("gpt-test"), json!(true)));
        assert_eq!(b["stream_options"], json!({"include_usage": true}));
        assert_eq!(
            (b["temperature"].clone(), b["max_tokens"].clone(), b["top_p"].clone(), b["seed"].clone()),
            (json!(0.2), json!(256), json!(0.9), json!(7))
        );
        assert_eq!(b["tools"].as_array().unwrap().len(), 1);
        assert_eq!(b["tools"][0]["type"], "function");
        assert_eq!(b["tools"][0]["function"]["name"], "calculator");
        assert_eq!(b["tools"][0]["function"]["parameters"]["type"], "object");
    }
    let first = sent[0].body["messages"].as_array().unwrap();
    assert_eq!(first.len(), 2);
    assert_eq!(first[0], json!({"role": "system", "content": "Be brief."}));
    assert_eq!((first[1]["role"].as_str(), first[1]["content"].as_str()), (Some("user"), Some("What is 6 * 7?")));
    let second = sent[1].body["messages"].as_array().unwrap();
    let roles: Vec<&str> = second.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool"]);
    assert_eq!(second[2]["content"], "Let me compute.");
    assert_eq!(second[2]["tool_calls"][0]["id"], "call_a");
    assert_eq!(second[2]["tool_calls"][0]["function"]["name"], "calculator");
    let args: Value =
        serde_json::from_str(second[2]["tool_calls"][0]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"expression": "6 * 7"}));
    assert_eq!(second[3]["tool_call_id"], "call_a");
    assert!(second[3]["content"].as_str().unwrap().contains("42"));

    // Text deltas reached the run's event stream.
    let mut deltas = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let EventKind::MessageDelta { step_index: 1, text } = e.kind {
            deltas.push(text);
        }
    }
    assert_eq!(deltas, ["The answer ", "is 42."]);
    assert!(!serde_json::to_string(&engine.runs().trace(&run.id).await.unwrap()).unwrap().contains(KEY));
}

#[tokio::test]
async fn server_errors_exhaust_the_retries_and_fail_the_run() {
    let mock = Mock::start((0..3).map(|_| Reply::error(500, "upstream exploded")).collect()).await;
    let mut p = provider(&mock);
    p.max_retries = 2;
    let (engine, _dir) = engine_with(p).await;
    let mut events = engine.subscribe();
    let (run, _) = engine.runs().create_run(run_of("hi", Value::Null)).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();

    assert_eq!(run.status, RunStatus::Failed);
    let reason = run.failure_reason.clone().unwrap();
    assert_eq!(
        reason,
        "model error: mock/gpt-test: the provider answered 500 Internal Server Error: upstream exploded \
        (gave up after 3 attempts)"
    );
    assert_eq!(mock.requests().len(), 3, "bounded: 1 attempt + max_retries");
    let trace = serde_json::to_string(&engine.runs().trace(&run.id).await.unwrap()).unwrap();
    assert!(trace.contains("upstream exploded") && !trace.contains(KEY));
    while let Ok(e) = events.try_recv() {
        assert!(!serde_json::to_string(&e).unwrap().contains(KEY));
    }
}

#[tokio::test]
async fn malformed_tool_arguments_go_back_to_the_model() {
    let mock = Mock::start(vec![
        Reply::sse(&[call_start(0, "call_bad", "calculator", "{\"expression\": 6 *"), finish("tool_calls")], 7),
        Reply::sse(&[text("Sorry, let me stop."), finish("stop")], 64),
    ])
    .await;
    let (engine, _dir) = engine_with(provider(&mock)).await;
    let (run, _) = engine.runs().create_run(run_of("6*7?", Value::Null)).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);

    let call = &engine.runs().steps(&run.id).await.unwrap()[0].tool_calls[0];
    assert_eq!(call.status, ToolCallStatus::Failed);
    assert!(call.error.as_deref().unwrap().contains("not valid JSON"));
    let messages = &mock.requests()[1].body["messages"];
    let assistant = messages.as_array().unwrap().iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["tool_calls"][0]["function"]["arguments"], "{\"expression\": 6 *", "sent back verbatim");
    let tool = messages.as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["tool_call_id"], "call_bad");
    assert!(tool["content"].as_str().unwrap().contains("not valid JSON"));
}

#[tokio::test]
async fn cancel_interrupts_a_streaming_request() {
    let ticks: Vec<Value> = (0..100).map(|i| text(&format!("tick {i} "))).collect();
    let pieces = ticks.iter().map(|e| format!("data: {e}\n\n").into()).collect();
    let mock = Mock::start(vec![Reply::Stream { pieces, delay: Duration::from_millis(50) }]).await;
    let (engine, _dir) = engine_with(provider(&mock)).await;
    let mut events = engine.subscribe();
    let (run, _) = engine.runs().create_run(run_of("count", Value::Null)).await.unwrap();
    // Wait until text is flowing.
    let first_delta = async {
        loop {
            if let EventKind::MessageDelta { .. } = events.recv().await.unwrap().kind {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), first_delta).await.expect("text streams");

    // `Engine::cancel` gives up waiting for the driver after 10 s; finishing
    // inside 9 s means the in-flight request did not hold the driver up.
    let cancelled = tokio::time::timeout(Duration::from_secs(9), engine.runs().cancel(&run.id))
        .await
        .expect("the cancel is not held up by the in-flight request")
        .unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    // The server sees the client go away: its body stream is dropped early.
    let dropped = async {
        while mock.streams_dropped() == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(3), dropped).await.expect("the connection was closed");
    assert!(mock.pieces_sent() < 100, "stopped after {} of 100 pieces", mock.pieces_sent());
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn bad_settings_are_refused_when_the_run_is_created() {
    let mock = Mock::start(vec![]).await;
    let (engine, _dir) = engine_with(provider(&mock)).await;
    let err = engine.runs().create_run(run_of("hi", json!({"temperature": 5}))).await.unwrap_err();
    assert!(err.to_string().contains("temperature must be a number from 0 to 2"), "{err}");
    let err = engine.runs().create_run(run_of("hi", json!({"script": []}))).await.unwrap_err();
    assert!(err.to_string().contains("not supported"), "{err}");
    assert!(mock.requests().is_empty());
    assert!(engine.models().contains(&MODEL.to_owned()));
}

/// A whole run against a real OpenAI-compatible server, when one is named:
/// `RUNLENS_LIVE_BASE_URL=http://127.0.0.1:4000/v1 RUNLENS_LIVE_MODEL=NAME
/// [RUNLENS_LIVE_API_KEY=…] cargo test -p runlens-engine --test engine live -- --ignored --nocapture`
#[tokio::test]
#[ignore = "needs a live OpenAI-compatible server named by RUNLENS_LIVE_BASE_URL"]
async fn live_server_runs_to_an_answer() {
    let Ok(base_url) = std::env::var("RUNLENS_LIVE_BASE_URL") else {
        return eprintln!("RUNLENS_LIVE_BASE_URL is not set; nothing to test");
    };
    let name = std::env::var("RUNLENS_LIVE_MODEL").unwrap_or_else(|_| "gpt-4.1-mini".into());
    let mut p = ProviderConfig::new(base_url, &[name.as_str()]);
    p.api_key = std::env::var("RUNLENS_LIVE_API_KEY").ok().map(ApiKey::new);
    let mut config = RunlensConfig::default();
    config.providers.insert("live".into(), p);
    let dir = crate::support::test_db();
    let store = crate::support::open_store(&db_url(&dir)).await;
    let engine = Engine::with_parts(store, test_tools(), config.registry(|_| None).unwrap(), EngineConfig::default());
    let mut req = run_of(
        "What is 6 * 7? Use the calculator tool, then answer in one sentence.",
        json!({"temperature": 0, "max_tokens": 200, "seed": 1}),
    );
    req.model = Some(format!("live/{name}"));
    let (run, _) = engine.runs().create_run(req).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, Duration::from_secs(300)).await.unwrap();
    for step in engine.runs().steps(&run.id).await.unwrap() {
        eprintln!("step {}: {:?}\n  usage {:?}", step.index, step.response, step.usage);
    }
    eprintln!("{:?}: result {:?}, failure {:?}, usage {:?}", run.status, run.result, run.failure_reason, run.usage);
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
}

/// A step's model call (`Traces::model_call`) is what the provider got:
/// its request body equals, byte for byte as JSON, the body the server
/// received on that turn, with the messages as sent; its response carries
/// the answer and usage; the key appears nowhere. At most the latest
/// `max_messages` messages come back, the rest counted.
#[tokio::test]
async fn a_model_call_is_exactly_what_the_provider_got() {
    let mock = Mock::start(vec![
        Reply::sse(
            &[
                text("Let me compute."),
                call_start(0, "call_a", "calculator", "{\"expression\": \"6 * 7\"}"),
                finish("tool_calls"),
                usage(20, 5, 0, 0),
            ],
            9,
        ),
        Reply::sse(&[text("The answer "), text("is 42."), finish("stop"), usage(40, 8, 16, 3)], 13),
    ])
    .await;
    let (engine, _dir) = engine_with(provider(&mock)).await;
    let settings = json!({"temperature": 0.2, "max_tokens": 256});
    let (run, _) = engine.runs().create_run(run_of("What is 6 * 7?", settings)).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);

    let sent = mock.requests();
    assert_eq!(sent.len(), 2);
    for (index, seen) in sent.iter().enumerate() {
        let call = engine.traces().model_call(&run.id, index as u32, 200).await.unwrap();
        assert_eq!(call.request_body, seen.body, "step {index}: the body the provider received");
        assert_eq!(call.model, MODEL);
        assert_eq!(call.system_prompt.as_deref(), Some("Be brief."));
        assert!(call.system_prompt_known);
        assert_eq!(call.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["calculator"]);
        assert_eq!((call.omitted_messages, call.dropped_messages), (0, 0));
        assert!(!serde_json::to_string(&call).unwrap().contains(KEY), "no credential in a model call");
    }
    let first = engine.traces().model_call(&run.id, 0, 200).await.unwrap();
    assert_eq!(first.messages.len(), 1, "the prompt");
    let response = first.response_body.unwrap();
    assert_eq!(response["choices"][0]["message"]["content"], "Let me compute.");
    assert_eq!(response["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "calculator");
    assert_eq!(response["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(response["usage"]["prompt_tokens"], 20);

    let second = engine.traces().model_call(&run.id, 1, 200).await.unwrap();
    assert_eq!(second.messages.len(), 3, "prompt, the assistant's call, its result");
    let response = second.response_body.unwrap();
    assert_eq!(response["choices"][0]["message"]["content"], "The answer is 42.");
    assert_eq!(response["usage"]["prompt_tokens_details"]["cached_tokens"], 16);

    // Bounded: only the latest message, the two before counted.
    let latest = engine.traces().model_call(&run.id, 1, 1).await.unwrap();
    assert_eq!((latest.messages.len(), latest.omitted_messages), (1, 2));
    assert_eq!(latest.messages[0].seq, 2);

    let missing = engine.traces().model_call(&run.id, 7, 200).await.unwrap_err();
    assert!(matches!(missing, runlens_engine::EngineError::NotFound(_)), "{missing}");
    let unknown = engine.traces().model_call("no-such-run", 0, 200).await.unwrap_err();
    assert!(matches!(unknown, runlens_engine::EngineError::NotFound(_)), "{unknown}");
}
