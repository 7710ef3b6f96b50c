//! `GET /api/exports/runs`: the runs a list's filters select, with their
//! steps and tool calls, as JSON lines; cut at `limit` with the cursor to go
//! on; the project's own runs only; bad filters a 400 before any line.

use axum::http::{Method, StatusCode};
use runlens_engine::model::{Actor, CreateRun, Role};
use serde_json::{json, Value};

use crate::agents_api::refusal;
use crate::support::{app, Reply};

fn lines(reply: &Reply) -> Vec<Value> {
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.headers["content-type"], "application/x-ndjson");
    reply.text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

fn run_ids(lines: &[Value]) -> Vec<&str> {
    lines.iter().filter(|l| l["type"] == "run").map(|l| l["run"]["id"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn an_export_streams_every_selected_run_with_its_steps_and_goes_on_from_its_cursor() {
    let app = app().await;
    let calc = json!({"name": "calculator", "arguments": {"expression": "6 * 7"}});
    let script = json!([{"tool_calls": [calc]}, {"text": "42, said the damson."}]);
    let mut ids = Vec::new();
    for prompt in ["first damson", "second damson", "third"] {
        let body = json!({"initial_prompt": prompt, "model_settings": {"script": script}}).to_string();
        ids.push(app.finished_run(&body).await["id"].as_str().unwrap().to_owned());
    }
    ids.reverse();
    let all = lines(&app.get("/api/exports/runs").await);
    assert_eq!(run_ids(&all), ids.iter().map(String::as_str).collect::<Vec<_>>(), "newest first");
    let steps = all[0]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0]["tool_calls"][0]["tool_name"], "calculator");
    assert_eq!(steps[0]["tool_calls"][0]["arguments"], json!({"expression": "6 * 7"}));
    assert!(all[0]["run"]["cost_usd"].is_number());

    // The list's filters, a search among them.
    let found = lines(&app.get("/api/exports/runs?q=damson+first").await);
    assert_eq!(run_ids(&found), [ids[2].as_str()]);
    assert!(lines(&app.get("/api/exports/runs?status=failed").await).is_empty());

    // Cut at `limit`: the last line says where to go on.
    let cut = lines(&app.get("/api/exports/runs?limit=2").await);
    assert_eq!(run_ids(&cut), [ids[0].as_str(), ids[1].as_str()]);
    let more = cut.last().unwrap();
    assert_eq!(more["type"], "more");
    let cursor = more["next_cursor"].as_str().unwrap();
    let rest =
        lines(&app.get(&format!("/api/exports/runs?limit=2&cursor={}", crate::support::urlencode(cursor))).await);
    assert_eq!(run_ids(&rest), [ids[2].as_str()]);
    assert!(rest.iter().all(|l| l["type"] == "run"), "the end has no cursor");
    // A search's cursor goes on the same way (every answer names a damson).
    let cut = lines(&app.get("/api/exports/runs?q=damson&limit=1").await);
    assert_eq!(run_ids(&cut), [ids[0].as_str()]);
    let cursor = cut.last().unwrap()["next_cursor"].as_str().unwrap().to_owned();
    let rest = lines(&app.get(&format!("/api/exports/runs?q=damson&limit=1&cursor={cursor}")).await);
    assert_eq!(run_ids(&rest), [ids[1].as_str()]);
}

#[tokio::test]
async fn bad_filters_are_a_400_and_another_projects_runs_are_never_exported() {
    let app = app().await;
    for (uri, expected) in [
        ("/api/exports/runs?offset=5&cursor=1_r", "offset and cursor cannot be combined"),
        ("/api/exports/runs?status=nope", "status"),
        ("/api/exports/runs?limit=0", "limit"),
        ("/api/exports/runs?cursor=garbage", "invalid cursor"),
        ("/api/exports/runs?nope=1", "nope"),
    ] {
        let reply = app.get(uri).await;
        assert!(refusal(&reply, StatusCode::BAD_REQUEST).contains(expected), "{uri}: {}", reply.text);
    }
    app.engine.identity().create_project("other", &Actor::system()).await.unwrap();
    let theirs = CreateRun { initial_prompt: "their secret".into(), ..CreateRun::default() };
    let (theirs, _) = app.engine.runs().create_run_in(theirs, "other", None).await.unwrap();
    app.engine.runs().wait_until_settled(&theirs.id, std::time::Duration::from_secs(20)).await.unwrap();
    let ours = app.key_of("default", Role::Viewer).await;
    let reply = app.as_key(&ours, Method::GET, "/api/exports/runs", None).await;
    assert!(lines(&reply).is_empty(), "{}", reply.text);
    let key = app.key_of("other", Role::Viewer).await;
    let reply = app.as_key(&key, Method::GET, "/api/exports/runs", None).await;
    assert_eq!(run_ids(&lines(&reply)), [theirs.id.as_str()]);
}

#[tokio::test]
async fn an_offset_places_the_first_page_and_the_export_goes_on_past_it() {
    let app = app().await;
    // More runs than one page of the export (50), so it reads a second.
    let mut ids = Vec::new();
    for i in 0..53 {
        let run = CreateRun { initial_prompt: format!("plum {i}"), ..CreateRun::default() };
        let (run, _) = app.engine.runs().create_run_in(run, "default", None).await.unwrap();
        ids.push(run.id);
    }
    for id in &ids {
        app.engine.runs().wait_until_settled(id, std::time::Duration::from_secs(30)).await.unwrap();
    }
    ids.reverse();
    let rest: Vec<&str> = ids[2..].iter().map(String::as_str).collect();
    let all = lines(&app.get("/api/exports/runs?offset=2").await);
    assert_eq!(run_ids(&all), rest, "every run after the first two, across pages");
    let found = lines(&app.get("/api/exports/runs?offset=2&q=plum").await);
    assert_eq!(run_ids(&found), rest, "a search's too");
}
