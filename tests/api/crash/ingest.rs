//! OTLP ingest survives `kill -9`: the recorded OpenAI Agents fixture (17
//! batches, two traces, children before parents) is sent to the real binary,
//! which is killed at three seeded-random moments while a batch is in flight
//! and restarted; the sender sends the unanswered batch again, as OTLP
//! exporters do. The runs it ends with equal those of a server that got every
//! batch once.

use std::time::Duration;

use serde_json::{json, Value};

use super::plan::Rng;
use super::server::{Server, KEY};
use crate::otlp_api::fixture_bodies;
use crate::support::client_with_key;

async fn send(http: &reqwest::Client, base: &str, body: &[u8]) {
    let reply = http
        .post(format!("{base}/v1/traces"))
        .header("content-type", "application/x-protobuf")
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
}

async fn get(http: &reqwest::Client, url: String) -> Value {
    let reply = http.get(&url).send().await.unwrap();
    assert!(reply.status().is_success(), "GET {url}: {}", reply.status());
    reply.json().await.unwrap()
}

/// Every recorded run with what it shows: its fields derived from spans, steps and transcript.
async fn recorded(http: &reqwest::Client, base: &str) -> Value {
    let page = get(http, format!("{base}/api/runs?all=true")).await;
    let mut runs = Vec::new();
    for run in page["runs"].as_array().unwrap().iter().filter(|r| r["source"]["kind"] == "otlp") {
        let id = run["id"].as_str().unwrap();
        let fields = [
            "id",
            "name",
            "status",
            "model",
            "usage",
            "step_count",
            "source",
            "result",
            "failure_reason",
            "started_at",
            "finished_at",
            "initial_prompt",
        ];
        let picked: serde_json::Map<String, Value> = fields.iter().map(|f| (f.to_string(), run[*f].clone())).collect();
        let steps = get(http, format!("{base}/api/runs/{id}/steps")).await;
        let messages = get(http, format!("{base}/api/runs/{id}/messages")).await;
        runs.push(json!({"run": picked, "steps": steps, "messages": messages}));
    }
    runs.sort_by_key(|r| r["run"]["id"].as_str().unwrap_or_default().to_owned());
    Value::Array(runs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_sent_across_kills_make_the_same_runs_as_spans_sent_once() {
    let bodies = fixture_bodies("openai-agents");
    assert!(bodies.len() >= 10, "the fixture has its batches");
    let dir = tempfile::tempdir().unwrap();
    let http = client_with_key(runlens_engine::net::http_builder().timeout(Duration::from_secs(15)), KEY);

    let ref_db = format!("sqlite://{}", dir.path().join("reference.db").display());
    let mut reference = Server::start(&http, &ref_db, dir.path(), &dir.path().join("reference.log")).await;
    for body in &bodies {
        send(&http, &reference.base, body).await;
    }
    let expected = recorded(&http, &reference.base).await;
    reference.kill();
    assert_eq!(expected.as_array().unwrap().len(), 2, "two traces, two runs: {expected:#}");
    assert!(expected.as_array().unwrap().iter().all(|r| r["run"]["status"] == "done"));

    let seed = super::env_number("RUNLENS_CRASH_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    eprintln!("ingest crash test: seed {seed} (RUNLENS_CRASH_SEED={seed} replays it)");
    let mut rng = Rng::new(seed);
    let mut kills: Vec<usize> = Vec::new();
    while kills.len() < 3 {
        let at = rng.range(1, bodies.len() as u64) as usize;
        if !kills.contains(&at) {
            kills.push(at);
        }
    }
    let db = format!("sqlite://{}", dir.path().join("crash.db").display());
    let log = dir.path().join("crash.log");
    let mut server = Server::start(&http, &db, dir.path(), &log).await;
    for (i, body) in bodies.iter().enumerate() {
        if kills.contains(&i) {
            // The batch is on its way (or stored, or half-way) when the server dies.
            let in_flight = http
                .post(format!("{}/v1/traces", server.base))
                .header("content-type", "application/x-protobuf")
                .body(body.clone())
                .send();
            let in_flight = tokio::spawn(in_flight);
            tokio::time::sleep(Duration::from_millis(rng.range(0, 15))).await;
            server.kill();
            let _ = in_flight.await;
            server = Server::start(&http, &db, dir.path(), &log).await;
        }
        send(&http, &server.base, body).await;
    }
    let got = recorded(&http, &server.base).await;
    assert_eq!(got, expected, "seed {seed}, kills before batches {kills:?}");
}
