//! A provider that sends no tool-call ids, through the engine and the mock:
//! the runner gives each call an id unique in the run, and the provider is
//! sent those same ids for the calls and their results on the next turns.

use runlens_engine::model::RunStatus;
use serde_json::{json, Value};

use super::mock::{Mock, Reply};
use super::*;
use crate::support::SETTLE;

/// A streamed tool call without an `id`, as some servers send.
fn call_without_id(index: usize, name: &str, args: &str) -> Value {
    json!({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": index, "type": "function", "function": {"name": name, "arguments": args}}]}}]})
}

#[tokio::test]
async fn calls_without_ids_get_ids_unique_in_the_run_and_the_provider_sees_them() {
    let turn = |expr: &str| {
        Reply::sse(
            &[call_without_id(0, "calculator", &json!({"expression": expr}).to_string()), finish("tool_calls")],
            17,
        )
    };
    let mock = Mock::start(vec![turn("1 + 1"), turn("2 + 2"), Reply::sse(&[text("4."), finish("stop")], 9)]).await;
    let (engine, _dir) = engine_with(provider(&mock)).await;
    let (run, _) = engine.runs().create_run(run_of("add twice", json!({}))).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);

    let steps = engine.runs().steps(&run.id).await.unwrap();
    let ids: Vec<String> = steps.iter().flat_map(|s| s.tool_calls.iter().map(|c| c.id.clone())).collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1], "no id repeats across turns");

    // The last request carries both calls and both results, paired by id.
    let sent = mock.requests();
    let messages = sent[2].body["messages"].as_array().unwrap();
    let called: Vec<&str> = messages
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    let answered: Vec<&str> = messages.iter().filter_map(|m| m["tool_call_id"].as_str()).collect();
    assert_eq!(called, ids);
    assert_eq!(answered, ids);
}
