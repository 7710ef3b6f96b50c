//! AG-UI survives `kill -9`: a thread that paused for an approval is killed
//! with its interrupt delivered, restarted, and resumed through AG-UI with the
//! decision; the server is killed again while that resume's stream is open.
//! After the last restart the run finishes on its own, the decision is
//! kept, the email was sent exactly once (a send the kill interrupted ends
//! as the outbox says), and the thread goes on through AG-UI.

use std::time::Duration;

use serde_json::{json, Value};

use super::server::{Server, KEY};
use crate::support::client_with_key;

const EMAIL: &str = r#"Please send email {"to": "ops@example.com", "subject": "hi", "body": "hello"}"#;

fn input(run: &str, resume: Option<Value>) -> Value {
    let mut body = json!({"threadId": "agui-crash", "runId": run,
        "messages": [{"id": "u1", "role": "user", "content": EMAIL}],
        "tools": [], "context": [], "state": {}, "forwardedProps": {}});
    if let Some(entries) = resume {
        body["resume"] = entries;
    }
    body
}

/// The AG-UI events of a whole stream.
fn events(text: &str) -> Vec<Value> {
    text.lines().filter_map(|l| l.strip_prefix("data: ")).map(|d| serde_json::from_str(d).unwrap()).collect()
}

async fn get(http: &reqwest::Client, url: String) -> Value {
    let reply = http.get(&url).send().await.unwrap();
    assert!(reply.status().is_success(), "GET {url}: {}", reply.status());
    reply.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_and_its_resume_survive_kills_and_the_side_effect_happens_once() {
    let dir = tempfile::tempdir().unwrap();
    let http = client_with_key(runlens_engine::net::http_builder().timeout(Duration::from_secs(30)), KEY);
    let db = format!("sqlite://{}", dir.path().join("agui.db").display());
    let log = dir.path().join("agui.log");
    let mut server = Server::start(&http, &db, dir.path(), &log).await;

    let reply = http.post(format!("{}/api/agui", server.base)).json(&input("r1", None)).send().await.unwrap();
    assert_eq!(reply.status(), 200);
    let first = events(&reply.text().await.unwrap());
    let outcome = &first.last().unwrap()["outcome"];
    assert_eq!(outcome["type"], "interrupt", "{first:#?}");
    let call_id = outcome["interrupts"][0]["id"].as_str().unwrap().to_owned();

    server.kill();
    server = Server::start(&http, &db, dir.path(), &log).await;
    assert_eq!(get(&http, format!("{}/api/runs/default~thread~agui-crash", server.base)).await["status"], "paused");

    // The decision goes in; the server dies while its stream is open.
    let approve = json!([{"interruptId": call_id, "status": "resolved", "payload": true}]);
    let reply = http.post(format!("{}/api/agui", server.base)).json(&input("r2", Some(approve))).send().await.unwrap();
    assert_eq!(reply.status(), 200, "the decision is taken before the stream starts");
    server.kill();
    let _ = reply.text().await;
    server = Server::start(&http, &db, dir.path(), &log).await;

    let mut run = Value::Null;
    for _ in 0..2400 {
        run = get(&http, format!("{}/api/runs/default~thread~agui-crash", server.base)).await;
        if run["status"] == "done" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(run["status"], "done", "{run:#}");
    // The decision was not lost, and the email went out once, even when the
    // kill came while `send_email` was running: the outbox says whether it
    // was written, and the call ends accordingly (sent, or sent now).
    let call = get(&http, format!("{}/api/runs/default~thread~agui-crash/tool-calls/{call_id}", server.base)).await;
    assert_eq!(call["approval"]["decision"], "approved", "{call:#}");
    assert_eq!(call["status"], "succeeded", "{call:#}");
    let emails = get(&http, format!("{}/api/outbox", server.base)).await["emails"].as_array().unwrap().len();
    assert_eq!(emails, 1, "{call:#}");

    // The thread goes on through AG-UI after the restarts: a follow-up streams to the end.
    let mut follow = input("r3", None);
    follow["messages"] = json!([{"id": "u2", "role": "user", "content": "What is 2 + 2?"}]);
    let reply = http.post(format!("{}/api/agui", server.base)).json(&follow).send().await.unwrap();
    assert_eq!(reply.status(), 200);
    let last = events(&reply.text().await.unwrap());
    assert_eq!(last.first().unwrap()["type"], "RUN_STARTED");
    assert_eq!(last.last().unwrap()["outcome"]["type"], "success", "{last:#?}");
    server.kill();
}
