//! OpenTelemetry between two real servers: server A, configured with
//! `[otel]`, sends each run it ends to server B's `POST /v1/traces`, and B
//! shows it as a read-only run recorded from spans; `runlens otel-export`
//! sends the same run again and B still has it once.

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use super::server::{Server, KEY};
use crate::support::client_with_key;

/// How many times a condition is polled (50 ms apart) before the test calls it a hang.
const POLLS: u32 = 2400;

async fn get(http: &reqwest::Client, url: String) -> Value {
    let reply = http.get(&url).send().await.unwrap();
    let status = reply.status();
    let text = reply.text().await.unwrap();
    assert!(status.is_success(), "GET {url}: {status}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// B's runs recorded from spans.
async fn recorded(http: &reqwest::Client, base: &str) -> Vec<Value> {
    let page = get(http, format!("{base}/api/runs?all=true")).await;
    page["runs"].as_array().unwrap().iter().filter(|r| r["source"]["kind"] == "otlp").cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_one_server_ends_arrive_on_another_as_read_only_runs() {
    let dir = tempfile::tempdir().unwrap();
    let http = client_with_key(runlens_engine::net::http_builder().timeout(Duration::from_secs(15)), KEY);
    let b_db = format!("sqlite://{}", dir.path().join("b.db").display());
    let mut b = Server::start(&http, &b_db, dir.path(), &dir.path().join("b.log")).await;

    let config = dir.path().join("a.toml");
    std::fs::write(
        &config,
        format!(
            "[otel]\nendpoint = \"{}\"\nheaders = {{ authorization = \"Bearer {KEY}\" }}\n\
             service_name = \"runlens-a\"\ncapture_content = true\n",
            b.base
        ),
    )
    .unwrap();
    let a_db = format!("sqlite://{}", dir.path().join("a.db").display());
    let config_arg = config.display().to_string();
    let mut a =
        Server::start_with(&http, &a_db, dir.path(), &dir.path().join("a.log"), &["--config", &config_arg]).await;

    let create = json!({
        "initial_prompt": "What is six times seven?",
        "model_settings": {"script": [
            {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
            {"text": "It is 42."}
        ]}
    });
    let reply = http.post(format!("{}/api/runs", a.base)).json(&create).send().await.unwrap();
    assert!(reply.status().is_success(), "{}", reply.status());
    let id = reply.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let mut ran = Value::Null;
    for _ in 0..POLLS {
        ran = get(&http, format!("{}/api/runs/{id}", a.base)).await;
        if ran["status"] == "done" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ran["status"], "done", "{ran:#}");

    let mut runs = Vec::new();
    for _ in 0..POLLS {
        runs = recorded(&http, &b.base).await;
        if runs.first().is_some_and(|r| r["status"] == "done" && r["step_count"] == 2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(runs.len(), 1, "{runs:#?}");
    let copy = &runs[0];
    assert_eq!(copy["status"], "done", "{copy:#}");
    assert_eq!(copy["source"]["service"], "runlens-a");
    assert_eq!(copy["step_count"], 2);
    assert_eq!(copy["usage"]["input_tokens"], ran["usage"]["input_tokens"]);
    assert_eq!(copy["usage"]["output_tokens"], ran["usage"]["output_tokens"]);
    let copy_id = copy["id"].as_str().unwrap().to_owned();
    let steps = get(&http, format!("{}/api/runs/{copy_id}/steps", b.base)).await;
    let calls: Vec<&Value> =
        steps["steps"].as_array().unwrap().iter().flat_map(|s| s["tool_calls"].as_array().unwrap()).collect();
    assert_eq!(calls.len(), 1, "{steps:#}");
    assert_eq!(calls[0]["tool_name"], "calculator");
    assert_eq!(calls[0]["arguments"], json!({"expression": "6*7"}));

    // B did not run it: it cannot be continued there.
    let follow =
        http.post(format!("{}/api/runs/{copy_id}/messages", b.base)).json(&json!({"message": "and 7*8?"})).send();
    assert_eq!(follow.await.unwrap().status(), 409);

    // Sent again by the command: the same spans, so still one run on B, unchanged.
    a.kill();
    let out = Command::new(env!("CARGO_BIN_EXE_runlens"))
        .args(["otel-export", "--run", &id, "--database-url", &a_db, "--config", &config_arg])
        .env_remove("RUNLENS_CONFIG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("sent 1 runs (4 spans)"), "{stdout}");
    let again = recorded(&http, &b.base).await;
    assert_eq!(again.len(), 1, "{again:#?}");
    assert_eq!((again[0]["id"].as_str(), &again[0]["step_count"]), (Some(copy_id.as_str()), &json!(2)));

    // And a run B recorded is never sent back out.
    let none = Command::new(env!("CARGO_BIN_EXE_runlens"))
        .args(["otel-export", "--since", "2000-01-01", "--database-url", &b_db, "--config", &config_arg])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&none.stdout).contains("sent 0 runs"), "{:?}", none);
    b.kill();
}
