//! Saved agents and trees of runs: sub-agent calls start child runs (in
//! parallel, waited for, paused with their parent), handoffs switch a run's
//! agent, limits on depth and fan-out, cancel cascades, and a crash while a
//! child runs.

use std::time::Duration;

use runlens_engine::model::{
    AgentInput, AgentSpec, ApprovalRequest, CreateRun, DecisionRequest, MessageBody, RunOutput, RunStatus,
    ToolCallStatus,
};
use runlens_engine::{Engine, EngineConfig};
use serde_json::{json, Value};

use crate::support::*;

const PROJECT: &str = "default";

async fn save(engine: &Engine, id: &str, spec: AgentSpec) -> runlens_engine::model::Agent {
    engine
        .agents()
        .create_agent(PROJECT, AgentInput { id: Some(id.into()), spec }, &by("ada"))
        .await
        .expect("agent saved")
}

fn spec(name: &str) -> AgentSpec {
    AgentSpec { name: name.into(), description: format!("The {name} agent."), ..AgentSpec::default() }
}

fn scripted_spec(name: &str, script: Value) -> AgentSpec {
    AgentSpec { model_settings: Some(json!({ "script": script })), ..spec(name) }
}

fn call(name: &str, args: Value) -> Value {
    json!({"name": name, "arguments": args})
}

fn from_agent(agent: &str, prompt: &str) -> CreateRun {
    CreateRun { agent_id: Some(agent.into()), initial_prompt: prompt.into(), ..CreateRun::default() }
}

#[tokio::test]
async fn an_agent_calls_two_sub_agents_in_parallel_and_gets_both_results() {
    let (engine, _dir) = engine().await;
    // Two helpers that compute with the calculator (the built-in model,
    // unscripted), whose model takes 200 ms a turn: run one after the other
    // they could not overlap (the engine alone finishes one within a
    // millisecond, the timestamps' precision).
    for name in ["adder", "multiplier"] {
        let slow = Some(json!({"latency_ms": 200}));
        save(&engine, name, AgentSpec { tools: vec!["calculator".into()], model_settings: slow, ..spec(name) }).await;
    }
    let script = json!([
        {"tool_calls": [call("adder", json!({"input": "2 + 3"})), call("multiplier", json!({"input": "6 * 7"}))]},
        {"text": "both answered"}
    ]);
    save(
        &engine,
        "boss",
        AgentSpec { agents: vec!["adder".into(), "multiplier".into()], ..scripted_spec("boss", script) },
    )
    .await;

    let run = run_to_end(&engine, from_agent("boss", "Ask both.")).await;
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    assert_eq!(run.result, Some(json!("both answered")));
    assert_eq!((run.agent_id.as_deref(), run.agent_version, run.child_count), (Some("boss"), Some(1), 2));

    let steps = engine.runs().steps(&run.id).await.unwrap();
    let calls = &steps[0].tool_calls;
    assert!(calls.iter().all(|c| c.status == ToolCallStatus::Succeeded), "{calls:?}");
    let children = engine.agents().children(&run.id).await.unwrap();
    assert_eq!(children.len(), 2);
    for (call, expected) in calls.iter().zip(["2 + 3 = 5", "6 * 7 = 42"]) {
        let child = children.iter().find(|c| Some(&c.id) == call.child_run_id.as_ref()).expect("child of the call");
        assert_eq!(child.status, RunStatus::Done);
        assert_eq!(child.parent_run_id.as_deref(), Some(run.id.as_str()));
        assert_eq!(child.parent_call_id.as_deref(), Some(call.id.as_str()));
        assert_eq!((child.root_run_id.as_str(), child.depth), (run.id.as_str(), 1));
        let answer = call.result.as_ref().and_then(Value::as_str).unwrap_or_default();
        assert!(answer.contains(expected), "{answer}");
    }
    // Both children were running at the same time: each started before the other ended.
    let (a, b) = (&children[0], &children[1]);
    assert!(a.started_at.unwrap() <= b.finished_at.unwrap() && b.started_at.unwrap() <= a.finished_at.unwrap());
    // Only root runs are listed by default.
    let listed = engine.runs().list_runs(&Default::default()).await.unwrap().runs;
    assert_eq!(listed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), [run.id.as_str()]);
    let all = runlens_engine::model::RunFilter { all: Some(true), ..Default::default() };
    assert_eq!(engine.runs().list_runs(&all).await.unwrap().runs.len(), 3);
    // Child runs are the tree's, not forks in the run's family.
    assert_eq!(engine.conversation().family(&run.id).await.unwrap().runs.len(), 1);
    assert_eq!(engine.conversation().family(&a.id).await.unwrap().runs.len(), 1);
    let tree = engine.agents().tree_usage(&run.id).await.unwrap();
    assert_eq!(tree.runs, 3);
    assert_eq!(tree.usage.requests, run.usage.requests + a.usage.requests + b.usage.requests);
}

#[tokio::test]
async fn a_childs_approval_pauses_the_chain_and_resumes_it() {
    let (engine, _dir) = engine().await;
    save(
        &engine,
        "careful",
        AgentSpec { tools: vec!["calculator".into()], approval: Some(ApprovalRequest::all()), ..spec("careful") },
    )
    .await;
    let script = json!([{"tool_calls": [call("careful", json!({"input": "3 * 3"}))]}, {"text": "done"}]);
    save(&engine, "lead", AgentSpec { agents: vec!["careful".into()], ..scripted_spec("lead", script) }).await;

    let (run, _) = engine.runs().create_run(from_agent("lead", "Go.")).await.unwrap();
    let parent = wait_for_status(&engine, &run.id, RunStatus::Paused).await;
    assert!(parent.interruptions.is_empty(), "the parent waits on its child, not on its own calls");
    let child = engine.agents().children(&run.id).await.unwrap().remove(0);
    let child = wait_for_status(&engine, &child.id, RunStatus::Paused).await;
    let pending = engine.approvals().pending_approvals(None).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].run_id, child.id);
    assert_eq!(pending[0].chain.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), [run.id.as_str()]);

    let call_id = child.interruptions[0].call_id.clone();
    engine
        .approvals()
        .approve(&child.id, &call_id, DecisionRequest::default(), &crate::support::approver(&engine, "ada").await)
        .await
        .unwrap();
    let done = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!(done.status, RunStatus::Done, "{:?}", done.failure_reason);
    let child = engine.runs().get_run(&child.id).await.unwrap();
    assert_eq!(child.status, RunStatus::Done);
    let answer = engine.runs().steps(&run.id).await.unwrap()[0].tool_calls[0].result.clone().unwrap();
    assert!(answer.as_str().unwrap_or_default().contains("3 * 3 = 9"), "{answer}");
}

#[tokio::test]
async fn a_handoff_switches_instructions_tools_and_model_and_is_a_step() {
    let (engine, _dir) = engine().await;
    let billing_script =
        json!([{"tool_calls": [call("calculator", json!({"expression": "10 * 3"}))]}, {"text": "Billed 30."}]);
    save(
        &engine,
        "billing",
        AgentSpec {
            system_prompt: Some("You handle billing.".into()),
            tools: vec!["calculator".into()],
            ..scripted_spec("billing", billing_script)
        },
    )
    .await;
    let triage_script = json!([{"tool_calls": [call("transfer_to_billing", json!({}))]}]);
    save(
        &engine,
        "triage",
        AgentSpec {
            system_prompt: Some("You route requests.".into()),
            handoffs: vec!["billing".into()],
            ..scripted_spec("triage", triage_script)
        },
    )
    .await;

    let run = run_to_end(&engine, from_agent("triage", "I was charged twice.")).await;
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    assert_eq!(run.result, Some(json!("Billed 30.")));
    assert_eq!((run.agent_id.as_deref(), run.current_agent.as_deref()), (Some("triage"), Some("billing")));
    assert_eq!(run.system_prompt.as_deref(), Some("You handle billing."));
    assert_eq!(run.tools, ["calculator"]);
    let steps = engine.runs().steps(&run.id).await.unwrap();
    let kinds: Vec<&str> = steps.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(kinds, ["model_turn", "handoff", "model_turn", "model_turn"]);
    assert!(steps[1].response.text().unwrap().contains("from triage to billing"));
    assert_eq!(steps[0].tool_calls[0].result, Some(json!({"assistant": "billing"})));
    // The transcript is kept across the handoff.
    let messages = engine.runs().messages(&run.id).await.unwrap();
    assert!(matches!(&messages[0].body, MessageBody::Human { message } if message == "I was charged twice."));
    // The agent after the handoff offers its own tools, not the handoff.
    assert_eq!(steps[2].request.tools.as_deref(), Some(&["calculator".to_owned()][..]));
    // Each model call shows the prompt it was sent, though the run's own
    // is now billing's; the handoff step called no model.
    let prompt = |call: runlens_engine::model::ModelCall| (call.system_prompt, call.system_prompt_known);
    let before = engine.traces().model_call(&run.id, 0, 200).await.unwrap();
    assert_eq!(prompt(before.clone()), (Some("You route requests.".to_owned()), true));
    assert_eq!(before.request_body["system_prompt"], "You route requests.");
    let after = engine.traces().model_call(&run.id, 3, 200).await.unwrap();
    assert_eq!(prompt(after.clone()), (Some("You handle billing.".to_owned()), true));
    assert_eq!(after.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["calculator"]);
    assert_eq!(steps[3].request.system_prompt, None, "recorded only when it changed");
    let handoff = engine.traces().model_call(&run.id, 1, 200).await.unwrap_err();
    assert!(matches!(handoff, runlens_engine::EngineError::Invalid(_)), "{handoff}");
}

#[tokio::test]
async fn depth_and_fan_out_are_limited_with_a_reason() {
    let dir = crate::support::test_db();
    let store = crate::support::open_store(&db_url(&dir)).await;
    let config = EngineConfig { max_depth: 2, max_children: 3, ..EngineConfig::default() };
    let engine = Engine::with_parts(store, test_tools(), runlens_engine::llm::ModelRegistry::with_builtin(), config);
    // An agent that calls itself: the built-in model calls `echo` whenever
    // the message names it, so each child calls the next.
    save(&engine, "echo", spec("echo")).await;
    let again = AgentSpec {
        agents: vec!["echo".into()],
        tree_budget: Some(runlens_engine::model::TreeBudget::default()),
        ..spec("echo")
    };
    engine.agents().update_agent(PROJECT, "echo", again, &by("ada")).await.unwrap();
    let run = run_to_end(&engine, from_agent("echo", "Ask echo.")).await;
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    let child = engine.agents().children(&run.id).await.unwrap().remove(0);
    let grandchild = engine.agents().children(&child.id).await.unwrap().remove(0);
    assert_eq!(grandchild.depth, 2);
    assert!(engine.agents().children(&grandchild.id).await.unwrap().is_empty());
    let refused = &engine.runs().steps(&grandchild.id).await.unwrap()[0].tool_calls[0];
    assert_eq!(refused.status, ToolCallStatus::Failed);
    assert!(refused.error.as_deref().unwrap().contains("at most 2 levels"), "{refused:?}");

    // Fan-out: five calls in one turn, three children at most.
    let calls: Vec<Value> = (0..5).map(|i| call("echo", json!({"input": format!("n{i}")}))).collect();
    save(
        &engine,
        "fan",
        AgentSpec {
            agents: vec!["echo".into()],
            ..scripted_spec("fan", json!([{"tool_calls": calls}, {"text": "ok"}]))
        },
    )
    .await;
    let run = run_to_end(&engine, from_agent("fan", "Fan out.")).await;
    assert_eq!(engine.agents().children(&run.id).await.unwrap().len(), 3);
    let failed: Vec<_> = (engine.runs().steps(&run.id).await.unwrap()[0].tool_calls.iter())
        .filter(|c| c.status == ToolCallStatus::Failed)
        .map(|c| c.error.clone().unwrap())
        .collect();
    assert_eq!(failed.len(), 2);
    assert!(failed[0].contains("more than 3 child runs"), "{failed:?}");
}

#[tokio::test]
async fn cancelling_a_parent_cancels_its_children() {
    let (engine, _dir) = engine().await;
    let slow = json!([{"tool_calls": [call("wait", json!({"seconds": 30}))]}, {"text": "late"}]);
    save(&engine, "sleeper", AgentSpec { tools: vec!["wait".into()], ..scripted_spec("sleeper", slow) }).await;
    let script =
        json!([{"tool_calls": [call("sleeper", json!({"input": "a"})), call("sleeper", json!({"input": "b"}))]}]);
    save(&engine, "waiter", AgentSpec { agents: vec!["sleeper".into()], ..scripted_spec("waiter", script) }).await;
    let (run, _) = engine.runs().create_run(from_agent("waiter", "Wait.")).await.unwrap();
    for _ in 0..500 {
        let children = engine.agents().children(&run.id).await.unwrap();
        if children.len() == 2 && children.iter().all(|c| c.status == RunStatus::Running) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let cancelled = engine.runs().cancel(&run.id).await.unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    for child in engine.agents().children(&run.id).await.unwrap() {
        let child = engine.runs().wait_until_settled(&child.id, SETTLE).await.unwrap();
        assert_eq!(child.status, RunStatus::Cancelled);
        assert!(matches!(child.output, Some(RunOutput::Error { .. })));
    }
}

#[tokio::test]
async fn cancelling_a_child_fails_its_call_and_the_parent_goes_on() {
    let (engine, _dir) = engine().await;
    let slow = json!([{"tool_calls": [call("wait", json!({"seconds": 30}))]}, {"text": "late"}]);
    save(&engine, "sleeper", AgentSpec { tools: vec!["wait".into()], ..scripted_spec("sleeper", slow) }).await;
    let script = json!([{"tool_calls": [call("sleeper", json!({"input": "a"}))]}, {"text": "went on"}]);
    save(&engine, "waiter", AgentSpec { agents: vec!["sleeper".into()], ..scripted_spec("waiter", script) }).await;
    let (run, _) = engine.runs().create_run(from_agent("waiter", "Wait.")).await.unwrap();
    let child = loop {
        if let Some(c) = engine.agents().children(&run.id).await.unwrap().pop() {
            break c;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    wait_for_status(&engine, &child.id, RunStatus::Running).await;
    engine.runs().cancel(&child.id).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.unwrap();
    assert_eq!((run.status, run.result.clone()), (RunStatus::Done, Some(json!("went on"))));
    let call = &engine.runs().steps(&run.id).await.unwrap()[0].tool_calls[0];
    assert_eq!(call.status, ToolCallStatus::Failed);
    assert!(call.error.as_deref().unwrap().contains("was cancelled"), "{call:?}");
}

#[tokio::test]
async fn runs_from_agents_take_versions_overrides_and_checked_input() {
    let (engine, _dir) = engine().await;
    let v1 = AgentSpec {
        system_prompt: Some("v1".into()),
        input_schema: Some(json!({"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}})),
        ..spec("weather")
    };
    save(&engine, "weather", v1.clone()).await;
    let v2 = AgentSpec { system_prompt: Some("v2".into()), ..v1 };
    assert_eq!(engine.agents().update_agent(PROJECT, "weather", v2, &by("ada")).await.unwrap().version, 2);

    let input = Some(json!({"city": "Oslo"}));
    let (run, _) = engine
        .runs()
        .create_run(CreateRun { input: input.clone(), ..from_agent("weather", "Forecast?") })
        .await
        .unwrap();
    assert_eq!((run.agent_version, run.system_prompt.as_deref()), (Some(2), Some("v2")));
    let old = CreateRun { agent_version: Some(1), max_turns: Some(3), input, ..from_agent("weather", "Forecast?") };
    let (run, _) = engine.runs().create_run(old).await.unwrap();
    assert_eq!((run.agent_version, run.system_prompt.as_deref(), run.max_turns), (Some(1), Some("v1"), 3));
    assert_eq!(run.agent_overrides, ["max_turns"]);

    let bad = CreateRun { input: Some(json!({"city": 5})), ..from_agent("weather", "Forecast?") };
    let err = engine.runs().create_run(bad).await.unwrap_err().to_string();
    assert!(err.contains("input/city"), "{err}");
    let missing = engine.runs().create_run(from_agent("nobody", "Hi")).await.unwrap_err().to_string();
    assert!(missing.contains("no agent `nobody`"), "{missing}");
    let no_version = CreateRun { agent_version: Some(9), ..from_agent("weather", "Hi") };
    assert!(engine.runs().create_run(no_version).await.unwrap_err().to_string().contains("no version 9"));
}

#[tokio::test]
async fn reasoning_traces_put_a_reason_on_each_call() {
    let (engine, _dir) = engine().await;
    let req = CreateRun {
        initial_prompt: "What is 4 * 5?".into(),
        tools: Some(vec!["calculator".into()]),
        reasoning_traces: Some(true),
        ..CreateRun::default()
    };
    let run = run_to_end(&engine, req).await;
    let steps = engine.runs().steps(&run.id).await.unwrap();
    let call = &steps[0].tool_calls[0];
    assert_eq!(call.arguments, json!({"expression": "4 * 5"}), "the reason is not an argument");
    assert!(call.reasoning.as_deref().unwrap().contains("4 * 5"), "{call:?}");
}

#[tokio::test]
async fn a_scripted_calls_own_reasoning_is_its_reason_else_the_turns_text() {
    let (engine, _dir) = engine().await;
    let script = json!([
        {"text": "Two sums.", "tool_calls": [
            {"name": "calculator", "arguments": {"expression": "1+1"}, "reasoning": "the first sum"},
            {"name": "calculator", "arguments": {"expression": "2+2"}},
        ]},
        {"text": "2 and 4."},
    ]);
    let req = CreateRun { tools: Some(vec!["calculator".into()]), ..scripted(script) };
    let run = run_to_end(&engine, req).await;
    let steps = engine.runs().steps(&run.id).await.unwrap();
    let reasons: Vec<Option<&str>> = steps[0].tool_calls.iter().map(|c| c.reasoning.as_deref()).collect();
    assert_eq!(reasons, [Some("the first sum"), Some("Two sums.")]);
    // The transcript's invocations keep a call's own reason, not the text again.
    let messages = engine.runs().messages(&run.id).await.unwrap();
    let Some(MessageBody::Agent { invocations, .. }) = messages.iter().map(|m| &m.body).find(|b| b.kind() == "agent")
    else {
        panic!("an agent message: {messages:?}")
    };
    let kept: Vec<Option<&str>> = invocations.iter().map(|i| i.reasoning.as_deref()).collect();
    assert_eq!(kept, [Some("the first sum"), None]);
    // A reasoning that is not text is a script error at creation.
    let bad = json!([{"tool_calls": [{"name": "calculator", "reasoning": 7}]}]);
    let err = engine.runs().create_run(CreateRun { tools: Some(vec!["calculator".into()]), ..scripted(bad) }).await;
    assert!(err.unwrap_err().to_string().contains("`reasoning` must be a string"));
}

#[tokio::test]
async fn input_items_seed_the_transcript_and_bad_ones_are_refused() {
    let (engine, _dir) = engine().await;
    let items: Vec<MessageBody> = serde_json::from_value(json!([
        {"type": "human", "data": {"message": "Earlier question"}},
        {"type": "agent", "data": {"invocations": [{"id": "c1", "toolName": "calculator", "input": {"expression": "1+1"}}]}},
        {"type": "invocation-result", "data": {"id": "c1", "toolName": "calculator", "resultType": "resolution", "result": {"value": 2}}},
        {"type": "agent", "data": {"message": "It is 2."}}
    ]))
    .unwrap();
    let req = CreateRun {
        input_items: Some(items.clone()),
        ..CreateRun { initial_prompt: "And now?".into(), ..Default::default() }
    };
    let run = run_to_end(&engine, req).await;
    let messages = engine.runs().messages(&run.id).await.unwrap();
    assert_eq!(messages.len(), 6, "four items, the prompt and the answer");
    assert_eq!(messages[4].body, MessageBody::Human { message: "And now?".into() });
    assert!(matches!(run.output, Some(RunOutput::LastMessage { .. })), "{:?}", run.output);

    let unanswered =
        CreateRun { input_items: Some(items[..2].to_vec()), initial_prompt: "x".into(), ..Default::default() };
    let err = engine.runs().create_run(unanswered).await.unwrap_err().to_string();
    assert!(err.contains("has no invocation-result"), "{err}");
    let orphan =
        CreateRun { input_items: Some(vec![items[2].clone()]), initial_prompt: "x".into(), ..Default::default() };
    let err = engine.runs().create_run(orphan).await.unwrap_err().to_string();
    assert!(err.contains("input_items[0]"), "{err}");
}

/// Starts the tree in an engine on its own runtime, waits until the child
/// is in the middle of its slow call, then kills that runtime like a crash.
fn start_tree_then_crash(url: &str) -> String {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let id = rt.block_on(async {
        let engine = engine_at(url).await;
        let slow = json!([{"tool_calls": [call("wait", json!({"seconds": 1}))]}, {"text": "child done"}]);
        save(&engine, "worker", AgentSpec { tools: vec!["wait".into()], ..scripted_spec("worker", slow) }).await;
        let script = json!([{"tool_calls": [call("worker", json!({"input": "go"}))]}, {"text": "tree done"}]);
        save(&engine, "manager", AgentSpec { agents: vec!["worker".into()], ..scripted_spec("manager", script) }).await;
        let (run, _) = engine.runs().create_run(from_agent("manager", "Start.")).await.unwrap();
        for _ in 0..500 {
            if let Some(child) = engine.agents().children(&run.id).await.unwrap().pop() {
                if engine.runs().steps(&child.id).await.unwrap().len() == 1 {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        run.id
    });
    rt.shutdown_background();
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_interrupted_while_a_child_runs_finishes_after_restart_without_repeating_a_step() {
    let dir = crate::support::test_db();
    let url = db_url(&dir);
    let u = url.clone();
    let id = tokio::task::spawn_blocking(move || start_tree_then_crash(&u)).await.unwrap();

    let engine = engine_at(&url).await;
    let child = engine.agents().children(&id).await.unwrap().pop().expect("the child was started");
    assert_eq!(
        engine.runs().get_run(&id).await.unwrap().status,
        RunStatus::Running,
        "the crash left the parent waiting"
    );
    engine.recover().await.unwrap();
    let run = engine.runs().wait_until_settled(&id, SETTLE).await.unwrap();
    assert_eq!(
        (run.status, run.result.clone()),
        (RunStatus::Done, Some(json!("tree done"))),
        "{:?}",
        run.failure_reason
    );
    let child = engine.runs().get_run(&child.id).await.unwrap();
    let parent_steps = engine.runs().steps(&id).await.unwrap();
    assert_eq!(child.status, RunStatus::Done, "{child:?}\n{parent_steps:?}");
    assert_eq!(engine.agents().children(&id).await.unwrap().len(), 1, "no second child");
    for run_id in [&id, &child.id] {
        let steps = engine.runs().steps(run_id).await.unwrap();
        assert_eq!(steps.len(), 2, "one step per turn, none repeated: {steps:?}");
        let agent_turns =
            engine.runs().messages(run_id).await.unwrap().iter().filter(|m| m.body.kind() == "agent").count();
        assert_eq!(agent_turns, 2);
    }
}

#[tokio::test]
async fn agent_specs_are_checked_and_names_are_unique() {
    let (engine, _dir) = engine().await;
    save(&engine, "a1", spec("alpha")).await;
    let taken = engine.agents().create_agent(PROJECT, AgentInput { id: None, spec: spec("alpha") }, &by("ada")).await;
    assert!(taken.unwrap_err().to_string().contains("named `alpha`"));
    for (bad, needle) in [
        (AgentSpec { name: "Bad Name".into(), ..AgentSpec::default() }, "name must be"),
        (AgentSpec { tools: vec!["nope".into()], ..spec("x") }, "unknown tool `nope`"),
        (AgentSpec { agents: vec!["ghost".into()], ..spec("x") }, "no agent `ghost`"),
        (AgentSpec { input_schema: Some(json!({"type": 5})), ..spec("x") }, "input_schema"),
        (spec("calculator"), "taken by a tool"),
    ] {
        let err =
            engine.agents().create_agent(PROJECT, AgentInput { id: None, spec: bad }, &by("ada")).await.unwrap_err();
        assert!(err.to_string().contains(needle), "{err} / {needle}");
    }
    let versions = engine.agents().agent_versions(PROJECT, "a1", None, 10).await.unwrap();
    assert_eq!(versions.len(), 1);
    assert!(engine.agents().agent_in("other", "a1").await.is_err(), "agents are per project");
}

/// The id a child run had before child ids were keyed: derived from the
/// parent's id and the call's alone, so anyone who knew a client-chosen
/// parent id could compute it.
fn unkeyed_child_id(run_id: &str, call_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{run_id}\u{0}{call_id}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid().to_string()
}

#[tokio::test]
async fn another_project_cannot_take_over_a_sub_agent_call() {
    let (engine, _dir) = engine().await;
    engine.identity().create_project("other", &runlens_engine::model::Actor::system()).await.unwrap();
    save(&engine, "helper", spec("helper")).await;
    let script = json!([{"tool_calls": [call("helper", json!({"input": "hi"}))]}, {"text": "done"}]);
    save(&engine, "boss", AgentSpec { agents: vec!["helper".into()], ..scripted_spec("boss", script) }).await;
    let squat = |id: String| CreateRun {
        id: Some(id),
        initial_prompt: "not yours".into(),
        model_settings: Some(json!({"script": [{"text": "the other project's result"}]})),
        ..CreateRun::default()
    };
    let parent = |id: &str| CreateRun { id: Some(id.into()), ..from_agent("boss", "Ask the helper.") };

    // Another project creates a run first under the id the parent's (known)
    // id and the call's would give the child: the call still gets its own child.
    let predicted = unkeyed_child_id("victim", "call_0_0");
    engine.runs().create_run_in(squat(predicted.clone()), "other", None).await.unwrap();
    let (run, _) = engine.runs().create_run(parent("victim")).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.expect("the parent does not wait forever");
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    let agent_call = engine.runs().steps(&run.id).await.unwrap()[0].tool_calls[0].clone();
    assert_eq!(agent_call.status, ToolCallStatus::Succeeded, "{agent_call:?}");
    let child = engine.runs().get_run(agent_call.child_run_id.as_deref().unwrap()).await.unwrap();
    assert_ne!(child.id, predicted);
    assert_eq!((child.project.as_str(), child.parent_run_id.as_deref()), ("default", Some("victim")));
    let squatter = engine.runs().get_run(&predicted).await.unwrap();
    assert_eq!((squatter.project.as_str(), squatter.parent_run_id), ("other", None));

    // Should a run hold the child's id anyway, the call fails and says so;
    // the parent goes on instead of waiting on a run that is not its child.
    let key = engine.store().server_secret("run_ids", "unused").await.unwrap();
    let keyed = runlens_engine::identity::keyed_id(&key, &["child run", "default", "victim-2", "call_0_0"]);
    engine.runs().create_run_in(squat(keyed.clone()), "other", None).await.unwrap();
    let (run, _) = engine.runs().create_run(parent("victim-2")).await.unwrap();
    let run = engine.runs().wait_until_settled(&run.id, SETTLE).await.expect("the parent does not wait forever");
    assert_eq!(run.status, RunStatus::Done, "{:?}", run.failure_reason);
    let agent_call = engine.runs().steps(&run.id).await.unwrap()[0].tool_calls[0].clone();
    assert_eq!(agent_call.status, ToolCallStatus::Failed, "{agent_call:?}");
    assert!(agent_call.error.as_deref().unwrap().contains("could not start"), "{agent_call:?}");
    assert!(engine.agents().children(&run.id).await.unwrap().is_empty());
    assert_eq!(engine.runs().get_run(&keyed).await.unwrap().parent_run_id, None);
}
