//! Scores through the API: a program or a person scores a run, a step or a
//! tool call (ingested runs too), reads them back with a summary, and
//! deletes its own; bad scores are 400s that keep nothing; a viewer cannot
//! score; another project's run or score is a 404; a run's cap holds under
//! a race; a score goes with its run.

use axum::http::{Method, StatusCode};
use runlens_engine::model::{Actor, Role, Score, ScoreSource, ScoreValue};
use serde_json::{json, Value};

use crate::support::{app, App};

/// A finished run that made one calculator call; (run id, call id).
async fn run_with_call(app: &App) -> (String, String) {
    let run = app
        .finished_run(
            &json!({"initial_prompt": "add", "model_settings": {"script": [
                {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1 + 2"}}]},
                {"text": "3"}
            ]}})
            .to_string(),
        )
        .await;
    let id = run["id"].as_str().unwrap().to_owned();
    let steps = app.get(&format!("/api/runs/{id}/steps")).await.json();
    let call = steps["steps"][0]["tool_calls"][0]["id"].as_str().unwrap().to_owned();
    (id, call)
}

#[tokio::test]
async fn a_program_scores_a_run_its_steps_and_calls_and_reads_them_back() {
    let app = app().await;
    let (run, call) = run_with_call(&app).await;
    let add = |body: Value| {
        let app = &app;
        async move { app.post_json("/api/scores", &body.to_string()).await }
    };

    let whole = add(json!({"run_id": run, "name": "correct", "value": true, "comment": "right answer"})).await;
    assert_eq!(whole.status, StatusCode::CREATED, "{}", whole.text);
    let whole = whole.json();
    assert_eq!(whole["source"], "api");
    assert!(whole["author"]["id"].as_str().unwrap().starts_with("key:"), "{whole}");
    assert_eq!(whole["step_index"], Value::Null);

    let on_step = add(json!({"run_id": run, "step_index": 1, "name": "helpfulness", "value": 0.5})).await;
    assert_eq!(on_step.status, StatusCode::CREATED, "{}", on_step.text);
    let on_call = add(json!({"run_id": run, "call_id": call, "name": "tool use", "value": "good"})).await;
    assert_eq!(on_call.status, StatusCode::CREATED, "{}", on_call.text);
    assert_eq!(on_call.json()["step_index"], 0, "a call's score names the call's step");
    add(json!({"run_id": run, "name": "correct", "value": false})).await;
    add(json!({"run_id": run, "name": "correct", "value": 1})).await;

    let read = app.get(&format!("/api/runs/{run}/scores")).await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.text);
    let read = read.json();
    let names: Vec<&str> = read["scores"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["correct", "helpfulness", "tool use", "correct", "correct"], "oldest first");
    let correct = &read["summary"][0];
    assert_eq!((correct["name"].as_str(), correct["count"].as_u64()), (Some("correct"), Some(3)));
    assert!((correct["mean"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9, "{correct}");
    assert_eq!(read["summary"][2]["labels"], json!([["good", 1]]));

    let audit = app.get("/api/audit").await.json();
    let added = audit["entries"].as_array().unwrap().iter().filter(|e| e["action"] == "score_added").count();
    assert_eq!(added, 5);
}

#[tokio::test]
async fn a_signed_in_person_scores_as_a_human() {
    let app = app().await;
    let (run, _) = run_with_call(&app).await;
    app.user("rita", Some(("default", Role::Operator)), false).await;
    let cookie = app.session("rita").await;
    let body = json!({"run_id": run, "name": "tone", "value": "kind"}).to_string();
    let reply = app
        .send_with(
            Method::POST,
            "/api/scores",
            Some(&body),
            "application/json",
            &[("cookie", &cookie), ("origin", crate::support::ORIGIN), ("host", crate::support::HOST)],
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    assert_eq!(reply.json()["source"], "human");
    assert_eq!(reply.json()["author"]["name"], "rita");
}

#[tokio::test]
async fn bad_scores_are_400s_that_keep_nothing() {
    let app = app().await;
    let (run, _) = run_with_call(&app).await;
    let cases = [
        (json!({"run_id": run, "name": "", "value": 1}), "name: "),
        (json!({"run_id": run, "name": " padded", "value": 1}), "name: "),
        (json!({"run_id": run, "name": "a/b", "value": 1}), "name: "),
        (json!({"run_id": run, "name": "x".repeat(65), "value": 1}), "name: "),
        (json!({"run_id": run, "name": "n", "value": 2e12}), "value: "),
        (json!({"run_id": run, "name": "n", "value": "  "}), "value: "),
        (json!({"run_id": run, "name": "n", "value": "l".repeat(201)}), "value: "),
        (json!({"run_id": run, "name": "n", "value": null}), ""),
        (json!({"run_id": run, "name": "n", "value": [1]}), ""),
        (json!({"run_id": run, "name": "n", "value": 1, "comment": "c".repeat(4001)}), "comment: "),
        (json!({"run_id": run, "name": "n", "value": 1, "step_index": 2}), "step_index: run "),
        (json!({"run_id": run, "name": "n", "value": 1, "call_id": "nope"}), "call_id: run "),
        (json!({"run_id": run, "name": "n", "value": 1, "step_index": 0, "call_id": "x"}), "give step_index"),
        (json!({"run_id": run, "name": "n", "value": 1, "author": "me"}), "unknown field"),
    ];
    for (body, says) in cases {
        let reply = app.post_json("/api/scores", &body.to_string()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}: {}", reply.text);
        assert!(reply.json()["error"].as_str().unwrap().contains(says), "{body}: {}", reply.text);
    }
    let read = app.get(&format!("/api/runs/{run}/scores")).await.json();
    assert_eq!(read["scores"], json!([]));
    let missing = app.post_json("/api/scores", &json!({"run_id": "nope", "name": "n", "value": 1}).to_string()).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.text);
}

#[tokio::test]
async fn viewers_read_operators_score_and_a_score_is_deleted_by_its_author_or_an_admin() {
    let app = app().await;
    let (run, _) = run_with_call(&app).await;
    let viewer = app.key("default", Role::Viewer).await;
    let operator = app.key("default", Role::Operator).await;
    let other_operator = app.key("default", Role::Operator).await;
    let body = json!({"run_id": run, "name": "ok", "value": true});

    let refused = app.with_key(&viewer, Method::POST, "/api/scores", Some(body.clone())).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);
    let read = app.with_key(&viewer, Method::GET, &format!("/api/runs/{run}/scores"), None).await;
    assert_eq!(read.status, StatusCode::OK);

    let mine = app.with_key(&operator, Method::POST, "/api/scores", Some(body.clone())).await;
    assert_eq!(mine.status, StatusCode::CREATED, "{}", mine.text);
    let mine = mine.json()["id"].as_str().unwrap().to_owned();
    let theirs = app.with_key(&other_operator, Method::POST, "/api/scores", Some(body.clone())).await;
    let theirs = theirs.json()["id"].as_str().unwrap().to_owned();

    let not_mine = app.with_key(&operator, Method::DELETE, &format!("/api/scores/{theirs}"), None).await;
    assert_eq!(not_mine.status, StatusCode::FORBIDDEN, "{}", not_mine.text);
    let viewer_delete = app.with_key(&viewer, Method::DELETE, &format!("/api/scores/{mine}"), None).await;
    assert_eq!(viewer_delete.status, StatusCode::FORBIDDEN);
    let own = app.with_key(&operator, Method::DELETE, &format!("/api/scores/{mine}"), None).await;
    assert_eq!(own.status, StatusCode::NO_CONTENT, "{}", own.text);
    let again = app.with_key(&operator, Method::DELETE, &format!("/api/scores/{mine}"), None).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
    let by_admin = app.send(Method::DELETE, &format!("/api/scores/{theirs}"), None, "").await;
    assert_eq!(by_admin.status, StatusCode::NO_CONTENT, "{}", by_admin.text);
    assert_eq!(app.get(&format!("/api/runs/{run}/scores")).await.json()["scores"], json!([]));
    let audit = app.get("/api/audit").await.json();
    let deleted = audit["entries"].as_array().unwrap().iter().filter(|e| e["action"] == "score_deleted").count();
    assert_eq!(deleted, 2);
}

#[tokio::test]
async fn another_projects_run_and_score_behave_as_absent() {
    let app = app().await;
    let (run, _) = run_with_call(&app).await;
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let other = app.key("other", Role::Admin).await;
    let score = app.post_json("/api/scores", &json!({"run_id": run, "name": "ok", "value": true}).to_string()).await;
    let score = score.json()["id"].as_str().unwrap().to_owned();

    let add =
        app.with_key(&other, Method::POST, "/api/scores", Some(json!({"run_id": run, "name": "x", "value": 1}))).await;
    let absent = app
        .with_key(&other, Method::POST, "/api/scores", Some(json!({"run_id": "nope", "name": "x", "value": 1})))
        .await;
    assert_eq!(
        (add.status, add.json()["error"].as_str().map(|e| e.replace(&run, "ID"))),
        (StatusCode::NOT_FOUND, absent.json()["error"].as_str().map(|e| e.replace("nope", "ID")))
    );
    let read = app.with_key(&other, Method::GET, &format!("/api/runs/{run}/scores"), None).await;
    assert_eq!(read.status, StatusCode::NOT_FOUND);
    let delete = app.with_key(&other, Method::DELETE, &format!("/api/scores/{score}"), None).await;
    assert_eq!(delete.status, StatusCode::NOT_FOUND);
    // The engine itself keeps the line, whatever the caller checked.
    let direct = app.engine.scores().of_run("other", &run).await;
    assert!(matches!(direct, Err(runlens_engine::error::EngineError::NotFound(_))), "{direct:?}");
    assert_eq!(app.get(&format!("/api/runs/{run}/scores")).await.json()["scores"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn an_ingested_run_is_scored_like_any_other() {
    let app = app().await;
    let body = crate::otlp_api::json_trace("5b8efff798038103d269b633813fc60c").to_string();
    let auth = app.bearer();
    let sent =
        app.send_with(Method::POST, "/v1/traces", Some(&body), "application/json", &[("authorization", &auth)]).await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.text);
    let runs = app.get("/api/runs?all=true").await.json();
    let run = runs["runs"][0]["id"].as_str().unwrap().to_owned();
    let scored = app.post_json("/api/scores", &json!({"run_id": run, "name": "ok", "value": 0.9}).to_string()).await;
    assert_eq!(scored.status, StatusCode::CREATED, "{}", scored.text);
    assert_eq!(app.get(&format!("/api/runs/{run}/scores")).await.json()["summary"][0]["mean"], 0.9);
}

#[tokio::test]
async fn a_runs_cap_holds_when_scores_race() {
    let app = app().await;
    let (run, _) = run_with_call(&app).await;
    let store = app.engine.store().clone();
    let tasks: Vec<_> = (0..12)
        .map(|i| {
            let store = store.clone();
            let score = Score {
                id: format!("race-{i}"),
                run_id: run.clone(),
                step_index: None,
                call_id: None,
                name: "race".into(),
                value: ScoreValue::Number(f64::from(i)),
                comment: None,
                source: ScoreSource::Api,
                author: Actor::system(),
                scorer: None,
                label: None,
                judge_run_id: None,
                created_at: chrono::Utc::now(),
            };
            tokio::spawn(async move { store.scores().insert_score("default", &score, 5, false).await.unwrap() })
        })
        .collect();
    let mut kept = 0;
    for t in tasks {
        kept += usize::from(t.await.unwrap() == runlens_engine::store::ScoreInsert::Kept);
    }
    assert_eq!(kept, 5);
    assert_eq!(store.scores().run_scores(&run, 100).await.unwrap().len(), 5);
}

#[tokio::test]
async fn a_score_goes_with_its_run() {
    let app = app().await;
    let (old, _) = run_with_call(&app).await;
    let (new, _) = run_with_call(&app).await;
    for run in [&old, &new] {
        let r = app.post_json("/api/scores", &json!({"run_id": run, "name": "ok", "value": true}).to_string()).await;
        assert_eq!(r.status, StatusCode::CREATED);
    }
    let put = app.send(Method::PUT, "/api/retention", Some(r#"{"max_runs": 1}"#), "application/json").await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.text);
    app.engine.traces().flush_events().await;
    let report = app.engine.prune_as_of("default", chrono::Utc::now() + chrono::Duration::minutes(2)).await.unwrap();
    assert_eq!(report.runs_deleted, 1);
    assert!(app.engine.store().scores().run_scores(&old, 10).await.unwrap().is_empty());
    assert_eq!(app.engine.store().scores().run_scores(&new, 10).await.unwrap().len(), 1);
}

#[tokio::test]
async fn built_in_scorers_judge_an_ended_run_and_keep_their_verdicts() {
    let app = app().await;
    let (run, _) = run_with_call(&app).await;
    let body = json!({
        "scorers": [
            {"name": "correct", "scorer": {"kind": "exact"}},
            {"scorer": {"kind": "contains", "expected": "4"}},
            {"scorer": {"kind": "tool_calls", "expected": [
                {"name": "calculator", "arguments": {"expression": "1 + 2"}}, {"name": "send_email"}]}},
            {"scorer": {"kind": "bounds", "max_turns": 5}},
            {"scorer": {"kind": "numeric", "tolerance": 0.5}},
        ],
        "expected": "3"
    });
    let reply = app.post_json(&format!("/api/runs/{run}/evaluate"), &body.to_string()).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    let scores = reply.json()["scores"].as_array().unwrap().clone();
    let got: Vec<(String, Value, String)> = scores
        .iter()
        .map(|s| (s["name"].as_str().unwrap().into(), s["value"].clone(), s["scorer"].as_str().unwrap().into()))
        .collect();
    assert_eq!(
        got,
        [
            ("correct".into(), json!(true), "exact".into()),
            ("contains".into(), json!(false), "contains".into()),
            ("tool_calls".into(), json!(0.5), "tool_calls".into()),
            ("bounds".into(), json!(true), "bounds".into()),
            ("numeric".into(), json!(true), "numeric".into()),
        ]
    );
    assert!(scores.iter().all(|s| s["source"] == "scorer" && s["comment"].as_str().is_some_and(|c| !c.is_empty())));
    assert!(scores[2]["comment"].as_str().unwrap().contains("send_email"), "{}", scores[2]);
    assert_eq!(app.get(&format!("/api/runs/{run}/scores")).await.json()["scores"].as_array().unwrap().len(), 5);
}

#[tokio::test]
async fn a_judge_scores_from_a_run_of_its_own() {
    let app = app().await;
    let (run, _) = run_with_call(&app).await;
    let uri = format!("/api/runs/{run}/evaluate");
    let body = json!({
        "scorers": [
            {"name": "judged", "scorer": {"kind": "judge", "rubric": "Gives the sum."}},
            {"name": "graded", "scorer": {"kind": "judge", "rubric": "Counts apples.", "expected": null,
                "labels": ["good", "ok", "bad"]}},
        ],
        "expected": "3"
    });
    // `expected` is not a judge's field: the item's (or the request's) is used.
    let refused = app.post_json(&uri, &body.to_string()).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    let body = json!({
        "scorers": [
            {"name": "judged", "scorer": {"kind": "judge", "rubric": "Gives the sum."}},
            {"name": "graded", "scorer": {"kind": "judge", "rubric": "Says \"apples\".",
                "labels": ["good", "ok", "bad"]}},
        ]
    });
    let reply = app.post_json(&uri, &body.to_string()).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    let scores = reply.json()["scores"].as_array().unwrap().clone();
    // Without an expected answer the built-in judge checks the rubric's quoted terms.
    assert_eq!((scores[0]["value"].clone(), scores[0]["label"].clone()), (json!(1.0), json!("pass")));
    assert_eq!((scores[1]["value"].clone(), scores[1]["label"].clone()), (json!(0.0), json!("bad")));
    assert!(scores[1]["comment"].as_str().unwrap().contains("“apples”"), "{}", scores[1]);

    // With the request's expected answer: the share of its words in the answer.
    let body = json!({"scorers": [{"name": "close", "scorer": {"kind": "judge", "rubric": "Right sum."}}],
        "expected": "3 apples"});
    let reply = app.post_json(&uri, &body.to_string()).await;
    let score = reply.json()["scores"][0].clone();
    assert_eq!((score["value"].clone(), score["scorer"].clone()), (json!(0.5), json!("judge")), "{score}");
    assert!(score["comment"].as_str().unwrap().contains("1 of the 2 words"), "{score}");

    // The judge's run keeps what it read and said.
    let judge = app.get(&format!("/api/runs/{}", score["judge_run_id"].as_str().unwrap())).await.json();
    assert_eq!(judge["status"], "done", "{judge}");
    assert_eq!(judge["tags"]["runlens.judge"], "close");
    assert_eq!(judge["tools"], json!([]));
    assert_eq!(judge["metadata"]["judged_run"], json!(run));
    assert_eq!(judge["result"]["score"], json!(0.5));
    assert!(judge["initial_prompt"].as_str().unwrap().contains("<rubric>\nRight sum.\n</rubric>"));

    // A judge that cannot be used is refused before any run starts.
    let before = app.get("/api/runs?limit=100").await.json()["runs"].as_array().unwrap().len();
    for (scorer, says) in [
        (json!({"kind": "judge", "rubric": "x", "model": "nowhere/none"}), "judge: model: "),
        (json!({"kind": "judge", "rubric": " "}), "rubric: must not be blank"),
        (json!({"kind": "judge", "rubric": "x", "labels": ["only"]}), "labels: none, or 2 to 10"),
        (json!({"kind": "judge", "rubric": "x", "labels": ["a", "A"]}), "given twice"),
        (json!({"kind": "judge", "rubric": "x".repeat(16_001)}), "rubric: at most 16000"),
    ] {
        let reply = app.post_json(&uri, &json!({"scorers": [{"scorer": scorer}]}).to_string()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text);
        assert!(reply.json()["error"].as_str().unwrap().contains(says), "{says}: {}", reply.text);
    }
    assert_eq!(app.get("/api/runs?limit=100").await.json()["runs"].as_array().unwrap().len(), before);
}

#[tokio::test]
async fn an_evaluation_that_cannot_run_keeps_nothing() {
    let app = app().await;
    let (run, _) = run_with_call(&app).await;
    let uri = format!("/api/runs/{run}/evaluate");
    let cases = [
        (json!({"scorers": []}), "scorers: give 1 to 16"),
        (
            json!({"scorers": [{"scorer": {"kind": "bounds", "max_turns": 1}}, {"scorer": {"kind": "exact"}}]}),
            "scorers[1]: exact: no expected value",
        ),
        (json!({"scorers": [{"scorer": {"kind": "regex", "pattern": "(a{1000}){1000}"}}]}), "scorers[0]: "),
        (json!({"scorers": [{"scorer": {"kind": "regex", "pattern": "("}}]}), "scorers[0]: "),
        (json!({"scorers": [{"scorer": {"kind": "json_schema", "schema": {"type": 7}}}]}), "scorers[0]: "),
        (json!({"scorers": [{"scorer": {"kind": "bounds"}}]}), "scorers[0]: "),
        (json!({"scorers": [{"name": "a/b", "scorer": {"kind": "bounds", "max_turns": 1}}]}), "scorers[0]: name: "),
        (json!({"scorers": [{"scorer": {"kind": "nope"}}]}), "unknown variant"),
    ];
    for (body, says) in cases {
        let reply = app.post_json(&uri, &body.to_string()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}: {}", reply.text);
        assert!(reply.json()["error"].as_str().unwrap().contains(says), "{body}: {}", reply.text);
    }
    assert_eq!(app.get(&format!("/api/runs/{run}/scores")).await.json()["scores"], json!([]));

    // A run still waiting for a person is scored once it has ended.
    let paused = app.paused_run().await;
    let body = json!({"scorers": [{"scorer": {"kind": "bounds", "max_turns": 9}}]}).to_string();
    let early = app.post_json(&format!("/api/runs/{paused}/evaluate"), &body).await;
    assert_eq!(early.status, StatusCode::CONFLICT, "{}", early.text);
}

#[tokio::test]
async fn the_runs_list_sums_up_each_runs_scores() {
    let app = app().await;
    let (scored, _) = run_with_call(&app).await;
    let (plain, _) = run_with_call(&app).await;
    for value in [json!(true), json!(false), json!(true)] {
        app.post_json("/api/scores", &json!({"run_id": scored, "name": "correct", "value": value}).to_string()).await;
    }
    app.post_json("/api/scores", &json!({"run_id": scored, "name": "helpfulness", "value": 0.25}).to_string()).await;
    app.post_json("/api/scores", &json!({"run_id": scored, "name": "tone", "value": "kind"}).to_string()).await;

    let list = app.get("/api/runs").await.json();
    let scores = &list["scores"];
    assert!(scores.get(&plain).is_none(), "a run without scores is absent: {scores}");
    let of = |name: &str| scores[&scored].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap().clone();
    assert_eq!(
        (of("correct")["count"].clone(), of("correct")["yes"].clone(), of("correct")["no"].clone()),
        (json!(3), json!(2), json!(1))
    );
    assert_eq!(of("helpfulness")["mean"], 0.25);
    assert_eq!((of("tone")["count"].clone(), of("tone")["mean"].clone()), (json!(1), Value::Null));

    let page = app.get("/runs").await.text;
    assert!(page.contains("data-testid=\"run-score\" data-name=\"correct\""), "the runs page shows them");
    assert!(page.contains("yes 2/3"), "{page}");
}
