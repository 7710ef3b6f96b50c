//! Experiments through the API: an email-sending agent run over a dataset in
//! each tool mode — recorded (nothing is sent, every item runs once, calls
//! without a recorded result fail saying so), live (each run pauses for a
//! person; cancelling the experiment cancels them) and mock — with its
//! scores, rows and report; two experiments compared item by item; bad
//! requests refused by field with nothing started; who may do what; and
//! another project's experiment behaving as absent.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use runlens_engine::model::{Actor, Role};
use serde_json::{json, Value};

use crate::support::{app, App};

/// Makes dataset `name` holding `items`; its id.
pub(crate) async fn dataset(app: &App, name: &str, items: Value) -> String {
    let made = app.post_json("/api/datasets", &json!({"name": name}).to_string()).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    let id = made.json()["id"].as_str().unwrap().to_owned();
    let added = app.post_json(&format!("/api/datasets/{id}/items"), &json!({"items": items}).to_string()).await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.text);
    id
}

fn email(to: &str) -> Value {
    json!({"to": to, "subject": "Your refund", "body": "It is on its way."})
}

/// An agent configuration that emails `to`, then answers "refund sent".
fn emailer(to: &str) -> Value {
    json!({"model": "builtin", "tools": ["send_email"], "model_settings": {"script": [
        {"tool_calls": [{"name": "send_email", "arguments": email(to)}]},
        {"text": "refund sent"}
    ]}})
}

/// Three refund questions: the first with the email's result recorded,
/// the second with a result recorded for other arguments, the third with none.
fn refund_items() -> Value {
    json!([
        {"input": {"prompt": "Refund order 1"}, "expected": "refund sent",
         "recorded_results": [{"tool": "send_email", "arguments": email("a@example.com"), "result": "queued #1"}]},
        {"input": {"prompt": "Refund order 2"}, "expected": "refund sent",
         "recorded_results": [{"tool": "send_email", "arguments": email("z@example.com"), "result": "queued #2"}]},
        {"input": {"prompt": "Refund order 3"}, "expected": "no refund"}
    ])
}

async fn start(app: &App, body: Value) -> Value {
    let made = app.post_json("/api/experiments", &body.to_string()).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    made.json()
}

/// Polls (50 ms apart) in a row in which an experiment's progress did not
/// move before it is called stuck: a hang, never a speed.
const STALLED_POLLS: u32 = 400;

/// The experiment's report once `until` holds of it.
pub(crate) async fn report_when(app: &App, id: &str, until: impl Fn(&Value) -> bool) -> Value {
    let (mut last, mut stalled) = (Value::Null, 0u32);
    loop {
        let report = app.get(&format!("/api/experiments/{id}")).await;
        assert_eq!(report.status, StatusCode::OK, "{}", report.text);
        let report = report.json();
        if until(&report) {
            return report;
        }
        stalled = if report["progress"] == last { stalled + 1 } else { 0 };
        last = report["progress"].clone();
        assert!(stalled < STALLED_POLLS, "the experiment stopped moving before it got there: {report}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) async fn rows(app: &App, id: &str) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = app.get(&format!("/api/experiments/{id}/rows?limit=2&cursor={cursor}")).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.text);
        let page = page.json();
        rows.extend(page["rows"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => return rows,
        }
    }
}

async fn outbox(app: &App) -> usize {
    app.get("/api/outbox").await.json()["emails"].as_array().map_or(0, Vec::len)
}

async fn calls_of(app: &App, run_id: &str) -> Vec<Value> {
    let steps = app.get(&format!("/api/runs/{run_id}/steps")).await.json();
    steps["steps"].as_array().unwrap().iter().flat_map(|s| s["tool_calls"].as_array().unwrap().clone()).collect()
}

#[tokio::test]
async fn a_recorded_experiment_of_an_email_agent_sends_nothing_and_scores_every_item_once() {
    let app = app().await;
    let ds = dataset(&app, "refunds", refund_items()).await;
    let mut body = emailer("a@example.com");
    body["dataset_id"] = json!(ds);
    body["scorers"] = json!([{"name": "answer", "scorer": {"kind": "contains", "ignore_case": true}},
        {"scorer": {"kind": "bounds", "max_turns": 5}},
        {"name": "judged", "scorer": {"kind": "judge", "rubric": "Says the refund was sent."}}]);
    body["concurrency"] = json!(2);
    let exp = start(&app, body).await;
    assert_eq!(exp["status"], "running");
    assert_eq!(exp["item_count"], 3);
    assert_eq!(exp["dataset_version"], 1);
    assert_eq!(exp["spec"]["tool_mode"], "recorded", "recorded is the default");
    let id = exp["id"].as_str().unwrap();

    let report = report_when(&app, id, |r| r["experiment"]["status"] == "done").await;
    assert_eq!(report["progress"]["items"], 3);
    assert_eq!(report["progress"]["done"], 3, "{report}");
    assert_eq!(outbox(&app).await, 0, "a recorded experiment sends nothing");
    let answer = report["scorers"].as_array().unwrap().iter().find(|s| s["summary"]["name"] == "answer").unwrap();
    assert_eq!(answer["summary"]["count"], 3, "{report}");
    assert_eq!(answer["summary"]["yes"], 2, "{report}");
    assert_eq!(answer["summary"]["no"], 1, "{report}");
    let bars: Vec<(String, u64)> = (answer["distribution"].as_array().unwrap().iter())
        .map(|b| (b["label"].as_str().unwrap().to_owned(), b["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(bars, vec![("yes".into(), 2), ("no".into(), 1)]);
    // The judge scored every item from a run of its own, outside the experiment.
    let judged = report["scorers"].as_array().unwrap().iter().find(|s| s["summary"]["name"] == "judged").unwrap();
    assert_eq!(judged["summary"]["count"], 3, "{report}");

    let rows = rows(&app, id).await;
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["input"], "Refund order 1");
    assert!(rows.iter().all(|r| r["status"] == "done" && r["output"] == "refund sent"), "{rows:?}");
    // Each item ran once, as an ordinary run of the experiment that never paused.
    let mut runs = std::collections::HashSet::new();
    for row in &rows {
        let run_id = row["run_id"].as_str().unwrap();
        assert!(runs.insert(run_id.to_owned()));
        let run = app.get(&format!("/api/runs/{run_id}")).await.json();
        assert_eq!(run["experiment"]["experiment_id"], id);
        assert_eq!(run["experiment"]["item_id"], row["item_id"]);
        assert_eq!(run["tool_answers"]["mode"], "recorded");
        let scores = app.get(&format!("/api/runs/{run_id}/scores")).await.json();
        assert_eq!(scores["scores"].as_array().unwrap().len(), 3, "one score per scorer: {scores}");
    }
    let first = calls_of(&app, rows[0]["run_id"].as_str().unwrap()).await;
    assert_eq!((first[0]["status"].as_str(), &first[0]["result"]), (Some("succeeded"), &json!("queued #1")));
    let second = calls_of(&app, rows[1]["run_id"].as_str().unwrap()).await;
    assert_eq!(second[0]["status"], "failed");
    assert!(second[0]["error"].as_str().unwrap().contains("for these arguments"), "{second:?}");
    let third = calls_of(&app, rows[2]["run_id"].as_str().unwrap()).await;
    assert!(third[0]["error"].as_str().unwrap().contains("no result of `send_email` was recorded"), "{third:?}");
    let runs_list = app.get("/api/runs?limit=50").await.json();
    let (judges, items): (Vec<&Value>, Vec<&Value>) =
        runs_list["runs"].as_array().unwrap().iter().partition(|r| r["tags"]["runlens.judge"] == "judged");
    assert_eq!((items.len(), judges.len()), (3, 3), "the items' runs and the judge's runs, and no others");
    // A fork of an item's run is no run of the experiment, and its tools still answer as recorded.
    let first_run = rows[0]["run_id"].as_str().unwrap();
    let fork = app.post_json(&format!("/api/runs/{first_run}/fork"), r#"{"from_step": 0}"#).await;
    assert_eq!(fork.status, StatusCode::CREATED, "{}", fork.text);
    let fork = fork.json();
    assert!(fork["experiment"].is_null(), "{fork}");
    assert_eq!(fork["tool_answers"]["mode"], "recorded");
    let fork_id = fork["id"].as_str().unwrap().to_owned();
    app.engine.runs().wait_until_settled(&fork_id, Duration::from_secs(20)).await.unwrap();
    assert_eq!(outbox(&app).await, 0);
    let report = app.get(&format!("/api/experiments/{id}")).await.json();
    assert_eq!(report["progress"]["started"], 3, "{report}");

    let listed = app.get(&format!("/api/experiments?dataset_id={ds}")).await.json();
    assert_eq!(listed["experiments"][0]["id"], id);
    let audit = app.get("/api/audit").await.json();
    assert!(audit["entries"].as_array().unwrap().iter().any(|e| e["action"] == "experiment_started"), "{audit}");
}

#[tokio::test]
async fn a_live_experiment_pauses_for_approval_and_cancelling_it_cancels_its_runs() {
    let app = app().await;
    let ds = dataset(&app, "refunds", refund_items()).await;
    let mut body = emailer("a@example.com");
    body["dataset_id"] = json!(ds);
    body["tool_mode"] = json!("live");
    body["concurrency"] = json!(2);
    let exp = start(&app, body).await;
    let id = exp["id"].as_str().unwrap();
    // Two at a time: both wait for a person, the third item waits its turn.
    let report = report_when(&app, id, |r| r["progress"]["waiting"] == 2).await;
    assert_eq!(report["progress"]["started"], 2, "{report}");
    assert_eq!(outbox(&app).await, 0, "nothing is sent without a decision");
    let rows = rows(&app, id).await;
    let paused = rows[0]["run_id"].as_str().unwrap();
    let call = calls_of(&app, paused).await[0]["id"].as_str().unwrap().to_owned();
    let ok = app.post_json(&format!("/api/runs/{paused}/tool-calls/{call}/approve"), "").await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    let report = report_when(&app, id, |r| r["progress"]["started"] == 3 && r["progress"]["waiting"] == 2).await;
    assert_eq!(report["progress"]["done"], 1, "{report}");
    assert_eq!(outbox(&app).await, 1, "the approved call sent its email");

    let cancelled = app.post_json(&format!("/api/experiments/{id}/cancel"), "").await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.text);
    assert_eq!(cancelled.json()["status"], "cancelled");
    let report = report_when(&app, id, |r| r["progress"]["cancelled"] == 2).await;
    assert_eq!(report["progress"]["done"], 1, "{report}");
    let again = app.post_json(&format!("/api/experiments/{id}/cancel"), "").await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.text);
    assert_eq!(outbox(&app).await, 1);
}

#[tokio::test]
async fn a_mock_experiment_answers_the_mocked_tool_and_runs_the_others() {
    let app = app().await;
    let ds = dataset(&app, "sums", json!([{"input": {"prompt": "Add and mail"}, "expected": "3"}])).await;
    let body = json!({"dataset_id": ds, "model": "builtin", "tools": ["send_email", "calculator"],
        "tool_mode": "mock", "mocks": [{"tool": "send_email", "result": {"id": "mocked"}}],
        "model_settings": {"script": [
            {"tool_calls": [{"name": "send_email", "arguments": email("boss@example.com")},
                            {"name": "calculator", "arguments": {"expression": "1 + 2"}}]},
            {"text": "3"}]},
        "scorers": [{"scorer": {"kind": "exact"}}]});
    let exp = start(&app, body).await;
    let id = exp["id"].as_str().unwrap();
    let report = report_when(&app, id, |r| r["experiment"]["status"] == "done").await;
    assert_eq!(report["scorers"][0]["summary"]["yes"], 1, "{report}");
    let row = &rows(&app, id).await[0];
    let calls = calls_of(&app, row["run_id"].as_str().unwrap()).await;
    assert_eq!(calls[0]["result"], json!({"id": "mocked"}));
    assert_eq!(calls[1]["status"], "succeeded");
    assert_ne!(calls[1]["result"], json!({"id": "mocked"}), "the calculator ran: {calls:?}");
    assert_eq!(outbox(&app).await, 0);
}

#[tokio::test]
async fn two_experiments_compare_item_by_item() {
    let app = app().await;
    let ds = dataset(
        &app,
        "capitals",
        json!([
            {"input": {"prompt": "Capital of France?"}, "expected": "Paris"},
            {"input": {"prompt": "Capital of Spain?"}, "expected": "Madrid"}
        ]),
    )
    .await;
    let run = |answer: &str| {
        json!({"dataset_id": ds, "model": "builtin", "name": format!("answers {answer}"),
            "model_settings": {"script": [{"text": answer}]},
            "scorers": [{"name": "correct", "scorer": {"kind": "contains"}}]})
    };
    let a = start(&app, run("Paris")).await;
    let b = start(&app, run("Madrid")).await;
    let (a, b) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap());
    report_when(&app, a, |r| r["experiment"]["status"] == "done").await;
    report_when(&app, b, |r| r["experiment"]["status"] == "done").await;
    let cmp = app.get(&format!("/api/experiments/{a}/compare?with={b}")).await;
    assert_eq!(cmp.status, StatusCode::OK, "{}", cmp.text);
    let cmp = cmp.json();
    assert_eq!((cmp["improved"].as_u64(), cmp["regressed"].as_u64()), (Some(1), Some(1)), "{cmp}");
    assert_eq!(cmp["items"].as_array().unwrap().len(), 2);
    let regressed = app.get(&format!("/api/experiments/{a}/compare?with={b}&change=regressed")).await.json();
    let only = regressed["items"].as_array().unwrap();
    assert_eq!(only.len(), 1, "{regressed}");
    assert_eq!((only[0]["base_score"].as_f64(), only[0]["other_score"].as_f64()), (Some(1.0), Some(0.0)));
    let paged = app.get(&format!("/api/experiments/{a}/compare?with={b}&limit=1")).await.json();
    let next = paged["next_cursor"].as_str().expect("a second page");
    let rest = app.get(&format!("/api/experiments/{a}/compare?with={b}&limit=1&cursor={next}")).await.json();
    assert_eq!(rest["items"].as_array().unwrap().len(), 1);
    assert_ne!(rest["items"][0]["item_id"], paged["items"][0]["item_id"]);

    let other_ds = dataset(&app, "other", json!([{"input": {"prompt": "x"}}])).await;
    let mut elsewhere = run("x");
    elsewhere["dataset_id"] = json!(other_ds);
    let c = start(&app, elsewhere).await;
    let bad = app.get(&format!("/api/experiments/{a}/compare?with={}", c["id"].as_str().unwrap())).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.text);
    let bad = app.get(&format!("/api/experiments/{a}/compare?with={b}&change=better")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.text);
}

#[tokio::test]
async fn bad_requests_are_refused_by_field_and_start_nothing() {
    let app = app().await;
    let ds = dataset(&app, "one", json!([{"input": {"prompt": "hi"}}])).await;
    let empty = app.post_json("/api/datasets", &json!({"name": "empty"}).to_string()).await.json();
    let cases = [
        (json!({"dataset_id": ds}), "agent_id"),
        (json!({"dataset_id": ds, "model": "nope"}), "unknown model"),
        (json!({"dataset_id": ds, "model": "builtin", "tool_mode": "mock"}), "mocks"),
        (json!({"dataset_id": ds, "model": "builtin", "mocks": [{"tool": "calculator", "result": 1}]}), "mocks"),
        (json!({"dataset_id": ds, "model": "builtin", "tool_mode": "mock", "mocks": [{"tool": "nope"}]}), "mocks[0]"),
        (json!({"dataset_id": ds, "model": "builtin", "concurrency": 0}), "concurrency"),
        (json!({"dataset_id": ds, "model": "builtin", "dataset_version": 9}), "dataset_version"),
        (json!({"dataset_id": empty["id"], "model": "builtin"}), "no items"),
        (json!({"dataset_id": ds, "agent_id": "nobody"}), "agent_id"),
        (json!({"dataset_id": ds, "model": "builtin", "tools": ["nope"]}), "nope"),
        (
            json!({"dataset_id": ds, "model": "builtin", "scorers": [{"scorer": {"kind": "regex", "pattern": "("}}]}),
            "scorers[0]",
        ),
        (json!({"dataset_id": ds, "model": "builtin", "surprise": 1}), "surprise"),
        (
            json!({"dataset_id": ds, "model": "builtin",
                "scorers": [{"scorer": {"kind": "judge", "rubric": "x", "model": "elsewhere/m"}}]}),
            "scorers[0]: judge: model",
        ),
    ];
    for (body, says) in cases {
        let reply = app.post_json("/api/experiments", &body.to_string()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}: {}", reply.text);
        assert!(reply.text.contains(says), "{body}: {} should say {says}", reply.text);
    }
    let missing =
        app.post_json("/api/experiments", &json!({"dataset_id": "nope", "model": "builtin"}).to_string()).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.text);
    assert_eq!(app.get("/api/experiments").await.json()["experiments"].as_array().unwrap().len(), 0);
    assert_eq!(app.get("/api/runs").await.json()["runs"].as_array().unwrap().len(), 0);
    assert_eq!(app.get("/api/experiments/nope").await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn viewers_read_operators_start_and_other_projects_see_nothing() {
    let app = app().await;
    let ds = dataset(&app, "one", json!([{"input": {"prompt": "hi"}}])).await;
    let body = json!({"dataset_id": ds, "model": "builtin"});
    let viewer = app.key("default", Role::Viewer).await;
    let refused = app.with_key(&viewer, Method::POST, "/api/experiments", Some(body.clone())).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);
    let operator = app.key("default", Role::Operator).await;
    let made = app.with_key(&operator, Method::POST, "/api/experiments", Some(body)).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    let id = made.json()["id"].as_str().unwrap().to_owned();
    report_when(&app, &id, |r| r["experiment"]["status"] == "done").await;
    let read = app.with_key(&viewer, Method::GET, &format!("/api/experiments/{id}"), None).await;
    assert_eq!(read.status, StatusCode::OK);
    let no = app.with_key(&viewer, Method::POST, &format!("/api/experiments/{id}/cancel"), None).await;
    assert_eq!(no.status, StatusCode::FORBIDDEN);

    app.engine.identity().create_project("team-b", &Actor::system()).await.unwrap();
    let other = app.key("team-b", Role::Admin).await;
    for uri in [format!("/api/experiments/{id}"), format!("/api/experiments/{id}/rows")] {
        let reply = app.with_key(&other, Method::GET, &uri, None).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{uri}: {}", reply.text);
    }
    let cancel = app.with_key(&other, Method::POST, &format!("/api/experiments/{id}/cancel"), None).await;
    assert_eq!(cancel.status, StatusCode::NOT_FOUND);
    let theirs = app.with_key(&other, Method::GET, "/api/experiments", None).await.json();
    assert_eq!(theirs["experiments"].as_array().unwrap().len(), 0);
    let start_on_ours = app
        .with_key(&other, Method::POST, "/api/experiments", Some(json!({"dataset_id": ds, "model": "builtin"})))
        .await;
    assert_eq!(start_on_ours.status, StatusCode::NOT_FOUND, "{}", start_on_ours.text);
}

/// `runlens eval` (the real binary) against this app served on a port, with `args`; (exit code, stdout).
async fn eval_cli(app: &App, key: &str, args: &[&str]) -> (i32, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let leptos_options = leptos::config::LeptosOptions::builder().output_name("runlens").build();
    let state = runlens::server::AppState::new(app.engine.clone(), leptos_options, None);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(runlens::server::run(listener, state, async move {
        let _ = stopped.await;
    }));
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_runlens"));
    command.arg("eval").args(["--url", &format!("http://{addr}"), "--key", key]).args(args);
    command.env_remove("RUNLENS_URL").env_remove("RUNLENS_API_KEY").env("RUST_LOG", "error");
    let out = tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap();
    stop.send(()).unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(30), server).await;
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runlens_eval_runs_an_experiment_and_fails_ci_under_a_threshold() {
    let app = app().await;
    dataset(
        &app,
        "capitals",
        json!([
            {"input": {"prompt": "Capital of France?"}, "expected": "Paris"},
            {"input": {"prompt": "Capital of Spain?"}, "expected": "Madrid"}
        ]),
    )
    .await;
    let agent = json!({"name": "capitals", "description": "Names capitals", "model": "builtin",
        "model_settings": {"script": [{"text": "Paris"}]}});
    assert_eq!(app.post_json("/api/agents", &agent.to_string()).await.status, StatusCode::CREATED);
    let key = app.key("default", Role::Operator).await;

    let (code, out) =
        eval_cli(&app, &key, &["--dataset", "capitals", "--agent", "capitals@1", "--min", "contains=0.5"]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("2 items · 2 done"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("contains") && l.contains("0.500") && l.ends_with("pass")), "{out}");

    let (code, out) =
        eval_cli(&app, &key, &["--dataset", "capitals", "--agent", "capitals", "--min", "contains=0.8"]).await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("FAIL") && out.contains("1 threshold(s) not met"), "{out}");

    let (code, out) = eval_cli(&app, &key, &["--dataset", "nope", "--model", "builtin"]).await;
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("404"), "{out}");
    let viewer = app.key("default", Role::Viewer).await;
    let (code, out) = eval_cli(&app, &viewer, &["--dataset", "capitals", "--model", "builtin"]).await;
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("403"), "{out}");
    assert_eq!(app.get("/api/experiments").await.json()["experiments"].as_array().unwrap().len(), 2);
}
