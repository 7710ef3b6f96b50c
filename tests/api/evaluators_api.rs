//! Online evaluators through the API: an evaluator scores the runs of its
//! target that end after it is made — of a tag here, all the project's
//! there, never a judge's own run — a sample of them chosen by run id; off,
//! it scores nothing, and on again it watches only what ends from then;
//! the runs list shows and filters the scores; bad evaluators are 400s;
//! viewers read, operators change; another project's is a 404.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use runlens_engine::model::{in_sample, Role};
use serde_json::{json, Value};

use crate::support::{app, App};

/// Polls without progress before a wait is taken as a hang.
const STALLED_POLLS: u32 = 400;

/// A run that answers `answer`, tagged `tags`, once it has ended.
async fn run(app: &App, answer: &str, tags: Value) -> String {
    let body = json!({"initial_prompt": "hi", "tags": tags, "model_settings": {"script": [{"text": answer}]}});
    app.finished_run(&body.to_string()).await["id"].as_str().unwrap().to_owned()
}

async fn make(app: &App, body: Value) -> Value {
    let reply = app.post_json("/api/evaluators", &body.to_string()).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    reply.json()
}

/// Evaluator `id` once it has looked at `seen` runs (failing if it stops moving first).
async fn seen(app: &App, id: &str, seen: u64) -> Value {
    let (mut last, mut stalled) = (Value::Null, 0u32);
    loop {
        let e = app.get(&format!("/api/evaluators/{id}")).await.json();
        if e["runs_seen"].as_u64() >= Some(seen) {
            return e;
        }
        stalled = if e["runs_seen"] == last { stalled + 1 } else { 0 };
        last = e["runs_seen"].clone();
        assert!(stalled < STALLED_POLLS, "the evaluator stopped at {e}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn scores(app: &App, run: &str) -> Vec<Value> {
    app.get(&format!("/api/runs/{run}/scores")).await.json()["scores"].as_array().unwrap().clone()
}

fn listed(page: &Value) -> Vec<String> {
    page["runs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn an_evaluator_scores_the_new_runs_of_its_target_and_the_runs_list_filters_them() {
    let app = app().await;
    let _worker = app.engine.start_evaluators();
    let before = run(&app, "3", json!({"env": "prod"})).await;
    let prod = make(
        &app,
        json!({"name": "prod answers", "target": {"tag": "env:prod"}, "sample_percent": 100, "scorers": [
            {"name": "answer", "scorer": {"kind": "contains", "expected": "3"}},
            {"name": "judged", "scorer": {"kind": "judge", "rubric": "Says \"3\"."}}
        ]}),
    )
    .await;
    let all = make(
        &app,
        json!({"name": "every run", "sample_percent": 100, "scorers": [{"scorer": {"kind": "bounds", "max_turns": 5}}]}),
    )
    .await;
    assert_eq!((prod["runs_seen"].clone(), prod["enabled"].clone()), (json!(0), json!(true)));

    let right = run(&app, "it is 3", json!({"env": "prod"})).await;
    let wrong = run(&app, "it is 4", json!({"env": "prod"})).await;
    let dev = run(&app, "it is 3", json!({"env": "dev"})).await;
    let prod = seen(&app, prod["id"].as_str().unwrap(), 2).await;
    assert_eq!(prod["runs_scored"], 2, "{prod}");
    // `every run` has seen the three runs and the two judge's runs it leaves alone.
    seen(&app, all["id"].as_str().unwrap(), 3).await;

    let names = |s: &[Value]| s.iter().map(|s| s["name"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    assert!(scores(&app, &before).await.is_empty(), "a run that ended before the evaluators is not scored");
    let right_scores = scores(&app, &right).await;
    assert_eq!(names(&right_scores), ["answer", "judged", "bounds"]);
    assert_eq!(right_scores[0]["value"], true);
    assert_eq!(right_scores[0]["author"]["name"], "evaluator prod answers");
    assert_eq!(right_scores[1]["label"], "pass");
    assert_eq!(scores(&app, &wrong).await[0]["value"], false);
    assert_eq!(names(&scores(&app, &dev).await), ["bounds"], "the dev run is only the other evaluator's");
    let judge_run = right_scores[1]["judge_run_id"].as_str().unwrap();
    assert!(scores(&app, judge_run).await.is_empty(), "a judge's own run is never evaluated");

    // The runs list filters by score.
    let filtered = |q: &str| {
        let app = &app;
        let q = q.to_owned();
        async move {
            let reply = app.get(&format!("/api/runs?score={}", urlencoding(&q))).await;
            assert_eq!(reply.status, StatusCode::OK, "{q}: {}", reply.text);
            listed(&reply.json())
        }
    };
    assert_eq!(filtered("answer=yes").await, vec![right.clone()]);
    assert_eq!(filtered("answer=no").await, vec![wrong.clone()]);
    assert_eq!(filtered("answer").await, vec![wrong.clone(), right.clone()]);
    assert_eq!(filtered("judged>=0.5").await, vec![right.clone()]);
    assert_eq!(filtered("judged<0.5").await, vec![wrong.clone()]);
    assert_eq!(filtered("judged=pass").await, vec![right.clone()]);
    assert_eq!(filtered("bounds=yes").await.len(), 3);
    for bad in ["answer<x", "a/b", "=yes"] {
        let reply = app.get(&format!("/api/runs?score={}", urlencoding(bad))).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{bad}: {}", reply.text);
    }
}

fn urlencoding(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn a_sample_is_the_runs_its_ids_choose_and_an_evaluator_off_scores_nothing() {
    let app = app().await;
    let _worker = app.engine.start_evaluators();
    let half = make(
        &app,
        json!({"name": "half", "sample_percent": 50, "scorers": [{"scorer": {"kind": "bounds", "max_turns": 5}}]}),
    )
    .await;
    let id = half["id"].as_str().unwrap().to_owned();
    let mut runs = Vec::new();
    for i in 0..12 {
        runs.push(run(&app, &format!("answer {i}"), json!({})).await);
    }
    let half = seen(&app, &id, 12).await;
    let chosen: Vec<&String> = runs.iter().filter(|r| in_sample(&id, r, 50)).collect();
    assert_eq!(half["runs_scored"], chosen.len(), "{half}");
    for r in &runs {
        assert_eq!(scores(&app, r).await.len(), usize::from(in_sample(&id, r, 50)), "run {r}");
    }

    // Off: runs end unscored, and on again it watches only what ends from then.
    let mut body = json!({"name": "half", "sample_percent": 100, "enabled": false,
        "scorers": [{"scorer": {"kind": "bounds", "max_turns": 5}}]});
    let off = app.with_key(&app.admin_key, Method::PUT, &format!("/api/evaluators/{id}"), Some(body.clone())).await;
    assert_eq!(off.status, StatusCode::OK, "{}", off.text);
    assert_eq!(off.json()["enabled"], false);
    let while_off = run(&app, "unseen", json!({})).await;
    body["enabled"] = json!(true);
    let on = app.with_key(&app.admin_key, Method::PUT, &format!("/api/evaluators/{id}"), Some(body)).await;
    assert_eq!(on.status, StatusCode::OK, "{}", on.text);
    let after = run(&app, "seen", json!({})).await;
    seen(&app, &id, 13).await;
    assert!(scores(&app, &while_off).await.is_empty(), "a run that ended while it was off is not scored");
    assert_eq!(scores(&app, &after).await.len(), 1);
}

#[tokio::test]
async fn bad_evaluators_are_refused_and_roles_and_projects_hold() {
    let app = app().await;
    let ok = json!({"name": "x", "sample_percent": 10, "scorers": [{"scorer": {"kind": "bounds", "max_turns": 5}}]});
    let with = |k: &str, v: Value| {
        let mut b = ok.clone();
        b[k] = v;
        b
    };
    for (body, says) in [
        (with("name", json!(" ")), "name"),
        (with("sample_percent", json!(101)), "sample_percent"),
        (with("sample_percent", json!(-1)), "integer `-1`"),
        (with("scorers", json!([])), "scorers"),
        (with("scorers", json!([{"scorer": {"kind": "regex", "pattern": "("}}])), "scorers[0]"),
        (with("scorers", json!([{"scorer": {"kind": "judge", "rubric": "r", "model": "no/where"}}])), "judge: model"),
        (
            with(
                "scorers",
                json!([{"scorer": {"kind": "bounds", "max_turns": 1}}, {"scorer": {"kind": "bounds", "max_turns": 2}}]),
            ),
            "given twice",
        ),
        (with("target", json!({"tag": "novalue"})), "target.tag"),
        (with("target", json!({"agent_id": ""})), "target.agent_id"),
        (with("surprise", json!(1)), "surprise"),
    ] {
        let reply = app.post_json("/api/evaluators", &body.to_string()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}: {}", reply.text);
        assert!(reply.text.contains(says), "{body}: {} should say {says}", reply.text);
    }
    assert_eq!(app.get("/api/evaluators").await.json()["evaluators"], json!([]));

    let made = make(&app, ok.clone()).await;
    let id = made["id"].as_str().unwrap();
    let twice = app.post_json("/api/evaluators", &ok.to_string()).await;
    assert_eq!(twice.status, StatusCode::CONFLICT, "{}", twice.text);

    let viewer = app.key("default", Role::Viewer).await;
    let refused = app.with_key(&viewer, Method::POST, "/api/evaluators", Some(with("name", json!("v")))).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let read = app.with_key(&viewer, Method::GET, &format!("/api/evaluators/{id}"), None).await;
    assert_eq!(read.status, StatusCode::OK);
    app.engine.identity().create_project("other", &runlens_engine::model::Actor::system()).await.unwrap();
    let other = app.key("other", Role::Admin).await;
    for method in [Method::GET, Method::DELETE] {
        let reply = app.with_key(&other, method.clone(), &format!("/api/evaluators/{id}"), None).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{method}: {}", reply.text);
    }
    let put = app.with_key(&other, Method::PUT, &format!("/api/evaluators/{id}"), Some(ok.clone())).await;
    assert_eq!(put.status, StatusCode::NOT_FOUND);
    assert_eq!(app.with_key(&other, Method::GET, "/api/evaluators", None).await.json()["evaluators"], json!([]));

    let gone = app.with_key(&app.admin_key, Method::DELETE, &format!("/api/evaluators/{id}"), None).await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    assert_eq!(app.get(&format!("/api/evaluators/{id}")).await.status, StatusCode::NOT_FOUND);
    let audit = app.get("/api/audit?limit=20").await.json().to_string();
    for action in ["evaluator_created", "evaluator_deleted"] {
        assert!(audit.contains(action), "{action} in {audit}");
    }
}
