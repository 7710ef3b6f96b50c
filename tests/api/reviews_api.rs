//! Review queues through the API: a queue's fields take their kind of
//! value, a verdict keeps each as a person's score of the run (audited) and
//! a correction as a dataset item's `expected`, an item is reviewed once,
//! skipped items and reviewers' progress are counted; assignees, roles and
//! projects hold; bad input is a 400 that changes nothing. A whole session
//! is reviewed as one item, its verdict kept on its latest run.

use axum::http::{Method, StatusCode};
use runlens_engine::model::{Actor, Role};
use serde_json::{json, Value};

use crate::support::{app, App};

async fn finished(app: &App, answer: &str) -> String {
    let body = json!({"initial_prompt": "Where is my refund?", "model_settings": {"script": [{"text": answer}]}});
    app.finished_run(&body.to_string()).await["id"].as_str().unwrap().to_owned()
}

async fn post(app: &App, uri: &str, body: Value) -> (StatusCode, Value) {
    let reply = app.post_json(uri, &body.to_string()).await;
    let json = serde_json::from_str(&reply.text).unwrap_or(Value::Null);
    (reply.status, json)
}

#[tokio::test]
async fn a_reviewer_scores_items_and_a_correction_goes_into_the_dataset() {
    let app = app().await;
    let (_, dataset) = post(&app, "/api/datasets", json!({"name": "corrections"})).await;
    let (status, queue) = post(
        &app,
        "/api/review-queues",
        json!({"name": "support", "dataset_id": dataset["id"], "fields": [
            {"name": "correct", "kind": "yes_no"},
            {"name": "quality", "kind": "number", "min": 1, "max": 5},
            {"name": "tone", "kind": "label", "labels": ["kind", "rude"]}]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{queue}");
    let q = queue["id"].as_str().unwrap().to_owned();
    let runs = [finished(&app, "soon").await, finished(&app, "never").await, finished(&app, "ok").await];
    let (status, added) = post(&app, &format!("/api/review-queues/{q}/items"), json!({"run_ids": runs})).await;
    assert_eq!((status, added), (StatusCode::CREATED, json!({"added": 3, "already": 0})));
    let (_, again) = post(&app, &format!("/api/review-queues/{q}/items"), json!({"run_ids": [runs[0]]})).await;
    assert_eq!(again, json!({"added": 0, "already": 1}));
    let items = app.get(&format!("/api/review-queues/{q}/items?status=pending")).await.json();
    let items: Vec<String> =
        items["items"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap().into()).collect();
    assert_eq!(items.len(), 3);
    let review = |i: usize| format!("/api/review-queues/{q}/items/{}/review", items[i]);

    // Values its fields refuse change nothing.
    for (body, says) in [
        (json!({"scores": {"tone": "meh"}}), "tone: one of kind, rude"),
        (json!({"scores": {"quality": 9}}), "from 1 to 5"),
        (json!({"scores": {"correct": "yes"}}), "yes or no"),
        (json!({"scores": {"speed": 1}}), "no such field"),
        (json!({}), "at least one"),
        (json!({"skip": true, "scores": {"correct": true}}), "skip"),
    ] {
        let (status, reply) = post(&app, &review(0), body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {reply}");
        assert!(reply["error"].as_str().unwrap().contains(says), "{body}: {reply}");
    }
    assert_eq!(app.get(&format!("/api/runs/{}/scores", runs[0])).await.json()["scores"], json!([]));

    let (status, done) = post(
        &app,
        &review(0),
        json!({"scores": {"correct": false, "quality": 2, "tone": "kind"}, "comment": "vague",
            "correction": "Your refund is on its way: 3 to 5 days."}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!((done["status"].clone(), done["reviewed_by"]["name"].clone()), (json!("done"), json!("tests")));
    let scores = app.get(&format!("/api/runs/{}/scores", runs[0])).await.json()["scores"].clone();
    let got: Vec<(Value, Value, Value)> = scores
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].clone(), s["value"].clone(), s["source"].clone()))
        .collect();
    let human = json!("human");
    assert_eq!(
        got,
        [
            (json!("correct"), json!(false), human.clone()),
            (json!("quality"), json!(2.0), human.clone()),
            (json!("tone"), json!("kind"), human)
        ]
    );
    assert!(scores.as_array().unwrap().iter().all(|s| s["comment"] == "vague"));
    let ds = app.get(&format!("/api/datasets/{}/items", dataset["id"].as_str().unwrap())).await.json();
    assert_eq!(ds["items"][0]["expected"], "Your refund is on its way: 3 to 5 days.", "{ds}");
    assert_eq!(ds["items"][0]["source_run_id"], json!(runs[0]));

    // Once.
    let (status, _) = post(&app, &review(0), json!({"scores": {"correct": true}})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, skipped) = post(&app, &review(1), json!({"skip": true})).await;
    assert_eq!((status, skipped["status"].clone()), (StatusCode::OK, json!("skipped")));

    let queue = app.get(&format!("/api/review-queues/{q}")).await.json();
    assert_eq!(
        (queue["pending"].clone(), queue["done"].clone(), queue["skipped"].clone()),
        (json!(1), json!(1), json!(1))
    );
    assert_eq!(queue["reviewers"][0]["done"], 1);
    assert_eq!(queue["reviewers"][0]["skipped"], 1);
    let audit = app.get("/api/audit?limit=50").await.json().to_string();
    for action in ["review_queue_created", "review_items_added", "review_item_reviewed", "score_added"] {
        assert!(audit.contains(action), "{action}");
    }
}

/// A finished run of session `session` in the project of `key` (the tests' own when `None`).
async fn in_session(app: &App, session: &str, prompt: &str, answer: &str, key: Option<&str>) -> String {
    let body =
        json!({"initial_prompt": prompt, "session_id": session, "model_settings": {"script": [{"text": answer}]}});
    let id = match key {
        None => app.finished_run(&body.to_string()).await["id"].as_str().unwrap().to_owned(),
        Some(key) => {
            let made = app.with_key(key, Method::POST, "/api/runs", Some(body)).await;
            assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
            made.json()["id"].as_str().unwrap().to_owned()
        }
    };
    for _ in 0..200 {
        if app.get(&format!("/api/runs/{id}")).await.json()["status"] == "done" || key.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    id
}

#[tokio::test]
async fn a_whole_session_is_reviewed_as_one_item_kept_on_its_latest_run() {
    let app = app().await;
    let (_, dataset) = post(&app, "/api/datasets", json!({"name": "session fixes"})).await;
    let (_, queue) = post(
        &app,
        "/api/review-queues",
        json!({"name": "chats", "dataset_id": dataset["id"], "fields": [{"name": "resolved"}]}),
    )
    .await;
    let q = queue["id"].as_str().unwrap().to_owned();
    let first = in_session(&app, "chat 7, Ada", "Where is my parcel?", "In transit.", None).await;
    let last = in_session(&app, "chat 7, Ada", "When will it come?", "Tomorrow.", None).await;
    assert_ne!(first, last);

    let items = format!("/api/review-queues/{q}/items");
    let (status, added) = post(&app, &items, json!({"session_ids": ["chat 7, Ada"]})).await;
    assert_eq!((status, added), (StatusCode::CREATED, json!({"added": 1, "already": 0})));
    let (_, again) = post(&app, &items, json!({"session_ids": ["chat 7, Ada"]})).await;
    assert_eq!(again, json!({"added": 0, "already": 1}), "a session is in a queue once");
    // The session's latest run on its own is another item.
    let (_, run_too) = post(&app, &items, json!({"run_ids": [last]})).await;
    assert_eq!(run_too, json!({"added": 1, "already": 0}));
    let listed = app.get(&items).await.json()["items"].clone();
    assert_eq!(listed[0]["session_id"], "chat 7, Ada");
    assert_eq!(listed[0]["run_id"], json!(last), "kept with the session's latest run");
    assert_eq!(listed[0]["step_index"], Value::Null);
    assert!(listed[1].get("session_id").is_none(), "{listed}");

    for (body, says) in [
        (json!({"session_ids": ["no such chat"]}), "session_ids[0]: no session"),
        (json!({"session_ids": ["chat 7, Ada"], "run_ids": [first]}), "not both"),
        (json!({"session_ids": ["chat 7, Ada"], "step_index": 0}), "step_index"),
        (json!({"session_ids": ["bell\u{7}"]}), "session_ids[0]"),
        (json!({}), "run_ids"),
    ] {
        let (status, reply) = post(&app, &items, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {reply}");
        assert!(reply.to_string().contains(says), "{body}: {reply}");
    }
    // Another project's session is no session here.
    app.engine.identity().create_project("team-b", &Actor::system()).await.unwrap();
    let theirs = app.key("team-b", Role::Admin).await;
    in_session(&app, "their chat", "hi", "hello", Some(&theirs)).await;
    let (status, reply) = post(&app, &items, json!({"session_ids": ["their chat"]})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{reply}");
    assert_eq!(app.get(&items).await.json()["items"].as_array().unwrap().len(), 2, "nothing else was added");

    let item = listed[0]["id"].as_str().unwrap();
    let (status, done) = post(
        &app,
        &format!("{items}/{item}/review"),
        json!({"scores": {"resolved": false}, "correction": "It arrives on Friday; here is the tracking link."}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    let scores = app.get(&format!("/api/runs/{last}/scores")).await.json()["scores"].clone();
    assert_eq!((scores[0]["name"].clone(), scores[0]["value"].clone()), (json!("resolved"), json!(false)));
    assert_eq!(app.get(&format!("/api/runs/{first}/scores")).await.json()["scores"], json!([]));
    let ds = app.get(&format!("/api/datasets/{}/items", dataset["id"].as_str().unwrap())).await.json();
    assert_eq!(ds["items"][0]["source_run_id"], json!(last));
    assert_eq!(ds["items"][0]["expected"], "It arrives on Friday; here is the tracking link.");
    let audit = app.get("/api/audit?limit=20").await.json().to_string();
    assert!(audit.contains("done of session chat 7, Ada"), "{audit}");
}

#[tokio::test]
async fn assignees_roles_and_projects_hold_and_bad_queues_are_refused() {
    let app = app().await;
    let run = finished(&app, "hi").await;
    for (body, says) in [
        (json!({"name": "x", "fields": []}), "fields: 1 to 8"),
        (json!({"name": "x", "fields": [{"name": "a"}, {"name": "a"}]}), "given twice"),
        (json!({"name": "x", "fields": [{"name": "a", "kind": "label", "labels": ["one"]}]}), "labels: 2 to 9"),
        (json!({"name": "x", "fields": [{"name": "a", "kind": "number", "min": 5, "max": 1}]}), "min < max"),
        (json!({"name": "x", "fields": [{"name": "a/b"}]}), "fields[0].name"),
        (json!({"name": " ", "fields": [{"name": "a"}]}), "name"),
        (json!({"name": "x", "fields": [{"name": "a"}], "dataset_id": "nope"}), "dataset"),
    ] {
        let reply = app.post_json("/api/review-queues", &body.to_string()).await;
        assert!(reply.status.is_client_error(), "{body}: {}", reply.text);
        assert!(reply.text.contains(says), "{body}: {} should say {says}", reply.text);
    }
    assert_eq!(app.get("/api/review-queues").await.json()["queues"], json!([]));

    let (_, queue) = post(
        &app,
        "/api/review-queues",
        json!({"name": "mine", "fields": [{"name": "ok"}], "assignees": ["user-ada"]}),
    )
    .await;
    let q = queue["id"].as_str().unwrap().to_owned();
    for (body, says) in [
        (json!({"run_ids": ["nope"]}), "run_ids[0]"),
        (json!({"run_ids": [run], "step_index": 99}), "step_index"),
        (json!({"run_ids": []}), "run_ids"),
    ] {
        let (status, reply) = post(&app, &format!("/api/review-queues/{q}/items"), body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {reply}");
        assert!(reply.to_string().contains(says), "{body}: {reply}");
    }
    post(&app, &format!("/api/review-queues/{q}/items"), json!({"run_ids": [run]})).await;
    let item = app.get(&format!("/api/review-queues/{q}/items")).await.json()["items"][0]["id"].clone();
    let uri = format!("/api/review-queues/{q}/items/{}/review", item.as_str().unwrap());
    let verdict = json!({"scores": {"ok": true}});

    // Not an assignee: an operator is refused; a viewer may not review at all.
    let operator = app.key("default", Role::Operator).await;
    let refused = app.with_key(&operator, Method::POST, &uri, Some(verdict.clone())).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);
    let viewer = app.key("default", Role::Viewer).await;
    assert_eq!(app.with_key(&viewer, Method::POST, &uri, Some(verdict.clone())).await.status, StatusCode::FORBIDDEN);
    assert_eq!(
        app.with_key(&viewer, Method::GET, &format!("/api/review-queues/{q}"), None).await.status,
        StatusCode::OK
    );
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let other = app.key("other", Role::Admin).await;
    for (method, path) in
        [(Method::GET, format!("/api/review-queues/{q}")), (Method::GET, format!("/api/review-queues/{q}/items"))]
    {
        assert_eq!(app.with_key(&other, method, &path, None).await.status, StatusCode::NOT_FOUND);
    }
    assert_eq!(app.with_key(&other, Method::POST, &uri, Some(verdict.clone())).await.status, StatusCode::NOT_FOUND);
    // A correction needs the queue's dataset.
    let (status, reply) = post(&app, &uri, json!({"correction": "better"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{reply}");
    // The project's admin may.
    let (status, _) = post(&app, &uri, verdict).await;
    assert_eq!(status, StatusCode::OK);

    let gone = app.with_key(&app.admin_key, Method::DELETE, &format!("/api/review-queues/{q}"), None).await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    assert_eq!(app.get(&format!("/api/review-queues/{q}")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.get(&format!("/api/runs/{run}/scores")).await.json()["scores"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_verdict_a_run_has_no_room_for_keeps_nothing_and_the_item_stays_pending() {
    use runlens_engine::model::{NewScore, ScoreSource, ScoreValue, MAX_RUN_SCORES};
    let app = app().await;
    let run = finished(&app, "soon").await;
    for i in 0..MAX_RUN_SCORES - 1 {
        let new = NewScore {
            run_id: run.clone(),
            step_index: None,
            call_id: None,
            name: format!("s{i}"),
            value: ScoreValue::Number(1.0),
            comment: None,
        };
        app.engine.scores().add("default", new, ScoreSource::Api, None, &Actor::system()).await.unwrap();
    }
    let (_, queue) =
        post(&app, "/api/review-queues", json!({"name": "full", "fields": [{"name": "correct"}, {"name": "polite"}]}))
            .await;
    let q = queue["id"].as_str().unwrap().to_owned();
    post(&app, &format!("/api/review-queues/{q}/items"), json!({"run_ids": [run]})).await;
    let item = app.get(&format!("/api/review-queues/{q}/items")).await.json()["items"][0]["id"].clone();
    let review = format!("/api/review-queues/{q}/items/{}/review", item.as_str().unwrap());
    let (status, reply) = post(&app, &review, json!({"scores": {"correct": true, "polite": true}})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{reply}");
    assert!(reply["error"].as_str().unwrap().contains("999 scores"), "{reply}");
    let scores = app.get(&format!("/api/runs/{run}/scores")).await.json()["scores"].as_array().unwrap().len();
    assert_eq!(scores, (MAX_RUN_SCORES - 1) as usize, "nothing kept");
    assert_eq!(app.get(&format!("/api/review-queues/{q}")).await.json()["pending"], 1, "the item is still to review");
    // One value fits: kept, and the item is done.
    let (status, reply) = post(&app, &review, json!({"scores": {"correct": true}})).await;
    assert_eq!((status, reply["status"].clone()), (StatusCode::OK, json!("done")), "{reply}");
}
