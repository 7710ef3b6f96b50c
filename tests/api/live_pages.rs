//! The issue-5 pages as the server renders them: a long run's trace comes a
//! page of steps at a time (with its pager, without its transcript and
//! token chart, which load later), a short run's with its timeline, token
//! chart and costs; and the settings page lists the prices.

use axum::http::StatusCode;

use crate::support::app;

fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

#[tokio::test]
async fn a_long_run_opens_on_a_page_of_its_steps() {
    let app = app().await;
    let run = app.engine.generate_trace(130).await.unwrap();
    let page = app.get(&format!("/runs/{}", run.id)).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(count(&page.text, r#"data-testid="step""#), 50, "one page of steps");
    assert!(page.text.contains(r#"data-testid="steps-pager""#));
    assert!(page.text.replace("<!>", "").contains("steps 0–49 of 130"), "the pager says where we are");
    assert!(page.text.contains(r#"data-testid="timeline""#));
    assert!(page.text.contains(r#"data-testid="token-chart-loading""#), "the chart loads after the page");
    assert!(page.text.contains(r#"data-testid="transcript-loading""#), "so does the transcript");
    assert!(!page.text.contains("Count with the calculator, 130 steps.\"},{"), "the script is not shipped");

    let later = app.get(&format!("/runs/{}?from=120", run.id)).await;
    assert_eq!(count(&later.text, r#"data-testid="step""#), 30, "the page holding step 120: 100-129");
    assert!(later.text.contains(r#"id="step-120""#) && !later.text.contains(r#"id="step-99""#));
    assert!(later.text.contains(r#"id="call-call_120_0""#));
}

#[tokio::test]
async fn a_short_run_shows_its_timeline_tokens_and_cost() {
    let app = app().await;
    let run = app.finished_run(r#"{"initial_prompt": "What is (12 + 30) * 2?"}"#).await;
    let page = app.get(&format!("/runs/{}", run["id"].as_str().unwrap())).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(count(&page.text, r#"data-kind="model""#), 2);
    assert_eq!(count(&page.text, r#"data-kind="tool""#), 1);
    assert_eq!(count(&page.text, r#"data-testid="token-bar""#), 2);
    assert!(page.text.contains(r#"data-testid="run-cost""#) && page.text.contains("$0.00"), "builtin is free");
    assert!(!page.text.contains(r#"data-testid="steps-pager""#), "short runs are not paged");
}

#[tokio::test]
async fn the_settings_page_lists_prices() {
    let app = app().await;
    let reply = app
        .send(axum::http::Method::PUT, "/api/prices/gpt-4.1", Some(r#"{"input": 2, "output": 8}"#), "application/json")
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let page = app.get("/settings").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains(r#"data-model="builtin""#));
    assert!(page.text.contains(r#"data-model="gpt-4.1""#));
    assert!(page.text.contains(r#"data-testid="new-price-row""#));
}
