//! Datasets through the API: made, listed, read, renamed and deleted; items
//! added, edited and deleted as dense versions, each version readable as it
//! was; items made from a finished run, a follow-up conversation and an
//! ingested run; JSONL and CSV uploads that keep every row or none; the
//! caps, also under a race; who may do what; and another project's dataset
//! or run behaving as absent.

use axum::http::{Method, StatusCode};
use runlens_engine::model::{Actor, Dataset, DatasetInput, DatasetItem, Role};
use runlens_engine::store::ItemsWrite;
use serde_json::{json, Value};

use crate::support::{app, App, Reply};

async fn post(app: &App, uri: &str, body: Value) -> Reply {
    app.post_json(uri, &body.to_string()).await
}

async fn send(app: &App, method: Method, uri: &str, body: Value) -> Reply {
    app.send(method, uri, Some(&body.to_string()), "application/json").await
}

/// Makes dataset `name` in the current project; its id.
async fn dataset(app: &App, name: &str) -> String {
    let made = app.post_json("/api/datasets", &json!({"name": name}).to_string()).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    made.json()["id"].as_str().unwrap().to_owned()
}

/// The items of dataset `id` at `version` (all of them, page by page of 2).
async fn items_at(app: &App, id: &str, version: Option<u32>) -> Vec<Value> {
    let mut items = Vec::new();
    let mut cursor = String::new();
    loop {
        let version = version.map(|v| format!("&version={v}")).unwrap_or_default();
        let page = app.get(&format!("/api/datasets/{id}/items?limit=2&cursor={cursor}{version}")).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.text);
        let page = page.json();
        items.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => return items,
        }
    }
}

fn prompts(items: &[Value]) -> Vec<String> {
    items.iter().map(|i| i["input"]["prompt"].as_str().unwrap_or("(conversation)").to_owned()).collect()
}

fn audited(audit: &Value, action: &str) -> usize {
    audit["entries"].as_array().unwrap().iter().filter(|e| e["action"] == action).count()
}

/// A finished run that made one calculator call; (run id, the call's result).
async fn run_with_call(app: &App) -> (String, Value) {
    let run = app
        .finished_run(
            &json!({"initial_prompt": "add", "model_settings": {"script": [
                {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1 + 2"}}]},
                {"text": "3"}
            ]}})
            .to_string(),
        )
        .await;
    assert_eq!(run["status"], "done", "{run}");
    let id = run["id"].as_str().unwrap().to_owned();
    let steps = app.get(&format!("/api/runs/{id}/steps")).await.json();
    let result = steps["steps"][0]["tool_calls"][0]["result"].clone();
    assert!(!result.is_null(), "{steps}");
    (id, result)
}

#[tokio::test]
async fn datasets_are_made_listed_read_renamed_and_deleted() {
    let app = app().await;
    let refunds = app
        .post_json("/api/datasets", &json!({"name": "support: refunds", "description": "from the inbox"}).to_string())
        .await;
    assert_eq!(refunds.status, StatusCode::CREATED, "{}", refunds.text);
    let refunds = refunds.json();
    assert_eq!((refunds["version"].as_u64(), refunds["item_count"].as_u64()), (Some(0), Some(0)));
    assert_eq!(refunds["description"], "from the inbox");
    assert!(refunds["created_by"]["id"].as_str().unwrap().starts_with("key:"), "{refunds}");
    let id = refunds["id"].as_str().unwrap().to_owned();
    dataset(&app, "alpha").await;
    dataset(&app, "zeta").await;

    let first = app.get("/api/datasets?limit=2").await.json();
    let names: Vec<&str> = first["datasets"].as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["alpha", "support: refunds"]);
    let cursor = first["next_cursor"].as_str().unwrap();
    let rest = app.get(&format!("/api/datasets?limit=2&cursor={}", crate::support::urlencode(cursor))).await.json();
    assert_eq!(rest["datasets"][0]["name"], "zeta");
    assert!(rest["next_cursor"].is_null());
    let skipped = app.get("/api/datasets?offset=2").await.json();
    assert_eq!(skipped["datasets"][0]["name"], "zeta");
    assert_eq!(app.get("/api/datasets?offset=1&cursor=alpha").await.status, StatusCode::BAD_REQUEST);

    let read = app.get(&format!("/api/datasets/{id}")).await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.text);
    assert_eq!(read.json(), refunds);
    assert_eq!(app.get("/api/datasets/nope").await.status, StatusCode::NOT_FOUND);

    let taken = app.post_json("/api/datasets", &json!({"name": "alpha"}).to_string()).await;
    assert_eq!(taken.status, StatusCode::CONFLICT, "{}", taken.text);
    for bad in [json!({"name": ""}), json!({"name": " x"}), json!({"name": "a/b"}), json!({"name": "x".repeat(101)})] {
        let reply = app.post_json("/api/datasets", &bad.to_string()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{bad}: {}", reply.text);
        assert!(reply.json()["error"].as_str().unwrap().starts_with("name: "), "{}", reply.text);
    }
    let long = json!({"name": "d", "description": "x".repeat(4001)});
    assert_eq!(app.post_json("/api/datasets", &long.to_string()).await.status, StatusCode::BAD_REQUEST);
    let extra = json!({"name": "d", "owner": "me"});
    assert_eq!(app.post_json("/api/datasets", &extra.to_string()).await.status, StatusCode::BAD_REQUEST);

    let renamed = send(&app, Method::PUT, &format!("/api/datasets/{id}"), json!({"name": "refunds v2"})).await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.text);
    assert_eq!(
        (renamed.json()["name"].as_str(), renamed.json()["description"].as_str()),
        (Some("refunds v2"), Some("from the inbox"))
    );
    let onto = send(&app, Method::PUT, &format!("/api/datasets/{id}"), json!({"name": "zeta"})).await;
    assert_eq!(onto.status, StatusCode::CONFLICT, "{}", onto.text);
    let nothing = send(&app, Method::PUT, &format!("/api/datasets/{id}"), json!({})).await;
    assert_eq!(nothing.status, StatusCode::BAD_REQUEST, "{}", nothing.text);

    let deleted = app.send(Method::DELETE, &format!("/api/datasets/{id}"), None, "").await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.text);
    assert_eq!(app.get(&format!("/api/datasets/{id}")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.send(Method::DELETE, &format!("/api/datasets/{id}"), None, "").await.status, StatusCode::NOT_FOUND);
    // Its name is free again.
    dataset(&app, "refunds v2").await;

    let audit = app.get("/api/audit?limit=200").await.json();
    assert_eq!(audited(&audit, "dataset_created"), 4);
    assert_eq!(audited(&audit, "dataset_updated"), 1);
    assert_eq!(audited(&audit, "dataset_deleted"), 1);
}

#[tokio::test]
async fn every_change_is_a_version_and_each_version_keeps_its_items() {
    let app = app().await;
    let id = dataset(&app, "math").await;
    let uri = format!("/api/datasets/{id}/items");
    let added = app
        .post_json(
            &uri,
            &json!({"items": [
                {"input": {"prompt": "What is 2 + 2?"}, "expected": "4", "tags": ["easy"], "metadata": {"source": "a"}},
                {"input": {"prompt": "What is 3 * 3?", "input": {"unit": "none"}}, "expected": 9},
                {"input": {"input_items": [
                    {"type": "human", "data": {"message": "Hi"}},
                    {"type": "agent", "data": {"message": "Hello! What shall I compute?"}},
                    {"type": "human", "data": {"message": "7 - 2"}}
                ]}},
            ]})
            .to_string(),
        )
        .await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.text);
    let added = added.json();
    assert_eq!((added["dataset"]["version"].as_u64(), added["dataset"]["item_count"].as_u64()), (Some(1), Some(3)));
    let ids: Vec<String> = added["item_ids"].as_array().unwrap().iter().map(|i| i.as_str().unwrap().into()).collect();
    let v1 = items_at(&app, &id, None).await;
    assert_eq!(v1.iter().map(|i| i["id"].as_str().unwrap()).collect::<Vec<_>>(), ids, "oldest first");
    assert_eq!(prompts(&v1), ["What is 2 + 2?", "What is 3 * 3?", "(conversation)"]);
    assert_eq!(v1[0]["expected"], "4");
    assert_eq!((v1[0]["tags"].clone(), v1[0]["metadata"].clone()), (json!(["easy"]), json!({"source": "a"})));
    assert_eq!(v1[1]["input"]["input"], json!({"unit": "none"}));
    assert_eq!(v1[2]["input"]["input_items"][2]["data"]["message"], "7 - 2");
    assert!(v1.iter().all(|i| i["version_added"] == 1 && i["source_run_id"].is_null() && i["dataset_id"] == id));

    // An edit: version 2; the item keeps its id, what the edit leaves out stays.
    let edit_uri = format!("{uri}/{}", ids[0]);
    let edited = send(&app, Method::PUT, &edit_uri, json!({"expected": "four", "tags": ["easy", "words"]})).await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.text);
    let edited = edited.json();
    assert_eq!((edited["id"].as_str(), edited["version_added"].as_u64()), (Some(ids[0].as_str()), Some(2)));
    assert_eq!(
        (edited["expected"].clone(), edited["input"]["prompt"].clone()),
        (json!("four"), json!("What is 2 + 2?"))
    );
    assert_eq!(edited["metadata"], json!({"source": "a"}));
    // A deletion: version 3.
    let deleted = app.send(Method::DELETE, &format!("{uri}/{}", ids[1]), None, "").await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text);
    assert_eq!((deleted.json()["version"].as_u64(), deleted.json()["item_count"].as_u64()), (Some(3), Some(2)));
    let again = app.send(Method::DELETE, &format!("{uri}/{}", ids[1]), None, "").await;
    assert_eq!(again.status, StatusCode::NOT_FOUND, "{}", again.text);
    let gone = send(&app, Method::PUT, &format!("{uri}/{}", ids[1]), json!({"expected": 1})).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND, "{}", gone.text);

    // Each version is exactly what it was.
    let v1_again = items_at(&app, &id, Some(1)).await;
    assert_eq!(v1_again, v1);
    let v2 = items_at(&app, &id, Some(2)).await;
    assert_eq!(prompts(&v2), ["What is 2 + 2?", "What is 3 * 3?", "(conversation)"]);
    assert_eq!((v2[0].clone(), v2[1].clone(), v2[2].clone()), (edited.clone(), v1[1].clone(), v1[2].clone()));
    let v3 = items_at(&app, &id, Some(3)).await;
    assert_eq!(v3, [edited.clone(), v1[2].clone()]);
    assert_eq!(items_at(&app, &id, None).await, v3, "the current version by default");
    assert!(items_at(&app, &id, Some(0)).await.is_empty());
    let page = app.get(&format!("{uri}?version=2")).await.json();
    assert_eq!((page["version"].as_u64(), page["dataset_id"].as_str()), (Some(2), Some(id.as_str())));
    let ahead = app.get(&format!("{uri}?version=4")).await;
    assert_eq!(ahead.status, StatusCode::BAD_REQUEST, "{}", ahead.text);
    assert!(ahead.json()["error"].as_str().unwrap().starts_with("version: dataset `math` is at version 3"));

    // `expected: null` removes it.
    let cleared = send(&app, Method::PUT, &edit_uri, json!({"expected": null})).await;
    assert_eq!(cleared.status, StatusCode::OK, "{}", cleared.text);
    assert!(cleared.json()["expected"].is_null());
    assert_eq!(items_at(&app, &id, Some(3)).await[0]["expected"], "four");

    let audit = app.get("/api/audit?limit=200").await.json();
    assert_eq!(audited(&audit, "dataset_items_added"), 1);
    assert_eq!(audited(&audit, "dataset_item_edited"), 2);
    assert_eq!(audited(&audit, "dataset_item_deleted"), 1);
    let entry = audit["entries"].as_array().unwrap().iter().find(|e| e["action"] == "dataset_items_added").unwrap();
    assert_eq!(entry["target"], id);
    assert!(entry["detail"].as_str().unwrap().starts_with("3 items"), "{entry}");
}

#[tokio::test]
async fn bad_items_are_400s_naming_the_item_and_field_and_keep_nothing() {
    let app = app().await;
    let id = dataset(&app, "strict").await;
    let uri = format!("/api/datasets/{id}/items");
    let ok = json!({"input": {"prompt": "fine"}});
    let cases = [
        (json!({"items": []}), "items: give 1 to 1000 items"),
        (
            json!({"items": [ok, {"input": {"prompt": "x"}, "expected": "x".repeat(70_000)}]}),
            "items[1].expected: at most 64 KiB of JSON",
        ),
        (
            json!({"items": [{"input": {"prompt": "x"}, "metadata": {"k": "v".repeat(17_000)}}]}),
            "items[0].metadata: at most 16 KiB of JSON",
        ),
        (json!({"items": [{"input": {}}]}), "items[0].input: give prompt or input_items"),
        (
            json!({"items": [{"input": {"prompt": "x", "input_items": [{"type": "human", "data": {"message": "y"}}]}}]}),
            "items[0].input: give prompt or input_items, not both",
        ),
        (json!({"items": [{"input": {"prompt": " "}}]}), "items[0].input.prompt: must not be blank"),
        (
            json!({"items": [{"input": {"input_items": [{"type": "agent", "data": {"message": "hi"}}]}}]}),
            "items[0].input.input_items: the last item must be a human message",
        ),
        (
            json!({"items": [ok, {"input": {"input_items": [
            {"type": "human", "data": {"message": "add"}},
            {"type": "invocation-result", "data": {"id": "c1", "toolName": "calculator",
                "resultType": "resolution", "result": 3}},
            {"type": "human", "data": {"message": "and?"}}]}}]}),
            "items[1].input.input_items[1]: no open invocation `c1`",
        ),
        (json!({"items": [{"input": {"prompt": "x"}, "tags": vec!["t"; 33]}]}), "items[0].tags: at most 32 tags"),
        (json!({"items": [{"input": {"prompt": "x"}, "tags": ["x".repeat(65)]}]}), "items[0].tags[0]: 1-64"),
        (json!({"items": [{"input": {"prompt": "x"}, "source_run_id": "r"}]}), "unknown field `source_run_id`"),
        (json!({"items": vec![json!({"input": {"prompt": "x"}}); 1001]}), "items: give 1 to 1000 items"),
    ];
    for (body, says) in cases {
        let reply = app.post_json(&uri, &body.to_string()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{says}: {}", reply.text);
        assert!(reply.json()["error"].as_str().unwrap().contains(says), "{says}: {}", reply.text);
    }
    let read = app.get(&format!("/api/datasets/{id}")).await.json();
    assert_eq!((read["version"].as_u64(), read["item_count"].as_u64()), (Some(0), Some(0)), "nothing kept");
    let missing = post(&app, "/api/datasets/nope/items", json!({"items": [{"input": {"prompt": "x"}}]})).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_finished_run_becomes_an_item_with_its_prompt_answer_and_tool_results() {
    let app = app().await;
    let (run, result) = run_with_call(&app).await;
    let id = dataset(&app, "from runs").await;
    let uri = format!("/api/runs/{run}/dataset-items");
    let made = app.post_json(&uri, &json!({"dataset_id": id}).to_string()).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    let item = made.json();
    assert_eq!(item["input"], json!({"prompt": "add"}));
    assert_eq!(item["expected"], "3", "the run's answer");
    assert_eq!(
        item["recorded_results"],
        json!([{"tool": "calculator", "arguments": {"expression": "1 + 2"}, "result": result}])
    );
    assert_eq!((item["source_run_id"].as_str(), item["version_added"].as_u64()), (Some(run.as_str()), Some(1)));
    assert_eq!(items_at(&app, &id, None).await, std::slice::from_ref(&item));

    // Up to the first step: the same turn (its answer is still the run's), the call of that step.
    let first = post(&app, &uri, json!({"dataset_id": id, "up_to_step": 0, "expected": {"sum": 3}})).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    assert_eq!(first.json()["expected"], json!({"sum": 3}), "a given expected wins");
    assert_eq!(first.json()["recorded_results"].as_array().unwrap().len(), 1);
    assert_eq!(first.json()["version_added"], 2);

    let past = app.post_json(&uri, &json!({"dataset_id": id, "up_to_step": 7}).to_string()).await;
    assert_eq!(past.status, StatusCode::BAD_REQUEST, "{}", past.text);
    assert!(past.json()["error"].as_str().unwrap().starts_with("up_to_step: run "), "{}", past.text);
    let big = app.post_json(&uri, &json!({"dataset_id": id, "expected": "x".repeat(70_000)}).to_string()).await;
    assert_eq!(big.status, StatusCode::BAD_REQUEST, "{}", big.text);
    assert_eq!(big.json()["error"], "expected: at most 64 KiB of JSON");
    let no_dataset = app.post_json(&uri, &json!({"dataset_id": "nope"}).to_string()).await;
    assert_eq!(no_dataset.status, StatusCode::NOT_FOUND, "{}", no_dataset.text);
    let no_run = app.post_json("/api/runs/nope/dataset-items", &json!({"dataset_id": id}).to_string()).await;
    assert_eq!(no_run.status, StatusCode::NOT_FOUND, "{}", no_run.text);

    // A run's structured input stays structured, as the run took it.
    let structured = app.finished_run(r#"{"initial_prompt": "Greet them", "input": {"name": "Ada"}}"#).await;
    let structured = structured["id"].as_str().unwrap();
    let made = post(&app, &format!("/api/runs/{structured}/dataset-items"), json!({"dataset_id": id})).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    assert_eq!(made.json()["input"], json!({"prompt": "Greet them", "input": {"name": "Ada"}}));

    // A run still waiting for a person has not ended.
    let paused = app.paused_run().await;
    let early = post(&app, &format!("/api/runs/{paused}/dataset-items"), json!({"dataset_id": id})).await;
    assert_eq!(early.status, StatusCode::CONFLICT, "{}", early.text);
    assert_eq!(app.get(&format!("/api/datasets/{id}")).await.json()["item_count"], 3);
}

#[tokio::test]
async fn a_follow_up_conversation_becomes_input_items_up_to_its_last_human_message() {
    let app = app().await;
    let run = app.finished_run(r#"{"initial_prompt": "What is 2 + 2?"}"#).await;
    let run = run["id"].as_str().unwrap().to_owned();
    let first_answer = app.get(&format!("/api/runs/{run}")).await.json()["summary"].clone();
    let follow = app.post_json(&format!("/api/runs/{run}/messages"), r#"{"message": "And 3 * 3?"}"#).await;
    assert_eq!(follow.status, StatusCode::OK, "{}", follow.text);
    let done = app.engine.runs().wait_until_settled(&run, std::time::Duration::from_secs(20)).await.unwrap();
    assert_eq!(done.status.as_str(), "done");
    let messages = app.get(&format!("/api/runs/{run}/messages")).await.json();
    let messages = messages["messages"].as_array().unwrap().clone();
    let second = messages.iter().position(|m| m["type"] == "human" && m["data"]["message"] == "And 3 * 3?").unwrap();
    let transcript: Vec<Value> =
        messages[..=second].iter().map(|m| json!({"type": m["type"], "data": m["data"]})).collect();

    let id = dataset(&app, "conversations").await;
    let uri = format!("/api/runs/{run}/dataset-items");
    let made = app.post_json(&uri, &json!({"dataset_id": id}).to_string()).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    let item = made.json();
    assert_eq!(item["input"], json!({"input_items": transcript}), "the earlier turns, then the last question");
    assert!(item["expected"].as_str().unwrap().contains('9'), "the run's final answer: {item}");
    assert_eq!(item["expected"], done.summary.clone().unwrap().as_str());
    // The first turn: its prompt alone, and the answer it got then.
    let first_step = messages[1]["stepIndex"].as_u64().unwrap();
    let first = app.post_json(&uri, &json!({"dataset_id": id, "up_to_step": first_step}).to_string()).await.json();
    assert_eq!(first["input"], json!({"prompt": "What is 2 + 2?"}), "{first}");
    assert_eq!(first["expected"], first_answer, "{first}");
    // The conversation replays: an experiment can start a run from it.
    let stored: DatasetItem = serde_json::from_value(item).unwrap();
    let again = app.engine.runs().create_run_in(stored.input.run_request(), "default", None).await;
    assert!(again.is_ok(), "{again:?}");
}

#[tokio::test]
async fn an_ingested_run_is_added_when_it_recorded_a_human_message() {
    let app = app().await;
    let auth = app.bearer();
    let mut captured = crate::otlp_api::json_trace("5b8efff798038103d269b633813fc60c");
    captured["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "input.value", "value": {"stringValue": "Add 1 and 1"}}));
    let blind = crate::otlp_api::json_trace("6c9f0008a9149214e37ac744924fd71d");
    for body in [captured, blind] {
        let body = body.to_string();
        let sent = app
            .send_with(Method::POST, "/v1/traces", Some(&body), "application/json", &[("authorization", &auth)])
            .await;
        assert_eq!(sent.status, StatusCode::OK, "{}", sent.text);
    }
    let runs = app.get("/api/runs?all=true").await.json();
    let run_of = |trace: &str| {
        runs["runs"].as_array().unwrap().iter().find(|r| r["id"].as_str().unwrap().contains(trace)).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let id = dataset(&app, "ingested").await;
    let captured = run_of("5b8efff798038103d269b633813fc60c");
    let made = post(&app, &format!("/api/runs/{captured}/dataset-items"), json!({"dataset_id": id})).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    let item = made.json();
    assert_eq!(item["input"], json!({"prompt": "Add 1 and 1"}));
    let tools: Vec<&str> =
        item["recorded_results"].as_array().unwrap().iter().map(|r| r["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, ["add"], "{item}");
    let blind = run_of("6c9f0008a9149214e37ac744924fd71d");
    let refused = post(&app, &format!("/api/runs/{blind}/dataset-items"), json!({"dataset_id": id})).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    assert!(refused.json()["error"].as_str().unwrap().contains("recorded no person's message"), "{}", refused.text);
}

#[tokio::test]
async fn uploads_keep_every_row_or_none() {
    let app = app().await;
    let id = dataset(&app, "uploads").await;
    let upload = |format: &'static str, content: String| {
        let app = &app;
        let uri = format!("/api/datasets/{id}/upload?format={format}");
        async move { app.post_json(&uri, &json!({"content": content}).to_string()).await }
    };
    let jsonl = [
        json!({"input": {"prompt": "one"}, "expected": "1"}).to_string(),
        String::new(),
        json!({"input": {"prompt": "two"}, "tags": ["t"], "metadata": {"k": 2}}).to_string(),
    ]
    .join("\n");
    let good = upload("jsonl", format!("{jsonl}\n")).await;
    assert_eq!(good.status, StatusCode::CREATED, "{}", good.text);
    assert_eq!(
        (good.json()["dataset"]["version"].as_u64(), good.json()["item_ids"].as_array().map(Vec::len)),
        (Some(1), Some(2))
    );

    let csv = "prompt,expected,tags,topic\r\n\"What is 2 + 2?\",4,math; easy,arith\r\n\"Say \"\"hi\"\",\nplease\",hello,,greetings\r\nGive JSON,\"{\"\"a\"\": 1}\",,\r\n";
    let good = upload("csv", csv.to_owned()).await;
    assert_eq!(good.status, StatusCode::CREATED, "{}", good.text);
    assert_eq!(good.json()["dataset"]["item_count"], 5);
    let items = items_at(&app, &id, None).await;
    assert_eq!(prompts(&items), ["one", "two", "What is 2 + 2?", "Say \"hi\",\nplease", "Give JSON"]);
    assert_eq!((items[2]["expected"].clone(), items[2]["tags"].clone()), (json!(4), json!(["math", "easy"])));
    assert_eq!(items[2]["metadata"], json!({"topic": "arith"}));
    assert_eq!((items[3]["expected"].clone(), items[4]["expected"].clone()), (json!("hello"), json!({"a": 1})));
    assert_eq!(items[1]["metadata"], json!({"k": 2}));

    // Bad rows: every one named by its line, nothing kept.
    let before = app.get(&format!("/api/datasets/{id}")).await.json();
    let bad_jsonl = [
        json!({"input": {"prompt": "fine"}}).to_string(),
        "{not json".to_owned(),
        json!({"input": {"prompt": "fine too"}}).to_string(),
        json!({"input": {"prompt": " "}}).to_string(),
        json!({"input": {"prompt": "x"}, "expected": "x".repeat(70_000)}).to_string(),
    ]
    .join("\n");
    let refused = upload("jsonl", bad_jsonl).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    let error = refused.json()["error"].as_str().unwrap().to_owned();
    assert!(error.starts_with("content: 3 bad rows, nothing kept: line 2: "), "{error}");
    assert!(
        error.contains("; line 4: input.prompt: must not be blank; line 5: expected: at most 64 KiB of JSON"),
        "{error}"
    );
    let bad_csv = "prompt,expected\nfine,1\n,2\nshort\n\"unclosed,3\n";
    let refused = upload("csv", bad_csv.to_owned()).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert_eq!(refused.json()["error"], "content: line 5: a quoted field is not closed");
    let refused = upload("csv", "prompt,expected\nfine,1\n,2\nshort\n".to_owned()).await;
    let error = refused.json()["error"].as_str().unwrap().to_owned();
    assert_eq!(
        error,
        "content: 2 bad rows, nothing kept: line 3: input.prompt: must not be blank; \
         line 4: 1 fields, where the header names 2 columns"
    );
    let many: String = (0..25).map(|i| format!("{{\"input\": {{\"prompt\": \"{i}\"}}, \"nope\": 1}}\n")).collect();
    let error = upload("jsonl", many).await.json()["error"].as_str().unwrap().to_owned();
    assert!(error.starts_with("content: 25 bad rows, nothing kept: line 1: unknown field `nope`"), "{error}");
    assert!(error.contains("line 20: ") && !error.contains("line 21: ") && error.ends_with("; and 5 more"), "{error}");
    for (format, content, says) in [
        ("csv", "question\nx\n", "content: line 1: the header must name a `prompt` column"),
        ("csv", "\n", "content: no items"),
        ("jsonl", "\n \n", "content: no items"),
    ] {
        let reply = upload(format, content.to_owned()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{content:?}: {}", reply.text);
        assert!(reply.json()["error"].as_str().unwrap().starts_with(says), "{}", reply.text);
    }
    let no_format = app.post_json(&format!("/api/datasets/{id}/upload"), &json!({"content": "x"}).to_string()).await;
    assert_eq!(no_format.status, StatusCode::BAD_REQUEST, "{}", no_format.text);
    let wrong = post(&app, &format!("/api/datasets/{id}/upload?format=xml"), json!({"content": "x"})).await;
    assert_eq!(wrong.status, StatusCode::BAD_REQUEST);
    let after = app.get(&format!("/api/datasets/{id}")).await.json();
    assert_eq!(after, before, "version and items unchanged");
    assert_eq!(items_at(&app, &id, None).await, items);

    // The body is bounded: 8 MiB.
    let huge = upload("jsonl", "x".repeat(8 * 1024 * 1024 + 1)).await;
    assert_eq!(huge.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", &huge.text[..huge.text.len().min(300)]);
    // Bigger than other bodies may be: 3 MiB of rows.
    let row = json!({"input": {"prompt": "p".repeat(3000)}}).to_string();
    let big: String = (0..1000).map(|_| format!("{row}\n")).collect();
    assert!(big.len() > 2 * 1024 * 1024);
    let kept = upload("jsonl", big).await;
    assert_eq!(kept.status, StatusCode::CREATED, "{}", &kept.text[..kept.text.len().min(300)]);
    assert_eq!(kept.json()["dataset"]["item_count"], 1005);
}

#[tokio::test]
async fn caps_hold_and_racing_changes_keep_versions_dense() {
    let app = app().await;
    let store = app.engine.store().clone();
    let id = dataset(&app, "capped").await;
    let item = |n: usize| DatasetItem {
        id: format!("item-{n:03}"),
        dataset_id: id.clone(),
        input: DatasetInput::prompt(format!("q{n}")),
        expected: None,
        metadata: Default::default(),
        tags: Vec::new(),
        source_run_id: None,
        recorded_results: Vec::new(),
        version_added: 0,
        created_at: chrono::Utc::now(),
    };
    let at = chrono::Utc::now();
    let three: Vec<DatasetItem> = (0..3).map(item).collect();
    let kept = store.datasets().add_dataset_items("default", &id, &three, 5, at).await.unwrap();
    assert!(matches!(kept, ItemsWrite::Saved(Dataset { version: 1, item_count: 3, .. })), "{kept:?}");
    let more: Vec<DatasetItem> = (3..6).map(item).collect();
    let refused = store.datasets().add_dataset_items("default", &id, &more, 5, at).await.unwrap();
    assert_eq!(refused, ItemsWrite::TooMany);
    let now = app.get(&format!("/api/datasets/{id}")).await.json();
    assert_eq!((now["version"].as_u64(), now["item_count"].as_u64()), (Some(1), Some(3)), "nothing kept");
    assert_eq!(items_at(&app, &id, None).await.len(), 3);
    let elsewhere = store.datasets().add_dataset_items("other", &id, &more, 100, at).await.unwrap();
    assert_eq!(elsewhere, ItemsWrite::NoDataset, "the store keeps the project's line too");

    // Twelve racing adds of one item each, a cap of 10: ten versions, dense.
    let tasks: Vec<_> = (10..22)
        .map(|n| {
            let store = store.clone();
            let (id, one) = (id.clone(), vec![item(n)]);
            tokio::spawn(async move { store.datasets().add_dataset_items("default", &id, &one, 10, at).await.unwrap() })
        })
        .collect();
    let mut versions = Vec::new();
    for t in tasks {
        if let ItemsWrite::Saved(d) = t.await.unwrap() {
            versions.push(d.version);
        }
    }
    versions.sort();
    assert_eq!(versions, (2..=8).collect::<Vec<u32>>(), "seven fit under the cap, one version each");
    for v in 1..=8u32 {
        assert_eq!(items_at(&app, &id, Some(v)).await.len(), 2 + v as usize, "version {v}");
    }
    // Racing edits and deletions of the API take turns too.
    let ids: Vec<String> = items_at(&app, &id, None).await.iter().map(|i| i["id"].as_str().unwrap().into()).collect();
    let edits = ids.iter().take(4).map(|item| {
        let uri = format!("/api/datasets/{id}/items/{item}");
        let app = &app;
        async move { send(app, Method::PUT, &uri, json!({"tags": ["raced"]})).await.status }
    });
    let deletes = ids.iter().skip(4).take(4).map(|item| {
        let uri = format!("/api/datasets/{id}/items/{item}");
        let app = &app;
        async move { app.send(Method::DELETE, &uri, None, "").await.status }
    });
    let (edited, deleted) = tokio::join!(futures::future::join_all(edits), futures::future::join_all(deletes));
    assert!(edited.iter().all(|s| *s == StatusCode::OK), "{edited:?}");
    assert!(deleted.iter().all(|s| *s == StatusCode::OK), "{deleted:?}");
    let now = app.get(&format!("/api/datasets/{id}")).await.json();
    assert_eq!((now["version"].as_u64(), now["item_count"].as_u64()), (Some(16), Some(6)));
    for v in 9..=16u32 {
        assert!(!items_at(&app, &id, Some(v)).await.is_empty(), "version {v}");
    }

    // The real caps, through the API: a project's 100 datasets.
    for n in 1..100 {
        let new = serde_json::from_value(json!({"name": format!("d{n}")})).unwrap();
        let made = app.engine.datasets().create("default", new, &Actor::system()).await;
        assert!(made.is_ok(), "{n}: {made:?}");
    }
    let refused = app.post_json("/api/datasets", &json!({"name": "one too many"}).to_string()).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    assert!(refused.json()["error"].as_str().unwrap().contains("100 datasets"), "{}", refused.text);
    assert_eq!(app.get("/api/datasets?limit=200").await.json()["datasets"].as_array().unwrap().len(), 100);
}

#[tokio::test]
async fn viewers_read_operators_change_items_and_only_admins_delete_a_dataset() {
    let app = app().await;
    let viewer = app.key("default", Role::Viewer).await;
    let operator = app.key("default", Role::Operator).await;
    let made = app.with_key(&viewer, Method::POST, "/api/datasets", Some(json!({"name": "v"}))).await;
    assert_eq!(made.status, StatusCode::FORBIDDEN, "{}", made.text);
    let made = app.with_key(&operator, Method::POST, "/api/datasets", Some(json!({"name": "ops"}))).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    let id = made.json()["id"].as_str().unwrap().to_owned();
    let items = json!({"items": [{"input": {"prompt": "x"}}]});
    let uri = format!("/api/datasets/{id}/items");

    let refused = app.with_key(&viewer, Method::POST, &uri, Some(items.clone())).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);
    assert!(refused.json()["error"].as_str().unwrap().contains("`operator`"), "{}", refused.text);
    let upload = format!("/api/datasets/{id}/upload?format=csv");
    let refused = app.with_key(&viewer, Method::POST, &upload, Some(json!({"content": "prompt\nx\n"}))).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let added = app.with_key(&operator, Method::POST, &uri, Some(items)).await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.text);
    let item = added.json()["item_ids"][0].as_str().unwrap().to_owned();
    for read in [format!("/api/datasets/{id}"), uri.clone(), "/api/datasets".to_owned()] {
        assert_eq!(app.with_key(&viewer, Method::GET, &read, None).await.status, StatusCode::OK, "{read}");
    }
    let item_uri = format!("{uri}/{item}");
    let edit = Some(json!({"tags": ["t"]}));
    assert_eq!(app.with_key(&viewer, Method::PUT, &item_uri, edit.clone()).await.status, StatusCode::FORBIDDEN);
    assert_eq!(app.with_key(&operator, Method::PUT, &item_uri, edit).await.status, StatusCode::OK);
    assert_eq!(app.with_key(&viewer, Method::DELETE, &item_uri, None).await.status, StatusCode::FORBIDDEN);
    assert_eq!(app.with_key(&operator, Method::DELETE, &item_uri, None).await.status, StatusCode::OK);

    let by_operator = app.with_key(&operator, Method::DELETE, &format!("/api/datasets/{id}"), None).await;
    assert_eq!(by_operator.status, StatusCode::FORBIDDEN, "{}", by_operator.text);
    assert!(by_operator.json()["error"].as_str().unwrap().contains("`admin`"), "{}", by_operator.text);
    let by_admin = app.send(Method::DELETE, &format!("/api/datasets/{id}"), None, "").await;
    assert_eq!(by_admin.status, StatusCode::NO_CONTENT, "{}", by_admin.text);
    // Its items went with it, at every version.
    assert!(app.engine.store().datasets().dataset_items(&id, 2, None, 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn another_projects_dataset_and_run_behave_as_absent() {
    let app = app().await;
    let (run, _) = run_with_call(&app).await;
    let id = dataset(&app, "mine").await;
    let added = post(&app, &format!("/api/datasets/{id}/items"), json!({"items": [{"input": {"prompt": "x"}}]})).await;
    let item = added.json()["item_ids"][0].as_str().unwrap().to_owned();
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let other = app.key("other", Role::Admin).await;
    let theirs = app.with_key(&other, Method::POST, "/api/datasets", Some(json!({"name": "theirs"}))).await;
    assert_eq!(theirs.status, StatusCode::CREATED, "{}", theirs.text);
    let theirs = theirs.json()["id"].as_str().unwrap().to_owned();

    let body = Some(json!({"items": [{"input": {"prompt": "x"}}]}));
    for (method, uri, body) in [
        (Method::GET, format!("/api/datasets/{id}"), None),
        (Method::PUT, format!("/api/datasets/{id}"), Some(json!({"name": "taken over"}))),
        (Method::GET, format!("/api/datasets/{id}/items"), None),
        (Method::POST, format!("/api/datasets/{id}/items"), body),
        (Method::PUT, format!("/api/datasets/{id}/items/{item}"), Some(json!({"tags": ["x"]}))),
        (Method::DELETE, format!("/api/datasets/{id}/items/{item}"), None),
        (Method::POST, format!("/api/datasets/{id}/upload?format=csv"), Some(json!({"content": "prompt\nx\n"}))),
        (Method::DELETE, format!("/api/datasets/{id}"), None),
        (Method::POST, format!("/api/runs/{run}/dataset-items"), Some(json!({"dataset_id": theirs}))),
    ] {
        let reply = app.with_key(&other, method.clone(), &uri, body).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{method} {uri}: {}", reply.text);
    }
    let absent = app.with_key(&other, Method::GET, "/api/datasets/nope", None).await;
    let hidden = app.with_key(&other, Method::GET, &format!("/api/datasets/{id}"), None).await;
    assert_eq!(
        hidden.json()["error"].as_str().map(|e| e.replace(&id, "ID")),
        absent.json()["error"].as_str().map(|e| e.replace("nope", "ID"))
    );
    // A run of `default` into a dataset of `other`: the dataset is not the run's project's.
    let across = post(&app, &format!("/api/runs/{run}/dataset-items"), json!({"dataset_id": theirs})).await;
    assert_eq!(across.status, StatusCode::NOT_FOUND);
    let listed = app.with_key(&other, Method::GET, "/api/datasets", None).await.json();
    let names: Vec<&str> = listed["datasets"].as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["theirs"]);
    // The engine itself keeps the line, whatever the caller checked.
    let direct = app.engine.datasets().get("other", &id).await;
    assert!(matches!(direct, Err(runlens_engine::error::EngineError::NotFound(_))), "{direct:?}");
    let req = serde_json::from_value(json!({"dataset_id": theirs})).unwrap();
    let run_direct = app.engine.datasets().add_run("other", &run, req, &Actor::system()).await;
    assert!(matches!(run_direct, Err(runlens_engine::error::EngineError::NotFound(_))), "{run_direct:?}");
    let mine = app.get(&format!("/api/datasets/{id}")).await.json();
    assert_eq!((mine["name"].as_str(), mine["item_count"].as_u64()), (Some("mine"), Some(1)));
}
