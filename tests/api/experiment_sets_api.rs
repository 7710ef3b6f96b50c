//! Experiments of several models through the API: one experiment per model
//! over the same dataset version, kept as a set whose report reads them side
//! by side; a set that cannot run whole starts nothing; who may start and
//! read one; another project's set behaving as absent.

use axum::http::{Method, StatusCode};
use runlens_engine::model::{Actor, Role};
use serde_json::{json, Value};

use crate::experiments_api::{dataset, report_when, rows};
use crate::groups_api::{three_model_app, MODELS};
use crate::support::App;

fn items() -> Value {
    json!([
        {"input": {"prompt": "What is 2 + 2?"}, "expected": "4"},
        {"input": {"prompt": "What is 3 + 3?"}, "expected": "6"},
        {"input": {"prompt": "What is 4 + 4?"}, "expected": "8"}
    ])
}

/// The experiment of a set: the built-in model answering "4" to everything.
fn experiment(ds: &str) -> Value {
    json!({"dataset_id": ds, "name": "arith", "tools": [], "model_settings": {"script": [{"text": "4"}]},
           "scorers": [{"name": "correct", "scorer": {"kind": "contains"}}]})
}

async fn start_set(app: &App, body: Value) -> Value {
    let made = app.post_json("/api/experiment-sets", &body.to_string()).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    made.json()
}

#[tokio::test]
async fn each_model_runs_every_item_and_the_set_reads_them_side_by_side() {
    let app = three_model_app().await;
    let ds = dataset(&app, "arith", items()).await;
    let set =
        start_set(&app, json!({"models": [MODELS[1], MODELS[0], MODELS[2]], "experiment": experiment(&ds)})).await;
    let set_id = set["set_id"].as_str().unwrap().to_owned();
    let made = set["experiments"].as_array().unwrap();
    assert_eq!(made.len(), 3);
    for (exp, model) in made.iter().zip([MODELS[1], MODELS[0], MODELS[2]]) {
        assert_eq!(exp["set_id"], set_id.as_str());
        assert_eq!(exp["spec"]["model"], model);
        assert_eq!(exp["name"], format!("arith · {model}"));
        assert_eq!(exp["item_count"], 3);
        report_when(&app, exp["id"].as_str().unwrap(), |r| r["experiment"]["status"] == "done").await;
        let rows = rows(&app, exp["id"].as_str().unwrap()).await;
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().all(|r| r["status"] == "done" && r["output"] == "4"), "{rows:?}");
        for row in &rows {
            let run = app.get(&format!("/api/runs/{}", row["run_id"].as_str().unwrap())).await.json();
            assert_eq!(run["model"], model, "each run is of its experiment's model");
        }
    }
    let report = app.get(&format!("/api/experiment-sets/{set_id}")).await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.text);
    let report = report.json();
    assert_eq!(report["set_id"], set_id.as_str());
    let reports = report["reports"].as_array().unwrap();
    let order: Vec<&str> = reports.iter().map(|r| r["experiment"]["spec"]["model"].as_str().unwrap()).collect();
    assert_eq!(order, [MODELS[1], MODELS[0], MODELS[2]], "in the order the models were given");
    for r in reports {
        assert_eq!(r["progress"]["done"], 3);
        let correct = &r["scorers"][0]["summary"];
        assert_eq!((correct["name"].as_str(), correct["count"].as_u64()), (Some("correct"), Some(3)));
        assert_eq!(correct["yes"], 1, "only 2 + 2 is answered right: {correct}");
    }
    // The set's experiments are ordinary experiments of the list, and the audit names each.
    let listed = app.get(&format!("/api/experiments?dataset_id={ds}")).await.json();
    assert_eq!(listed["experiments"].as_array().unwrap().len(), 3);
    let audit = app.get("/api/audit?limit=200").await.json();
    let started = audit["entries"].as_array().unwrap().iter().filter(|e| e["action"] == "experiment_started").count();
    assert_eq!(started, 3);
}

#[tokio::test]
async fn a_set_that_cannot_run_whole_starts_nothing() {
    let app = three_model_app().await;
    let ds = dataset(&app, "arith", items()).await;
    let exp = experiment(&ds);
    let with = |patch: Value| {
        let mut e = exp.clone();
        e.as_object_mut().unwrap().extend(patch.as_object().unwrap().clone());
        e
    };
    let cases = [
        (json!({"models": [MODELS[0]], "experiment": exp}), "models: 2 to 8"),
        (json!({"models": [MODELS[0], MODELS[0]], "experiment": exp}), "listed twice"),
        (json!({"models": [MODELS[0], "nope"], "experiment": exp}), "models[1]: unknown model `nope`"),
        (
            json!({"models": [MODELS[0], MODELS[1]], "experiment": with(json!({"model": "builtin"}))}),
            "experiment.model",
        ),
        (json!({"models": [MODELS[0], MODELS[1]], "experiment": with(json!({"tools": ["nope"]}))}), "nope"),
        (json!({"models": [MODELS[0], MODELS[1]], "experiment": with(json!({"concurrency": 0}))}), "concurrency"),
        (json!({"models": [MODELS[0], MODELS[1]], "experiment": exp, "extra": 1}), "extra"),
    ];
    for (body, says) in cases {
        let reply = app.post_json("/api/experiment-sets", &body.to_string()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}: {}", reply.text);
        assert!(reply.text.contains(says), "{body}: {} should say {says}", reply.text);
    }
    let missing = json!({"models": [MODELS[0], MODELS[1]], "experiment": with(json!({"dataset_id": "nope"}))});
    assert_eq!(app.post_json("/api/experiment-sets", &missing.to_string()).await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.get("/api/experiments").await.json()["experiments"].as_array().unwrap().len(), 0);
    assert_eq!(app.get("/api/runs").await.json()["runs"].as_array().unwrap().len(), 0);
    assert_eq!(app.get("/api/experiment-sets/nope").await.status, StatusCode::NOT_FOUND);
    // An experiment started alone is of no set.
    let alone = app.post_json("/api/experiments", &with(json!({"model": "builtin"})).to_string()).await.json();
    assert!(alone.get("set_id").is_none(), "{alone}");
}

#[tokio::test]
async fn viewers_read_a_set_operators_start_one_and_other_projects_see_none() {
    let app = three_model_app().await;
    let ds = dataset(&app, "arith", items()).await;
    let body = json!({"models": [MODELS[0], MODELS[1]], "experiment": experiment(&ds)});
    let viewer = app.key("default", Role::Viewer).await;
    let refused = app.with_key(&viewer, Method::POST, "/api/experiment-sets", Some(body.clone())).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);
    let operator = app.key("default", Role::Operator).await;
    let made = app.with_key(&operator, Method::POST, "/api/experiment-sets", Some(body.clone())).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    let set_id = made.json()["set_id"].as_str().unwrap().to_owned();
    let read = app.with_key(&viewer, Method::GET, &format!("/api/experiment-sets/{set_id}"), None).await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.text);

    app.engine.identity().create_project("team-b", &Actor::system()).await.unwrap();
    let other = app.key("team-b", Role::Admin).await;
    let theirs = app.with_key(&other, Method::GET, &format!("/api/experiment-sets/{set_id}"), None).await;
    assert_eq!(theirs.status, StatusCode::NOT_FOUND, "{}", theirs.text);
    let on_ours = app.with_key(&other, Method::POST, "/api/experiment-sets", Some(body)).await;
    assert_eq!(on_ours.status, StatusCode::NOT_FOUND, "{}", on_ours.text);
}
