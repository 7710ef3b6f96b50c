//! Tree budgets: the whole tree of runs under a root run is bounded in runs,
//! depth, model turns and tokens (the server's bounds, lowered by the root
//! agent's `tree_budget`); a call past a bound fails with the reason and its
//! run goes on; the counters hold under concurrent children, on one store
//! handle or several; an agent cannot save a cycle of sub-agent calls
//! without a budget.

use std::sync::Arc;
use std::time::Duration;

use runlens_engine::llm::ModelRegistry;
use runlens_engine::model::{
    AgentInput, AgentSpec, CreateRun, Run, RunStatus, ToolCall, ToolCallStatus, TreeBudget, TreeLimits,
};
use runlens_engine::{Engine, EngineConfig, EngineError, RunlensConfig};
use serde_json::{json, Value};

use crate::support::*;

const PROJECT: &str = "default";
/// A whole tree settles within this, even on a busy machine.
const TREE_SETTLE: Duration = Duration::from_secs(120);

async fn save(engine: &Engine, id: &str, spec: AgentSpec) {
    engine
        .agents()
        .create_agent(PROJECT, AgentInput { id: Some(id.into()), spec }, &by("ada"))
        .await
        .expect("agent saved");
}

/// Saves an agent that lists itself: first without its links (an agent can
/// only list agents that exist), then as `spec`.
async fn save_self_calling(engine: &Engine, id: &str, spec: AgentSpec) {
    save(engine, id, AgentSpec { agents: Vec::new(), ..spec.clone() }).await;
    engine.agents().update_agent(PROJECT, id, spec, &by("ada")).await.expect("agent saved");
}

fn scripted_spec(name: &str, script: Value) -> AgentSpec {
    AgentSpec {
        name: name.into(),
        description: format!("The {name} agent."),
        model_settings: Some(json!({ "script": script })),
        ..AgentSpec::default()
    }
}

fn call(name: &str, args: Value) -> Value {
    json!({"name": name, "arguments": args})
}

fn from_agent(agent: &str) -> CreateRun {
    CreateRun { agent_id: Some(agent.into()), initial_prompt: "Go.".into(), ..CreateRun::default() }
}

fn engine_with(store: Arc<dyn runlens_engine::store::Store>, config: EngineConfig) -> Engine {
    Engine::with_parts(store, test_tools(), ModelRegistry::with_builtin(), config)
}

async fn settle(engine: &Engine, req: CreateRun) -> Run {
    let (run, _) = engine.runs().create_run(req).await.expect("create run");
    engine.runs().wait_until_settled(&run.id, TREE_SETTLE).await.expect("the tree settles")
}

/// Every run of the tree under `root` (breadth first), and every agent call
/// of them that failed.
async fn tree(engine: &Engine, root: &Run) -> (Vec<Run>, Vec<ToolCall>) {
    let (mut runs, mut failed, mut next) = (Vec::new(), Vec::new(), vec![root.clone()]);
    while let Some(run) = next.pop() {
        for step in engine.runs().steps(&run.id).await.unwrap() {
            failed.extend(step.tool_calls.into_iter().filter(|c| c.status == ToolCallStatus::Failed));
        }
        next.extend(engine.agents().children(&run.id).await.unwrap());
        runs.push(run);
    }
    (runs, failed)
}

/// The attack of issue 34 (item 4): an agent that lists itself as a
/// sub-agent and calls itself 8 times a turn. Without tree budgets the
/// engine's per-run (32 children) and depth (4) limits let it start
/// 1 + 8 + 64 + 512 + 4,096 = 4,681 runs from one request.
fn swarm() -> AgentSpec {
    let calls: Vec<Value> = (0..8).map(|i| call("swarm", json!({"input": format!("n{i}")}))).collect();
    AgentSpec {
        agents: vec!["swarm".into()],
        tree_budget: Some(TreeBudget::default()),
        ..scripted_spec("swarm", json!([{"tool_calls": calls}, {"text": "ok"}]))
    }
}

#[tokio::test]
async fn a_self_calling_agent_with_eight_calls_a_turn_stays_within_the_default_256_runs() {
    let (engine, _db) = engine().await;
    save_self_calling(&engine, "swarm", swarm()).await;
    let started = std::time::Instant::now();
    let root = settle(&engine, from_agent("swarm")).await;
    let (runs, failed) = tree(&engine, &root).await;
    println!(
        "issue 34 item 4: one request to an agent calling itself 8 times a turn now makes {} runs in {:.1?} \
         (4,681 before tree budgets); {} calls were refused",
        runs.len(),
        started.elapsed(),
        failed.len()
    );
    assert_eq!(root.status, RunStatus::Done, "{:?}", root.failure_reason);
    assert_eq!(runs.len(), 256, "the tree stops at its default bound");
    assert_eq!(engine.agents().tree_usage(&root.id).await.unwrap().runs, 256);
    // Every call past the bound failed, with the reason the model sees (a
    // run that got deep early may meet the depth limit first).
    let past_bound = "the run tree has started 256 runs, all its budget allows";
    let refused: Vec<&str> = failed.iter().map(|c| c.error.as_deref().unwrap()).collect();
    assert!(refused.iter().any(|e| e.contains(past_bound)), "{refused:?}");
    for error in &refused {
        assert!(error.contains(past_bound) || error.contains("at most 4 levels"), "{error}");
    }
    // And the runs that made them went on to their answer.
    assert!(runs.iter().all(|r| r.status == RunStatus::Done), "every run finished");
}

#[tokio::test]
async fn the_server_bound_and_a_lower_agent_bound_are_honoured_and_an_agent_cannot_raise_it() {
    let db = test_db();
    let store = open_store(&db_url(&db)).await;
    let limits = TreeLimits { runs: 20, ..TreeLimits::default() };
    let engine = engine_with(store, EngineConfig { tree: limits, ..EngineConfig::default() });
    save_self_calling(&engine, "swarm", swarm()).await;
    let root = settle(&engine, from_agent("swarm")).await;
    assert_eq!(engine.agents().tree_usage(&root.id).await.unwrap().runs, 20, "the server's bound");

    // An agent's budget lowers the server's…
    let low = AgentSpec { tree_budget: Some(TreeBudget { runs: Some(5), ..TreeBudget::default() }), ..swarm() };
    engine.agents().update_agent(PROJECT, "swarm", low, &by("ada")).await.unwrap();
    let root = settle(&engine, from_agent("swarm")).await;
    assert_eq!(engine.agents().tree_usage(&root.id).await.unwrap().runs, 5, "the agent's lower bound");
    let (_, failed) = tree(&engine, &root).await;
    assert!(failed.iter().any(|c| c.error.as_deref().unwrap().contains("started 5 runs")), "{failed:?}");

    // …and never raises it.
    let high = AgentSpec { tree_budget: Some(TreeBudget { runs: Some(1000), ..TreeBudget::default() }), ..swarm() };
    engine.agents().update_agent(PROJECT, "swarm", high, &by("ada")).await.unwrap();
    let root = settle(&engine, from_agent("swarm")).await;
    assert_eq!(engine.agents().tree_usage(&root.id).await.unwrap().runs, 20, "the server's bound still");
}

#[test]
fn runlens_toml_sets_the_servers_tree_bounds() {
    let config = RunlensConfig::from_toml("[tree_budget]\nruns = 40\ndepth = 9\nturns = 300\ntokens = 50000").unwrap();
    let limits = config.tree_limits(6);
    assert_eq!(limits, TreeLimits { runs: 40, depth: 6, turns: Some(300), tokens: Some(50_000) });
    // Without the section: the defaults, with the depth of `--max-agent-depth`.
    let limits = RunlensConfig::from_toml("").unwrap().tree_limits(7);
    assert_eq!(limits, TreeLimits { depth: 7, ..TreeLimits::default() });
    assert_eq!((limits.runs, limits.turns, limits.tokens), (256, Some(2560), None));
    for bad in ["[tree_budget]\nruns = 0", "[tree_budget]\ndepth = 65", "[tree_budget]\nrun = 5"] {
        assert!(RunlensConfig::from_toml(bad).is_err(), "{bad}");
    }
}

#[tokio::test]
async fn a_call_deeper_than_the_trees_depth_fails_with_the_reason_and_its_run_goes_on() {
    let (engine, _db) = engine().await;
    let budget = TreeBudget { depth: Some(2), ..TreeBudget::default() };
    let spec = AgentSpec {
        agents: vec!["diver".into()],
        tree_budget: Some(budget),
        ..scripted_spec("diver", json!([{"tool_calls": [call("diver", json!({"input": "down"}))]}, {"text": "up"}]))
    };
    save_self_calling(&engine, "diver", spec).await;
    let root = settle(&engine, from_agent("diver")).await;
    let (runs, failed) = tree(&engine, &root).await;
    assert_eq!(runs.iter().map(|r| r.depth).max(), Some(2));
    assert_eq!(runs.len(), 3);
    let [refused] = failed.as_slice() else { panic!("one refused call: {failed:?}") };
    let error = refused.error.as_deref().unwrap();
    assert!(error.contains("would be 3 levels below the root, and the run tree's budget allows 2"), "{error}");
    assert!(runs.iter().all(|r| r.status == RunStatus::Done && r.result == Some(json!("up"))));
}

/// A worker taking four turns of calculator calls before its answer.
fn worker() -> AgentSpec {
    let turn = json!({"tool_calls": [call("calculator", json!({"expression": "1 + 1"}))]});
    AgentSpec {
        tools: vec!["calculator".into()],
        ..scripted_spec("worker", json!([turn, turn, turn, turn, {"text": "worked"}]))
    }
}

/// A boss calling the worker on each of its first two turns, with `budget`.
fn boss(budget: TreeBudget) -> AgentSpec {
    let turn = json!({"tool_calls": [call("worker", json!({"input": "work"}))]});
    AgentSpec {
        agents: vec!["worker".into()],
        tree_budget: Some(budget),
        ..scripted_spec("boss", json!([turn, turn, {"text": "done"}]))
    }
}

#[tokio::test]
async fn a_child_stops_when_the_tree_has_no_turns_left_and_later_calls_are_refused() {
    let (engine, _db) = engine().await;
    save(&engine, "worker", worker()).await;
    save(&engine, "boss", boss(TreeBudget { turns: Some(3), ..TreeBudget::default() })).await;
    let root = settle(&engine, from_agent("boss")).await;
    // The root goes on to its answer: its own turns are not stopped.
    assert_eq!((root.status, root.result.clone()), (RunStatus::Done, Some(json!("done"))));
    let steps = engine.runs().steps(&root.id).await.unwrap();
    // Turns: the root's first, then the worker's two; its third is refused.
    let first = &steps[0].tool_calls[0];
    let child = engine.runs().get_run(first.child_run_id.as_deref().unwrap()).await.unwrap();
    assert_eq!((child.status, child.step_count), (RunStatus::Failed, 2));
    let reason = child.failure_reason.as_deref().unwrap();
    assert!(reason.contains("the run tree's runs have taken 3 model turns, all its budget allows (3)"), "{reason}");
    let error = first.error.as_deref().unwrap();
    assert!(error.contains("failed: stopped: the run tree's runs have taken 3 model turns"), "{error}");
    // The root's second call starts nothing: the tree has no turns left.
    let second = &steps[1].tool_calls[0];
    assert_eq!((second.status, second.child_run_id.as_deref()), (ToolCallStatus::Failed, None));
    let error = second.error.as_deref().unwrap();
    assert!(error.starts_with("`worker` was not called: the run tree's runs have taken 4 model turns"), "{error}");
    assert_eq!(engine.agents().children(&root.id).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_child_stops_when_the_tree_has_no_tokens_left_and_later_calls_are_refused() {
    let (engine, _db) = engine().await;
    save(&engine, "worker", worker()).await;
    // The tokens of the root's first turn, from a tree without a bound.
    save(&engine, "boss", boss(TreeBudget::default())).await;
    let unbounded = settle(&engine, from_agent("boss")).await;
    let first_turn = engine.runs().steps(&unbounded.id).await.unwrap()[0].usage.total_tokens;
    assert!(first_turn > 0);
    // One token more: the worker starts and takes one turn, which uses the rest.
    let budget = TreeBudget { tokens: Some(first_turn + 1), ..TreeBudget::default() };
    engine.agents().update_agent(PROJECT, "boss", boss(budget), &by("ada")).await.unwrap();
    let root = settle(&engine, from_agent("boss")).await;
    assert_eq!((root.status, root.result.clone()), (RunStatus::Done, Some(json!("done"))));
    let steps = engine.runs().steps(&root.id).await.unwrap();
    let first = &steps[0].tool_calls[0];
    let child = engine.runs().get_run(first.child_run_id.as_deref().unwrap()).await.unwrap();
    assert_eq!((child.status, child.step_count), (RunStatus::Failed, 1));
    let reason = child.failure_reason.as_deref().unwrap();
    assert!(reason.contains(&format!("tokens, all its budget allows ({})", first_turn + 1)), "{reason}");
    let error = steps[1].tool_calls[0].error.as_deref().unwrap();
    assert!(error.starts_with("`worker` was not called: the run tree's runs have used"), "{error}");
}

#[tokio::test]
async fn concurrent_children_of_one_turn_cannot_pass_the_run_bound() {
    let (engine, _db) = engine().await;
    let slow = Some(json!({"latency_ms": 50}));
    save(&engine, "leaf", AgentSpec { model_settings: slow, ..scripted_spec("leaf", json!([{"text": "leaf"}])) }).await;
    // 30 calls in one turn start their children at the same time.
    let calls: Vec<Value> = (0..30).map(|i| call("leaf", json!({"input": format!("n{i}")}))).collect();
    let budget = TreeBudget { runs: Some(11), ..TreeBudget::default() };
    let fan = AgentSpec {
        agents: vec!["leaf".into()],
        tree_budget: Some(budget),
        ..scripted_spec("fan", json!([{"tool_calls": calls}, {"text": "ok"}]))
    };
    save(&engine, "fan", fan).await;
    let root = settle(&engine, from_agent("fan")).await;
    assert_eq!(engine.agents().children(&root.id).await.unwrap().len(), 10);
    let calls = &engine.runs().steps(&root.id).await.unwrap()[0].tool_calls;
    assert_eq!(calls.iter().filter(|c| c.status == ToolCallStatus::Failed).count(), 20);
}

/// The counters themselves, raced from several store handles on one
/// database (as several servers on one PostgreSQL database would): of 200
/// concurrent takes, exactly the bound's are let through.
#[tokio::test]
async fn a_race_of_takes_from_several_store_handles_cannot_pass_the_bound() {
    let db = test_db();
    let url = db_url(&db);
    let stores = [open_store(&url).await, open_store(&url).await, open_store(&url).await];
    let limits = TreeLimits { runs: 50, depth: 4, turns: Some(70), tokens: None };
    stores[0].trees().open_tree("race-root", &limits).await.unwrap();
    stores[1].trees().open_tree("race-root", &TreeLimits::default()).await.unwrap(); // left as it was
    let takes = (0..200).map(|i| {
        let store = stores[i % stores.len()].clone();
        tokio::spawn(async move {
            let run = store.trees().take_tree_run("race-root", 1).await.unwrap();
            let turn = store.trees().take_tree_turn("race-root", true).await.unwrap();
            (run, turn)
        })
    });
    let results: Vec<(bool, bool)> = futures::future::join_all(takes).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(results.iter().filter(|(run, _)| *run).count(), 49, "the root is the 50th run");
    assert_eq!(results.iter().filter(|(_, turn)| *turn).count(), 70);
    let count = stores[2].trees().tree("race-root").await.unwrap().unwrap();
    assert_eq!((count.runs, count.turns, count.limits), (50, 70, limits));
    // A turn of the root itself is counted past the bound, a child's is not.
    assert!(stores[0].trees().take_tree_turn("race-root", false).await.unwrap());
    assert!(!stores[0].trees().take_tree_turn("race-root", true).await.unwrap());
    assert!(!stores[0].trees().take_tree_run("race-root", 5).await.unwrap(), "deeper than the tree's depth");
    assert!(!stores[0].trees().take_tree_run("no-such-tree", 1).await.unwrap());
}

#[tokio::test]
async fn an_agent_that_can_call_itself_is_refused_without_a_tree_budget_naming_the_cycle() {
    let (engine, _db) = engine().await;
    let plain = |name: &str| AgentSpec { name: name.into(), ..AgentSpec::default() };
    save(&engine, "a", plain("alpha")).await;
    save(&engine, "b", AgentSpec { agents: vec!["a".into()], ..plain("beta") }).await;
    let invalid = |r: Result<runlens_engine::model::Agent, EngineError>| match r {
        Err(EngineError::Invalid(message)) => message,
        other => panic!("expected a refusal, got {other:?}"),
    };
    // Itself.
    let itself = AgentSpec { agents: vec!["a".into()], ..plain("alpha") };
    let message = invalid(engine.agents().update_agent(PROJECT, "a", itself.clone(), &by("ada")).await);
    assert!(message.contains("agents: `alpha` → `alpha` is a cycle of sub-agent calls"), "{message}");
    assert!(message.contains("tree_budget"), "{message}");
    // Through another agent: alpha → beta → alpha.
    let through = AgentSpec { agents: vec!["b".into()], ..plain("alpha") };
    let message = invalid(engine.agents().update_agent(PROJECT, "a", through.clone(), &by("ada")).await);
    assert!(message.contains("`alpha` → `beta` → `alpha`"), "{message}");
    // A new agent can close no cycle (nothing lists it yet); nothing was saved above.
    assert_eq!(engine.agents().agent_in(PROJECT, "a").await.unwrap().version, 1);
    // With an explicit budget the cycle is allowed (its trees are bounded).
    for spec in [itself, through] {
        let budgeted = AgentSpec { tree_budget: Some(TreeBudget::default()), ..spec };
        engine.agents().update_agent(PROJECT, "a", budgeted, &by("ada")).await.unwrap();
    }
    // A budget out of bounds is refused, naming the field.
    let huge = AgentSpec { tree_budget: Some(TreeBudget { runs: Some(0), ..TreeBudget::default() }), ..plain("gamma") };
    let message = invalid(engine.agents().create_agent(PROJECT, AgentInput { id: None, spec: huge }, &by("ada")).await);
    assert!(message.contains("tree_budget.runs must be between 1 and 100000, not 0"), "{message}");
}
