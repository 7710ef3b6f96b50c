//! Start-up does not wait for recovery. The real binary, restarted with
//! paused runs in its database while its recovery is held back (debug
//! builds: `RUNLENS_TEST_HOLD_RECOVERY=FILE` holds it until FILE exists),
//! answers `/healthz`, and answers requests about the runs recovery has not
//! reached as it would after: reads, the inbox count, an approval (the run
//! resumes once and sends its email once) and a cancel. Let go, recovery
//! finishes and changes none of it.

use std::time::Duration;

use serde_json::{json, Value};

use super::server::{Server, KEY};
use crate::support::client_with_key;

/// Polls before a wait counts as hung (a bound on a hang, not a speed limit).
const HANG_POLLS: usize = 2_400;

/// The server log from byte `from` on.
fn log_since(log: &std::path::Path, from: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.get(from..).unwrap_or_default().to_owned()
}

async fn get(http: &reqwest::Client, url: &str) -> Value {
    let resp = http.get(url).send().await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
    assert!(resp.status().is_success(), "GET {url}: {}", resp.status());
    resp.json().await.unwrap()
}

async fn post(http: &reqwest::Client, url: &str, body: Value) -> reqwest::Response {
    http.post(url).json(&body).send().await.unwrap_or_else(|e| panic!("POST {url}: {e}"))
}

/// Polls run `id` until its status is `status`.
async fn wait_for(http: &reqwest::Client, base: &str, id: &str, status: &str) -> Value {
    for _ in 0..HANG_POLLS {
        let run = get(http, &format!("{base}/api/runs/{id}")).await;
        if run["status"] == status {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("run {id} never became {status}");
}

async fn emails_of(http: &reqwest::Client, base: &str, run_id: &str) -> usize {
    let outbox = get(http, &format!("{base}/api/outbox")).await;
    outbox["emails"].as_array().unwrap().iter().filter(|e| e["run_id"] == run_id).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_serves_before_recovery_and_answers_right_about_runs_it_has_not_reached() {
    let dir = tempfile::tempdir().unwrap();
    let db_url = format!("sqlite://{}", dir.path().join("recovery.db").display());
    let log = dir.path().join("server.log");
    let http = client_with_key(runlens_engine::net::http_builder().timeout(Duration::from_secs(15)), KEY);

    // Three runs paused on one `send_email` each, then a kill -9.
    let mut server = Server::start(&http, &db_url, dir.path(), &log).await;
    let mut ids = Vec::new();
    for to in ["approved", "cancelled", "waiting"] {
        let body = json!({
            "initial_prompt": "Send it.",
            "model_settings": {"script": [
                {"tool_calls": [{"name": "send_email", "arguments": {"to": format!("{to}@example.com"), "subject": "s", "body": "b"}}]},
                {"text": "sent"}
            ]},
            "approval": {"tools": ["send_email"], "timeout_s": 3600}
        });
        let resp = post(&http, &format!("{}/api/runs", server.base), body).await;
        assert!(resp.status().is_success(), "{}", resp.status());
        let id = resp.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
        wait_for(&http, &server.base, &id, "paused").await;
        ids.push(id);
    }
    server.kill();
    let from = std::fs::metadata(&log).unwrap().len() as usize;

    let gate = dir.path().join("recover-now");
    let hold = [("RUNLENS_TEST_HOLD_RECOVERY", gate.to_str().unwrap())];
    // `start` returns once `/healthz` answers: with recovery held, so serving does not wait for it.
    let server = Server::start_with_env(&http, &db_url, dir.path(), &log, &[], &hold).await;
    let base = server.base.clone();
    let (approved, cancelled, waiting) = (&ids[0], &ids[1], &ids[2]);
    assert!(log_since(&log, from).contains("recovery held until"), "{}", log_since(&log, from));

    let run = get(&http, &format!("{base}/api/runs/{waiting}")).await;
    assert_eq!(run["status"], "paused");
    assert_eq!(run["interruptions"].as_array().unwrap().len(), 1);
    assert!(run["interruptions"][0]["deadline"].is_string(), "{run}");
    let count = get(&http, &format!("{base}/api/approvals/count")).await;
    assert_eq!(count["pending"], 3);

    let run = get(&http, &format!("{base}/api/runs/{approved}")).await;
    let call = run["interruptions"][0]["call_id"].as_str().unwrap().to_owned();
    let approve = format!("{base}/api/runs/{approved}/tool-calls/{call}/approve");
    let resp = post(&http, &approve, json!({})).await;
    assert!(resp.status().is_success(), "{}", resp.status());
    let run = wait_for(&http, &base, approved, "done").await;
    assert_eq!(run["result"], "sent");
    assert_eq!(emails_of(&http, &base, approved).await, 1);

    let resp = post(&http, &format!("{base}/api/runs/{cancelled}/cancel"), json!({})).await;
    assert!(resp.status().is_success(), "{}", resp.status());
    assert_eq!(get(&http, &format!("{base}/api/runs/{cancelled}")).await["status"], "cancelled");
    assert!(!log_since(&log, from).contains("recovery finished"), "recovery was held: {}", log_since(&log, from));

    // Let recovery go.
    std::fs::write(&gate, b"").unwrap();
    let mut finished = false;
    for _ in 0..HANG_POLLS {
        if log_since(&log, from).contains("recovery finished") {
            finished = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(finished, "recovery never finished: {}", log_since(&log, from));

    assert_eq!(get(&http, &format!("{base}/api/runs/{approved}")).await["status"], "done");
    assert_eq!(emails_of(&http, &base, approved).await, 1, "resumed once, sent once");
    let again = post(&http, &approve, json!({})).await;
    assert_eq!(again.status(), reqwest::StatusCode::CONFLICT);
    assert_eq!(get(&http, &format!("{base}/api/runs/{cancelled}")).await["status"], "cancelled");
    assert_eq!(emails_of(&http, &base, cancelled).await, 0);
    let run = get(&http, &format!("{base}/api/runs/{waiting}")).await;
    assert_eq!(run["status"], "paused");
    assert_eq!(get(&http, &format!("{base}/api/approvals/count")).await["pending"], 1);
    assert_eq!(emails_of(&http, &base, waiting).await, 0);
}
