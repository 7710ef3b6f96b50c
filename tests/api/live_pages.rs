//! The issue-5 pages as the server renders them: a long run's trace comes a
//! page of steps at a time (with its pager, without its transcript and
//! token chart, which load later), a short run's with its timeline, token
//! chart and costs; the settings page lists the prices; and a trace reloaded
//! in the middle of a long streamed answer gets all of its text so far.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use futures::stream::{self, StreamExt};
use leptos::server_fn::ServerFn;
use runlens::api::trace_window::GetLiveTrace;
use runlens_engine::events::EventKind;
use runlens_engine::llm::{Model, ModelChunk, ModelError, ModelRegistry, ModelRequest, ModelStream};
use runlens_engine::model::{CreateRun, RunStatus, Usage};
use tokio::sync::Semaphore;

use crate::support::{app, app_with_models};

fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

#[tokio::test]
async fn a_long_run_opens_on_a_page_of_its_steps() {
    let app = app().await;
    let run = app.engine.runs().generate_trace(130).await.unwrap();
    let page = app.get(&format!("/runs/{}", run.id)).await;
    assert_eq!(page.status, StatusCode::OK);
    // The detail pane shows the page's first step; the tree lists them all (in the browser).
    assert_eq!(count(&page.text, r#"data-testid="step""#), 1, "one step of the page");
    assert!(page.text.contains(r#"id="step-0""#));
    assert!(page.text.contains(r#"data-testid="steps-pager""#));
    assert!(page.text.replace("<!>", "").contains("steps 0–49 of 130"), "the pager says where we are");
    assert!(page.text.contains(r#"data-testid="timeline""#));
    assert!(page.text.contains(r#"data-testid="token-chart-loading""#), "the chart loads after the page");
    assert!(page.text.contains(r#"data-testid="transcript-fold""#), "the transcript is folded");
    assert!(!page.text.contains(r#"data-testid="message""#), "and loads when unfolded");
    assert!(!page.text.contains("Count with the calculator, 130 steps.\"},{"), "the script is not shipped");

    let later = app.get(&format!("/runs/{}?from=120", run.id)).await;
    assert_eq!(count(&later.text, r#"data-testid="step""#), 1, "step 120, of the page holding it: 100-129");
    assert!(later.text.replace("<!>", "").contains("steps 100–129 of 130"));
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

/// A model that streams `pieces` pieces of text, then waits for a permit
/// of `finish` before it ends its answer.
struct Chatty {
    pieces: usize,
    finish: Arc<Semaphore>,
}

fn piece(i: usize) -> String {
    format!("word{i} ")
}

// `Model` is an `async_trait`; this crate does not depend on the macro, so
// the method is written the way the macro expands it.
impl Model for Chatty {
    fn stream<'life0, 'async_trait>(
        &'life0 self,
        _req: ModelRequest,
    ) -> Pin<Box<dyn Future<Output = Result<ModelStream, ModelError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let text = stream::iter((0..self.pieces).map(|i| Ok(ModelChunk::TextDelta(piece(i)))));
        let finish = self.finish.clone();
        let end = stream::once(async move {
            finish.acquire().await.expect("open").forget();
            Ok(ModelChunk::Usage(Usage::default()))
        })
        .chain(stream::iter([Ok(ModelChunk::Finish("stop".into()))]));
        Box::pin(std::future::ready(Ok(text.chain(end).boxed())))
    }
}

#[tokio::test]
async fn a_trace_reloaded_mid_answer_streams_all_its_text_so_far() {
    const PIECES: usize = 1_200;
    let finish = Arc::new(Semaphore::new(0));
    let mut models = ModelRegistry::with_builtin();
    models.register("chatty", Arc::new(Chatty { pieces: PIECES, finish: finish.clone() }));
    let app = app_with_models(models).await;
    let req = CreateRun { initial_prompt: "talk".into(), model: Some("chatty".into()), ..CreateRun::default() };
    let (run, _) = app.engine.runs().create_run(req).await.unwrap();
    // Wait (a hang guard, no timing) until every piece so far is stored:
    // `run.status`, `step.started`, then the pieces.
    tokio::time::timeout(Duration::from_secs(20), async {
        while app.engine.traces().last_event_seq(&run.id).await.unwrap() < 2 + PIECES as u64 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the pieces are never stored");

    // The page is reloaded now: where does its live stream start?
    let reply = app
        .send(Method::POST, GetLiveTrace::PATH, Some(&format!("id={}", run.id)), "application/x-www-form-urlencoded")
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let trace = reply.json();
    assert_eq!(trace["run"]["status"], "running");
    let after = trace["stream_after"].as_u64().unwrap();

    // The answer ends; the page's stream, read to its end, holds the whole text.
    finish.add_permits(1);
    let mut events = app.engine.traces().run_events(&run.id, after).await.unwrap();
    let mut text = String::new();
    let mut started = false;
    while let Some(e) = tokio::time::timeout(Duration::from_secs(20), events.next()).await.expect("stream hangs") {
        match e.unwrap().kind {
            EventKind::StepStarted { index: 0 } => started = true,
            EventKind::MessageDelta { step_index: 0, text: t } => text.push_str(&t),
            _ => {}
        }
    }
    assert!(started, "the stream starts with the step being written");
    let whole: String = (0..PIECES).map(piece).collect();
    assert_eq!(text.len(), whole.len(), "text lost before the reload");
    assert_eq!(text, whole);
    let done = app.engine.runs().wait_until_settled(&run.id, Duration::from_secs(20)).await.unwrap();
    assert_eq!(done.status, RunStatus::Done);
}
