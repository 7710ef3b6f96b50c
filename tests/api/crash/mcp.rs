//! Kill -9 of the real binary with MCP calls in flight, against the real
//! server-everything over stdio (configured in a `--config` file): on
//! recovery, the call of a tool that is not idempotent is reported to the
//! model as interrupted and never run again; the call of a tool annotated
//! idempotent runs again. Both runs finish `done`.
//!
//! Both servers run the same program; its slow tool
//! `trigger-long-running-operation` is annotated read-only and idempotent,
//! and the section `[mcp.strict]` says `idempotent = false` (the operator's
//! override of the annotations), which makes the same real tool one with
//! side effects as far as runlens is concerned. server-everything has no
//! slow tool annotated non-idempotent that a client without sampling or
//! elicitation can call.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::server::{Server, KEY};
use crate::support::client_with_key;

const LONG: &str = "trigger-long-running-operation";
/// How long a condition may take before the test gives up (a hang, not a speed).
const PATIENCE: Duration = Duration::from_secs(180);

fn everything_js() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("end2end/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(path.is_file(), "{} is missing: run scripts/setup.sh --test", path.display());
    path.display().to_string()
}

async fn get(http: &reqwest::Client, url: &str) -> Option<Value> {
    let resp = http.get(url).send().await.ok()?;
    resp.status().is_success().then_some(())?;
    resp.json().await.ok()
}

/// Polls `probe` until it gives a value (every 100 ms, within [`PATIENCE`]).
async fn until<T, F: std::future::Future<Output = Option<T>>>(what: &str, log: &Server, probe: impl Fn() -> F) -> T {
    for polls in 0u64.. {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            polls < PATIENCE.as_millis() as u64 / 100,
            "{what} never happened; the end of the server log:\n{}",
            log.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    unreachable!("the polls above end in a return or a failed assertion")
}

/// The first tool call of run `id` as stored.
async fn first_call(http: &reqwest::Client, base: &str, id: &str) -> Option<Value> {
    let steps = get(http, &format!("{base}/api/runs/{id}/steps")).await?;
    steps["steps"].get(0)?["tool_calls"].get(0).cloned()
}

/// Whether run `id`'s event stream (replayed from its start) has shown a
/// call running: what an idempotent call is (it is not stored as running).
async fn streamed_running(http: &reqwest::Client, base: &str, id: &str) -> bool {
    let Ok(mut resp) = http.get(format!("{base}/api/runs/{id}/events")).send().await else { return false };
    let mut text = String::new();
    let read = async {
        while let Ok(Some(chunk)) = resp.chunk().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
            let running = text.lines().any(|l| {
                l.starts_with("data:") && l.contains("\"tool_call.updated\"") && l.contains("\"status\":\"running\"")
            });
            if running {
                return true;
            }
        }
        false
    };
    tokio::time::timeout(Duration::from_secs(5), read).await.unwrap_or(false)
}

/// Kills every server process the test's runlens started (their pids are
/// in `pids`), when the test ends either way: a server whose runlens was
/// killed mid-call would otherwise finish its operation alone.
struct Reaper(PathBuf);

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in std::fs::read_to_string(&self.0).unwrap_or_default().split_whitespace() {
            let _ = std::process::Command::new("kill").args(["-9", pid]).stderr(std::process::Stdio::null()).status();
        }
    }
}

fn time(call: &Value, key: &str) -> DateTime<Utc> {
    let at = call[key].as_str().unwrap_or_else(|| panic!("no {key} in {call:#}"));
    DateTime::parse_from_rfc3339(at).unwrap().with_timezone(&Utc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_with_mcp_calls_in_flight_reruns_only_idempotent_tools() {
    let dir = tempfile::tempdir().unwrap();
    let db_url = format!("sqlite://{}", dir.path().join("mcp.db").display());
    let log = dir.path().join("server.log");
    let config = dir.path().join("runlens.toml");
    let pids = dir.path().join("pids");
    let _reaper = Reaper(pids.clone());
    let command = format!("echo $$ >> {}; exec node {} stdio", pids.display(), everything_js());
    std::fs::write(
        &config,
        format!(
            "[mcp.everything]\ncommand = [\"sh\", \"-c\", {command:?}]\n\n\
             [mcp.strict]\ncommand = [\"sh\", \"-c\", {command:?}]\nidempotent = false\nrequire_approval = false\n"
        ),
    )
    .unwrap();
    let args = ["--config", config.to_str().unwrap()];
    let http = client_with_key(runlens_engine::net::http_builder().timeout(Duration::from_secs(15)), KEY);
    let mut server = Server::start_with(&http, &db_url, dir.path(), &log, &args).await;
    let base = server.base.clone();
    let (strict, retried) = (format!("strict__{LONG}"), format!("everything__{LONG}"));
    let tools = until("both servers' tools listed", &server, || async {
        let tools = get(&http, &format!("{base}/api/tools")).await?;
        let tools = tools["tools"].as_array()?.clone();
        let find = |name: &str| tools.iter().find(|t| t["name"] == name).cloned();
        Some((find(&strict)?, find(&retried)?))
    })
    .await;
    assert_eq!((tools.0["idempotent"].as_bool(), tools.1["idempotent"].as_bool()), (Some(false), Some(true)));

    // A two-minute call of the tool with side effects (stored as running
    // before it starts) and a twenty-second one of the idempotent tool.
    let run = |id: &str, tool: &str, duration: u32| {
        let prompt = format!("Start {tool} with {{\"duration\": {duration}, \"steps\": {duration}}}");
        json!({"id": id, "initial_prompt": prompt, "tools": [tool]})
    };
    for body in [run("mcp-strict", &strict, 120), run("mcp-retried", &retried, 20)] {
        let resp = http.post(format!("{base}/api/runs")).json(&body).send().await.unwrap();
        assert!(resp.status().is_success(), "{}: {}", resp.status(), resp.text().await.unwrap_or_default());
    }
    until("the strict call stored as running", &server, || async {
        let call = first_call(&http, &base, "mcp-strict").await?;
        (call["status"] == "running").then_some(())
    })
    .await;
    until("the idempotent call running", &server, || async {
        streamed_running(&http, &base, "mcp-retried").await.then_some(())
    })
    .await;
    server.kill();
    let killed_at = Utc::now();

    server = Server::start_with(&http, &db_url, dir.path(), &log, &args).await;
    let base = server.base.clone();
    for id in ["mcp-strict", "mcp-retried"] {
        let run = until(&format!("run {id} settled"), &server, || async {
            let run = get(&http, &format!("{base}/api/runs/{id}")).await?;
            matches!(run["status"].as_str(), Some("done" | "failed" | "cancelled")).then_some(run)
        })
        .await;
        assert_eq!(run["status"], "done", "run {id}: {run:#}\n{}", server.log_tail());
    }

    let call = first_call(&http, &base, "mcp-strict").await.unwrap();
    assert_eq!(call["status"], "failed", "{call:#}");
    let error = call["error"].as_str().unwrap();
    assert!(
        error.contains("interrupted by a server restart") && error.contains("not run again") && error.contains(&strict),
        "the model is told it was interrupted: {error}"
    );
    assert!(time(&call, "started_at") < killed_at, "started once, before the kill, never again: {call:#}");
    let steps = get(&http, &format!("{base}/api/runs/mcp-strict/steps")).await.unwrap();
    let calls: usize =
        steps["steps"].as_array().unwrap().iter().map(|s| s["tool_calls"].as_array().unwrap().len()).sum();
    assert_eq!(calls, 1, "the call was not made again: {steps:#}");

    let call = first_call(&http, &base, "mcp-retried").await.unwrap();
    assert_eq!(call["status"], "succeeded", "the idempotent call ran again: {call:#}");
    assert!(time(&call, "started_at") > killed_at, "its run is the one after the restart: {call:#}");
    let text = call["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("Long running operation completed. Duration: 20 seconds"), "{call:#}");
    eprintln!("MCP crash test: the non-idempotent call was reported interrupted, the idempotent one ran again");
}

/// A mistake in an `[mcp.NAME]` section stops the real binary before it
/// serves, with exit code 2 and the section named (never a secret).
#[test]
fn an_invalid_mcp_section_stops_the_start_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[mcp.remote]\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = { Authorization = \"Bearer ${RUNLENS_TEST_UNSET_MCP_TOKEN}\" }\n",
            "[mcp.remote]: headers.Authorization names the environment variable `RUNLENS_TEST_UNSET_MCP_TOKEN`, which is not set",
        ),
        ("[mcp.both]\ncommand = [\"node\"]\nurl = \"http://127.0.0.1:9/mcp\"\n", "[mcp.both] has both `command` and `url`"),
        ("[mcp.a__b]\ncommand = [\"node\"]\n", "[mcp.a__b]: a server name must not contain `__`"),
    ];
    for (i, (section, expected)) in cases.into_iter().enumerate() {
        let config = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&config, section).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_runlens"))
            .args(["serve", "--addr", "127.0.0.1:0", "--config", config.to_str().unwrap()])
            .args(["--database-url", &format!("sqlite://{}", dir.path().join("never.db").display())])
            .env_remove("RUNLENS_TEST_UNSET_MCP_TOKEN")
            .env_remove("RUNLENS_CONFIG")
            .output()
            .expect("the binary runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{section}: {stderr}");
        assert!(stderr.contains(expected), "{section}: {stderr}");
    }
}
