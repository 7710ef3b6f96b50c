//! Paged steps with light mode, one tool call in full, prices and
//! `cost_usd` on runs and steps.

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::support::{app, App};

/// A finished run of `turns` calculator steps whose arguments and text are long.
async fn long_run(app: &App, turns: usize) -> String {
    let expr = vec!["1"; 150].join(" + "); // ~600 characters
    let mut script: Vec<Value> = (0..turns - 1)
        .map(|i| json!({"text": format!("step {i} {}", "blah ".repeat(60)), "tool_calls": [{"name": "calculator", "arguments": {"expression": expr}}]}))
        .collect();
    script.push(json!({"text": "done"}));
    let body = json!({"initial_prompt": "long", "max_turns": turns, "model_settings": {"script": script}});
    let run = app.finished_run(&body.to_string()).await;
    assert_eq!(run["status"], "done", "{run}");
    run["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn steps_are_paged_and_light_mode_cuts_payloads() {
    let app = app().await;
    let id = long_run(&app, 12).await;
    let all = app.get(&format!("/api/runs/{id}/steps")).await.json();
    assert_eq!(all["steps"].as_array().unwrap().len(), 12, "small runs come whole");
    assert!(all.get("next_from").is_none());
    assert_eq!(all["steps"][0]["cost_usd"], 0.0);

    let page = app.get(&format!("/api/runs/{id}/steps?limit=5")).await.json();
    assert_eq!(page["steps"].as_array().unwrap().len(), 5);
    assert_eq!(page["next_from"], 5);
    let tail = app.get(&format!("/api/runs/{id}/steps?from=10&limit=5")).await.json();
    let idx: Vec<u64> = tail["steps"].as_array().unwrap().iter().map(|s| s["index"].as_u64().unwrap()).collect();
    assert_eq!(idx, [10, 11]);
    assert!(tail.get("next_from").is_none());

    let light = app.get(&format!("/api/runs/{id}/steps?limit=1&payloads=false")).await.json();
    let step = &light["steps"][0];
    let call = &step["tool_calls"][0];
    assert_eq!(call["arguments_truncated"], true);
    assert!(call["arguments"].as_str().unwrap().ends_with('…'));
    assert!(call["arguments"].as_str().unwrap().chars().count() <= 201);
    assert_eq!(step["response"]["text_truncated"], true);
    assert_eq!(call["result_truncated"], true, "the result echoes the long expression");
    assert!(
        call.get("error_truncated").is_none() && step["request"]["messages"].is_number(),
        "short values stay whole"
    );

    let full = app.get(&format!("/api/runs/{id}/tool-calls/{}", call["id"].as_str().unwrap())).await;
    assert_eq!(full.status, StatusCode::OK, "{}", full.text);
    assert_eq!(full.json()["arguments"]["expression"].as_str().unwrap().len(), 150 * 4 - 3);
    assert_eq!(app.get(&format!("/api/runs/{id}/tool-calls/nope")).await.status, StatusCode::NOT_FOUND);

    for bad in ["limit=0", "limit=10001", "from=-1", "payloads=maybe"] {
        let reply = app.get(&format!("/api/runs/{id}/steps?{bad}")).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{bad}: {}", reply.text);
    }
    assert_eq!(app.get("/api/runs/nope/steps").await.status, StatusCode::NOT_FOUND);
}

async fn put(app: &App, uri: &str, body: &str) -> crate::support::Reply {
    app.send(Method::PUT, uri, Some(body), "application/json").await
}

#[tokio::test]
async fn prices_are_edited_and_runs_are_priced() {
    let app = app().await;
    let prices = app.get("/api/prices").await.json();
    assert_eq!(prices["prices"][0]["model"], "builtin");
    assert_eq!(prices["prices"][0]["input"], 0.0);

    let ok = put(&app, "/api/prices/openai/gpt-4.1", r#"{"input": 2, "output": 8, "cache_read": 0.5}"#).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    assert_eq!(ok.json()["reasoning"], 8.0);
    let got = app.get("/api/prices/openai/gpt-4.1").await.json();
    assert_eq!(got["cache_read"], 0.5);
    for bad in [r#"{"input": -1, "output": 1}"#, r#"{"input": 1, "output": 1, "bogus": 1}"#, r#"{"input": 1}"#, "nope"]
    {
        let reply = put(&app, "/api/prices/m", bad).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{bad}: {}", reply.text);
    }

    let run = app.finished_run(r#"{"initial_prompt": "What is 2 + 3?"}"#).await;
    assert_eq!(run["cost_usd"], 0.0);
    let id = run["id"].as_str().unwrap();
    let reply = put(&app, "/api/prices/builtin", r#"{"input": 1000, "output": 2000}"#).await;
    assert_eq!(reply.status, StatusCode::OK);
    let run = app.get(&format!("/api/runs/{id}")).await.json();
    let usage = &run["usage"];
    let expected =
        (usage["input_tokens"].as_f64().unwrap() * 1000.0 + usage["output_tokens"].as_f64().unwrap() * 2000.0) / 1e6;
    assert!((run["cost_usd"].as_f64().unwrap() - expected).abs() < 1e-9, "{run}");
    let listed = app.get("/api/runs").await.json();
    assert_eq!(listed["runs"][0]["cost_usd"], run["cost_usd"]);
    let steps = app.get(&format!("/api/runs/{id}/steps")).await.json();
    let sum: f64 = steps["steps"].as_array().unwrap().iter().map(|s| s["cost_usd"].as_f64().unwrap()).sum();
    assert!((sum - expected).abs() < 1e-9);

    let gone = app.send(Method::DELETE, "/api/prices/builtin", None, "").await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    assert_eq!(app.get(&format!("/api/runs/{id}")).await.json()["cost_usd"], Value::Null);
    assert_eq!(app.send(Method::DELETE, "/api/prices/builtin", None, "").await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_outline_is_every_step_without_payloads() {
    let app = app().await;
    let id = long_run(&app, 12).await;
    let outline = app.get(&format!("/api/runs/{id}/outline")).await;
    assert_eq!(outline.status, StatusCode::OK, "{}", outline.text);
    let outline = outline.json();
    let full = app.get(&format!("/api/runs/{id}/steps")).await.json();
    let (outline, full) = (outline["steps"].as_array().unwrap(), full["steps"].as_array().unwrap());
    assert_eq!(outline.len(), 12);
    assert_eq!(outline[0]["model"], "builtin", "the first step records its model");
    for (o, f) in outline.iter().zip(full) {
        for key in ["index", "kind", "status", "usage", "started_at", "completed_at", "cost_usd"] {
            assert_eq!(o[key], f[key], "{key} of step {}", f["index"]);
        }
        assert!(o.get("request").is_none() && o.get("response").is_none(), "no payloads: {o}");
        let calls = f["tool_calls"].as_array().unwrap();
        assert_eq!(o["tool_calls"].as_array().map_or(0, Vec::len), calls.len());
        for (oc, fc) in o["tool_calls"].as_array().into_iter().flatten().zip(calls) {
            assert_eq!((&oc["id"], &oc["tool_name"], &oc["status"]), (&fc["id"], &fc["tool_name"], &fc["status"]));
            assert!(oc.get("arguments").is_none() && oc.get("result").is_none(), "no payloads: {oc}");
        }
    }
    assert_eq!(app.get("/api/runs/nope/outline").await.status, StatusCode::NOT_FOUND);
    let doc = app.get("/api/openapi.json").await.json();
    assert!(doc["paths"]["/api/runs/{id}/outline"]["get"].is_object());
}

#[tokio::test]
async fn messages_come_whole_in_pages_or_as_a_tail() {
    let app = app().await;
    let id = long_run(&app, 6).await;
    let all = app.get(&format!("/api/runs/{id}/messages")).await.json();
    let all = all["messages"].as_array().unwrap().clone();
    assert_eq!(all.len(), 12, "human, then agent + result per calculator step, then the answer");

    let page = app.get(&format!("/api/runs/{id}/messages?limit=5")).await.json();
    assert_eq!(page["messages"].as_array().unwrap()[..], all[..5]);
    assert_eq!(page["next_from"], 5);
    let rest = app.get(&format!("/api/runs/{id}/messages?from=5&limit=100")).await.json();
    assert_eq!(rest["messages"].as_array().unwrap()[..], all[5..]);
    assert!(rest.get("next_from").is_none());

    let tail = app.get(&format!("/api/runs/{id}/messages?tail=3")).await.json();
    assert_eq!(tail["messages"].as_array().unwrap()[..], all[9..]);
    assert_eq!(tail["total"], 12);

    for bad in ["tail=0", "limit=0", "limit=10001", "from=-1", "tail=2&from=1", "tail=x"] {
        let reply = app.get(&format!("/api/runs/{id}/messages?{bad}")).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{bad}: {}", reply.text);
        assert!(reply.json()["error"].as_str().is_some_and(|e| !e.is_empty()), "{bad}: a message says why");
    }
    assert_eq!(app.get("/api/runs/nope/messages?tail=3").await.status, StatusCode::NOT_FOUND);
}

/// The trace page's tree pane reads a run's steps as small rows, a bounded
/// block at a time, for the caller's project only.
#[tokio::test]
async fn tree_rows_come_a_bounded_block_at_a_time_from_the_callers_project() {
    use leptos::server_fn::ServerFn;
    use runlens::api::trace_tree::{GetTreeRows, PREVIEW_CHARS};
    use runlens_engine::model::{Actor, Role};

    let app = app().await;
    let id = long_run(&app, 12).await;
    let form = |from: u32, limit: u32| format!("run_id={id}&from={from}&limit={limit}");
    let post = |body: String, key: Option<String>| {
        let app = &app;
        async move {
            let form = "application/x-www-form-urlencoded";
            match key {
                None => app.send(Method::POST, GetTreeRows::PATH, Some(&body), form).await,
                Some(key) => {
                    let auth = format!("Bearer {key}");
                    app.send_with(Method::POST, GetTreeRows::PATH, Some(&body), form, &[("authorization", &auth)]).await
                }
            }
        }
    };

    let reply = post(form(10, 100), None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let rows = reply.json();
    let rows = rows.as_array().unwrap();
    let idx: Vec<u64> = rows.iter().map(|r| r["index"].as_u64().unwrap()).collect();
    assert_eq!(idx, [10, 11], "the block ends with the run");
    let row = &rows[0];
    assert_eq!(row["calls"][0]["tool_name"], "calculator");
    assert_eq!(row["calls"][0]["status"], "succeeded");
    let preview = row["preview"].as_str().unwrap();
    assert!(preview.starts_with("step 10 blah blah") && preview.ends_with('…'), "{preview}");
    assert!(preview.chars().count() <= PREVIEW_CHARS + 1, "a row carries a preview, not the text: {preview}");
    assert!(row.get("arguments").is_none() && row["calls"][0].get("arguments").is_none(), "no payloads: {row}");
    assert_eq!(rows[1]["preview"], "done");
    assert_eq!(rows[1]["calls"], json!([]));

    // Bounded: a block is at most 100 steps, and at least one.
    for (from, limit) in [(0, 0), (0, 101), (0, 100_000)] {
        let reply = post(form(from, limit), None).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "limit {limit}: {}", reply.text);
    }
    // Past the end: nothing; no such run: 404.
    assert_eq!(post(form(500, 10), None).await.json(), json!([]));
    let reply = post("run_id=nope&from=0&limit=10".into(), None).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.text);

    // Another project's key finds no such run: the same 404.
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let (_, other) =
        app.engine.identity().create_key("other", Some("other"), Role::Admin, &Actor::system()).await.unwrap();
    let reply = post(form(0, 10), Some(other)).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.text);
    assert!(!reply.text.contains("calculator"));
}

/// The tree pane's filters: the steps with an error, with a call waiting for
/// a decision or rejected, or calling a tool; unknown filters are a 400.
#[tokio::test]
async fn the_tree_keeps_the_steps_a_filter_matches() {
    use leptos::server_fn::ServerFn;
    use runlens::api::trace_tree::GetTreeMatches;

    let app = app().await;
    let script = json!([
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "2 + 2"}}]},
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "2 +"}}]},
        {"text": "done"}
    ]);
    let body = json!({"initial_prompt": "f", "max_turns": 5, "model_settings": {"script": script}});
    let run = app.finished_run(&body.to_string()).await;
    let id = run["id"].as_str().unwrap();
    let steps = app.get(&format!("/api/runs/{id}/steps")).await.json();
    assert_eq!(steps["steps"][1]["tool_calls"][0]["status"], "failed", "{steps}");
    let matches = |query: String| {
        let app = &app;
        async move {
            let body = format!("run_id={id}&{query}");
            app.send(Method::POST, GetTreeMatches::PATH, Some(&body), "application/x-www-form-urlencoded").await
        }
    };
    for (query, want) in [
        ("kind=errors", json!([1])),
        ("kind=decisions", json!([])),
        ("kind=tool&tool=calculator", json!([0, 1])),
        ("kind=tool&tool=send_email", json!([])),
    ] {
        let reply = matches(query.into()).await;
        assert_eq!(reply.status, StatusCode::OK, "{query}: {}", reply.text);
        assert_eq!(reply.json(), json!({"indexes": want, "truncated": false}), "{query}");
    }
    let long = format!("kind=tool&tool={}", "x".repeat(201));
    for bad in ["kind=everything".to_string(), "kind=tool".into(), "kind=tool&tool=".into(), long] {
        let reply = matches(bad.clone()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{bad}: {}", reply.text);
    }
    let reply = app
        .send(Method::POST, GetTreeMatches::PATH, Some("run_id=nope&kind=errors"), "application/x-www-form-urlencoded")
        .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.text);
}
