//! Full-text search over HTTP: `GET /api/runs?q=` finds runs by the words
//! of their prompts, answers and tool calls, in the caller's project only,
//! with where each matched and a marked snippet; the runs page shows it,
//! escaped; what cannot be searched is a 400.

use axum::http::{Method, StatusCode};
use runlens_engine::model::{Actor, CreateRun, Role};
use serde_json::{json, Value};

use crate::agents_api::refusal;
use crate::support::app;

fn ids(list: &Value) -> Vec<String> {
    list["runs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect()
}

fn scripted(prompt: &str, script: Value) -> String {
    json!({"initial_prompt": prompt, "model_settings": {"script": script}}).to_string()
}

#[tokio::test]
async fn runs_are_found_by_their_words_with_where_and_a_snippet() {
    let app = app().await;
    let calc = json!({"name": "calculator", "arguments": {"expression": "4096 * 2"}});
    let run = app
        .finished_run(&scripted("a quince question", json!([{"tool_calls": [calc]}, {"text": "8192, a quince."}])))
        .await;
    let other = app.finished_run(&scripted("something else, a question", json!([{"text": "no fruit"}]))).await;

    let found = app.get("/api/runs?q=4096").await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.text);
    let list = found.json();
    assert_eq!(ids(&list), [run["id"].as_str().unwrap()]);
    let m = &list["matches"][0];
    assert_eq!(
        (m["run_id"].clone(), m["matched_in"].clone(), m["step_index"].clone()),
        (run["id"].clone(), json!("tool_call"), json!(0))
    );
    let hits: Vec<&Value> = m["snippet"].as_array().unwrap().iter().filter(|p| p["hit"] == true).collect();
    assert_eq!(hits[0]["text"], "4096");

    // Newest match first: the answer (step 1) over the prompt.
    let quince = app.get("/api/runs?q=QUINCE").await.json();
    assert_eq!(ids(&quince), [run["id"].as_str().unwrap()]);
    assert_eq!(
        (quince["matches"][0]["matched_in"].as_str(), quince["matches"][0]["step_index"].as_u64()),
        (Some("answer"), Some(1))
    );
    // Without q, no matches field; blank q is no search.
    let all = app.get("/api/runs?q=").await.json();
    assert_eq!(ids(&all).len(), 2);
    assert!(all.get("matches").is_none());
    assert_eq!(ids(&app.get("/api/runs?q=fruit").await.json()), [other["id"].as_str().unwrap()]);

    // Pages of one follow the cursor.
    let first = app.get("/api/runs?q=question&limit=1").await.json();
    let cursor = first["next_cursor"].as_str().expect("a second page");
    assert!(cursor.starts_with('t'), "{cursor}");
    let second = app.get(&format!("/api/runs?q=question&limit=1&cursor={cursor}")).await.json();
    assert_ne!(ids(&first), ids(&second));
    // A search's cursor without the search is the end of the list, not an error.
    let without = app.get(&format!("/api/runs?cursor={cursor}")).await;
    assert_eq!(without.status, StatusCode::OK, "{}", without.text);
    assert!(ids(&without.json()).is_empty());
    // An offset passes over matching runs: offset 1 is the second page.
    let skipped = app.get("/api/runs?q=question&limit=1&offset=1").await.json();
    assert_eq!(ids(&skipped), ids(&second));
    let past = app.get("/api/runs?q=question&offset=1000").await.json();
    assert!(ids(&past).is_empty() && past["next_cursor"].is_null(), "{past}");
}

#[tokio::test]
async fn what_cannot_be_searched_is_a_400() {
    let app = app().await;
    let many = (0..17).map(|i| format!("w{i}")).collect::<Vec<_>>().join("+");
    // A q with no word finds nothing; with more than 16 words, the first 16 are searched.
    // And the plain list's cursor is the end of a search, as a search's is the end of the list.
    for uri in [
        "/api/runs?q=%2B%2B%2B".to_owned(),
        "/api/runs?q=%C2%99%3C".to_owned(),
        format!("/api/runs?q={many}"),
        "/api/runs?q=x&cursor=1700000000000_r".to_owned(),
    ] {
        let reply = app.get(&uri).await;
        assert_eq!(reply.status, StatusCode::OK, "{uri}: {}", reply.text);
        assert!(ids(&reply.json()).is_empty(), "{uri}");
    }
    for (uri, expected) in [(format!("/api/runs?q={}", "q".repeat(2000)), "q is longer")] {
        let reply = app.get(&uri).await;
        let message = refusal(&reply, StatusCode::BAD_REQUEST);
        assert!(message.contains(expected), "{uri}: {message}");
    }
}

#[tokio::test]
async fn another_projects_runs_are_never_found() {
    let app = app().await;
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let theirs = CreateRun { initial_prompt: "the secret medlar recipe".into(), ..CreateRun::default() };
    let (theirs, _) = app.engine.runs().create_run_in(theirs, "other", None).await.unwrap();
    app.engine.runs().wait_until_settled(&theirs.id, std::time::Duration::from_secs(20)).await.unwrap();
    let ours = app.key_of("default", Role::Admin).await;
    let found = app.as_key(&ours, Method::GET, "/api/runs?q=medlar", None).await;
    assert_eq!((found.status, ids(&found.json()).len()), (StatusCode::OK, 0), "{}", found.text);
    let page = app.as_key(&ours, Method::GET, "/runs?q=medlar", None).await;
    assert!(!page.text.contains("medlar recipe"));
    let key = app.key_of("other", Role::Viewer).await;
    let found = app.as_key(&key, Method::GET, "/api/runs?q=medlar", None).await.json();
    assert_eq!(ids(&found), [theirs.id.as_str()]);
}

#[tokio::test]
async fn the_runs_page_shows_each_match_escaped_with_its_words_marked() {
    let app = app().await;
    let answer = "<script>alert('x')</script> the turnip is ready";
    let run = app.finished_run(&scripted("cook", json!([{"text": answer}]))).await;
    let page = app.get("/runs?q=turnip").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains(r#"data-testid="run-match""#), "{}", page.text);
    assert!(page.text.contains("<mark>turnip</mark>"));
    assert!(page.text.contains(&format!("/runs/{}#step-0", run["id"].as_str().unwrap())));
    assert!(!page.text.contains("<script>alert"), "the answer is escaped");
    // A search with no word is said at the field.
    let page = app.get("/runs?q=%2B%2B").await;
    assert!(page.text.contains(r#"data-testid="filter-q-error""#), "{}", page.text);
    // Nothing found: the way out is to clear the filters, keeping the grouping.
    let page = app.get("/runs?q=parsnip&group=agent").await;
    assert!(page.text.contains("No runs match these filters."), "{}", page.text);
    assert!(
        page.text.contains(r#"href="/runs?group=agent" data-testid="runs-empty-action">Clear filters"#),
        "{}",
        page.text
    );
}
