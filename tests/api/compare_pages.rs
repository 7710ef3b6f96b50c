//! The compare page on the server side: two runs rendered side by side with
//! the first difference, the word and argument diffs; the runs list's tick
//! boxes and the trace's compare links; what the page says for one ticked
//! run, an unknown run and another project's run; and that texts from runs
//! are escaped.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use runlens_engine::model::{Actor, Role};
use serde_json::Value;

use crate::support::{app, App, Reply};

async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(25), fut).await.unwrap_or_else(|_| panic!("timed out: {what}"))
}

async fn get(app: &App, uri: &str) -> Reply {
    within(&format!("GET {uri}"), app.get(uri)).await
}

async fn run(app: &App, name: &str, prompt: &str) -> String {
    let body = serde_json::json!({"name": name, "initial_prompt": prompt, "tools": ["calculator"]}).to_string();
    let run: Value = within("a finished run", app.finished_run(&body)).await;
    assert_eq!(run["status"], "done", "{run}");
    run["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn two_runs_render_side_by_side_from_their_first_difference() {
    let app = app().await;
    let a = run(&app, "left", "What is 2 + 3?").await;
    let b = run(&app, "right", "What is 2 + 4?").await;
    let page = get(&app, &format!("/compare?a={a}&b={b}")).await;
    assert_eq!(page.status, StatusCode::OK);
    let html = &page.text;
    for needle in [
        "data-testid=\"compare-divergence\"",
        &format!("data-run-id=\"{a}\""),
        &format!("data-run-id=\"{b}\""),
        "data-testid=\"compare-totals\"",
        "data-field=\"initial_prompt\" data-equal=\"false\"",
        // The prompt's changed word on each side, and the calculator's arguments.
        "<del class=\"diff-del\">3</del>?",
        "<ins class=\"diff-ins\">4</ins>?",
        "data-testid=\"argument-diff\"",
        "data-change=\"changed\"",
    ] {
        assert!(html.contains(needle), "the page has {needle}");
    }
    assert!(!html.contains("data-testid=\"compare-equal\""), "the runs differ");

    // The same run twice: no differences, said in words.
    let same = get(&app, &format!("/compare?a={a}&b={a}")).await.text;
    let api = get(&app, &format!("/api/compare?a={a}&b={a}")).await.json();
    assert_eq!(api["equal"], true, "{}", api["divergence"]);
    assert!(same.contains("data-testid=\"compare-equal\"") && same.contains("No differences."), "{same}");
    assert!(!same.contains("data-change=\"changed\""));
}

#[tokio::test]
async fn the_runs_list_ticks_runs_and_the_page_explains_a_wrong_pick() {
    let app = app().await;
    let a = run(&app, "one", "What is 1 + 1?").await;
    let list = get(&app, "/runs").await.text;
    assert!(list.contains("id=\"compare-runs\"") && list.contains("action=\"/compare\""), "the compare form");
    assert!(list.contains(&format!("name=\"run\" value=\"{a}\" form=\"compare-runs\"")), "a tick box per run");

    let one = get(&app, &format!("/compare?run={a}")).await.text;
    assert!(one.contains("Tick exactly two runs to compare (1 ticked)."), "one tick is explained");
    let unknown = get(&app, &format!("/compare?a={a}&b=no-such-run")).await.text;
    assert!(unknown.contains("data-testid=\"compare-not-found\""));
    // `a` alone: what it can be compared with.
    let b = run(&app, "two", "What is 2 + 2?").await;
    let pick = get(&app, &format!("/compare?a={a}")).await.text;
    assert!(pick.contains(&format!("href=\"/compare?a={a}&amp;b={b}\"")), "the latest runs are offered");
    let trace = get(&app, &format!("/runs/{a}")).await.text;
    assert!(trace.contains(&format!("href=\"/compare?a={a}\"")), "Compare with…");
    assert!(!trace.contains("data-testid=\"compare-parent\""), "not a fork");
}

#[tokio::test]
async fn a_fork_links_to_its_comparison_with_the_parent() {
    let app = app().await;
    let parent = run(&app, "parent", "What is 6 * 7?").await;
    let messages = get(&app, &format!("/api/runs/{parent}/messages")).await.json();
    let human = messages["messages"][0]["id"].as_str().unwrap().to_owned();
    let edit =
        app.post_json(&format!("/api/runs/{parent}/messages/{human}/edit"), r#"{"message": "What is 6 * 8?"}"#).await;
    assert_eq!(edit.status, StatusCode::CREATED, "{}", edit.text);
    let fork = edit.json()["id"].as_str().unwrap().to_owned();
    within("the fork", app.engine.runs().wait_until_settled(&fork, Duration::from_secs(20))).await.unwrap();
    let trace = get(&app, &format!("/runs/{fork}")).await.text;
    assert!(trace.contains(&format!("href=\"/compare?a={parent}&amp;b={fork}\"")), "Compare with parent");
    let page = get(&app, &format!("/compare?a={parent}&b={fork}")).await.text;
    assert!(page.contains("data-testid=\"compare-fork\""), "the fork relation is shown");
}

#[tokio::test]
async fn another_projects_run_is_not_found_and_run_texts_are_escaped() {
    let app = app().await;
    let ours = run(&app, "<img src=x onerror=alert(1)>", "What is 3 + 3? <script>alert(2)</script>").await;
    let also_ours = run(&app, "plain", "What is 3 + 4?").await;
    let page = get(&app, &format!("/compare?a={ours}&b={also_ours}")).await.text;
    assert!(!page.contains("<img src=x") && !page.contains("<script>alert(2)"), "texts are escaped");
    assert!(page.contains("&lt;img src=x onerror=alert(1)&gt;"));

    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let (_, secret) =
        app.engine.identity().create_key("other viewer", Some("other"), Role::Viewer, &Actor::system()).await.unwrap();
    let auth = format!("Bearer {secret}");
    let theirs = app
        .send_with(
            Method::GET,
            &format!("/compare?a={ours}&b={also_ours}"),
            None,
            "",
            &[("authorization", auth.as_str())],
        )
        .await;
    assert!(theirs.text.contains("data-testid=\"compare-not-found\""), "another project's runs are not shown");
    assert!(!theirs.text.contains("What is 3 + 4?"));
}
