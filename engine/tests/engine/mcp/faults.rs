//! MCP servers that die mid-run, over stdio (the child process killed) and
//! over streamable HTTP (the server process killed): the call in flight
//! fails with a clear error, calls meanwhile fail at once saying the server
//! is not connected, the supervisor restarts or reconnects it, later calls
//! work, and no run fails because of it.

use std::path::Path;
use std::time::Duration;

use runlens_engine::events::Event;
use runlens_engine::model::{EventKind, McpState, RunStatus, ToolCallStatus};
use runlens_engine::Engine;
use tokio::sync::broadcast;

use super::*;

const LONG: &str = "trigger-long-running-operation";

/// Waits until a call of run `run_id` is announced as running.
async fn wait_running(events: &mut broadcast::Receiver<Event>, run_id: &str) {
    let found = tokio::time::timeout(PATIENCE, async {
        loop {
            match events.recv().await {
                Ok(Event { kind: EventKind::ToolCallUpdated { tool_call }, .. })
                    if tool_call.run_id == run_id && tool_call.status == ToolCallStatus::Running =>
                {
                    return
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => panic!("the event bus closed"),
            }
        }
    });
    found.await.unwrap_or_else(|_| panic!("no call of run {run_id} started"));
}

/// A run whose only call is the server's 10-minute operation, once it runs.
async fn long_call_running(engine: &Engine, server: &str) -> String {
    let mut events = engine.subscribe();
    let tool = format!("{server}__{LONG}");
    let req = ask(&[&tool], &format!("Start {tool} with {{\"duration\": 600, \"steps\": 600}}"));
    let (run, _) = engine.runs().create_run(req).await.unwrap();
    wait_running(&mut events, &run.id).await;
    run.id
}

/// The run ended `done` with its one call failed; the call's error.
async fn failed_call(engine: &Engine, run_id: &str) -> String {
    let run = engine.runs().wait_until_settled(run_id, PATIENCE).await.unwrap();
    assert_eq!(run.status, RunStatus::Done, "a dead server never fails the run: {:?}", run.failure_reason);
    let steps = engine.runs().steps(run_id).await.unwrap();
    let call = &steps[0].tool_calls[0];
    assert_eq!(call.status, ToolCallStatus::Failed, "{call:#?}");
    eprintln!("the call in flight: {}", call.error.as_deref().unwrap_or_default());
    call.error.clone().unwrap()
}

/// An echo through a run: its result text, or its error.
async fn echo(engine: &Engine, server: &str) -> Result<String, String> {
    let tool = format!("{server}__echo");
    let (run, steps) = settle(engine, ask(&[&tool], &format!("{tool} {{\"message\": \"still there?\"}}"))).await;
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    let call = &steps[0].tool_calls[0];
    match call.status {
        ToolCallStatus::Succeeded => Ok(texts(call.result.as_ref().unwrap())),
        _ => Err(call.error.clone().unwrap_or_default()),
    }
}

fn kill_9(pid_file: &Path) {
    let pid = std::fs::read_to_string(pid_file).expect("the server wrote its pid");
    let status = std::process::Command::new("kill").args(["-9", pid.trim()]).status().unwrap();
    assert!(status.success(), "kill -9 {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_killed_mid_run_is_restarted_and_no_run_fails() {
    let files = crate::support::test_db();
    let (pid, block) = (files.path().join("pid"), files.path().join("block"));
    // The command refuses to start while `block` exists, so the test sees
    // the server down for as long as it needs (no race with the restart).
    let script = format!(
        "if [ -e {block} ]; then echo 'blocked by the test' >&2; exit 1; fi; echo $$ > {pid}; exec node {{js}} stdio",
        block = block.display(),
        pid = pid.display()
    );
    let config = format!("[everything]\ncommand = [\"sh\", \"-c\", {script:?}]\ntimeout_secs = 600\n");
    let (engine, _hub, _dir) = mcp_engine(&config).await;
    assert_eq!(echo(&engine, "everything").await.unwrap(), "Echo: still there?");

    let run = long_call_running(&engine, "everything").await;
    std::fs::write(&block, "").unwrap();
    kill_9(&pid);
    let error = failed_call(&engine, &run).await;
    assert!(error.contains("MCP server `everything`"), "the call in flight says what happened: {error}");

    // Down, and a restart already refused: calls fail at once, clearly.
    let down =
        wait_status(&engine, "everything", "down after a restart", |s| s.state == McpState::Down && s.restarts >= 1)
            .await;
    assert!(down.last_error.is_some() && down.retry_at.is_some(), "{down:?}");
    let error = echo(&engine, "everything").await.unwrap_err();
    eprintln!("a call meanwhile: {error}");
    assert!(error.starts_with("MCP server `everything` is not connected (restarting"), "{error}");
    assert!(engine.tools("default").iter().any(|t| t.name == "everything__echo"), "the last listing stays");

    std::fs::remove_file(&block).unwrap();
    let back = wait_status(&engine, "everything", "restarted", |s| s.state == McpState::Ready).await;
    assert!(back.restarts >= 2, "{back:?}");
    assert_eq!(echo(&engine, "everything").await.unwrap(), "Echo: still there?");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_killed_mid_run_is_reconnected_and_no_run_fails() {
    let mut http = HttpEverything::start();
    let (engine, _hub, _dir) = mcp_engine(&format!("[remote]\nurl = \"{}\"\ntimeout_secs = 600\n", http.url())).await;
    assert_eq!(echo(&engine, "remote").await.unwrap(), "Echo: still there?");

    let run = long_call_running(&engine, "remote").await;
    http.kill();
    let error = failed_call(&engine, &run).await;
    assert!(error.contains("MCP server `remote`"), "the call in flight says what happened: {error}");

    let down =
        wait_status(&engine, "remote", "down after a reconnect", |s| s.state == McpState::Down && s.restarts >= 1)
            .await;
    assert!(down.last_error.is_some(), "{down:?}");
    let error = echo(&engine, "remote").await.unwrap_err();
    eprintln!("a call meanwhile: {error}");
    assert!(error.starts_with("MCP server `remote` is not connected (reconnecting"), "{error}");

    let _http = HttpEverything::start_on(http.port);
    let back = wait_status(&engine, "remote", "reconnected", |s| s.state == McpState::Ready).await;
    assert!(back.restarts >= 2, "{back:?}");
    assert_eq!(echo(&engine, "remote").await.unwrap(), "Echo: still there?");
}

/// Waits until the fixture's tool `SERVER__TOOL` (a count) answers `count`.
async fn wait_server_says(engine: &Engine, server: &str, tool: &str, count: u32) {
    let tool = format!("{server}__{tool}");
    for polls in 0u32.. {
        let (_, steps) = settle(engine, ask(&[&tool], &format!("{tool} please"))).await;
        let said = texts(steps[0].tool_calls[0].result.as_ref().unwrap());
        if said == count.to_string() {
            return;
        }
        assert!(polls < crate::mcp::polls_within(PATIENCE, 100), "`{tool}` never said {count}: it says {said}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A call ends with its run's cancel (whether the tool is idempotent or
/// not) and at its time limit, and each time the server is told to stop it
/// (`notifications/cancelled`; the fixture counts the calls it was told to stop).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_end_with_their_run_or_their_time_limit_and_the_server_is_told() {
    let config = [
        paged_server("paged", ""),
        paged_server("strict", "idempotent = false\nrequire_approval = false"),
        paged_server("quick", "timeout_secs = 1"),
    ]
    .concat();
    let (engine, _hub, _dir) = mcp_engine(&config).await;
    assert!(!engine.tools("default").iter().any(|t| t.name == "strict__sleep" && t.idempotent));
    for server in ["paged", "strict"] {
        let mut events = engine.subscribe();
        let tool = format!("{server}__sleep");
        let (run, _) = engine.runs().create_run(ask(&[&tool], &format!("{tool} please"))).await.unwrap();
        wait_running(&mut events, &run.id).await;
        // The server has the call (a cancel before that sends nothing: nothing started).
        wait_server_says(&engine, server, "sleeping", 1).await;
        engine.runs().cancel(&run.id).await.unwrap();
        let run = engine.runs().wait_until_settled(&run.id, PATIENCE).await.unwrap();
        assert_eq!(run.status, RunStatus::Cancelled);
        let steps = engine.runs().steps(&run.id).await.unwrap();
        let call = &steps[0].tool_calls[0];
        assert_eq!(call.status, ToolCallStatus::Cancelled, "{call:#?}");
        wait_server_says(&engine, server, "cancelled", 1).await;
        wait_server_says(&engine, server, "sleeping", 0).await;
    }
    let (run, steps) = settle(&engine, ask(&["quick__sleep"], "quick__sleep please")).await;
    assert_eq!(run.status, RunStatus::Done, "a time limit never fails the run");
    let error = steps[0].tool_calls[0].error.clone().unwrap_or_default();
    assert!(error.starts_with("`sleep` on the MCP server `quick` did not answer within 1 s"), "{error}");
    wait_server_says(&engine, "quick", "cancelled", 1).await;
}
