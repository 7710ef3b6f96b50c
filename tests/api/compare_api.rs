//! `GET /api/compare` (issue 18): two runs aligned over HTTP — equal runs,
//! an inserted step, a fork, paging — and the refusals: a bad query (400
//! naming the parameter), a run of another project or one the caller
//! cannot see (404).

use axum::http::{Method, StatusCode};
use runlens_engine::model::{Actor, Change, Comparison, Role};
use serde_json::{json, Value};

use crate::support::{app, App};

/// A finished scripted run's id.
async fn scripted(app: &App, turns: Value) -> String {
    let run =
        app.finished_run(&json!({"initial_prompt": "count", "model_settings": {"script": turns}}).to_string()).await;
    assert_eq!(run["status"], "done", "{run}");
    run["id"].as_str().unwrap().to_owned()
}

fn calc(expression: &str) -> Value {
    json!({"text": "Counting.", "tool_calls": [{"name": "calculator", "arguments": {"expression": expression}}]})
}

async fn compare(app: &App, query: &str) -> Comparison {
    let reply = app.get(&format!("/api/compare?{query}")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    serde_json::from_str(&reply.text).unwrap_or_else(|e| panic!("not a comparison ({e}): {}", reply.text))
}

/// The error of a 400 (or 404) answer.
async fn refusal(app: &App, query: &str, status: StatusCode) -> String {
    let reply = app.get(&format!("/api/compare?{query}")).await;
    assert_eq!(reply.status, status, "{query}: {}", reply.text);
    reply.json()["error"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn equal_runs_an_inserted_step_and_paging() {
    let app = app().await;
    let turns = json!([calc("1 + 1"), calc("2 + 2"), calc("3 + 3"), {"text": "Done."}]);
    let a = scripted(&app, turns.clone()).await;
    let b = scripted(&app, turns).await;
    let same = compare(&app, &format!("a={a}&b={b}")).await;
    assert!(same.equal && same.divergence.is_none() && same.fork.is_none());
    assert!(same.steps.rows.iter().all(|r| r.change == Change::Equal));
    assert_eq!((same.steps.total, same.messages.total), (4, 8));

    let c =
        scripted(&app, json!([calc("1 + 1"), calc("2 + 2"), calc("7 * 7"), calc("3 + 3"), {"text": "Done."}])).await;
    let one_more = compare(&app, &format!("a={a}&b={c}&steps_from=0")).await;
    let changes: Vec<Change> = one_more.steps.rows.iter().map(|r| r.change).collect();
    use Change::*;
    assert_eq!(changes, [Equal, Equal, Inserted, Equal, Equal]);
    let divergence = one_more.divergence.unwrap();
    assert_eq!((divergence.step_row, divergence.summary.as_str()), (Some(2), "step 2: only in b (calculator)"));

    // Pages of two rows walk every row once; an empty value is no value.
    let mut rows = Vec::new();
    let mut from = Some(0);
    while let Some(at) = from {
        let page = compare(&app, &format!("a={a}&b={c}&steps_from={at}&steps_limit=2&messages_limit=")).await;
        assert!(page.steps.rows.len() <= 2 && page.messages.rows.len() <= 50);
        rows.extend(page.steps.rows.iter().map(|r| r.row));
        from = page.steps.next_from;
    }
    assert_eq!(rows, [0, 1, 2, 3, 4]);
}

#[tokio::test]
async fn a_fork_compares_from_its_edited_message() {
    let app = app().await;
    let run = app.finished_run(r#"{"initial_prompt": "What is 2 + 2?"}"#).await;
    let id = run["id"].as_str().unwrap();
    let messages = app.get(&format!("/api/runs/{id}/messages")).await.json();
    let first = messages["messages"][0]["id"].as_str().unwrap();
    let fork =
        app.post_json(&format!("/api/runs/{id}/messages/{first}/edit"), r#"{"message": "What is 5 + 5?"}"#).await;
    assert_eq!(fork.status, StatusCode::CREATED, "{}", fork.text);
    let fork = fork.json()["id"].as_str().unwrap().to_owned();
    app.engine.runs().wait_until_settled(&fork, std::time::Duration::from_secs(20)).await.unwrap();
    let c = compare(&app, &format!("a={id}&b={fork}")).await;
    let relation = c.fork.unwrap();
    assert_eq!((relation.ancestor.as_str(), relation.shared_messages, relation.shared_steps), (id, 0, 0));
    let d = c.divergence.unwrap();
    assert_eq!((d.message_row, d.summary.as_str()), (Some(0), "message 0: human text differs"));
    let edited = &c.messages.rows[0];
    assert_eq!(edited.change, Change::Changed);
    assert_eq!(edited.b.as_ref().unwrap().text, "What is 5 + 5?");
    let initial_prompt = c.config.iter().find(|f| f.field == "initial_prompt").unwrap();
    assert!(!initial_prompt.equal && !initial_prompt.words.is_empty());
}

#[tokio::test]
async fn bad_queries_are_400_naming_the_parameter() {
    let app = app().await;
    let a = scripted(&app, json!([{"text": "Done."}])).await;
    let cases = [
        (String::new(), "missing field `a`"),
        (format!("a={a}"), "missing field `b`"),
        (format!("a={a}&b="), "b must name a run"),
        (format!("a={a}&b={a}&steps_limit=0"), "steps_limit must be a number from 1 to 500, not `0`"),
        (format!("a={a}&b={a}&messages_limit=501"), "messages_limit must be a number from 1 to 500, not `501`"),
        (format!("a={a}&b={a}&steps_from=-1"), "steps_from must be a number"),
        (format!("a={a}&b={a}&tenant=x"), "unknown query parameter `tenant`"),
    ];
    for (query, want) in cases {
        let error = refusal(&app, &query, StatusCode::BAD_REQUEST).await;
        assert!(error.starts_with(want), "{query}: {error}");
    }
    let error = refusal(&app, &format!("a={a}&b=nope"), StatusCode::NOT_FOUND).await;
    assert!(error.contains("nope"), "{error}");
}

#[tokio::test]
async fn runs_of_another_project_are_404() {
    let app = app().await;
    let ours = scripted(&app, json!([{"text": "Done."}])).await;
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let body = json!({"initial_prompt": "hi", "model_settings": {"script": [{"text": "Done."}]}}).to_string();
    let (_, other_key) =
        app.engine.identity().create_key("other admin", Some("other"), Role::Admin, &Actor::system()).await.unwrap();
    let bearer = format!("Bearer {other_key}");
    let auth = [("authorization", bearer.as_str())];
    let created = app.send_with(Method::POST, "/api/runs", Some(&body), "application/json", &auth).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let theirs = created.json()["id"].as_str().unwrap().to_owned();
    app.engine.runs().wait_until_settled(&theirs, std::time::Duration::from_secs(20)).await.unwrap();

    // The instance admin sees both runs, yet two projects do not compare.
    for query in [format!("a={ours}&b={theirs}"), format!("a={theirs}&b={ours}")] {
        refusal(&app, &query, StatusCode::NOT_FOUND).await;
    }
    // The key of `other` cannot see ours: not found, as if it did not exist.
    let uri = format!("/api/compare?a={theirs}&b={ours}");
    let reply = app.send_with(Method::GET, &uri, None, "", &auth).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.text);
    assert_eq!(reply.json()["error"], format!("run `{ours}` not found"));
    // Its own run against itself is fine.
    let uri = format!("/api/compare?a={theirs}&b={theirs}");
    let reply = app.send_with(Method::GET, &uri, None, "", &auth).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
}
