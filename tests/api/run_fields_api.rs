//! The run fields that came with saved agents, through the API: input
//! items, the output union, offset paging and unknown query parameters,
//! metadata, and steps by index or id.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;

use crate::agents_api::{ids, refusal};
use crate::support::app;

#[tokio::test]
async fn input_items_seed_the_transcript_and_malformed_ones_are_refused() {
    let app = app().await;
    // Empty optional keys are as good as absent.
    let items = json!([
        {"type": "human", "data": {"message": "What is 2+2?"}},
        {"type": "agent", "data": {"message": "Let me add.", "result": null, "invocations": []}},
        {"type": "agent", "data": {"invocations": [
            {"id": "c1", "toolName": "calculator", "input": {"expression": "2+2"}}]}},
        {"type": "invocation-result", "data": {"id": "c1", "toolName": "calculator", "resultType": "resolution",
            "result": {"value": 4}}},
        {"type": "agent", "data": {"message": "It is 4."}},
    ]);
    let run = app.settled(json!({"initial_prompt": "And what is 6*7?", "input_items": items})).await;
    assert_eq!(run["status"], "done", "{run}");
    let id = run["id"].as_str().unwrap();
    let messages = app.get(&format!("/api/runs/{id}/messages")).await.json();
    let messages = messages["messages"].as_array().unwrap();
    let types: Vec<&str> = messages.iter().map(|m| m["type"].as_str().unwrap()).collect();
    assert_eq!(&types[..6], ["human", "agent", "agent", "invocation-result", "agent", "human"]);
    assert_eq!(messages[0]["data"]["message"], "What is 2+2?");
    assert_eq!(messages[2]["data"]["invocations"][0]["id"], "c1");
    assert_eq!(messages[4]["data"]["message"], "It is 4.");
    assert_eq!(messages[5]["data"]["message"], "And what is 6*7?", "the prompt comes after the items");

    let unanswered = json!([{"type": "agent", "data": {"invocations": [
        {"id": "c9", "toolName": "calculator", "input": {"expression": "1"}}]}}]);
    let orphan = json!([{"type": "invocation-result", "data": {"id": "c9", "toolName": "calculator",
        "resultType": "resolution", "result": 1}}]);
    let cases = [
        (unanswered, "input_items: the invocation `c9` has no invocation-result item"),
        (orphan, "input_items[0]: no open invocation `c9` for this result"),
        (json!([{"type": "human", "data": {"message": ""}}]), "input_items[0]: a human message must not be empty"),
        (json!([{"type": "robot", "data": {}}]), "unknown variant `robot`"),
        (json!({"type": "human"}), "invalid type"),
        // A key an item does not keep is refused, not dropped, wherever it is.
        (json!([{"type": "human", "data": {"message": "hi"}, "usage": {"input_tokens": 3}}]), "unknown field `usage`"),
        (json!([{"type": "human", "data": {"message": "hi", "name": "ada"}}]), "unknown field `data.name`"),
        (
            json!([{"type": "agent", "data": {"invocations": [
                {"id": "c1", "tool_name": "calculator", "toolName": "calculator", "input": {}}]}},
                {"type": "invocation-result", "data": {"id": "c1", "toolName": "calculator",
                    "resultType": "resolution", "result": 1}}]),
            "unknown field `data.invocations.0.tool_name`",
        ),
    ];
    for (items, expected) in cases {
        let body = json!({"initial_prompt": "x", "input_items": items});
        let message = refusal(&app.post_json("/api/runs", &body.to_string()).await, StatusCode::BAD_REQUEST);
        assert!(message.contains(expected), "{items}: {message} / {expected}");
    }
    assert_eq!(app.get("/api/runs").await.json()["runs"].as_array().unwrap().len(), 1, "nothing more was stored");
}

#[tokio::test]
async fn the_output_union_says_how_a_run_ended() {
    let app = app().await;
    let last = app.settled(json!({"initial_prompt": "hi", "model_settings": {"script": [{"text": "Hello!"}]}})).await;
    assert_eq!(last["output"], json!({"type": "last_message", "message": "Hello!", "value": "Hello!"}));

    let schema = json!({"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]});
    let structured = app
        .settled(json!({"initial_prompt": "2+2?", "result_schema": schema,
            "model_settings": {"script": [{"text": "{\"answer\": 4}"}]}}))
        .await;
    assert_eq!(structured["status"], "done", "{structured}");
    assert_eq!(structured["output"], json!({"type": "structured", "value": {"answer": 4}}));

    let failed = app
        .settled(json!({"initial_prompt": "x", "model_settings": {"script": [
            {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}]}]}}))
        .await;
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["output"]["type"], "error");
    assert_eq!(failed["output"]["message"], failed["failure_reason"]);

    let body = json!({"initial_prompt": "wait", "model_settings": {"script": [
        {"tool_calls": [{"name": "wait", "arguments": {"seconds": 60}}]}, {"text": "late"}]}});
    let id = app.post_json("/api/runs", &body.to_string()).await.json()["id"].as_str().unwrap().to_owned();
    let running = app.get(&format!("/api/runs/{id}")).await.json();
    assert!(running["output"].is_null(), "no output while active: {running}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cancelled = app.post_json(&format!("/api/runs/{id}/cancel"), "").await.json();
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(app.get(&format!("/api/runs/{id}")).await.json()["output"]["type"], "error");
}

#[tokio::test]
async fn runs_page_by_offset_and_unknown_parameters_are_refused() {
    let app = app().await;
    for n in 0..5 {
        app.settled(json!({"initial_prompt": format!("run {n}"), "model_settings": {"script": [{"text": "ok"}]}}))
            .await;
    }
    let all = ids(&app.get("/api/runs").await.json(), "runs");
    assert_eq!(all.len(), 5);
    let mut by_offset = Vec::new();
    for offset in [0, 2, 4] {
        let page = app.get(&format!("/api/runs?limit=2&offset={offset}")).await.json();
        by_offset.extend(ids(&page, "runs"));
        assert_eq!(page["next_cursor"].is_null(), offset == 4, "{page}");
    }
    assert_eq!(by_offset, all, "offset pages are the list in order, no repeats");
    // Cursors and offsets agree.
    let first = app.get("/api/runs?limit=2").await.json();
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = app.get(&format!("/api/runs?limit=2&cursor={}", crate::support::urlencode(cursor))).await.json();
    assert_eq!(ids(&second, "runs"), all[2..4]);
    assert!(ids(&app.get("/api/runs?offset=5").await.json(), "runs").is_empty());

    let both = app.get(&format!("/api/runs?offset=2&cursor={}", crate::support::urlencode(cursor))).await;
    assert_eq!(refusal(&both, StatusCode::BAD_REQUEST), "offset and cursor cannot be combined");
    let far = refusal(&app.get("/api/runs?offset=100001").await, StatusCode::BAD_REQUEST);
    assert!(far.starts_with("offset must be a number from 0 to 100000"), "{far}");

    // An unknown parameter is a 400 naming it, on every operation: with a
    // query of its own or none.
    let run = &all[0];
    for uri in [
        "/api/runs?tenant_id=x".to_owned(),
        "/api/runs?limit=2&tenant_id=x".to_owned(),
        "/api/agents?tenant_id=x".to_owned(),
        "/api/approvals?status=decided&tenant_id=x".to_owned(),
        "/api/keys?tenant_id=x".to_owned(),
        "/api/audit?tenant_id=x".to_owned(),
        "/api/users?tenant_id=x".to_owned(),
        format!("/api/runs/{run}/steps?tenant_id=x"),
        format!("/api/runs/{run}/messages?tenant_id=x"),
        format!("/api/runs/{run}/state?tenant_id=x"),
        format!("/api/runs/{run}?tenant_id=x"),
        format!("/api/runs/{run}/children?tenant_id=x"),
        "/api/tools?tenant_id=x".to_owned(),
    ] {
        let message = refusal(&app.get(&uri).await, StatusCode::BAD_REQUEST);
        assert!(message.starts_with("unknown query parameter `tenant_id`"), "{uri}: {message}");
    }
    let listed = refusal(&app.get("/api/runs?tenant_id=x").await, StatusCode::BAD_REQUEST);
    assert!(listed.contains("`offset`") && listed.contains("`cursor`"), "the known ones are named: {listed}");
    let none = refusal(&app.get(&format!("/api/runs/{run}?x=1")).await, StatusCode::BAD_REQUEST);
    assert_eq!(none, "unknown query parameter `x`: this operation takes none");
    let post = app.post_json("/api/runs?tenant_id=x", r#"{"initial_prompt": "hi"}"#).await;
    assert!(refusal(&post, StatusCode::BAD_REQUEST).contains("`tenant_id`"));
    assert_eq!(ids(&app.get("/api/runs").await.json(), "runs").len(), 5, "the refused create stored nothing");
    // The public documents and the health check take what probes and caches add.
    for uri in ["/healthz?probe=1", "/api/openapi.json?v=2"] {
        assert_eq!(app.get(uri).await.status, StatusCode::OK, "{uri}");
    }
    // Known parameters, empty or not, still work.
    assert_eq!(app.get("/api/runs?limit=&offset=&all=&metadata=").await.status, StatusCode::OK);
}

#[tokio::test]
async fn runs_are_filtered_and_searched_by_metadata() {
    let app = app().await;
    let script = json!({"script": [{"text": "ok"}]});
    let one = app
        .settled(json!({"initial_prompt": "a", "model_settings": script,
            "metadata": {"ticket": "T-100", "priority": 2, "urgent": true, "nested": {"k": 1}}}))
        .await;
    let two =
        app.settled(json!({"initial_prompt": "b", "model_settings": script, "metadata": {"ticket": "T-200"}})).await;
    app.settled(json!({"initial_prompt": "c", "model_settings": script})).await;
    assert_eq!(one["metadata"]["nested"], json!({"k": 1}), "shown on the run");
    assert_eq!(two["metadata"], json!({"ticket": "T-200"}));

    for (filter, expected) in [
        ("ticket:T-100", vec![&one]),
        ("ticket:T-200", vec![&two]),
        ("priority:2", vec![&one]),
        ("urgent:true", vec![&one]),
        ("urgent:false", vec![]),
        ("ticket:T-3", vec![]),
    ] {
        let uri = format!("/api/runs?metadata={}", crate::support::urlencode(filter));
        let found = ids(&app.get(&uri).await.json(), "runs");
        let want: Vec<String> = expected.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
        assert_eq!(found, want, "{filter}");
    }
    let searched = ids(&app.get("/api/runs?q=T-200").await.json(), "runs");
    assert_eq!(searched, [two["id"].as_str().unwrap()], "q searches metadata");
    let bad = refusal(&app.get("/api/runs?metadata=no-colon").await, StatusCode::BAD_REQUEST);
    assert!(bad.starts_with("metadata must be `key:value`"), "{bad}");
    let not_object = app.post_json("/api/runs", r#"{"initial_prompt": "x", "metadata": [1]}"#).await;
    assert_eq!(refusal(&not_object, StatusCode::BAD_REQUEST), "metadata must be a JSON object");
}

#[tokio::test]
async fn steps_are_read_by_index_or_id() {
    let app = app().await;
    let run = app.finished_run(r#"{"initial_prompt": "What is (12 + 30) * 2?"}"#).await;
    let id = run["id"].as_str().unwrap();
    let steps = app.get(&format!("/api/runs/{id}/steps")).await.json();
    let step_ids: Vec<&str> = steps["steps"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(step_ids, [format!("{id}:s0"), format!("{id}:s1")]);
    let outline = app.get(&format!("/api/runs/{id}/outline")).await.json();
    assert_eq!(outline["steps"][1]["id"], format!("{id}:s1"));
    let light = app.get(&format!("/api/runs/{id}/steps?payloads=false")).await.json();
    assert_eq!(light["steps"][0]["id"], format!("{id}:s0"));

    let by_index = app.get(&format!("/api/runs/{id}/steps/1")).await;
    assert_eq!(by_index.status, StatusCode::OK, "{}", by_index.text);
    let by_id = app.get(&format!("/api/runs/{id}/steps/{id}:s1")).await.json();
    assert_eq!(by_index.json(), by_id);
    assert_eq!((by_id["index"].as_u64(), by_id["id"].as_str()), (Some(1), Some(format!("{id}:s1").as_str())));
    assert!(by_id.get("cost_usd").is_some());
    let from_id = app.get(&format!("/api/runs/{id}/steps?from={id}:s1")).await.json();
    assert_eq!(from_id["steps"].as_array().unwrap().len(), 1);
    assert_eq!(from_id["steps"][0]["index"], 1);

    for step in ["2", "other:s0", "s1", "x"] {
        let message = refusal(&app.get(&format!("/api/runs/{id}/steps/{step}")).await, StatusCode::NOT_FOUND);
        assert_eq!(message, format!("step `{step}` not found in run `{id}`"));
    }
    let message = refusal(&app.get(&format!("/api/runs/{id}/steps?from=other:s0")).await, StatusCode::BAD_REQUEST);
    assert!(message.starts_with("from must be a step index or an id of a step of this run"), "{message}");
    assert_eq!(app.get("/api/runs/nope/steps/0").await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn runs_carry_their_outcome_and_are_filtered_by_it() {
    let app = app().await;
    let clean = app.settled(json!({"initial_prompt": "hi", "model_settings": {"script": [{"text": "Hello!"}]}})).await;
    assert_eq!(clean["outcome"]["label"], "done");
    assert_eq!(clean["outcome"]["tone"], "clean");

    let (id, call) = crate::approvals_api::paused_run(&app).await;
    let no = app.post_json(&format!("/api/runs/{id}/tool-calls/{call}/reject"), "").await;
    assert_eq!(no.status, StatusCode::OK, "{}", no.text);
    app.engine.runs().wait_until_settled(&id, Duration::from_secs(20)).await.unwrap();
    let rejected = app.get(&format!("/api/runs/{id}")).await.json();
    assert_eq!(rejected["status"], "done", "a rejected call does not fail the run");
    assert_eq!(
        rejected["outcome"],
        json!({"label": "done · 1 call rejected", "note": "1 call rejected", "tone": "warning",
            "rejected_calls": 1, "failed_calls": 0})
    );

    let listed = app.get("/api/runs").await.json();
    let row = listed["runs"].as_array().unwrap().iter().find(|r| r["id"] == id.as_str()).unwrap().clone();
    assert_eq!(row["outcome"], rejected["outcome"], "the list says the same");
    for (filter, want) in [
        ("clean", vec![clean["id"].as_str().unwrap()]),
        ("rejected", vec![id.as_str()]),
        ("issues", vec![id.as_str()]),
        ("tool_error", vec![]),
        ("", vec![id.as_str(), clean["id"].as_str().unwrap()]),
    ] {
        let found = ids(&app.get(&format!("/api/runs?outcome={filter}")).await.json(), "runs");
        assert_eq!(found, want, "outcome={filter}");
    }
    let bad = refusal(&app.get("/api/runs?outcome=green").await, StatusCode::BAD_REQUEST);
    assert!(bad.contains("must be one of clean, rejected, tool_error, issues, not `green`"), "{bad}");
}
