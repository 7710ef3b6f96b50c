//! HTTP tools against a real receiver (`receiver.rs`, on 127.0.0.1, which
//! the engine may reach only with `allow_private_networks`): runs of the
//! built-in planner call them, the receiver checks the signature, and every
//! failure (a non-2xx answer, a timeout, a wrong secret, a deleted tool, a
//! private address) is a tool error the model reads while the run goes on.

use std::collections::BTreeMap;
use std::sync::Arc;

use runlens_engine::llm::ModelRegistry;
use runlens_engine::model::{
    CreateRun, HttpToolSpec, NewHttpTool, RunStatus, ToolCall, ToolCallStatus, DEFAULT_PROJECT,
};
use runlens_engine::tools::ToolRegistry;
use runlens_engine::{Engine, EngineConfig, EngineError};
use serde_json::{json, Value};

use crate::receiver::Receiver;
use crate::support::{by, db_url, run_to_end, wait_for_status};

async fn engine_at(url: &str, allow_private: bool) -> Engine {
    let store = crate::support::open_store(url).await;
    let config = EngineConfig { allow_private_networks: allow_private, ..EngineConfig::default() };
    Engine::with_parts(store, ToolRegistry::with_builtins(), ModelRegistry::with_builtin(), config)
}

fn tool(name: &str, url: String, idempotent: bool) -> NewHttpTool {
    NewHttpTool {
        name: name.into(),
        description: format!("The test receiver's {name}"),
        schema: json!({"type": "object", "properties": {"id": {"type": "string"}}}),
        url,
        idempotent,
        requires_approval: Some(false),
        ..NewHttpTool::default()
    }
}

/// A run of the built-in planner whose prompt names `tools` (it calls each,
/// with the JSON object of the prompt as arguments).
fn calling(tools: &[&str], args: Value) -> CreateRun {
    CreateRun {
        initial_prompt: format!("Please call {} with {args}", tools.join(" and ")),
        tools: Some(tools.iter().map(|t| t.to_string()).collect()),
        context: Some(json!({"tenant": "acme"})),
        ..CreateRun::default()
    }
}

async fn calls(engine: &Engine, run_id: &str) -> BTreeMap<String, ToolCall> {
    let steps = engine.runs().steps(run_id).await.unwrap();
    steps.into_iter().flat_map(|s| s.tool_calls).map(|c| (c.tool_name.clone(), c)).collect()
}

#[tokio::test]
async fn a_signed_call_reaches_the_receiver_and_its_json_is_the_result() {
    let dir = crate::support::test_db();
    let engine = engine_at(&db_url(&dir), true).await;
    let rx = Receiver::start().await;
    let mut new = tool("lookup_order", rx.url("/order"), true);
    new.headers = Some([("Authorization".to_owned(), "Bearer token-123".to_owned())].into());
    let made = engine.http_tools().create_http_tool(DEFAULT_PROJECT, new, &by("admin")).await.unwrap();
    assert!(made.secret.starts_with("whsec_"), "the secret is shown once, at registration");
    assert_eq!(made.tool.header_names, ["Authorization"]);
    let info = engine.tools(DEFAULT_PROJECT).into_iter().find(|t| t.name == "lookup_order").unwrap();
    assert_eq!((info.source.as_str(), info.idempotent, info.requires_approval), ("http", true, false));
    rx.trust(&made.secret);

    let run = run_to_end(&engine, calling(&["lookup_order"], json!({"id": "A-1"}))).await;
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    let call = &calls(&engine, &run.id).await["lookup_order"];
    assert_eq!(call.status, ToolCallStatus::Succeeded, "{:?}", call.error);
    assert_eq!(call.result, Some(json!({"order": "A-1", "status": "shipped"})));
    let seen = rx.seen();
    assert_eq!(seen.len(), 1);
    let got = &seen[0];
    assert_eq!(got.verified, Ok(()));
    assert_eq!(
        got.body,
        json!({"run_id": run.id, "call_id": call.id, "tool": "lookup_order", "arguments": {"id": "A-1"},
               "context": {"tenant": "acme"}})
    );
    let header = |name: &str| got.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    assert_eq!(header("authorization"), "Bearer token-123");
    assert_eq!(header("content-type"), "application/json");
    assert_eq!(header("runlens-idempotency-key"), format!("{}:{}", run.id, call.id));
    assert_eq!(header("runlens-attempt"), "1");

    // A new secret: the receiver, still trusting the old one, refuses the
    // call, and the model reads the receiver's answer; the run goes on.
    let rotated =
        engine.http_tools().rotate_http_tool_secret(DEFAULT_PROJECT, "lookup_order", &by("admin")).await.unwrap();
    assert_ne!(rotated.secret, made.secret);
    let run = run_to_end(&engine, calling(&["lookup_order"], json!({"id": "A-2"}))).await;
    assert_eq!(run.status, RunStatus::Done);
    let call = &calls(&engine, &run.id).await["lookup_order"];
    assert_eq!(call.status, ToolCallStatus::Failed);
    let error = call.error.clone().unwrap();
    assert!(error.contains("answered HTTP 401 Unauthorized") && error.contains("bad signature"), "{error}");
    assert_eq!(rx.seen().last().unwrap().verified, Err("bad signature".into()));
    rx.trust(&rotated.secret);
    let run = run_to_end(&engine, calling(&["lookup_order"], json!({"id": "A-3"}))).await;
    assert_eq!(calls(&engine, &run.id).await["lookup_order"].status, ToolCallStatus::Succeeded);
}

#[tokio::test]
async fn failures_are_tool_errors_for_the_model_and_the_run_goes_on() {
    let dir = crate::support::test_db();
    let engine = engine_at(&db_url(&dir), true).await;
    let rx = Receiver::start().await;
    let mut slow = tool("slow_lookup", rx.url("/slow"), true);
    slow.timeout_ms = Some(300);
    for new in [
        tool("broken", rx.url("/status/500"), false),
        tool("missing", rx.url("/status/404"), true),
        slow,
        tool("wordy", rx.url("/text"), true),
        tool("moved", rx.url("/redirect"), true),
    ] {
        engine.http_tools().create_http_tool(DEFAULT_PROJECT, new, &by("admin")).await.unwrap();
    }
    let names = ["broken", "missing", "slow_lookup", "wordy", "moved"];
    let run = run_to_end(&engine, calling(&names, json!({"id": "B-1"}))).await;
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    let calls = calls(&engine, &run.id).await;
    let error = |name: &str| {
        assert_eq!(calls[name].status, ToolCallStatus::Failed, "{name}: {:?}", calls[name].result);
        calls[name].error.clone().unwrap()
    };
    assert_eq!(error("broken"), "`broken` answered HTTP 500 Internal Server Error: boom 500");
    assert_eq!(error("missing"), "`missing` answered HTTP 404 Not Found: boom 404", "a 4xx is not retried");
    assert_eq!(error("slow_lookup"), "`slow_lookup` did not answer within 300 ms");
    assert!(error("moved").contains("answered HTTP 302 Found (redirects are not followed)"), "{}", error("moved"));
    assert_eq!(calls["wordy"].result, Some(json!("plain words")), "a text answer is a string result");
    let seen = rx.seen();
    let count = |path: &str| seen.iter().filter(|s| s.path == path).count();
    assert_eq!((count("/status/500"), count("/status/404"), count("/redirect")), (1, 1, 1));
    // The model read each error: the planner's answer quotes them.
    let messages = engine.runs().messages(&run.id).await.unwrap();
    let rejections = messages
        .iter()
        .filter(|m| {
            matches!(&m.body, runlens_engine::model::MessageBody::InvocationResult { result_type, .. }
            if *result_type == runlens_engine::model::ResultType::Rejection)
        })
        .count();
    assert_eq!(rejections, 4);
}

#[tokio::test]
async fn only_idempotent_tools_are_retried() {
    let dir = crate::support::test_db();
    let engine = engine_at(&db_url(&dir), true).await;
    let rx = Receiver::start().await;
    engine
        .http_tools()
        .create_http_tool(DEFAULT_PROJECT, tool("fetch_quote", rx.url("/flaky/a"), true), &by("admin"))
        .await
        .unwrap();
    engine
        .http_tools()
        .create_http_tool(DEFAULT_PROJECT, tool("place_order", rx.url("/flaky/b"), false), &by("admin"))
        .await
        .unwrap();
    let run = run_to_end(&engine, calling(&["fetch_quote", "place_order"], json!({"id": "C-1"}))).await;
    assert_eq!(run.status, RunStatus::Done);
    let calls = calls(&engine, &run.id).await;
    let quote = &calls["fetch_quote"];
    assert_eq!(quote.status, ToolCallStatus::Succeeded, "{:?}", quote.error);
    assert_eq!(quote.result, Some(json!({"ok": true, "attempt": 3})), "the third attempt gets it");
    let order = &calls["place_order"];
    assert_eq!(order.error.as_deref(), Some("`place_order` answered HTTP 503 Service Unavailable: try again later"));
    let seen = rx.seen();
    let attempts: Vec<(String, String)> = seen
        .iter()
        .filter(|s| s.path == "/flaky/a")
        .map(|s| {
            let h = |n: &str| s.headers[n].to_str().unwrap().to_owned();
            (h("runlens-idempotency-key"), h("runlens-attempt"))
        })
        .collect();
    let key = format!("{}:{}", run.id, quote.id);
    assert_eq!(attempts, [(key.clone(), "1".into()), (key.clone(), "2".into()), (key, "3".into())]);
    assert_eq!(seen.iter().filter(|s| s.path == "/flaky/b").count(), 1, "a tool with effects is called once");
}

/// A name this machine resolves to loopback or private addresses only
/// (its own host name, as /etc/hosts says).
async fn private_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_owned();
    for name in [host.as_str(), "localhost.localdomain", "ip6-localhost", "ip6-loopback"] {
        let Ok(addrs) = tokio::net::lookup_host((name, 80)).await else { continue };
        let addrs: Vec<_> = addrs.collect();
        if !name.is_empty() && !addrs.is_empty() && addrs.iter().all(|a| !runlens_engine::net::is_public(a.ip())) {
            return name.to_owned();
        }
    }
    panic!("this test needs a host name that resolves to loopback or private addresses only");
}

#[tokio::test]
async fn private_addresses_are_refused_unless_the_operator_allows_them() {
    let dir = crate::support::test_db();
    let rx = Receiver::start().await;
    let strict = engine_at(&db_url(&dir), false).await;
    for url in [rx.url("/order"), "http://localhost:9/x".into(), "http://[::1]/".into(), "http://10.0.0.8/".into()] {
        let err = strict
            .http_tools()
            .create_http_tool(DEFAULT_PROJECT, tool("lookup", url, true), &by("a"))
            .await
            .unwrap_err();
        let EngineError::Invalid(message) = err else { panic!("{err:?}") };
        assert!(message.starts_with("url: ") && message.contains("allow_private_networks"), "{message}");
    }
    // A name is checked when it is resolved, at call time.
    let url = format!("http://{}:9/order", private_name().await);
    strict.http_tools().create_http_tool(DEFAULT_PROJECT, tool("lookup", url, true), &by("a")).await.unwrap();
    let run = run_to_end(&strict, calling(&["lookup"], json!({"id": "D-1"}))).await;
    assert_eq!(run.status, RunStatus::Done);
    let error = calls(&strict, &run.id).await["lookup"].error.clone().unwrap();
    assert!(error.contains("resolves to a loopback, private or link-local address"), "{error}");

    // Registered while allowed, then the operator no longer allows it:
    // after a restart the tool is loaded, and its calls are refused.
    let dir = crate::support::test_db();
    let open = engine_at(&db_url(&dir), true).await;
    open.http_tools()
        .create_http_tool(DEFAULT_PROJECT, tool("lookup_order", rx.url("/order"), true), &by("a"))
        .await
        .unwrap();
    drop(open);
    let strict = engine_at(&db_url(&dir), false).await;
    strict.recover().await.unwrap();
    assert!(strict.tools(DEFAULT_PROJECT).iter().any(|t| t.name == "lookup_order"), "loaded at start");
    let run = run_to_end(&strict, calling(&["lookup_order"], json!({"id": "D-2"}))).await;
    let error = calls(&strict, &run.id).await["lookup_order"].error.clone().unwrap();
    assert!(error.starts_with("`lookup_order` was not called: ") && error.contains("loopback"), "{error}");
    assert!(rx.seen().is_empty(), "nothing reached the receiver");
}

#[tokio::test]
async fn tools_are_edited_and_deleted_live_and_a_run_that_attached_one_gets_unknown_tool() {
    let dir = crate::support::test_db();
    let engine = engine_at(&db_url(&dir), true).await;
    let rx = Receiver::start().await;
    let mut new = tool("lookup_order", rx.url("/status/500"), false);
    new.requires_approval = None;
    new.headers = Some([("X-Api-Key".to_owned(), "k-1".to_owned())].into());
    let made = engine.http_tools().create_http_tool(DEFAULT_PROJECT, new, &by("admin")).await.unwrap();
    assert!(made.tool.requires_approval, "a tool with effects needs approval unless it says otherwise");
    rx.trust(&made.secret);
    // Edited: a new URL, headers kept (absent), the secret kept.
    let spec = HttpToolSpec {
        description: "Looks an order up".into(),
        schema: json!({"type": "object", "properties": {"id": {"type": "string"}}}),
        url: rx.url("/order"),
        requires_approval: Some(true),
        ..HttpToolSpec::default()
    };
    let edited =
        engine.http_tools().update_http_tool(DEFAULT_PROJECT, "lookup_order", spec, &by("admin")).await.unwrap();
    assert_eq!(
        (edited.header_names.clone(), edited.secret_created_at),
        (vec!["X-Api-Key".to_owned()], made.tool.secret_created_at)
    );
    let run = run_to_end(&engine, calling(&["lookup_order"], json!({"id": "E-1"}))).await;
    assert_eq!(run.status, RunStatus::Paused, "the call waits for a person");
    let run = crate::support::approve_first(&engine, &run, "boss").await;
    assert_eq!(
        calls(&engine, &run.id).await["lookup_order"].result,
        Some(json!({"order": "E-1", "status": "shipped"}))
    );
    assert_eq!(rx.seen().last().unwrap().headers["x-api-key"], "k-1", "the kept header is still sent");

    // Deleted while a run waits to call it: the call is an unknown tool.
    let run = engine.runs().create_run(calling(&["lookup_order"], json!({"id": "E-2"}))).await.unwrap().0;
    let run = wait_for_status(&engine, &run.id, RunStatus::Paused).await;
    engine.http_tools().delete_http_tool(DEFAULT_PROJECT, "lookup_order", &by("admin")).await.unwrap();
    assert!(!engine.tools(DEFAULT_PROJECT).iter().any(|t| t.name == "lookup_order"));
    let run = crate::support::approve_first(&engine, &run, "boss").await;
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    let call = &calls(&engine, &run.id).await["lookup_order"];
    assert_eq!(call.error.as_deref(), Some("unknown tool `lookup_order`"));
    assert_eq!(rx.seen().len(), 1, "the deleted tool was not called");
    let gone = engine.http_tools().http_tool(DEFAULT_PROJECT, "lookup_order").await.unwrap_err();
    assert!(matches!(gone, EngineError::NotFound(_)), "{gone:?}");
}

#[tokio::test]
async fn names_stay_unique_across_tools_and_agents() {
    let dir = crate::support::test_db();
    let engine = engine_at(&db_url(&dir), false).await;
    let url = || "https://tools.example.com/call".to_owned();
    let admin = by("admin");
    let invalid = |e: EngineError| match e {
        EngineError::Invalid(m) => m,
        other => panic!("{other:?}"),
    };
    for (name, says) in [
        ("calculator", "name `calculator` is taken by a tool"),
        ("srv__echo", "must not contain `__`"),
        ("transfer_to_billing", "name `transfer_to_billing` is taken by a tool"),
        ("bad name", "name must be 1-64 characters"),
    ] {
        let err = invalid(
            engine.http_tools().create_http_tool(DEFAULT_PROJECT, tool(name, url(), true), &admin).await.unwrap_err(),
        );
        assert!(err.contains(says), "{name}: {err}");
    }
    let agent = runlens_engine::model::AgentInput {
        id: Some("helper".into()),
        spec: runlens_engine::model::AgentSpec { name: "math_helper".into(), ..Default::default() },
    };
    engine.agents().create_agent(DEFAULT_PROJECT, agent, &admin).await.unwrap();
    let err = invalid(
        engine
            .http_tools()
            .create_http_tool(DEFAULT_PROJECT, tool("math_helper", url(), true), &admin)
            .await
            .unwrap_err(),
    );
    assert!(err.starts_with("name `math_helper` is taken by a tool: the project's agent"), "{err}");
    // Another project may use the name, and its tools are its own.
    engine.http_tools().create_http_tool("other", tool("math_helper", url(), true), &admin).await.unwrap();
    engine.http_tools().create_http_tool(DEFAULT_PROJECT, tool("lookup", url(), true), &admin).await.unwrap();
    let err =
        engine.http_tools().create_http_tool(DEFAULT_PROJECT, tool("lookup", url(), true), &admin).await.unwrap_err();
    assert!(matches!(&err, EngineError::Conflict(m) if m.contains("another HTTP tool")), "{err:?}");
    // …and an agent cannot take an HTTP tool's name either.
    let agent = runlens_engine::model::AgentInput {
        id: None,
        spec: runlens_engine::model::AgentSpec { name: "lookup".into(), ..Default::default() },
    };
    let err = invalid(engine.agents().create_agent(DEFAULT_PROJECT, agent, &admin).await.unwrap_err());
    assert_eq!(err, "name `lookup` is taken by a tool");
    assert!(engine.http_tools().http_tool("other", "lookup").await.is_err(), "a project sees its own tools only");
    let page = engine.http_tools().list(DEFAULT_PROJECT, None, 0, 50).await.unwrap();
    assert_eq!(page.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["lookup"]);
}

#[tokio::test]
async fn cancelling_the_run_aborts_the_request() {
    let dir = crate::support::test_db();
    let engine = engine_at(&db_url(&dir), true).await;
    let rx = Receiver::start().await;
    let mut slow = tool("place_order", rx.url("/slow"), false);
    slow.timeout_ms = Some(120_000);
    engine.http_tools().create_http_tool(DEFAULT_PROJECT, slow, &by("admin")).await.unwrap();
    let (run, _) = engine.runs().create_run(calling(&["place_order"], json!({"id": "F-1"}))).await.unwrap();
    // Waits for the request to arrive (progress, not time).
    for _ in 0..2000 {
        if !rx.seen().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(rx.seen().len(), 1, "the receiver got the call");
    let cancelled = engine.runs().cancel(&run.id).await.unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    let call = &calls(&engine, &run.id).await["place_order"];
    assert_eq!(call.status, ToolCallStatus::Cancelled);
    let error = call.error.clone().unwrap();
    assert!(error.contains("the request was aborted, so the receiver may or may not have acted on it"), "{error}");
}

/// A crash while both calls are in flight: after the restart the idempotent
/// tool is called again (same idempotency key), the other is reported to
/// the model as interrupted and never repeated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_crash_only_idempotent_calls_are_made_again() {
    let dir = crate::support::test_db();
    let url = db_url(&dir);
    let rx = Arc::new(Receiver::start().await);
    let (u, r) = (url.clone(), rx.clone());
    let run_id = tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let id = rt.block_on(async {
            let engine = engine_at(&u, true).await;
            for new in
                [tool("fetch_quote", r.url("/hang-once/q"), true), tool("place_order", r.url("/hang-once/o"), false)]
            {
                engine.http_tools().create_http_tool(DEFAULT_PROJECT, new, &by("admin")).await.unwrap();
            }
            let (run, _) =
                engine.runs().create_run(calling(&["fetch_quote", "place_order"], json!({"id": "G-1"}))).await.unwrap();
            // Both requests arrived (progress, not time); the step is on record.
            for _ in 0..2000 {
                if r.seen().len() == 2 && !engine.runs().steps(&run.id).await.unwrap().is_empty() {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            run.id
        });
        rt.shutdown_background();
        id
    })
    .await
    .unwrap();
    assert_eq!(rx.seen().len(), 2, "both calls were in flight at the crash");

    let engine = engine_at(&url, true).await;
    engine.recover().await.unwrap();
    let run = engine.runs().wait_until_settled(&run_id, crate::support::SETTLE).await.unwrap();
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    let calls = calls(&engine, &run_id).await;
    assert_eq!(calls["fetch_quote"].result, Some(json!({"ok": true, "attempt": 2})));
    let order = calls["place_order"].error.clone().unwrap();
    assert!(order.contains("interrupted by a server restart"), "{order}");
    let seen = rx.seen();
    let keys = |path: &str| -> Vec<String> {
        let of = seen.iter().filter(|s| s.path == path);
        of.map(|s| s.headers["runlens-idempotency-key"].to_str().unwrap().to_owned()).collect()
    };
    let key = format!("{run_id}:{}", calls["fetch_quote"].id);
    assert_eq!(keys("/hang-once/q"), [key.clone(), key], "called again under the same key");
    assert_eq!(keys("/hang-once/o").len(), 1, "the call with effects is never repeated");
}
