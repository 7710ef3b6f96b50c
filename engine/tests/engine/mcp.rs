//! MCP servers as tools, against the real reference server
//! `@modelcontextprotocol/server-everything` (npm, installed by
//! scripts/setup.sh into end2end/node_modules) over stdio and over
//! streamable HTTP: listing, calls through runs of the built-in planner,
//! tool errors, images, approval, secrets. Faults (a server killed
//! mid-run) are in `mcp/faults.rs`; a crash of runlens itself with a call in
//! flight is in the API crash tests (`tests/api/crash/mcp.rs`).

mod faults;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use runlens_engine::model::{
    CreateRun, DecisionRequest, McpServerStatus, McpState, MessageBody, ResultType, Run, RunStatus, Step,
    ToolCallStatus,
};
use runlens_engine::tools::mcp::{self, McpHub};
use runlens_engine::Engine;
use serde_json::{json, Value};

use crate::support::*;

/// How long a condition may take before a test gives up (a hang, not a speed).
pub const PATIENCE: Duration = Duration::from_secs(120);

/// How many polls every `every_ms` fit in `patience` (waits bound the number
/// of looks, not the time a loaded machine takes for them).
pub fn polls_within(patience: Duration, every_ms: u64) -> u32 {
    (patience.as_millis() as u64 / every_ms) as u32
}

/// end2end/, whose node_modules hold the MCP servers and SDK the tests run.
pub fn end2end_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../end2end").canonicalize().unwrap()
}

/// The server's entry point; the tests need it installed.
pub fn everything_js() -> String {
    let path = end2end_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        path.is_file(),
        "{} is missing: run scripts/setup.sh --test (npm ci in end2end/ installs @modelcontextprotocol/server-everything)",
        path.display()
    );
    path.canonicalize().unwrap().display().to_string()
}

/// Servers from `[mcp.*]`-style TOML (`{js}` stands for the server's entry point).
pub fn servers(toml_text: &str) -> Vec<mcp::McpServer> {
    let text = toml_text.replace("{js}", &everything_js());
    let sections = toml::from_str(&text).expect("the test's TOML parses");
    mcp::resolve(&sections, |k| std::env::var(k).ok()).expect("the test's sections are valid")
}

/// An engine on a fresh database with the MCP servers of `toml_text`
/// started, once each is connected.
pub async fn mcp_engine(toml_text: &str) -> (Engine, McpHub, crate::support::TestDb) {
    let (engine, dir) = engine().await;
    let servers = servers(toml_text);
    let names: Vec<String> = servers.iter().map(|s| s.name.clone()).collect();
    let hub = engine.start_mcp(servers);
    for name in names {
        wait_status(&engine, &name, "connected", |s| s.state == McpState::Ready).await;
    }
    (engine, hub, dir)
}

/// Waits until server `name`'s status satisfies `ok` (`what` says what for the failure).
pub async fn wait_status(
    engine: &Engine,
    name: &str,
    what: &str,
    ok: impl Fn(&McpServerStatus) -> bool,
) -> McpServerStatus {
    // Counted polls, not a clock: a slow machine gets the same number of looks.
    for polls in 0u32.. {
        let status = engine.mcp_servers().into_iter().find(|s| s.name == name);
        if let Some(status) = status.filter(|s| ok(s)) {
            return status;
        }
        assert!(polls < polls_within(PATIENCE, 50), "MCP server `{name}` never got {what}: {:?}", engine.mcp_servers());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    unreachable!("the polls above end in a return or a failed assertion")
}

/// A run of the built-in planner with `tools` attached.
pub fn ask(tools: &[&str], prompt: &str) -> CreateRun {
    CreateRun {
        initial_prompt: prompt.into(),
        tools: Some(tools.iter().map(|t| t.to_string()).collect()),
        ..CreateRun::default()
    }
}

pub async fn settle(engine: &Engine, req: CreateRun) -> (Run, Vec<Step>) {
    let (run, _) = engine.runs().create_run(req).await.expect("the run is created");
    let run = engine.runs().wait_until_settled(&run.id, PATIENCE).await.expect("the run settles");
    let steps = engine.runs().steps(&run.id).await.unwrap();
    (run, steps)
}

/// The text items of a stored MCP result, joined.
pub fn texts(result: &Value) -> String {
    let items = result["content"].as_array().cloned().unwrap_or_default();
    items.iter().filter_map(|c| c["text"].as_str().map(str::to_owned)).collect::<Vec<_>>().join("\n")
}

/// server-everything over streamable HTTP on a free port, as a child process.
pub struct HttpEverything {
    child: Child,
    pub port: u16,
}

impl HttpEverything {
    pub fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        Self::start_on(port)
    }

    /// Starts it on `port` and waits until the port accepts connections.
    pub fn start_on(port: u16) -> Self {
        let child = Command::new("node")
            .args([everything_js().as_str(), "streamableHttp"])
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("node starts");
        let mut server = Self { child, port };
        let mut polls = 0u32;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!("the HTTP MCP server exited with {status} while starting");
            }
            polls += 1;
            assert!(polls < polls_within(PATIENCE, 50), "the HTTP MCP server never listened on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// SIGKILL, then reaped.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        self.kill();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_listed_over_stdio_and_streamable_http() {
    let http = HttpEverything::start();
    let (engine, _hub, _dir) = mcp_engine(&format!(
        r#"
        [everything]
        command = ["node", "{{js}}", "stdio"]
        [remote]
        url = "{}"
        require_approval = ["get-sum"]
        idempotent = false
        "#,
        http.url()
    ))
    .await;
    let tools = engine.tools("default");
    let tool = |name: &str| tools.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no {name} in {tools:#?}"));
    for server in ["everything", "remote"] {
        let echo = tool(&format!("{server}__echo"));
        assert_eq!(echo.source, format!("mcp:{server}"));
        assert_eq!(echo.description, "Echoes back the input string");
        assert_eq!(echo.schema["properties"]["message"]["type"], "string", "{}", echo.schema);
        assert_eq!(echo.schema["required"], json!(["message"]));
        let sum = tool(&format!("{server}__get-sum"));
        assert_eq!(sum.schema["properties"]["a"]["type"], "number");
        let status = engine.mcp_servers().into_iter().find(|s| s.name == server).unwrap();
        let listed = tools.iter().filter(|t| t.source == echo.source).count();
        assert_eq!(status.tools as usize, listed, "{status:?}");
        assert!(listed >= 10, "server-everything has a dozen tools: {listed}");
        assert!(status.connected_at.is_some() && status.last_error.is_none() && status.restarts == 0, "{status:?}");
        assert_eq!(status.transport, if server == "remote" { "http" } else { "stdio" });
    }
    // Annotations decide by default: read-only tools need no approval and
    // may run again after a crash; `toggle-simulated-logging` is neither.
    let echo = tool("everything__echo");
    assert!(!echo.requires_approval && echo.idempotent);
    let toggle = tool("everything__toggle-simulated-logging");
    assert!(toggle.requires_approval && !toggle.idempotent);
    // `gzip-file-as-resource` writes (needs approval) but is idempotent.
    let gzip = tool("everything__gzip-file-as-resource");
    assert!(gzip.requires_approval && gzip.idempotent);
    // The config overrides them: a list names exactly the tools that need approval.
    assert!(tool("remote__get-sum").requires_approval && !tool("remote__echo").requires_approval);
    assert!(!tool("remote__toggle-simulated-logging").requires_approval);
    assert!(!tool("remote__echo").idempotent && !tool("remote__get-sum").idempotent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_and_get_sum_run_through_the_built_in_planner() {
    let http = HttpEverything::start();
    let (engine, _hub, _dir) = mcp_engine(&format!(
        "[everything]\ncommand = [\"node\", \"{{js}}\", \"stdio\"]\n[remote]\nurl = \"{}\"\n",
        http.url()
    ))
    .await;
    for server in ["everything", "remote"] {
        let (echo, sum) = (format!("{server}__echo"), format!("{server}__get-sum"));
        let prompt =
            format!("Please call {echo} and {sum} with {{\"message\": \"hello from runlens\", \"a\": 2, \"b\": 3}}");
        let (run, steps) = settle(&engine, ask(&[&echo, &sum], &prompt)).await;
        assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
        let calls = &steps[0].tool_calls;
        assert_eq!(calls.len(), 2, "{calls:#?}");
        for call in calls {
            assert_eq!(call.status, ToolCallStatus::Succeeded, "{call:#?}");
        }
        let by_name = |n: &str| calls.iter().find(|c| c.tool_name == n).unwrap().result.clone().unwrap();
        assert_eq!(by_name(&echo), json!({"content": [{"type": "text", "text": "Echo: hello from runlens"}]}));
        assert_eq!(texts(&by_name(&sum)), "The sum of 2 and 3 is 5.");
        // The model read both results and answered with them.
        let answer = steps.last().unwrap().response.text().unwrap_or_default();
        assert!(answer.contains("Echo: hello from runlens") && answer.contains("is 5."), "{answer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_result_reaches_the_model_as_a_tool_error() {
    let (engine, _hub, _dir) = mcp_engine("[everything]\ncommand = [\"node\", \"{js}\", \"stdio\"]").await;
    let tool = "everything__get-resource-reference";
    // Valid for the schema (a number), refused by the tool: `isError: true`.
    let (run, steps) = settle(&engine, ask(&[tool], &format!("Use {tool} with {{\"resourceId\": 0}}"))).await;
    assert_eq!(run.status, RunStatus::Done, "a tool error never fails the run: {:?}", run.failure_reason);
    let call = &steps[0].tool_calls[0];
    assert_eq!(call.status, ToolCallStatus::Failed, "{call:#?}");
    let error = call.error.as_deref().unwrap();
    assert!(error.contains("Invalid resourceId: 0"), "{error}");
    let messages = engine.runs().messages(&run.id).await.unwrap();
    let rejection = messages.iter().find_map(|m| match &m.body {
        MessageBody::InvocationResult { result_type: ResultType::Rejection, result, .. } => Some(result.clone()),
        _ => None,
    });
    assert_eq!(rejection.unwrap()["error"], error, "the model was told the tool's own words");
    // The same tool with a valid id returns an embedded resource.
    let (_, steps) = settle(&engine, ask(&[tool], &format!("Use {tool} with {{\"resourceId\": 2}}"))).await;
    let result = steps[0].tool_calls[0].result.clone().unwrap();
    let resource = result["content"].as_array().unwrap().iter().find(|c| c["type"] == "resource").cloned();
    let resource = resource.unwrap_or_else(|| panic!("no resource in {result}"));
    assert!(resource["uri"].as_str().unwrap().contains('2') && resource["text"].is_string(), "{resource}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_is_stored_with_its_data_and_the_model_reads_a_placeholder() {
    let (engine, _hub, _dir) = mcp_engine("[everything]\ncommand = [\"node\", \"{js}\", \"stdio\"]").await;
    let tool = "everything__get-tiny-image";
    let (run, steps) = settle(&engine, ask(&[tool], &format!("Show me {tool}"))).await;
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    let result = steps[0].tool_calls[0].result.clone().unwrap();
    let image = &result["content"][1];
    assert_eq!((image["type"].as_str(), image["mime_type"].as_str()), (Some("image"), Some("image/png")), "{result}");
    let data = image["data"].as_str().unwrap();
    assert!(data.starts_with("iVBORw0KGgo") && data.len() > 1000, "the PNG's base64, whole: {} chars", data.len());
    assert_eq!(result["content"][0]["text"], "Here's the image you requested:");
    // The trace (steps, as read back) keeps the data; the model's copy does not.
    let messages = engine.runs().messages(&run.id).await.unwrap();
    let seen = messages.iter().find_map(|m| match &m.body {
        MessageBody::InvocationResult { result, .. } => Some(result.clone()),
        _ => None,
    });
    let seen = seen.unwrap();
    let placeholder = seen["content"][1]["text"].as_str().unwrap_or_default();
    assert!(placeholder.starts_with("[image image/png, ") && placeholder.ends_with(" bytes]"), "{seen}");
    assert!(!seen.to_string().contains("iVBORw0KGgo"), "no base64 in the model's context");
}

/// An image over the size at which a result is kept out of the transcript
/// (500 kB) stays whole in the call (the model reads a placeholder, so the
/// result is small for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_image_stays_whole_in_the_trace() {
    let (engine, _hub, _dir) = mcp_engine(&paged_server("paged", "")).await;
    let (run, steps) = settle(&engine, ask(&["paged__big-image"], "paged__big-image please")).await;
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    let result = steps[0].tool_calls[0].result.clone().unwrap();
    assert!(runlens_engine::model::KeptOut::of(&result).is_none(), "not kept out: {}", &result.to_string()[..300]);
    assert_eq!(result["content"][1]["data"].as_str().map(str::len), Some(800_000));
    let messages = engine.runs().messages(&run.id).await.unwrap();
    let seen = messages.iter().find_map(|m| match &m.body {
        MessageBody::InvocationResult { result, .. } => Some(result.clone()),
        _ => None,
    });
    assert_eq!(seen.unwrap()["content"][1]["text"], "[image image/png, 600000 bytes]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_is_not_read_only_waits_for_approval_and_runs_once() {
    let (engine, _hub, _dir) = mcp_engine("[everything]\ncommand = [\"node\", \"{js}\", \"stdio\"]").await;
    let tool = "everything__toggle-subscriber-updates";
    let (run, _) = engine.runs().create_run(ask(&[tool], &format!("Please {tool}"))).await.unwrap();
    let paused = engine.runs().wait_until_settled(&run.id, PATIENCE).await.unwrap();
    assert_eq!(paused.status, RunStatus::Paused, "{:?}", paused.failure_reason);
    let pending = &paused.interruptions[0];
    assert_eq!(pending.tool_name, tool);
    engine
        .approvals()
        .approve(&run.id, &pending.call_id, DecisionRequest::default(), &crate::support::approver(&engine, "web").await)
        .await
        .unwrap();
    let done = engine.runs().wait_until_settled(&run.id, PATIENCE).await.unwrap();
    assert_eq!(done.status, RunStatus::Done, "{:?}", done.failure_reason);
    let steps = engine.runs().steps(&run.id).await.unwrap();
    let calls: Vec<_> = steps.iter().flat_map(|s| &s.tool_calls).collect();
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert_eq!(calls[0].status, ToolCallStatus::Succeeded);
    // A second call would have toggled the updates off again.
    let text = texts(calls[0].result.as_ref().unwrap());
    assert!(text.starts_with("Started simulated resource updated notifications"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_stay_out_of_results_and_servers_do_not_get_runlens_s_environment() {
    std::env::set_var("RUNLENS_TEST_MCP_SECRET", "mcp-secret-0123456789");
    let (engine, _hub, _dir) = mcp_engine(
        "[everything]\ncommand = [\"node\", \"{js}\", \"stdio\"]\nenv = { API_TOKEN = \"$RUNLENS_TEST_MCP_SECRET\" }",
    )
    .await;
    let tool = "everything__get-env";
    let (_, steps) = settle(&engine, ask(&[tool], &format!("Run {tool}"))).await;
    let text = texts(steps[0].tool_calls[0].result.as_ref().unwrap());
    assert!(text.contains("API_TOKEN") && text.contains("[redacted]"), "the server got it: {text}");
    assert!(!text.contains("mcp-secret-0123456789"), "{text}");
    assert!(!text.contains("RUNLENS_TEST_MCP_SECRET") && !text.contains("CARGO"), "only its own env: {text}");
}

/// A `[NAME]` section running `mcp/paged_server.cjs`, with `more` lines.
pub fn paged_server(name: &str, more: &str) -> String {
    everything_js(); // the SDK is installed with it
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/engine/mcp/paged_server.cjs");
    format!("[{name}]\ncommand = [\"node\", \"{fixture}\", \"{}\"]\n{more}\n", end2end_dir().display())
}

/// What server-everything does not do, with a server made with the official
/// SDK (`mcp/paged_server.cjs`): tools listed over several pages, and a list
/// that changes while connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_is_listed_and_a_changed_list_is_read_again() {
    let (engine, _hub, _dir) = mcp_engine(&paged_server("paged", "")).await;
    let listed = |engine: &Engine| -> Vec<String> {
        engine.tools("default").into_iter().filter(|t| t.source == "mcp:paged").map(|t| t.name).collect()
    };
    assert_eq!(
        listed(&engine),
        [
            "paged__big-image",
            "paged__cancelled",
            "paged__grow",
            "paged__page-1-a",
            "paged__page-1-b",
            "paged__page-2-a",
            "paged__page-2-b",
            "paged__sleep",
            "paged__sleeping"
        ],
        "all five pages"
    );
    let (run, steps) = settle(&engine, ask(&["paged__grow"], "Please paged__grow")).await;
    assert_eq!(run.status, RunStatus::Done);
    assert_eq!(texts(steps[0].tool_calls[0].result.as_ref().unwrap()), "added grown-1");
    // The server announced the change; the supervisor lists again.
    let status = wait_status(&engine, "paged", "its new tool listed", |s| s.tools == 10).await;
    assert_eq!(status.restarts, 0, "listed again on the same connection");
    assert!(listed(&engine).contains(&"paged__grown-1".to_owned()), "{:?}", listed(&engine));
    let (_, steps) = settle(&engine, ask(&["paged__grown-1"], "Now paged__grown-1 please")).await;
    assert_eq!(texts(steps[0].tool_calls[0].result.as_ref().unwrap()), "grown-1 answers");
}
